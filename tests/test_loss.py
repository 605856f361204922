"""loss.py: the clipped loss, the k3 KL, log-probs and gradient accumulation, on small tensors
and a tiny random model."""
import contextlib
import math

import pytest
from conftest import full_args
import torch

import loss
from sample import Sample
import fast.update as fast_update
from fast.update import SharedPrompt, logprobs_from, prompt_sets
from loss import clipped_surrogate, grpo_loss, k3_kl, pad_batch, policy_update, token_logprobs


def load_model(path, device):
    from policy import load_model  # transformers: only for the tests that need a model
    return load_model(path, device)


def test_k3_kl_by_hand():
    # pi = 0.5, pi_ref = 0.25: d = ln 0.5, exp(d) - d - 1 = 0.5 + 0.693147 - 1 = 0.193147
    kl = k3_kl(torch.tensor([math.log(0.5), math.log(0.3)]), torch.tensor([math.log(0.25), math.log(0.3)]))
    assert torch.allclose(kl, torch.tensor([0.193147, 0.0]), atol=1e-6)


def test_clipped_surrogate_by_hand():
    logp = torch.log(torch.tensor([1.5, 1.5, 0.5, 0.5, 1.0]))
    old = torch.zeros(5)
    adv = torch.tensor([1.0, -1.0, 1.0, -1.0, 2.0])
    obj, clipped = clipped_surrogate(logp, old, adv, eps_low=0.2, eps_high=0.2)
    # r=1.5,A=1 -> min(1.5, 1.2)=1.2 clipped; r=1.5,A=-1 -> min(-1.5,-1.2)=-1.5;
    # r=.5,A=1 -> min(.5,.8)=.5; r=.5,A=-1 -> min(-.5,-.8)=-.8 clipped; r=1,A=2 -> 2
    assert torch.allclose(obj, torch.tensor([1.2, -1.5, 0.5, -0.8, 2.0]), atol=1e-6)
    assert clipped.tolist() == [1, 0, 0, 1, 0]
    obj, _ = clipped_surrogate(logp, old, adv, eps_low=0.2, eps_high=0.28)  # asymmetric clip
    assert torch.allclose(obj[0], torch.tensor(1.28))


def test_padding_never_inferred_from_ids():
    # a real token equal to the pad/eos id (2 for the bundled tokenizer) inside a sequence must
    # keep attention and its mask
    s = Sample(ids=[1, 2, 3], mask=[0, 1, 1], adv=[0, 1.0, 1.0])
    ids, attn, mask, adv = pad_batch([s, Sample(ids=[1], mask=[0], adv=[0])], "cpu")
    assert attn.tolist() == [[1, 1, 1], [1, 0, 0]] and mask.tolist() == [[0, 1, 1], [0, 0, 0]]


def _args(**kw):
    """A run's whole arguments (conftest.full_args): micro-batch 4, no gradient clip, fp32."""
    return full_args(**{"micro_batch_size": 4, "max_grad_norm": 1e9, "bf16": False, **kw})


@pytest.mark.parametrize("loss_type,want", [("token", 9.5 / 15), ("seq", 0.5)])
def test_loss_value_and_micro_batches_give_the_full_batch_gradient(tiny_model_dir, loss_type, want):
    model, _ = load_model(tiny_model_dir, "cpu")
    g = torch.Generator().manual_seed(1)
    samples = []
    for n, a in ((5, 0.5), (9, -0.5), (7, -1.5)):  # 3, 7 and 5 trained tokens
        ids = torch.randint(0, 1000, (n,), generator=g).tolist()
        samples.append(Sample(ids=ids, mask=[0, 0] + [1] * (n - 2), adv=[0, 0] + [a] * (n - 2)))
    # mu = 1: ratio = 1, so loss = -mean(A). token: -(3*.5 - 7*.5 - 5*1.5)/15; seq: -(.5 - .5 - 1.5)/3
    stats = {}
    for mb in (1, 3):
        opt = torch.optim.SGD(model.parameters(), lr=0.0)  # lr 0: weights stay, gradients are measured
        stats[mb] = policy_update(model, opt, samples, _args(micro_batch_size=mb, loss_type=loss_type))
    assert stats[1]["loss"] == pytest.approx(want, rel=1e-5)
    assert stats[3]["loss"] == pytest.approx(want, rel=1e-5)
    assert stats[1]["grad_norm"] == pytest.approx(stats[3]["grad_norm"], rel=1e-4) and stats[1]["grad_norm"] > 0
    assert stats[1]["clip_fraction"] == 0 and stats[1]["kl"] == 0


