"""env_math.py: the math team's rewards by hand, every way a turn can go, the problems checked
against an independent computation, and the protocol atgrpo.py relies on (copies, restart, example)."""
from fractions import Fraction
from types import SimpleNamespace

import pytest

import atgrpo
import env_math
import tasks
from env_math import FORMAT_PENALTY, MathTeam, Problem

# a problem by hand: 3 * 12 - 5 = 36 - 5 = 31
PENCILS = Problem(0, 0, (("a", 3), ("b", 12), ("c", 5)),
                  "Ana buys 3 boxes of 12 pencils and gives away 5 pencils. How many pencils are left?",
                  "3 * 12 - 5", Fraction(31))
# a fraction: 12 / 8 * 3 = 36 / 8 = 9/2
FLOUR = Problem(1, 4, (("a", 12), ("b", 8), ("c", 3)),
                "A recipe needs 12 cups of flour for 8 cakes. How many cups of flour do 3 cakes need?",
                "12 / 8 * 3", Fraction(9, 2))


def team(problem=PENCILS, **kw):
    return MathTeam(problem, **kw)


def turn(t, calc, answer):
    """One turn: the tool's reward, the reasoner's reward."""
    return t.act("tool", calc), t.act("reasoner", answer)


# ---------------------------------------------------------------- the problems
def independent(template, n):
    """Each template's answer by plain Python over fractions, apart from the expression it renders."""
    a, b, c, d = (Fraction(n.get(k, 0)) for k in "abcd")
    return [a * b - c, a - b + c - d, a - b * c + d, (a - c) / b, a / b * c, a - b - c * d, a / b * c,
            a * b + c * d][template]


SEEDS = [*range(400), *range(env_math.TEST_SEEDS, env_math.TEST_SEEDS + 400)]


def test_problems_answers_by_an_independent_computation():
    problems = [env_math.make_level(s, None) for s in SEEDS]
    assert {p.template for p in problems} == set(range(len(env_math.TEMPLATES)))
    for p in problems:
        numbers = dict(p.numbers)
        assert p.answer == independent(p.template, numbers), p
        assert p.answer >= 1
        whole = env_math.TEMPLATES[p.template][3]
        assert (p.answer.denominator == 1) if whole else (p.answer.denominator <= 8)
        a, b, c = (numbers.get(k, 0) for k in "abc")
        partial = {1: [a - b, a - b + c], 2: [a - b * c], 3: [a - c], 5: [a - b]}.get(p.template, [])
        assert all(x > 0 for x in partial)  # no partial result below 0: 20 people, 25 get off
        assert 2 <= sum(p.expression.count(op) for op in "+-*/") <= 3  # 2 or 3 operations
        assert all(str(v) in p.question for v in numbers.values())
    assert any(p.answer.denominator > 1 for p in problems)  # fractions do come up


def test_problems_are_reproducible_and_pinned():
    assert [env_math.make_level(s, None) for s in SEEDS[:50]] == [env_math.make_level(s, None) for s in SEEDS[:50]]
    assert len({env_math.make_level(s, None).question for s in SEEDS}) > 780  # seeds give different problems
    # pinned by hand: a change of the draw's order changes them
    p = env_math.make_level(2, None)
    assert (p.question, p.expression, p.answer) == (
        "Ben buys 4 boxes of 15 pencils and gives away 3 pencils. How many pencils are left?", "4 * 15 - 3", 57)
    p = env_math.make_level(10 ** 9, None)
    assert (p.expression, p.answer) == ("36 - 15 + 4 - 17", 8)  # 36 - 15 = 21, + 4 = 25, - 17 = 8
    p = env_math.make_level(0, None)
    assert (p.expression, p.answer) == ("8 / 5 * 3", Fraction(24, 5))  # a fraction answer: 24/5
    assert env_math.make_level(2, SimpleNamespace(max_turns=9)) == env_math.make_level(2, None)  # no flag changes it


# ---------------------------------------------------------------- reading the answers
@pytest.mark.parametrize("text, answer", [
    ("<answer>31</answer>", "31"),
    ("<answer>30</answer> then <answer>31</answer>", "31"),  # the last answer
    ("<answer>31", "31"),  # left open (the prefill, then a turn cut by a stop string)
    ("<answer>31\nmore", "31"),  # an open one counts to the end of its line
    ("<ANSWER> 3 * 12 </ANSWER>", " 3 * 12 "),
    ("31", None), ("", None), ("</answer>31</answer>", None),
])
def test_answer_in(text, answer):
    assert env_math.answer_in(text) == answer


