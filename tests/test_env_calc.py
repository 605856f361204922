"""env_calc.py: the calculator's values by hand, its one-line refusals, and problems whose
answers the parser gives."""
from fractions import Fraction

import pytest

import env_calc
import rewards


@pytest.mark.parametrize("expression, value", [
    ("12 * 7 - 5", 79),  # 84 - 5
    ("2 + 3 * 4", 14),  # * before +: 2 + 12
    ("(2 + 3) * 4", 20),
    ("20 - 2 - 3", 15),  # left to right: (20 - 2) - 3, not 20 - (2 - 3) = 21
    ("48 / 4 / 2", 6),  # (48 / 4) / 2, not 48 / 2 = 24
    ("-(3 + 4) * 2", -14),
    ("1 / 3", Fraction(1, 3)),  # exact: no float rounding on the way
    ("0.5 * 6", 3),
    (" 7 ", 7),
])
def test_values(expression, value):
    assert env_calc.calculate(expression) == value


@pytest.mark.parametrize("expression, why", [
    ("", "the expression is empty"),
    ("3 +", "the expression ends too early"),
    ("(1 + 2", "a '(' is not closed"),
    ("1 + 2)", "unexpected ')' after a complete expression"),
    ("2..3", "'2..3' is not a number"),
    ("1 / (2 - 2)", "division by zero"),
    ("__import__('os')", "'_' is not allowed: use numbers, + - * / and parentheses"),
    ("2 ** 3", "unexpected '*'"),
    ("9" * 13, "a number larger than 1e+12 came up"),
    ("999999 * 999999 * 999999", "a number larger than 1e+12 came up"),
    ("(" * 21 + "1" + ")" * 21, "more than 20 nested parentheses"),
    ("1" * 201, "the expression is longer than 200 characters"),
])
def test_bad_input_is_one_line(expression, why):
    with pytest.raises(env_calc.CalcError) as error:
        env_calc.calculate(expression)
    assert str(error.value) == why


def test_shown_values():
    """An integer; a decimal exactly where 6 places hold it; else "≈" and 6 places, so a value that
    is not an integer is never shown as one (79.0000001 was shown as "79")."""
    values = (79, -14, Fraction(1, 3), Fraction(5, 2), Fraction("79.0000001"), Fraction("78.9999999"), Fraction(-2, 3),
              Fraction("0.125"))
    assert [env_calc.show(Fraction(x)) for x in values] == [
        "79", "-14", "≈0.333333", "2.5", "≈79.000000", "≈79.000000", "≈-0.666667", "0.125"]


def test_the_turn_reward_judges_the_exact_value_not_the_shown_one():
    """79.0000001 shows as ≈79.000000 and earns no value-is-answer reward for 79; 80 - 1 does, and so
    does an exact 2.5 for the gold 2.50."""
    for expression, gold, want in (("79.0000001", "79", 0.0), ("78.9999999", "79", 0.0), ("80 - 1", "79", 0.5),
                                   ("5 / 2", "2.50", 0.5), ("1 / 3", "0.333333", 0.0)):
        env = env_calc.CalcEnv("q", [gold], 2)
        env.step(f"<calc>{expression}</calc>")
        assert env_calc.value_is_answer_reward(env.completion, [gold]) == want, expression


def test_a_unary_minus_is_not_a_parenthesis():
    """25 signs before (1), 19 "- (" pairs: valid, within 20 parentheses; 21 parentheses are not."""
    assert env_calc.calculate("-" * 25 + "(1)") == -1
    assert env_calc.calculate("- (" * 19 + "1" + ")" * 19) == -1
    with pytest.raises(env_calc.CalcError, match="more than 20 nested"):
        env_calc.calculate("-(" * 21 + "1" + ")" * 21)


def test_problems_are_fixed_by_their_seed_and_their_answers_are_the_parsers():
    problems = env_calc.make_problems(60, seed=0)
    assert problems == env_calc.make_problems(60, seed=0) and problems != env_calc.make_problems(60, seed=1)
    assert len({p["question"] for p in problems}) == 60
    for p in problems:
        value = env_calc.calculate(p["expression"])
        assert value.denominator == 1 and value >= 0 and p["answer"] == str(value.numerator)
    first = problems[0]  # seed 0: 15 boxes of 17 pencils, 2 given away
    assert (first["expression"], first["answer"]) == ("15 * 17 - 2", "253") and "15 boxes of 17" in first["question"]


# ---------------------------------------------------------------- the episode and its rewards, by hand
def played(*turns, answers=("79",), max_turns=2):
    env = env_calc.CalcEnv("Q?", answers, max_turns)
    for t in turns:
        env.step(t)
    return env


