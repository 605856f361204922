"""AT-GRPO (Zhao et al. 2025, "Stronger Together: On-Policy Reinforcement Learning for Collaborative
LLMs", arXiv 2510.11062v1; its v5, ICLR 2026, is "Stronger-MAS: Multi-Agent Reinforcement Learning
for Collaborative LLMs"): agent- and turn-wise groups, filled by tree-structured sampling.

Where the defaults depart from the paper: each role's team term comes from the state its own answer
made (`--team-term own`; PettingLLMs adds the executor's to both, `--team-term shared`), and the
team rewards are this project's (docs/planpath.md, docs/sokoban.md); Sokoban divides by the step's
reward std (`--scale-rewards batch`), Plan-Path by each group's, the paper's; the update is
train.py's (one token mean over the step, mu = 1, beta = 0: its first lines say how they depart).

Tree sampling, for every environment e, turn t and agent a (in the workflow's order):
  1. sample K candidates from the one prompt that agent a sees at turn t,
  2. score each candidate on its own copy of the environment (reward = local + alpha * team;
     with a team term shared by the turn's agents, the earlier agents get it once the turn is over),
  3. record the K as one group keyed (e, a, t): they share a prompt, so comparing them is fair,
  4. continue from the best candidate's copy (greedy argmax, ties to the lowest index);
     every branch shares that state from then on.
Advantage inside a group: A = (r - mean) / (std + 1e-4), 0 for equal rewards (mtgrpo.group_norm,
the paper's). `--scale-rewards batch` divides by the std of all the step's rewards instead; the
Sokoban defaults use it (docs/sokoban.md says why).

The GRPO baseline (`--algo grpo`) plays K independent trajectories per level instead
(`parallel_rollout`, one answer per agent and turn) and normalises each trajectory's return over
the K of its level (`trajectory_samples`): after the first turn the trajectories' states differ,
so no two samples of a turn share a prompt. GiGPO (`--algo gigpo`, `gigpo_samples`) groups the same
K trajectories twice: by level, and by the state an answer was given at (its anchor state).

K is the paper's: the candidates sampled per group (`--num-generations`). In mtgrpo.py, K is the
MT-GRPO paper's: the number of turns. Turns are numbered from 1 as in both papers.

This module knows no environment and no model. An environment is any object with
    roles             the agents in the order they act in a turn, e.g. ("planner", "executor")
    turn              the turns completed so far (0 at the start)
    done              True once the episode is over
    team_share        after a turn: the reward its earlier agents get on top of theirs (0: none)
    copy()            an independent copy (each candidate is scored on its own)
    messages(role)    the chat messages of the prompt the agent `role` sees now
    act(role, text)   play that agent's answer; returns its reward
and nothing else is read (ENVIRONMENT; env_two_roles.TwoRoleTask is one, and tests/test_atgrpo.py
plays a toy one that has only these). `sampler(role, message_lists)` is the policy
(policy.chat_sampler): it returns one (prompt_ids, response_ids, text) per prompt, routed to that
role's model.
"""
from dataclasses import dataclass

import torch

from mtgrpo import group_norm
from sample import Sample

ENVIRONMENT = ("roles", "turn", "done", "team_share", "copy", "messages", "act")  # what an environment must have


# ---------------------------------------------------------------- AT-GRPO: tree sampling
@dataclass
class Group:
    key: tuple  # (environment id, agent, turn): never merged across environments or turns
    candidates: list  # K (prompt_ids, response_ids, text)
    rewards: list  # K rewards, each scored on its own copy of the environment
    chosen: int  # index of the candidate the episode continued from
    share: float = 0.0  # the team term added to every reward once the turn was over (team_share)


def best_index(rewards):
    """Greedy argmax; ties go to the lowest index."""
    return max(range(len(rewards)), key=lambda k: (rewards[k], -k))


def to_sample(candidate, advantage, role, turn, rewards, group_name):
    """Prompt (mask 0) + response (mask 1, carrying the advantage) of one agent at one turn."""
    prompt, response, _ = candidate
    return Sample(ids=list(prompt) + list(response), mask=[0] * len(prompt) + [1] * len(response),
                  adv=[0.0] * len(prompt) + [advantage] * len(response), role=role,
                  turn=[0] * len(prompt) + [turn] * len(response), rewards=rewards, group_name=group_name)


