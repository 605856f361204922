"""The clipped policy-gradient objective with a k3 KL penalty, shared by MT-GRPO and AT-GRPO.

Per model token t of the step, with r_t = pi(t) / pi_old(t) and the advantage A_t of its turn
(the GRPO objective, DeepSeekMath arXiv 2402.03300 eq. 3, which both papers use; MT-GRPO puts its
turn-level A_k there, AT-GRPO its (env, agent, turn)-group advantage):

    loss = -(1/|T|) sum_t [ min(r_t A_t, clip(r_t, 1 - eps_low, 1 + eps_high) A_t) - beta KL_t ]
    KL_t = exp(ref_t - logp_t) - (ref_t - logp_t) - 1     (k3 estimator of KL(pi || pi_ref), eq. 4)

|T| counts the trained tokens of the whole step (the token mean), so micro-batches add up to the
same loss and gradient as one big batch. `loss_type="seq"` averages each sequence's token mean
instead. log-probs come from logits divided by the sampling temperature. With one update per
rollout batch (mu = 1) pi_old is the current policy, so r_t = 1 exactly; with mu > 1 the old
log-probs are stored before the first update (`fill_logprobs`).

Read top to bottom: the loss (k3_kl, clipped_surrogate, grpo_loss), the plain update
(policy_update, fill_logprobs, token_logprobs, pad_batch), then, behind a banner, the same update
made faster.

The update reads `sample.Sample`s: token ids as generated, a loss mask and one advantage per token.
"""
import contextlib

import torch
import torch.nn.functional as F
from transformers import DynamicCache

from machinery.gpu_step import sdpa_without_cudnn
from machinery.precision import autocast


def k3_kl(logp, ref_logp):
    """Per-token k3 estimator of KL(pi || pi_ref): exp(ref - logp) - (ref - logp) - 1 >= 0."""
    d = ref_logp - logp
    return torch.exp(d) - d - 1


def clipped_surrogate(logp, old_logp, adv, eps_low, eps_high):
    """Per-token PPO/GRPO objective min(r A, clip(r, 1-eps_low, 1+eps_high) A), r = pi/pi_old.
    Returns the objective and a 0/1 tensor marking tokens where the clip is active."""
    ratio = torch.exp(logp - old_logp)
    clipped = torch.clamp(ratio, 1 - eps_low, 1 + eps_high)
    objective = torch.minimum(ratio * adv, clipped * adv)
    return objective, (ratio * adv > clipped * adv).float()


def grpo_loss(logp, old_logp, ref_logp, adv, mask, beta, eps_low, eps_high, weight=None):
    """The loss above for tensors (B, T). `weight` (B, T) defaults to the token mean over this
    batch, mask / sum(mask); policy_update passes mask / |T| of the whole step. beta = 0 needs
    no reference (ref_logp may be None). Returns (loss, per-token KL, per-token clip flags)."""
    objective, clipped = clipped_surrogate(logp, old_logp, adv, eps_low, eps_high)
    kl = k3_kl(logp, ref_logp) if beta > 0 else torch.zeros_like(logp)
    weight = mask / mask.sum().clamp(min=1) if weight is None else weight
    return -((objective - beta * kl) * weight).sum(), kl, clipped


def policy_update(model, optimizer, samples, args):
    """One optimizer step on a list of Samples: every row through the model from its first token,
    micro-batch by micro-batch (gradient accumulation), the loss above, backward, step. The plain
    path (`--plain`); train.py's default is policy_update_fast below, which steps with the same
    gradient (tests/test_loss.py::test_the_plain_path_and_the_shared_prompt_give_one_gradient)."""
    device = str(next(model.parameters()).device)
    n_tokens = sum(sum(s.mask) for s in samples)  # |T| counts every row's trained tokens
    totals = dict(loss=0.0, kl=0.0, clip_fraction=0.0)
    for i in range(0, len(samples), args.micro_batch_size):
        chunk = samples[i:i + args.micro_batch_size]
        ids, attn, mask, adv = pad_batch(chunk, device)
        mask, adv = mask[:, 1:], adv[:, 1:]  # token t is predicted at position t-1
        with autocast(device, args.bf16):
            logp = token_logprobs(model, ids, attn, args.temperature)
        accumulate(totals, logp, chunk, mask, adv, n_tokens, len(samples), args)
    return step(model, optimizer, totals, args)


