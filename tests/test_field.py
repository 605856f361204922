"""field.py, the field's search estimators, by hand. One group of G = 3 episodes of up to K = 3
turns: a calls twice and answers (turns 3), b calls once and answers (2), c answers at once (1).

    episode  R^T_1  R^T_2  R^O   turns   its turn rewards r_k    its reward R
    a        0.7    0.2    1.0   3       0.7, 0.2, 1.0           1.9
    b        0.2    0      0.5   2       0.2, 0.5                0.7
    c        0      0      0.0   1       0.0                     0.0
"""
import math

import pytest
from conftest import full_args
import torch

import field
import loss
import mtgrpo

R_T = [[[0.7, 0.2], [0.2, 0.0], [0.0, 0.0]]]
R_O = [[1.0, 0.5, 0.0]]
TURNS = [[3, 2, 1]]


def std(xs, ddof):
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - ddof))


def test_each_episode_s_turn_rewards_end_with_its_outcome():
    r, played = field.step_rewards(R_T, R_O, TURNS)
    assert r.tolist() == [[[0.7, 0.2, 1.0], [0.2, 0.5, 0.0], [0.0, 0.0, 0.0]]]
    assert played.tolist() == [[[True, True, True], [True, True, False], [True, False, False]]]
    with pytest.raises(ValueError, match="values 1..3"):
        field.step_rewards(R_T, R_O, [[3, 2, 0]])  # an episode plays at least one turn
    with pytest.raises(ValueError, match=r"turns must be \(groups, G\) = \(1, 3\)"):
        field.step_rewards(R_T, R_O, [[3, 2]])


def test_per_turn_index_leave_one_out_by_hand():
    """Turn 1: all three played it; a's baseline is the mean of b's and c's rewards, (0.7 + 0) / 2,
    over the std of (1.9, 0.7, 0). Turn 2: a and b, each against the other. Turn 3: a alone, 0."""
    A = field.turn_index_loo(R_T, R_O, TURNS)[0]
    s1, s2 = std([1.9, 0.7, 0.0], 1) + 1e-4, std([1.9, 0.7], 1) + 1e-4
    assert A[:, 0].tolist() == pytest.approx([(1.9 - 0.35) / s1, (0.7 - 0.95) / s1, (0.0 - 1.3) / s1])
    assert A[:, 1].tolist() == pytest.approx([1.2 / s2, -1.2 / s2, 0.0])  # c did not play turn 2
    assert A[:, 2].tolist() == [0.0, 0.0, 0.0]  # one episode reached turn 3: no baseline, no credit
    assert A[0, 0].item() == pytest.approx(1.6129, abs=1e-4)  # 1.55 / 0.9610
    unscaled = field.turn_index_loo(R_T, R_O, TURNS, scale="none")[0]
    assert unscaled[:, 1].tolist() == pytest.approx([1.2, -1.2, 0.0])  # divide_advantage_by_std false


def test_leave_one_out_edge_cases():
    one = field.turn_index_loo([[[0.7]]], [[1.0]], [[2]])
    assert one.tolist() == [[[0.0, 0.0]]]  # one sample: no one to compare with
    equal = field.turn_index_loo([[[0.7], [0.7]]], [[1.0, 1.0]], [[2, 2]])
    assert equal.tolist() == [[[0.0, 0.0], [0.0, 0.0]]]  # equal rewards: no credit


def test_kevin_s_discounted_returns_by_hand():
    """gamma 0.4: a's returns 0.7 + 0.4 (0.2 + 0.4 1.0) = 0.94, 0.2 + 0.4 1.0 = 0.6, 1.0; b's
    0.2 + 0.4 0.5 = 0.4, 0.5; c's 0.0. All six turns are one pool: mean 3.44 / 6, population std."""
    A = field.discounted_returns(R_T, R_O, TURNS)[0]
    pool = [0.94, 0.6, 1.0, 0.4, 0.5, 0.0]
    m, s = sum(pool) / 6, std(pool, 0) + 1e-8
    assert A.flatten().tolist() == pytest.approx([(0.94 - m) / s, (0.6 - m) / s, (1.0 - m) / s,
                                                  (0.4 - m) / s, (0.5 - m) / s, 0.0, (0.0 - m) / s, 0.0, 0.0])
    assert m == pytest.approx(0.573333, abs=1e-6)
    lone = field.discounted_returns([[[0.7]]], [[1.0]], [[2]])[0, 0]  # one episode: its two turns differ
    assert lone.tolist() == pytest.approx([(1.1 - 1.05) / 0.05, (1.0 - 1.05) / 0.05], abs=1e-6)
    same = field.discounted_returns([[[0.0]]], [[1.0]], [[1]])  # one turn, one sample: nothing to compare
    assert same.tolist() == [[[0.0, 0.0]]]