@pytest.mark.parametrize("loss_type,want", [("token", -4 / 6), ("seq", 0.0)])
def test_the_two_averages_of_loss_py_s_docstring(tiny_model_dir, loss_type, want):
    """loss.py's example: rows of 5 and 1 trained tokens, A = +1 and -1, ratio 1. The token mean over
    the step (the default) gives -(5 - 1)/6; DeepSeekMath eq. 3's per-sequence mean -(1 - 1)/2 = 0."""
    model, _ = load_model(tiny_model_dir, "cpu")
    samples = [Sample(ids=[5, 6, 7, 8, 9, 10, 11], mask=[0, 0] + [1] * 5, adv=[0, 0] + [1.0] * 5),
               Sample(ids=[5, 6, 7], mask=[0, 0, 1], adv=[0, 0, -1.0])]
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    assert policy_update(model, opt, samples, _args(loss_type=loss_type))["loss"] == pytest.approx(want, abs=1e-6)


def test_rows_continued_from_a_shared_prompt_have_the_full_forward_logprobs(tiny_model_dir):
    model, _ = load_model(tiny_model_dir, "cpu")
    ids = torch.randint(0, 1000, (2, 12), generator=torch.Generator().manual_seed(3))
    ids[1, :6] = ids[0, :6]  # both rows begin with the same 6 tokens
    attn = torch.ones_like(ids)
    full = token_logprobs(model, ids, attn, 1.0)
    part = logprobs_from(model, ids, attn, 1.0, prompt=SharedPrompt(model, ids[0, :6].tolist(), "cpu"))
    assert part.shape == full.shape and (part[:, :5] == 0).all()  # the LM head skips the prompt
    assert torch.allclose(part[:, 5:], full[:, 5:], atol=1e-5)
    later = logprobs_from(model, ids, attn, 1.0, start=7)  # trained_only: the LM head from position 7 on
    assert later.shape == full.shape and (later[:, :7] == 0).all()
    assert torch.allclose(later[:, 7:], full[:, 7:], atol=1e-5)
    assert torch.allclose(logprobs_from(model, ids, attn, 1.0), full, atol=1e-6)


def test_untrained_positions_carry_ratio_one(tiny_model_dir):
    """mu > 1: the stored old log-prob of a tool-result token may be very low (-200 here), and
    exp(logp - old) would overflow to inf and 0 x inf make the loss NaN. A position with nothing
    to train gets ratio 1 on both paths, and both give one loss."""
    model, _ = load_model(tiny_model_dir, "cpu")
    rows = []
    for k in range(2):
        ids = [5, 6, 7, 8] + [20 + k, 21, 22, 23, 24, 25, 26 + k]
        mask = [0] * 4 + [1, 1, 0, 0, 0, 1, 1]  # two turns around three tool-result tokens
        s = Sample(ids=ids, mask=mask, adv=[0.0] * 4 + [1.0 - 2 * k] * 7)
        logp = token_logprobs(model, torch.tensor([ids]), torch.ones(1, len(ids), dtype=torch.long), 1.0)[0]
        s.old_logp = [(-200.0 if mask[t + 1] == 0 and t >= 4 else v) for t, v in enumerate(logp.tolist())]
        rows.append(s)
    stats = {f: f(model, torch.optim.SGD(model.parameters(), lr=0.0), rows, _args(micro_batch_size=2))
             for f in (policy_update, fast_update.policy_update)}
    assert all(math.isfinite(st["loss"]) and math.isfinite(st["grad_norm"]) for st in stats.values())
    assert stats[policy_update]["loss"] == pytest.approx(stats[fast_update.policy_update]["loss"], abs=1e-6)


