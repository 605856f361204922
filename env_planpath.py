"""Plan-Path, the AT-GRPO paper's grid-navigation task ("Stronger Together: On-Policy RL for
Collaborative LLMs", Zhao et al. 2025, arXiv 2510.11062): reach the goal cell of a grid with
walls, one move (U, D, L, R) at a time. The paper's largest planning gain is here (Qwen3-1.7B:
GRPO 11 %, AT-GRPO 96 %). Read top to bottom: the grid, the solver, the rewards, the levels,
the rules and the grid as the model sees them (PlanPathTask, in env_two_roles.py's workflow),
the levels from the flags, and a command line (`python env_planpath.py --seed 3 --play`).

How this differs from the paper. Its planning MAS pairs a planner with a tool agent that writes
code (a BFS, say) which is executed. Here no model output is ever executed: as in env_sokoban.py,
each turn the planner proposes moves, which are tried on a copy of the grid, and the executor,
who sees the result, answers the moves really played. A 135M model cannot write a working BFS,
running model code is a sandbox problem this project leaves out, and one move a turn gives each
turn its own reward, the dense signal that per-turn groups compare. The public code's levels are
10 x 10 with no border and paths of any length (7.5 moves on average); ours are 7 x 7 with paths
of 3 to 4 moves, and --levels public draws theirs (public_level_for; docs/reference-code.md).

Rewards, from the public code (PettingLLMs, pettingllms/multi_agent_env/stateful/env_state.py,
PlanPathGridEnvState.step_single): -0.01 a move or -0.10 a blocked move (instead), shaping
phi' - phi, +1 on reaching the goal and +0.5 more if in the optimal number of moves. The code's
phi is minus the Manhattan distance, with a 0.99 discount; ours is minus the BFS distance (walls
count: "closer" is closer along a real path) without the discount, which pays for standing still
(0.01 * distance a blocked move). An agent's reward is local + alpha * team (the paper's); the
team reward is ours: the drop in BFS distance over the turn, +1 when the turn reaches the goal.

The observation is designed for a small model: the grid with one token per cell (as Sokoban's
board), and with positions=True (the default) a line saying in coordinates and in words where
the goal is from you ("2 rows down (D) and 1 column left (L)"); the way around walls is not said.
"""
import argparse
import functools
import random
import sys
from collections import deque
from dataclasses import dataclass, replace

import numpy as np

from env_two_roles import TwoRoleTask
from sokoban import MOVES, in_range, moves_in
from machinery.cli import one_line

STEP_REWARD, INVALID_REWARD = -0.01, -0.10  # a move; a blocked move (instead)
SHAPING, GOAL_REWARD, OPTIMAL_BONUS = 1.0, 1.0, 0.5
FORMAT_PENALTY = -3.0  # an answer with no readable move: below any move's reward (a move away from
# the goal costs -0.01 - 1 - alpha * 1), else a group holding wrong moves teaches answering nothing
WALL_RATIO = 0.2  # inner cells that are walls (the paper's code: 0.22 of a 10 x 10 grid, no border)
PUBLIC_SIZE, PUBLIC_WALL_RATIO = 10, 0.22  # the public code's grid (--levels public, public_level_for)


# ---------------------------------------------------------------- the grid
@dataclass(frozen=True)
class Grid:
    """One position. Immutable: a move makes a new Grid, so copies cost nothing."""
    walls: frozenset  # (row, col) of every wall cell
    goal: tuple
    pos: tuple        # where you are
    shape: tuple      # (height, width); cells outside count as walls


def parse_grid(text):
    """A Grid from text rows: # wall, . floor, @ you, G goal."""
    rows = text.split("\n")
    cells = {(r, c): s for r, row in enumerate(rows) for c, s in enumerate(row)}
    unknown = set(cells.values()) - set("#.@G")
    if unknown:
        raise ValueError(f"unknown grid symbols {sorted(unknown)}; use # . @ G")
    where = {s: [cell for cell, x in cells.items() if x == s] for s in "@G"}
    if len(where["@"]) != 1 or len(where["G"]) != 1:
        raise ValueError(f"a grid needs one @ and one G, found {len(where['@'])} and {len(where['G'])}")
    return Grid(frozenset(c for c, s in cells.items() if s == "#"), where["G"][0], where["@"][0],
                (len(rows), max(len(row) for row in rows)))


def render(grid):
    """The grid as text rows; parse_grid(render(g)) == g."""
    symbol = lambda cell: "#" if cell in grid.walls else "@" if cell == grid.pos else "G" if cell == grid.goal else "."
    return "\n".join("".join(symbol((r, c)) for c in range(grid.shape[1])) for r in range(grid.shape[0]))


