"""The AT-GRPO paper's math team as text ("Stronger Together: On-Policy Reinforcement Learning for
Collaborative LLMs", Zhao et al. 2025, arXiv 2510.11062v1; docs/math.md): a tool agent writes a
calculation, which runs on this project's exact calculator (env_calc.calculate, never Python), and a
reasoning agent, who sees the calculator's result, gives the team's answer. Turns go on while the
two disagree (the reasoner's answer is not the calculator's value), up to max_turns. With
single_agent the reasoner plays alone: the paper's single-agent baseline.

    turn 1  tool      <answer>3 * 12 - 5</answer>        the calculator gives 31
            reasoner  <answer>30</answer>                 30 is not 31: another turn
    turn 2  tool      <answer>3 * 12 - 5</answer>        31
            reasoner  <answer>31</answer>                 they agree: the episode is over

Rewards, PettingLLMs' form (pettingllms-ai/PettingLLMs, multi_agent_env/math/agents/, as at a054fb1;
docs/math.md cites the lines and what 2e3c5f2, released with the paper, did before): an agent's
reward is local + alpha * team, the team term being "the reasoner's answer is the gold answer". The
tool agent's local reward is +1 when its calculation's value is the gold answer, 0 when it is
another value and -1 when it does not run (a parse error, a division by zero); its team term comes
once the reasoner has answered (team_share, which atgrpo.py adds). The reasoner's local and team
terms are both its correctness: it gets (1 + alpha) * correct. Ours, not theirs (docs/math.md):
the calculator instead of Python; both roles answer one line inside answer tags; an answer without
a readable calculation or number gets FORMAT_PENALTY (below every other reward, team term 0) and a
note to the next role; the reasoner sees the tool's result of the same turn from the first turn on;
the prompts show earlier turns' calculations, results and answers, not the full texts.

The problems are generated offline from a seed (as env_calc.make_problems): multi-step word
problems from templates of 2 or 3 operations, whose answers are exact integers or fractions (the
calculator's value of the template's expression). Seeds below 10**9 are the training split, seeds
from 10**9 on the test split.

The episode is the two-role protocol (atgrpo.py, evaluate_games.py) written directly: it is not the
planner/executor workflow of env_two_roles.TwoRoleTask. Read top to bottom: the problems, reading
the model's answers, the episode (MathTeam), the task (TASK).
"""
import copy
import random
import re
from dataclasses import dataclass
from fractions import Fraction

import env_two_roles
from env_calc import MAX_LENGTH, NAMES, CalcError, calculate
from env_two_roles import answer_in
from task import Task

ROLES = ("tool", "reasoner")  # the order they act in a turn (PettingLLMs' turn_order: tool first)
FORMAT_PENALTY = -2.0  # no readable calculation or number: below a failed calculation's -1
TOOL_FAILED = -1.0  # a calculation that does not run (PettingLLMs: code that raises)


# ---------------------------------------------------------------- the problems
# (text with {a} {b} {c} {d} and {name}, its expression, the range of each number, whole: must the
# answer be a whole number). The ranges keep every partial result at 0 or above.
TEMPLATES = (
    ("{name} buys {a} boxes of {b} pencils and gives away {c} pencils. How many pencils are left?",
     "{a} * {b} - {c}", {"a": (3, 12), "b": (4, 20), "c": (1, 11)}, True),
    ("A bus leaves with {a} people. At the first stop {b} get off and {c} get on; at the second stop "
     "{d} get off. How many people are on the bus now?",
     "{a} - {b} + {c} - {d}", {"a": (20, 60), "b": (1, 19), "c": (1, 30), "d": (1, 20)}, True),
    ("{name} has {a} euros, buys {b} books at {c} euros each, then earns {d} euros. How many euros "
     "does {name} have now?",
     "{a} - {b} * {c} + {d}", {"a": (100, 300), "b": (2, 6), "c": (3, 15), "d": (5, 80)}, True),
    ("{name} eats {c} of {a} sweets and shares the rest equally among {b} friends. How many sweets "
     "does each friend get?",
     "({a} - {c}) / {b}", {"a": (20, 120), "b": (2, 9), "c": (1, 9)}, True),
    ("A recipe needs {a} cups of flour for {b} cakes. How many cups of flour do {c} cakes need?",
     "{a} / {b} * {c}", {"a": (2, 12), "b": (2, 8), "c": (3, 20)}, False),
    ("A tank holds {a} litres. {name} pours out {b} litres, then fills {c} bottles of {d} litres from "
     "it. How many litres are left in the tank?",
     "{a} - {b} - {c} * {d}", {"a": (150, 500), "b": (5, 50), "c": (2, 9), "d": (2, 10)}, True),
    ("A rope {a} metres long is cut into {b} equal pieces, and {name} uses {c} of them. How many "
     "metres of rope does {name} use?",
     "{a} / {b} * {c}", {"a": (6, 40), "b": (3, 8), "c": (2, 3)}, False),
    ("A train goes {a} km an hour for {b} hours, then {c} km an hour for {d} hours. How many km does "
     "it go in all?",
     "{a} * {b} + {c} * {d}", {"a": (40, 120), "b": (2, 6), "c": (30, 90), "d": (2, 5)}, True),
)
MAX_DENOMINATOR = 8  # a fraction answer is at most eighths ("7/2", "15/4")
TEST_SEEDS = 10 ** 9  # seeds from here on are the test split (the games' convention)