CALL = "<reasoning>12 times 7, minus 5.</reasoning>\n<calc>12 * 7 - 5</calc>"
ANSWER = "<reasoning>It is 79.</reasoning>\n<answer>79</answer>"


@pytest.mark.parametrize("call, result, turn_reward", [
    (CALL, {"content": "<result>79</result>", "tool_results": "79"}, 0.2 + 0.5),  # ran, and its value is the answer
    ("<calc>12 * 7 - 4</calc>", {"content": "<result>80</result>", "tool_results": "80"}, 0.2),  # ran, another value
    ("<calc>100 + 79</calc>", {"content": "<result>179</result>", "tool_results": "179"}, 0.2),  # holds 79, is not 79
    ("<calc>12 x 7</calc>", {"content": "Error: 'x' is not allowed: use numbers, + - * / and parentheses"}, 0.0),
    ("<calc>12 * 7", {"content": "Error: the <calc> tag is not closed with </calc>"}, 0.0),  # cut off at the token limit
    ("79", {"content": env_calc.NO_ACTION}, 0.0),  # no call: the paper's missing tool call
])
def test_the_calculator_s_result_and_the_turn_reward(call, result, turn_reward):
    env = played(call, ANSWER)
    assert env.completion[1] == {"role": "user", **result} and env.done and env.turns == 2
    turn, outcome, means = rewards.score_episodes([env], env_calc.RUBRIC)
    assert turn == [[pytest.approx(turn_reward)]] and rewards.turn_reward(env.completion, env.answers, env_calc.RUBRIC) == \
        pytest.approx(turn_reward)
    assert means["value_is_answer_rate"] == (turn_reward == pytest.approx(0.7))


def test_the_outcome_reward_is_exact_match_and_format():
    """R^O = exact match 1.0 + format 0.2 + tag usage 0.2 (max 1.4); no answer presence: "179" holds "79"."""
    assert rewards.outcome_reward(played(CALL, ANSWER).completion, ["79"], env_calc.RUBRIC) == pytest.approx(1.4)
    wrong = played(CALL, "<reasoning>It is 179.</reasoning>\n<answer>179</answer>")
    assert rewards.outcome_reward(wrong.completion, ["79"], env_calc.RUBRIC) == pytest.approx(0.4)
    # no <reasoning>: each turn scores one field set of two (0.2), the spacing (0.2) and its closing tag last (0.2)
    bare = played("<calc>12 * 7 - 5</calc>", "<answer>79</answer>")
    assert rewards.xml_format_reward(bare.completion, tags=env_calc.TAGS) == pytest.approx(0.2 * 0.6)
    assert env_calc.RUBRIC.maxima == {"tool_execution": 0.2, "value_is_answer": 0.5, "exact_match": 1.0,
                                      "xml_format": 0.2, "xml_tag_usage": 0.2}
    # search's tags would see no call and no format in a calculator's turn
    assert rewards.tool_execution_reward(played(CALL, ANSWER).completion) == 0.0


def test_an_answer_ends_the_episode_and_k_turns_earn_a_reward_each():
    env = played("<answer>79</answer>")
    assert env.done and env.turns == 1 and rewards.turn_rewards(env.completion, ["79"], 2, env_calc.RUBRIC) == [0.0]
    three = played("<calc>12 * 7</calc>", CALL, ANSWER, max_turns=3)  # --max-calls 2
    assert three.turns == 3 and rewards.turn_rewards(three.completion, ["79"], 3, env_calc.RUBRIC) == \
        pytest.approx([0.2, 0.7])
    with pytest.raises(RuntimeError):
        three.step(ANSWER)


def test_the_splits_are_fixed_and_apart():
    _, train_items, test_items = env_calc.load(None)
    assert len(train_items) == env_calc.TRAIN_N and 0 < len(test_items) <= env_calc.TEST_N
    assert not {q["question"] for q in train_items} & {q["question"] for q in test_items}
    assert test_items[0] == {"question": env_calc.make_problems(1, env_calc.TEST_SEED)[0]["question"],
                             "answers": [env_calc.make_problems(1, env_calc.TEST_SEED)[0]["answer"]]}