def grid_text(grid):
    """The grid as the model sees it: cells separated by spaces and floor drawn as _, so that
    every cell is one token of the bundled tokenizer and a column is a fixed token distance."""
    return "\n".join(" ".join("_" if s == "." else s for s in row) for row in render(grid).split("\n"))


def is_wall(grid, cell):
    r, c = cell
    return cell in grid.walls or not (0 <= r < grid.shape[0] and 0 <= c < grid.shape[1])


def move(grid, m):
    """(the grid after move m, blocked): a move into a wall or off the grid leaves it unchanged."""
    dr, dc = MOVES[m]
    cell = (grid.pos[0] + dr, grid.pos[1] + dc)
    return (grid, True) if is_wall(grid, cell) else (replace(grid, pos=cell), False)


# ---------------------------------------------------------------- the solver
@functools.lru_cache(maxsize=1 << 12)
def distances(walls, goal, shape):
    """{cell: moves to the goal} for every cell that can reach it (BFS from the goal)."""
    grid, far, queue = Grid(walls, goal, goal, shape), {goal: 0}, deque([goal])
    while queue:
        cell = queue.popleft()
        for dr, dc in MOVES.values():
            nxt = (cell[0] + dr, cell[1] + dc)
            if nxt not in far and not is_wall(grid, nxt):
                far[nxt] = far[cell] + 1
                queue.append(nxt)
    return far


def distance(grid):
    """The fewest moves from you to the goal, None if it cannot be reached."""
    return distances(grid.walls, grid.goal, grid.shape).get(grid.pos)


def optimal_moves(grid):
    """The first moves that lie on some shortest path to the goal ("" at the goal)."""
    d = distance(grid)
    return "".join(m for m in MOVES if d and not move(grid, m)[1] and distance(move(grid, m)[0]) == d - 1)


def solve(grid):
    """One shortest move string (ties in the order U, D, L, R); None if the goal is out of reach."""
    if distance(grid) is None:
        return None
    moves = ""
    while grid.pos != grid.goal:
        moves += optimal_moves(grid)[0]
        grid = move(grid, moves[-1])[0]
    return moves


# ---------------------------------------------------------------- rewards
def play(grid, moves, start_distance, played=0):
    """Play moves in order, stopping at the goal. Returns (grid after, local reward, blocked moves,
    moves played). Per move: STEP_REWARD (INVALID_REWARD if blocked) + SHAPING * (distance before -
    after), + GOAL_REWARD on reaching the goal, + OPTIMAL_BONUS if the episode reached it in
    start_distance moves; `played` is how many moves the episode had played before these."""
    reward = blocked = n = 0
    for m in moves:
        if grid.pos == grid.goal:
            break
        after, stuck = move(grid, m)
        n, blocked = n + 1, blocked + stuck
        reward += (INVALID_REWARD if stuck else STEP_REWARD) + SHAPING * (distance(grid) - distance(after))
        if after.pos == after.goal:
            reward += GOAL_REWARD + (OPTIMAL_BONUS if played + n == start_distance else 0.0)
        grid = after
    return grid, reward, blocked, n


def team_reward(before, after):
    """The team's progress over one turn: distance before - after, + GOAL_REWARD if now there."""
    bonus = GOAL_REWARD if after.pos == after.goal and before.pos != before.goal else 0.0
    return distance(before) - distance(after) + bonus


# ---------------------------------------------------------------- levels
def level_for(seed, size=7, wall_ratio=WALL_RATIO, solution=(3, 4)):
    """A seeded level: a size x size room with a wall border, each inner cell a wall with
    probability wall_ratio, and a start and goal whose shortest path is solution[0] to
    solution[1] moves (None: no limit). Drawn again up to 1000 times, then ValueError."""
    low, high = solution
    if size < 3 or low < 1 or (high is not None and high < low):
        raise ValueError(f"size {size} must be at least 3 and the path length {low} to {high} at least 1 "
                         "and in order")
    rng = random.Random(seed)
    inner = [(r, c) for r in range(1, size - 1) for c in range(1, size - 1)]
    border = frozenset((r, c) for r in range(size) for c in range(size)) - set(inner)
    for _ in range(1000):
        walls = frozenset(cell for cell in inner if rng.random() < wall_ratio)
        floor = [cell for cell in inner if cell not in walls]
        if len(floor) < 2:
            continue
        start, goal = rng.sample(floor, 2)
        grid = Grid(border | walls, goal, start, (size, size))
        if distance(grid) is not None and in_range(distance(grid), (low, high)):
            return grid
    raise ValueError(f"no level with a path of {low} to {high or 'any'} moves in 1000 tries: change the size "
                     f"({size}) or the path length")