@dataclass(frozen=True)
class Problem:
    """One word problem: its seed, template (an index into TEMPLATES), numbers ((name, value) pairs),
    the text the model reads, the expression that solves it and its exact answer."""
    seed: int
    template: int
    numbers: tuple
    question: str
    expression: str
    answer: Fraction


def make_problem(seed):
    """The problem of `seed`, the same for the same seed: a template drawn by the seed, its numbers
    drawn again until the answer is at least 1 and whole (or, where the template allows a
    fraction, at most eighths). The answer is env_calc.calculate of the expression."""
    rng = random.Random(seed)
    index = rng.randrange(len(TEMPLATES))
    text, form, ranges, whole = TEMPLATES[index]
    name = rng.choice(NAMES)
    while True:
        numbers = {k: rng.randint(*r) for k, r in ranges.items()}
        expression = form.format(**numbers)
        answer = calculate(expression)
        if answer >= 1 and answer.denominator <= (1 if whole else MAX_DENOMINATOR):
            return Problem(seed, index, tuple(sorted(numbers.items())), text.format(name=name, **numbers),
                           expression, answer)


def exact(value):
    """A value as the prompts show it, exactly: "31", "-4", "15/4"."""
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


# ---------------------------------------------------------------- the model's answers
# Both roles answer inside <answer>...</answer> (env_two_roles.answer_in reads the last one; one left
# open counts to the end of its line): every model turn starts with the same prefill, "<answer>".
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:/\d+)?")  # 31, -4, 3.75, 15/4 (spaces removed first)


def read_number(answer):
    """The exact value of a reasoner's answer ("31", "3.75", "15/4", "1,200"; spaces and a final
    period ignored), or None when it is not one number (words, an expression, "5/0")."""
    if answer is None:
        return None
    text = re.sub(r"(?<=\d),(?=\d{3})", "", "".join(answer.split())).rstrip(".")
    if not NUMBER.fullmatch(text):
        return None
    try:
        return calculate(text)
    except CalcError:  # 5/0, or a number beyond the calculator's limit
        return None


@dataclass(frozen=True)
class Calc:
    """What the tool agent's answer gave: its expression (None: no readable calculation), the value
    (None: it did not run) and the line the reasoner reads."""
    expression: object
    value: object
    shown: str


def run_calculation(text):
    """The tool agent's answer as a Calc, and its local reward before the gold answer is known:
    None (it ran), TOOL_FAILED or FORMAT_PENALTY."""
    answer = answer_in(text)
    expression = " ".join(answer.split()) if answer is not None else ""
    if not expression:
        return Calc(None, None, "the tool agent's answer had no calculation inside answer tags"), FORMAT_PENALTY
    try:
        value = calculate(expression)
    except CalcError as e:
        if len(expression) > MAX_LENGTH:  # shown cut: a prompt holds no more than the calculator reads
            expression = expression[:MAX_LENGTH] + "..."
        return Calc(expression, None, f"the tool agent wrote {expression}; the calculator says: Error: {e}"), TOOL_FAILED
    return Calc(expression, value, f"the tool agent wrote {expression}; the calculator gives {exact(value)}"), None