def test_kl_term_uses_the_stored_reference(tiny_model_dir):
    model, _ = load_model(tiny_model_dir, "cpu")
    ids = list(range(10, 20))
    s = Sample(ids=ids, mask=[0] * 4 + [1] * 6, adv=[0.0] * 10)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    fill = token_logprobs(model, torch.tensor([ids]), torch.ones(1, 10, dtype=torch.long), 1.0)[0]
    s.ref_logp = fill.tolist()  # reference == policy: KL 0
    assert policy_update(model, opt, [s], _args(beta=0.1))["kl"] == pytest.approx(0, abs=1e-6)
    s.ref_logp = (fill - 1.0).tolist()  # ref - logp = -1 on every token: k3 = e^-1 + 1 - 1
    stats = policy_update(model, opt, [s], _args(beta=0.1))
    assert stats["kl"] == pytest.approx(math.exp(-1), rel=1e-4)
    assert stats["loss"] == pytest.approx(0.1 * math.exp(-1), rel=1e-4)  # A = 0: loss = beta * KL


def full_forward_gradient(model, samples, temperature=1.0):
    """The reference: each row's own full forward (no shared prompt), the token-mean loss with
    mu = 1 and beta = 0, summed over rows; returns the flattened gradient."""
    model.zero_grad(set_to_none=True)
    n_tokens = sum(sum(s.mask) for s in samples)
    device = next(model.parameters()).device
    for s in samples:
        ids = torch.tensor([s.ids], device=device)
        logp = token_logprobs(model, ids, torch.ones_like(ids), temperature)
        mask = torch.tensor([s.mask[1:]], dtype=torch.float, device=device)
        adv = torch.tensor([s.adv[1:]], device=device)
        grpo_loss(logp, logp.detach(), None, adv, mask, 0.0, 0.2, 0.2, mask / n_tokens)[0].backward()
    grad = torch.cat([p.grad.flatten() for p in model.parameters()])
    model.zero_grad(set_to_none=True)
    return grad


def same_gradient(got, want):
    """Equal up to float32 summation order: the rows' gradients through the prompt are summed
    before its backward instead of after."""
    return (got - want).norm() <= 1e-5 * want.norm()


def update_gradient(model, samples, **kw):
    """The gradient fast_update.policy_update (or with fast=False, policy_update) steps with (lr 0 keeps the weights)."""
    grads = []

    class Record(torch.optim.SGD):
        def step(self):
            grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))

    update = fast_update.policy_update if kw.pop("fast", True) else policy_update
    update(model, Record(model.parameters(), lr=0.0), samples, _args(**kw))
    return grads[0]


def count_prompts(monkeypatch):
    calls = []
    init = SharedPrompt.__init__
    monkeypatch.setattr(SharedPrompt, "__init__", lambda self, *a: calls.append(len(a[1])) or init(self, *a))
    return calls


