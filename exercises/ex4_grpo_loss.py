"""Exercise 4: the clipped GRPO loss with a k3 KL penalty, and how it is averaged.

Papers: the loss of GRPO (Shao et al. 2024, DeepSeekMath, arXiv 2402.03300, eq. 3), used by both
MT-GRPO (arXiv 2505.11821v1) and AT-GRPO (arXiv 2510.11062v1), with separate clip bounds eps_low
and eps_high (DAPO, Yu et al. 2025, arXiv 2503.14476). Per trained token t of row (sample) i:

    r_t  = exp(logp_t - old_logp_t)                                  probability ratio pi / pi_old
    k3_t = exp(ref_t - logp_t) - (ref_t - logp_t) - 1                KL(pi || pi_ref) estimate, >= 0
    J_t  = min(r_t A_t, clip(r_t, 1 - eps_low, 1 + eps_high) A_t) - beta * k3_t

The loss is minus an average of the J_t over the trained tokens (mask 1). Which average is a
choice of its own; G is the number of rows, |o_i| the number of trained tokens of row i:

    loss_type="token":  loss = -(1 / sum_i |o_i|) * sum_i sum_t J_{i,t}
        one token mean over all trained tokens: a long row weighs more than a short one. This is
        the project's default, over the whole step (TRL calls it `dapo`; the MT-GRPO reference
        code took a token mean per micro-batch instead, TRL's `bnpo`).
    loss_type="seq":    loss = -(1 / G) * sum_i (1 / |o_i|) * sum_t J_{i,t}
        DeepSeekMath eq. 3 as printed: each row's token mean, then the mean over the G rows, so
        every row weighs the same, however long. A row with no trained token (|o_i| = 0) adds 0
        and still counts in G.

With one row the two agree; with rows of different lengths they differ, even in sign.

The min makes the objective pessimistic: once the ratio has moved past the clip bound in the
direction the advantage rewards, the token's term is constant and its gradient is 0.

Mirrors: loss.k3_kl and loss.grpo_loss (the averages: loss.loss_weights, `--loss-type`).
Check your answer:  python exercises/check.py 4
"""
import torch


def k3_kl(logp, ref_logp):
    """Per-token k3 estimate of KL(pi || pi_ref).

    logp, ref_logp: float tensors (B, T), log-probs of the sampled tokens under the policy and
    the reference model. Returns a tensor (B, T), >= 0, exactly 0 where logp == ref_logp.
    """
    raise NotImplementedError


def grpo_loss(logp, old_logp, ref_logp, adv, mask, beta, eps_low, eps_high, loss_type="token"):
    """The scalar loss to minimise (loss.backward() trains the policy).

    logp: (B, T) log-probs under the policy being trained (carries the gradient).
    old_logp: (B, T) log-probs under the policy that sampled the tokens (no gradient).
    ref_logp: (B, T) log-probs under the reference model.
    adv: (B, T) advantage of every token.   mask: (B, T) 1.0 on trained tokens, 0.0 elsewhere.
    beta: KL weight (0 turns the KL term off).   eps_low, eps_high: the clip bounds.
    loss_type: "token" or "seq", the average of the module docstring (B rows: G = B).
    Returns a scalar tensor.

    Hints:
      - the clip and the min act per token, on tensors: no Python loop over tokens is needed.
      - masked tokens (prompt, tool results) count in neither average: neither in the sums nor
        in |o_i|, so divide by the trained tokens, never by T or B * T.
      - "seq" needs each row's own sum and its own |o_i| before the mean over rows.
      - a row with no trained token has |o_i| = 0: it must add 0, not NaN.
      - the objective is maximised, the loss minimised: mind the sign, and the KL's too.
      - use your k3_kl.
    """
    raise NotImplementedError