def tree_step(env, env_id, role, candidates):
    """One node of the tree: score each of the K candidates on its own copy of `env` (never on
    `env` itself), record them as the group (env_id, role, turn), and return that group and the
    copy of the best candidate, from which the episode continues."""
    branches = [env.copy() for _ in candidates]
    rewards = [b.act(role, text) for b, (_, _, text) in zip(branches, candidates)]
    chosen = best_index(rewards)
    return Group((env_id, role, env.turn + 1), candidates, rewards, chosen), branches[chosen]


def tree_rollout(envs, env_ids, sampler, K):
    """Play every environment to the end with tree sampling: at each turn, for each agent in
    order, K candidates from the agent's one prompt (all environments in one batched call), then
    tree_step. Returns the groups and the final environments (each the chosen branch)."""
    envs, groups = list(envs), []
    while any(not e.done for e in envs):
        turn = {}  # environment -> its groups of this turn
        for role in envs[0].roles:
            active = [i for i, e in enumerate(envs) if not e.done]
            if not active:
                break
            outs = sampler(role, [envs[i].messages(role) for i in active for _ in range(K)])
            for j, i in enumerate(active):
                group, envs[i] = tree_step(envs[i], env_ids[i], role, outs[j * K:(j + 1) * K])
                groups.append(group)
                turn.setdefault(i, []).append(group)
        for i, played in turn.items():
            for group in played[:-1]:  # one number for all K: the choice stays, and so do the
                # advantages under group scaling; under batch scaling it changes the step's std
                group.rewards, group.share = [r + envs[i].team_share for r in group.rewards], envs[i].team_share
    return groups, envs


def tree_samples(groups, scale="group"):
    """AT-GRPO: one Sample per candidate, advantage normalised inside its (env, agent, turn)."""
    adv = tree_advantages(groups, scale)
    return [to_sample(c, a, g.key[1], g.key[2], [r], f"level {g.key[0]} / {g.key[1]} / turn {g.key[2]}")
            for g, row in zip(groups, adv) for c, a, r in zip(g.candidates, row, g.rewards)]


def tree_advantages(groups, scale="group"):
    """The advantage of every candidate, group by group: its reward normalised among the K of its group."""
    if not groups:
        return []
    return group_norm(torch.tensor([g.rewards for g in groups], dtype=torch.float64), scale).tolist()


# ---------------------------------------------------------------- the GRPO baseline: trajectories
@dataclass
class Turn:
    """One agent's answer in one trajectory (no branching): the baseline and greedy evaluation."""
    role: str
    turn: int  # 1-based
    candidate: tuple  # (prompt_ids, response_ids, text)
    reward: float
    share: float = 0.0  # the team term added to the reward once the turn was over (team_share)


def parallel_rollout(envs, sampler):
    """Play every environment to the end with one answer per agent and turn, no branching.
    Returns each environment's list of Turns (its trajectory) and the final environments."""
    trajectories = [[] for _ in envs]
    while any(not e.done for e in envs):
        played = {}  # environment -> its answers of this turn
        for role in envs[0].roles:
            active = [i for i, e in enumerate(envs) if not e.done]
            if not active:
                break
            outs = sampler(role, [envs[i].messages(role) for i in active])
            for i, candidate in zip(active, outs):
                turn = envs[i].turn + 1
                trajectories[i].append(Turn(role, turn, candidate, envs[i].act(role, candidate[2])))
                played.setdefault(i, []).append(trajectories[i][-1])
        for i, answers in played.items():
            for t in answers[:-1]:
                t.reward, t.share = t.reward + envs[i].team_share, envs[i].team_share
    return trajectories, envs


def trajectory_samples(trajectories, level_ids, K, scale="group"):
    """Baseline GRPO grouping: trajectories j = 0..K-1 belong to level_ids[0], K..2K-1 to
    level_ids[1], ...; a trajectory's return (the sum of its agents' rewards) is normalised over
    the K trajectories of its level, and every answer of the trajectory carries that advantage."""
    returns, adv = episode_advantages(trajectories, K, scale)
    return [to_sample(t.candidate, adv[j], t.role, t.turn, [returns[j]], f"trajectories of level {level_ids[j // K]}")
            for j, trajectory in enumerate(trajectories) for t in trajectory]


def episode_advantages(trajectories, K, scale="group"):
    """(returns, advantages) of the trajectories: each return normalised over the K of its level."""
    returns = [sum(t.reward for t in trajectory) for trajectory in trajectories]
    return returns, group_norm(torch.tensor(returns, dtype=torch.float64).view(-1, K), scale).view(-1).tolist()


