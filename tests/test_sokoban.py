"""sokoban.py: move rules and rendering on hand-made boards, step rewards by hand, deadlocks,
the solver, the generator on hundreds of seeds, the fixed answers and the CLI."""
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import sokoban
from moves import constant_successes

ROOT = Path(__file__).resolve().parents[1]
# player (1,1), box (1,2), goal (1,4): "RR" solves it, the box-goal distance is 2
LEVEL = ["######",
         "#@$ .#",
         "#    #",
         "######"]


def board(rows):
    return sokoban.parse_board(rows)


def cli(*args, stdin=None):
    return subprocess.run([sys.executable, str(ROOT / "sokoban.py"), *args], input=stdin,
                          capture_output=True, text=True, timeout=30, cwd=ROOT)


# ---------------------------------------------------------------- board, rendering, rules
def test_parse_board_reads_every_symbol_and_renders_back():
    rows = ["#######",
            "# .$*@#",
            "#######"]
    state = board(rows)
    assert state.goals == {(1, 2), (1, 4)}
    assert state.boxes == {(1, 3), (1, 4)}
    assert state.player == (1, 5)
    assert (1, 1) not in state.walls and (0, 0) in state.walls and len(state.walls) == 16
    assert state.shape == (3, 7)
    assert sokoban.render(state) == "\n".join(rows)
    on_goal = ["####", "#+$#", "# .#", "####"]
    assert board(on_goal).player == (1, 1) and (1, 1) in board(on_goal).goals
    assert sokoban.render(board("\n".join(on_goal))) == "\n".join(on_goal)


@pytest.mark.parametrize("rows", [["#@#"], ["##", "@ "], ["@", "$", "."], ["#@  *.$ #"]])
def test_parse_render_round_trip(rows):
    assert sokoban.render(board(rows)) == "\n".join(rows)
    assert board(sokoban.render(board(rows))) == board(rows)


@pytest.mark.parametrize("rows", [["#@@#"], ["#  #"], ["#@x#"], ["#+@#"]])
def test_parse_board_rejects_bad_boards(rows):
    with pytest.raises(ValueError):
        board(rows)


MOVE_CASES = [  # (board, move, board after); identical boards mean a blocked move
    (["####", "#@ #", "####"], "L", ["####", "#@ #", "####"]),              # walk into a wall
    (["####", "#@ #", "####"], "R", ["####", "# @#", "####"]),              # walk
    (["#####", "# @$#", "#####"], "R", ["#####", "# @$#", "#####"]),        # push into a wall
    (["######", "#@$$ #", "######"], "R", ["######", "#@$$ #", "######"]),  # push into a box
    (["######", "#@*$.#", "######"], "R", ["######", "#@*$.#", "######"]),  # ... from a goal
    (["####", "#@.#", "####"], "R", ["####", "# +#", "####"]),              # walk onto a goal
    (["####", "#+ #", "####"], "R", ["####", "#.@#", "####"]),              # walk off a goal
    (["#####", "#@$.#", "#####"], "R", ["#####", "# @*#", "#####"]),        # push onto a goal
    (["######", "#@* .#", "######"], "R", ["######", "# +$.#", "######"]),  # push off a goal
    (["#####", "#$@ #", "#####"], "R", ["#####", "#$ @#", "#####"]),        # never pull
    (["###", "#@#", "#$#", "# #", "###"], "D", ["###", "# #", "#@#", "#$#", "###"]),  # push down
    (["###", "# #", "#$#", "#@#", "###"], "U", ["###", "#$#", "#@#", "# #", "###"]),  # push up
    (["@ "], "L", ["@ "]),                                                  # off the board
]


@pytest.mark.parametrize("rows, m, expected", MOVE_CASES)
def test_move_rules(rows, m, expected):
    assert sokoban.render(sokoban.move(board(rows), m)) == "\n".join(expected)


# ---------------------------------------------------------------- rewards
@pytest.mark.parametrize("rows, m, expected", [
    (["####", "#@ #", "####"], "R", -0.01),                # a move
    (["####", "#@ #", "####"], "L", -0.05),                # a blocked move (instead of -0.01)
    (["######", "#@$ .#", "######"], "R", -0.01 + 0.1),    # push: distance 2 -> 1
    (["######", "#.@$ #", "######"], "R", -0.01 - 0.1),    # push: distance 2 -> 3
    (["#####", "#@$.#", "#####"], "R", -0.01 + 1 + 0.1 + 10),               # onto goal, solved
    (["######", "#@$. #", "#$  .#", "######"], "R", -0.01 + 1 + 0.1),       # onto goal, 1 of 2
    (["######", "#@* .#", "######"], "R", -0.01 - 0.5 - 0.1),               # off a goal
])
def test_step_reward_by_hand(rows, m, expected):
    before = board(rows)
    assert sokoban.step_reward(before, sokoban.move(before, m)) == pytest.approx(expected)