NOT_YET = Calc(None, None, "the tool agent has not calculated yet")  # restart() in the middle of a turn


# ---------------------------------------------------------------- the episode
SYSTEM = {  # the two examples give different values: copying both is no agreement
    "tool": ("You are the tool agent of a team of two solving a math word problem. Write the arithmetic "
             "that solves it as one expression for a calculator: numbers, + - * / and parentheses. The "
             "reasoning agent sees the calculator's result and gives the team's answer; while the answer "
             "and the result differ, the team tries again.\n"
             "Answer with the expression inside answer tags, for example <answer>(12 + 3) * 4</answer>."),
    "reasoner": ("You are the reasoning agent of a team of two solving a math word problem. The tool "
                 "agent writes a calculation and you see the calculator's result. Give the team's "
                 "answer; while your answer and the result differ, the team tries again.\n"
                 "Answer with just the number inside answer tags, a whole number or a fraction such as "
                 "7/2, for example <answer>42</answer>."),
    "alone": ("Solve the math word problem.\n"
              "Answer with just the number inside answer tags, a whole number or a fraction such as "
              "7/2, for example <answer>42</answer>."),
}


@dataclass(frozen=True)
class Exchange:
    """One completed turn: the tool's Calc (None when the reasoner plays alone) and the reasoner's
    answer as the prompts show it ("31", or None when unreadable)."""
    calc: object
    answer: object


class MathTeam:
    """One problem played in turns by the tool agent and the reasoner (or the reasoner alone). The
    episode ends when the reasoner's answer equals the value of the tool's calculation of the same
    turn, or after max_turns turns (alone: always max_turns, as PettingLLMs' single agent, which
    has no calculation to agree with). act(role, text) returns the agent's reward (module
    docstring). All attributes are immutable and messages(role) is a pure function of them, so
    copies give byte-identical prompts and acting on a copy never changes the original."""

    ROLES = ROLES
    FORMAT_PENALTY = FORMAT_PENALTY

    def __init__(self, problem, max_turns=3, alpha=1.0, tool=True):
        self.problem, self.max_turns, self.alpha = problem, max_turns, alpha
        self.roles = ROLES if tool else ("reasoner",)
        self.turn = 0
        self.next_role = self.roles[0]
        self.history = ()  # an Exchange per completed turn
        self.calc = None  # the tool's Calc of the turn under way
        self.last = None  # the reasoner's last answer, a Fraction (None: unreadable, or none yet)
        self.agreed = False  # the reasoner's answer was the calculator's value
        self.answers = ()  # the reasoner's answer of each turn, "-" for an unreadable one
        self.team_share = 0.0  # after a turn: alpha * team, the tool's too (atgrpo adds it)

    @property
    def done(self):
        return self.agreed or self.turn >= self.max_turns

    @property
    def solved(self):
        """The reasoner's last answer is the gold answer (PettingLLMs: the env's success)."""
        return self.last is not None and self.last == self.problem.answer

    def copy(self):
        """An independent copy: all attributes are immutable, so a shallow copy is a deep one."""
        return copy.copy(self)

    def restart(self):
        """A copy back at the first state (no calculation, no answer yet) at the same turn and role."""
        again = self.copy()
        again.history, again.last, again.agreed = (), None, False
        again.calc = NOT_YET if self.calc is not None else None
        return again

    def messages(self, role):
        """The chat messages [system, user] that `role`, who must act next, sees now."""
        self._check(role)
        lines = [f"Problem: {self.problem.question}"]
        for turn, exchange in enumerate(self.history, 1):
            lines.append(f"Turn {turn}: {self._line(exchange)}.")
        now = f"Turn {self.turn + 1} of {self.max_turns}"
        lines.append(f"{now}: {self.calc.shown}." if role == "reasoner" and self.calc else f"{now}.")
        system = SYSTEM[role if len(self.roles) == 2 else "alone"]
        return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(lines)}]

    def _line(self, exchange):
        """One completed turn as the prompts show it."""
        if len(self.roles) == 1:
            return (f"you answered {exchange.answer}" if exchange.answer is not None else
                    "your answer had no readable number")
        said = (f"the reasoning agent answered {exchange.answer}" if exchange.answer is not None else
                "the reasoning agent's answer had no readable number")
        return f"{exchange.calc.shown}; {said}"

    def act(self, role, text):
        """Play `role`'s output text; return its reward (module docstring)."""
        self._check(role)
        return self._calculate(text) if role == "tool" else self._answer(text)

    def _check(self, role):
        if self.done:
            raise ValueError("the episode is over")
        if role != self.next_role:
            raise ValueError(f"it is the {self.next_role}'s move, not the {role}'s")

    def _calculate(self, text):
        """The tool agent: run its calculation; its local reward (the team term comes as team_share)."""
        self.calc, failed = run_calculation(text)
        self.next_role, self.team_share = "reasoner", 0.0
        if failed is not None:
            return failed
        return 1.0 if self.calc.value == self.problem.answer else 0.0

    def _answer(self, text):
        """The reasoner: answer, end the turn; its reward local + alpha * team, both its correctness."""
        value = read_number(answer_in(text))
        self.last = value
        self.agreed = value is not None and self.calc is not None and self.calc.value == value
        self.history += (Exchange(self.calc, exact(value) if value is not None else None),)
        self.answers += (exact(value) if value is not None else "-",)
        self.calc, self.turn, self.next_role = None, self.turn + 1, self.roles[0]
        correct = float(self.solved)
        self.team_share = self.alpha * correct if len(self.roles) == 2 else 0.0
        if value is None:
            return FORMAT_PENALTY
        return correct + self.alpha * correct

    def example(self, role):
        """A well-formed answer `role` could give now, on the normal path: the tool writes the
        problem's expression, the reasoner answers one more than the calculator's value (or than
        the gold answer), so that the episode runs to its longest prompt."""
        self._check(role)
        if role == "tool":
            return f"<answer>{self.problem.expression}</answer>"
        value = self.calc.value if self.calc is not None and self.calc.value is not None else self.problem.answer
        return f"<answer>{exact(value + 1)}</answer>"

    def metrics(self):
        """This episode's numbers (the evaluation averages them): agreed (it ended with the two
        agreeing), unreadable (answers without a readable calculation or number); with the tool,
        tool_ran (its calculations that ran, a fraction) and tool_correct (its last value is the
        gold answer)."""
        calcs = [e.calc for e in self.history if e.calc not in (None, NOT_YET)]
        log = {"agreed": float(self.agreed),
               "unreadable": float(sum(e.answer is None for e in self.history)
                                   + sum(c.expression is None for c in calcs))}
        if len(self.roles) == 2:  # the same keys in every episode of a run
            log["tool_ran"] = sum(c.value is not None for c in calcs) / len(calcs) if calcs else 0.0
            log["tool_correct"] = float(bool(calcs) and calcs[-1].value == self.problem.answer)
        return log


