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

The GRPO baseline (`--algo grpo`) plays K independent trajectories per level instead
(`parallel_rollout`, one answer per agent and turn) and normalises each trajectory's return over
the K of its level (`trajectory_samples`): after the first turn the trajectories' states differ,
so no two samples of a turn share a prompt.

Environments need: roles, turn (turns completed), done, copy(), messages(role), act(role, text)
-> reward (env_sokoban.SokobanTask). `sample(role, message_lists)` is the policy: it returns one
(prompt_ids, response_ids, text) per prompt, routed to that role's model. Turns are numbered from
1 as in the paper.
"""
from collections import Counter
from dataclasses import dataclass

import torch

import env_sokoban
import sokoban
from loss import Sample
from mtgrpo import group_norm


# ---------------------------------------------------------------- AT-GRPO: tree sampling
@dataclass
class Group:
    key: tuple  # (environment id, agent, turn): never merged across environments or turns
    candidates: list  # K (prompt_ids, response_ids, text)
    rewards: list  # K rewards, each scored on its own copy of the environment
    chosen: int  # index of the candidate the episode continued from


def best_index(rewards):
    """Greedy argmax; ties go to the lowest index."""
    return max(range(len(rewards)), key=lambda k: (rewards[k], -k))


def tree_step(env, env_id, role, candidates):
    """One node of the tree: score each of the K candidates on its own copy of `env` (never on
    `env` itself), record them as the group (env_id, role, turn), and return that group and the
    copy of the best candidate, from which the episode continues."""
    branches = [env.copy() for _ in candidates]
    rewards = [b.act(role, text) for b, (_, _, text) in zip(branches, candidates)]
    chosen = best_index(rewards)
    return Group((env_id, role, env.turn + 1), candidates, rewards, chosen), branches[chosen]


def tree_rollout(envs, env_ids, sample, K):
    """Play every environment to the end with tree sampling: at each turn, for each agent in
    order, K candidates from the agent's one prompt (all environments in one batched call), then
    tree_step. Returns the groups and the final environments (each the chosen branch)."""
    envs, groups = list(envs), []
    while any(not e.done for e in envs):
        for role in envs[0].roles:
            active = [i for i, e in enumerate(envs) if not e.done]
            if not active:
                break
            outs = sample(role, [envs[i].messages(role) for i in active for _ in range(K)])
            for j, i in enumerate(active):
                group, envs[i] = tree_step(envs[i], env_ids[i], role, outs[j * K:(j + 1) * K])
                groups.append(group)
    return groups, envs


def tree_samples(groups, scale="group"):
    """AT-GRPO: one Sample per candidate, advantage normalised inside its (env, agent, turn)."""
    if not groups:
        return []
    adv = group_norm(torch.tensor([g.rewards for g in groups], dtype=torch.float64), scale).tolist()
    return [to_sample(c, a, g.key[1], g.key[2], [r], f"level {g.key[0]} / {g.key[1]} / turn {g.key[2]}")
            for g, row in zip(groups, adv) for c, a, r in zip(g.candidates, row, g.rewards)]


# ---------------------------------------------------------------- the GRPO baseline: trajectories
@dataclass
class Turn:
    """One agent's answer in one trajectory (no branching): the baseline and greedy evaluation."""
    role: str
    turn: int  # 1-based
    candidate: tuple  # (prompt_ids, response_ids, text)
    reward: float


def parallel_rollout(envs, sample, shown=None):
    """Play every environment to the end with one answer per agent and turn, no branching.
    Returns each environment's list of Turns (its trajectory) and the final environments.
    shown (the board ablation): environment i's prompts come from shown[i], another level that
    takes the same answers (and starts over when it is solved), so the policy never sees its
    own board."""
    trajectories, shown = [[] for _ in envs], list(shown or envs)
    while any(not e.done for e in envs):
        for role in envs[0].roles:
            active = [i for i, e in enumerate(envs) if not e.done]
            if not active:
                break
            outs = sample(role, [shown[i].messages(role) for i in active])
            for i, candidate in zip(active, outs):
                turn = envs[i].turn + 1
                trajectories[i].append(Turn(role, turn, candidate, envs[i].act(role, candidate[2])))
                if shown[i] is not envs[i] and not envs[i].done:
                    shown[i].act(role, candidate[2])
                    shown[i] = shown[i].restart() if shown[i].solved else shown[i]
    return trajectories, envs


def trajectory_samples(trajectories, level_ids, K, scale="group"):
    """Baseline GRPO grouping: trajectories j = 0..K-1 belong to level_ids[0], K..2K-1 to
    level_ids[1], ...; a trajectory's return (the sum of its agents' rewards) is normalised over
    the K trajectories of its level, and every answer of the trajectory carries that advantage."""
    returns = [sum(t.reward for t in trajectory) for trajectory in trajectories]
    adv = group_norm(torch.tensor(returns, dtype=torch.float64).view(-1, K), scale).view(-1).tolist()
    return [to_sample(t.candidate, adv[j], t.role, t.turn, [returns[j]], f"trajectories of level {level_ids[j // K]}")
            for j, trajectory in enumerate(trajectories) for t in trajectory]