def test_levels_can_be_drawn_by_optimal_solution_length():
    lengths = [len(sokoban.solve(sokoban.level_for(seed, 7, 1, 10, solution=(3, 4)))) for seed in range(30)]
    assert set(lengths) == {3, 4}
    assert all(len(sokoban.solve(sokoban.level_for(seed, 7, 1, 10, solution=(5, None)))) >= 5 for seed in range(10))
    with pytest.raises(ValueError, match="optimal solution of 40 to 41 moves"):
        sokoban.level_for(0, 5, 1, 4, solution=(40, 41))


def test_the_model_sees_one_token_per_cell(tokenizer):
    state = board(["#####", "#@$.#", "# * #", "#####"])
    assert sokoban.board_text(state) == "# # # # #\n# @ $ . #\n# _ * _ #\n# # # # #"
    for row in sokoban.board_text(state).split("\n"):
        assert len(tokenizer(row, add_special_tokens=False)["input_ids"]) == 5


def test_constant_answers_are_played_again_and_again_until_solved():
    right = board(["######", "#@$ .#", "#    #", "######"])  # R R solves
    down = board(["#####", "#@  #", "#$  #", "#   #", "#.  #", "#####"])  # D D
    left = board(["######", "#.$@ #", "#    #", "######"])  # L
    success = constant_successes(sokoban.solves, (right, down, left), 4)
    assert len(success) == 4 + 16 + 64 + 256 + 1024 + 4096
    assert success["R"] == success["RR"] == 1 / 3  # R R R R solves `right` only
    assert success["D"] == 1 / 3 and success["DU"] == 0  # D U D U pushes once, walks back
    assert success["LR"] == 1 / 3  # L R L R: `left` at once; on `right` L is blocked, R pushes, L R walk
    assert success["RL"] == 0  # R L R L: `right`'s box goes one cell, the walker comes back
    assert success["LDD"] == max(success.values()) == 2 / 3  # L solves `left`; on `down` it is blocked
    assert constant_successes(sokoban.solves, (right, left), 2, ("RRL",)) == {"RRL": 0.5}  # 2 moves: R R


def test_play_sums_step_rewards_counts_blocked_moves_and_stops_when_solved():
    level = board(LEVEL)
    state, reward, blocked, played = sokoban.play(level, list("LRRLL"))
    assert played == 3  # L (blocked), R, R solves; the last L L are not played
    assert sokoban.is_solved(state) and state.player == (1, 3)
    assert reward == pytest.approx(-0.05 + 0.09 + 11.09)
    assert blocked == 1


# ---------------------------------------------------------------- deadlocks and the solver
@pytest.mark.parametrize("rows, expected", [
    (["#####", "#$  #", "# @.#", "#####"], True),    # box in a corner off the goals
    (["#####", "#  $#", "#@ .#", "#####"], True),    # another corner
    (["#####", "#*  #", "# @ #", "#####"], False),   # in a corner but on a goal
    (["#####", "# $ #", "# @.#", "#####"], False),   # against one wall only
    (["#####", "#   #", "#@$.#", "#   #", "#####"], False),  # in the open
])
def test_deadlocked_corner(rows, expected):
    assert sokoban.deadlocked(board(rows)) is expected
    assert ("deadlocked" in sokoban.status(board(rows))) is expected


def test_solve_by_hand():
    assert sokoban.solve(board(["#####", "#@$.#", "#####"])) == "R"
    assert sokoban.solve(board(["#####", "# @*#", "#####"])) == ""
    detour = board(["######",
                    "#@   #",
                    "# $  #",
                    "#   .#",
                    "######"])  # e.g. DRRURD or RDLDRR: 6 moves, no shorter way
    solution = sokoban.solve(detour)
    assert len(solution) == 6 and sokoban.is_solved(sokoban.play(detour, solution)[0])
    assert sokoban.solve(board(["#####", "#$  #", "# @.#", "#####"])) is None       # deadlocked
    assert sokoban.solve(board(["######", "# $  #", "#@  .#", "######"])) is None   # stuck on a wall


def test_solver_gives_up_at_its_limit_and_never_calls_a_level_unsolvable():
    level = sokoban.level_for(3, size=7, boxes=2, reverse_steps=30)  # solvable by construction
    assert sokoban.solve(level)
    with pytest.raises(sokoban.GaveUp, match="gave up after 50 positions"):
        sokoban.solve(level, max_states=50)
    # every position of this board is deadlocked: a proof of "no solution" within any limit
    assert sokoban.solve(board(["#####", "#$  #", "# @.#", "#####"]), max_states=1) is None


# ---------------------------------------------------------------- the generator
@pytest.mark.parametrize("settings", [{}, {"boxes": 2}, {"size": 7, "boxes": 2, "walls": 3}])
def test_generated_levels_are_solvable(settings):
    size, boxes = settings.get("size", 6), settings.get("boxes", 1)
    for seed in range(300):
        level = sokoban.level_for(seed, **settings)
        assert level.shape == (size, size)
        assert len(level.boxes) == len(level.goals) == boxes
        assert all((0, c) in level.walls and (size - 1, c) in level.walls for c in range(size))
        assert not sokoban.is_solved(level)
        solution = sokoban.solve(level)
        assert solution, (seed, sokoban.render(level))
        assert sokoban.is_solved(sokoban.play(level, solution)[0])


