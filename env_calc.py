"""A second tool-use task, the proof that a new task is one file: arithmetic word problems with a
calculator (docs/calc.md). Turn 1 may call the tool, turn 2 answers: the search task's protocol
(env_search.py) with another tool, trained by the same MT-GRPO (python train.py --env calc):

    turn 1 (model)  <reasoning>...</reasoning>
                    <calc>12 * 7 - 5</calc>
    environment     <result>79</result>
    turn 2 (model)  <reasoning>...</reasoning>\n<answer>79</answer>

The calculator is a small parser of its own (never eval): numbers, + - * /, parentheses and a
unary minus, with limits on length, depth and size; anything else is a one-line result that says
what is wrong, as a tool error would. The problems are generated offline from a seed, and each
answer is the parser's value of the problem's own expression.

The rewards are MT-GRPO's, by analogy (rewards.py's functions with the <calc> tag). Turn reward
R^T (max 0.7): the calculator ran (0.2) and its value is the answer (0.5: exactly a gold answer,
where search asks for the answer inside its result). Outcome reward R^O (max 1.4): exact match
(1.0), XML format (0.2) and tag usage (0.2); search's answer presence (a gold alias inside the
answer) is left out: "79" is inside "179".

Read top to bottom: the calculator (calculate), the problems (make_problems), the episode
(CalcEnv), the rewards (RUBRIC) and the task as train.py and tools/ read it (TASK).
"""
import random
import re
from fractions import Fraction

import rewards
from task import Task

MAX_LENGTH = 200  # characters of an expression
MAX_DEPTH = 20  # nested parentheses
MAX_SIZE = 10 ** 12  # the largest magnitude of a number or of a result along the way
PLACES = 6  # decimal places a result shows


class CalcError(ValueError):
    """What the calculator says instead of a value: one line, shown to the model as the result."""


# ---------------------------------------------------------------- the calculator
def calculate(expression):
    """The value of expression (a Fraction, exact), or CalcError with a one-line reason.

    Grammar:  sum = product (("+" | "-") product)*;  product = unary (("*" | "/") unary)*;
              unary = "-" unary | atom;  atom = number | "(" sum ")";  number = digits ["." digits]."""
    if not isinstance(expression, str):
        raise CalcError("the expression must be text")
    if len(expression) > MAX_LENGTH:
        raise CalcError(f"the expression is longer than {MAX_LENGTH} characters")
    tokens = tokenize(expression)
    if not tokens:
        raise CalcError("the expression is empty")
    value, at = parse_sum(tokens, 0, 0)
    if at < len(tokens):
        raise CalcError(f"unexpected {tokens[at]!r} after a complete expression")
    return value


def tokenize(text):
    """Numbers (as Fractions) and the characters + - * / ( ); CalcError for any other character."""
    tokens, i = [], 0
    while i < len(text):
        c = text[i]
        if c.isspace():
            i += 1
        elif c in "+-*/()":
            tokens.append(c)
            i += 1
        elif c.isdigit() or c == ".":
            j = i
            while j < len(text) and (text[j].isdigit() or text[j] == "."):
                j += 1
            number = text[i:j]
            if not re.fullmatch(r"\d+(\.\d+)?|\.\d+", number):
                raise CalcError(f"{number!r} is not a number")
            tokens.append(checked(Fraction(number)))
            i = j
        else:
            raise CalcError(f"{c!r} is not allowed: use numbers, + - * / and parentheses")
    return tokens


def checked(value):
    if abs(value) > MAX_SIZE:
        raise CalcError(f"a number larger than {MAX_SIZE:.0e} came up")
    return value


def parse_sum(tokens, at, depth):
    value, at = parse_product(tokens, at, depth)
    while at < len(tokens) and tokens[at] in ("+", "-"):
        op = tokens[at]
        right, at = parse_product(tokens, at + 1, depth)
        value = checked(value + right if op == "+" else value - right)
    return value, at


def parse_product(tokens, at, depth):
    value, at = parse_unary(tokens, at, depth)
    while at < len(tokens) and tokens[at] in ("*", "/"):
        op = tokens[at]
        right, at = parse_unary(tokens, at + 1, depth)
        if op == "/" and right == 0:
            raise CalcError("division by zero")
        value = checked(value * right if op == "*" else value / right)
    return value, at


def parse_unary(tokens, at, depth):
    """A minus sign, then a unary: a sign is not a parenthesis, so it adds no depth (the length limit bounds it)."""
    if at < len(tokens) and tokens[at] == "-":
        value, at = parse_unary(tokens, at + 1, depth)
        return -value, at
    return parse_atom(tokens, at, depth)