@pytest.mark.parametrize("text, value", [
    ("31", 31), (" 31 ", 31), ("31.", 31), ("-4", -4), ("4.5", Fraction(9, 2)), ("9/2", Fraction(9, 2)),
    ("9 / 2", Fraction(9, 2)), ("1/3", Fraction(1, 3)), ("1,200", 1200), ("007", 7),
    ("thirty-one", None), ("31 pencils", None), ("3 * 12 - 5", None), ("5/0", None), ("", None), (None, None),
    ("9" * 13, None),  # beyond the calculator's 10**12
])
def test_read_number(text, value):
    assert env_math.read_number(text) == value


# ---------------------------------------------------------------- the rewards, by hand
def test_agreement_on_the_gold_answer_ends_the_episode():
    t = team()
    # tool: its value 31 is the gold answer, local +1 (team term later); reasoner: 1 local + 1 * 1 team
    assert turn(t, "<answer>3 * 12 - 5</answer>", "<answer>31</answer>") == (1.0, 2.0)
    assert t.team_share == 1.0  # the tool's team term: its total for the turn is 1 + 1 = 2
    assert (t.done, t.solved, t.agreed, t.turn, t.answers) == (True, True, True, 1, ("31",))
    assert t.metrics() == {"agreed": 1.0, "unreadable": 0.0, "tool_ran": 1.0, "tool_correct": 1.0}
    with pytest.raises(ValueError, match="over"):
        t.act("tool", "<answer>1</answer>")


def test_alpha_weighs_the_team_term():
    t = team(alpha=0.5)
    assert turn(t, "<answer>3 * 12 - 5</answer>", "<answer>31</answer>") == (1.0, 1.5)  # 1 + 0.5 * 1
    assert t.team_share == 0.5


def test_agreement_on_a_wrong_answer_ends_it_unsolved():
    t = team()
    assert turn(t, "<answer>3 * 12 + 5</answer>", "<answer>41</answer>") == (0.0, 0.0)  # 36 + 5 = 41, not 31
    assert (t.done, t.solved, t.agreed, t.team_share) == (True, False, True, 0.0)
    assert t.metrics()["tool_correct"] == 0.0


def test_disagreement_plays_another_turn_with_the_history_in_view():
    t = team()
    assert turn(t, "<answer>3 * 12 - 5</answer>", "<answer>30</answer>") == (1.0, 0.0)
    assert (t.done, t.solved, t.turn, t.next_role, t.team_share) == (False, False, 1, "tool", 0.0)
    assert t.messages("tool")[1]["content"] == (
        f"Problem: {PENCILS.question}\n"
        "Turn 1: the tool agent wrote 3 * 12 - 5; the calculator gives 31; the reasoning agent answered 30.\n"
        "Turn 2 of 3.")
    assert t.act("tool", "<answer>36 - 5</answer>") == 1.0
    assert t.messages("reasoner")[1]["content"].endswith(
        "Turn 2 of 3: the tool agent wrote 36 - 5; the calculator gives 31.")  # this turn's result in view
    assert t.act("reasoner", "<answer>31</answer>") == 2.0
    assert (t.done, t.solved, t.turn, t.answers) == (True, True, 2, ("30", "31"))


def test_metrics_over_two_turns():
    t = team()
    assert turn(t, "<answer>31 / 0</answer>", "junk") == (-1.0, -2.0)
    assert turn(t, "<answer>3 * 12 - 5</answer>", "<answer>31</answer>") == (1.0, 2.0)
    # 2 calculations, 1 ran; 1 unreadable answer; the last calculation is the gold answer
    assert t.metrics() == {"agreed": 1.0, "unreadable": 1.0, "tool_ran": 0.5, "tool_correct": 1.0}


def test_a_right_reasoner_against_a_wrong_tool_goes_on():
    t = team()
    # tool 41: local 0; reasoner 31: 1 + 1, team_share 1 (the tool gets 0 + 1); 31 is not 41: go on
    assert turn(t, "<answer>3 * 12 + 5</answer>", "<answer>31</answer>") == (0.0, 2.0)
    assert (t.team_share, t.solved, t.done) == (1.0, True, False)
    assert t.act("tool", "<answer>3 * 12 + 5</answer>") == 0.0
    assert t.team_share == 0.0  # a turn under way has no team term yet


def test_the_turn_limit_ends_a_disagreement():
    t = team(max_turns=2)
    assert turn(t, "<answer>3 * 12 - 5</answer>", "<answer>30</answer>") == (1.0, 0.0)
    assert turn(t, "<answer>3 * 12 - 5</answer>", "<answer>32</answer>") == (1.0, 0.0)
    assert (t.done, t.agreed, t.solved, t.turn, t.answers) == (True, False, False, 2, ("30", "32"))
    t = team(max_turns=1)
    assert turn(t, "<answer>3 * 12 + 5</answer>", "<answer>31</answer>") == (0.0, 2.0)  # solved at the limit
    assert (t.done, t.agreed, t.solved) == (True, False, True)


