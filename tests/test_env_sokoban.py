"""env_sokoban.py: move rules and rendering on hand-made boards, step rewards by hand, deadlocks,
the solver, the generator on hundreds of seeds, parse_moves, the two-role task and the CLI."""
import io
import json
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import env_sokoban as es

ROOT = Path(__file__).resolve().parents[1]
# player (1,1), box (1,2), goal (1,4): "RR" solves it, the box-goal distance is 2
LEVEL = ["######",
         "#@$ .#",
         "#    #",
         "######"]


def board(rows):
    return es.parse_board(rows)


def cli(*args, stdin=None):
    return subprocess.run([sys.executable, str(ROOT / "env_sokoban.py"), *args], input=stdin,
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
    assert es.render(state) == "\n".join(rows)
    on_goal = ["####", "#+$#", "# .#", "####"]
    assert board(on_goal).player == (1, 1) and (1, 1) in board(on_goal).goals
    assert es.render(board("\n".join(on_goal))) == "\n".join(on_goal)


@pytest.mark.parametrize("rows", [["#@#"], ["##", "@ "], ["@", "$", "."], ["#@  *.$ #"]])
def test_parse_render_round_trip(rows):
    assert es.render(board(rows)) == "\n".join(rows)
    assert board(es.render(board(rows))) == board(rows)


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
    assert es.render(es.move(board(rows), m)) == "\n".join(expected)


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
    assert es.step_reward(before, es.move(before, m)) == pytest.approx(expected)


@pytest.mark.parametrize("team", es.TEAM_REWARDS)
def test_team_reward_is_progress_plus_ten_on_solve(team):
    walk, push = board(["######", "#@$ .#", "######"]), board(["######", "# @$.#", "######"])
    solved = board(["######", "#  @*#", "######"])  # in a corridor both measures agree
    assert es.team_reward(walk, push, team) == 1
    assert es.team_reward(push, walk, team) == -1
    assert es.team_reward(push, solved, team) == 1 + 10
    assert es.team_reward(walk, solved, team) == 2 + 10
    assert es.team_reward(solved, solved, team) == 0


def test_solver_team_reward_counts_the_optimal_moves_left():
    start = board(["######", "#@ $.#", "#    #", "######"])  # R R: 2 moves left
    assert es.moves_left(start) == 2
    assert es.team_reward(start, es.move(start, "R")) == 1  # a walk towards the box: 2 -> 1
    assert es.team_reward(start, es.move(start, "R"), "distance") == 0  # the box did not move
    assert es.team_reward(start, es.move(start, "D")) == -1  # a walk away: 2 -> 3
    assert es.team_reward(start, es.move(start, "L")) == 0  # blocked
    above = board(["#####", "#.@ #", "# $ #", "#   #", "#####"])
    dead = es.move(above, "D")  # the box on the bottom row, the goal above: never solvable
    assert es.moves_left(dead) is None and es.team_reward(above, dead) == -10
    assert es.team_reward(dead, es.move(dead, "U")) == 0  # nothing left to lose


def test_levels_can_be_drawn_by_optimal_solution_length():
    lengths = [len(es.solve(es.level_for(seed, 7, 1, 10, solution=(3, 4)))) for seed in range(30)]
    assert set(lengths) == {3, 4}
    assert all(len(es.solve(es.level_for(seed, 7, 1, 10, solution=(5, None)))) >= 5 for seed in range(10))
    with pytest.raises(ValueError, match="optimal solution of 40 to 41 moves"):
        es.level_for(0, 5, 1, 4, solution=(40, 41))


def test_the_model_sees_one_token_per_cell(tokenizer):
    state = board(["#####", "#@$.#", "# * #", "#####"])
    assert es.board_text(state) == "# # # # #\n# @ $ . #\n# _ * _ #\n# # # # #"
    for row in es.board_text(state).split("\n"):
        assert len(tokenizer(row, add_special_tokens=False)["input_ids"]) == 5


def test_constant_answers_are_played_again_and_again_until_solved():
    right = board(["######", "#@$ .#", "#    #", "######"])  # R R solves
    down = board(["#####", "#@  #", "#$  #", "#   #", "#.  #", "#####"])  # D D
    left = board(["######", "#.$@ #", "#    #", "######"])  # L
    success = es.constant_successes((right, down, left), 4)
    assert len(success) == 4 + 16 + 64 + 256 + 1024 + 4096
    assert success["R"] == success["RR"] == 1 / 3  # R R R R solves `right` only
    assert success["D"] == 1 / 3 and success["DU"] == 0  # D U D U pushes once, walks back
    assert success["LR"] == 1 / 3  # L R L R: `left` at once; on `right` L is blocked, R pushes, L R walk
    assert success["RL"] == 0  # R L R L: `right`'s box goes one cell, the walker comes back
    assert success["LDD"] == max(success.values()) == 2 / 3  # L solves `left`; on `down` it is blocked
    assert es.constant_successes((right, left), 2, ("RRL",)) == {"RRL": 0.5}  # 2 moves: R R


def test_play_sums_step_rewards_counts_blocked_moves_and_stops_when_solved():
    level = board(LEVEL)
    state, reward, blocked, played = es.play(level, list("LRRLL"))
    assert played == 3  # L (blocked), R, R solves; the last L L are not played
    assert es.is_solved(state) and state.player == (1, 3)
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
    assert es.deadlocked(board(rows)) is expected
    assert ("deadlocked" in es.status(board(rows))) is expected


def test_solve_by_hand():
    assert es.solve(board(["#####", "#@$.#", "#####"])) == "R"
    assert es.solve(board(["#####", "# @*#", "#####"])) == ""
    detour = board(["######",
                    "#@   #",
                    "# $  #",
                    "#   .#",
                    "######"])  # e.g. DRRURD or RDLDRR: 6 moves, no shorter way
    solution = es.solve(detour)
    assert len(solution) == 6 and es.is_solved(es.play(detour, solution)[0])
    assert es.solve(board(["#####", "#$  #", "# @.#", "#####"])) is None       # deadlocked
    assert es.solve(board(["######", "# $  #", "#@  .#", "######"])) is None   # stuck on a wall


def test_solver_gives_up_at_its_limit_and_never_calls_a_level_unsolvable():
    level = es.level_for(3, size=7, boxes=2, reverse_steps=30)  # solvable by construction
    assert es.solve(level)
    with pytest.raises(es.GaveUp, match="gave up after 50 positions"):
        es.solve(level, max_states=50)
    # every position of this board is deadlocked: a proof of "no solution" within any limit
    assert es.solve(board(["#####", "#$  #", "# @.#", "#####"]), max_states=1) is None


# ---------------------------------------------------------------- the generator
@pytest.mark.parametrize("settings", [{}, {"boxes": 2}, {"size": 7, "boxes": 2, "walls": 3}])
def test_generated_levels_are_solvable(settings):
    size, boxes = settings.get("size", 6), settings.get("boxes", 1)
    for seed in range(300):
        level = es.level_for(seed, **settings)
        assert level.shape == (size, size)
        assert len(level.boxes) == len(level.goals) == boxes
        assert all((0, c) in level.walls and (size - 1, c) in level.walls for c in range(size))
        assert not es.is_solved(level)
        solution = es.solve(level)
        assert solution, (seed, es.render(level))
        assert es.is_solved(es.play(level, solution)[0])


def test_generator_is_deterministic_and_difficulty_grows_with_reverse_steps():
    assert es.level_for(5) == es.level_for(5)
    assert es.level_for(5, boxes=2, walls=2) == es.level_for(5, boxes=2, walls=2)
    assert len({es.render(es.level_for(seed)) for seed in range(20)}) >= 15
    easy = sum(len(es.solve(es.level_for(seed, reverse_steps=3))) for seed in range(100))
    hard = sum(len(es.solve(es.level_for(seed, reverse_steps=40))) for seed in range(100))
    assert hard > easy
    with pytest.raises(ValueError):
        es.level_for(0, size=4, boxes=4)  # 4 inner cells: no room for 4 boxes and the player


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
        es.level_for(0, *settings)


@pytest.mark.parametrize("settings, message", IMPOSSIBLE)
def test_cli_gives_a_one_line_error_for_impossible_settings(settings, message, capsys):
    size, boxes, steps, walls = map(str, settings)
    with pytest.raises(SystemExit) as stop:
        es.main(["--size", size, "--boxes", boxes, "--reverse-steps", steps, "--walls", walls])
    usage, error = capsys.readouterr().err.split(": error: ")  # argparse: usage, then the error
    assert stop.value.code == 2 and usage.startswith("usage:")
    assert "\n" not in error.strip() and message in error


def test_cli_reports_a_solver_that_gives_up(capsys):
    with pytest.raises(SystemExit) as stop:
        es.main(["--seed", "3", "--max-states", "2"])
    assert stop.value.code == 2
    assert "gave up after 2 positions, so no solution is known: raise --max-states" in (
        capsys.readouterr().err)


# ---------------------------------------------------------------- the model's moves
@pytest.mark.parametrize("text, expected", [
    ("<answer>R R D</answer>", ["R", "R", "D"]),
    ("I push right first.\n<answer> up, Left ,DOWN </answer>", ["U", "L", "D"]),
    ('<answer>["R", "D"]</answer>', ["R", "D"]),
    ("<ANSWER>RRD</ANSWER>", ["R", "R", "D"]),  # run together in capitals, as solve() writes
    ("<answer>r, Up</answer>", ["R", "U"]),
    ("<answer>dull</answer>", None),  # a word, not D U L L
    ("<answer>Dull</answer>", None),
    ("<answer>rrd</answer>", None),
    ("<answer>R dull</answer>", None),
    ("<answer>a<answer>R</answer>", None),  # an answer runs from its first opening tag
    ("<answer>\nR\nR.\n</answer>", ["R", "R"]),
    ("<answer>L</answer> no wait <answer>U</answer>", ["U"]),
    ("<answer>" + "R " * 12 + "</answer>", ["R"] * 12),  # all come back; a turn plays 8
    ("R R D", None),
    ("<answer></answer>", None),
    ("<answer>jump</answer>", None),
    ("<answer>R, X</answer>", None),
    ("<answer>123</answer>", None),
    ("<answer>R R", ["R", "R"]),  # left open: up to the end of the line
    ("<answer>R R D\n\nThe board:\n#####", ["R", "R", "D"]),
    ("<answer>\nR R", None),
])
def test_parse_moves(text, expected):
    assert es.parse_moves(text) == expected


def regex_answer(text):
    """The answer the earlier, regex-based parse_moves read (quadratic on "<answer>" * n)."""
    answers = re.findall(r"<answer>(.*?)</answer>", text, re.IGNORECASE | re.DOTALL)
    opened = re.split("<answer>", text, flags=re.IGNORECASE)
    return answers[-1] if answers else opened[-1].split("\n")[0] if len(opened) > 1 else None


def test_parse_moves_reads_the_answer_the_regex_read():
    rng = random.Random(1)
    alphabet = list("<>/ansWerUR \n") + ["<answer>", "</answer>", "<ANSWER>", "</Answer>"]
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(30)))
        answer = regex_answer(text)
        assert es.parse_moves(text) == (es.moves_in(answer) if answer is not None else None)


