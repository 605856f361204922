"""The update of loss.py made faster: policy_update and fill_logprobs compute what loss.policy_update
and loss.fill_logprobs compute (read loss.py first), with less work. With beta = 0 a row whose
every trained token has advantage 0 is not run (it adds 0 to the loss and the gradient; |T| still
counts it). The other parts are levers, each on a kind of device only where a side-by-side run
there showed it pays (docs/benchmarks.md: on a CPU the lever table, on a GPU
speedlab/gpu_check.py's update table):

    shared_prompt  a prompt a group of rows shares (the G episodes of a question, the K candidates
                   of an AT-GRPO group) runs through the model once, not once per row
                   (SharedPrompt); a micro-batch then holds one group's rows
    trained_only   without a shared prompt: the LM head and the log-softmax only from the
                   micro-batch's first trained position on, not over the prompt
    cudnn          whether attention may use cuDNN's kernel on a GPU (else
                   gpu_step.sdpa_without_cudnn): it builds a graph for every new shape, and
                   every micro-batch has a new shape

Proof that every setting steps with the same gradient: tests/test_loss.py, tests/test_cuda.py.
"""
import contextlib

import torch
import torch.nn.functional as F
from transformers import DynamicCache

from fast.gpu_step import sdpa_without_cudnn
from loss import accumulate, pad_batch, step, store
from machinery.precision import autocast

FAST_UPDATE = {"cpu": dict(shared_prompt=True, trained_only=False, cudnn=True),
               "cuda": dict(shared_prompt=False, trained_only=True, cudnn=False)}


def levers(device):
    """The fast update's levers on this device (FAST_UPDATE)."""
    return FAST_UPDATE["cuda" if str(device).startswith("cuda") else "cpu"]


def policy_update(model, optimizer, samples, args):
    """loss.policy_update with the levers above: the same step, less compute."""
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


def fill_logprobs(model, samples, field, temperature, micro_batch_size, bf16=True):
    """loss.fill_logprobs with the levers above (rows with nothing to train are left out)."""
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
    """loss.token_logprobs' values (B, L-1) from position `start` on, 0 before it: the LM head and the
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
