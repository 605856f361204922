"""The coding team (env_code.py, code_problems.py): the problems and their splits, reading the two
roles' answers, the episode's protocol and rewards (PettingLLMs' form), and hostile model-written
code played through the episode: one line in the log and the next prompt, a reward of 0, within
the time limit, and no process left running. The sandbox itself: tests/test_sandbox.py."""
import json
import os
import time
from pathlib import Path

import pytest

import atgrpo
import code_problems
import env_code
from code_problems import FAMILIES, TEST_SEEDS, make_problem
from env_code import FORMAT_PENALTY, CodeTeam, block_in, code_in, same
from test_sandbox import MARK, SLEEP, descendants, sleepers

ROOT = Path(__file__).resolve().parent.parent


def problem_of(family):
    """The first problem (seed 0, 1, ...) of a family."""
    return next(p for p in map(make_problem, range(1000)) if p.family == family)


ADD = problem_of("add_k")  # add_k(x) returns x plus k
K = ADD.hidden_expected[0] - ADD.hidden_inputs[0][0]


def fenced(code):
    return f"```python\n{code}```"


def right(problem=ADD):
    return fenced(problem.golden)


def team(problem=ADD, **kw):
    return CodeTeam(problem, **{"max_turns": 3, "time_limit": 1, **kw})


# ---------------------------------------------------------------- the problems
def test_problems_are_seeded_and_the_splits_never_share_a_problem():
    assert make_problem(5) == make_problem(5)
    train = {(p.family, p.params) for p in map(make_problem, range(400))}
    test = {(p.family, p.params) for p in map(make_problem, range(TEST_SEEDS, TEST_SEEDS + 400))}
    assert train and test and not train & test
    for f in FAMILIES:  # every family has both splits
        assert code_problems.SPLITS[f.name, "train"] and code_problems.SPLITS[f.name, "test"], f.name
    assert {p.family for p in map(make_problem, range(TEST_SEEDS, TEST_SEEDS + 400))} == {f.name for f in FAMILIES}


def test_every_golden_solution_passes_its_own_tests_in_the_sandbox():
    """One problem of each family: its golden solution, run like a model's code (in the sandbox),
    passes its hidden tests, its example and its spare tests."""
    for f in FAMILIES:
        p = problem_of(f.name)
        inputs = [p.example[0], *p.hidden_inputs, *(a for a, _ in p.spare)]
        expected = [p.example[1], *p.hidden_expected, *(e for _, e in p.spare)]
        results, stopped = env_code.run(p.golden, p.name, inputs, env_code.limits(2, 256))
        assert stopped == "" and all(same(r["value"], e) for r, e in zip(results, expected)), (f.name, results)
        assert len({json.dumps(list(a)) for a in inputs}) == len(inputs)  # distinct inputs


def test_the_worker_gets_the_inputs_and_never_the_expected_outputs(monkeypatch):
    sent = []
    real = env_code.sandbox()

    class Recorder:
        def call(self, source, name, calls, limits):
            sent.append((source, name, calls))
            return real.call(source, name, calls, limits)
    monkeypatch.setattr(env_code, "sandbox", lambda: Recorder())
    episode = team()
    episode.act("tester", fenced(f"assert add_k(100) == {100 + K}\n"))
    code = f"def add_k(x):\n    return x + {K}  # recorded\n"
    episode.act("coder", fenced(code))
    assert sent[0] == (ADD.golden, "add_k", [[100]])  # the tester's inputs, to the golden solution
    assert sent[1] == (code, "add_k", [list(a) for a in ADD.hidden_inputs] + [[100]])


# ---------------------------------------------------------------- reading the answers
def test_a_block_is_read_closed_or_left_open_and_its_language_word_dropped():
    assert block_in("```python\ndef f():\n    pass\n```") == "def f():\n    pass\n"
    assert block_in("```python\ndef f():\n    pass") == "def f():\n    pass"  # the turn ran out of tokens
    assert block_in("text\n```\nx = 1\n```\nmore") == "x = 1\n"
    assert block_in("no fence at all") is None


def test_code_is_readable_when_it_parses_and_defines_the_function():
    assert code_in(right(), "add_k") == (ADD.golden, "")
    assert code_in(fenced("def add_k(x)\n    return x\n"), "add_k") == (None, "a syntax error on line 1: expected ':'")
    assert code_in(fenced("def plus(x):\n    return x\n"), "add_k") == (None, "no function add_k")
    assert code_in("def add_k(x): return x", "add_k") == (None, "no code block")