def test_a_shared_prompt_runs_once_per_group_with_the_full_forward_gradient(tiny_model_dir, monkeypatch):
    """AT-GRPO: K candidates of one prompt. Whatever the micro-batch, the prompt runs once and
    the gradient is that of K full forwards."""
    model, _ = load_model(tiny_model_dir, "cpu")
    g = torch.Generator().manual_seed(4)
    prompt = torch.randint(0, 1000, (7,), generator=g).tolist()
    samples = [Sample(ids=prompt + torch.randint(0, 1000, (n,), generator=g).tolist(),
                      mask=[0] * 7 + [1] * n, adv=[0] * 7 + [a] * n)
               for n, a in ((3, 1.0), (6, -0.5), (1, -0.5))]  # right padding: rests of 3, 6, 1
    want = full_forward_gradient(model, samples)
    assert want.norm() > 0
    calls = count_prompts(monkeypatch)
    for mb in (1, 2, 3):
        assert same_gradient(update_gradient(model, samples, micro_batch_size=mb), want)
    assert calls == [7, 7, 7]  # one prompt of 7 tokens per update
    other = Sample(ids=[5] + prompt[1:] + [9], mask=[0] * 7 + [1], adv=[0] * 7 + [1.0])  # first token differs
    assert [len(rows) for _, rows in prompt_sets(samples + [other])] == [3, 1]
    assert same_gradient(update_gradient(model, samples + [other], micro_batch_size=4),
                         full_forward_gradient(model, samples + [other]))


def test_the_plain_path_and_the_shared_prompt_give_one_gradient(tiny_model_dir, monkeypatch):
    """policy_update (the plain path: every row from its first token) and fast_update.policy_update (a group's
    shared prompt run once) step with the gradient of one full forward per row."""
    model, _ = load_model(tiny_model_dir, "cpu")
    g = torch.Generator().manual_seed(5)
    prompt = torch.randint(0, 1000, (6,), generator=g).tolist()
    samples = [Sample(ids=prompt + torch.randint(0, 1000, (n,), generator=g).tolist(),
                      mask=[0] * 6 + [1] * n, adv=[0] * 6 + [a] * n) for n, a in ((4, 1.0), (2, -1.0), (5, 0.5))]
    want = full_forward_gradient(model, samples)
    calls = count_prompts(monkeypatch)
    plain = update_gradient(model, samples, micro_batch_size=2, fast=False)
    assert calls == [] and same_gradient(plain, want)  # no shared prompt on the plain path
    assert same_gradient(update_gradient(model, samples, micro_batch_size=2), want) and calls == [6]


def test_trajectories_at_the_same_state_share_one_prompt_run(tiny_model_dir, monkeypatch):
    """GRPO's K trajectories of a level list their turns trajectory by trajectory, so two rows
    with one prompt need not stand side by side: they are grouped wherever they stand, the
    prompt runs once, and the gradient is still that of one full forward per row."""
    model, _ = load_model(tiny_model_dir, "cpu")
    g = torch.Generator().manual_seed(7)
    rand = lambda n: torch.randint(0, 1000, (n,), generator=g).tolist()
    turn1, turn2 = rand(6), rand(8)  # trajectory 1: turn 1, turn 2; trajectory 2: turn 1, turn 2
    samples = [Sample(ids=p + rand(n), mask=[0] * len(p) + [1] * n, adv=[0] * len(p) + [a] * n)
               for p, n, a in ((turn1, 3, 1.0), (turn2, 2, 1.0), (turn1, 4, -1.0), (turn2 + [1], 2, -1.0))]
    assert [[samples.index(r) for r in rows] for _, rows in prompt_sets(samples)] == [[0, 2], [1], [3]]
    want = full_forward_gradient(model, samples)
    calls = count_prompts(monkeypatch)
    assert same_gradient(update_gradient(model, samples, micro_batch_size=1), want)
    assert calls == [6, 8, 9]  # turn 1's prompt once for both trajectories


def count_rows(monkeypatch):
    """The number of rows each forward of the fast update runs."""
    rows = []
    forward = fast_update.logprobs_from
    monkeypatch.setattr(fast_update, "logprobs_from", lambda model, ids, *a: rows.append(len(ids)) or forward(model, ids, *a))
    return rows


