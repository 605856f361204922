"""Sokoban, the game, as the AT-GRPO paper plays it ("Stronger Together: On-Policy RL for
Collaborative LLMs", Zhao et al. 2025, arXiv 2510.11062v1): the board, the move rules, the step
rewards, a BFS solver, the reverse-play level generator, the fixed answers that ignore the board,
and a command-line probe (`python sokoban.py --help`). The two-role task that the model plays is
env_sokoban.py. Read top to bottom.

Step rewards, from the paper's public code (PettingLLMs, pettingllms/multi_agent_env/stateful/
env_state.py, SokobanGridEnvState.step_single): -0.01 a move, or -0.05 a blocked move (instead,
not in addition); +1 a box pushed onto a goal, -0.5 a box pushed off one; shaping
+0.1 * (D(before) - D(after)) with D the sum over boxes of the Manhattan distance to the nearest
goal; +10 for the move that solves. The code's shaping is 0.1 * (0.99 * Phi' - Phi), Phi = -D: we
drop the 0.99, which pays +0.001 * D for every move that pushes nothing. Its -5 after 200 moves
is not used: an episode ends after max_turns turns.
"""
import argparse
import functools
import json
import random
import re
import sys
from collections import deque
from dataclasses import dataclass, replace

from machinery.cli import one_line

MOVES = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}
MOVE_WORDS = {"up": "U", "down": "D", "left": "L", "right": "R"}
SYMBOLS = "# .$*@+"  # wall, floor, goal, box, box on goal, player, player on goal

STEP_REWARD, INVALID_REWARD = -0.01, -0.05  # a move; a blocked move (instead)
BOX_ON_GOAL_REWARD, BOX_OFF_GOAL_REWARD = 1.0, -0.5
SHAPING, SOLVE_REWARD = 0.1, 10.0  # times the box-goal distance gained; the solving move


# ---------------------------------------------------------------- the board
@dataclass(frozen=True)
class State:
    """One Sokoban position. Immutable: a move makes a new State, so copies cost nothing."""
    walls: frozenset   # (row, col) of every wall cell
    goals: frozenset
    boxes: frozenset
    player: tuple
    shape: tuple       # (height, width); cells outside count as walls


def parse_board(rows):
    """A State from text rows (a list of strings or one string with newlines) in SYMBOLS."""
    rows = rows.split("\n") if isinstance(rows, str) else list(rows)
    unknown = set("".join(rows)) - set(SYMBOLS)
    if unknown:
        raise ValueError(f"unknown board symbols {sorted(unknown)}; use {SYMBOLS!r}")
    where = {symbol: frozenset((r, c) for r, row in enumerate(rows)
                               for c, s in enumerate(row) if s == symbol) for symbol in SYMBOLS}
    players = where["@"] | where["+"]
    if len(players) != 1:
        raise ValueError(f"a board needs exactly one player (@ or +), found {len(players)}")
    return State(walls=where["#"], goals=where["."] | where["*"] | where["+"],
                 boxes=where["$"] | where["*"], player=next(iter(players)),
                 shape=(len(rows), max(len(row) for row in rows)))


def symbol_at(state, cell):
    """The SYMBOLS character of one cell: the thing on it, in its on-a-goal form on a goal."""
    if cell in state.walls:
        return "#"
    thing = "@" if cell == state.player else "$" if cell in state.boxes else " "
    return {"@": "+", "$": "*", " ": "."}[thing] if cell in state.goals else thing


def render(state):
    """The board as text, one line per row; parse_board(render(s)) == s."""
    height, width = state.shape
    return "\n".join("".join(symbol_at(state, (r, c)) for c in range(width))
                     for r in range(height))


def board_text(state):
    """The board as the model sees it: cells separated by spaces and floor drawn as _, so that
    every cell is one token of the bundled tokenizer and a column is a fixed token distance."""
    return "\n".join(" ".join("_" if cell == " " else cell for cell in row) for row in render(state).split("\n"))


# ---------------------------------------------------------------- the rules
def is_wall(state, cell):
    """A wall, or a cell outside the board."""
    (r, c), (height, width) = cell, state.shape
    return cell in state.walls or not (0 <= r < height and 0 <= c < width)


def move(state, m):
    """One move U/D/L/R: walk, or push the box ahead one cell. A wall, or a wall or second box
    behind the box, blocks the move: the same state comes back (the move is "invalid")."""
    dr, dc = MOVES[m]
    r, c = state.player
    ahead, beyond = (r + dr, c + dc), (r + 2 * dr, c + 2 * dc)
    if is_wall(state, ahead):
        return state
    if ahead not in state.boxes:
        return replace(state, player=ahead)
    if is_wall(state, beyond) or beyond in state.boxes:
        return state
    return replace(state, player=ahead, boxes=(state.boxes - {ahead}) | {beyond})