def test_last_step_broadcast_is_grpo_or_in_search():
    """The last step of a search episode earns R^O, so broadcasting its normalised reward gives
    GRPO-OR's advantage on every turn played (up to the epsilon: 1e-6 against 1e-4)."""
    A = field.last_step_broadcast(R_T, R_O, TURNS)
    grpo_or = mtgrpo.turn_advantages(torch.tensor(R_T), torch.tensor(R_O), "or")
    _, played = field.step_rewards(R_T, R_O, TURNS)
    assert A[played].tolist() == pytest.approx(grpo_or[played].tolist(), rel=1e-3)
    assert A[~played].tolist() == [0.0, 0.0, 0.0]
    assert A[0, :, 0].tolist() == pytest.approx([0.5 / (0.5 + 1e-6), 0.0, -0.5 / (0.5 + 1e-6)])  # R^O: mean 0.5, std 0.5


# ---------------------------------------------------------------- GiGPO's anchor states in search
def test_anchor_states_are_what_the_environment_showed():
    """Turn 1 begins at the question for all; a and b saw the same first result "x" (their queries
    may differ), so their turn 2 shares a state; only a saw "y" after it. Another group numbers its
    own states; a turn not played is -1."""
    ids = field.anchor_states([["x", "y"], ["x"], [], ["z"], ["x"], ["x", "y"]], G=3, K=3)
    assert ids.tolist() == [[[0, 1, 2], [0, 1, -1], [0, -1, -1]],
                            [[0, 1, -1], [0, 2, -1], [0, 2, 3]]]
    from types import SimpleNamespace
    said = lambda *turns: SimpleNamespace(completion=[{"role": r, "content": c} for r, c in turns])  # noqa: E731
    envs = [said(("assistant", "query one"), ("user", "R"), ("assistant", "A")),
            said(("assistant", "query two"), ("user", "R"), ("assistant", "B")), said(("assistant", "C"))]
    got = field.inputs(("states",), envs, None, 3, None, None, full_args("--max-calls", "2"))["states"]
    assert got.tolist() == [[[0, 1, -1], [0, 1, -1], [0, -1, -1]]]  # two queries, one result: one state


def test_gigpo_in_search_by_hand():
    """The module's group, gamma 0.95, omega 1. A^E = norm of the returns (1.9, 0.7, 0): (1.0333,
    -0.1667, -0.8667) / 0.9609. Turn 1 (one state): returns to go a 0.7 + 0.95 (0.2 + 0.95 * 1.0) =
    1.7925, b 0.2 + 0.95 * 0.5 = 0.675, c 0.0, normalised among the three. Turn 2: a and b saw the
    same result: 1.15 against 0.5, +-0.7071. Turn 3: a alone, the singleton rule: A^S = 0."""
    states = [[[0, 1, 2], [0, 1, -1], [0, -1, -1]]]
    A = field.anchor_state_groups(R_T, R_O, TURNS, states=states)[0]
    e = [(x - 0.86667) / (std([1.9, 0.7, 0.0], 1) + 1e-4) for x in (1.9, 0.7, 0.0)]
    s1 = [(x - 0.8225) / (std([1.7925, 0.675, 0.0], 1) + 1e-4) for x in (1.7925, 0.675, 0.0)]
    s2 = 0.325 / (std([1.15, 0.5], 1) + 1e-4)
    assert A.flatten().tolist() == pytest.approx([e[0] + s1[0], e[0] + s2, e[0], e[1] + s1[1], e[1] - s2, 0.0,
                                                  e[2] + s1[2], 0.0, 0.0], abs=1e-4)
    assert A[0, 0].item() == pytest.approx(2.1466, abs=1e-3)
    apart = field.anchor_state_groups(R_T, R_O, TURNS, states=[[[0, 1, 2], [0, 3, -1], [0, -1, -1]]])[0]
    assert apart[:, 1].tolist() == pytest.approx([e[0], e[1], 0.0], abs=1e-4)  # b saw another result: no step group
    with pytest.raises(ValueError, match=r"states must be \(groups, G, K\) = \(1, 3, 3\)"):
        field.anchor_state_groups(R_T, R_O, TURNS, states=[[[0, 1], [0, 1], [0, -1]]])


