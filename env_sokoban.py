"""Sokoban for AT-GRPO ("Stronger Together: On-Policy RL for Collaborative LLMs", Zhao et al.
2025, arXiv 2510.11062): seeded levels, the move rules, step rewards, a BFS solver and the
paper's two-role planning workflow as text. Read top to bottom: the board (State, parse_board,
render), the rules (move), rewards, deadlocks, the solver, the reverse-play generator, reading
the model's moves, the two-role task (SokobanTask), a command-line probe (`--help`).

Step rewards, from the paper's public code (PettingLLMs, pettingllms/multi_agent_env/stateful/
env_state.py, SokobanGridEnvState.step_single): -0.01 a move, or -0.05 a blocked move (instead,
not in addition); +1 a box pushed onto a goal, -0.5 a box pushed off one; shaping
+0.1 * (D(before) - D(after)) with D the sum over boxes of the Manhattan distance to the nearest
goal; +10 for the move that solves. The code's shaping is 0.1 * (0.99 * Phi' - Phi), Phi = -D: we
drop the 0.99, which pays +0.001 * D for every move that pushes nothing. Its -5 after 200 moves
is not used: an episode ends after max_turns turns.

The team reward (ours, see docs/sokoban.md) is progress over a turn: with team="solver" (the
default) the drop in the optimal number of moves left (the solver's), with team="distance" the
drop in D; +10 when the turn solves the level.
"""
import argparse
import copy
import functools
import itertools
import json
import random
import re
import sys
from collections import deque
from dataclasses import dataclass, replace

MOVES = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}
MOVE_WORDS = {"up": "U", "down": "D", "left": "L", "right": "R"}
SYMBOLS = "# .$*@+"  # wall, floor, goal, box, box on goal, player, player on goal

STEP_REWARD, INVALID_REWARD = -0.01, -0.05  # a move; a blocked move (instead)
BOX_ON_GOAL_REWARD, BOX_OFF_GOAL_REWARD = 1.0, -0.5
SHAPING, SOLVE_REWARD = 0.1, 10.0  # times the box-goal distance gained; the solving move
FORMAT_PENALTY = -2.0  # an answer with no readable moves, as the paper's code: below any move's
# reward, else (at -0.1) a group that holds wrong moves (about -1 each) teaches answering nothing
TEAM_REWARDS = ("solver", "distance")  # progress = fewer optimal moves left, or smaller D
ROLES = ("planner", "executor")


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


def team_reward(before, after, team="solver"):
    """The team's progress over one turn, +10 if now solved. team="solver": optimal moves left
    before - after (a turn that makes the level unsolvable: -10); "distance": D before - after."""
    bonus = SOLVE_REWARD if is_solved(after) and not is_solved(before) else 0.0
    if team == "distance":
        return box_distance(before) - box_distance(after) + bonus
    left_before, left_after = moves_left(before), moves_left(after)
    if left_after is None:
        return 0.0 if left_before is None else -SOLVE_REWARD
    return (left_before or 0) - left_after + bonus


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


# ---------------------------------------------------------------- the model's moves
ANSWER_TAGS = re.compile(r"<(/?)answer>", re.IGNORECASE)  # an opening or closing tag
STOP_STRINGS = ["</answer>", "\n"]  # a turn ends at either: the answer is its first line, and
# free text after it is neither generated nor trained (it was 85 % of the tokens: README)


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


def parse_moves(text):
    """The moves ["R", "R", "D"] in the last <answer>R R D</answer> (or <answer>["r", "right",
    "down"]</answer>, ...) of a model's output; None without an answer or readable moves.
    An answer left open (the model ran on without </answer>) counts up to the end of its line.
    One pass over the tags (a regex <answer>(.*?)</answer> takes quadratic time on "<answer>" * n):
    an answer runs from an opening tag to the next closing tag, as that regex reads it."""
    answer = start = opened = None  # the last answer; where the open one starts; the last <answer>
    for tag in ANSWER_TAGS.finditer(text):
        if not tag.group(1):
            opened = tag.end()
            start = opened if start is None else start
        elif start is not None:
            answer, start = text[start:tag.start()], None
    if answer is None and opened is not None:
        answer = text[opened:].partition("\n")[0]
    return moves_in(answer) if answer is not None else None


# ---------------------------------------------------------------- the two-role task
RULES = ("Sokoban: push every box onto a goal.\n"
         "Symbols: # wall, _ floor, . goal, $ box, * box on a goal, @ you, + you on a goal.\n"
         "Moves: U up, D down, L left, R right. Walking into a box pushes it one cell. A box "
         "cannot be pushed into a wall or another box, and boxes can never be pulled. A blocked "
         "move does nothing. A box pushed into a corner off the goals is stuck for good.\n")
TEAM = ("You are the {} of a team of two: the planner proposes moves, they are tried on a copy "
        "of the board, and the executor sees the result and decides the moves really played.")
SYSTEM_PROMPTS = {"planner": RULES + TEAM.format("planner"),
                  "executor": RULES + TEAM.format("executor"),
                  "solo": RULES + "Your moves are played on the board."}
ANSWER_FORMAT = {1: "Answer with one move inside answer tags: U, D, L or R, for example <answer>L</answer>.",
                 "n": "Answer with at most {} moves inside answer tags: U, D, L or R, for example "
                      "<answer>L U</answer>."}  # measured: more varied samples than "<answer>R R D</answer>"


def positions(state):
    """The board as coordinates: "Positions (row, column): you (4, 4), boxes (4, 3), goals (3, 3)."."""
    where = lambda cells: " ".join(f"({r}, {c})" for r, c in sorted(cells))
    return (f"Positions (row, column): you {where([state.player])}, boxes {where(state.boxes)}, "
            f"goals {where(state.goals)}.")