def test_generator_is_deterministic_and_difficulty_grows_with_reverse_steps():
    assert sokoban.level_for(5) == sokoban.level_for(5)
    assert sokoban.level_for(5, boxes=2, walls=2) == sokoban.level_for(5, boxes=2, walls=2)
    assert len({sokoban.render(sokoban.level_for(seed)) for seed in range(20)}) >= 15
    easy = sum(len(sokoban.solve(sokoban.level_for(seed, reverse_steps=3))) for seed in range(100))
    hard = sum(len(sokoban.solve(sokoban.level_for(seed, reverse_steps=40))) for seed in range(100))
    assert hard > easy
    with pytest.raises(ValueError):
        sokoban.level_for(0, size=4, boxes=4)  # 4 inner cells: no room for 4 boxes and the player


IMPOSSIBLE = [  # (size, boxes, reverse steps, walls), words the error must say
    ((2, 1, 20, 0), "size 2 leaves 0 cells"),
    ((-6, 1, 20, 0), "size -6 leaves 0 cells"),
    ((5, 9, 20, 0), "too few for 9 boxes"),
    ((5, 1, 20, 8), "and 8 walls: raise the size"),
    ((6, 0, 20, 0), "boxes (0) and reverse steps (20) must be at least 1"),
    ((6, 1, -3, 0), "reverse steps (-3) must be at least 1"),
    ((6, 1, 20, -1), "walls (-1) at least 0"),
    ((5, 8, 20, 0), "no unsolved level in 1000 tries: change reverse steps (20)"),  # the boxes fill the room: no pull moves
]


@pytest.mark.parametrize("settings, message", IMPOSSIBLE)
def test_level_for_explains_impossible_settings(settings, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        sokoban.level_for(0, *settings)


@pytest.mark.parametrize("settings, message", IMPOSSIBLE)
def test_cli_gives_a_one_line_error_for_impossible_settings(settings, message, capsys):
    size, boxes, steps, walls = map(str, settings)
    with pytest.raises(SystemExit) as stop:
        sokoban.main(["--size", size, "--boxes", boxes, "--reverse-steps", steps, "--walls", walls])
    usage, error = capsys.readouterr().err.split(": error: ")  # argparse: usage, then the error
    assert stop.value.code == 2 and usage.startswith("usage:")
    assert "\n" not in error.strip() and message in error


def test_cli_reports_a_solver_that_gives_up(capsys):
    with pytest.raises(SystemExit) as stop:
        sokoban.main(["--seed", "3", "--max-states", "2"])
    assert stop.value.code == 2
    assert "gave up after 2 positions, so no solution is known: raise --max-states" in (
        capsys.readouterr().err)


# ---------------------------------------------------------------- command-line probe
def test_cli_json_is_one_line_with_the_optimal_solution():
    out = cli("--seed", "3", "--json")
    assert out.returncode == 0 and len(out.stdout.splitlines()) == 1
    record = json.loads(out.stdout)
    level = sokoban.level_for(3)
    assert record["board"] == sokoban.render(level).split("\n")
    assert len(record["solution"]) == len(sokoban.solve(level))
    assert sokoban.is_solved(sokoban.play(sokoban.parse_board(record["board"]), record["solution"])[0])


def test_cli_moves_are_applied_first():
    level = sokoban.level_for(3, size=7, boxes=2, reverse_steps=30)
    full = sokoban.solve(level)
    out = cli("--seed", "3", "--size", "7", "--boxes", "2", "--reverse-steps", "30",
              "--json", "--moves", full[0].lower())
    record = json.loads(out.stdout)
    assert record["board"] == sokoban.render(sokoban.move(level, full[0])).split("\n")
    assert len(record["solution"]) == len(full) - 1
    assert cli("--moves", "xyz").returncode == 2


def test_cli_text_output():
    out = cli("--seed", "0")
    assert sokoban.render(sokoban.level_for(0)) in out.stdout
    assert f"optimal solution: {sokoban.solve(sokoban.level_for(0))}" in out.stdout


def test_a_person_may_type_moves_in_any_case():
    out = io.StringIO()
    sokoban.play_in_terminal(board(LEVEL), ["rr\n"], out)
    assert "Solved!" in out.getvalue()


def test_cli_play_with_piped_input():
    solution = sokoban.solve(sokoban.level_for(1))
    out = cli("--seed", "1", "--play", stdin="hello\nreset\n" + " ".join(solution) + "\n")
    assert out.returncode == 0 and "not moves: 'hello'" in out.stdout and "Solved!" in out.stdout
    out = cli("--seed", "1", "--play", stdin="quit\n" + solution + "\n")
    assert out.returncode == 0 and "Solved!" not in out.stdout
