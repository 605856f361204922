"""Plan-Path, the AT-GRPO paper's grid-navigation task ("Stronger Together: On-Policy RL for
Collaborative LLMs", Zhao et al. 2025, arXiv 2510.11062v1), as the two-role task the model plays.
The paper's largest planning gain is here (Qwen3-1.7B: GRPO 11 %, AT-GRPO 96 %). The game itself
(grid, rules, step rewards, solver, levels) is planpath.py; the two-role workflow (turn order, the
proposal on a copy, the prompts) is env_two_roles.py, and the answers of moves moves.py, which both
move games share. This file holds
only what is Plan-Path's task: the team reward, the rules and the grid as the model sees them
(PlanPathTask), the levels from the flags, and a command line
(`python env_planpath.py --seed 3 --play`). Read top to bottom.

How this differs from the paper. Its planning MAS pairs a planner with a tool agent that writes
code (a BFS, say) which is executed. Here the planner's moves are text: as in env_sokoban.py,
each turn the planner proposes moves, which are tried on a copy of the grid, and the executor,
who sees the result, answers the moves really played. A 135M model cannot write a working BFS,
and one move a turn gives each turn its own reward, the dense signal that per-turn groups
compare. (Model-written code runs in the coding team, env_code.py, in machinery/sandbox.py.)

An agent's reward is local + alpha * team (the paper's): local is the step rewards of its moves
(planpath.play). The team reward is ours: the drop in BFS distance over the turn, +1 when the
turn reaches the goal.

The observation is designed for a small model: the grid with one token per cell (as Sokoban's
board), and with positions=True (the default) a line saying in coordinates and in words where
the goal is from you ("2 rows down (D) and 1 column left (L)"); the way around walls is not said.
"""
import argparse
import sys

import planpath
import env_two_roles
import moves
from moves import MoveTask
from task import Option, Task
from sokoban import moves_in
from machinery.cli import one_line

FORMAT_PENALTY = -3.0  # an answer with no readable move: below any move's reward (a move away from
# the goal costs -0.01 - 1 - alpha * 1), else a group holding wrong moves teaches answering nothing


# ---------------------------------------------------------------- the team reward
def team_reward(before, after):
    """The team's progress over one turn: distance before - after, + GOAL_REWARD if now there."""
    bonus = planpath.GOAL_REWARD if after.pos == after.goal and before.pos != before.goal else 0.0
    return planpath.distance(before) - planpath.distance(after) + bonus


# ---------------------------------------------------------------- the grid as the model sees it
RULES = ("Plan-Path: walk from @ to the goal G on the grid.\n"
         "Symbols: # wall, _ floor, @ you, G goal. Rows count down from 0 at the top, columns right "
         "from 0 at the left.\nMoves: U up (row - 1), D down (row + 1), L left (column - 1), R right "
         "(column + 1). A move into a wall does nothing.\n")


def where(grid):
    """Your position and the goal's in coordinates and, from you, in words with the move letters
    ("2 rows up (U) and 1 column left (L)"): a letter to copy is easier for a small model than a word
    to translate (docs/results-planpath.md)."""
    dr, dc = grid.goal[0] - grid.pos[0], grid.goal[1] - grid.pos[1]
    count = lambda n, unit, ways: f"{abs(n)} {unit}{'s' * (abs(n) != 1)} {ways[n > 0]}"
    words = " and ".join(count(n, unit, ways) for n, unit, ways in
                         ((dr, "row", ("up (U)", "down (D)")), (dc, "column", ("left (L)", "right (R)"))) if n)
    return (f"You are at (row {grid.pos[0]}, column {grid.pos[1]}); the goal is at (row {grid.goal[0]}, "
            f"column {grid.goal[1]}): {words or 'here'}.")


def named_moves(grid):
    """The moves the positions line names, the row move first: ["U", "L"] for "2 rows up (U) and
    1 column left (L)"."""
    (r, c), (gr, gc) = grid.pos, grid.goal
    return [m for m, n in (("DU"[gr < r], gr - r), ("RL"[gc < c], gc - c)) if n]


class PlanPathTask(MoveTask):
    """Plan-Path in env_two_roles.TwoRoleTask's workflow, answering moves (moves.MoveTask). Local
    reward: `planpath.play`'s move rewards; team reward: team_reward. The user prompt shows the grid and, with positions=True (the
    default), where the goal is (`where`)."""

    NOUN, RULES, FORMAT_PENALTY, DISTANCE = "grid", RULES, FORMAT_PENALTY, "distance"

    def __init__(self, level, max_turns=4, alpha=1.0, planner=True, moves_per_turn=1, positions=True,
                 team_term="own"):
        super().__init__(level, max_turns, alpha, planner, moves_per_turn, positions, team_term)

    @property
    def solved(self):
        return self.state.pos == self.state.goal

    def view(self):
        return [planpath.grid_text(self.state), where(self.state) if self.positions else ""]

    def board(self, state):
        return planpath.grid_text(state)

    def play(self, moves):
        return planpath.play(self.state, moves, planpath.distance(self.level), self.moves)

    def team_reward(self, before, after):
        return team_reward(before, after)

    def progress(self, before, after, blocked):
        return progress(before, after, blocked)

    def distance_left(self):
        return planpath.distance(self.state)