def test_tests_are_literal_asserts_and_repeats_of_the_example_do_not_count():
    example = f"assert add_k({ADD.example[0][0]}) == {ADD.example[1]}"
    text = fenced(f"{example}\nassert add_k(100) == 7\nassert add_k(100) == 8\nassert add_k(__import__('os').getpid()) == 1\n"
                  "assert add_k(1, 2) == 3\nassert add_k(5) == 6\nassert add_k(6) == 7\nprint('hi')\n")
    assert env_code.tests_in(text, ADD) == (env_code.Test((100,), 7), env_code.Test((1, 2), 3), env_code.Test((5,), 6))  # at most MAX_TESTS, first kept
    assert env_code.tests_in(fenced(example + "\n"), ADD) == ()  # readable, nothing new
    assert env_code.tests_in(fenced("print(add_k(3))\n"), ADD) is None and env_code.tests_in("assert add_k(3) == 4", ADD) is None


def test_outputs_compare_as_data_type_and_all():
    assert same([1, "a", None, True], [1, "a", None, True]) and same(0.1 + 0.2, 0.3)
    assert not same(True, 1) and not same(1, True) and not same(3.0, 3) and not same([1], [1, 2]) and not same("1", 1)


# ---------------------------------------------------------------- the episode
def test_the_tester_then_the_coder_and_rewards_in_pettingllms_form():
    episode = team(alpha=0.5)
    assert (episode.roles, episode.next_role, episode.turn, episode.done) == (("tester", "coder"), "tester", 0, False)
    with pytest.raises(ValueError):
        episode.act("coder", right())
    # two tests, one right: the tester's local reward is the golden solution's agreement
    assert episode.act("tester", fenced(f"assert add_k(100) == {100 + K}\nassert add_k(0) == {K + 1}\n")) == 0.5
    assert episode.team_share == 0.0 and episode.next_role == "coder"
    assert "The tester's tests this turn:\nassert add_k(100) ==" in episode.messages("coder")[1]["content"]
    assert episode.act("coder", right()) == 1.5  # (1 + alpha) * pass ratio
    assert episode.team_share == 0.5  # alpha * the team term, which atgrpo adds to the tester's
    assert episode.solved and not episode.done  # the golden solution fails the tester's wrong test
    assert episode.turn == 1 and episode.next_role == "tester"
    shown = episode.messages("tester")[1]["content"]
    assert f"assert add_k(0) == {K + 1}  # it returned {K}" in shown and f"assert add_k(100) == {100 + K}  # passed" in shown
    episode.act("tester", fenced(f"assert add_k(7) == {7 + K}\n"))
    assert episode.act("coder", right()) == 1.5 and episode.done and episode.agreed and episode.turn == 2
    assert episode.metrics() == {"pass_ratio": 1.0, "agreed": 1.0, "unreadable": 0.0, "stopped": 0.0, "test_agreement": 1.0}
    assert episode.log[:2] == ("turn 1 tester: 1 of 2 tests agree with the golden solution: 0.5",
                               "turn 1 coder: passes 6 of 6 hidden tests and 1 of 2 of the turn's: 1.5")
    with pytest.raises(ValueError):
        episode.act("tester", "```python\n```")


def test_wrong_and_unreadable_answers():
    episode = team(max_turns=2)
    assert episode.act("tester", "I cannot write tests") == FORMAT_PENALTY
    assert "The tester's answer had no readable test this turn." in episode.messages("coder")[1]["content"]
    assert episode.act("coder", fenced("def add_k(x):\n    return x\n")) == 0.0 and episode.team_share == 0.0
    assert not episode.done  # no test to pass: the turns go on
    assert episode.act("tester", fenced("assert add_k(1) == 2\n")) == 0.0  # the golden solution disagrees
    assert episode.act("coder", "def add_k(x): return x") == FORMAT_PENALTY
    assert episode.done and not episode.solved and episode.answers == ("def add_k(x): return x", "-")
    assert episode.log[-1] == f"turn 2 coder: no readable function (no code block): {FORMAT_PENALTY:g}"
    assert episode.metrics()["unreadable"] == 2.0


def test_alone_the_coder_tests_its_code_on_the_example():
    episode = team(tester=False)
    assert episode.roles == ("coder",) and "tester" not in episode.messages("coder")[0]["content"]
    assert episode.act("coder", fenced("def add_k(x):\n    return x\n")) == 0.0 and not episode.done
    assert f"On the example:\nassert add_k({ADD.example[0][0]}) == {ADD.example[1]}  # it returned" in \
        episode.messages("coder")[1]["content"]
    assert episode.act("coder", right()) == 2.0 and episode.done and episode.solved and episode.team_share == 0.0
    assert set(episode.metrics()) == {"pass_ratio", "agreed", "unreadable", "stopped"}


def test_copies_are_independent_and_prompts_a_pure_function_of_the_state():
    episode = team()
    episode.act("tester", fenced(f"assert add_k(100) == {100 + K}\n"))
    other = episode.copy()
    assert other.messages("coder") == episode.messages("coder")
    other.act("coder", fenced("def add_k(x):\n    return x\n"))
    assert episode.turn == 0 and episode.next_role == "coder" and episode.history == ()
    again = other.restart()
    assert again.turn == 1 and again.history == () and again.messages("tester") != other.messages("tester")


