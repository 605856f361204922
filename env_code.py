"""The AT-GRPO paper's coding team as text ("Stronger Together: On-Policy Reinforcement Learning for
Collaborative LLMs", Zhao et al. 2025, arXiv 2510.11062v1; docs/code.md): a tester writes unit tests
for a small function-writing problem, a coder writes the function, and the code runs in a sandbox
(machinery/sandbox.py), never in this process. Turns go on while the code fails the tester's tests
of its turn, up to max_turns. With single_agent the coder plays alone, the paper's single-agent
baseline, and the example the problem shows is its only test.

    turn 1  tester  ```python                        coder  ```python
                    assert add_k(3) == 10                   def add_k(x):
                    assert add_k(-1) == 6                       return x + 6
                    ```                                     ```     fails both tests: another turn
    turn 2  tester  (sees the code, and what it returned on its tests) ...
            coder   (sees its code and the tester's new tests) ... return x + 7: passes, it ends

Rewards, PettingLLMs' form (pettingllms-ai/PettingLLMs a054fb1, pettingllms/multi_agent_env/code/;
docs/code.md cites the lines): an agent's reward is local + alpha * team, the team term being the
pass ratio of the turn's code on the problem's hidden golden tests. The coder's local term is that
same pass ratio, so it gets (1 + alpha) * pass ratio, as agents/code_agent.py:164. The tester's local
term is the fraction of its tests the golden solution agrees with (agents/unit_test_agent.py:177-200);
its team term comes once the coder has played (team_share, which atgrpo.py adds). The episode is
solved when the last code passes every hidden test (code_agent.py:157).

Ours, not theirs (docs/code.md says why): the problems are seeded templates (code_problems.py), a
function and `assert f(...) == value` tests instead of stdin/stdout programs; the tester acts first
and the coder sees the tester's tests of the same turn; the tester writes up to MAX_TESTS tests a
turn (PettingLLMs: one), and a test that repeats the example's input or another test's counts not;
outputs are compared as data, strictly (True is not 1); a run the sandbox stopped or refused
anything scores 0 on every test; an answer with no readable function or test gets FORMAT_PENALTY
(team 0) and a note to the next role; the prompts show the last turn only.

The golden tests' expected outputs stay in this process: the sandbox's worker gets the inputs and
returns the outputs, which are compared here, and it may not read the project's files (the audit
hook's `hidden`). The episode is the two-role protocol (env_two_roles.py lists it) written
directly. Read top to bottom: the answers, running code, the episode (CodeTeam), the task (TASK).
"""
import ast
import atexit
import copy
import json
from dataclasses import dataclass
from pathlib import Path

import env_two_roles
from code_problems import call_text, make_problem
from machinery.sandbox import Limits, Sandbox, one_line
from task import Option, Task

ROLES = ("tester", "coder")  # the order they act in a turn; --single-agent: the coder alone
FORMAT_PENALTY = -1.0  # no readable function or test: below any run's reward (0 for failing code)
MAX_TESTS = 3  # the tester's tests that count in a turn
PREFILL = "```python\n"  # what starts every model turn: both roles answer with one code block
STOP_STRINGS = ["```"]  # a turn ends where the block closes (a turn is many lines: no stop at "\n")
OUTPUT = 2 ** 20  # bytes one run may print: more is a print loop, and the run scores 0
ROOT = Path(__file__).resolve().parent  # the project's files: hidden from the code it runs
SHOWN = 60  # characters of a value shown in a prompt


# ---------------------------------------------------------------- reading the answers
def block_in(text):
    """The text of the last ``` block of a model's output, its language word ("python") dropped;
    a block left open (the turn ran out of tokens) counts to the end; None without a fence."""
    parts = text.split("```")
    if len(parts) < 2:
        return None
    first, newline, rest = parts[1::2][-1].partition("\n")
    return rest if newline and all(c.isalnum() or c in "_+-" for c in first.strip()) else first + newline + rest


def code_in(text, name):
    """(the code, "") when the output's block is Python that defines function `name`, else
    (None, why it cannot be read)."""
    block = block_in(text)
    if block is None or not block.strip():
        return None, "no code block" if block is None else "an empty code block"
    try:
        tree = ast.parse(block)
    except SyntaxError as error:
        return None, f"a syntax error on line {error.lineno}: {error.msg}"
    except (ValueError, RecursionError, MemoryError):
        return None, "code that Python cannot read"
    if not any(isinstance(node, ast.FunctionDef) and node.name == name for node in tree.body):
        return None, f"no function {name}"
    return block, ""