def progress(before, after, blocked):
    """One line: at the goal, closer, farther or no nearer, and the blocked moves."""
    d0, d1 = planpath.distance(before), planpath.distance(after)
    said = "The goal is reached" if d1 == 0 else "Closer to the goal" if d1 < d0 else \
        "Farther from the goal" if d1 > d0 else "No nearer to the goal"
    return f"{said}, blocked moves: {blocked}."


# ---------------------------------------------------------------- levels from the flags
LEVELS = ("ours", "public")  # --levels (make_level)
OPTIONS = (*env_two_roles.OPTIONS, *moves.OPTIONS,  # Plan-Path's own flag besides those it shares
           Option("levels", str, "ours", "ours (the --size grid, paths of --min-solution to --max-solution moves) or "
                  "public (the public code's: 10 x 10, no border, walls 0.22, any path length)", choices=LEVELS))


def check(args):
    """The flags together: the public levels have no knobs."""
    if args.levels == "public" and (args.size, args.min_solution, args.max_solution) != tuple(
            o.default for o in moves.OPTIONS[:3]):
        return ("--levels public (the public code's 10 x 10 Plan-Path levels, any path length) takes no --size, "
                "--min-solution or --max-solution")
    return env_two_roles.check(args) or moves.check(args)


def make_level(seed, args):
    """A seeded level with the curriculum knobs (grid size, path length); with --levels public,
    the public code's level of that seed instead (planpath.public_level_for: no knobs)."""
    if getattr(args, "levels", "ours") == "public":  # namespaces from before the flag: ours
        return planpath.public_level_for(seed)
    return planpath.level_for(seed, args.size, solution=(args.min_solution, args.max_solution or None))


def make_tasks(seeds, args, levels=None):
    """One PlanPathTask per seed (or per level given), with the task's knobs."""
    levels = levels or [make_level(s, args) for s in seeds]
    return [PlanPathTask(level, args.max_turns, args.team_alpha, not args.single_agent, args.moves_per_turn,
                         args.positions, getattr(args, "team_term", "own")) for level in levels]


# the setup of docs/results-planpath.md: 7 x 7, paths of 3-4 moves, 4 turns; the report of
# tools/compare.py adds the paper's single-agent baseline and per-role policies
TASK = Task("planpath", "game", "Plan-Path, planner + executor (AT-GRPO paper)", "level",
            table=env_two_roles.table("distance", "moves to the goal left"), plot=env_two_roles.PLOT,
            each="success_each", defaults={**env_two_roles.DEFAULTS, "scale_rewards": "group", "positions": True},
            options=OPTIONS, check=check, stop_strings=env_two_roles.STOP_STRINGS, roles=env_two_roles.ROLES, shorter=moves.SHORTER,
            make_level=make_level, make_tasks=make_tasks, constant=moves.constant(planpath.solves),
            order=("grpo-solo", "grpo", "at", "at-roles"),
            pairs=(("at", "grpo"), ("at", "grpo-solo"), ("at-roles", "grpo"), ("at", "at-roles")))


# ---------------------------------------------------------------- command line
def play_in_terminal(level, lines, out):
    """A person plays: each line holds moves ("u", "r r", "up left"); "reset" starts over, "quit" stops."""
    grid, played = level, 0
    print('moves: u/d/l/r or up/down/left/right; "reset" starts over, "quit" stops', file=out)
    print(planpath.grid_text(grid), where(grid), sep="\n", file=out)
    for line in lines:
        word = line.strip().lower()
        if word == "quit":
            return
        if word == "reset":
            grid, played = level, 0
        elif (moves := moves_in(line)) is None:
            print("no moves read; try: r, up left, reset, quit", file=out)
            continue
        else:
            before = grid
            grid, reward, blocked, n = planpath.play(grid, moves, planpath.distance(level), played)
            played += n
            print(f"reward {reward:+.2f}. {progress(before, grid, blocked)}", file=out)
        print(planpath.grid_text(grid), where(grid), sep="\n", file=out)
        if grid.pos == grid.goal:
            print(f"goal reached in {played} moves (shortest: {planpath.distance(level)})", file=out)
            return


@one_line
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed", type=int, default=0, help="the level to play")
    p.add_argument("--play", action="store_true", help="play the level by hand (reads moves from stdin)")
    p.add_argument("--size", type=int, default=7, help="grid size including the wall border")
    p.add_argument("--min-solution", type=int, default=3, help="shortest path at least this many moves")
    p.add_argument("--max-solution", type=int, default=4, help="shortest path at most this many moves (0: no limit)")
    p.add_argument("--levels", choices=("ours", "public"), default="ours",
                   help="public: the public code's 10 x 10 level of this seed (no --size or path bounds)")
    args = p.parse_args(argv)
    try:
        level = make_level(args.seed, args)
    except ValueError as e:
        p.error(str(e))
    if args.play:
        return play_in_terminal(level, sys.stdin, sys.stdout)
    print(planpath.grid_text(level), where(level),
          f"shortest path: {planpath.solve(level)} ({planpath.distance(level)} moves)", sep="\n")


if __name__ == "__main__":
    main()