# ---------------------------------------------------------------- every entry point, on a tiny model
def scripted(monkeypatch, tok, wrong=()):
    """The decode loop answers as a calculator user would: turn 1 calculates the problem's own
    expression (or 1 + 1 for a problem of `wrong`), turn 2 answers the value it got."""
    import fast.decode
    problems = {p["question"]: p for p in env_calc.make_problems(env_calc.TRAIN_N, env_calc.TRAIN_SEED)
                + env_calc.make_problems(env_calc.TEST_N, env_calc.TEST_SEED)}

    def turn(text):
        question = next(q for q in problems if q in text)
        expression = "1 + 1" if question in wrong else problems[question]["expression"]
        after = text.rsplit(question, 1)[1]
        if "<result>" not in after:
            return f" I calculate.</reasoning>\n<calc>{expression}</calc>"
        value = after.rsplit("<result>", 1)[1].split("</result>")[0]
        return f" It is {value}.</reasoning>\n<answer>{value}</answer>"
    monkeypatch.setattr(fast.decode, "generate_turn", lambda model, tok_, prefixes, *a, **k: [
        tok(turn(tok.decode(p)), add_special_tokens=False)["input_ids"] for p in prefixes])


def test_evaluate_scores_the_rubric(tiny_model_dir, tokenizer, monkeypatch):
    from tools import evaluate
    first, second = env_calc.make_problems(2, env_calc.TEST_SEED)
    scripted(monkeypatch, tokenizer, wrong={second["question"]})
    out = evaluate.main(["--env", "calc", "--model", tiny_model_dir, "--n", "2", "--chunk", "2", "--bf16", "false"])
    # both calculations ran; the first one's value is its answer (right), the second's is 2 (wrong)
    assert (out["tool_execution"], out["value_is_answer"], out["exact_match"], out["xml_format"]) == (1.0, 0.5, 0.5, 1.0)
    assert out["reward"] == pytest.approx(((0.7 + 1.4) + (0.2 + 0.4)) / 2) and out["env"] == "calc" and out["n"] == 2


def test_train_show_evaluate_credit_compare_and_plain_run_it(tmp_path, tiny_model_dir, tokenizer, monkeypatch):
    import json
    import os

    import train
    from tools import compare, credit, evaluate, show
    scripted(monkeypatch, tokenizer)
    out = str(tmp_path / "calc")
    flags = ["--model", tiny_model_dir, "--batch-size", "1", "--num-generations", "2", "--max-completion-length", "24",
             "--eval-n", "2", "--eval-every", "1", "--save-every", "1", "--micro-batch-size", "2", "--bf16", "false"]
    history = train.main(["--env", "calc", *flags, "--steps", "1", "--out", out])
    assert history[-1]["tool_execution_rate"] == history[-1]["value_is_answer_rate"] == history[-1]["exact_match_rate"] == 1.0 \
        and history[-1]["eval_exact_match_each"] == "11"  # the script is right, every time
    assert json.load(open(os.path.join(out, "args.json")))["env"] == "calc"
    page = open(show.main([out, "--step", "1"])).read()
    assert "&lt;calc&gt;" in page and "turn 2 (outcome): 1.400" in page
    assert evaluate.main(["--model", os.path.join(out, "checkpoint"), "--n", "2", "--bf16", "false"])["exact_match"] == 1.0
    measured = credit.main(["--model", os.path.join(out, "checkpoint"), "--states", "2", "--num-generations", "2",
                            "--continuations", "2", "--bootstrap", "10", "--json", str(tmp_path / "credit.json")])
    assert measured["settings"]["env"] == "calc" and {"return", "outcome"} == set(measured["figures"])
    assert {r["kind"] for r in measured["records"] if r["turn"] == 1} == {"call"}  # <calc> read as the call
    again = credit.main(["--from", str(tmp_path / "credit.json")])  # read back as data
    assert json.dumps(again["figures"]) == json.dumps(measured["figures"])  # NaN where every reward is equal
    plain = train.main(["--env", "calc", *flags, "--steps", "1", "--eval-every", "0", "--plain", "true",
                        "--out", str(tmp_path / "plain")])  # transformers' generate: the tiny model's own text
    assert "value_is_answer" in plain[-1]
    monkeypatch.undo()  # compare's runs are train.py processes: the tiny model's own text
    compare.main(["--env", "calc", "--out", str(tmp_path / "cmp"), "--algos", "mt", "or", "--", *flags, "--steps", "1"])
    report = open(tmp_path / "cmp" / "results.md").read()
    assert report.splitlines()[0] == "# MT-GRPO vs GRPO-OR (calc)"
    assert "| value is the answer rate |" in report


def test_a_flag_of_search_is_refused_and_max_calls_is_read(capsys):
    import config
    with pytest.raises(SystemExit):
        config.parse_args(["--env", "calc", "--top-k", "3"])
    assert "--top-k 3 needs --env search (--env calc does not read it)" in capsys.readouterr().err
    assert config.parse_args(["--env", "calc", "--max-calls", "2"]).max_calls == 2
    assert config.parse_args(["--env", "calc"]).prefill == "<reasoning>" and config.parse_args(["--env", "calc"]).algo == "mt"