# ---------------------------------------------------------------- problems and episodes from the flags
def make_level(seed, args=None):
    """The problem of `seed` (seeds below TEST_SEEDS train, from it on test); no flag changes it."""
    return make_problem(seed)


def make_tasks(seeds, args, levels=None):
    """One MathTeam per seed (or per problem given), with the two-role flags: turns, alpha, alone."""
    levels = levels or [make_level(s, args) for s in seeds]
    return [MathTeam(p, args.max_turns, args.team_alpha, not args.single_agent) for p in levels]


TABLE = (("success", "success rate"), ("board_ablation_success", "success, another problem (rate)"),
         ("agreed", "agreement rate"), ("tool_correct", "tool's value right rate"), ("tool_ran", "calculations that ran"),
         ("distinct_answers", "distinct answer sequences"), ("reward_tool", "tool reward"),
         ("reward_reasoner", "reasoner reward"))
# short answers (an expression: at most 17 tokens of the bundled tokenizer, </answer> included), 3 turns
DEFAULTS = {**env_two_roles.DEFAULTS, "steps": 30, "batch_size": 4, "max_completion_length": 24, "max_turns": 3}

TASK = Task("math", "game", "math word problems, tool agent + reasoning agent (AT-GRPO paper)", "level",
            table=TABLE, plot=("success", "board_ablation_success", "agreed"), each="success_each",
            defaults=DEFAULTS, options=env_two_roles.TEAM_OPTIONS, progress=("success", "reward_reasoner", "agreed"),
            prefill="<answer>", stop_strings=env_two_roles.STOP_STRINGS, roles=ROLES,
            make_level=make_level, make_tasks=make_tasks, constant=None)
