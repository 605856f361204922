"""MT-GRPO advantages (Zeng et al. 2025, arXiv 2505.11821) and the two GRPO baselines.

Shapes: `turn_rewards` (groups, G, K-1) holds the turn-level rewards R^T_k of turns 1..K-1,
`outcome_rewards` (groups, G) the outcome reward R^O of each of the G rollouts of a question.
The result (groups, G, K) holds one advantage per turn; every model token of turn k carries A_k.

  norm(r)  = (r - mean_G(r)) / (std_G(r) + 1e-4)            group normalisation, std unbiased
             (scale="batch": the std of all rewards of the batch; "none": no division)
  GRPO-OR: A_k = norm(R^O)                                    outcome reward only
  GRPO-MR: A_k = norm(sum_l R^T_l + R^O)                      merged reward, same for all turns
  MT-GRPO: A_k = sum_{l=k}^{K-1} alpha^(l-k) norm(R^T_l) + alpha^(K-k) norm(R^O)
           (paper v2, appendix D; for K = 2: A_1 = norm(R^T) + norm(R^O), A_2 = norm(R^O))
"""
import torch

EPS = 1e-4


SCALES = ("group", "batch", "none")


def group_norm(r, scale="group"):
    """Centre along dim 1 (the G samples of a group), then divide by the std of the group (GRPO,
    the papers), by the std of every reward in r, all groups together ("batch"), or by nothing
    ("none", as Dr. GRPO). One sample, or equal rewards, give 0."""
    if r.shape[1] < 2:
        return torch.zeros_like(r)
    centred = r - r.mean(1, keepdim=True)
    group_std = r.std(1, keepdim=True, unbiased=True)
    divisor = {"group": group_std + EPS, "batch": r.std(unbiased=True) + EPS, "none": 1.0}[scale]
    return torch.where(group_std > 0, centred / divisor, torch.zeros_like(r))


def turn_advantages(turn_rewards, outcome_rewards, algo, alpha=1.0, scale="group"):
    """Per-turn advantages (groups, G, K) for algo in {"or", "mr", "mt"}."""
    turn_rewards = torch.as_tensor(turn_rewards, dtype=torch.float64)
    outcome_rewards = torch.as_tensor(outcome_rewards, dtype=torch.float64)
    if turn_rewards.dim() != 3 or outcome_rewards.shape != turn_rewards.shape[:2]:
        raise ValueError(f"expected turn_rewards (groups, G, K-1) and outcome_rewards (groups, G),"
                         f" got {tuple(turn_rewards.shape)} and {tuple(outcome_rewards.shape)}")
    K = turn_rewards.shape[2] + 1
    if algo == "or":
        a = group_norm(outcome_rewards, scale)
        return a[..., None].expand(-1, -1, K).clone()
    if algo == "mr":
        a = group_norm(turn_rewards.sum(2) + outcome_rewards, scale)
        return a[..., None].expand(-1, -1, K).clone()
    if algo != "mt":
        raise ValueError(f"algo must be 'or', 'mr' or 'mt', got {algo!r}")
    adv = torch.zeros(*outcome_rewards.shape, K, dtype=torch.float64)
    norm_outcome = group_norm(outcome_rewards, scale)
    norm_turn = [group_norm(turn_rewards[..., l], scale) for l in range(K - 1)]
    for k in range(K):  # turns are 0-based here: turn k has turn rewards l = k .. K-2
        adv[..., k] = alpha ** (K - 1 - k) * norm_outcome
        for l in range(k, K - 1):
            adv[..., k] += alpha ** (l - k) * norm_turn[l]
    return adv


def token_advantages(turn_of_token, turn_adv):
    """Broadcast per-turn advantages to tokens: token with turn index k gets turn_adv[k];
    prompt and environment tokens (turn index -1) get 0 and carry no loss."""
    return [turn_adv[k] if k >= 0 else 0.0 for k in turn_of_token]