def test_parsing_repeated_unclosed_tags_takes_linear_time():
    start = time.perf_counter()
    for tag in ("<answer>", "<ANSWER>", "</answer>", "<search>", "<reasoning>", "<result>"):
        assert es.parse_moves(tag * 16000) is None
        assert es.parse_moves("<answer>R</answer>" + tag * 16000) == ["R"]
        assert es.moves_in(tag * 16000) is None
    assert time.perf_counter() - start < 2.0  # the regex parser took 56 s here


def test_parse_moves_never_raises_on_garbage():
    rng = random.Random(0)
    alphabet = list("<>/answerUDLRudlrxyz ,[]\"'\n{}") + ["<answer>", "</answer>", "up", "left"]
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(40)))
        moves = es.parse_moves(text)
        assert moves is None or (moves and set(moves) <= set("UDLR"))


# ---------------------------------------------------------------- the two-role task
def test_a_turn_stops_at_the_end_of_the_answer_line(tokenizer):
    from policy import cut_at_stop
    for text, kept in (("L U\nblah blah", "L U\n"), ("R</answer> then text", "R</answer>")):
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        cut = tokenizer.decode(cut_at_stop(ids, tokenizer, es.STOP_STRINGS))
        assert cut == kept and es.parse_moves("<answer>" + cut) == es.parse_moves("<answer>" + text)


