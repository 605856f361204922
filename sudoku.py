"""Sudoku 4 x 4, the game, as the AT-GRPO paper plays it ("Stronger Together: On-Policy
Reinforcement Learning for Collaborative LLMs", Zhao et al. 2025, arXiv 2510.11062v1, one of its
two games with Sokoban): fill the grid with the digits 1 to 4 so that every row, every column and
every 2 x 2 box holds each digit once. This file holds the grid, the fill rules, the rewards of
fills, a solver that counts solutions, the seeded generator of puzzles with exactly one solution,
and the fills as a person or the model writes them ("R2C3=4"). The two-role task that the model
plays, and the command line (`python env_sudoku.py --seed 3 --play`), are in env_sudoku.py. Read
top to bottom.

The public code (PettingLLMs, pettingllms-ai/PettingLLMs at 2e3c5f2, the commit released with the
paper; pettingllms/multi_agent_env/stateful/env_state.py, class Sudoku4x4EnvState, lines 427-849)
takes a fill (r, c, v) when the cell is empty and v is not yet in its row, column or box
(`_is_valid_placement`, lines 577-609), whether or not v is the puzzle's digit there; a wrong
digit taken so stays (there is no erasing) and the puzzle can no longer be finished. So does ours
(`place`). Its fill rewards (`step`, lines 753-811) are -0.01 a fill, +0.2 if the cell had one
candidate (+0.1 if two), shaping on the filled fraction and on "constraints satisfied", -0.3
instead for a fill it does not take, +2 when the grid is solved and +0.5 more when no more fills
than empty cells were played. Ours (`play`) keeps the step cost, the -0.3, the +2 and the +0.5,
and replaces the shaping by the truth, which a puzzle with one solution has: +1 a right digit,
-1 a wrong one (the public shaping pays about +0.3 for a wrong digit that fits the rules now,
though it makes the puzzle unsolvable). Its puzzles come from a JSON file of pre-generated grids
that the repository does not ship (lines 466-517); without it every seed gets one default puzzle
(lines 520-527, PUBLIC_DEFAULT here), which has no solution: it holds two 4s in one box. Ours are
generated from the seed (`level_for`), with exactly one solution, and the number of empty cells as
the knob. (At a054fb1 the class is renamed SudukuEnvState and its lines from 466 on are 8 further
down; its puzzles and rewards are the same.)
"""
import random
import re
from dataclasses import dataclass

SIZE, BOX = 4, 2  # the grid is SIZE x SIZE, its boxes BOX x BOX
DIGITS = tuple(range(1, SIZE + 1))
MIN_GIVENS = 4  # no 4 x 4 puzzle with fewer givens has one solution (tests: all 288 grids), so at most 12 empty

STEP_REWARD, INVALID_REWARD = -0.01, -0.3  # a fill the grid takes; one it does not (instead)
RIGHT_REWARD, WRONG_REWARD = 1.0, -1.0  # a digit taken: the solution's, or another that fits the rules now
SOLVE_REWARD, OPTIMAL_BONUS = 2.0, 0.5  # the fill that solves; + if no fill of the episode was refused

PUBLIC_DEFAULT = ((1, 0, 0, 4), (0, 0, 1, 0), (0, 4, 0, 0), (4, 0, 0, 1))  # env_state.py lines 524-527


# ---------------------------------------------------------------- the grid
@dataclass(frozen=True)
class Sudoku:
    """One position. Immutable (tuples), so copies cost nothing and levels can be hashed."""
    cells: tuple     # SIZE rows of SIZE digits, 0 for an empty cell
    solution: tuple  # the puzzle's one solution, in the same form
    start: tuple     # the cells of the puzzle as given (what a restart goes back to)


def box_of(r, c):
    """The cells (row, column) of the box that holds (r, c), 0-based."""
    r0, c0 = r - r % BOX, c - c % BOX
    return [(r0 + i, c0 + j) for i in range(BOX) for j in range(BOX)]


def fits(cells, r, c, d):
    """Does digit d fit at (r, c): not yet in its row, its column or its box? (Asked of empty cells:
    place() refuses a filled one first.)"""
    return (d not in cells[r] and all(cells[i][c] != d for i in range(SIZE))
            and all(cells[i][j] != d for i, j in box_of(r, c)))


def candidates(cells, r, c):
    """The digits that fit at the empty cell (r, c); () if it is filled."""
    return () if cells[r][c] else tuple(d for d in DIGITS if fits(cells, r, c, d))


def with_digit(cells, r, c, d):
    """The cells with digit d at (r, c)."""
    return tuple(tuple(d if (i, j) == (r, c) else x for j, x in enumerate(row)) for i, row in enumerate(cells))


def count_solutions(cells, limit=2):
    """How many ways the empty cells can be filled, counted up to `limit` (2: enough to prove a
    puzzle has exactly one). Backtracking, always on the empty cell with the fewest candidates."""
    empty = [(r, c) for r in range(SIZE) for c in range(SIZE) if not cells[r][c]]
    if not empty:
        return 1
    r, c = min(empty, key=lambda cell: len(candidates(cells, *cell)))
    found = 0
    for d in candidates(cells, r, c):
        found += count_solutions(with_digit(cells, r, c, d), limit - found)
        if found >= limit:
            break
    return found


