"""The clipped policy-gradient objective with a k3 KL penalty, shared by MT-GRPO and AT-GRPO.

Per model token t of row i, with r_t = pi(t) / pi_old(t) and the advantage A_t of its turn (MT-GRPO
puts its turn-level A_k there, AT-GRPO its (env, agent, turn)-group advantage), the term is the
clipped term of GRPO's objective (DeepSeekMath arXiv 2402.03300, eq. 3) minus its KL penalty (eq. 4):

    J_t  = min(r_t A_t, clip(r_t, 1 - eps_low, 1 + eps_high) A_t) - beta KL_t
    KL_t = exp(ref_t - logp_t) - (ref_t - logp_t) - 1     (k3 estimator of KL(pi || pi_ref), eq. 4)

How the J_t are averaged is a choice of its own (`--loss-type`):

    token (the default): loss = -(1/|T|) sum_t J_t, |T| the trained tokens of the whole step: one token
        mean over the step (TRL later named it `dapo`; the MT-GRPO reference code took a token mean per
        micro-batch, TRL's `bnpo`: docs/reference-code.md). Micro-batches add up to the loss and
        gradient of one big batch.
    seq (eq. 3 as printed): loss = -(1/G) sum_i (1/|o_i|) sum_t J_{i,t}: each row's token mean, then
        the mean over the step's rows, so a short row weighs as much as a long one.

Rows of 5 and 1 trained tokens, A = +1 on the first and -1 on the second, ratio 1: token gives
-(5 - 1)/6 = -0.667, seq gives -(1 - 1)/2 = 0 (tests/test_loss.py). log-probs come from logits
divided by the sampling temperature. With one update per rollout batch (mu = 1) pi_old is the current policy, so r_t = 1
exactly; with mu > 1 the old log-probs are stored before the first update (`fill_logprobs`).

Read top to bottom: the loss (k3_kl, clipped_surrogate, grpo_loss), the update (policy_update,
fill_logprobs, token_logprobs), the batches (pad_batch, stacked). This is the update `--plain` runs;
the default steps with the same gradient with less work (fast/update.py).

The update reads `sample.Sample`s: token ids as generated, a loss mask and one advantage per token.
"""
import torch

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
    micro-batch by micro-batch (gradient accumulation), the loss above, backward, step."""
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
    weight = loss_weights(mask, args.loss_type, n_tokens, n_rows)
    loss, kl, clipped = grpo_loss(logp, old, ref, adv, mask, args.beta, args.epsilon, args.epsilon_high, weight)
    loss.backward()
    totals["loss"] += loss.item()
    totals["kl"] += (kl.detach() * mask).sum().item() / n_tokens
    totals["clip_fraction"] += (clipped * mask).sum().item() / n_tokens


def loss_weights(mask, loss_type, n_tokens, n_rows):
    """Each trained token's weight in the step's average (the loss is -sum(weight * J)), for a
    micro-batch's mask (B, T) in a step of n_tokens trained tokens and n_rows rows. token: 1/|T|;
    seq (eq. 3): 1/|o_i| / G, every row the same weight whatever its length; a row with no trained
    token adds 0 and still counts in G."""
    if loss_type == "token":
        return mask / max(n_tokens, 1)
    return mask / mask.sum(1, keepdim=True).clamp(min=1) / n_rows


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