def test_a_calculation_that_does_not_parse():
    t = team()
    assert t.act("tool", "<answer>3 boxes * 12</answer>") == -1.0  # it does not run: PettingLLMs' -1
    assert t.messages("reasoner")[1]["content"].endswith(
        "Turn 1 of 3: the tool agent wrote 3 boxes * 12; the calculator says: Error: 'b' is not allowed: "
        "use numbers, + - * / and parentheses.")
    assert t.act("reasoner", "<answer>31</answer>") == 2.0
    assert (t.done, t.solved, t.team_share) == (False, True, 1.0)  # no value to agree with: go on
    assert t.metrics() == {"agreed": 0.0, "unreadable": 0.0, "tool_ran": 0.0, "tool_correct": 0.0}


def test_a_division_by_zero():
    t = team()
    assert t.act("tool", "<answer>31 / (5 - 5)</answer>") == -1.0
    assert "the calculator says: Error: division by zero." in t.messages("reasoner")[1]["content"]
    assert t.act("reasoner", "<answer>0</answer>") == 0.0
    assert not t.done


def test_a_missing_tag_gets_the_format_penalty_and_a_note():
    t = team()
    assert t.act("tool", "3 * 12 - 5") == FORMAT_PENALTY == -2.0
    assert t.messages("reasoner")[1]["content"].endswith(
        "Turn 1 of 3: the tool agent's answer had no calculation inside answer tags.")
    assert t.act("reasoner", "31") == -2.0  # no answer tag either: no team term
    assert (t.team_share, t.solved, t.done, t.answers, t.last) == (0.0, False, False, ("-",), None)
    assert t.messages("tool")[1]["content"].endswith(
        "Turn 1: the tool agent's answer had no calculation inside answer tags; the reasoning agent's answer "
        "had no readable number.\nTurn 2 of 3.")
    assert t.metrics() == {"agreed": 0.0, "unreadable": 2.0, "tool_ran": 0.0, "tool_correct": 0.0}


@pytest.mark.parametrize("calc, answer, rewards", [
    ("<answer></answer>", "<answer>thirty-one</answer>", (-2.0, -2.0)),  # empty, words
    ("<answer>   </answer>", "<answer>31 pencils</answer>", (-2.0, -2.0)),
    ("<answer>3 * 12 - 5", "<answer>31", (1.0, 2.0)),  # left open: read to the end of the line
    ("<answer>(3 * 12 - 5</answer>", "<answer>3 * 12 - 5</answer>", (-1.0, -2.0)),  # '(' not closed; an expression is no number
    ("<answer>3 * 12 - 5</answer>", "<answer>5/0</answer>", (1.0, -2.0)),
])
def test_malformed_output(calc, answer, rewards):
    assert turn(team(), calc, answer) == rewards


def test_the_format_penalty_is_below_every_other_reward():
    others = [turn(team(max_turns=1), c, a) for c in ("<answer>1 / 0</answer>", "<answer>3 * 12 - 5</answer>")
              for a in ("<answer>30</answer>", "<answer>31</answer>")]
    assert min(r for pair in others for r in pair) == -1.0 > FORMAT_PENALTY


def test_fractions_exactly():
    t = team(FLOUR)
    assert t.act("tool", "<answer>12 / 8 * 3</answer>") == 1.0
    assert t.messages("reasoner")[1]["content"].endswith("the calculator gives 9/2.")
    assert t.act("reasoner", "<answer>4.5</answer>") == 2.0  # 4.5 is 9/2: they agree, and it is right
    assert (t.done, t.agreed, t.solved, t.answers) == (True, True, True, ("9/2",))
    t = team(FLOUR)
    assert turn(t, "<answer>12 / 8 * 3</answer>", "<answer>4</answer>") == (1.0, 0.0)
    assert not t.done