def to_sample(candidate, advantage, role, turn, rewards, group):
    """Prompt (mask 0) + response (mask 1, carrying the advantage) of one agent at one turn."""
    prompt, response, _ = candidate
    return Sample(ids=list(prompt) + list(response), mask=[0] * len(prompt) + [1] * len(response),
                  adv=[0.0] * len(prompt) + [advantage] * len(response), role=role,
                  turn=[0] * len(prompt) + [turn] * len(response), rewards=rewards, group=group)


# ---------------------------------------------------------------- training on Sokoban
def make_level(seed, args):
    """A seeded level with the curriculum knobs (room size, boxes, reverse steps, solution length)."""
    return sokoban.level_for(seed, args.size, args.boxes, args.reverse_steps,
                             solution=(args.min_solution, args.max_solution or None))


def make_tasks(seeds, args, levels=None):
    """One SokobanTask per seed (or per level given), with the task's knobs (turns, moves per
    turn, team reward)."""
    levels = levels or [make_level(s, args) for s in seeds]
    return [env_sokoban.SokobanTask(level, args.max_turns, args.team_alpha, not args.single_agent,
                                    args.moves_per_turn, args.team_reward, args.positions) for level in levels]


def rollout_samples(seeds, sample, args):
    """AT-GRPO tree sampling (K = num_generations) or the baseline's K parallel trajectories per
    level, at the same sample budget: K samples per (level, agent, turn). Returns the samples,
    the (role, reward) of every answer the episodes played, and the final environments."""
    K = args.num_generations
    if args.algo == "at":
        groups, final = tree_rollout(make_tasks(seeds, args), seeds, sample, K)
        played = [(g.key[1], g.rewards[g.chosen]) for g in groups]
        return tree_samples(groups, args.scale_rewards), played, final
    trajectories, final = parallel_rollout(make_tasks([s for s in seeds for _ in range(K)], args), sample)
    played = [(t.role, t.reward) for trajectory in trajectories for t in trajectory]
    return trajectory_samples(trajectories, seeds, K, args.scale_rewards), played, final


def episode_metrics(played, final):
    """Success rate, turns and moves played, the box-goal distance left, and the mean reward of
    each role's played answers."""
    log = {"success": sum(t.solved for t in final) / len(final),
           "turns": sum(t.turn for t in final) / len(final),
           "moves": sum(t.moves for t in final) / len(final),
           "box_distance": sum(sokoban.box_distance(t.state) for t in final) / len(final)}
    for role in env_sokoban.ROLES:
        rewards = [r for who, r in played if who == role]
        if rewards:
            log[f"reward_{role}"] = sum(rewards) / len(rewards)
    return log


def evaluate(sample, seeds, args, chunks=lambda levels: [levels]):
    """Play the levels with one answer per agent and turn (greedy in train.py's evaluation), then
    the three checks that a constant answer cannot pass:
      best_constant_success   the best success of one fixed answer played on every level
                              (sokoban.constant_successes), the policy's 3 commonest included;
      board_ablation_success  success when every prompt shows another level's board
                              (level i sees level i+1's): a policy that reads the board drops;
      distinct_answers        how many different answer sequences the policy played (distinct).
    `chunks(level indices)` yields the parts played together (train.py: a part at a time under
    a progress bar)."""
    levels = tuple(make_level(s, args) for s in seeds)
    trajectories, final, ablated = [], [], []
    for part in chunks(list(range(len(levels)))):
        played = parallel_rollout(make_tasks(None, args, [levels[i] for i in part]), sample)
        trajectories, final = trajectories + played[0], final + played[1]
        decoys = make_tasks(None, args, [levels[(i + 1) % len(levels)] for i in part])
        ablated += parallel_rollout(make_tasks(None, args, [levels[i] for i in part]), sample, decoys)[1]
    log = episode_metrics([(t.role, t.reward) for tr in trajectories for t in tr], final)
    log["board_ablation_success"] = episode_metrics([], ablated)["success"]
    answers = Counter("".join(t.answers).replace("-", "") for t in final)
    commonest, budget = tuple(a for a, _ in answers.most_common(3) if a), args.max_turns * args.moves_per_turn
    constants = {**sokoban.constant_successes(levels, budget),  # cached: the same test levels every time
                 **sokoban.constant_successes(levels, budget, commonest)}
    log["best_constant_success"] = max(constants.values())
    log["distinct_answers"] = distinct(t.answers for t in final)
    return log


def distinct(sequences):
    """How many different answer sequences; one that begins another counts with it (a level
    solved early stops its answers: R and R R are one answer, R played again and again)."""
    unique = set(sequences)
    return sum(not any(o[:len(s)] == s and o != s for o in unique) for s in unique)
