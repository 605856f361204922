"""Exercise 4: the clipped GRPO loss with a k3 KL penalty.

Papers: the loss of GRPO (Shao et al. 2024, DeepSeekMath, arXiv 2402.03300), used by both
MT-GRPO (arXiv 2505.11821) and AT-GRPO (arXiv 2510.11062), with separate clip bounds eps_low
and eps_high (DAPO, Yu et al. 2025, arXiv 2503.14476), averaged over all trained tokens.

    r_t  = exp(logp_t - old_logp_t)                                  probability ratio pi / pi_old
    k3_t = exp(ref_t - logp_t) - (ref_t - logp_t) - 1                KL(pi || pi_ref) estimate, >= 0
    loss = -(1 / sum_t mask_t) * sum_t mask_t * [ min(r_t A_t, clip(r_t, 1 - eps_low, 1 + eps_high) A_t)
                                                  - beta * k3_t ]

The min makes the objective pessimistic: once the ratio has moved past the clip bound in the
direction the advantage rewards, the token's term is constant and its gradient is 0.

Mirrors: loss.k3_kl and loss.grpo_loss.   Check your answer:  python exercises/check.py 4
"""
import torch


def k3_kl(logp, ref_logp):
    """Per-token k3 estimate of KL(pi || pi_ref).

    logp, ref_logp: float tensors (B, T), log-probs of the sampled tokens under the policy and
    the reference model. Returns a tensor (B, T), >= 0, exactly 0 where logp == ref_logp.
    """
    raise NotImplementedError


def grpo_loss(logp, old_logp, ref_logp, adv, mask, beta, eps_low, eps_high):
    """The scalar loss to minimise (loss.backward() trains the policy).

    logp: (B, T) log-probs under the policy being trained (carries the gradient).
    old_logp: (B, T) log-probs under the policy that sampled the tokens (no gradient).
    ref_logp: (B, T) log-probs under the reference model.
    adv: (B, T) advantage of every token.   mask: (B, T) 1.0 on trained tokens, 0.0 elsewhere.
    beta: KL weight (0 turns the KL term off).   eps_low, eps_high: the clip bounds.
    Returns a scalar tensor.

    Hints:
      - torch.clamp(r, lo, hi) clips; torch.minimum(a, b) is the element-wise min.
      - divide by the number of trained tokens, sum(mask), not by B * T: prompt tokens must not
        dilute the loss.
      - the objective is maximised, the loss minimised: mind the sign, and of the KL's too.
      - use your k3_kl.
    """
    raise NotImplementedError
