"""What the two move games, Sokoban (env_sokoban.py) and Plan-Path (env_planpath.py), share on top of
env_two_roles.TwoRoleTask: answers of moves U, D, L, R (their format, how they are read, an
example), the flags of a board and its curriculum, and the constant-answer check.

A small model can learn one answer that often works ("R R D") instead of reading the board, and
success alone cannot tell the two apart. So a move game's evaluation also logs
best_constant_success (evaluate_games.py): the best success of one fixed answer played on every
level, every move string up to CONSTANT_LENGTH moves and the policy's 3 commonest answers
(constant_successes). A policy that reads the board beats it.
"""
import functools
import itertools

from env_two_roles import TwoRoleTask, answer_in
from sokoban import moves_in
from task import Option

ANSWER_FORMAT = {1: "Answer with one move inside answer tags: U, D, L or R, for example <answer>L</answer>.",
                 "n": "Answer with at most {} moves inside answer tags: U, D, L or R, for example "
                      "<answer>L U</answer>."}  # measured: more varied samples than "<answer>R R D</answer>"
SHORTER = "use a smaller --size or --moves-per-turn"  # for the context check (task.Task.shorter)
CONSTANT_LENGTH = 6  # every move string up to this length: 5,460 fixed answers
# the board's flags (task.Option), besides env_two_roles.OPTIONS
OPTIONS = (
    Option("size", int, 7, "room (grid) size including the wall border", lambda v: v >= 3, "at least 3 (the wall border takes 2)"),
    Option("min_solution", int, 3, "levels whose optimal solution is shorter are drawn again", lambda v: v >= 1, "at least 1"),
    Option("max_solution", int, 4, "levels whose optimal solution is longer are drawn again (0: no limit)",
           lambda v: v >= 0, "0 (no limit) or more"),
    Option("positions", bool, False, "a line of (row, column) coordinates under the board"))


def check(args):
    """The board's flags together."""
    if args.max_solution and args.max_solution < args.min_solution:
        return f"--max-solution {args.max_solution} is below --min-solution {args.min_solution}"


def parse_moves(text):
    """The moves ["R", "R", "D"] in the last <answer>R R D</answer> (or <answer>["r", "right",
    "down"]</answer>, ...) of a model's output (env_two_roles.answer_in); None without an answer or
    readable moves."""
    answer = answer_in(text)
    return moves_in(answer) if answer is not None else None


class MoveTask(TwoRoleTask):
    """A move game in TwoRoleTask's workflow: its answers are moves. A game still says its rules, its
    board, its moves' rewards, its team reward and its distance (DISTANCE, distance_left)."""

    UNIT, ANSWER_FORMAT = "moves", ANSWER_FORMAT
    DISTANCE = "distance"  # the log's name for distance_left()

    def parse(self, text):
        return parse_moves(text)

    def example(self, role):
        """As many moves as a turn allows: the longest observation a proposal gives."""
        return "<answer>" + " ".join("U" * self.moves_per_turn) + "</answer>"

    def metrics(self):
        return {"moves": self.moves, self.DISTANCE: self.distance_left()}

    def distance_left(self):
        """How far the level is from solved (logged as DISTANCE)."""
        raise NotImplementedError


def constant(solves):
    """task.Task.constant of a move game whose rule is solves(level, moves): {answer: success} of
    every move string up to CONSTANT_LENGTH and of the policy's commonest answers (a tuple), each
    played again and again until the turns' move budget is spent."""
    def successes(levels, args, commonest):
        budget = args.max_turns * args.moves_per_turn
        return {**constant_successes(solves, levels, budget),  # cached: the same test levels every time
                **constant_successes(solves, levels, budget, commonest)}
    return successes


@functools.lru_cache(maxsize=8)
def constant_successes(solves, levels, budget, answers=None):
    """{answer: fraction of `levels` it solves} for every fixed answer, a move string played
    again and again, whatever the board, until `budget` moves are played or the level is solved
    (solves(level, moves): the game's rule): every string up to CONSTANT_LENGTH moves, or only
    `answers` (a tuple of strings). A policy that does not read the board can do no better than
    the best of these. Levels are hashable (a tuple of frozen states): the cache keys on them."""
    strings = answers if answers is not None else [
        "".join(p) for n in range(1, CONSTANT_LENGTH + 1) for p in itertools.product("UDLR", repeat=n)]
    return {s: sum(solves(level, (s * budget)[:budget]) for level in levels) / len(levels) for s in strings}
