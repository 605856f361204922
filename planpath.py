"""Plan-Path, the game, as the AT-GRPO paper plays it ("Stronger Together: On-Policy RL for
Collaborative LLMs", Zhao et al. 2025, arXiv 2510.11062v1): reach the goal cell of a grid with
walls, one move (U, D, L, R) at a time. This file holds the grid, the move rules, the step
rewards, a BFS solver, the seeded levels (ours and the public code's) and the fixed answers that
ignore the grid. The two-role task that the model plays, and the command line
(`python env_planpath.py --seed 3 --play`), are in env_planpath.py. Read top to bottom.

Step rewards, from the public code (PettingLLMs, pettingllms/multi_agent_env/stateful/env_state.py,
PlanPathGridEnvState.step_single): -0.01 a move or -0.10 a blocked move (instead), shaping
phi' - phi, +1 on reaching the goal and +0.5 more if in the optimal number of moves. The code's
phi is minus the Manhattan distance, with a 0.99 discount; ours is minus the BFS distance (walls
count: "closer" is closer along a real path) without the discount, which pays for standing still
(0.01 * distance a blocked move).

Levels: the public code's are 10 x 10 with no border and paths of any length (7.5 moves on
average); ours are 7 x 7 with paths of 3 to 4 moves, and --levels public draws theirs
(public_level_for; docs/reference-code.md).
"""
import functools
import random
from collections import deque
from dataclasses import dataclass, replace

import numpy as np

from sokoban import MOVES, in_range

STEP_REWARD, INVALID_REWARD = -0.01, -0.10  # a move; a blocked move (instead)
SHAPING, GOAL_REWARD, OPTIMAL_BONUS = 1.0, 1.0, 0.5
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
    """Do these moves, played in order, reach the goal at some point? (moves.constant_successes)"""
    for m in moves:
        grid = move(grid, m)[0]
        if grid.pos == grid.goal:
            return True
    return False