def test_planner_is_scored_on_a_copy_and_the_real_board_stays():
    task = es.SokobanTask(board(LEVEL))
    reward = task.act("planner", "<answer>R</answer>")
    assert reward == pytest.approx((-0.01 + 0.1) + 1.0 * 1)  # local + alpha * simulated team
    assert task.state == board(LEVEL) and task.turn == 0 and task.next_role == "executor"
    half = es.SokobanTask(board(LEVEL), alpha=0.5)
    assert half.act("planner", "<answer>R</answer>") == pytest.approx(0.09 + 0.5 * 1)


def test_executor_sees_the_simulated_proposal_and_plays_for_real():
    task = es.SokobanTask(board(LEVEL), moves_per_turn=8)
    task.act("planner", "<answer>R</answer>")
    user = task.messages("executor")[1]["content"]
    simulated = es.play(board(LEVEL), ["R"])[0]
    assert "The planner proposes: R\n" in user
    assert es.board_text(simulated) in user and es.board_text(board(LEVEL)) in user
    assert "boxes on goals 0/1, distance 2 -> 1, solved: no" in user
    reward = task.act("executor", "<answer>R R L L</answer>")  # L L come after the solve
    assert reward == pytest.approx((0.09 + 11.09) + 1.0 * (2 + 10))
    assert task.solved and task.done and task.turn == 1 and task.moves == 2  # not L L
    assert task.state == es.play(board(LEVEL), "RR")[0]
    with pytest.raises(ValueError):
        task.act("planner", "<answer>L</answer>")


