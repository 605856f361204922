"""sudoku.py, the game: the solver against every solved grid, the seeded puzzles (one solution each,
the number of empty cells asked for), the fills as text, the rules and the rewards by hand (a right,
a wrong, a refused fill, the solve with and without its bonus). env_sudoku.py, the task: the
answers, the rewards and the team reward of both roles by hand, the format penalty, copies,
restarts and the prompts."""
import argparse
import itertools
import re
from collections import Counter

import pytest

import atgrpo
import env_sudoku as es
import env_two_roles
import sudoku
import tasks
from evaluate_games import evaluate

SOLUTION = "1234/3412/2143/4321"
# four empty cells, one solution; R1C1 takes 1 or 3 by the rules, 1 is right: R1C1=3 is a wrong
# digit that fits (and then R2C1, whose digit is 3, clashes)
P4 = sudoku.puzzle("___4/_412/2143/4321")
P1 = sudoku.puzzle("12_4/3412/2143/4321")  # one empty cell, R1C3 = 3


def all_solved_grids():
    """Every solved 4 x 4 grid, by brute force over rows that are permutations: 288 of them."""
    rows = list(itertools.permutations(sudoku.DIGITS))
    ok = lambda g: all(len({g[r][c] for r in range(4)}) == 4 for c in range(4)) and all(  # noqa: E731
        len({g[r][c] for r, c in sudoku.box_of(br, bc)}) == 4 for br in (0, 2) for bc in (0, 2))
    return [g for g in itertools.product(rows, repeat=4) if ok(g)]


GRIDS = all_solved_grids()


def brute_count(cells):
    return sum(all(cells[r][c] in (0, g[r][c]) for r in range(4) for c in range(4)) for g in GRIDS)


# ---------------------------------------------------------------- the grid and the solver
def test_the_solver_counts_as_brute_force_does():
    assert len(GRIDS) == 288 and sudoku.count_solutions(((0,) * 4,) * 4, limit=1000) == 288
    assert sudoku.count_solutions(P4.cells) == brute_count(P4.cells) == 1
    emptier = sudoku.with_digit(sudoku.with_digit(P4.cells, 1, 1, 0), 2, 2, 0)  # R2C2 and R3C3 emptied too
    assert sudoku.count_solutions(emptier, limit=10) == brute_count(emptier)
    for seed in range(30):  # random partial grids: the count up to 2 is min(2, the true count)
        cells = sudoku.level_for(seed, 12).solution
        for k in sudoku.random.Random(seed).sample(range(16), 11):
            cells = sudoku.with_digit(cells, *divmod(k, 4), 0)
        assert sudoku.count_solutions(cells) == min(2, brute_count(cells))
    assert sudoku.solve(P4.cells) == sudoku.puzzle(SOLUTION).cells == P4.solution


def test_the_public_codes_default_puzzle_has_no_solution():
    """PettingLLMs' fallback 4 x 4 puzzle (env_state.py lines 524-527), which every seed gets when its
    JSON file of puzzles is missing (it is not in the repository): R3C2 and R4C1 are both 4, in one box."""
    assert sudoku.count_solutions(sudoku.PUBLIC_DEFAULT) == brute_count(sudoku.PUBLIC_DEFAULT) == 0
    assert sudoku.PUBLIC_DEFAULT[2][1] == sudoku.PUBLIC_DEFAULT[3][0] == 4
    with pytest.raises(ValueError, match="breaks a rule"):
        sudoku.puzzle(sudoku.PUBLIC_DEFAULT)


def test_puzzles_from_text_and_bad_ones():
    assert sudoku.render(P4) == "___4/_412/2143/4321" and P4.start == P4.cells
    assert sudoku.puzzle(sudoku.render(P4)) == P4
    with pytest.raises(ValueError, match="more than one solution"):
        sudoku.puzzle("____/____/____/____")
    with pytest.raises(ValueError, match="breaks a rule"):
        sudoku.puzzle("11__/____/____/____")
    with pytest.raises(ValueError, match="4 rows of 4 digits"):
        sudoku.puzzle("1234/3412/2143")
    with pytest.raises(ValueError, match="4 rows of 4 digits"):
        sudoku.puzzle("1235/3412/2143/4321")


