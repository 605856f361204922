"""AT-GRPO (Zhao et al. 2025, "Stronger Together: On-Policy RL for Collaborative LLMs",
arXiv 2510.11062): agent- and turn-wise groups, filled by tree-structured sampling.

Tree sampling, for every environment e, turn t and agent a (in the workflow's order):
  1. sample K candidates from the one prompt that agent a sees at turn t,
  2. score each candidate on its own copy of the environment (reward = local + alpha * team),
  3. record the K as one group keyed (e, a, t): they share a prompt, so comparing them is fair,
  4. continue from the best candidate's copy (greedy argmax, ties to the lowest index);
     every branch shares that state from then on.
Advantage inside a group: A = (r - mean) / (std + 1e-4), 0 for equal rewards (mtgrpo.group_norm;
`--scale-rewards batch` divides by the std of all the step's rewards instead).

The baseline `grpo` grouping runs K independent trajectories per environment (one candidate per
agent and turn) and normalises the trajectory reward over the K: after the first turn the
trajectories' states differ, so no two samples of a turn share a prompt.

Environments need: roles, done, copy(), messages(role), act(role, text) -> reward (env_sokoban).
`sample(role, message_lists)` is the policy: it returns one (prompt_ids, response_ids, text) per
prompt, routed to that role's model.
"""
from dataclasses import dataclass

import torch

import env_sokoban
from mtgrpo import group_norm
from policy import Sample


@dataclass
class Group:
    key: tuple  # (environment id, agent, turn): never merged across environments or turns
    candidates: list  # K (prompt_ids, response_ids, text)
    rewards: list  # K rewards, each scored on its own copy of the environment
    chosen: int  # index of the candidate the episode continued from


def best_index(rewards):
    """Greedy argmax; ties go to the lowest index."""
    return max(range(len(rewards)), key=lambda k: (rewards[k], -k))


def tree_rollout(envs, env_ids, sample, K):
    """Play every environment to the end with tree sampling; returns the groups and the final
    environments (each the chosen branch)."""
    envs, groups = list(envs), []
    while any(not e.done for e in envs):
        for role in envs[0].roles:
            active = [i for i, e in enumerate(envs) if not e.done]
            if not active:
                break
            outs = sample(role, [envs[i].messages(role) for i in active for _ in range(K)])
            for j, i in enumerate(active):
                candidates = outs[j * K:(j + 1) * K]
                branches = [envs[i].copy() for _ in range(K)]
                rewards = [b.act(role, text) for b, (_, _, text) in zip(branches, candidates)]
                chosen = best_index(rewards)
                groups.append(Group((env_ids[i], role, envs[i].turn), candidates, rewards, chosen))
                envs[i] = branches[chosen]
    return groups, envs


def tree_samples(groups, scale="group"):
    """AT-GRPO: one Sample per candidate, advantage normalised inside its (env, agent, turn)."""
    if not groups:
        return []
    adv = group_norm(torch.tensor([g.rewards for g in groups], dtype=torch.float64), scale).tolist()
    return [to_sample(c, a, g.key, [r])
            for g, row in zip(groups, adv) for c, a, r in zip(g.candidates, row, g.rewards)]


def trajectory_samples(groups, env_ids, K, scale="group"):
    """Baseline GRPO grouping: env_ids[j] is the level of trajectory j (K trajectories per
    level, one candidate per group); the trajectory reward is the sum of its agents' rewards,
    normalised over the K trajectories of a level; every sample of a trajectory gets its A."""
    returns = {j: 0.0 for j in range(len(env_ids))}
    for g in groups:
        returns[g.key[0]] += g.rewards[0]
    r = torch.tensor([returns[j] for j in range(len(env_ids))], dtype=torch.float64).view(-1, K)
    adv = group_norm(r, scale).view(-1).tolist()
    return [to_sample(g.candidates[0], adv[g.key[0]], g.key, [returns[g.key[0]]], f"trajectories of level {g.key[0] // K}")
            for g in groups]


def to_sample(candidate, advantage, key, rewards, group=None):
    """Prompt (mask 0) + response (mask 1, carrying the advantage) of agent key[1] at turn key[2]."""
    (prompt, response, _), (env, role, turn) = candidate, key
    return Sample(ids=list(prompt) + list(response), mask=[0] * len(prompt) + [1] * len(response),
                  adv=[0.0] * len(prompt) + [advantage] * len(response), role=role,
                  turn=[-1] * len(prompt) + [turn] * len(response), rewards=rewards,
                  group=group or f"level {env} / {role} / turn {turn + 1}")


# ---------------------------------------------------------------- training on Sokoban
def make_tasks(seeds, args):
    """Seeded levels with the curriculum knobs (room size, boxes, reverse steps, turn limit)."""
    return [env_sokoban.SokobanTask(env_sokoban.level_for(s, args.size, args.boxes, args.reverse_steps),
                                    args.max_turns, args.team_alpha, planner=not args.single_agent)
            for s in seeds]


def rollout_samples(seeds, sample, args):
    """AT-GRPO tree sampling (K = num_generations) or the baseline's K parallel trajectories,
    at the same sample budget: K samples per (level, agent, turn)."""
    K = args.num_generations
    if args.algo == "at":
        groups, final = tree_rollout(make_tasks(seeds, args), seeds, sample, K)
        return tree_samples(groups, args.scale_rewards), groups, final
    tasks = make_tasks([s for s in seeds for _ in range(K)], args)
    groups, final = tree_rollout(tasks, list(range(len(tasks))), sample, 1)
    return trajectory_samples(groups, list(range(len(tasks))), K, args.scale_rewards), groups, final


def episode_metrics(groups, final):
    """Success rate, turns and moves played, the box-goal distance left, and the mean reward of
    each role's chosen samples."""
    log = {"success": sum(t.solved for t in final) / len(final),
           "turns": sum(t.turn for t in final) / len(final),
           "moves": sum(t.moves for t in final) / len(final),
           "box_distance": sum(env_sokoban.box_distance(t.state) for t in final) / len(final)}
    for role in env_sokoban.ROLES:
        chosen = [g.rewards[g.chosen] for g in groups if g.key[1] == role]
        if chosen:
            log[f"reward_{role}"] = sum(chosen) / len(chosen)
    return log


def evaluate(sample, seeds, args):
    """Play the levels with one candidate per agent and turn (greedy in train.py's evaluation)."""
    groups, final = tree_rollout(make_tasks(seeds, args), seeds, sample, 1)
    return episode_metrics(groups, final)
