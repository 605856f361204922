"""Exercise 2: turn-level advantages, MT-GRPO against the two GRPO baselines.

Paper: MT-GRPO, Zeng et al. 2025, arXiv 2505.11821v1. An episode has K turns; turns 1..K-1 earn a
turn reward R^T_k (e.g. "the search found the answer"), the episode earns an outcome reward R^O.
norm is the group normalisation of exercise 1, applied to each reward separately.

    GRPO-OR:  A_k = norm(R^O)                        outcome only, the same for every turn
    GRPO-MR:  A_k = norm(sum_l R^T_l + R^O)          merged reward, the same for every turn
    MT-GRPO:  A_k = sum_{l=k}^{K-1} alpha^(l-k) norm(R^T_l) + alpha^(K-k) norm(R^O)
              (this project's K-turn extension of the paper's two turns; at K = 2,
              A_1 = norm(R^T) + alpha * norm(R^O) and A_2 = norm(R^O): alpha = 1, the default,
              is the paper's MT-GRPO, A_1 = norm(R^T) + norm(R^O))

Turn k is credited with its own turn reward and the rewards of the turns after it, each
discounted by alpha once per turn of distance; the outcome counts as turn K.

Mirrors: mtgrpo.turn_advantages.   Check your answer:  python exercises/check.py 2
"""
import torch

# You need norm from exercise 1: paste your group_norm here, or import it:
# from ex1_group_norm import group_norm


def turn_advantages(turn_rewards, outcome_rewards, algo, alpha=1.0):
    """Per-turn advantages of every sample.

    turn_rewards: float tensor (groups, G, K-1); [..., k-1] is R^T_k, the reward of turn k.
    outcome_rewards: float tensor (groups, G), R^O.
    algo: "or", "mr" or "mt".   alpha: the discount of MT-GRPO (ignored by "or" and "mr").
    Returns a float64 tensor (groups, G, K) where [..., k-1] is A_k.

    Hints:
      - turns are 1-based in the formula, 0-based in the tensors: R^T_l is turn_rewards[..., l-1].
      - normalise each reward tensor (groups, G) on its own, then add: norm(a) + norm(b) is not
        norm(a + b).
      - K = turn_rewards.shape[2] + 1. Check the exponents on K = 3 by hand: A_3 = norm(R^O),
        A_2 = norm(R^T_2) + alpha * norm(R^O).
      - "or" and "mr" give every turn the same advantage: one number per sample, copied to each
        of its K turns.
    """
    raise NotImplementedError
