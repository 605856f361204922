"""MT-PPO's critic: a value model read at each model turn's boundary, turn-level GAE, and the
critic's own update. MT-GRPO's later version (arXiv 2505.11821v2, "Reinforcing Multi-Turn Reasoning
in LLM Agents via Turn-Level Reward Design") extends PPO as well as GRPO with turn-level rewards;
its PPO form, MT-PPO, learns a critic instead of comparing G episodes of one question. Only
`--algo mt_ppo` and `--algo ppo` load one (estimators.py: the rows that need "values"); every
other estimator never crosses this file.

An episode of search plays turns k = 1..T (T <= K = max_calls + 1). State s_k is everything the
model has seen when turn k begins (the prompt, earlier turns, tool results, the prefill); the
critic's value V(s_k) is its output at the last token before turn k's first generated token.
Rewards sit at the end of each turn (field.step_rewards: r_k = R^T_k before the last turn, R^O at
the last; PPO: R^O at the last turn only, 0 before):

    delta_k = r_k + gamma V(s_{k+1}) - V(s_k)        V(s_{T+1}) = 0: the episode is over
    A_k     = delta_k + gamma lambda A_{k+1}         A_{T+1} = 0                     (turn-level GAE)
    R_k     = A_k + V(s_k)                           the critic's target (its "returns")

Every model token of turn k carries A_k (mtgrpo.token_advantages), whitened over the step's model
tokens (mean 0, std 1: each turn weighs its token count, as token-level whitening of a per-turn
value does). A turn the episode did not play gets 0. The critic's loss is PPO's clipped value
loss over the played turns' boundaries,
    L_V = 1/2 mean_k max((V_k - R_k)^2, (clip(V_k, V_old_k - c, V_old_k + c) - R_k)^2)
where V_old is the value the advantages used (with one update per rollout batch, --num-iterations
1, V_k = V_old_k and the clip is inert).

The critic is a separate copy of the policy's network with a scalar head in place of the
vocabulary (transformers' ...ForTokenClassification, one label), initialised from the policy's
weights, with its own AdamW and learning rate; policy.load_critic loads it (this file, which the
estimator table imports, reaches no model library). docs/estimators.md#mt-ppo-a-critic says which
public code does the same and where this file departs from it: turn-level values only, no
token-level GAE inside a turn.
"""
import time

import torch

from field import step_rewards
from machinery.precision import autocast

GAMMA = 1.0  # the turn-level discount: an episode of two to four turns, its return undiscounted
LAMBDA = 1.0  # GAE's lambda: 1 is the Monte-Carlo return less V(s_k), unbiased whatever V is
VALUE_CLIP = 0.5  # c, the clip of the value loss
EPS = 1e-8


# ---------------------------------------------------------------- turn-level GAE (the rows of estimators.py)
def turn_rewards(R_T, R_O, turns, outcome_only=False):
    """(r, played), (groups, G, K): r_k at the end of each played turn. MT-PPO: field.step_rewards
    (R^T_k before the last turn, R^O at it); PPO (outcome_only): R^O at the last turn, 0 before."""
    r, played = step_rewards(R_T, R_O, turns)
    if outcome_only:
        last = played & ~torch.cat([played[..., 1:], torch.zeros_like(played[..., :1])], -1)
        r = torch.where(last, r, torch.zeros(()))
    return r, played


def gae(r, values, played, gamma=GAMMA, lam=LAMBDA):
    """A (groups, G, K): the recursion of the module docstring, from the last turn back; V after
    the last played turn is 0, and so is A on a turn not played."""
    values = torch.as_tensor(values, dtype=torch.float64) * played
    A, later, next_value = torch.zeros_like(r), torch.zeros(r.shape[:2], dtype=r.dtype), torch.zeros(r.shape[:2], dtype=r.dtype)
    for k in reversed(range(r.shape[2])):
        delta = r[..., k] + gamma * next_value - values[..., k]
        later = torch.where(played[..., k], delta + gamma * lam * later, torch.zeros(()))
        A[..., k], next_value = later, values[..., k]
    return A


def whiten(A, tokens, played, scale="group"):
    """A - mean over the step's model tokens, divided by their std (unbiased): every turn counts
    once per token it trained. scale "none": not whitened; PPO has no groups, so "group" and
    "batch" both whiten over the whole step."""
    if scale == "none":
        return A * played
    w = torch.as_tensor(tokens, dtype=torch.float64) * played
    n = w.sum()
    if n < 2:
        return torch.zeros_like(A)
    mean = (w * A).sum() / n
    var = (w * (A - mean) ** 2).sum() / (n - 1)
    return torch.where(played, (A - mean) / torch.sqrt(var + EPS), torch.zeros(()))