def parse_atom(tokens, at, depth):
    if at >= len(tokens):
        raise CalcError("the expression ends too early")
    token = tokens[at]
    if isinstance(token, Fraction):
        return token, at + 1
    if token != "(":
        raise CalcError(f"unexpected {token!r}")
    if depth >= MAX_DEPTH:
        raise CalcError(f"more than {MAX_DEPTH} nested parentheses")
    value, at = parse_sum(tokens, at + 1, depth + 1)
    if at >= len(tokens) or tokens[at] != ")":
        raise CalcError("a '(' is not closed")
    return value, at + 1


def show(value):
    """A value as the result shows it: an integer; a decimal of at most PLACES places, exactly
    (2.5); else "≈" and the value rounded to PLACES places, zeros kept (≈0.333333, ≈79.000000):
    a value that is not an integer is never shown as one."""
    if value.denominator == 1:
        return str(value.numerator)
    scaled = round(abs(value) * 10 ** PLACES)  # exact: Fractions, no float on the way
    whole, part = divmod(scaled, 10 ** PLACES)
    text, sign = f"{whole}.{part:0{PLACES}d}", "-" if value < 0 else ""
    if Fraction(scaled, 10 ** PLACES) == abs(value):
        return sign + text.rstrip("0").rstrip(".")
    return f"≈{sign}{text}"


# ---------------------------------------------------------------- the problems
NAMES = ("Ana", "Ben", "Chen", "Dara", "Eli", "Fatima", "Goran", "Hana")
# (text with {a} {b} {c} and {name}, its expression, the ranges of a, b, c)
TEMPLATES = (
    ("{name} buys {a} boxes of {b} pencils and gives away {c} pencils. How many pencils are left?",
     "{a} * {b} - {c}", (3, 19), (4, 24), (1, 30)),
    ("A train travels {a} km in each of {b} hours, then {c} km more. How far does it go in all, in km?",
     "{a} * {b} + {c}", (40, 120), (2, 9), (5, 60)),
    ("{name} shares {a} sweets equally among {b} friends, after eating {c}. How many does each friend get?",
     "({a} - {c}) / {b}", (20, 200), (2, 9), (1, 9)),
    ("A shop sells {a} shirts at {b} euros each and {c} caps at 7 euros each. How many euros does it take in?",
     "{a} * {b} + {c} * 7", (3, 30), (8, 40), (2, 20)),
    ("{name} reads {a} pages a day for {b} days, then {c} pages on the last day. How many pages in all?",
     "{a} * {b} + {c}", (5, 60), (3, 14), (1, 40)),
    ("A garden of {a} rows with {b} plants each loses {c} plants to frost. How many plants remain?",
     "{a} * {b} - {c}", (4, 25), (5, 30), (1, 20)),
)


def make_problems(n, seed):
    """n problems, [{"question", "expression", "answer"}], the same for the same seed. Each answer
    is calculate(expression): a whole number (the draws that would not divide evenly are drawn again)."""
    rng, problems = random.Random(seed), []
    while len(problems) < n:
        text, form, *ranges = TEMPLATES[len(problems) % len(TEMPLATES)]
        a, b, c = (rng.randint(*r) for r in ranges)
        expression = form.format(a=a, b=b, c=c)
        value = calculate(expression)
        if value.denominator != 1 or value < 0:
            continue
        problems.append({"question": text.format(a=a, b=b, c=c, name=rng.choice(NAMES)),
                         "expression": expression, "answer": show(value)})
    return problems


TRAIN_SEED, TEST_SEED = 0, 1  # fixed splits, whatever --seed says (as search's questions)
TRAIN_N, TEST_N = 1000, 200


# ---------------------------------------------------------------- the episode
SYSTEM_PROMPT = """\
Solve the arithmetic word problem with the help of a calculator.
First think inside <reasoning>...</reasoning>, then write the arithmetic as one expression:
<calc>12 * 7 - 5</calc>
The calculator's value comes back inside <result>...</result>. Then think inside
<reasoning>...</reasoning> and give the final answer, just the number, inside <answer>...</answer>."""

# one_shot=True puts this worked example (not among the generated problems) before the problem as
# earlier chat turns, as env_search.ONE_SHOT_EXAMPLE does for search
ONE_SHOT_EXAMPLE = [
    {"role": "user", "content": "A baker bakes 6 trays of 12 rolls and sells 20 rolls. How many rolls are left?"},
    {"role": "assistant", "content": "<reasoning>6 trays of 12 rolls, minus the 20 sold.</reasoning>\n"
                                     "<calc>6 * 12 - 20</calc>"},
    {"role": "user", "content": "<result>52</result>"},
    {"role": "assistant", "content": "<reasoning>The calculator says 52.</reasoning>\n<answer>52</answer>"},
]
STOP_STRINGS = ["</calc>", "</answer>"]
TAGS = rewards.Tags(call="calc")
NO_ACTION = ("Error: no calculation or answer found. Write <calc>expression</calc> or give your final "
             "answer inside <answer>...</answer> tags.")