@dataclass(frozen=True)
class Test:
    """One test: the function's arguments and the expected value, both plain JSON data."""
    arguments: tuple
    expected: object

    def text(self, name):
        return f"assert {call_text(name, self.arguments)} == {shown(self.expected)}"


def read_test(line, name):
    """The Test of one line `assert name(literal, ...) == literal`, else None (no code is run:
    ast.literal_eval reads only literals)."""
    if not line.startswith("assert") or len(line) > 1000:
        return None
    try:
        node = ast.parse(line).body[0]
        test = node.test
        call = test.left
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)
                and isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == name
                and not call.keywords):
            return None
        arguments = plain([ast.literal_eval(a) for a in call.args])
        return Test(tuple(arguments), plain(ast.literal_eval(test.comparators[0])))
    except (SyntaxError, ValueError, TypeError, AttributeError, IndexError, RecursionError, MemoryError):
        return None


def tests_in(text, problem):
    """The tester's tests: up to MAX_TESTS, each with an input neither the example's nor an earlier
    test's; () when every readable test repeats one; None when no line is a readable test."""
    block = block_in(text)
    if block is None:
        return None
    tests, read, seen = [], 0, {json.dumps(list(problem.example[0]))}
    for line in block.splitlines():
        test = read_test(line.strip(), problem.name)
        if test is None:
            continue
        read += 1
        if json.dumps(list(test.arguments)) not in seen and len(tests) < MAX_TESTS:
            seen.add(json.dumps(list(test.arguments)))
            tests.append(test)
    return tuple(tests) if read else None


def plain(value):
    """value as JSON data (tuples become lists); ValueError when it is not (a set, a huge int)."""
    return json.loads(json.dumps(value))


def same(got, expected):
    """Does the value the code returned equal the expected one, type and all (True is not 1, 3.0
    is not 3; floats within 1e-9 relative)? Both are plain JSON data."""
    try:
        if isinstance(expected, list):
            return isinstance(got, list) and len(got) == len(expected) and all(map(same, got, expected))
        if isinstance(expected, dict):
            return isinstance(got, dict) and got.keys() == expected.keys() and all(same(got[k], expected[k]) for k in expected)
        if type(got) is not type(expected):
            return False
        if isinstance(expected, float):
            return got == expected or abs(got - expected) <= 1e-9 * max(1.0, abs(expected))
        return got == expected
    except RecursionError:
        return False


def shown(value):
    """A value as a prompt shows it: Python's repr, cut at SHOWN characters."""
    try:
        text = repr(value)
    except (RecursionError, ValueError):
        text = "…"
    return text if len(text) <= SHOWN else text[:SHOWN] + "…"


# ---------------------------------------------------------------- running code
_sandbox = None  # this process's sandbox: a helper with no network, started at the first run
_runs = {}  # (source, name, inputs, limits) -> (results, stopped): the same code on the same inputs
RUNS_KEPT = 4096  # runs remembered (tree sampling scores many equal candidates)


def limits(seconds, mib):
    """The limits of every run: its time and memory, no process, 1 MiB of output, its own folder,
    the project hidden, no network (machinery/sandbox.py says what each holds, and what not)."""
    return Limits(time=seconds, memory=mib * 2 ** 20, processes=False, output=OUTPUT, own_folder=True,
                  hidden=(str(ROOT),), network=False)


def sandbox():
    """This process's sandbox, started at first use and closed when the process ends."""
    global _sandbox
    if _sandbox is None:
        _sandbox = Sandbox("env_code.py", limits=Limits(network=False), preload=())
        atexit.register(_sandbox.close)
    return _sandbox


def run(source, name, inputs, box_limits):
    """Run `source` in the sandbox and call its function `name` on each argument tuple of inputs:
    (results, stopped). results[i]: {"value": v} or {"error": "..."}; stopped: the line that voids
    the whole run ("did not finish within 2 s (an endless loop?)", "the sandbox refused ..."),
    "" when nothing did. A run the code's text could not even start (a NameError at its top) is
    not stopped: every call then holds that error."""
    key = (source, name, json.dumps([list(a) for a in inputs]), box_limits)
    if key not in _runs:
        results, record = sandbox().call(source, name, [list(a) for a in inputs], box_limits)
        if len(_runs) >= RUNS_KEPT:
            del _runs[next(iter(_runs))]
        _runs[key] = (tuple(results), record.violation())
    return _runs[key]