def test_single_agent_plays_every_turn():
    t = team(tool=False)
    assert (t.roles, t.next_role) == (("reasoner",), "reasoner")
    system, user = (m["content"] for m in t.messages("reasoner"))
    assert system == env_math.SYSTEM["alone"]
    assert user == f"Problem: {PENCILS.question}\nTurn 1 of 3."
    with pytest.raises(ValueError, match="reasoner"):
        t.act("tool", "<answer>3 * 12 - 5</answer>")
    assert t.act("reasoner", "<answer>31</answer>") == 2.0  # 1 + 1 * 1
    assert (t.team_share, t.done, t.solved) == (0.0, False, True)  # no tool to agree with: go on
    assert t.act("reasoner", "<answer>x</answer>") == -2.0
    assert not t.solved  # the last answer counts: an unreadable one solves nothing
    assert t.messages("reasoner")[1]["content"] == (
        f"Problem: {PENCILS.question}\nTurn 1: you answered 31.\nTurn 2: your answer had no readable number.\n"
        "Turn 3 of 3.")
    assert t.act("reasoner", "<answer>30</answer>") == 0.0
    assert (t.done, t.solved, t.turn, t.answers) == (True, False, 3, ("31", "-", "30"))  # the last answer counts
    assert t.metrics() == {"agreed": 0.0, "unreadable": 1.0}


def test_only_the_next_role_may_act():
    t = team()
    with pytest.raises(ValueError, match="tool's move"):
        t.act("reasoner", "<answer>31</answer>")
    with pytest.raises(ValueError, match="tool's move"):
        t.messages("reasoner")
    t.act("tool", "<answer>31</answer>")
    with pytest.raises(ValueError, match="reasoner's move"):
        t.example("tool")


# ---------------------------------------------------------------- the protocol atgrpo.py relies on
def states():
    """Episodes at every point of a game: start, mid-turn, after a disagreement, after a failure."""
    t, out = team(), []
    for text in ("<answer>3 * 12 + 5</answer>", "<answer>40</answer>", "<answer>1 / 0</answer>", "junk"):
        out.append(t.copy())
        t.act(t.next_role, text)
    return out + [t]


def test_copies_are_independent_and_prompt_the_same_bytes():
    for t in states():
        before = (t.messages(t.next_role), t.turn, t.history, t.answers, t.calc, t.next_role)
        c = t.copy()
        assert c.messages(c.next_role) == before[0]
        c.act(c.next_role, c.example(c.next_role))
        if not c.done:
            c.act(c.next_role, "junk")
        assert (t.messages(t.next_role), t.turn, t.history, t.answers, t.calc, t.next_role) == before


def test_tree_step_scores_each_candidate_on_its_own_copy():
    t = team()
    texts = ["<answer>3 * 12 - 5</answer>", "<answer>1 / 0</answer>", "nothing", "<answer>3 * 12</answer>"]
    group, chosen = atgrpo.tree_step(t, 7, "tool", [([1], [2], x) for x in texts])
    assert group.rewards == [1.0, -1.0, -2.0, 0.0] and group.chosen == 0 and group.key == (7, "tool", 1)
    assert t.next_role == "tool" and t.calc is None  # the original was never played
    assert chosen.calc.value == 31


def test_tree_rollout_adds_the_team_term_to_the_tool():
    def sampler(role, message_lists):
        texts = {"tool": ["<answer>3 * 12 + 5</answer>", "<answer>3 * 12 - 5</answer>"],
                 "reasoner": ["<answer>30</answer>", "<answer>31</answer>"]}[role]
        return [([0], [1], texts[i % 2]) for i in range(len(message_lists))]
    groups, final = atgrpo.tree_rollout([team()], [0], sampler, 2)
    # tool: 0 and 1, the second chosen; reasoner: 0 and 2, the second chosen; it agrees with 31: done.
    # The tool's team term is the chosen reasoner's correctness: + 1 to both tool candidates.
    assert [(g.key, g.rewards, g.chosen) for g in groups] == [((0, "tool", 1), [1.0, 2.0], 1),
                                                             ((0, "reasoner", 1), [0.0, 2.0], 1)]
    assert final[0].done and final[0].solved


def test_restart_goes_back_to_the_first_state_at_the_same_turn_and_role():
    t = team()
    turn(t, "<answer>3 * 12 + 5</answer>", "<answer>31</answer>")  # solved but not agreed
    again = t.restart()
    assert (again.turn, again.next_role, again.history, again.last, again.solved, again.done) == (
        1, "tool", (), None, False, False)
    assert again.messages("tool")[1]["content"] == f"Problem: {PENCILS.question}\nTurn 2 of 3."
    assert t.history and t.solved  # the original is untouched
    t.act("tool", "<answer>2</answer>")
    mid = t.restart()  # in the middle of a turn: this turn's calculation is gone too
    assert mid.messages("reasoner")[1]["content"] == (
        f"Problem: {PENCILS.question}\nTurn 2 of 3: the tool agent has not calculated yet.")
    assert mid.act("reasoner", "<answer>31</answer>") == 2.0 and not mid.done
    assert mid.metrics() == {"agreed": 0.0, "unreadable": 0.0, "tool_ran": 0.0, "tool_correct": 0.0}  # no calculation