def test_the_grid_as_the_model_sees_it_one_token_a_cell(tokenizer):
    text = sudoku.grid_text(P4)
    assert text == "    1 2 3 4\nR1 |_|_|_|4|\nR2 |_|4|1|2|\nR3 |2|1|4|3|\nR4 |4|3|2|1|"
    for row in text.split("\n")[1:]:
        tokens = [tokenizer.decode([t]) for t in tokenizer(row)["input_ids"]]
        assert tokens[:3] == ["R", row[1], " |"]
        cells = tokens[3:]  # cell, bar, cell, bar, ...: one token each
        assert cells[1::2] == ["|"] * 4 and cells[0::2] == list(row[4::2])


def test_distance_and_finishable():
    assert sudoku.distance(P4) == 4 and sudoku.finishable(P4) and not sudoku.is_solved(P4)
    wrong = sudoku.place(P4, "R1C1=3")[0]
    assert sudoku.distance(wrong) == 4 and not sudoku.finishable(wrong)  # 3 empty + 1 wrong
    assert sudoku.distance(sudoku.place(P4, "R1C1=1")[0]) == 3
    assert sudoku.empty_cells(P4) == [(0, 0), (0, 1), (0, 2), (1, 0)]


# ---------------------------------------------------------------- levels
@pytest.mark.parametrize("empty", [1, 4, 8, 12])
def test_every_generated_puzzle_has_exactly_one_solution(empty):
    levels = [sudoku.level_for(seed, empty) for seed in range(150)]
    for level in levels:
        assert len(sudoku.empty_cells(level)) == empty and level.start == level.cells
        assert sudoku.count_solutions(level.cells, limit=3) == 1 and sudoku.solve(level.cells) == level.solution
        assert all(level.cells[r][c] in (0, level.solution[r][c]) for r in range(4) for c in range(4))
        assert level.solution in GRIDS
    assert len(set(levels)) > 140  # seeds differ; a level can be hashed


def test_levels_are_seeded_and_the_test_split_draws_too():
    assert sudoku.level_for(7, 5) == sudoku.level_for(7, 5) != sudoku.level_for(8, 5)
    assert len(sudoku.empty_cells(sudoku.level_for(10 ** 9 + 3, 6))) == 6
    assert len({sudoku.level_for(s, 1).solution for s in range(2000)}) > 250  # of the 288 solved grids


@pytest.mark.parametrize("empty", [0, -1, 13, 16])
def test_impossible_numbers_of_empty_cells_say_what_to_do(empty):
    with pytest.raises(ValueError, match=f"empty cells must be 1 to 12, not {empty}: a 4 x 4 Sudoku with fewer "
                                         "than 4 givens"):
        sudoku.level_for(0, empty)


# ---------------------------------------------------------------- fills as text
@pytest.mark.parametrize("text, fills", [
    ("R1C2=3", ["R1C2=3"]),
    ("r1c2=3", ["R1C2=3"]),
    ("R1C2 = 3", ["R1C2=3"]),
    ("R1 C2: 3", ["R1C2=3"]),
    ("(1,2)=3", ["R1C2=3"]),
    ("( 1 , 2 ) = 3", ["R1C2=3"]),
    (" R1C2=3 R4C1=2 ", ["R1C2=3", "R4C1=2"]),
    ("R1C2=3, (4,1)=2; r3c3=1.", ["R1C2=3", "R4C1=2", "R3C3=1"]),
    ("R1C2=3 R1C2=4", ["R1C2=3", "R1C2=4"]),  # duplicates kept: the grid refuses the second
    ("", None), ("   ", None), ("R1C2", None), ("R1C2=", None), ("=3", None),
    ("R1C2=3 and R2C1=4", None), ("put 3 in R1C2=3", None), ("R1C2=3!", None),
    ("R5C1=2", None), ("R1C0=2", None), ("R1C1=0", None), ("R1C1=5", None), ("R1C1=34", None), ("R11C1=3", None),
    ("(1,2,3)", None), ("1,2,3", None),
])
def test_fills_in_text(text, fills):
    assert sudoku.fills_in(text) == fills


def test_fill_text_and_read_fill_round_trip():
    assert sudoku.fill_text(1, 2, 4) == "R2C3=4" and sudoku.read_fill("R2C3=4") == (1, 2, 4)
    for r, c, d in itertools.product(range(4), range(4), sudoku.DIGITS):
        assert sudoku.read_fill(sudoku.fill_text(r, c, d)) == (r, c, d)