def public_level_for(seed, size=PUBLIC_SIZE, wall_ratio=PUBLIC_WALL_RATIO, tries=2000):
    """A seeded level from the public code's distribution (--levels public; PettingLLMs,
    pettingllms/multi_agent_env/stateful/env_state.py, PlanPathGridEnvState): a size x size grid
    with no border (moves off the grid are blocked), each cell a wall with probability
    wall_ratio, start and goal two different floor cells joined by a path, of any length. Drawn
    in the same order from the same generators (numpy's seeded with `seed` for the walls,
    Python's for the start and the goal), so seed s is the public code's level of seed s.
    Drawn again up to `tries` times, then ValueError (the public code falls back to an open grid)."""
    wall_rng, rng = np.random.RandomState(seed), random.Random(seed)
    for _ in range(tries):
        blocked = wall_rng.rand(size, size) < wall_ratio
        floor = [(r, c) for r in range(size) for c in range(size) if not blocked[r, c]]
        if len(floor) < 2:
            continue
        start = goal = rng.choice(floor)
        while goal == start:
            goal = rng.choice(floor)
        grid = Grid(frozenset((r, c) for r in range(size) for c in range(size) if blocked[r, c]), goal, start,
                    (size, size))
        if distance(grid) is not None:
            return grid
    raise ValueError(f"no public level with a path in {tries} tries: lower the wall ratio ({wall_ratio})")


def solves(grid, moves):
    """Do these moves, played in order, reach the goal at some point? (evaluate_games.constant_successes)"""
    for m in moves:
        grid = move(grid, m)[0]
        if grid.pos == grid.goal:
            return True
    return False


# ---------------------------------------------------------------- the two-role task
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


class PlanPathTask(TwoRoleTask):
    """Plan-Path in env_two_roles.TwoRoleTask's workflow. Local reward: `play`'s move rewards;
    team reward: team_reward. The user prompt shows the grid and, with positions=True (the
    default), where the goal is (`where`)."""

    NOUN, RULES, FORMAT_PENALTY, DISTANCE = "grid", RULES, FORMAT_PENALTY, "distance"

    def __init__(self, level, max_turns=4, alpha=1.0, planner=True, moves_per_turn=1, positions=True):
        super().__init__(level, max_turns, alpha, planner, moves_per_turn, positions)

    @property
    def solved(self):
        return self.state.pos == self.state.goal

    def view(self):
        return [grid_text(self.state), where(self.state) if self.positions else ""]

    def board(self, state):
        return grid_text(state)

    def play(self, moves):
        return play(self.state, moves, distance(self.level), self.moves)

    def team_reward(self, before, after):
        return team_reward(before, after)

    def progress(self, before, after, blocked):
        return progress(before, after, blocked)

    def distance_left(self):
        return distance(self.state)


def progress(before, after, blocked):
    """One line: at the goal, closer, farther or no nearer, and the blocked moves."""
    d0, d1 = distance(before), distance(after)
    said = "The goal is reached" if d1 == 0 else "Closer to the goal" if d1 < d0 else \
        "Farther from the goal" if d1 > d0 else "No nearer to the goal"
    return f"{said}, blocked moves: {blocked}."


# ---------------------------------------------------------------- levels from the flags
def make_level(seed, args):
    """A seeded level with the curriculum knobs (grid size, path length); with --levels public,
    the public code's level of that seed instead (public_level_for: no knobs)."""
    if getattr(args, "levels", "ours") == "public":  # namespaces from before the flag: ours
        return public_level_for(seed)
    return level_for(seed, args.size, solution=(args.min_solution, args.max_solution or None))


def make_tasks(seeds, args, levels=None):
    """One PlanPathTask per seed (or per level given), with the task's knobs."""
    levels = levels or [make_level(s, args) for s in seeds]
    return [PlanPathTask(level, args.max_turns, args.team_alpha, not args.single_agent, args.moves_per_turn,
                         args.positions) for level in levels]


# ---------------------------------------------------------------- command line
def play_in_terminal(level, lines, out):
    """A person plays: each line holds moves ("u", "r r", "up left"); "reset" starts over, "quit" stops."""
    grid, played = level, 0
    print('moves: u/d/l/r or up/down/left/right; "reset" starts over, "quit" stops', file=out)
    print(grid_text(grid), where(grid), sep="\n", file=out)
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
            grid, reward, blocked, n = play(grid, moves, distance(level), played)
            played += n
            print(f"reward {reward:+.2f}. {progress(before, grid, blocked)}", file=out)
        print(grid_text(grid), where(grid), sep="\n", file=out)
        if grid.pos == grid.goal:
            print(f"goal reached in {played} moves (shortest: {distance(level)})", file=out)
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
    print(grid_text(level), where(level), f"shortest path: {solve(level)} ({distance(level)} moves)", sep="\n")


if __name__ == "__main__":
    main()