def test_next_turn_shows_what_was_played():
    task = es.SokobanTask(board(LEVEL))
    task.act("planner", "<answer>D</answer>")
    assert task.act("executor", "<answer>R</answer>") == pytest.approx(0.09 + 1)
    user = task.messages("planner")[1]["content"]
    assert user.startswith("Turn 2 of 4.")
    assert es.board_text(es.move(board(LEVEL), "R")) in user
    assert "Last turn these moves were played: R\n" in user and "distance 2 -> 1" in user


def test_copies_are_independent_and_give_identical_prompts():
    task = es.SokobanTask(board(LEVEL))
    before = task.messages("planner")
    assert task.copy().messages("planner") == before
    branch = task.copy()
    branch.act("planner", "<answer>R</answer>")
    branch.act("executor", "<answer>R</answer>")
    assert task.messages("planner") == before
    assert task.state == board(LEVEL) and task.turn == 0 and task.observation == ""
    task.act("planner", "<answer>D</answer>")
    executor_prompt = task.messages("executor")
    task.copy().act("executor", "<answer>R R</answer>")
    assert task.messages("executor") == executor_prompt and not task.solved


def test_tree_sampling_pattern_continues_from_the_best_copy():
    task = es.SokobanTask(board(LEVEL), moves_per_turn=8)
    candidates = ["<answer>L</answer>", "<answer>R R</answer>", "nonsense", "<answer>D</answer>"]
    scored = [(branch.act("planner", text), branch)
              for branch, text in ((task.copy(), text) for text in candidates)]
    best_reward, best = max(scored, key=lambda pair: pair[0])
    assert best_reward == pytest.approx(0.09 + 11.09 + 12)
    assert "The planner proposes: R R" in best.messages("executor")[1]["content"]
    assert task.next_role == "planner" and task.observation == ""


def test_turn_limit_ends_the_episode():
    task = es.SokobanTask(board(LEVEL), max_turns=2)
    for _ in range(2):
        assert task.act("planner", "<answer>L</answer>") == pytest.approx(-0.05)
        assert task.act("executor", "<answer>L</answer>") == pytest.approx(-0.05)
    assert task.done and not task.solved and task.turn == 2
    with pytest.raises(ValueError):
        task.messages("planner")


def test_unreadable_answers_cost_a_penalty_and_leave_a_note():
    task = es.SokobanTask(board(LEVEL))
    assert task.act("planner", "I am not sure.") == es.FORMAT_PENALTY
    assert "no readable moves" in task.messages("executor")[1]["content"]
    assert task.act("executor", "<answer>jump</answer>") == es.FORMAT_PENALTY
    assert task.turn == 1 and task.state == board(LEVEL)
    assert "nothing was played" in task.messages("planner")[1]["content"]