def accumulate(totals, logp, chunk, mask, adv, n_tokens, n_rows, args):
    """The loss of one micro-batch, backward, and its share of the logged loss, KL and clip
    fraction. pi_old: the stored old log-probs (mu > 1), else logp itself (ratio 1)."""
    old = logp.detach() if chunk[0].old_logp is None else stacked(chunk, "old_logp", logp)
    old = torch.where(mask > 0, old, logp.detach())  # ratio 1 where nothing is trained (logp may be 0 there)
    ref = stacked(chunk, "ref_logp", logp) if args.beta > 0 else None
    if args.loss_type == "token":
        weight = mask / n_tokens
    else:  # "seq": every sequence weighs the same whatever its length
        weight = mask / mask.sum(1, keepdim=True).clamp(min=1) / n_rows
    loss, kl, clipped = grpo_loss(logp, old, ref, adv, mask, args.beta, args.epsilon, args.epsilon_high, weight)
    loss.backward()
    totals["loss"] += loss.item()
    totals["kl"] += (kl.detach() * mask).sum().item() / n_tokens
    totals["clip_fraction"] += (clipped * mask).sum().item() / n_tokens


def step(model, optimizer, totals, args):
    """Clip the gradient norm, step, zero the gradients; returns the logged totals."""
    totals["grad_norm"] = torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm).item()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return totals


def fill_logprobs(model, samples, field, temperature, micro_batch_size, bf16=True):
    """Store per-token log-probs (old policy or reference) on each sample, without grad: every
    row from its first token."""
    device = str(next(model.parameters()).device)
    with torch.no_grad(), autocast(device, bf16):
        for i in range(0, len(samples), micro_batch_size):
            chunk = samples[i:i + micro_batch_size]
            ids, attn, _, _ = pad_batch(chunk, device)
            store(chunk, field, token_logprobs(model, ids, attn, temperature))


def store(chunk, field, logp):
    """Set `field` of each sample of a micro-batch to its row of log-probs (B, L-1), unpadded."""
    for s, row in zip(chunk, logp.float().cpu()):
        setattr(s, field, row[:len(s.ids) - 1].tolist())


def token_logprobs(model, ids, attn, temperature):
    """log pi(token_t | tokens_<t) for t = 1..L-1, from logits divided by the sampling
    temperature, so it is the log of the distribution the token was sampled from. (B, L-1)"""
    logits = model(input_ids=ids, attention_mask=attn).logits[:, :-1]
    logp = torch.log_softmax(logits.float() / temperature, -1)
    return logp.gather(-1, ids[:, 1:, None]).squeeze(-1)


# ---------------------------------------------------------------- batches
def pad_batch(samples, device):
    """Right-pad a micro-batch. Returns ids, attention mask, loss mask, advantages (B, L)."""
    width = max(len(s.ids) for s in samples)
    ids = torch.zeros(len(samples), width, dtype=torch.long)
    attn, mask, adv = torch.zeros_like(ids), torch.zeros(ids.shape), torch.zeros(ids.shape)
    for i, s in enumerate(samples):
        n = len(s.ids)
        ids[i, :n], attn[i, :n] = torch.tensor(s.ids), 1
        mask[i, :n], adv[i, :n] = torch.tensor(s.mask, dtype=torch.float), torch.tensor(s.adv)
    return ids.to(device), attn.to(device), mask.to(device), adv.to(device)


def stacked(chunk, field, like):
    """Pad a stored per-token field of a micro-batch to the shape of `like`."""
    out = torch.zeros_like(like)
    for i, s in enumerate(chunk):
        row = getattr(s, field)
        out[i, :len(row)] = torch.tensor(row)
    return out