# ---------------------------------------------------------------- the rules and the rewards by hand
def test_place_right_wrong_filled_and_clash():
    after, what = sudoku.place(P4, "R1C1=1")
    assert what == sudoku.RIGHT and after.cells[0] == (1, 0, 0, 4) and after.start == P4.cells
    assert sudoku.place(P4, "R1C1=3")[1] == sudoku.WRONG  # fits the rules now (row 4, column 2 4, box 4)
    assert sudoku.place(P4, "R4C4=1") == (P4, sudoku.FILLED)  # a given, even with its own digit
    assert sudoku.place(after, "R1C1=1") == (after, sudoku.FILLED)  # filled before
    assert sudoku.place(P4, "R1C1=4") == (P4, sudoku.CLASH)  # 4 is in row 1
    assert sudoku.place(P4, "R1C1=2") == (P4, sudoku.CLASH)  # 2 is in column 1
    assert sudoku.place(sudoku.place(P4, "R1C2=2")[0], "R2C1=2") == (sudoku.place(P4, "R1C2=2")[0], sudoku.CLASH)  # box


def test_local_rewards_by_hand():
    assert sudoku.play(P4, ["R1C1=1"])[1:] == (pytest.approx(-0.01 + 1.0), 0, 1)  # right: 0.99
    assert sudoku.play(P4, ["R1C1=3"])[1:] == (pytest.approx(-0.01 - 1.0), 0, 1)  # wrong: -1.01
    assert sudoku.play(P4, ["R4C4=1"])[1:] == (pytest.approx(-0.3), 1, 1)  # filled: -0.3 instead of the step
    assert sudoku.play(P4, ["R1C1=4"])[1:] == (pytest.approx(-0.3), 1, 1)  # clash
    # two fills: right then a duplicate of it (refused)
    assert sudoku.play(P4, ["R1C1=1", "R1C1=1"])[1:] == (pytest.approx(0.99 - 0.3), 1, 2)
    # a wrong digit, then the cell it blocks: R2C1's 3 now clashes with R1C1's 3 in column 1
    assert sudoku.play(P4, ["R1C1=3", "R2C1=3"])[1:] == (pytest.approx(-1.01 - 0.3), 1, 2)


def test_the_solve_and_its_bonus_by_hand():
    after, reward, refused, n = sudoku.play(P1, ["R1C3=3"])
    assert sudoku.is_solved(after) and reward == pytest.approx(0.99 + 2.0 + 0.5) and (refused, n) == (0, 1)
    # a refused fill first: more fills than empty cells, no bonus
    assert sudoku.play(P1, ["R1C3=1", "R1C3=3"])[1] == pytest.approx(-0.3 + 0.99 + 2.0)
    # fills of earlier turns count (played): 1 before, so 2 in all for 1 empty cell
    assert sudoku.play(P1, ["R1C3=3"], played=1)[1] == pytest.approx(0.99 + 2.0)
    # the four cells of P4 in four fills: 4 * 0.99 + 2 + 0.5; play stops once solved
    after, reward, refused, n = sudoku.play(P4, ["R1C1=1", "R1C2=2", "R1C3=3", "R2C1=3", "R4C4=2"])
    assert sudoku.is_solved(after) and reward == pytest.approx(4 * 0.99 + 2.5) and (refused, n) == (0, 4)
    assert sudoku.solves(P4, ["R2C1=3", "R1C3=3", "R1C2=2", "R1C1=1"]) and not sudoku.solves(P4, ["R1C1=1"])


def test_a_full_grid_that_breaks_no_rule_is_the_solution():
    """With one solution, the grid cannot fill up wrong: a wrong digit always blocks a later one
    (place refuses what breaks a rule), so "solved" needs no rule check of its own."""
    for seed in range(40):
        level, rng = sudoku.level_for(seed, 8), sudoku.random.Random(seed)
        state = level
        for _ in range(60):
            r, c = rng.choice(sudoku.empty_cells(state) or [(0, 0)])
            state = sudoku.place(state, sudoku.fill_text(r, c, rng.choice(sudoku.DIGITS)))[0]
        assert (not sudoku.empty_cells(state)) == sudoku.is_solved(state)


