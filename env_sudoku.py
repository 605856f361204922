"""Sudoku 4 x 4, the AT-GRPO paper's second game ("Stronger Together: On-Policy Reinforcement
Learning for Collaborative LLMs", Zhao et al. 2025, arXiv 2510.11062v1), as the two-role task the
model plays. The game itself (grid, rules, fill rewards, solver, puzzles) is sudoku.py; the two-role
workflow (turn order, the proposal on a copy, the prompts) is env_two_roles.py. This file holds only
what is Sudoku's task: its answers of fills ("<answer>R1C2=3 R4C1=2</answer>"), the team reward,
the rules and the grid as the model sees them (SudokuTask), its flags, the puzzles from the flags,
and a command line (`python env_sudoku.py --seed 3 --play`). Read top to bottom.

How this differs from the paper's code (PettingLLMs, pettingllms-ai/PettingLLMs at 2e3c5f2). There
a tool agent writes Python that prints a whole grid, which is executed and tried on a deep copy of
the state (multi_agent_env/stateful/agents/tool_agent.py, lines 57-75 and 93-132), and a plan agent
answers a grid or a list of [r, c, v] fills after "####" (agents/plan_agent.py lines 55-56,
utils.py `extract_final_action` lines 22-65), played on the real state. A grid answer replaces the
whole grid, givens included (env_state.py lines 700-727). Here no model output is executed: as in
the move games, each turn the planner proposes fills, tried on a copy of the grid, and the executor,
who sees the result, answers the fills really played; a turn plays at most --moves-per-turn fills
(1 by default: every turn its own reward, every group one choice of cell and digit).

An agent's reward is local + alpha * team (the paper's form; the code adds the real state's reward
to each agent's own, with no alpha: plan_agent.py lines 96-98, tool_agent.py lines 134-136,
`calculate_reward`). Local is sudoku.play's: per fill -0.01 and +1 for the solution's digit or -1
for another that fits the rules, -0.3 instead for a fill the grid refuses, +2 for the fill that
solves, +0.5 more when the episode played no more fills than there were empty cells (the code's
-0.01, -0.3, +2 and +0.5; its shaping by candidates and constraints is replaced by the truth,
sudoku.py says why). The team reward is ours, as in the move games: the drop over the turn in the
cells that differ from the solution (empty or wrong), +2 when the turn solves the puzzle.
"""
import argparse
import functools
import sys

import env_two_roles
import sudoku
from env_two_roles import TwoRoleTask, answer_in
from machinery.cli import one_line
from task import Option, Task

FORMAT_PENALTY = -2.0  # per fill a turn allows, for an answer with no readable fill: below the worst
# answer, wrong fills (-1.01 each, team 0), else a group holding wrong fills teaches answering nothing


# ---------------------------------------------------------------- the answers
ANSWER_FORMAT = {1: "Answer with one fill inside answer tags, for example <answer>R1C2=3</answer>.",
                 "n": "Answer with at most {} fills inside answer tags, for example <answer>R1C2=3 R4C1=2</answer>."}


def parse_fills(text):
    """The fills ["R1C2=3", "R4C1=2"] in the last <answer>R1C2=3 R4C1=2</answer> of a model's output
    (env_two_roles.answer_in reads the tags; sudoku.fills_in the variants it accepts: "r1c2 = 3",
    "(1,2)=3"); None without an answer or with anything in it that is not a fill."""
    answer = answer_in(text)
    return sudoku.fills_in(answer) if answer is not None else None


# ---------------------------------------------------------------- the team reward
def team_reward(before, after):
    """The team's progress over one turn: cells that differ from the solution before - after (a right
    digit 1, a wrong one 0: an empty cell became a wrong one), + SOLVE_REWARD if the turn solved it."""
    bonus = sudoku.SOLVE_REWARD if sudoku.is_solved(after) and not sudoku.is_solved(before) else 0.0
    return sudoku.distance(before) - sudoku.distance(after) + bonus


# ---------------------------------------------------------------- the grid as the model sees it
RULES = ("Sudoku 4x4: fill every empty cell _ with a digit from 1 to 4 so that each row, each column "
         "and each 2x2 box (rows 1-2 or 3-4, columns 1-2 or 3-4) holds every digit once.\n"
         "Rows are R1 to R4 from the top; columns are numbered 1 to 4 from the left, above the grid. "
         "A fill R2C3=4 writes 4 in row 2, column 3. A fill in a cell that is not empty, or of a digit "
         "already in the cell's row, column or box, is refused. A digit once written cannot be erased: "
         "a wrong one means the puzzle can no longer be solved.\n")