def solve(cells):
    """The first solution found (in the order of count_solutions), None if there is none."""
    empty = [(r, c) for r in range(SIZE) for c in range(SIZE) if not cells[r][c]]
    if not empty:
        return cells
    r, c = min(empty, key=lambda cell: len(candidates(cells, *cell)))
    for d in candidates(cells, r, c):
        solved = solve(with_digit(cells, r, c, d))
        if solved is not None:
            return solved
    return None


def puzzle(rows):
    """A Sudoku from rows of digits (0, "_" or "." for an empty cell): a tuple of tuples, or a text
    such as "1__4/__1_/_4__/4__1". ValueError unless it is SIZE x SIZE, breaks no rule, and has
    exactly one solution."""
    if isinstance(rows, str):
        rows = [[0 if s in "_." else int(s) for s in row] for row in rows.split("/")]
    cells = tuple(tuple(int(d) for d in row) for row in rows)
    if len(cells) != SIZE or any(len(row) != SIZE or not set(row) <= {0, *DIGITS} for row in cells):
        raise ValueError(f"a puzzle is {SIZE} rows of {SIZE} digits 0 to {SIZE} (0: empty)")
    if any(cells[r][c] and not fits(with_digit(cells, r, c, 0), r, c, cells[r][c])
           for r in range(SIZE) for c in range(SIZE)):
        raise ValueError("the puzzle breaks a rule: a digit twice in a row, column or box")
    n = count_solutions(cells)
    if n != 1:
        raise ValueError(f"the puzzle has {'no' if n == 0 else 'more than one'} solution; a puzzle needs exactly one")
    return Sudoku(cells, solve(cells), cells)


def render(state):
    """The cells as compact text, "1__4/__1_/_4__/4__1"; puzzle(render(s)) has s's cells."""
    return "/".join("".join(str(d) if d else "_" for d in row) for row in state.cells)


def grid_text(state):
    """The grid as the model sees it: the column numbers, then one line a row, R1 to R4, its cells
    between bars, "_" for an empty one. Every cell and every bar is one token of the bundled
    tokenizer (a digit after a space is two), so a column is a fixed token distance."""
    head = "    " + " ".join(str(c + 1) for c in range(SIZE))
    return "\n".join([head] + [f"R{r + 1} |" + "|".join(str(d) if d else "_" for d in row) + "|"
                               for r, row in enumerate(state.cells)])


def empty_cells(state):
    """The empty cells, (row, column) 0-based, row by row."""
    return [(r, c) for r in range(SIZE) for c in range(SIZE) if not state.cells[r][c]]


def wrong_cells(state):
    """The filled cells whose digit is not the solution's."""
    return [(r, c) for r in range(SIZE) for c in range(SIZE) if state.cells[r][c] not in (0, state.solution[r][c])]


def distance(state):
    """How far from solved: the cells that differ from the solution (empty or wrong)."""
    return len(empty_cells(state)) + len(wrong_cells(state))


def is_solved(state):
    return state.cells == state.solution


def finishable(state):
    """Can the grid still be solved? Not once it holds a wrong digit (there is no erasing)."""
    return not wrong_cells(state)


# ---------------------------------------------------------------- fills as text
FILL = re.compile(r"R\s*(\d+)\s*C\s*(\d+)\s*[=:]\s*(\d+)"  # R2C3=4, r2c3 = 4, R2 C3: 4
                  r"|\(\s*(\d+)\s*,\s*(\d+)\s*\)\s*[=:]\s*(\d+)", re.IGNORECASE)  # (2,3)=4, (2, 3) = 4
BETWEEN = re.compile(r"[\s,;.]*")  # what may separate fills: spaces, commas, semicolons, full stops


def fill_text(r, c, d):
    """The fill's canonical text, rows and columns from 1: fill_text(1, 2, 4) == "R2C3=4"."""
    return f"R{r + 1}C{c + 1}={d}"


def read_fill(text):
    """(row, column, digit), 0-based cells, of a canonical fill "R2C3=4": (1, 2, 4)."""
    r, c, d = (int(n) for n in FILL.fullmatch(text).groups()[:3])
    return r - 1, c - 1, d


def fills_in(text):
    """The fills in free text, in canonical form: fills_in("r1c2 = 3, (4,1)=2") == ["R1C2=3", "R4C1=2"].
    A fill is R<row>C<column>=<digit> (any case, spaces around the parts, ":" for "=") or
    (<row>,<column>)=<digit>; rows, columns and digits from 1 to 4. Fills are separated by spaces,
    commas, semicolons or full stops. None when there is no fill, when anything else stands between
    them ("R1C2=3 and R2C1=4", "R1C23"), or when a number is out of range ("R5C1=2", "R1C1=0"):
    none of these is a fill. Duplicates are kept (the grid refuses the second: place)."""
    fills, at = [], 0
    for m in FILL.finditer(text):
        if not BETWEEN.fullmatch(text, at, m.start()):
            return None
        r, c, d = (int(n) for n in (m.groups()[:3] if m.group(1) else m.groups()[3:]))
        if not (1 <= r <= SIZE and 1 <= c <= SIZE and 1 <= d <= SIZE):
            return None
        fills.append(fill_text(r - 1, c - 1, d))
        at = m.end()
    return fills if fills and BETWEEN.fullmatch(text, at) else None