def test_right_fills_are_the_solutions_digits_that_still_fit():
    assert sudoku.right_fills(P4) == ["R1C1=1", "R1C2=2", "R1C3=3", "R2C1=3"]
    wrong = sudoku.place(P4, "R1C1=3")[0]
    assert sudoku.right_fills(wrong) == ["R1C2=2"]  # R1C3's 3 and R2C1's 3 clash with the wrong 3


# ================================================================ env_sudoku.py, the two-role task
ARGS = argparse.Namespace(**{o.name: o.default for o in es.OPTIONS})  # the task's flags at their defaults


def a(text):
    return f"<answer>{text}</answer>"


@pytest.mark.parametrize("text, fills", [
    ("<answer>R1C2=3</answer>", ["R1C2=3"]),
    ("I think <answer>r1c2 = 3, (4,1)=2</answer> is right", ["R1C2=3", "R4C1=2"]),
    ("<answer>R1C2=3", ["R1C2=3"]),  # left open: up to the end of its line
    ("<answer>R1C2=3\nthen R1C3=4", ["R1C2=3"]),
    ("<answer>R1C1=1</answer> no, <answer>R1C2=2</answer>", ["R1C2=2"]),  # the last answer
    ("<answer>R1C2=3 R1C2=3</answer>", ["R1C2=3", "R1C2=3"]),  # duplicates reach the grid
    ("R1C2=3", None),  # no tags
    ("<answer></answer>", None), ("<answer>3</answer>", None), ("<answer>R1C2=3 maybe</answer>", None),
    ("<answer>R5C2=3</answer>", None), ("<answer>R1C2=9</answer>", None), ("<answer>U</answer>", None),
])
def test_parse_fills(text, fills):
    assert es.parse_fills(text) == fills


def test_the_team_reward_by_hand():
    right, wrong = sudoku.place(P4, "R1C1=1")[0], sudoku.place(P4, "R1C1=3")[0]
    assert es.team_reward(P4, right) == 1  # one cell fewer differs from the solution
    assert es.team_reward(P4, wrong) == 0  # an empty cell became a wrong one
    assert es.team_reward(P4, P4) == 0  # refused fills change nothing
    assert es.team_reward(P1, sudoku.place(P1, "R1C3=3")[0]) == 1 + 2.0  # the solve
    solved = sudoku.place(P1, "R1C3=3")[0]
    assert es.team_reward(solved, solved) == 0  # no second bonus


@pytest.mark.parametrize("answer, reward", [
    ("R1C1=1", (-0.01 + 1.0) + 1),  # right: local 0.99, team 1
    ("R1C1=3", (-0.01 - 1.0) + 0),  # wrong but fits: local -1.01, team 0
    ("R4C4=1", -0.3 + 0),  # a given: refused
    ("R1C1=4", -0.3 + 0),  # 4 is in row 1: refused
])
def test_the_executors_reward_of_one_fill_by_hand(answer, reward):
    task = es.SudokuTask(P4, planner=False)
    assert task.act("executor", a(answer)) == pytest.approx(reward)
    assert task.answers == (answer,) and task.moves == 1 and task.turn == 1


def test_the_solve_the_bonus_and_alpha_by_hand():
    task = es.SudokuTask(P1, planner=False, alpha=0.5)
    # local 0.99 + 2 (solve) + 0.5 (1 fill for 1 empty cell); team 1 + 2, times alpha 0.5
    assert task.act("executor", a("R1C3=3")) == pytest.approx(3.49 + 0.5 * 3)
    assert task.solved and task.done and task.metrics() == {"fills": 1, "cells_left": 0, "wrong_digits": 0}
    late = es.SudokuTask(P1, planner=False)
    late.act("executor", a("R1C3=1"))  # refused: -0.3
    assert late.act("executor", a("R1C3=3")) == pytest.approx(0.99 + 2.0 + 3)  # 2 fills for 1 cell: no +0.5
    four = es.SudokuTask(P4, planner=False, moves_per_turn=4)
    assert four.act("executor", a("R1C1=1 R1C2=2 R1C3=3 R2C1=3")) == pytest.approx(4 * 0.99 + 2.5 + 4 + 2)


