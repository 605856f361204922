"""AT-GRPO tree sampling and grouping, on real Sokoban tasks with a scripted random policy."""
import random

import pytest

import env_sokoban as sk
from atgrpo import best_index, trajectory_samples, tree_rollout, tree_samples

MOVES = ["U", "D", "L", "R"]


def random_policy(seed, log):
    """sample(role, message_lists): random move answers; records every prompt it was given."""
    rng = random.Random(seed)

    def sample(role, message_lists):
        out = []
        for messages in message_lists:
            log.append((role, repr(messages)))
            text = "<answer>" + " ".join(rng.choice(MOVES) for _ in range(rng.randint(1, 3))) + "</answer>"
            if rng.random() < 0.1:
                text = "garbage"
            prompt = list(range(len(messages[-1]["content"]) % 7 + 1))
            out.append((prompt, [rng.randint(0, 9) for _ in range(3)], text))
        return out
    return sample


def levels(n, seed0=0):
    return [sk.SokobanTask(sk.level_for(seed0 + i, size=6, boxes=1, reverse_steps=6), max_turns=3)
            for i in range(n)]


def test_best_index_is_greedy_with_ties_to_the_lowest():
    assert best_index([0.1, 0.5, 0.5, -1]) == 1
    assert best_index([0.0, 0.0]) == 0


def test_every_group_shares_one_byte_identical_prompt():
    log = []
    groups, _ = tree_rollout(levels(3), [10, 11, 12], random_policy(0, log), K=4)
    assert len(log) == 4 * len(groups)
    for g_index in range(len(groups)):
        prompts = {p for _, p in log[4 * g_index:4 * g_index + 4]}
        assert len(prompts) == 1


def test_the_episode_continues_from_the_chosen_candidate():
    envs = levels(4)
    groups, final = tree_rollout(envs, [0, 1, 2, 3], random_policy(1, []), K=5)
    for i, start in enumerate(envs):
        replay = start.copy()
        for g in (g for g in groups if g.key[0] == i):
            assert g.chosen == best_index(g.rewards)
            # the chosen candidate's reward is what acting on the replayed state gives
            assert replay.act(g.key[1], g.candidates[g.chosen][2]) == pytest.approx(g.rewards[g.chosen])
        assert replay.state == final[i].state and replay.turn == final[i].turn
        assert start.turn == 0 and start.state == start.level  # the originals were never stepped


def test_group_keys_never_merge_environments_or_turns():
    envs = levels(3)
    groups, final = tree_rollout(envs, ["a", "b", "c"], random_policy(2, []), K=3)
    keys = [g.key for g in groups]
    assert len(keys) == len(set(keys))
    for env_id, e in zip("abc", final):
        turns = {t for (i, role, t) in keys if i == env_id and role == "executor"}
        assert turns == set(range(e.turn))  # one executor group per turn played
    samples = tree_samples(groups)
    assert len(samples) == 3 * len(groups)
    for g, chunk in zip(groups, (samples[3 * k:3 * k + 3] for k in range(len(groups)))):
        advs = [s.adv[-1] for s in chunk]
        assert all(s.role == g.key[1] for s in chunk)
        if len(set(g.rewards)) == 1:
            assert advs == [0.0, 0.0, 0.0]
        else:
            assert sum(advs) == pytest.approx(0, abs=1e-9)
            assert advs.index(max(advs)) == g.rewards.index(max(g.rewards))


def test_masks_prompt_and_response():
    groups, _ = tree_rollout(levels(1), [0], random_policy(3, []), K=2)
    s = tree_samples(groups)[0]
    prompt, response, _ = groups[0].candidates[0]
    assert s.ids == prompt + response and s.mask == [0] * len(prompt) + [1] * len(response)


def test_baseline_grouping_normalises_trajectory_returns_per_level():
    K = 4
    envs = [e for e in levels(2) for _ in range(K)]  # K independent trajectories per level
    groups, _ = tree_rollout(envs, list(range(len(envs))), random_policy(4, []), K=1)
    samples = trajectory_samples(groups, list(range(len(envs))), K)
    returns = [sum(g.rewards[0] for g in groups if g.key[0] == j) for j in range(len(envs))]
    by_traj = {}
    for g, s in zip(groups, samples):
        by_traj.setdefault(g.key[0], set()).add(round(s.adv[-1], 9))
    assert all(len(v) == 1 for v in by_traj.values())  # one advantage per trajectory
    for level in range(2):
        js = range(level * K, (level + 1) * K)
        advs = [by_traj[j].pop() for j in js]
        assert sum(advs) == pytest.approx(0, abs=1e-6) or all(a == 0 for a in advs)
        best = max(js, key=lambda j: returns[j])
        assert advs[best - level * K] == max(advs)


def test_single_agent_setting_has_only_executor_groups():
    envs = [sk.SokobanTask(sk.level_for(i, reverse_steps=6), max_turns=2, planner=False) for i in range(2)]
    groups, _ = tree_rollout(envs, [0, 1], random_policy(5, []), K=2)
    assert {g.key[1] for g in groups} == {"executor"}


def test_scale_rewards_reaches_both_groupings():
    from atgrpo import Group
    c = ([1], [2], "<answer>U</answer>")
    groups = [Group((0, "planner", 0), [c, c], [1.0, 3.0], 1), Group((0, "executor", 0), [c, c], [0.0, 0.0], 0)]
    # none: r - group mean; batch: divided by the std of [1, 3, 0, 0]: mean 1, sqrt((0 + 4 + 1 + 1) / 3) = 1.414214 (+1e-4)
    assert [s.adv[-1] for s in tree_samples(groups, "none")] == [-1.0, 1.0, 0.0, 0.0]
    assert [s.adv[-1] for s in tree_samples(groups, "batch")] == pytest.approx([-0.707057, 0.707057, 0, 0], abs=1e-6)
    assert tree_samples([], "batch") == []
    one = [Group((j, "executor", 0), [c], [r], 0) for j, r in enumerate([2.0, 0.0, 5.0, 5.0])]  # K = 2, 2 levels
    assert [s.adv[-1] for s in trajectory_samples(one, [0, 1, 2, 3], 2, "none")] == [1.0, -1.0, 0.0, 0.0]