def test_gigpo_in_search_edge_cases():
    one = field.anchor_state_groups([[[0.7]]], [[1.0]], [[2]], states=[[[0, 1]]])
    assert one.tolist() == [[[0.0, 0.0]]]  # one sample: every group a singleton
    equal = field.anchor_state_groups([[[0.7], [0.7]]], [[1.0, 1.0]], [[2, 2]], states=[[[0, 1], [0, 1]]])
    assert equal.tolist() == [[[0.0, 0.0], [0.0, 0.0]]]


# ---------------------------------------------------------------- IGPO's information gain
def test_information_gain_rewards_are_differences_of_the_gold_probability(monkeypatch):
    """p of each context is read from a table; the turn reward of turn k is p_k - p_(k-1), the
    context of p_k the prompt turn k + 1 was sampled from without its prefill (3 tokens here); an
    episode's last turn earns none (R^O is its reward)."""
    from sample import Sample
    tok = lambda text, add_special_tokens=False: {"input_ids": [7] * len(text.split())}  # noqa: E731
    seen = []

    def fake(model, tok, contexts, gold, *rest):
        seen.extend(zip(map(len, contexts), gold))
        return [{2: 0.1, 6: 0.4, 9: 0.3}[len(c)] for c in contexts]
    monkeypatch.setattr(field, "gold_probabilities", fake)
    samples = [Sample(ids=list(range(14)), starts=[5, 9, 12]), Sample(ids=list(range(10)), starts=[5])]
    args = full_args(prefill="a b c", micro_batch_size=2, bf16=False)
    gains = field.info_gains(None, tok, samples, [["Paris"], ["Rome", "Roma"]], 3, args, None)
    assert gains.flatten().tolist() == pytest.approx([0.4 - 0.1, 0.3 - 0.4, 0.0, 0.0])
    assert seen == [(2, "Paris"), (6, "Paris"), (9, "Paris"), (2, "Rome")]


def test_the_gold_probability_is_the_mean_log_prob_of_the_gold_tokens(tiny_model_dir, tokenizer):
    """By a forward pass of its own: the context, <answer>, the gold tokens, </answer>; p =
    exp(mean of the gold tokens' log-probs). Equal contexts are computed once, in order."""
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    enc = lambda t: tokenizer(t, add_special_tokens=False)["input_ids"]  # noqa: E731
    context = enc("Capital of France?")
    ids = torch.tensor([context + enc("<answer>") + enc("Paris") + enc("</answer>")])
    with torch.no_grad():
        logp = torch.log_softmax(model(ids).logits[0].float(), -1)
    start, n = len(context) + len(enc("<answer>")), len(enc("Paris"))
    want = logp[torch.arange(start - 1, start - 1 + n), ids[0, start:start + n]].double().mean().exp().item()
    got = field.gold_probabilities(model, tokenizer, [context, enc("Hi"), context], ["Paris", "Paris", "Paris"],
                                   loss.fill_logprobs, micro_batch_size=2, bf16=False)
    assert got[0] == pytest.approx(want, rel=1e-5) and got[2] == got[0] and got[1] != got[0]
    assert 0 < want < 1


def test_igpo_is_mt_grpo_with_the_information_gain_as_turn_reward():
    """IG (0.3, -0.1, 0.05) of three two-turn episodes, R^O (1, 0, 0): A_1 = norm(IG) + norm(R^O),
    A_2 = norm(R^O); the verifier's R^T does not enter."""
    ig, ro = [[[0.3], [-0.1], [0.05]]], [[1.0, 0.0, 0.0]]
    A = field.info_gain_turns([[[9.0], [0.0], [0.0]]], ro, [[2, 2, 2]], info_gain=ig)[0]
    m, s = 0.25 / 3, std([0.3, -0.1, 0.05], 1) + 1e-4
    o = [(x - 1 / 3) / (std([1.0, 0.0, 0.0], 1) + 1e-4) for x in (1.0, 0.0, 0.0)]
    assert A[:, 0].tolist() == pytest.approx([(0.3 - m) / s + o[0], (-0.1 - m) / s + o[1], (0.05 - m) / s + o[2]])
    assert A[:, 1].tolist() == pytest.approx(o)
    with pytest.raises(ValueError, match="info_gain must have turn_rewards' shape"):
        field.info_gain_turns([[[0.0], [0.0], [0.0]]], ro, [[2, 2, 2]], info_gain=[[0.3, -0.1, 0.05]])