def test_a_zero_advantage_row_is_not_run_and_changes_nothing(tiny_model_dir, monkeypatch):
    """beta = 0: a row whose trained tokens all have A = 0 (a group of equal rewards) adds 0 to
    the loss and the gradient, so it is not run; |T| still counts its tokens. With beta > 0 its
    KL term counts, so it runs. If every row has A = 0, none runs and the optimizer steps with
    the zero gradient they would give (AdamW's moments move the weights as before)."""
    model, _ = load_model(tiny_model_dir, "cpu")
    g = torch.Generator().manual_seed(8)
    rand = lambda n: torch.randint(0, 1000, (n,), generator=g).tolist()
    live = [Sample(ids=rand(9), mask=[0] * 5 + [1] * 4, adv=[0] * 5 + [a] * 4) for a in (1.0, -1.0)]
    silent = Sample(ids=rand(8), mask=[0] * 4 + [1] * 4, adv=[0.0] * 8)
    rows = count_rows(monkeypatch)
    stats = fast_update.policy_update(model, torch.optim.SGD(model.parameters(), lr=0.0), live + [silent], _args(micro_batch_size=1))
    assert rows == [1, 1]  # the two live rows only
    assert stats["loss"] == pytest.approx(0.0, abs=1e-7)  # -(4 * 1 - 4 * 1) / 12 tokens
    assert same_gradient(update_gradient(model, live + [silent]), full_forward_gradient(model, live + [silent]))
    # |T| = 12 with the silent row, 8 without: the gradient is 8/12 of the live rows' own
    assert same_gradient(update_gradient(model, live + [silent]) * 12 / 8, update_gradient(model, live))
    for s in live + [silent]:
        s.ref_logp = [0.0] * (len(s.ids) - 1)
    rows.clear()
    fast_update.policy_update(model, torch.optim.SGD(model.parameters(), lr=0.0), live + [silent], _args(micro_batch_size=1, beta=0.1))
    assert rows == [1, 1, 1]  # beta > 0: the KL term of the silent row counts
    rows.clear()
    assert (update_gradient(model, [silent]) == 0).all() and rows == []  # a zero gradient for every weight


def test_grpo_loss_by_hand():
    # two tokens trained, one masked: r = [1.5, 0.5, 2], A = [1, -1, 5], eps 0.2, beta 0.5
    # objective = [min(1.5, 1.2), min(-.5, -.8), -] = [1.2, -0.8]; ref - logp = [0, ln 0.5]:
    # k3 = [0, 0.5 - ln 0.5 ... ] = [0, 0.5 + 0.693147 - 1] = [0, 0.193147]
    # loss = -((1.2 - 0) + (-0.8 - 0.5 * 0.193147)) / 2 = -(0.4 - 0.096574) / 2 = -0.151713
    logp = torch.log(torch.tensor([[1.5, 0.5, 2.0]]))
    old = torch.zeros(1, 3)
    ref = logp + torch.log(torch.tensor([[1.0, 0.5, 1.0]]))
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    loss, kl, clipped = grpo_loss(logp, old, ref, torch.tensor([[1.0, -1.0, 5.0]]), mask, 0.5, 0.2, 0.2)
    assert loss.item() == pytest.approx(-0.151713, abs=1e-6)
    assert clipped[0, :2].tolist() == [1, 1]
    assert grpo_loss(logp, old, None, torch.tensor([[1.0, -1.0, 5.0]]), mask, 0.0, 0.2, 0.2)[0].item() == \
        pytest.approx(-(1.2 - 0.8) / 2, abs=1e-6)  # beta = 0: no reference needed


def test_stored_old_logprobs_set_the_ratio(tiny_model_dir):
    """With old log-probs stored one nat below the current ones, r = e on every token: with A > 0
    the clip is active everywhere and no gradient flows (min picks the constant clipped term)."""
    model, _ = load_model(tiny_model_dir, "cpu")
    ids = list(range(10, 20))
    s = Sample(ids=ids, mask=[0] * 4 + [1] * 6, adv=[0.0] * 4 + [1.0] * 6)
    logp = token_logprobs(model, torch.tensor([ids]), torch.ones(1, 10, dtype=torch.long), 1.0)[0].detach()
    s.old_logp = (logp - 1.0).tolist()
    stats = policy_update(model, torch.optim.SGD(model.parameters(), lr=0.0), [s], _args())
    assert stats["clip_fraction"] == pytest.approx(1.0) and stats["grad_norm"] == 0
    assert stats["loss"] == pytest.approx(-1.2, rel=1e-5)  # -(clip(e) * A) = -(1 + 0.2)