# ================================================================ machinery: the same update, faster
# Skip on first reading. policy_update_fast and fill_logprobs_fast compute what policy_update and
# fill_logprobs above compute, with less work. With beta = 0 a row whose every trained token has
# advantage 0 is not run (it adds 0 to the loss and the gradient; |T| still counts it). The other
# parts are levers, each on a kind of device only where a side-by-side run there showed it pays
# (docs/benchmarks.md: on a CPU the lever table, on a GPU speedlab/gpu_check.py's update table):
#   shared_prompt  a prompt a group of rows shares (the G episodes of a question, the K candidates of
#                  an AT-GRPO group) runs through the model once, not once per row (SharedPrompt);
#                  a micro-batch then holds one group's rows
#   trained_only   without a shared prompt: the LM head and the log-softmax only from the
#                  micro-batch's first trained position on, not over the prompt
#   cudnn          whether attention may use cuDNN's kernel on a GPU (else gpu_step.sdpa_without_cudnn):
#                  it builds a graph for every new shape, and every micro-batch has a new shape
# Proof that every setting steps with the same gradient: tests/test_loss.py, tests/test_cuda.py.
FAST_UPDATE = {"cpu": dict(shared_prompt=True, trained_only=False, cudnn=True),
               "cuda": dict(shared_prompt=False, trained_only=True, cudnn=False)}


def levers(device):
    """The fast update's levers on this device (FAST_UPDATE)."""
    return FAST_UPDATE["cuda" if str(device).startswith("cuda") else "cpu"]


def policy_update_fast(model, optimizer, samples, args):
    """policy_update with the levers above: the same step, less compute."""
    device = str(next(model.parameters()).device)
    use = levers(device)
    n_tokens = sum(sum(s.mask) for s in samples)  # |T| counts every row's trained tokens
    totals = dict(loss=0.0, kl=0.0, clip_fraction=0.0)
    rows = [s for s in samples if args.beta > 0 or any(a for a, m in zip(s.adv, s.mask) if m)]
    with attention(model, use):
        for start, same_prompt in row_sets(rows, use):
            with autocast(device, args.bf16):
                prompt = SharedPrompt(model, same_prompt[0].ids[:start], device) if start else None
            for i in range(0, len(same_prompt), args.micro_batch_size):
                chunk = same_prompt[i:i + args.micro_batch_size]
                ids, attn, mask, adv = pad_batch(chunk, device)
                mask, adv = mask[:, 1:], adv[:, 1:]  # token t is predicted at position t-1
                with autocast(device, args.bf16):
                    logp = logprobs_from(model, ids, attn, args.temperature, first_trained(chunk, use), prompt)
                accumulate(totals, logp, chunk, mask, adv, n_tokens, len(samples), args)
            if prompt:
                prompt.backward()
    for p in model.parameters():  # no row ran: the zero gradient they would give (AdamW still steps)
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    return step(model, optimizer, totals, args)


def fill_logprobs_fast(model, samples, field, temperature, micro_batch_size, bf16=True):
    """fill_logprobs with the levers above (rows with nothing to train are left out)."""
    device = str(next(model.parameters()).device)
    use = levers(device)
    with torch.no_grad(), autocast(device, bf16), attention(model, use):
        for start, same_prompt in row_sets(samples, use):
            prompt = SharedPrompt(model, same_prompt[0].ids[:start], device) if start else None
            for i in range(0, len(same_prompt), micro_batch_size):
                chunk = same_prompt[i:i + micro_batch_size]
                ids, attn, _, _ = pad_batch(chunk, device)
                store(chunk, field, logprobs_from(model, ids, attn, temperature, first_trained(chunk, use), prompt))


def attention(model, use):
    """Attention as SDPA picks it, or on a GPU without cuDNN's kernel (the cudnn lever)."""
    return contextlib.nullcontext() if use["cudnn"] else sdpa_without_cudnn(model)


def row_sets(samples, use):
    """[(start, rows)]: with a shared prompt, prompt_sets; else every row with a trained token in
    one set (start 0: no shared prompt), so that a micro-batch may hold rows of several groups."""
    if use["shared_prompt"]:
        return prompt_sets(samples)
    rows = [s for s in samples if 1 in s.mask]
    return [(0, rows)] if rows else []


