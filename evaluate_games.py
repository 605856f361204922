"""Evaluation of the two-role games (Sokoban, Plan-Path): success, and the checks that a policy
which ignores the board cannot pass. train.py's evaluation and tools/evaluate.py call `evaluate`.

A small model can learn one answer that often works ("R R D") instead of reading the board, and
success alone cannot tell the two apart. So beside success every evaluation logs:
  best_constant_success   the best success of one fixed answer played on every level: every move
                          string up to CONSTANT_LENGTH moves and the policy's 3 commonest answers
                          (constant_successes); a policy that reads the board beats it;
  board_ablation_success  success when every prompt shows another level's board (level i sees
                          level i+1's, ShownAnother): a policy that reads the board drops;
  distinct_answers        how many different answer sequences the policy played (distinct).

Levels are played with one answer per agent and turn (atgrpo.parallel_rollout, greedy in
train.py). A game module gives make_level(seed, args), make_tasks(seeds, args, levels) and
solves(level, moves); its tasks are env_two_roles.TwoRoleTask's.
"""
import functools
import itertools
from collections import Counter

import atgrpo
from env_two_roles import ROLES

CONSTANT_LENGTH = 6  # every move string up to this length: 5,460 fixed answers


def episode_metrics(played, final):
    """Success rate, turns and moves played, the distance left (the game's DISTANCE: box-goal
    cells, or moves to the goal), and the mean reward of each role's played answers."""
    log = {"success": sum(t.solved for t in final) / len(final),
           "turns": sum(t.turn for t in final) / len(final), "one_turn": sum(t.turn == 1 for t in final) / len(final),
           "moves": sum(t.moves for t in final) / len(final),
           final[0].DISTANCE: sum(t.distance_left() for t in final) / len(final)}
    for role in ROLES:
        rewards = [r for who, r in played if who == role]
        if rewards:
            log[f"reward_{role}"] = sum(rewards) / len(rewards)
    return log


def evaluate(sampler, seeds, args, game, chunks=lambda levels: [levels]):
    """Play the levels of `seeds` (module docstring) and return the episode metrics, the three
    checks, and success_each, one character 0/1 per level in order (tools/compare.py pairs runs
    by it). `chunks(level indices)` yields the parts played together (train.py: a part at a
    time under a progress bar)."""
    levels = tuple(game.make_level(s, args) for s in seeds)
    trajectories, final, ablated = [], [], []
    for part in chunks(list(range(len(levels)))):
        here, next_ones = [levels[i] for i in part], [levels[(i + 1) % len(levels)] for i in part]
        played = atgrpo.parallel_rollout(game.make_tasks(None, args, here), sampler)
        trajectories, final = trajectories + played[0], final + played[1]
        shown = [ShownAnother(real, decoy) for real, decoy in zip(game.make_tasks(None, args, here),
                                                                  game.make_tasks(None, args, next_ones))]
        ablated += [s.real for s in atgrpo.parallel_rollout(shown, sampler)[1]]
    log = episode_metrics([(t.role, t.reward) for tr in trajectories for t in tr], final)
    log["board_ablation_success"] = sum(t.solved for t in ablated) / len(ablated)
    answers = Counter("".join(t.answers).replace("-", "") for t in final)
    commonest, budget = tuple(a for a, _ in answers.most_common(3) if a), args.max_turns * args.moves_per_turn
    constants = {**constant_successes(game.solves, levels, budget),  # cached: the same test levels every time
                 **constant_successes(game.solves, levels, budget, commonest)}
    log["best_constant_success"] = max(constants.values())
    log["distinct_answers"] = distinct(t.answers for t in final)
    log["success_each"] = "".join(str(int(t.solved)) for t in final)
    return log


class ShownAnother:
    """The board ablation: plays `real`, but every prompt comes from `shown`, another level that
    is given the same answers (and starts over when it is solved), so the policy never sees its
    own board. To atgrpo.parallel_rollout it is an environment like any other."""

    def __init__(self, real, shown):
        self.real, self.shown = real, shown

    roles = property(lambda self: self.real.roles)
    turn = property(lambda self: self.real.turn)
    done = property(lambda self: self.real.done)
    team_share = property(lambda self: self.real.team_share)

    def messages(self, role):
        return self.shown.messages(role)

    def act(self, role, text):
        reward = self.real.act(role, text)
        if not self.real.done:
            self.shown.act(role, text)
            self.shown = self.shown.restart() if self.shown.solved else self.shown
        return reward


@functools.lru_cache(maxsize=8)
def constant_successes(solves, levels, budget, answers=None):
    """{answer: fraction of `levels` it solves} for every fixed answer, a move string played
    again and again, whatever the board, until `budget` moves are played or the level is solved
    (solves(level, moves): the game's rule): every string up to CONSTANT_LENGTH moves, or only
    `answers` (a tuple of strings). A policy that does not read the board can do no better than
    the best of these."""
    strings = answers if answers is not None else [
        "".join(p) for n in range(1, CONSTANT_LENGTH + 1) for p in itertools.product("UDLR", repeat=n)]
    return {s: sum(solves(level, (s * budget)[:budget]) for level in levels) / len(levels) for s in strings}


def distinct(sequences):
    """How many different answer sequences; one that begins another counts with it (a level
    solved early stops its answers: R and R R are one answer, R played again and again)."""
    unique = set(sequences)
    return sum(not any(o[:len(s)] == s and o != s for o in unique) for s in unique)
