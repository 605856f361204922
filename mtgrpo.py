"""MT-GRPO advantages (Zeng et al. 2025, arXiv 2505.11821v1, "Reinforcing Multi-Turn Reasoning in
LLM Agents via Turn-Level Credit Assignment") and the two GRPO baselines.

Turns are numbered k = 1..K as in the paper. `turn_rewards` (groups, G, K-1) holds the turn-level
rewards R^T_1 .. R^T_{K-1}, `outcome_rewards` (groups, G) the outcome reward R^O of each of the G
rollouts of a question. The result (groups, G, K) holds A_k at index k-1; every model token of
turn k carries A_k.

  norm(r)  = (r - mean_G(r)) / (std_G(r) + 1e-4)     group normalisation (GRPO), std unbiased
             (scale="batch": the std of all rewards of the batch; "none": no division)
  GRPO-OR: A_k = norm(R^O)                             outcome reward only
  GRPO-MR: A_k = norm(sum_l R^T_l + R^O)               merged reward, the same for every turn
  MT-GRPO: A_1 = norm(R^T) + norm(R^O), A_2 = norm(R^O)    the paper's two turns (K = 2)

For K > 2 turns (train.py --max-calls K-1) this file uses its own extension, not the paper's:
           A_k = sum_{l=k}^{K-1} alpha^(l-k) norm(R^T_l) + alpha^(K-k) norm(R^O)
each R^T_l normalised over the G independent episodes of the question, which by turn l have reached
different states. At K = 2 it gives A_1 = norm(R^T) + alpha * norm(R^O), A_2 = norm(R^O): alpha = 1,
the default, is the paper's form; another alpha weighs the outcome's share of A_1. The authors' code
has no K-turn estimator: SiliangZeng/Multi-Turn-RL-Agent at 7dbdd08, verifiers/trainers/
mt_grpo_env_trainer.py lines 151-208, cuts each episode at its first tool result; the tokens before
get norm(R^O) + norm(R^T), those after (a second call, the answer) norm(R^O), with R^T one number
per episode. The paper's later version (arXiv 2505.11821v2, 23 Oct 2025, "...via Turn-Level Reward
Design", Wei, Zeng et al.) is readable from its beginning only (its abstract and introduction): "we
extend GRPO and PPO to their respective multi-turn variants", with verifiable and LLM-as-judge turn
rewards. Its PPO form, MT-PPO (a critic and turn-level GAE), is critic.py (--algo mt_ppo), read from
the authors' code (docs/reference-code.md). Its K-turn GRPO is known here from summaries only, which
say it samples a tree per turn (G^(K-1) episodes) so that turn k is compared between siblings of one
state, as atgrpo.py does for the games; no readable text or code defines it, and it is not here.
docs/cheatsheet.md has the symbols.
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
    """Per-turn advantages (groups, G, K), A_k at index k-1, for algo in {"or", "mr", "mt"}."""
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
    R_T = {l: group_norm(turn_rewards[..., l - 1], scale) for l in range(1, K)}  # norm(R^T_l)
    R_O = group_norm(outcome_rewards, scale)                                      # norm(R^O)
    A = torch.zeros(*outcome_rewards.shape, K, dtype=torch.float64)
    for k in range(1, K + 1):
        A[..., k - 1] = sum((alpha ** (l - k) * R_T[l] for l in range(k, K)), alpha ** (K - k) * R_O)
    return A


def token_advantages(turn_of_token, turn_adv):
    """Per token of one sample: (advantage, loss mask). A model token of turn k (k >= 1) gets
    A_k = turn_adv[k-1] and mask 1; prompt and environment tokens (turn 0) get 0 and mask 0:
    they stay in attention but carry no loss."""
    adv = [float(turn_adv[k - 1]) if k > 0 else 0.0 for k in turn_of_token]
    return adv, [int(k > 0) for k in turn_of_token]