def test_an_unreadable_answer_earns_less_than_any_move():
    # with -0.1, the unreadable answer beat the wrong moves (-1.01) of its group: runs learned to answer nothing
    level = es.level_for(10 ** 9, 7, 1, 10, solution=(3, 4))
    for role in ("planner", "executor"):
        task = es.SokobanTask(level, planner=role == "planner")
        moves = [task.copy().act(role, f"<answer>{m}</answer>") for m in "UDLR"]
        assert task.copy().act(role, "<answer>jump</answer>") < min(moves) and min(moves) < -0.5


def test_deadlock_is_reported_to_the_executor():
    task = es.SokobanTask(board(["######", "# $@.#", "#    #", "######"]))
    task.act("planner", "<answer>L</answer>")
    assert "deadlocked" in task.messages("executor")[1]["content"]


def test_roles_must_act_in_order():
    task = es.SokobanTask(board(LEVEL))
    with pytest.raises(ValueError):
        task.act("executor", "<answer>R</answer>")
    with pytest.raises(ValueError):
        task.messages("executor")


def test_at_most_moves_per_turn_are_played():
    corridor = board(["#############",
                      "#@        $.#",
                      "#############"])
    task = es.SokobanTask(corridor, planner=False, moves_per_turn=8)
    reward = task.act("executor", "<answer>" + "R " * 9 + "</answer>")  # the 9th would solve
    assert reward == pytest.approx(8 * -0.01 + (9 - 1))  # 8 steps; optimal moves left 9 -> 1
    assert task.state.player == (1, 9) and not task.solved and task.answers == ("RRRRRRRR",)
    one = es.SokobanTask(corridor, planner=False)  # the default: one move a turn
    assert one.act("executor", "<answer>R R</answer>") == pytest.approx(-0.01 + 1) and one.moves == 1


def test_single_agent_executor_plays_alone():
    task = es.SokobanTask(board(LEVEL), planner=False)
    assert task.roles == ("executor",)
    system, user = task.messages("executor")
    assert system["role"] == "system" and user["role"] == "user"
    assert "planner" not in system["content"] and "propos" not in user["content"]
    assert es.board_text(board(LEVEL)) in user["content"]
    assert "Answer with one move" in user["content"] and "<answer>L</answer>" in user["content"]
    with pytest.raises(ValueError):
        task.act("planner", "<answer>R</answer>")
    task.act("executor", "<answer>R</answer>")
    assert task.turn == 1 and task.next_role == "executor"


# ---------------------------------------------------------------- command-line probe
def test_cli_json_is_one_line_with_the_optimal_solution():
    out = cli("--seed", "3", "--json")
    assert out.returncode == 0 and len(out.stdout.splitlines()) == 1
    record = json.loads(out.stdout)
    level = es.level_for(3)
    assert record["board"] == es.render(level).split("\n")
    assert len(record["solution"]) == len(es.solve(level))
    assert es.is_solved(es.play(es.parse_board(record["board"]), record["solution"])[0])


def test_cli_moves_are_applied_first():
    level = es.level_for(3, size=7, boxes=2, reverse_steps=30)
    full = es.solve(level)
    out = cli("--seed", "3", "--size", "7", "--boxes", "2", "--reverse-steps", "30",
              "--json", "--moves", full[0].lower())
    record = json.loads(out.stdout)
    assert record["board"] == es.render(es.move(level, full[0])).split("\n")
    assert len(record["solution"]) == len(full) - 1
    assert cli("--moves", "xyz").returncode == 2


def test_cli_text_output():
    out = cli("--seed", "0")
    assert es.render(es.level_for(0)) in out.stdout
    assert f"optimal solution: {es.solve(es.level_for(0))}" in out.stdout


def test_a_person_may_type_moves_in_any_case():
    out = io.StringIO()
    es.play_in_terminal(board(LEVEL), ["rr\n"], out)
    assert "Solved!" in out.getvalue()


def test_cli_play_with_piped_input():
    solution = es.solve(es.level_for(1))
    out = cli("--seed", "1", "--play", stdin="hello\nreset\n" + " ".join(solution) + "\n")
    assert out.returncode == 0 and "not moves: 'hello'" in out.stdout and "Solved!" in out.stdout
    out = cli("--seed", "1", "--play", stdin="quit\n" + solution + "\n")
    assert out.returncode == 0 and "Solved!" not in out.stdout