def test_the_planner_proposes_on_a_copy_and_the_executor_plays():
    task = es.SudokuTask(P4, max_turns=3)
    with pytest.raises(ValueError, match="planner's move, not the executor's"):
        task.act("executor", a("R1C1=1"))
    assert task.act("planner", a("R1C1=3")) == pytest.approx(-1.01)  # wrong, on the copy
    assert task.state == P4 and task.moves == 0  # the real grid is untouched
    seen = task.messages("executor")[1]["content"]
    assert ("The planner proposes: R1C1=3\nPlayed on a copy of the grid, the proposal gives:\n"
            "    1 2 3 4\nR1 |3|_|_|4|\n") in seen
    assert ("Cells to fill 4 -> 3, wrong digits 1, solved: no, a wrong digit is on the grid: it can no longer "
            "be solved, refused fills: 0.") in seen
    assert task.act("executor", a("R1C1=1")) == pytest.approx(1.99)
    assert task.state.cells[0] == (1, 0, 0, 4) and task.next_role == "planner" and task.turn == 1
    assert "Last turn these fills were played: R1C1=1\nCells to fill 4 -> 3, wrong digits 0" in \
        task.messages("planner")[1]["content"]


def test_the_shared_team_term_waits_for_the_executor():
    own, shared = es.SudokuTask(P4, alpha=0.5), es.SudokuTask(P4, alpha=0.5, team_term="shared")
    assert own.act("planner", a("R1C1=1")) == pytest.approx(0.99 + 0.5 * 1)
    assert shared.act("planner", a("R1C1=1")) == pytest.approx(0.99)  # local only, for now
    assert own.act("executor", a("R1C2=2")) == shared.act("executor", a("R1C2=2")) == pytest.approx(0.99 + 0.5)
    assert (own.team_share, shared.team_share) == (0.0, pytest.approx(0.5))


def test_an_answer_without_fills_costs_more_than_any_answer():
    for n in (1, 2, 3):
        task = es.SudokuTask(P4, planner=False, moves_per_turn=n)
        assert task.FORMAT_PENALTY == es.FORMAT_PENALTY * n == -2.0 * n
        worst = n * (sudoku.STEP_REWARD + sudoku.WRONG_REWARD)  # n wrong fills, team 0 (never negative)
        assert task.FORMAT_PENALTY < worst
        assert task.act("executor", "R1C1=1, no tags") == pytest.approx(-2.0 * n)
        assert task.answers == ("-",) and task.state == P4 and task.moves == 0
        told = task.messages("executor")[1]["content"]
        assert "Last turn's answer had no readable fills: nothing was played." in told
    planner = es.SudokuTask(P4)
    assert planner.act("planner", a("")) == -2.0
    told = planner.messages("executor")[1]["content"]
    assert "The planner's answer had no readable fills: there is no proposal." in told


def test_an_answer_plays_at_most_moves_per_turn_fills():
    task = es.SudokuTask(P4, planner=False)
    assert task.act("executor", a("R1C1=1 R1C2=2")) == pytest.approx(1.99)  # R1C2=2 is cut
    assert task.state.cells[0] == (1, 0, 0, 4) and task.answers == ("R1C1=1",)


def test_copies_are_independent_and_give_byte_identical_prompts():
    task = es.SudokuTask(sudoku.level_for(3, 4), max_turns=4)
    branch = task.copy()
    assert branch.messages("planner") == task.messages("planner")
    fill = task.example("planner")
    task.act("planner", fill)
    assert branch.next_role == "planner" and branch.observation == "" and branch.turn == 0
    branch.act("planner", fill)
    assert branch.messages("executor") == task.messages("executor")  # same state, same bytes
    task.act("executor", fill)
    assert branch.state == branch.level and task.state != task.level and branch.answers == ()


def test_restart_goes_back_to_the_puzzle_at_the_same_turn_and_role():
    task = es.SudokuTask(P4, planner=False, max_turns=3)
    task.act("executor", a("R1C1=1"))
    again = task.restart()
    assert again.state == P4 and again.turn == 1 and again.next_role == "executor" and again.observation == ""
    assert task.state != P4  # the original keeps its grid