def test_the_example_answers_take_the_normal_path_to_the_longest_prompt():
    episode = team()
    first = len(episode.messages("tester")[1]["content"])
    assert episode.act("tester", episode.example("tester")) == 1.0  # golden tests: all agree
    assert episode.act("coder", episode.example("coder")) == 0.0 and not episode.done
    assert len(episode.messages("tester")[1]["content"]) > first


def test_tree_sampling_plays_the_team():
    """atgrpo.tree_rollout over the episode: K candidates per (problem, role, turn) on copies, the
    best one continued; the tester's group gets the coder's team term afterwards."""
    texts = {"tester": [fenced("assert add_k(1) == 1\n"), fenced(f"assert add_k(1) == {1 + K}\n")],
             "coder": [fenced("def add_k(x):\n    return 0\n"), right()]}

    def sampler(role, message_lists):
        return [([1], [2], texts[role][i % 2]) for i in range(len(message_lists))]
    groups, final = atgrpo.tree_rollout([team()], [0], sampler, 2)
    assert [(g.key, g.rewards, g.chosen) for g in groups] == [((0, "tester", 1), [0.0 + 1.0, 1.0 + 1.0], 1),
                                                              ((0, "coder", 1), [0.0, 2.0], 1)]
    assert final[0].done and final[0].solved


def test_the_task_entry():
    task = env_code.TASK
    assert (task.name, task.kind, task.roles, task.constant) == ("code", "game", ("tester", "coder"), None)
    assert "\n" not in task.stop_strings and task.prefill == "```python\n"
    assert {o.name for o in task.options} >= {"max_turns", "team_alpha", "single_agent", "code_time_limit", "code_memory"}
    assert task.make_level(TEST_SEEDS + 3).params in code_problems.SPLITS[task.make_level(TEST_SEEDS + 3).family, "test"]


# ---------------------------------------------------------------- hostile code through the episode
HOSTILE = {
    "an endless loop": ("def add_k(x):\n    while True:\n        pass\n", "stopped: did not finish within 1 s"),
    "a fork bomb": ("import os\ndef add_k(x):\n    while True:\n        os.fork()\n", "stopped: the sandbox refused os.fork"),
    "a huge allocation": ("def add_k(x):\n    return len(bytearray(2 ** 40)) + x\n", "(it raised MemoryError)"),
    "a write outside its folder": ("def add_k(x):\n    open('/tmp/code-escaped.txt', 'w').write('x')\n    return x\n",
                                   "stopped: the sandbox refused open /tmp/code-escaped.txt"),
    "reading the hidden tests": (f"import re\ntext = open({str(ROOT / 'code_problems.py')!r}).read()\n"
                                 "def add_k(x):\n    return x\n", "stopped: the sandbox refused open"),
    "a socket": ("import socket\ndef add_k(x):\n    socket.create_connection(('example.com', 80), timeout=1)\n    return x\n",
                 "stopped: the sandbox refused socket"),
    "a print flood": ("def add_k(x):\n    while True:\n        print('x' * 10000)\n", "stopped: printed 1 MiB or more"),
    "os._exit": ("import os\ndef add_k(x):\n    os._exit(0)\n", "stopped: stopped before its checks were done"),
    "a background process": (f"import subprocess\ndef add_k(x):\n    subprocess.Popen([{SLEEP!r}, {MARK!r}])\n"
                             f"    return x + {K}\n", "stopped: the sandbox refused import _posixsubprocess"),
    "right answers after a refusal": (f"def add_k(x):\n    try:\n        open({str(ROOT / 'README.md')!r})\n"
                                      f"    except OSError:\n        pass\n    return x + {K}\n", "stopped: the sandbox refused open"),
}


@pytest.mark.parametrize("what", HOSTILE)
def test_hostile_code_scores_0_with_one_line_and_leaves_nothing_running(what):
    code, said = HOSTILE[what]
    episode = team()
    episode.act("tester", fenced(f"assert add_k(100) == {100 + K}\n"))
    start = time.monotonic()
    reward = episode.act("coder", fenced(code))
    assert time.monotonic() - start < 3  # the 1 s limit, the kill and the reading: never a hang
    assert reward == 0.0 and episode.team_share == 0.0 and not episode.solved
    assert said in episode.log[-1] and episode.log[-1].startswith("turn 1 coder: ")
    prompt = episode.messages("tester")[1]["content"]  # the next role sees it too, in one line
    assert (f"The sandbox stopped it: {said.removeprefix('stopped: ')}" if said.startswith("stopped")
            else f"assert add_k(100) == {100 + K}  # it raised MemoryError") in prompt
    assert len(descendants(env_code.sandbox().helper.process.pid)) == 1  # the helper alone, no worker
    assert sleepers() == [] and not Path("/tmp/code-escaped.txt").exists()
    assert episode.metrics()["stopped"] == float(said.startswith("stopped"))
    assert os.path.isdir(ROOT)  # and the project is where it was