def first_trained(chunk, use):
    """The first position (of the L-1 that predict a token) whose token a row of the micro-batch
    trains, with the trained_only lever; else 0."""
    return min(s.mask.index(1) for s in chunk) - 1 if use["trained_only"] else 0


def logprobs_from(model, ids, attn, temperature, start=0, prompt=None):
    """token_logprobs' values (B, L-1) from position `start` on, 0 before it: the LM head and the
    log-softmax run only there. With a SharedPrompt the rows continue from it instead (`start` is
    then the prompt's last position, and the prompt's tokens get 0)."""
    if prompt is not None:
        logits, at = prompt.continued_logits(model, ids, attn)  # at: the positions t-1 they predict from
        logp = torch.log_softmax(logits.float() / temperature, -1).gather(-1, ids[:, at + 1, None]).squeeze(-1)
        return logp.new_zeros(ids.shape[0], ids.shape[1] - 1).index_copy(1, at, logp)
    logits = model(input_ids=ids, attention_mask=attn, logits_to_keep=ids.shape[1] - start).logits[:, :-1]
    logp = torch.log_softmax(logits.float() / temperature, -1).gather(-1, ids[:, start + 1:, None]).squeeze(-1)
    return F.pad(logp, (start, 0))


def prompt_sets(samples):
    """[(start, rows)]: the samples with trained tokens gathered by their prompt, the ids before
    the first trained token at `start` (the G episodes of one question, the K candidates of an
    AT-GRPO group, GRPO trajectories that reached the same state), in order of first appearance.
    Samples with nothing to train are left out."""
    sets = {}
    for s in samples:
        if 1 in s.mask:
            start = s.mask.index(1)
            sets.setdefault(tuple(s.ids[:start]), (start, []))[1].append(s)
    return list(sets.values())


class SharedPrompt:
    """The prompt a group's rows share, run through the model once however many micro-batches
    the rows take. Each micro-batch continues from detached copies of the prompt's keys/values
    and last logits, which collect that micro-batch's gradient; backward() then sends their sum
    through the prompt's forward once. The same values and gradients as a full forward of
    every row (the gradients of the rows through the prompt add up), with the prompt run once
    per group instead of once per row."""

    def __init__(self, model, prompt, device):
        self.length = len(prompt)
        out = model(input_ids=torch.tensor([prompt], device=device), use_cache=True, logits_to_keep=1)
        self.outputs = [out.logits] + [t for layer in out.past_key_values.layers for t in (layer.keys, layer.values)]
        # fp32 copies: the micro-batches' gradients add up in fp32 (attention casts them back)
        self.leaves = [t.detach().float().requires_grad_(t.requires_grad) for t in self.outputs]

    def continued_logits(self, model, ids, attn):
        """Logits of rows (B, L) that begin with the prompt, at positions length-1 (the prompt's
        last) .. L-2; and those positions."""
        B, L = ids.shape
        cache = DynamicCache()
        for layer in range(len(self.leaves) // 2):
            keys, values = self.leaves[1 + 2 * layer:3 + 2 * layer]
            cache.update(keys.expand(B, -1, -1, -1), values.expand(B, -1, -1, -1), layer)
        positions = torch.arange(self.length, L, device=ids.device).expand(B, -1)
        keep = torch.arange(L - self.length - 1, device=ids.device)
        rest = model(input_ids=ids[:, self.length:], attention_mask=attn, position_ids=positions,
                     past_key_values=cache, logits_to_keep=keep).logits
        at = torch.cat([keep.new_tensor([self.length - 1]), self.length + keep])
        return torch.cat([self.leaves[0].expand(B, -1, -1), rest], dim=1), at

    def backward(self):
        """Send the gradient the micro-batches left on the copies through the prompt's forward."""
        pairs = [(out, leaf.grad.to(out.dtype)) for out, leaf in zip(self.outputs, self.leaves)
                 if leaf.grad is not None]
        if pairs:
            torch.autograd.backward(*zip(*pairs))