class CalcEnv:
    """One episode of a problem and its gold answers, as env_search.SearchEnv (messages, completion,
    turns, done, step); the observation of a calculation that ran holds "tool_results": its value."""

    def __init__(self, question, answers, max_turns=2, one_shot=False):
        self.question, self.answers, self.max_turns = question, list(answers), max_turns
        self.messages = ([{"role": "system", "content": SYSTEM_PROMPT}] + (ONE_SHOT_EXAMPLE if one_shot else [])
                         + [{"role": "user", "content": question}])
        self.completion, self.turns, self.done = [], 0, False

    def step(self, turn_text):
        """Record a model turn; return the observation for the next turn, or None when the episode
        is over (an answer, or the turn limit: a calculation in the last turn is not run)."""
        if self.done:
            raise RuntimeError("step() called on a finished episode")
        self.completion.append({"role": "assistant", "content": turn_text})
        self.turns += 1
        if rewards.tag_content(turn_text, "answer") is not None or self.turns >= self.max_turns:
            self.done = True
            return None
        message = self.run_calculator(turn_text) if "<calc>" in turn_text else {"content": NO_ACTION}
        self.completion.append({"role": "user", **message})
        return message["content"]

    @staticmethod
    def run_calculator(turn_text):
        """The observation of the first <calc>...</calc>: its value, or "Error: ..." (one line)."""
        expression = rewards.tag_content(turn_text, "calc")
        try:
            if expression is None:
                raise CalcError("the <calc> tag is not closed with </calc>")
            value = calculate(expression)
        except CalcError as e:
            return {"content": f"Error: {e}"}
        return {"content": f"<result>{show(value)}</result>", "tool_results": str(value)}  # the exact value, for the reward


# ---------------------------------------------------------------- the rewards
def value_is_answer_reward(completion, answers, tags=TAGS):
    """0.5 if the first calculation ran and its exact value (a fraction, not the rounded result the
    model sees) equals a gold answer's, else 0.0."""
    exchanges = rewards.tool_exchanges(completion, tags)
    value = rewards.tool_results(exchanges[0][1]) if exchanges else None
    return 0.5 if value is not None and exact(value) in {exact(a) for a in answers} - {None} else 0.0


def exact(text):
    """The exact value of a number written as text ("79", "2.5", "7/3"), or None."""
    try:
        return Fraction(text.strip())
    except (ValueError, ZeroDivisionError, AttributeError):
        return None


RUBRIC = rewards.Rubric(TAGS, turn={"tool_execution": (rewards.tool_execution_reward, 0.2),
                                    "value_is_answer": (value_is_answer_reward, 0.5)},
                        outcome={"exact_match": (rewards.exact_match_reward, 1.0),
                                 "xml_format": (rewards.xml_format_reward, 0.2),
                                 "xml_tag_usage": (rewards.xml_tag_usage_reward, 0.2)})


# ---------------------------------------------------------------- the task (task.py)
def load(args):
    """No data; TRAIN_N training and TEST_N test problems, no test problem among the training ones."""
    as_item = lambda p: {"question": p["question"], "answers": [p["answer"]]}  # noqa: E731
    train = [as_item(p) for p in make_problems(TRAIN_N, TRAIN_SEED)]
    seen = {q["question"] for q in train}
    return None, train, [as_item(p) for p in make_problems(TEST_N, TEST_SEED) if p["question"] not in seen]


def make_env(item, data, args):
    """A fresh episode of one problem, up to --max-calls + 1 turns."""
    return CalcEnv(item["question"], item["answers"], args.max_calls + 1, one_shot=args.one_shot)


TASK = Task(
    "calc", "tool", "arithmetic word problems with a calculator (MT-GRPO's protocol, another tool)", "question",
    table=(("reward", "total reward (max 2.1)"), ("tool_execution_rate", "calculator ran rate"),
           ("value_is_answer_rate", "value is the answer rate"), ("exact_match_rate", "exact match rate"),
           ("xml_format_rate", "xml format rate (0.4 free)")),
    plot=("tool_execution_rate", "exact_match_rate", "reward"), each="exact_match_each", flags=("max_calls",),
    prefill="<reasoning>", load=load, make_env=make_env, stop_strings=STOP_STRINGS, rubric=RUBRIC,
    pairs=(("mt", "mr"), ("mt", "or"), ("mr", "or")))