def empty_line(state):
    """The empty cells, as the fills name them: "Empty cells: R1C1 R1C2 R2C1."."""
    return "Empty cells: " + " ".join(f"R{r + 1}C{c + 1}" for r, c in sudoku.empty_cells(state)) + "."


def status(state, before=None):
    """One line, e.g. "Cells to fill 4 -> 3, wrong digits 0, solved: no" (the change only when given the
    state `before`), and a warning once the grid holds a wrong digit."""
    change = f"{len(sudoku.empty_cells(before))} -> " if before is not None else ""
    text = (f"Cells to fill {change}{len(sudoku.empty_cells(state))}, wrong digits {len(sudoku.wrong_cells(state))}, "
            f"solved: {'yes' if sudoku.is_solved(state) else 'no'}")
    return text + (", a wrong digit is on the grid: it can no longer be solved" if not sudoku.finishable(state) else "")


def progress(before, after, refused):
    """One line on what the fills did: the status with the change, and the refused fills."""
    return f"{status(after, before)}, refused fills: {refused}."


class SudokuTask(TwoRoleTask):
    """Sudoku in env_two_roles.TwoRoleTask's workflow: answers of fills (parse_fills). Local reward:
    `sudoku.play`'s fill rewards; team reward: team_reward. The user prompt shows the grid, with
    list_empty=True (the default) a line naming the empty cells, and a status line."""

    NOUN, UNIT, RULES, ANSWER_FORMAT = "grid", "fills", RULES, ANSWER_FORMAT
    DISTANCE = "cells_left"  # the log's name for sudoku.distance of the grid at the end

    def __init__(self, level, max_turns=4, alpha=1.0, planner=True, moves_per_turn=1, list_empty=True,
                 team_term="own"):
        super().__init__(level, max_turns, alpha, planner, moves_per_turn, list_empty, team_term)

    @property
    def FORMAT_PENALTY(self):  # a property here: TwoRoleTask reads self.FORMAT_PENALTY
        """FORMAT_PENALTY for each fill a turn allows: n wrong fills cost -1.01 n, so answering
        nothing must cost more than that at every --moves-per-turn."""
        return FORMAT_PENALTY * self.moves_per_turn

    def parse(self, text):
        return parse_fills(text)

    def example(self, role):
        """As many fills as a turn allows, right ones where there are (sudoku.right_fills), else fills
        that fit the rules, else the solution's digit of an empty cell (refused, but read as fills)."""
        fits = [sudoku.fill_text(r, c, d) for r, c in sudoku.empty_cells(self.state)
                for d in sudoku.candidates(self.state.cells, r, c)]
        anyhow = [sudoku.fill_text(r, c, self.state.solution[r][c]) for r, c in sudoku.empty_cells(self.state)]
        fills = sudoku.right_fills(self.state) or fits or anyhow
        return "<answer>" + " ".join(fills[:self.moves_per_turn]) + "</answer>"

    @property
    def solved(self):
        return sudoku.is_solved(self.state)

    def view(self):
        return [sudoku.grid_text(self.state), empty_line(self.state) if self.positions else "",
                status(self.state) + "."]

    def board(self, state):
        return sudoku.grid_text(state)

    def play(self, fills):
        return sudoku.play(self.state, fills, self.moves)

    def team_reward(self, before, after):
        return team_reward(before, after)

    def progress(self, before, after, refused):
        return progress(before, after, refused)

    def metrics(self):
        return {"fills": self.moves, self.DISTANCE: sudoku.distance(self.state),
                "wrong_digits": len(sudoku.wrong_cells(self.state))}


# ---------------------------------------------------------------- flags and puzzles
# --moves-per-turn (env_two_roles.OPTIONS) is the fills an answer may play: the workflow cuts an
# answer to it and the answer format names it, so a Sudoku flag of its own would say it twice
OPTIONS = (*env_two_roles.OPTIONS,
           Option("empty_cells", int, 2, "empty cells of each 4x4 puzzle (one solution each)",
                  lambda v: 1 <= v <= sudoku.SIZE ** 2 - sudoku.MIN_GIVENS,
                  f"1 to {sudoku.SIZE ** 2 - sudoku.MIN_GIVENS} (a puzzle with one solution keeps at least "
                  f"{sudoku.MIN_GIVENS} digits)"),
           Option("list_empty", bool, True, "a line naming the empty cells under the grid (R1C3 R2C1 ...)"))


def check(args):
    """The flags together: the turns must hold enough fills to finish a puzzle."""
    fills = args.max_turns * args.moves_per_turn
    if fills < args.empty_cells:
        return (f"--empty-cells {args.empty_cells} needs at least {args.empty_cells} fills, and --max-turns "
                f"{args.max_turns} x --moves-per-turn {args.moves_per_turn} allows {fills}")
    return env_two_roles.check(args)