def test_shared_prompt_of_a_search_group_gives_the_same_gradients(tiny_model_dir, monkeypatch):
    """The G episodes of a question share their first prompt; each then has turn 1 (trained),
    the tool result (environment, no loss), turn 2 (trained). The prompt runs once and the
    gradient is that of G full forwards, for every micro-batch size."""
    model, _ = load_model(tiny_model_dir, "cpu")
    g = torch.Generator().manual_seed(6)
    rand = lambda n: torch.randint(0, 1000, (n,), generator=g).tolist()
    prompt, samples = rand(9), []
    for t1, env, t2, a1, a2 in ((3, 5, 2, 1.0, 0.5), (2, 4, 4, -1.0, -0.5), (4, 0, 0, 0.3, 0.0)):
        turns = [0] * 9 + [1] * t1 + [0] * env + [2] * t2
        adv = [0.0] * 9 + [a1] * t1 + [0.0] * env + [a2] * t2
        samples.append(Sample(ids=prompt + rand(t1 + env + t2), mask=[int(k > 0) for k in turns], adv=adv, turn=turns))
    want = full_forward_gradient(model, samples)
    calls = count_prompts(monkeypatch)
    for mb in (1, 3):
        assert same_gradient(update_gradient(model, samples, micro_batch_size=mb), want)
    assert calls == [9, 9]


def test_rows_with_nothing_to_train_are_left_out():
    rows = [Sample(ids=[1, 2, 3], mask=[0, 0, 0]), Sample(ids=[1, 2, 4], mask=[0, 0, 1]),
            Sample(ids=[1, 2, 5], mask=[0, 0, 1]), Sample(ids=[1, 3, 5], mask=[0, 0, 1]),
            Sample(ids=[1, 3, 5, 6], mask=[0, 0, 0, 1])]
    assert [(start, [r.ids for r in group]) for start, group in prompt_sets(rows)] == [
        (2, [[1, 2, 4], [1, 2, 5]]), (2, [[1, 3, 5]]), (3, [[1, 3, 5, 6]])]


LEVERS = [dict(shared_prompt=p, trained_only=t, cudnn=True) for p in (True, False) for t in (False, True)]


@pytest.mark.parametrize("use", LEVERS, ids=lambda u: f"shared_prompt={u['shared_prompt']},trained_only={u['trained_only']}")
def test_every_lever_setting_steps_with_the_full_forward_gradient(tiny_model_dir, monkeypatch, use):
    """The fast update's levers (fast_update.FAST_UPDATE: the shared prompt run once, the LM head only from
    the first trained position) each change how the rows run, never the gradient: two questions'
    groups of two-turn rows with a tool result between the turns, a silent row (A = 0) and a row
    with nothing to train, at micro-batches of 1 to 8 rows, and the stored log-probs too."""
    monkeypatch.setitem(fast_update.FAST_UPDATE, "cpu", use)
    model, _ = load_model(tiny_model_dir, "cpu")
    g = torch.Generator().manual_seed(11)
    rand = lambda n: torch.randint(0, 1000, (n,), generator=g).tolist()
    samples = []
    for prompt in (rand(7), rand(4)):
        for t1, env, t2, a in ((3, 4, 2, 1.0), (2, 5, 3, -1.0), (4, 2, 1, 0.5)):
            turns = [0] * len(prompt) + [1] * t1 + [0] * env + [2] * t2
            samples.append(Sample(ids=prompt + rand(t1 + env + t2), mask=[int(k > 0) for k in turns],
                                  adv=[a * (k > 0) for k in turns], turn=turns))
    samples += [Sample(ids=rand(9), mask=[0] * 5 + [1] * 4, adv=[0.0] * 9),  # silent: skipped at beta 0
                Sample(ids=rand(6), mask=[0] * 6, adv=[0.0] * 6)]  # nothing to train
    want = full_forward_gradient(model, samples)
    for mb in (1, 3, 8):
        assert same_gradient(update_gradient(model, samples, micro_batch_size=mb), want), mb
    plain, fast = ([Sample(ids=s.ids, mask=s.mask, adv=s.adv) for s in samples] for _ in range(2))
    loss.fill_logprobs(model, plain, "ref_logp", 1.0, 3, bf16=False)
    fast_update.fill_logprobs(model, fast, "ref_logp", 1.0, 3, bf16=False)
    for p, f in zip(plain, fast):  # equal wherever a token is trained; a row with none is left out
        assert (f.ref_logp is None) == (1 not in p.mask)
        if f.ref_logp is not None:
            trained = torch.tensor(p.mask[1:]) > 0
            assert torch.allclose(torch.tensor(f.ref_logp)[trained], torch.tensor(p.ref_logp)[trained], atol=1e-5)