@pytest.mark.parametrize("tool", [True, False])
def test_example_takes_the_normal_path_to_the_longest_prompt(tool):
    for seed in SEEDS[::20]:
        t = MathTeam(env_math.make_level(seed, None), max_turns=3, tool=tool)
        while not t.done:
            role = t.next_role
            reward = t.act(role, t.example(role))
            assert reward == (1.0 if role == "tool" else 0.0)  # the calculation is right, the answer one off
        assert t.turn == 3 and not t.agreed and "-" not in t.answers
        assert t.metrics()["unreadable"] == 0.0


def test_make_tasks_reads_the_two_role_flags():
    args = SimpleNamespace(max_turns=2, team_alpha=0.5, single_agent=False)
    tasks = env_math.make_tasks([3, 10 ** 9], args)
    assert [t.problem for t in tasks] == [env_math.make_level(3, args), env_math.make_level(10 ** 9, args)]
    assert (tasks[0].max_turns, tasks[0].alpha, tasks[0].roles) == (2, 0.5, ("tool", "reasoner"))
    alone = env_math.make_tasks(None, SimpleNamespace(max_turns=4, team_alpha=1.0, single_agent=True), [PENCILS])
    assert (alone[0].problem, alone[0].roles, alone[0].max_turns) == (PENCILS, ("reasoner",), 4)


def test_the_task_entry():
    task = env_math.TASK
    assert (task.name, task.kind, task.item, task.roles, task.constant) == ("math", "game", "level", ("tool", "reasoner"), None)
    assert task.prefill == "<answer>" and task.stop_strings == ["</answer>", "\n"]
    assert [o.name for o in task.options] == ["max_turns", "team_alpha", "single_agent"]
    assert task.defaults["max_turns"] == 3 and task.defaults["max_completion_length"] == 24
    assert set(task.progress) <= {k for k, _ in task.table}
    assert task.make_level(5, None) == env_math.make_problem(5)


def test_the_prompts_examples_do_not_agree():
    """A model that copies both system prompts' examples must not end the episode by agreeing."""
    calc = env_math.calculate(env_math.answer_in(env_math.SYSTEM["tool"].split("for example ")[1]))
    number = env_math.read_number(env_math.answer_in(env_math.SYSTEM["reasoner"].split("for example ")[1]))
    assert (calc, number) == (60, 42)


# ---------------------------------------------------------------- train.py runs it (once tasks.py lists it)
ANSWERS = {"tool": ["<answer>3 * 12 - 5</answer>", "<answer>1 / 0</answer>", "x = 3", "<answer>40 + 2"],
           "reasoner": ["<answer>31</answer>", "<answer>42</answer>", "thirty", "<answer>9/2"]}


def scripted(models, tok, args, stop_strings, greedy=False):
    """A sampler that answers each role from ANSWERS in turn (seeded order), through train.py's real step."""
    import policy
    count = {"tool": 0, "reasoner": 0}

    def sample(role, message_lists):
        out = []
        for m in message_lists:
            text = ANSWERS[role][count[role] % len(ANSWERS[role])]
            count[role] += 1
            out.append((policy.prompt_ids(tok, m, args.prefill), tok(text, add_special_tokens=False)["input_ids"], text))
        return out
    return sample


@pytest.mark.skipif("math" not in tasks.TASKS, reason="tasks.py does not list env_math.TASK yet")
@pytest.mark.parametrize("extra", [("--algo", "at"), ("--algo", "grpo", "--single-agent", "true"),
                                   ("--algo", "at", "--policy", "per-role")])
def test_train_runs_the_math_team(tmp_path, tiny_model_dir, monkeypatch, extra):
    import json

    import train
    monkeypatch.setattr(train, "chat_sampler", scripted)
    out = tmp_path / "run"
    train.main(["--env", "math", "--model", tiny_model_dir, "--steps", "1", "--batch-size", "2", "--num-generations", "2",
                "--max-completion-length", "8", "--eval-n", "4", "--eval-every", "1", "--bf16", "false",
                "--out", str(out), *extra])
    log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    evaluation = {k: v for line in log for k, v in line.items() if k.startswith("eval_")}
    alone = "--single-agent" in extra
    assert {"eval_success", "eval_agreed", "eval_unreadable", "eval_reward_reasoner", "eval_success_each"} <= set(evaluation)
    assert ("eval_reward_tool" in evaluation) != alone and ("eval_tool_ran" in evaluation) != alone
    assert (out / "rollouts" / "step_1.jsonl").exists()