def outcome(result, expected):
    """(passed, what the prompt says) of one call's result against the expected value."""
    if result is None:
        return False, "it did not get there"
    if "error" in result:  # "raised ...", "returned a value that is not plain data ...", "defines no ..."
        return False, f"it {one_line(result['error'])[:SHOWN + 20]}"
    if same(result["value"], expected):
        return True, "passed"
    return False, f"it returned {shown(result['value'])}"


# ---------------------------------------------------------------- the episode
@dataclass(frozen=True)
class Turn:
    """One completed turn: the tester's tests (None: unreadable, or no tester; (): none new), the
    coder's code (None: unreadable, with why), what the code did on the turn's tests (one line a
    test; alone, on the example), the sandbox's line when it stopped the run, and the hidden
    tests' pass ratio."""
    tests: object
    code: object
    why: str
    checks: tuple
    stopped: str
    passed: float


SHOT = "For a function double(x) that returns x times 2:\n```python\n{}\n```"  # one worked answer
SYSTEM = {
    "tester": "You are the tester of a team of two: you write tests for a Python function, then the coder "
              "writes the function, which must pass them. Write at most 3 tests, one a line, each "
              "`assert name(arguments) == value` with the value worked out from the problem, inside one "
              "```python block. " + SHOT.format("assert double(3) == 6\nassert double(-1) == -2"),
    "coder": "You are the coder of a team of two: the tester writes tests, you write the Python function, "
             "which must pass them. Write only the function, with the standard library alone, inside "
             "one ```python block. " + SHOT.format("def double(x):\n    return x * 2"),
    "alone": "Write the Python function the problem asks for. Write only the function, with the standard "
             "library alone, inside one ```python block. " + SHOT.format("def double(x):\n    return x * 2"),
}


