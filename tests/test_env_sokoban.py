"""env_sokoban.py: the team reward by hand, parse_moves on good and malformed answers, and the
two-role task: what each role sees, what is played, the rewards and the penalties."""
import random
import re
import time

import pytest

import env_sokoban as es
from env_two_roles import STOP_STRINGS
from moves import parse_moves
import sokoban
from test_sokoban import LEVEL, board  # a hand-made level; parse_board


# ---------------------------------------------------------------- the team reward
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
    assert sokoban.moves_left(start) == 2
    assert es.team_reward(start, sokoban.move(start, "R")) == 1  # a walk towards the box: 2 -> 1
    assert es.team_reward(start, sokoban.move(start, "R"), "distance") == 0  # the box did not move
    assert es.team_reward(start, sokoban.move(start, "D")) == -1  # a walk away: 2 -> 3
    assert es.team_reward(start, sokoban.move(start, "L")) == 0  # blocked
    above = board(["#####", "#.@ #", "# $ #", "#   #", "#####"])
    dead = sokoban.move(above, "D")  # the box on the bottom row, the goal above: never solvable
    assert sokoban.moves_left(dead) is None and es.team_reward(above, dead) == -10
    assert es.team_reward(dead, sokoban.move(dead, "U")) == 0  # nothing left to lose


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
    assert parse_moves(text) == expected


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
        assert parse_moves(text) == (sokoban.moves_in(answer) if answer is not None else None)


def test_parsing_repeated_unclosed_tags_takes_linear_time():
    start = time.perf_counter()
    for tag in ("<answer>", "<ANSWER>", "</answer>", "<search>", "<reasoning>", "<result>"):
        assert parse_moves(tag * 16000) is None
        assert parse_moves("<answer>R</answer>" + tag * 16000) == ["R"]
        assert sokoban.moves_in(tag * 16000) is None
    assert time.perf_counter() - start < 2.0  # the regex parser took 56 s here


def test_parse_moves_never_raises_on_garbage():
    rng = random.Random(0)
    alphabet = list("<>/answerUDLRudlrxyz ,[]\"'\n{}") + ["<answer>", "</answer>", "up", "left"]
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(40)))
        moves = parse_moves(text)
        assert moves is None or (moves and set(moves) <= set("UDLR"))


# ---------------------------------------------------------------- the two-role task
def test_a_turn_stops_at_the_end_of_the_answer_line(tokenizer):
    from generation import cut_at_stop
    for text, kept in (("L U\nblah blah", "L U\n"), ("R</answer> then text", "R</answer>")):
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        cut = tokenizer.decode(cut_at_stop(ids, tokenizer, STOP_STRINGS, {tokenizer.eos_token_id}))
        assert cut == kept and parse_moves("<answer>" + cut) == parse_moves("<answer>" + text)


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
    simulated = sokoban.play(board(LEVEL), ["R"])[0]
    assert "The planner proposes: R\n" in user
    assert sokoban.board_text(simulated) in user and sokoban.board_text(board(LEVEL)) in user
    assert "boxes on goals 0/1, distance 2 -> 1, solved: no" in user
    reward = task.act("executor", "<answer>R R L L</answer>")  # L L come after the solve
    assert reward == pytest.approx((0.09 + 11.09) + 1.0 * (2 + 10))
    assert task.solved and task.done and task.turn == 1 and task.moves == 2  # not L L
    assert task.state == sokoban.play(board(LEVEL), "RR")[0]
    with pytest.raises(ValueError):
        task.act("planner", "<answer>L</answer>")


def test_next_turn_shows_what_was_played():
    task = es.SokobanTask(board(LEVEL))
    task.act("planner", "<answer>D</answer>")
    assert task.act("executor", "<answer>R</answer>") == pytest.approx(0.09 + 1)
    user = task.messages("planner")[1]["content"]
    assert user.startswith("Turn 2 of 4.")
    assert sokoban.board_text(sokoban.move(board(LEVEL), "R")) in user
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
    level = sokoban.level_for(10 ** 9, 7, 1, 10, solution=(3, 4))
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
    assert sokoban.board_text(board(LEVEL)) in user["content"]
    assert "Answer with one move" in user["content"] and "<answer>L</answer>" in user["content"]
    with pytest.raises(ValueError):
        task.act("planner", "<answer>R</answer>")
    task.act("executor", "<answer>R</answer>")
    assert task.turn == 1 and task.next_role == "executor"