def test_the_example_takes_the_normal_path():
    """The context check plays example(role): it must be read as fills (never the format penalty),
    as many as a turn allows, right ones where there are, and still fills once a wrong digit blocks them."""
    for n in (1, 2, 4):
        task = es.SudokuTask(P4, moves_per_turn=n)
        example = task.example("planner")
        assert es.parse_fills(example) == sudoku.right_fills(P4)[:n]
        assert task.act("planner", example) == pytest.approx(n * 0.99 + n + (4.5 if n == 4 else 0))
    blocked = es.SudokuTask(sudoku.play(P4, ["R1C1=3", "R1C2=2"])[0], planner=False)
    assert sudoku.right_fills(blocked.state) == []  # R1C3's 3 and R2C1's 3 clash with the wrong 3
    example = blocked.example("executor")
    assert example == a("R1C3=3") and blocked.act("executor", example) == pytest.approx(-0.3)  # refused, but read
    # three wrong digits (R1C3, R2C3, R3C2): no right fill is left, but 1 still fits R1C2 (its digit is 4)
    wrongs = sudoku.play(sudoku.puzzle("2__3/___2/3__4/4_31"), ["R1C3=4", "R2C2=3", "R2C3=1", "R3C2=2"])[0]
    assert sudoku.render(wrongs) == "2_43/_312/32_4/4_31" and sudoku.right_fills(wrongs) == []
    assert es.SudokuTask(wrongs).example("planner") == a("R1C2=1")  # taken (wrong), not refused
    tasks = es.make_tasks([0, 1, 2], ARGS)
    longest = env_two_roles.longest_messages(tasks)
    assert "The planner proposes: R" in longest[1]["content"]


def test_the_prompts_as_the_model_sees_them():
    task = es.SudokuTask(P4)
    system, user = (m["content"] for m in task.messages("planner"))
    assert system == es.RULES + ("You are the planner of a team of two: the planner proposes fills, they are tried "
                                 "on a copy of the grid, and the executor sees the result and decides the fills "
                                 "really played.")
    assert user == ("Turn 1 of 4. The grid:\n    1 2 3 4\nR1 |_|_|_|4|\nR2 |_|4|1|2|\nR3 |2|1|4|3|\nR4 |4|3|2|1|\n"
                    "Empty cells: R1C1 R1C2 R1C3 R2C1.\nCells to fill 4, wrong digits 0, solved: no.\n"
                    "Answer with one fill inside answer tags, for example <answer>R1C2=3</answer>.")
    hidden = es.SudokuTask(P4, list_empty=False).messages("planner")[1]["content"]
    assert "Empty cells:" not in hidden and "R4 |4|3|2|1|\nCells to fill 4" in hidden
    two = es.SudokuTask(P4, moves_per_turn=2).messages("planner")[1]["content"]
    assert two.endswith("Answer with at most 2 fills inside answer tags, for example <answer>R1C2=3 R4C1=2</answer>.")
    solo = es.SudokuTask(P4, planner=False)
    assert solo.roles == ("executor",) and solo.messages("executor")[0]["content"].endswith(
        "Your fills are played on the grid.")


def test_the_episode_ends_solved_or_out_of_turns():
    task = es.SudokuTask(P4, max_turns=2, planner=False)
    task.act("executor", a("R1C1=1"))
    task.act("executor", a("R1C2=2"))
    assert task.done and not task.solved and task.metrics() == {"fills": 2, "cells_left": 2, "wrong_digits": 0}
    with pytest.raises(ValueError, match="over"):
        task.act("executor", a("R1C3=3"))
    doomed = es.SudokuTask(P4, planner=False)
    doomed.act("executor", a("R1C1=3"))
    assert doomed.metrics() == {"fills": 1, "cells_left": 4, "wrong_digits": 1} and not doomed.done


# ---------------------------------------------------------------- flags and puzzles
def test_the_flags_and_their_checks():
    options = {o.name: o for o in es.OPTIONS}
    assert options["empty_cells"].default == 2 and options["list_empty"].default is True
    assert [options["empty_cells"].check(v) for v in (0, 1, 12, 13)] == [False, True, True, False]
    assert "moves_per_turn" in options and "max_turns" in options  # the workflow's, shared
    assert es.check(ARGS) is None
    few = argparse.Namespace(**{**vars(ARGS), "empty_cells": 5})
    assert es.check(few) == "--empty-cells 5 needs at least 5 fills, and --max-turns 4 x --moves-per-turn 1 allows 4"
    assert es.check(argparse.Namespace(**{**vars(few), "moves_per_turn": 2})) is None
    assert es.check(argparse.Namespace(**{**vars(ARGS), "empty_cells": 4})) is None  # 4 fills for 4 cells: enough
    assert es.check(argparse.Namespace(**{**vars(ARGS), "team_term": "shared", "single_agent": True})) is not None


