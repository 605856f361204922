"""The field's turn credit for search episodes: estimators other projects ship, each as its source
computes it, so that tools/credit.py can score it against the true advantage and train.py can
train with it (--algo, estimators.py's table). mtgrpo.py keeps the MT-GRPO paper's own.

All take mtgrpo.py's layout: turn_rewards (groups, G, K-1) R^T_1..R^T_{K-1}, outcome_rewards
(groups, G) R^O, turns (groups, G) the turns each episode played (1..K), and return (groups, G, K),
A_k at index k-1; a turn an episode did not play gets 0 (it has no token). An episode's own
reward sequence (`step_rewards`) is r_k = R^T_k for its turns before the last and r_T = R^O at
its last turn T: a turn that answers earns the outcome, a turn that calls earns its call's reward.
"""
import torch

KEVIN_GAMMA = 0.4  # Kevin (arXiv 2507.11948): "sum with gamma = 0.4" was its best turn return


def step_rewards(turn_rewards, outcome_rewards, turns):
    """(r, played): r (groups, G, K) the reward of each turn an episode played, R^T_k before its
    last turn and R^O at it, 0 after; played (groups, G, K) True for k <= T."""
    R_T = torch.as_tensor(turn_rewards, dtype=torch.float64)
    R_O = torch.as_tensor(outcome_rewards, dtype=torch.float64)
    T = torch.as_tensor(turns, dtype=torch.long)
    K = R_T.shape[2] + 1
    if T.shape != R_O.shape or bool(((T < 1) | (T > K)).any()):
        raise ValueError(f"turns must be (groups, G) = {tuple(R_O.shape)} with values 1..{K}, got "
                         f"{tuple(T.shape)} {T.unique().tolist()}")
    k = torch.arange(1, K + 1)
    played = k <= T[..., None]
    last = k == T[..., None]
    r = torch.where(played & ~last, torch.cat([R_T, torch.zeros_like(R_O)[..., None]], 2), torch.zeros(()))
    return torch.where(last, R_O[..., None], r), played


def turn_index_loo(turn_rewards, outcome_rewards, turns, alpha=1.0, scale="group"):
    """Per-turn-index leave-one-out (PipelineRL PR #135, ServiceNow/PipelineRL at 58d3934,
    pipelinerl/finetune/rl/__init__.py lines 477-520, populate_rl_data). Samples are grouped by
    (group, turn index k); each turn's step reward is the episode's reward (pipelinerl/rollouts.py
    lines 79-83 put the rollout's reward on every step; here R = sum_k R^T_k + R^O). Among the
    episodes that played turn k:
        A_{i,k} = (R_i - mean_{j != i} R_j) / (std_j R_j + 1e-4)
    the std over all of them (pandas, ddof 1), the episode included; 0 where one episode alone
    played turn k. scale "none" does not divide (its divide_advantage_by_std false), "batch"
    divides by the std of every played turn's R in the step. alpha is not used."""
    r, played = step_rewards(turn_rewards, outcome_rewards, turns)
    R = (r.sum(2, keepdim=True) * played).double()  # the episode's reward on each turn it played
    n = played.sum(1, keepdim=True)  # episodes that played turn k
    mean_others = (R.sum(1, keepdim=True) - R) / (n - 1).clamp(min=1)
    mean = R.sum(1, keepdim=True) / n.clamp(min=1)
    std = (((R - mean) ** 2 * played).sum(1, keepdim=True) / (n - 1).clamp(min=1)).sqrt()
    divisor = {"group": std + 1e-4, "batch": R[played].std() + 1e-4 if played.sum() > 1 else 1.0, "none": 1.0}[scale]
    return torch.where(played & (n > 1), (R - mean_others) / divisor, torch.zeros(()))


def discounted_returns(turn_rewards, outcome_rewards, turns, alpha=1.0, scale="group", gamma=KEVIN_GAMMA):
    """Discounted per-turn returns, normalised over every turn of the group (Kevin, arXiv
    2507.11948, as PrimeIntellect-ai/verifiers PR #536 implements it: verifiers/rl/trainer/
    generator.py lines 670-694, _compute_stepwise_returns, and 504-516; gamma 0.4, its default,
    rl/trainer/config.py lines 131-155). Each turn t is a sample with the return
        R_t = sum_{k=t}^{T} gamma^(k-t) r_k
    and A_t = (R_t - mean) / (std + 1e-8) over all the played turns of the G episodes of a question,
    the std the population one (np.std). scale "none" only centres, "batch" divides by the std of
    every played turn's return in the step. alpha is not used (gamma is Kevin's)."""
    r, played = step_rewards(turn_rewards, outcome_rewards, turns)
    R = torch.zeros_like(r)
    running = torch.zeros_like(r[..., 0])
    for k in reversed(range(r.shape[2])):
        running = r[..., k] + gamma * running
        R[..., k] = running
    flat, mask = R.flatten(1), played.flatten(1)
    n = mask.sum(1, keepdim=True).clamp(min=1)
    mean = (flat * mask).sum(1, keepdim=True) / n
    std = (((flat - mean) ** 2 * mask).sum(1, keepdim=True) / n).sqrt()
    divisor = {"group": std + 1e-8, "batch": R[played].std(unbiased=False) + 1e-8, "none": 1.0}[scale]
    return torch.where(mask, (flat - mean) / divisor, torch.zeros(())).view_as(R)


def last_step_broadcast(turn_rewards, outcome_rewards, turns, alpha=1.0, scale="group"):
    """Last-step broadcast (Trinity-RFT step_wise_grpo; SkyRL's step-wise trajectories, PR #436;
    rLLM's stepwise_advantage.mode broadcast): the last step's reward, normalised over the group's
    episodes, (r_T - mean) / (std + 1e-6), copied to every turn. In search the last step earns R^O,
    so this is GRPO-OR up to the epsilon (tests/test_field.py): it is no row of estimators.py."""
    r, played = step_rewards(turn_rewards, outcome_rewards, turns)
    last = (r * (torch.arange(1, r.shape[2] + 1) == played.sum(2, keepdim=True))).sum(2)
    centred = last - last.mean(1, keepdim=True)
    std = last.std(1, keepdim=True) if last.shape[1] > 1 else torch.ones_like(last)
    return torch.where(played, (centred / (std + 1e-6))[..., None], torch.zeros(()))