def mt_ppo_advantages(R_T, R_O, turns, alpha=1.0, scale="group", values=None, tokens=None):
    """MT-PPO: turn rewards at each turn's end, the outcome at the last; turn-level GAE; whitened.
    alpha is not used (gamma is the turn discount)."""
    r, played = turn_rewards(R_T, R_O, turns)
    return whiten(gae(r, values, played), tokens, played, scale)


def ppo_advantages(R_T, R_O, turns, alpha=1.0, scale="group", values=None, tokens=None):
    """PPO: the outcome reward at the last turn only, the same GAE and whitening."""
    r, played = turn_rewards(R_T, R_O, turns, outcome_only=True)
    return whiten(gae(r, values, played), tokens, played, scale)


# ---------------------------------------------------------------- the value model
def boundaries(sample, K):
    """Where V(s_k) is read for each turn k the sample played: the position of the last token
    before turn k's first token (sample.starts[k-1] - 1); a causal model's output there has seen
    s_k and nothing of turn k."""
    return [start - 1 for start in sample.starts[:K]]


def value_rows(model, samples, K, bf16=True):
    """V(s_k) of every sample at its boundaries, with grad: a list of 1-D tensors, one per sample."""
    device = str(next(model.parameters()).device)
    width = max(len(s.ids) for s in samples)
    ids, attn = torch.zeros(len(samples), width, dtype=torch.long), torch.zeros(len(samples), width, dtype=torch.long)
    for i, s in enumerate(samples):
        ids[i, :len(s.ids)], attn[i, :len(s.ids)] = torch.tensor(s.ids), 1
    with autocast(device, bf16):
        out = model(input_ids=ids.to(device), attention_mask=attn.to(device)).logits[..., 0].float()
    return [out[i, boundaries(s, K)] for i, s in enumerate(samples)]


def turn_values(model, samples, K, micro_batch_size=8, bf16=True):
    """(len(samples), K) V(s_k) for each turn each sample played, 0 after: no grad."""
    values = torch.zeros(len(samples), K, dtype=torch.float64)
    with torch.no_grad():
        for at in range(0, len(samples), micro_batch_size):
            for i, v in enumerate(value_rows(model, samples[at:at + micro_batch_size], K, bf16), at):
                values[i, :len(v)] = v.double().cpu()
    return values


def value_update(model, optimizer, samples, K, args):
    """One AdamW step of the clipped value loss on the samples' targets (s.returns, s.values: the
    played turns' R_k and V_old), micro-batch by micro-batch; returns the logged loss and grad norm."""
    n = sum(len(s.returns) for s in samples)
    total = 0.0
    for at in range(0, len(samples), args.micro_batch_size):
        chunk = samples[at:at + args.micro_batch_size]
        v = torch.cat(value_rows(model, chunk, K, args.bf16))
        R = torch.tensor([x for s in chunk for x in s.returns], dtype=v.dtype, device=v.device)
        old = torch.tensor([x for s in chunk for x in s.values], dtype=v.dtype, device=v.device)
        clipped = old + (v - old).clamp(-VALUE_CLIP, VALUE_CLIP)
        loss = 0.5 * torch.maximum((v - R) ** 2, (clipped - R) ** 2).sum() / n
        loss.backward()
        total += loss.item()
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm).item()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return {"value_loss": total, "value_grad_norm": grad_norm}


class Critic:
    """The critic of a run: its model and optimizer, loaded with the run and saved in its checkpoint
    (OUT/checkpoint/critic, its AdamW state in trainer_state.pt beside the policy's)."""

    def __init__(self, args, model):
        """model: policy.load_critic's, from the policy's pretrained model (a new critic) or from a
        checkpoint's critic/ folder."""
        self.model = model
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=args.critic_learning_rate, weight_decay=0.0)
        self.args, self.K = args, args.max_calls + 1

    def values(self, samples):
        """(len(samples), K) V(s_k): what the advantages use (its time kept in self.t_values)."""
        t0 = time.time()
        values = turn_values(self.model, samples, self.K, self.args.micro_batch_size or 8, self.args.bf16)
        self.t_values = time.time() - t0
        return values

    def targets(self, samples, R_T, R_O, turns, values, row):
        """Keep on each sample its played turns' V_old and R_k = A_k + V(s_k), A_k the row's GAE
        before whitening (scale "none"), for the update."""
        A = row(R_T, R_O, turns, self.args.alpha, "none", values=values, tokens=torch.ones_like(values))
        R = (A + values).view(len(samples), -1)
        for s, v, target, t in zip(samples, values.view(len(samples), -1), R, turns.flatten().tolist()):
            s.values, s.returns = v[:t].tolist(), target[:t].tolist()

    def update(self, samples):
        """--num-iterations steps of the value loss at a constant learning rate (verl's critic
        default: no warmup); logs its loss and time."""
        t0 = time.time()
        for _ in range(self.args.num_iterations):
            log = value_update(self.model, self.optimizer, samples, self.K, self.args)
        return {**log, "t_critic": time.time() - t0}