def test_make_level_and_make_tasks_follow_the_flags():
    six = argparse.Namespace(**{**vars(ARGS), "empty_cells": 6, "max_turns": 6, "single_agent": True,
                                "list_empty": False, "moves_per_turn": 2, "team_term": "own", "team_alpha": 0.5})
    level = es.make_level(10 ** 9, six)
    assert level == sudoku.level_for(10 ** 9, 6) and len(sudoku.empty_cells(level)) == 6
    (task,) = es.make_tasks([10 ** 9], six)
    assert (task.level, task.max_turns, task.roles, task.positions, task.moves_per_turn, task.alpha) == \
        (level, 6, ("executor",), False, 2, 0.5)
    assert es.make_tasks(None, ARGS, [P4])[0].level == P4
    shared = argparse.Namespace(**{**vars(ARGS), "team_term": "shared"})
    assert es.make_tasks([0], shared)[0].team_term == "shared" and es.make_tasks([0], ARGS)[0].team_term == "own"
    assert es.TASK.name == "sudoku" and es.TASK.constant is es.constant and es.TASK.roles == ("planner", "executor")
    assert es.TASK.defaults["max_completion_length"] == 16 and es.TASK.make_tasks is es.make_tasks


def test_fixed_answers_by_hand():
    """A fixed answer's fills, played again and again up to max_turns x moves_per_turn: refused
    fills (filled cells) cost nothing, so one answer can solve several puzzles."""
    four = "R1C1=1R1C2=2R1C3=3R2C1=3"  # P4's four cells, run together as evaluate_games joins answers
    found = es.constant((P1, P4), ARGS, (four, "R1C3=3", "nothing"))  # budget 4 x 1
    assert found[four] == 1.0  # P4 in 4 fills; on P1 two refused fills, then R1C3=3
    assert found["R1C3=3"] == 0.5 and found["nothing"] == 0.0  # a single fill solves P1 only
    assert len(found) == 64 + 2 and found["R1C1=1"] == 0.0  # every single fill, and the answers
    short = es.constant((P1, P4), argparse.Namespace(**{**vars(ARGS), "max_turns": 2}), (four,))
    assert short[four] == 0.0  # 2 fills: R1C1=1 R1C2=2, neither solves
    levels = tuple(sudoku.level_for(10 ** 9 + i, 1) for i in range(64))  # 1 empty cell: a single fill
    assert max(es.constant(levels, ARGS, ()).values()) == 4 / 64  # measured: at most 4 levels share a fill


# ---------------------------------------------------------------- through atgrpo.py and the evaluation
def grid_in(messages):
    """The grid a prompt shows first (the real one), read back from its text."""
    rows = re.findall(r"^R\d \|(.)\|(.)\|(.)\|(.)\|$", messages[-1]["content"], re.MULTILINE)[:4]
    return tuple(tuple(0 if d == "_" else int(d) for d in row) for row in rows)


def scripted(answer):
    """A sample(role, message_lists) that answers answer(cells) for every prompt."""
    return lambda role, lists: [([1, 2], [3], a(answer(grid_in(m)))) for m in lists]


def first_right(cells):
    r, c = next((r, c) for r in range(4) for c in range(4) if not cells[r][c])
    return sudoku.fill_text(r, c, sudoku.solve(cells)[r][c])


def test_tree_sampling_through_atgrpo_groups_and_rewards():
    calls = iter(["R1C1=1", "R1C1=3", "R4C4=1", "nothing"] * 100)  # right, wrong, refused, unreadable
    sample = lambda role, lists: [([1], [2], a(next(calls))) for _ in lists]  # noqa: E731
    make = lambda seed: es.SudokuTask(P4, max_turns=2)  # noqa: E731
    samples, played, final = atgrpo.rollout_samples(make, [7], sample, 4, "at")
    groups = sorted({s.group_name for s in samples})
    assert groups == [f"level 7 / {r} / turn {t}" for r in ("executor", "planner") for t in (1, 2)]
    first = [s for s in samples if s.group_name == "level 7 / planner / turn 1"]
    assert [s.rewards[0] for s in first] == pytest.approx([1.99, -1.01, -0.3, -2.0])
    assert [s.adv[-1] > 0 for s in first] == [True, False, True, False]
    executor = [s for s in samples if s.group_name == "level 7 / executor / turn 1"]
    assert [s.rewards[0] for s in executor] == pytest.approx([1.99, -1.01, -0.3, -2.0])
    assert final[0].state.cells[0] == (1, 0, 0, 4)  # the best candidate, R1C1=1, continues