def is_solved(state):
    """Every box is on a goal."""
    return state.boxes <= state.goals


def box_distance(state):
    """D: the sum over boxes of the Manhattan distance to the nearest goal."""
    return sum(min(abs(r - gr) + abs(c - gc) for gr, gc in state.goals)
               for r, c in state.boxes) if state.goals else 0


# ---------------------------------------------------------------- rewards
def step_reward(before, after):
    """The reward of one move from `before` to `after` (module docstring)."""
    if after.player == before.player:  # every move that happens moves the player
        return INVALID_REWARD
    reward = STEP_REWARD
    change = len(after.boxes & after.goals) - len(before.boxes & before.goals)  # -1, 0 or +1
    reward += BOX_ON_GOAL_REWARD if change > 0 else BOX_OFF_GOAL_REWARD if change < 0 else 0.0
    reward += SHAPING * (box_distance(before) - box_distance(after))
    return reward + (SOLVE_REWARD if is_solved(after) and not is_solved(before) else 0.0)


def play(state, moves):
    """Play moves until solved: (the new state, summed step rewards, number of blocked moves,
    number of moves played)."""
    total, blocked, played = 0.0, 0, 0
    for m in moves:
        if is_solved(state):
            break
        after = move(state, m)
        total += step_reward(state, after)
        blocked += after.player == state.player
        state, played = after, played + 1
    return state, total, blocked, played


# ---------------------------------------------------------------- deadlocks and the solver
def deadlocked(state):
    """A box off the goals sits in a corner (a wall above or below it and a wall left or right
    of it): it can never move again, so the level cannot be solved any more."""
    for r, c in state.boxes - state.goals:
        vertical = is_wall(state, (r - 1, c)) or is_wall(state, (r + 1, c))
        horizontal = is_wall(state, (r, c - 1)) or is_wall(state, (r, c + 1))
        if vertical and horizontal:
            return True
    return False


class GaveUp(Exception):
    """solve() reached max_states positions before finding a solution or proving there is none."""


def solve(state, max_states=200_000):
    """Breadth-first search over (player, boxes): a shortest move string ("" if already
    solved), or None when there is none (every reachable position was searched). Raises GaveUp
    when the search needs more than max_states positions."""
    paths = {(state.player, state.boxes): ""}  # position -> shortest moves that reach it
    queue = deque([state])
    while queue:
        current = queue.popleft()
        path = paths[(current.player, current.boxes)]
        if is_solved(current):
            return path
        for m in MOVES:
            after = move(current, m)
            key = (after.player, after.boxes)
            if key in paths or deadlocked(after):
                continue
            if len(paths) >= max_states:
                raise GaveUp(f"the solver gave up after {max_states} positions")
            paths[key] = path + m
            queue.append(after)
    return None


@functools.lru_cache(maxsize=1 << 16)
def moves_left(state):
    """The length of an optimal solution from `state`, None if it cannot be solved."""
    solution = solve(state)
    return None if solution is None else len(solution)


# ---------------------------------------------------------------- the generator
def pull(state, m):
    """A reverse move: the player walks one cell in direction m and a box right behind them,
    if any, follows. It undoes a push, so the reverse moves played backwards solve the level."""
    dr, dc = MOVES[m]
    r, c = state.player
    ahead, behind = (r + dr, c + dc), (r - dr, c - dc)
    if is_wall(state, ahead) or ahead in state.boxes:
        return state
    if behind in state.boxes:
        return replace(state, player=ahead, boxes=(state.boxes - {behind}) | {state.player})
    return replace(state, player=ahead)


def level_for(seed, size=6, boxes=1, reverse_steps=20, walls=0, solution=(1, None)):
    """A seeded, solvable level: a size x size room with a wall border and `walls` random inner
    walls; boxes start on their goals, then the player makes `reverse_steps` random pull moves
    (more steps, harder levels). A level that ends solved, or whose optimal solution is shorter
    than solution[0] or longer than solution[1] (None: no limit) moves, is drawn again.
    Settings that give no level raise ValueError, saying what to change."""
    inner = max(size - 2, 0) ** 2  # cells inside the wall border
    if min(boxes, reverse_steps) < 1 or walls < 0:
        raise ValueError(f"boxes ({boxes}) and reverse steps ({reverse_steps}) must be at least 1 "
                         f"and walls ({walls}) at least 0")
    if boxes + 1 + walls > inner:
        raise ValueError(f"size {size} leaves {inner} cells inside the wall border, too few for "
                         f"{boxes} boxes, the player and {walls} walls: raise the size or lower "
                         "boxes or walls")
    rng = random.Random(seed)
    interior = [(r, c) for r in range(1, size - 1) for c in range(1, size - 1)]
    border = {(r, c) for r in range(size) for c in range(size)} - set(interior)
    for _ in range(1000):
        inner_walls = rng.sample(interior, walls)
        floor = [cell for cell in interior if cell not in inner_walls]
        picked = rng.sample(floor, boxes + 1)
        goals = frozenset(picked[:boxes])
        state = State(frozenset(border.union(inner_walls)), goals, goals, picked[-1], (size, size))
        for _ in range(reverse_steps):
            state = pull(state, rng.choice("UDLR"))
        if not is_solved(state) and (solution == (1, None) or in_range(moves_left(state), solution)):
            return state
    wanted = "" if solution == (1, None) else f" with an optimal solution of {solution[0]} to {solution[1] or 'any'} moves"
    raise ValueError(f"no unsolved level{wanted} in 1000 tries: change reverse steps ({reverse_steps}), "
                     "the room or the solution length")


