"""Exercise 1: group normalisation, the heart of GRPO.

Papers: MT-GRPO (Zeng et al. 2025, arXiv 2505.11821v1) and AT-GRPO (Zhao et al. 2025,
arXiv 2510.11062v1) both score a sample against the other samples of its group: the G answers to
one question (MT-GRPO) or the K candidates of one (environment, agent, turn) (AT-GRPO).

    norm(r)_i = (r_i - mean_G(r)) / (std_G(r) + 1e-4)       std unbiased: divides by G - 1

A sample better than its siblings gets a positive advantage, a worse one a negative advantage.
If all G samples got the same reward, nothing can be learnt from the group: the advantage is 0.

Mirrors: mtgrpo.group_norm.   Check your answer:  python exercises/check.py 1
"""
import torch

EPS = 1e-4


def group_norm(r):
    """Normalise rewards inside each group.

    r: float tensor (groups, G); row i holds the rewards of the G samples of group i.
    Returns a float tensor of the same shape.

    Hints:
      - each row is its own group: one mean and one std per row, kept in a shape that
        broadcasts against the row.
      - the std is the unbiased one: it divides by G - 1, not by G.
      - a row of equal rewards gives 0, never NaN; so does G = 1 (the unbiased std of one value
        divides by zero). Decide per row, and make sure no NaN reaches the result.
    """
    raise NotImplementedError