def test_the_evaluation_with_a_solver_and_with_a_fixed_answer():
    seeds = [10 ** 9 + i for i in range(8)]
    solver = evaluate(scripted(first_right), seeds, ARGS, es.TASK)
    assert solver["success"] == 1.0 and solver["success_each"] == "1" * 8 and solver["cells_left"] == 0
    assert solver["board_ablation_success"] < 1.0 and solver["best_constant_success"] < 1.0
    assert solver["fills"] == 2 and solver["wrong_digits"] == 0 and solver["turns"] == 2
    fixed = evaluate(scripted(lambda cells: "R1C1=1"), seeds, ARGS, es.TASK)
    assert fixed["success"] == 0.0 and fixed["distinct_answers"] == 1 and fixed["reward_executor"] < 0
    assert fixed["success"] <= fixed["best_constant_success"]


def test_no_puzzle_of_three_givens_has_one_solution_and_some_of_four_do():
    """MIN_GIVENS: any 3 cells of any solved grid are shared with another solved grid, so 3 givens
    never make one solution; 4 sometimes do (level_for's 12 empty cells)."""
    flat = [tuple(d for row in g for d in row) for g in GRIDS]

    def unique_puzzles(n):
        return sum(list(Counter(tuple(g[k] for k in cells) for g in flat).values()).count(1)
                   for cells in itertools.combinations(range(16), n))
    assert unique_puzzles(sudoku.MIN_GIVENS - 1) == 0 and unique_puzzles(sudoku.MIN_GIVENS) == 25728


# ---------------------------------------------------------------- through train.py (once tasks.py lists the task)

@pytest.mark.skipif("sudoku" not in tasks.TASKS, reason="tasks.py does not list env_sudoku.TASK yet")
@pytest.mark.parametrize("algo, extra", [("at", ()), ("grpo", ("--single-agent", "--moves-per-turn", "2"))])
def test_train_runs_a_step_and_an_evaluation(tmp_path, tiny_model_dir, monkeypatch, algo, extra):
    """train.py's real step and evaluation on the tiny model, the answers scripted (a right fill,
    a wrong one, junk, an answer left open): the flags, the defaults, the log's keys."""
    import json
    import random

    import config
    import policy
    import train
    rng = random.Random(0)

    def scripted_sampler(models, tok, args, stop_strings, greedy=False):
        def sample(role, message_lists):
            texts = []
            for m in message_lists:
                right = first_right(grid_in(m))
                texts.append(rng.choice([a(right), a("R1C1=1"), "no idea", "<answer>" + right]))
            return [(policy.prompt_ids(tok, m), tok(t, add_special_tokens=False)["input_ids"], t)
                    for m, t in zip(message_lists, texts)]
        return sample
    args = config.parse_args(["--env", "sudoku"])
    assert (args.empty_cells, args.list_empty, args.max_completion_length) == (2, True, 16)
    with pytest.raises(SystemExit):
        config.parse_args(["--env", "sudoku", "--empty-cells", "13"])
    with pytest.raises(SystemExit):
        config.parse_args(["--env", "sudoku", "--empty-cells", "5"])  # 4 turns x 1 fill
    monkeypatch.setattr(train, "chat_sampler", scripted_sampler)
    out = tmp_path / "run"
    train.main(["--env", "sudoku", "--algo", algo, "--model", tiny_model_dir, "--steps", "1", "--batch-size", "2",
                "--num-generations", "3", "--eval-n", "4", "--eval-every", "1", "--bf16", "false", "--out", str(out),
                *extra])
    log = {k: v for line in (out / "log.jsonl").read_text().splitlines() for k, v in json.loads(line).items()}
    assert {"eval_success", "eval_cells_left", "eval_fills", "eval_wrong_digits", "eval_best_constant_success",
            "eval_board_ablation_success", "eval_reward_executor", "cells_left"} <= set(log)
    assert 0 <= log["eval_success"] <= 1 and 0 <= log["eval_cells_left"] <= 2