class CodeTeam:
    """One problem played in turns by the tester and the coder (or the coder alone). The episode
    ends when the turn's code passes every test of its turn (at least one; alone: the example), or
    after max_turns turns. act(role, text) returns the agent's reward (module docstring). All
    attributes are immutable and messages(role) is a pure function of them, so copies give
    byte-identical prompts and acting on a copy never changes the original (tree sampling). The
    code runs in the sandbox under limits(time_limit, memory) (seconds, MiB)."""

    ROLES = ROLES
    FORMAT_PENALTY = FORMAT_PENALTY

    def __init__(self, problem, max_turns=3, alpha=1.0, tester=True, time_limit=2.0, memory=256):
        self.problem, self.max_turns, self.alpha = problem, max_turns, alpha
        self.limits = limits(time_limit, memory)
        self.roles = ROLES if tester else ("coder",)
        self.turn = 0
        self.next_role = self.roles[0]
        self.tests = None  # the tester's tests of the turn under way (None: none readable, or none yet)
        self.agreement = 0.0  # the fraction of the tester's last tests the golden solution agrees with
        self.history = ()  # a Turn per completed turn
        self.agreed = False  # the last code passed every test of its turn
        self.answers = ()  # the coder's code of each turn on one line, "-" for an unreadable one
        self.team_share = 0.0  # after a turn: alpha * the code's pass ratio, the tester's too
        self.log = ()  # one line per answer: what it did and earned (for people: no prompt shows it)

    @property
    def done(self):
        return self.agreed or self.turn >= self.max_turns

    @property
    def solved(self):
        """The last code passes every hidden golden test (PettingLLMs: the env's success)."""
        return bool(self.history) and self.history[-1].passed == 1.0

    def copy(self):
        """An independent copy: all attributes are immutable, so a shallow copy is a deep one."""
        return copy.copy(self)

    def restart(self):
        """A copy back at the first state (no test, no code yet) at the same turn and role."""
        again = self.copy()
        again.history, again.tests, again.agreed, again.agreement = (), None, False, 0.0
        return again

    # ------------------------------------------------ what each role sees
    def messages(self, role):
        """The chat messages [system, user] that `role`, who must act next, sees now."""
        self._check(role)
        alone = len(self.roles) == 1
        p = self.problem
        lines = [f"Turn {self.turn + 1} of {self.max_turns}.", p.statement,
                 f"Example: {call_text(p.name, p.example[0])} == {shown(p.example[1])}"]
        if self.history:
            lines += self._last_turn(role, alone)
        if role == "coder" and not alone:
            if self.tests:
                lines += ["The tester's tests this turn:", *(t.text(p.name) for t in self.tests)]
            else:
                lines.append("The tester's answer had no readable test this turn." if self.tests is None else
                             "The tester wrote no new test this turn.")
        lines.append("Your tests:" if role == "tester" else "Your function:")
        return [{"role": "system", "content": SYSTEM["alone" if alone else role]},
                {"role": "user", "content": "\n".join(lines)}]

    def _last_turn(self, role, alone):
        """The last turn as `role` sees it: the code and what it did on that turn's tests."""
        last = self.history[-1]
        whose = "you" if role == "coder" else "the coder"
        if last.code is None:
            return [f"Last turn {whose} wrote no readable function: {last.why}."]
        lines = [f"Last turn {whose} wrote:", "```python", last.code.rstrip("\n"), "```"]
        if last.stopped:
            return lines + [f"The sandbox stopped it: {last.stopped}."]
        if last.checks:
            tests = "the example" if alone else "your tests" if role == "tester" else "the tester's tests"
            lines += [f"On {tests}:", *last.checks]
        return lines

    # ------------------------------------------------ playing
    def act(self, role, text):
        """Play `role`'s output text; return its reward (module docstring)."""
        self._check(role)
        return self._test(text) if role == "tester" else self._code(text)

    def _check(self, role):
        if self.done:
            raise ValueError("the episode is over")
        if role != self.next_role:
            raise ValueError(f"it is the {self.next_role}'s move, not the {role}'s")

    def _test(self, text):
        """The tester: read its tests and run the golden solution on their inputs; its local reward
        (the team term comes as team_share once the coder has played)."""
        p, where = self.problem, f"turn {self.turn + 1} tester"
        self.tests, self.next_role, self.team_share = tests_in(text, p), "coder", 0.0
        if self.tests is None:
            self.agreement = 0.0
            self.log += (f"{where}: no readable test (`assert {p.name}(...) == value` lines): {FORMAT_PENALTY:g}",)
            return FORMAT_PENALTY
        if not self.tests:
            self.agreement = 0.0
            self.log += (f"{where}: no new test (each repeats the example's input or another's): 0",)
            return 0.0
        results, stopped = run(p.golden, p.name, [t.arguments for t in self.tests], self.limits)
        agree = [not stopped and outcome(r, t.expected)[0] for r, t in zip(results, self.tests)]
        self.agreement = sum(agree) / len(agree)
        self.log += (f"{where}: {sum(agree)} of {len(agree)} tests agree with the golden solution"
                     f"{' (' + stopped + ')' if stopped else ''}: {self.agreement:g}",)
        return self.agreement

    def _code(self, text):
        """The coder: run its code on the hidden tests and the turn's tests; end the turn; its reward
        local + alpha * team, both the hidden tests' pass ratio."""
        p, where = self.problem, f"turn {self.turn + 1} coder"
        checks = (self.tests or ()) if len(self.roles) == 2 else (Test(tuple(p.example[0]), p.example[1]),)
        code, why = code_in(text, p.name)
        if code is None:
            turn = Turn(self.tests, None, why, (), "", 0.0)
            self.log += (f"{where}: no readable function ({why}): {FORMAT_PENALTY:g}",)
        else:
            results, stopped = run(code, p.name, [*p.hidden_inputs, *(t.arguments for t in checks)], self.limits)
            hidden, mine = results[:len(p.hidden_inputs)], results[len(p.hidden_inputs):]
            passed = 0.0 if stopped else sum(outcome(r, e)[0] for r, e in zip(hidden, p.hidden_expected)) / len(hidden)
            said = [outcome(r, t.expected) for r, t in zip(mine, checks)]
            turn = Turn(self.tests, code, "", tuple(f"{t.text(p.name)}  # {s}" for t, (_, s) in zip(checks, said)),
                        stopped, passed)
            self.agreed = not stopped and bool(checks) and all(ok for ok, _ in said)
            errors = [r["error"] for r in results if r is not None and "error" in r]
            what = (f"stopped: {stopped}" if stopped else f"passes {round(passed * len(hidden))} of {len(hidden)} "
                    f"hidden tests and {sum(ok for ok, _ in said)} of {len(checks)} of the turn's"
                    + (f" (it {one_line(errors[0])[:SHOWN + 20]})" if errors else ""))
            self.log += (f"{where}: {what}: {passed + self.alpha * passed:g}",)
        self.history += (turn,)
        self.answers += (" ".join(code.split()) if code is not None else "-",)
        self.turn, self.next_role, self.tests = self.turn + 1, self.roles[0], None
        self.team_share = self.alpha * turn.passed if len(self.roles) == 2 else 0.0
        return FORMAT_PENALTY if code is None else turn.passed + self.alpha * turn.passed

    def example(self, role):
        """A well-formed answer `role` could give now, on the normal path: the tester writes golden
        tests none of the prompts shows, the coder a function that returns None (it runs, and fails
        them), so that the episode runs to its longest prompt."""
        self._check(role)
        p = self.problem
        if role == "tester":
            return PREFILL + "\n".join(Test(tuple(a), e).text(p.name) for a, e in p.spare) + "\n```"
        return f"{PREFILL}def {p.signature}:\n    return None\n```"

    def metrics(self):
        """This episode's numbers (the evaluation averages them): pass_ratio (the last code's on
        the hidden tests), agreed (it ended with the code passing its turn's tests), unreadable
        (answers with no readable function or test), stopped (runs the sandbox stopped or
        refused); with the tester, test_agreement (its last tests' agreement with the golden
        solution)."""
        log = {"pass_ratio": self.history[-1].passed if self.history else 0.0, "agreed": float(self.agreed),
               "unreadable": float(sum(t.code is None for t in self.history)
                                   + sum(t.tests is None for t in self.history if len(self.roles) == 2)),
               "stopped": float(sum(bool(t.stopped) for t in self.history))}
        if len(self.roles) == 2:
            log["test_agreement"] = self.agreement
        return log