def status(state, before=None):
    """One line, e.g. "boxes on goals 0/1, distance 3 -> 2, solved: no" (the distance change
    only when given the state `before`), plus a warning when deadlocked."""
    change = f"{box_distance(before)} -> " if before is not None else ""
    text = (f"boxes on goals {len(state.boxes & state.goals)}/{len(state.boxes)}, distance "
            f"{change}{box_distance(state)}, solved: {'yes' if is_solved(state) else 'no'}")
    return text + (", deadlocked: a box is stuck in a corner" if deadlocked(state) else "")


class SokobanTask:
    """One level played in turns. Each turn the planner proposes moves, which are played on a
    copy, and the executor, seeing the result, plays moves on the real board; with planner=False
    (the single-agent baseline) the executor plays alone. An answer counts up to moves_per_turn
    moves. The episode ends when the level is solved or after max_turns turns. act(role, text)
    returns that agent's reward, local + alpha * team, where local is the summed step rewards of
    its moves and team is team_reward (of kind `team`), both over the planner's copy (the real
    board is untouched) or the executor's real board. An answer without readable moves gets
    FORMAT_PENALTY (team 0) and a note shown to the next role. All attributes are immutable and
    messages(role) is a pure function of them, so copies give byte-identical prompts and acting
    on a copy never changes the original (tree sampling)."""

    def __init__(self, level, max_turns=4, alpha=1.0, planner=True, moves_per_turn=1, team="solver",
                 positions=False):
        self.level = self.state = level
        self.max_turns, self.alpha, self.planner = max_turns, alpha, planner
        self.moves_per_turn, self.team, self.positions = moves_per_turn, team, positions
        self.roles = ROLES if planner else ("executor",)
        self.turn = 0
        self.moves = 0  # moves the executor has played (blocked ones too)
        self.answers = ()  # the executor's moves of each turn, "-" for an unreadable answer
        self.next_role = self.roles[0]
        self.observation = ""  # what the last act produced, shown to the next role

    @property
    def solved(self):
        return is_solved(self.state)

    @property
    def done(self):
        return self.solved or self.turn >= self.max_turns

    def copy(self):
        """An independent copy: all attributes are immutable, so a shallow copy is a deep one."""
        return copy.copy(self)

    def restart(self):
        """A copy back at the first board but at the same turn and role (the board ablation)."""
        again = self.copy()
        again.state, again.observation = self.level, ""
        return again

    def messages(self, role):
        """The chat messages [system, user] for `role`, who must act next."""
        self._check(role)
        system = SYSTEM_PROMPTS[role if self.planner else "solo"]
        answer = ANSWER_FORMAT[1] if self.moves_per_turn == 1 else ANSWER_FORMAT["n"].format(self.moves_per_turn)
        lines = [f"Turn {self.turn + 1} of {self.max_turns}. The board:", board_text(self.state),
                 positions(self.state) if self.positions else "", status(self.state) + ".", self.observation, answer]
        user = "\n".join(line for line in lines if line)
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def act(self, role, text):
        """Apply `role`'s output text and return its reward (class docstring)."""
        self._check(role)
        moves = parse_moves(text)
        if moves is not None:
            moves = moves[:self.moves_per_turn]
        return self._propose(moves) if role == "planner" else self._execute(moves)

    def _check(self, role):
        """Only the role whose move it is may act, and only while the episode runs."""
        if self.done:
            raise ValueError("the episode is over")
        if role != self.next_role:
            raise ValueError(f"it is the {self.next_role}'s move, not the {role}'s")

    def _propose(self, moves):
        """The planner: play the proposal on a copy and show the result to the executor."""
        self.next_role = "executor"
        if moves is None:
            self.observation = "The planner's answer had no readable moves: there is no proposal."
            return FORMAT_PENALTY
        after, local, blocked, _ = play(self.state, moves)
        self.observation = (f"The planner proposes: {' '.join(moves)}\n"
                            f"Played on a copy of the board, the proposal gives:\n{board_text(after)}\n"
                            f"{status(after, self.state)}, blocked moves: {blocked}.")
        return local + self.alpha * team_reward(self.state, after, self.team)

    def _execute(self, moves):
        """The executor: play the moves on the real board and end the turn."""
        before = self.state
        if moves is None:
            local = FORMAT_PENALTY
            self.observation = "Last turn's answer had no readable moves: nothing was played."
        else:
            self.state, local, blocked, played = play(before, moves)
            self.moves += played
            self.observation = (f"Last turn these moves were played: {' '.join(moves)}\n"
                                f"{status(self.state, before)}, blocked moves: {blocked}.")
        self.answers += ("".join(moves) if moves else "-",)
        self.turn += 1
        self.next_role = self.roles[0]
        return local + self.alpha * team_reward(before, self.state, self.team)


# ---------------------------------------------------------------- constant answers
CONSTANT_LENGTH = 6  # every move string up to this length: 5,460 fixed answers


@functools.lru_cache(maxsize=8)
def constant_successes(levels, budget, answers=None):
    """{answer: fraction of `levels` it solves} for every fixed answer, a move string played
    again and again, whatever the board, until `budget` moves are played or the level is solved:
    every string up to CONSTANT_LENGTH moves, or only `answers` (a tuple of strings). A policy
    that does not read the board can do no better than the best of these."""
    strings = answers if answers is not None else [
        "".join(p) for n in range(1, CONSTANT_LENGTH + 1) for p in itertools.product("UDLR", repeat=n)]
    return {s: sum(solves(level, (s * budget)[:budget]) for level in levels) / len(levels) for s in strings}


def solves(state, moves):
    """Do these moves, played in order, solve the level at some point?"""
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