def test_without_a_shared_prompt_a_micro_batch_holds_rows_of_several_groups(tiny_model_dir, monkeypatch):
    """shared_prompt off: the rows are not gathered by prompt, so a micro-batch of 4 takes 4 rows of
    two groups; trained_only: the LM head runs from the micro-batch's first trained position."""
    monkeypatch.setitem(fast_update.FAST_UPDATE, "cpu", dict(shared_prompt=False, trained_only=True, cudnn=True))
    model, _ = load_model(tiny_model_dir, "cpu")
    samples = [Sample(ids=list(range(10 + 9 * k, 19 + 9 * k)), mask=[0] * (3 + k) + [1] * (6 - k),
                      adv=[0.0] * (3 + k) + [1.0 - k % 2 * 2] * (6 - k)) for k in range(4)]
    rows, starts = [], []
    forward = fast_update.logprobs_from
    monkeypatch.setattr(fast_update, "logprobs_from", lambda model, ids, attn, t, start, prompt: (
        rows.append(len(ids)) or starts.append(start) or forward(model, ids, attn, t, start, prompt)))
    fast_update.policy_update(model, torch.optim.SGD(model.parameters(), lr=0.0), samples, _args(micro_batch_size=4))
    assert rows == [4] and starts == [2]  # one micro-batch; row 0's first trained token 3 is predicted at 2


def test_the_cudnn_lever_chooses_the_attention(monkeypatch):
    """cudnn false: the update enters gpu_step.sdpa_without_cudnn (which on a GPU leaves cuDNN's
    attention out; tests/test_policy.py checks the flags); true: SDPA picks."""
    entered = []
    monkeypatch.setattr(fast_update, "sdpa_without_cudnn", lambda model: entered.append(model) or contextlib.nullcontext())
    with fast_update.attention("m", dict(cudnn=True)):
        pass
    with fast_update.attention("m", dict(cudnn=False)):
        pass
    assert entered == ["m"]


def test_loss_weights_by_hand():
    """token: 1/|T| on each trained token; seq: 1/|o_i| / G, an empty row adds nothing but counts in
    G; a step with no trained token gives weights 0, not NaN."""
    from loss import loss_weights
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    assert loss_weights(mask, "token", 4, 3).tolist() == [[0.25, 0.25, 0.25], [0.25, 0.0, 0.0], [0.0, 0.0, 0.0]]
    assert loss_weights(mask, "seq", 4, 3) == pytest.approx(torch.tensor([[1 / 9, 1 / 9, 1 / 9], [1 / 3, 0, 0], [0, 0, 0]]))
    assert loss_weights(torch.zeros(1, 2), "token", 0, 1).tolist() == [[0.0, 0.0]]