# ---------------------------------------------------------------- problems and episodes from the flags
OPTIONS = (*env_two_roles.TEAM_OPTIONS,
           Option("code_time_limit", float, 2.0, "seconds one piece of model-written code may run, all its tests "
                  "together, before the sandbox stops it (a stopped run scores 0)", lambda v: v > 0, "above 0"),
           Option("code_memory", int, 256, "MiB of memory one piece of model-written code may add (more: "
                  "MemoryError)", lambda v: v >= 16, "at least 16"))


def make_level(seed, args=None):
    """The problem of `seed` (seeds below 10**9 train, from 10**9 on test); no flag changes it."""
    return make_problem(seed)


def make_tasks(seeds, args, levels=None):
    """One CodeTeam per seed (or per problem given), with the flags: turns, alpha, alone, limits."""
    levels = levels or [make_level(s, args) for s in seeds]
    return [CodeTeam(p, args.max_turns, args.team_alpha, not args.single_agent, args.code_time_limit,
                     args.code_memory) for p in levels]


TABLE = (("success", "success (all hidden tests pass)"), ("pass_ratio", "hidden tests passed"),
         ("test_agreement", "tests the golden code agrees with"),
         ("board_ablation_success", "success, another problem's prompt"), ("distinct_answers", "distinct codes"),
         ("reward_tester", "tester reward"), ("reward_coder", "coder reward"), ("stopped", "runs stopped by the sandbox"))
PLOT = ("success", "pass_ratio", "board_ablation_success")
# a 135M model on 2 CPU cores: a function or three tests fit in 96 new tokens
DEFAULTS = {"steps": 30, "batch_size": 4, "num_generations": 4, "max_completion_length": 96, "max_turns": 2,
            "scale_rewards": "batch", "micro_batch_size": 16, "eval_every": 10, "save_every": 10}

TASK = Task("code", "game", "coding: a tester writes unit tests, a coder the function, run in a sandbox "
            "(AT-GRPO paper)", "level", table=TABLE, plot=PLOT, each="success_each", defaults=DEFAULTS,
            options=OPTIONS, progress=("success", "pass_ratio", "reward_coder"), prefill=PREFILL,
            stop_strings=STOP_STRINGS, roles=ROLES, shorter="use a model with a longer context",
            make_level=make_level, make_tasks=make_tasks, constant=None)