def in_range(n, bounds):
    low, high = bounds
    return low <= n and (high is None or n <= high)


# ---------------------------------------------------------------- moves as a person or the model writes them
def moves_in(text):
    """The moves in free text, word by word (words are separated by anything but letters): a
    letter U/D/L/R or a word up/down/left/right, any case, or capitals run together as the
    solver writes them ("RRD"). None when there is no move or a word is not a move: "dull"
    is a word, not D U L L."""
    moves = []
    for word in re.findall(r"[A-Za-z]+", text):
        letters = word.upper() if len(word) == 1 else word  # "r" is R; "rrd" is not RRD
        if set(letters) <= set(MOVES):
            moves.extend(letters)
        elif word.lower() in MOVE_WORDS:
            moves.append(MOVE_WORDS[word.lower()])
        else:
            return None
    return moves or None


# ---------------------------------------------------------------- one line about a position
def status(state, before=None):
    """One line, e.g. "boxes on goals 0/1, distance 3 -> 2, solved: no" (the distance change
    only when given the state `before`), plus a warning when deadlocked."""
    change = f"{box_distance(before)} -> " if before is not None else ""
    text = (f"boxes on goals {len(state.boxes & state.goals)}/{len(state.boxes)}, distance "
            f"{change}{box_distance(state)}, solved: {'yes' if is_solved(state) else 'no'}")
    return text + (", deadlocked: a box is stuck in a corner" if deadlocked(state) else "")


# ---------------------------------------------------------------- fixed answers
def solves(state, moves):
    """Do these moves, played in order, solve the level at some point? (moves.constant_successes)"""
    for m in moves:
        state = move(state, m)
        if is_solved(state):
            return True
    return False


# ---------------------------------------------------------------- command-line probe
def play_in_terminal(level, lines, out):
    """A person plays: each line holds moves, in any case ("u", "rr", "up left"); "reset" starts
    over and "quit" stops. Works with piped input."""
    state = level
    print('moves: u/d/l/r or up/down/left/right; "reset" starts over, "quit" stops', file=out)
    print(render(state), status(state), sep="\n", file=out)
    for line in lines:
        command, moves = line.strip().lower(), moves_in(line.upper())
        if command in ("q", "quit"):
            return
        if command == "reset":
            state = level
        elif moves is None:
            print(f"not moves: {command!r}", file=out)
        else:
            state, reward, blocked, _ = play(state, moves)
            print(f"reward {reward:+.2f}, blocked moves: {blocked}", file=out)
        print(render(state), status(state), sep="\n", file=out)
        if is_solved(state):
            print("Solved!", file=out)
            return


@one_line
def main(argv=None):
    """Print a level and its optimal solution, as text or as one JSON line; or play it."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--size", type=int, default=6, help="room size including the wall border")
    parser.add_argument("--boxes", type=int, default=1)
    parser.add_argument("--reverse-steps", type=int, default=20, help="difficulty")
    parser.add_argument("--walls", type=int, default=0, help="random inner walls")
    parser.add_argument("--moves", default="", help='moves to apply first, e.g. "RRD" or "rrd"')
    parser.add_argument("--max-states", type=int, default=200_000, help="the solver's limit")
    parser.add_argument("--json", action="store_true", help='one line {"board", "solution"}')
    parser.add_argument("--play", action="store_true", help="play the level in the terminal")
    args = parser.parse_args(argv)
    try:
        level = level_for(args.seed, args.size, args.boxes, args.reverse_steps, args.walls)
    except ValueError as error:
        parser.error(str(error))
    if args.play:
        return play_in_terminal(level, sys.stdin, sys.stdout)
    moves = moves_in(args.moves.upper()) if args.moves else []
    if moves is None:
        parser.error(f"--moves: not moves: {args.moves!r}")
    state = play(level, moves)[0]
    try:
        solution = solve(state, args.max_states)
    except GaveUp as error:
        parser.error(f"{error}, so no solution is known: raise --max-states")
    if args.json:
        print(json.dumps({"board": render(state).split("\n"), "solution": solution}))
    else:
        print(render(state), status(state), f"optimal solution: {solution}", sep="\n")


if __name__ == "__main__":
    main()
