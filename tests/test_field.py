"""field.py, the field's search estimators, by hand. One group of G = 3 episodes of up to K = 3
turns: a calls twice and answers (turns 3), b calls once and answers (2), c answers at once (1).

    episode  R^T_1  R^T_2  R^O   turns   its turn rewards r_k    its reward R
    a        0.7    0.2    1.0   3       0.7, 0.2, 1.0           1.9
    b        0.2    0      0.5   2       0.2, 0.5                0.7
    c        0      0      0.0   1       0.0                     0.0
"""
import math

import pytest
import torch

import field
import mtgrpo

R_T = [[[0.7, 0.2], [0.2, 0.0], [0.0, 0.0]]]
R_O = [[1.0, 0.5, 0.0]]
TURNS = [[3, 2, 1]]


def std(xs, ddof):
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - ddof))


def test_each_episode_s_turn_rewards_end_with_its_outcome():
    r, played = field.step_rewards(R_T, R_O, TURNS)
    assert r.tolist() == [[[0.7, 0.2, 1.0], [0.2, 0.5, 0.0], [0.0, 0.0, 0.0]]]
    assert played.tolist() == [[[True, True, True], [True, True, False], [True, False, False]]]
    with pytest.raises(ValueError, match="values 1..3"):
        field.step_rewards(R_T, R_O, [[3, 2, 0]])  # an episode plays at least one turn
    with pytest.raises(ValueError, match=r"turns must be \(groups, G\) = \(1, 3\)"):
        field.step_rewards(R_T, R_O, [[3, 2]])


def test_per_turn_index_leave_one_out_by_hand():
    """Turn 1: all three played it; a's baseline is the mean of b's and c's rewards, (0.7 + 0) / 2,
    over the std of (1.9, 0.7, 0). Turn 2: a and b, each against the other. Turn 3: a alone, 0."""
    A = field.turn_index_loo(R_T, R_O, TURNS)[0]
    s1, s2 = std([1.9, 0.7, 0.0], 1) + 1e-4, std([1.9, 0.7], 1) + 1e-4
    assert A[:, 0].tolist() == pytest.approx([(1.9 - 0.35) / s1, (0.7 - 0.95) / s1, (0.0 - 1.3) / s1])
    assert A[:, 1].tolist() == pytest.approx([1.2 / s2, -1.2 / s2, 0.0])  # c did not play turn 2
    assert A[:, 2].tolist() == [0.0, 0.0, 0.0]  # one episode reached turn 3: no baseline, no credit
    assert A[0, 0].item() == pytest.approx(1.6129, abs=1e-4)  # 1.55 / 0.9610
    unscaled = field.turn_index_loo(R_T, R_O, TURNS, scale="none")[0]
    assert unscaled[:, 1].tolist() == pytest.approx([1.2, -1.2, 0.0])  # divide_advantage_by_std false


def test_leave_one_out_edge_cases():
    one = field.turn_index_loo([[[0.7]]], [[1.0]], [[2]])
    assert one.tolist() == [[[0.0, 0.0]]]  # one sample: no one to compare with
    equal = field.turn_index_loo([[[0.7], [0.7]]], [[1.0, 1.0]], [[2, 2]])
    assert equal.tolist() == [[[0.0, 0.0], [0.0, 0.0]]]  # equal rewards: no credit


def test_kevin_s_discounted_returns_by_hand():
    """gamma 0.4: a's returns 0.7 + 0.4 (0.2 + 0.4 1.0) = 0.94, 0.2 + 0.4 1.0 = 0.6, 1.0; b's
    0.2 + 0.4 0.5 = 0.4, 0.5; c's 0.0. All six turns are one pool: mean 3.44 / 6, population std."""
    A = field.discounted_returns(R_T, R_O, TURNS)[0]
    pool = [0.94, 0.6, 1.0, 0.4, 0.5, 0.0]
    m, s = sum(pool) / 6, std(pool, 0) + 1e-8
    assert A.flatten().tolist() == pytest.approx([(0.94 - m) / s, (0.6 - m) / s, (1.0 - m) / s,
                                                  (0.4 - m) / s, (0.5 - m) / s, 0.0, (0.0 - m) / s, 0.0, 0.0])
    assert m == pytest.approx(0.573333, abs=1e-6)
    lone = field.discounted_returns([[[0.7]]], [[1.0]], [[2]])[0, 0]  # one episode: its two turns differ
    assert lone.tolist() == pytest.approx([(1.1 - 1.05) / 0.05, (1.0 - 1.05) / 0.05], abs=1e-6)
    same = field.discounted_returns([[[0.0]]], [[1.0]], [[1]])  # one turn, one sample: nothing to compare
    assert same.tolist() == [[[0.0, 0.0]]]


def test_last_step_broadcast_is_grpo_or_in_search():
    """The last step of a search episode earns R^O, so broadcasting its normalised reward gives
    GRPO-OR's advantage on every turn played (up to the epsilon: 1e-6 against 1e-4)."""
    A = field.last_step_broadcast(R_T, R_O, TURNS)
    grpo_or = mtgrpo.turn_advantages(torch.tensor(R_T), torch.tensor(R_O), "or")
    _, played = field.step_rewards(R_T, R_O, TURNS)
    assert A[played].tolist() == pytest.approx(grpo_or[played].tolist(), rel=1e-3)
    assert A[~played].tolist() == [0.0, 0.0, 0.0]
    assert A[0, :, 0].tolist() == pytest.approx([0.5 / (0.5 + 1e-6), 0.0, -0.5 / (0.5 + 1e-6)])  # R^O: mean 0.5, std 0.5