# ---------------------------------------------------------------- fixed answers
def constant(levels, args, commonest):
    """task.Task.constant: {answer: success} of fixed answers played on every level whatever its grid,
    each answer's fills again and again until the turns' fill budget is spent (sudoku.solves): every
    single fill, and the policy's commonest answers (a tuple of its episodes' fills run together,
    "R1C2=3R4C4=1"). A fixed answer solves the puzzles whose empty cells and digits it names, and
    refused fills cost it nothing: on the 64 default test levels the best one of up to 4 fills
    solves 4 (2 empty cells; 13 with 1), so a policy that ignores the grid can score (docs/sudoku.md)."""
    budget = args.max_turns * args.moves_per_turn
    return {**constant_successes(levels, budget, SINGLE_FILLS), **constant_successes(levels, budget, commonest)}


SINGLE_FILLS = tuple(sudoku.fill_text(r, c, d) for r in range(sudoku.SIZE) for c in range(sudoku.SIZE)
                     for d in sudoku.DIGITS)


@functools.lru_cache(maxsize=8)
def constant_successes(levels, budget, answers):
    """{answer: fraction of `levels` its fills solve}, the fills repeated up to `budget` (levels are
    frozen and hashable: the cache keys on them; an answer with no fills solves none)."""
    found = {}
    for answer in answers:
        fills = sudoku.fills_in(answer) or []
        played = (fills * budget)[:budget]
        found[answer] = sum(sudoku.solves(level, played) for level in levels) / len(levels)
    return found


def make_level(seed, args):
    """A seeded puzzle with --empty-cells empty cells and one solution (sudoku.level_for)."""
    return sudoku.level_for(seed, args.empty_cells)


def make_tasks(seeds, args, levels=None):
    """One SudokuTask per seed (or per level given), with the task's knobs."""
    levels = levels or [make_level(s, args) for s in seeds]
    return [SudokuTask(level, args.max_turns, args.team_alpha, not args.single_agent, args.moves_per_turn,
                       args.list_empty, args.team_term) for level in levels]


# defaults for the bundled 135M model on 2 CPU cores: 2 empty cells in 4 turns of one fill, 16 new
# tokens (one fill and </answer> take 9, two 15)
TASK = Task("sudoku", "game", "Sudoku 4x4, planner + executor (AT-GRPO paper)", "level",
            table=env_two_roles.table(SudokuTask.DISTANCE, "cells left to fill or fix"), plot=env_two_roles.PLOT,
            each="success_each", defaults={**env_two_roles.DEFAULTS, "max_completion_length": 16},
            options=OPTIONS, progress=("success", "reward_planner", SudokuTask.DISTANCE), check=check,
            shorter="use a smaller --moves-per-turn, or --list-empty false",
            stop_strings=env_two_roles.STOP_STRINGS, roles=env_two_roles.ROLES,
            make_level=make_level, make_tasks=make_tasks, constant=constant)


# ---------------------------------------------------------------- command line
def play_in_terminal(level, lines, out):
    """A person plays: each line holds fills ("r1c2=3", "R1C2=3 (4,1)=2"); "reset" starts over, "quit" stops."""
    state, played = level, 0
    print('fills: R1C2=3 (row 1, column 2, digit 3), several on a line; "reset" starts over, "quit" stops', file=out)
    print(sudoku.grid_text(state), empty_line(state), sep="\n", file=out)
    for line in lines:
        word = line.strip().lower()
        if word == "quit":
            return
        if word == "reset":
            state, played = level, 0
        elif (fills := sudoku.fills_in(line)) is None:
            print("no fills read; try: R1C2=3, reset, quit", file=out)
            continue
        else:
            before = state
            state, reward, refused, n = sudoku.play(state, fills, played)
            played += n
            print(f"reward {reward:+.2f}. {progress(before, state, refused)}", file=out)
        print(sudoku.grid_text(state), empty_line(state), sep="\n", file=out)
        if sudoku.is_solved(state):
            print(f"solved in {played} fills", file=out)
            return


@one_line
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed", type=int, default=0, help="the puzzle to play")
    p.add_argument("--empty-cells", type=int, default=2, help="empty cells of the puzzle (1 to 12)")
    p.add_argument("--play", action="store_true", help="play the puzzle by hand (reads fills from stdin)")
    args = p.parse_args(argv)
    try:
        level = make_level(args.seed, args)
    except ValueError as e:
        p.error(str(e))
    if args.play:
        return play_in_terminal(level, sys.stdin, sys.stdout)
    print(sudoku.grid_text(level), empty_line(level), "solution: " + " ".join(sudoku.right_fills(level)), sep="\n")


if __name__ == "__main__":
    main()