# ---------------------------------------------------------------- the rules and the rewards
RIGHT, WRONG, FILLED, CLASH = "right", "wrong", "filled", "clash"  # what place() did with a fill


def place(state, fill):
    """One fill "R2C3=4": (the state after, what happened). A filled cell (given, or filled before)
    is refused (FILLED), and so is a digit already in the cell's row, column or box (CLASH): the
    state is unchanged. Otherwise the digit is written: RIGHT if it is the solution's, WRONG if not
    (it fits the rules for now, but the grid can no longer be solved)."""
    r, c, d = read_fill(fill)
    if state.cells[r][c]:
        return state, FILLED
    if not fits(state.cells, r, c, d):
        return state, CLASH
    after = Sudoku(with_digit(state.cells, r, c, d), state.solution, state.start)
    return after, RIGHT if d == state.solution[r][c] else WRONG


def fill_reward(outcome):
    """The reward of one fill, without the solve bonus: refused INVALID_REWARD (instead of the step
    cost); taken STEP_REWARD + RIGHT_REWARD or WRONG_REWARD."""
    if outcome in (FILLED, CLASH):
        return INVALID_REWARD
    return STEP_REWARD + (RIGHT_REWARD if outcome == RIGHT else WRONG_REWARD)


def play(state, fills, played=0):
    """Play fills in order, stopping once solved. Returns (state after, local reward, refused fills,
    fills played): the sum of fill_reward, + SOLVE_REWARD on the fill that solves, + OPTIMAL_BONUS
    if the episode then has played no more fills than the puzzle had empty cells (none refused:
    a taken wrong digit makes it unsolvable); `played` is how many fills the episode had played
    before these."""
    reward = refused = n = 0
    for fill in fills:
        if is_solved(state):
            break
        state, outcome = place(state, fill)
        n, refused = n + 1, refused + (outcome in (FILLED, CLASH))
        reward += fill_reward(outcome)
        if is_solved(state):
            start_empty = sum(not d for row in state.start for d in row)
            reward += SOLVE_REWARD + (OPTIMAL_BONUS if played + n <= start_empty else 0.0)
    return state, reward, refused, n


def solves(state, fills):
    """Do these fills, played in order, solve the puzzle? (a constant answer's check)"""
    return is_solved(play(state, fills)[0])


def right_fills(state):
    """The fills that are right now: the solution's digit at every empty cell where it still fits
    (all of them while the grid holds no wrong digit), row by row."""
    return [fill_text(r, c, state.solution[r][c]) for r, c in empty_cells(state)
            if fits(state.cells, r, c, state.solution[r][c])]


# ---------------------------------------------------------------- levels
def full_grid(rng):
    """A random solved grid: backtracking over the cells row by row, the digits tried in an order
    drawn from rng. Every one of the 288 solved 4 x 4 grids can come out."""
    def fill(cells, k):
        if k == SIZE * SIZE:
            return cells
        r, c = divmod(k, SIZE)
        for d in rng.sample(DIGITS, SIZE):
            if fits(cells, r, c, d):
                done = fill(with_digit(cells, r, c, d), k + 1)
                if done is not None:
                    return done
        return None
    return fill(tuple((0,) * SIZE for _ in range(SIZE)), 0)


def level_for(seed, empty=4, tries=1000):
    """A seeded puzzle with `empty` empty cells and exactly one solution: a random solved grid,
    then its cells emptied in a random order, each kept filled if emptying it would allow a second
    solution (count_solutions proves there is one), until `empty` are empty. A grid that stops
    short is drawn again, up to `tries` times, then ValueError."""
    most = SIZE * SIZE - MIN_GIVENS
    if not 1 <= empty <= most:
        raise ValueError(f"empty cells must be 1 to {most}, not {empty}: a 4 x 4 Sudoku with fewer than "
                         f"{MIN_GIVENS} givens has more than one solution, and with none empty it is solved")
    rng = random.Random(seed)
    for _ in range(tries):
        solution = cells = full_grid(rng)
        holes = 0
        for k in rng.sample(range(SIZE * SIZE), SIZE * SIZE):
            fewer = with_digit(cells, *divmod(k, SIZE), 0)
            if count_solutions(fewer) == 1:
                cells, holes = fewer, holes + 1
                if holes == empty:
                    return Sudoku(cells, solution, cells)
    raise ValueError(f"no puzzle with {empty} empty cells and one solution in {tries} tries: "
                     "lower the empty cells")