# ---------------------------------------------------------------- GiGPO: anchor-state groups
def gigpo_samples(trajectories, level_ids, K, omega=1.0, gamma=0.95, scale="group"):
    """GiGPO (Feng et al. 2025, "Group-in-Group Policy Optimization for LLM Agent Training", arXiv
    2505.10978; public code verl-agent, gigpo/core_gigpo.py) on the baseline's K trajectories per
    level. Every answer a_t of trajectory i carries
        A = A^E(i) + omega * A^S(a_t)                                   (eq. 8)
    A^E: the trajectory's return normalised over the K of its level, as trajectory_samples (eq. 3).
    A^S: the answer's discounted return-to-go R_t = sum_{k>=t} gamma^(k-t) r_k over its trajectory's
    answers in play order (eq. 5), normalised among the answers given at the same state in the K
    trajectories of its level, the anchor state (eq. 6-7). The same state is the same prompt:
    answers whose prompt ids are identical. A state reached once, or only with equal returns, gives
    A^S = 0. scale "group" divides both by their group's std (the paper's F_norm = std, the code's
    mean_std_norm); "none" only centres (F_norm = 1, the code's mean_norm, used by its example
    runs); "batch" divides A^E by the step's std and A^S by its group's. omega = 1 and
    gamma = 0.95 are the code's example settings."""
    returns = [sum(t.reward for t in trajectory) for trajectory in trajectories]
    adv = gigpo_advantages(trajectories, K, omega, gamma, scale)
    return [to_sample(t.candidate, adv[j][n], t.role, t.turn, [returns[j]], f"trajectories of level {level_ids[j // K]}")
            for j, trajectory in enumerate(trajectories) for n, t in enumerate(trajectory)]


def gigpo_advantages(trajectories, K, omega=1.0, gamma=0.95, scale="group"):
    """A^E(i) + omega * A^S(a_t) of every answer, trajectory by trajectory (gigpo_samples)."""
    episode = episode_advantages(trajectories, K, scale)[1]
    to_go = [discounted_returns([t.reward for t in trajectory], gamma) for trajectory in trajectories]
    anchors = {}  # (level, prompt ids) -> [(trajectory, answer)]: the answers given at that state
    for j, trajectory in enumerate(trajectories):
        for n, t in enumerate(trajectory):
            anchors.setdefault((j // K, tuple(t.candidate[0])), []).append((j, n))
    step = {}
    for members in anchors.values():
        r = torch.tensor([[to_go[j][n] for j, n in members]], dtype=torch.float64)
        step.update(zip(members, group_norm(r, "none" if scale == "none" else "group")[0].tolist()))
    return [[episode[j] + omega * step[(j, n)] for n in range(len(trajectory))]
            for j, trajectory in enumerate(trajectories)]


def discounted_returns(rewards, gamma):
    """[R_1, ..., R_T] with R_t = r_t + gamma * R_(t+1): the return-to-go of each step (GiGPO eq. 5)."""
    out, running = [], 0.0
    for r in reversed(rewards):
        running = r + gamma * running
        out.append(running)
    return out[::-1]


# ---------------------------------------------------------------- one training step's rollout
def rollout_samples(make_env, env_ids, sampler, K, algo="at", scale="group"):
    """AT-GRPO tree sampling (algo "at") or K parallel trajectories per environment, grouped by
    trajectory (algo "grpo", the GRPO baseline) or by trajectory and anchor state (algo "gigpo"),
    at the same budget: K samples per (environment, agent, turn).
    make_env(env_id) builds a fresh environment. Returns the samples, the (role, reward) of every
    answer the episodes played, and the final environments."""
    if algo == "at":
        groups, final = tree_rollout([make_env(e) for e in env_ids], env_ids, sampler, K)
        played = [(g.key[1], g.rewards[g.chosen]) for g in groups]
        return tree_samples(groups, scale), played, final
    trajectories, final = parallel_rollout([make_env(e) for e in env_ids for _ in range(K)], sampler)
    played = [(t.role, t.reward) for trajectory in trajectories for t in trajectory]
    grouped = gigpo_samples(trajectories, env_ids, K, scale=scale) if algo == "gigpo" else \
        trajectory_samples(trajectories, env_ids, K, scale)
    return grouped, played, final
