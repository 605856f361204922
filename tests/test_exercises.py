"""The exercises' checker (exercises/check.py, grade.py and sandbox.py): it passes the project's own
functions, fails the untouched stubs, passes a correct student answer and fails plausible wrong
ones; and no student file (an exit, an endless loop in C, a thread or a fork left running, an edit
of the checker, an exception that cannot be printed) makes it pass, hang or stop before the next
exercise.

A wrong answer is a correct answer below with one mistake a student could make (a text
replacement), written to a temporary ex*.py file and loaded the way grade.py loads a student's.
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "exercises"))  # the checker's files import each other by name
import cases  # noqa: E402
import check  # noqa: E402
import grade  # noqa: E402
import handout  # noqa: E402
import key  # noqa: E402
import quiz  # noqa: E402
import sandbox  # noqa: E402

RIGHT = {
    1: """
        import torch

        def group_norm(r):
            if r.shape[1] < 2:
                return torch.zeros_like(r)
            std = r.std(1, keepdim=True)
            out = (r - r.mean(1, keepdim=True)) / (std + 1e-4)
            return torch.where(std > 0, out, torch.zeros_like(r))
        """,
    2: """
        import torch
        from ex1_group_norm import group_norm

        def turn_advantages(turn_rewards, outcome_rewards, algo, alpha=1.0):
            K = turn_rewards.shape[2] + 1
            if algo == "or":
                return group_norm(outcome_rewards)[..., None].repeat(1, 1, K)
            if algo == "mr":
                return group_norm(turn_rewards.sum(2) + outcome_rewards)[..., None].repeat(1, 1, K)
            adv = torch.zeros(*outcome_rewards.shape, K, dtype=torch.float64)
            for k in range(1, K + 1):
                adv[..., k - 1] = alpha ** (K - k) * group_norm(outcome_rewards)
                for l in range(k, K):
                    adv[..., k - 1] += alpha ** (l - k) * group_norm(turn_rewards[..., l - 1])
            return adv
        """,
    3: """
        def token_advantages(turn_of_token, turn_adv):
            adv = [float(turn_adv[k - 1]) if k > 0 else 0.0 for k in turn_of_token]
            mask = [1 if k > 0 else 0 for k in turn_of_token]
            return adv, mask
        """,
    4: """
        import torch

        def k3_kl(logp, ref_logp):
            d = ref_logp - logp
            return torch.exp(d) - d - 1

        def grpo_loss(logp, old_logp, ref_logp, adv, mask, beta, eps_low, eps_high, loss_type="token"):
            r = torch.exp(logp - old_logp)
            obj = torch.minimum(r * adv, torch.clamp(r, 1 - eps_low, 1 + eps_high) * adv)
            obj = obj - beta * k3_kl(logp, ref_logp)
            if loss_type == "token":
                return -(obj * mask).sum() / mask.sum()
            return -((obj * mask).sum(1) / mask.sum(1).clamp(min=1)).mean()
        """,
    5: """
        def tree_step(env, env_id, role, candidates):
            branches = [env.copy() for _ in candidates]
            rewards = [b.act(role, text) for b, (_, _, text) in zip(branches, candidates)]
            chosen = max(range(len(rewards)), key=lambda k: (rewards[k], -k))
            return (env_id, role, env.turn + 1), rewards, chosen, branches[chosen]
        """,
    6: """
        import re

        def exact_match_reward(completion, answers):
            for m in reversed(completion):
                if m["role"] != "assistant":
                    continue
                found = re.search(r"<answer>(.*?)</answer>", m["content"], re.DOTALL)
                if found:
                    a = found.group(1).strip().lower()
                    return 1.0 if a and any(a == x.lower().strip() for x in answers) else 0.0
            return 0.0
        """,
    7: """
        import math

        def bm25_scores(query_terms, doc_terms, k1=1.5, b=0.75):
            N = len(doc_terms)
            avgdl = sum(map(len, doc_terms)) / N
            scores = []
            for d in doc_terms:
                s = 0.0
                for t in set(query_terms):
                    n = sum(t in dd for dd in doc_terms)
                    tf = d.count(t)
                    idf = math.log(1 + (N - n + 0.5) / (n + 0.5))
                    s += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(d) / avgdl))
                scores.append(s)
            return scores
        """,
}

# (exercise, mistake, [(text in the right answer, replacement), ...])
WRONG = [
    (1, "biased std", [("r.std(1, keepdim=True)", "r.std(1, keepdim=True, unbiased=False)")]),
    (1, "no eps", [("(std + 1e-4)", "std")]),
    (1, "no guard: NaN for one sample",
     [("torch.where(std > 0, out, torch.zeros_like(r))", "out"), ("if r.shape[1] < 2:", "if False:")]),
    (1, "no eps, no guard: NaN on equal rewards",
     [("(std + 1e-4)", "std"), ("torch.where(std > 0, out, torch.zeros_like(r))", "out")]),
    (1, "eps inside the square root",
     [("r.std(1, keepdim=True)", "(r.var(1, keepdim=True) + 1e-4).sqrt()"), ("(std + 1e-4)", "std")]),
    (1, "mean and std of the whole batch",
     [("r.std(1, keepdim=True)", "r.std()"), ("r.mean(1, keepdim=True)", "r.mean()")]),
    (2, "MR from the outcome only",
     [("group_norm(turn_rewards.sum(2) + outcome_rewards)", "group_norm(outcome_rewards)")]),
    (2, "0-based exponent of the outcome", [("alpha ** (K - k)", "alpha ** (K - 1 - k)")]),
    (2, "0-based exponent of the turn rewards", [("alpha ** (l - k)", "alpha ** (l - k + 1)")]),
    (2, "turn k misses its own turn reward", [("range(k, K)", "range(k + 1, K)")]),
    (2, "MT gives every turn the outcome only", [("for l in range(k, K):", "for l in []:")]),
    (3, "environment tokens with mask 1",
     [("mask = [1 if k > 0 else 0 for k in turn_of_token]",
       "first = next((t for t, k in enumerate(turn_of_token) if k > 0), len(turn_of_token))\n"
       "    mask = [int(t >= first) for t in range(len(turn_of_token))]")]),
    (3, "turn index off by one", [("turn_adv[k - 1]", "turn_adv[k]")]),
    (3, "turn index off by one, wrapping", [("turn_adv[k - 1]", "turn_adv[k - 2]")]),
    (3, "mask from the advantage",
     [("mask = [1 if k > 0 else 0 for k in turn_of_token]", "mask = [int(a != 0) for a in adv]")]),
    (4, "sign flip", [("return -(obj * mask).sum()", "return (obj * mask).sum()")]),
    (4, "loss on masked tokens (mean over all tokens)", [("-(obj * mask).sum() / mask.sum()", "-obj.mean()")]),
    (4, "divided by all tokens", [("/ mask.sum()", "/ mask.numel()")]),
    (4, "token: the mean of the rows' means", [("-(obj * mask).sum() / mask.sum()", "-((obj * mask).sum(1) / mask.sum(1)).mean()")]),
    (4, "seq: the token mean", [("-((obj * mask).sum(1) / mask.sum(1).clamp(min=1)).mean()",
                                 "-(obj * mask).sum() / mask.sum()")]),
    (4, "loss_type ignored (always the token mean)", [('if loss_type == "token":', "if True:")]),
    (4, "seq: a fully masked row left out of G",
     [(".clamp(min=1)).mean()", ".clamp(min=1)).sum() / (mask.sum(1) > 0).sum()")]),
    (4, "seq: 0 / 0 on a fully masked row", [(".clamp(min=1)", "")]),
    (4, "seq: each row divided by T", [("mask.sum(1).clamp(min=1)", "mask.shape[1]")]),
    (4, "clip with max instead of min", [("torch.minimum", "torch.maximum")]),
    (4, "clip without the min",
     [("torch.minimum(r * adv, torch.clamp(r, 1 - eps_low, 1 + eps_high) * adv)",
       "torch.clamp(r, 1 - eps_low, 1 + eps_high) * adv")]),
    (4, "eps_low and eps_high swapped", [("1 - eps_low, 1 + eps_high", "1 - eps_high, 1 + eps_low")]),
    (4, "KL without the -1", [("torch.exp(d) - d - 1", "torch.exp(d) - d")]),
    (4, "KL with the wrong sign", [("obj - beta * k3_kl", "obj + beta * k3_kl")]),
    (4, "ratio detached: no gradient", [("r = torch.exp(logp - old_logp)", "r = torch.exp(logp - old_logp).detach()")]),
    (5, "ties to the highest index", [("(rewards[k], -k)", "(rewards[k], k)")]),
    (5, "acting on the original env",
     [("return (env_id, role, env.turn + 1), rewards, chosen, branches[chosen]",
       "key = (env_id, role, env.turn + 1)\n"
       "    env.act(role, candidates[chosen][2])\n"
       "    return key, rewards, chosen, env")]),
    (5, "key with the 0-based turn", [("env.turn + 1", "env.turn")]),
    (5, "one copy shared by all candidates",
     [("branches = [env.copy() for _ in candidates]",
       "shared = env.copy()\n    branches = [shared for _ in candidates]")]),
    (5, "branch from the last candidate", [("branches[chosen]", "branches[-1]")]),
    (6, "substring instead of equality", [("a == x.lower().strip()", "x.lower().strip() in a")]),
    (6, "case-sensitive", [(".strip().lower()", ".strip()"), ("x.lower().strip()", "x.strip()")]),
    (6, "first answer instead of the last", [("reversed(completion)", "completion")]),
    (6, "tool results count as answers", [('if m["role"] != "assistant":', "if False:")]),
    (6, "blank answer matches a blank alias", [("1.0 if a and any(", "1.0 if any(")]),
    (6, "answer on one line only (no re.DOTALL)", [(", re.DOTALL", "")]),
    (7, "repeated query terms counted twice", [("set(query_terms)", "query_terms")]),
    (7, "idf without the 1 +", [("math.log(1 + (N - n + 0.5)", "math.log((N - n + 0.5)")]),
    (7, "no length normalisation", [("b * len(d) / avgdl", "b")]),
    (7, "n(t) counts occurrences", [("sum(t in dd for dd in doc_terms)", "sum(dd.count(t) for dd in doc_terms)")]),
]


def write_answers(folder, answers):
    for n, source in answers.items():
        (folder / cases.EXERCISES[n][1]).write_text(textwrap.dedent(source))
    return folder


@pytest.fixture(scope="module")
def right_folder(tmp_path_factory):
    return write_answers(tmp_path_factory.mktemp("right"), RIGHT)


def test_solutions_pass(capsys):
    assert check.main(["--solutions"]) == 0, capsys.readouterr().out
    assert "7/7 passed" in capsys.readouterr().out


def test_untouched_stubs_fail(capsys):
    assert check.main([]) == 1
    out = capsys.readouterr().out
    assert out.count("failed: not implemented yet") == 7 and "0/7 passed" in out
    assert check.main(["3"]) == 1 and "0/1 passed" in capsys.readouterr().out


def test_right_answers_pass(right_folder, capsys):
    assert check.main(["--dir", str(right_folder)]) == 0, capsys.readouterr().out


@pytest.mark.parametrize("n, mistake, edits", WRONG, ids=[f"{n}-{m}" for n, m, _ in WRONG])
def test_wrong_answer_fails(n, mistake, edits, right_folder, tmp_path):
    source = textwrap.dedent(RIGHT[n])
    for old, new in edits:
        assert old in source, f"the edit {old!r} does not apply"
        source = source.replace(old, new)
    write_answers(tmp_path, {**RIGHT, n: source})
    passed, failure = check.run_check(n, *grade.student_functions(n, tmp_path))
    assert not passed and failure and "not implemented" not in failure


def test_every_exercise_has_a_wrong_answer():
    assert {n for n, _, _ in WRONG} == set(cases.EXERCISES)


def test_a_failure_shows_the_cases_input_what_was_expected_and_what_came_back():
    passed, failure = check.run_check(1, lambda r: r - r.mean(1, keepdim=True) / 0.0)
    assert not passed and failure == ("two samples\n"
                                      "input:    rewards=[[1.0, 3.0]]\n"
                                      "expected: [[-0.707057, 0.707057]]\n"
                                      "got:      [[-inf, -inf]]")


def test_a_failing_loss_case_shows_every_argument_with_its_default():
    def k3_kl(logp, ref_logp):
        return torch.exp(ref_logp - logp) - (ref_logp - logp) - 1

    passed, failure = check.run_check(4, k3_kl, lambda *arguments: torch.tensor(0.0))
    assert not passed and failure.split("\n") == [
        "ratio 1, beta 0",
        "input:    logp=[[0.0, 0.0]], old_logp=0.0, ref_logp=0.0, adv=[[1.0, -0.5]], mask=[[1, 1]], "
        "beta=0.0, eps_low=0.2, eps_high=0.2, loss_type='token'",
        "expected: -0.25",
        "got:      0.0"]


def wrong_answer(n, mistake):
    """RIGHT[n] with the edits of WRONG's `mistake`."""
    source = textwrap.dedent(RIGHT[n])
    for old, new in next(edits for m, name, edits in WRONG if (m, name) == (n, mistake)):
        source = source.replace(old, new)
    return source


@pytest.mark.parametrize("mistake, lines", [
    # DeepSeekMath eq. 3 as printed, asked for the token mean
    ("token: the mean of the rows' means",
     ["batch of two rows, token", "expected: -2.0", "got:      -2.25",
      "note: this is the per-sequence mean of eq. 3 (each row's token mean, then the mean over rows); "
      "loss_type='token' asks for the token mean over all trained tokens"]),
    ("seq: the token mean",
     ["batch of two rows, seq", "expected: -2.25", "got:      -2.0",
      "note: this is the token mean over all trained tokens; loss_type='seq' asks for the per-sequence "
      "mean of eq. 3 (each row's token mean, then the mean over rows)"]),
    ("seq: a fully masked row left out of G",
     ["a fully masked row, seq", "expected: -1.66667", "got:      -2.5",
      "note: a row with no trained token still counts in G: it adds 0 to the sum and 1 to G"]),
    ("seq: 0 / 0 on a fully masked row", ["a fully masked row, seq", "expected: -1.66667", "got:      nan"]),
])
def test_a_loss_averaged_the_other_way_is_told_so(tmp_path, mistake, lines):
    """A loss that gives the other average's value fails with a note naming that average."""
    write_answers(tmp_path, {4: wrong_answer(4, mistake)})
    passed, failure = check.run_check(4, *grade.student_functions(4, tmp_path))
    assert not passed and [failure.split("\n")[0]] + failure.split("\n")[2:] == lines


def test_the_two_averages_agree_on_one_row_and_differ_on_rows_of_5_and_1():
    """The cases' hand values against loss.py's own weights: loss.accumulate's per-token weights
    are 1/|T| (token) and 1/(|o_i| G) (seq), 0 on masked tokens, a fully masked row included."""
    mask = cases.t64([[1, 1, 1, 1, 1], [1, 0, 0, 0, 0], [0, 0, 0, 0, 0]])
    assert key.step_weights(mask, "token").tolist() == [[1 / 6] * 5, [1 / 6, 0, 0, 0, 0], [0] * 5]
    assert key.step_weights(mask, "seq").tolist() == [[1 / 15] * 5, [1 / 3, 0, 0, 0, 0], [0] * 5]
    one = cases.t64([[1, 1, 0]])
    assert key.step_weights(one, "token").tolist() == key.step_weights(one, "seq").tolist()


def test_each_exercise_mirrors_the_file_said_to_solve_it():
    """The handout's order reads SOLVED_BY; each stub's "Mirrors:" line names the same module."""
    for n, (_, filename, _) in cases.EXERCISES.items():
        mirrors = next(line for line in (ROOT / "exercises" / filename).read_text().splitlines()
                       if line.startswith("Mirrors:"))
        assert mirrors.startswith(f"Mirrors: {Path(handout.SOLVED_BY[n]).stem}."), (n, mirrors)


def test_the_table_prints_a_failures_lines_under_its_row(tmp_path, capsys):
    source = textwrap.dedent(RIGHT[5]).replace("(rewards[k], -k)", "(rewards[k], k)")
    write_answers(tmp_path, {**RIGHT, 5: source})
    assert check.main(["5", "--dir", str(tmp_path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[2:6] == [
        " 5  AT-GRPO tree step            failed: ties go to the lowest index",
        "      input:    texts=['1', '3', '3', '2'], turn=0, env_id=7, role='planner'",
        "      expected: 1",
        "      got:      2"]


def test_a_still_stubbed_exercise_that_another_one_needs_is_blamed(tmp_path):
    """ex2 imports group_norm from an ex1 that still raises NotImplementedError: the checker
    names ex1, not ex2."""
    stub = (ROOT / "exercises" / "ex1_group_norm.py").read_text()
    write_answers(tmp_path, {**RIGHT, 1: stub})
    passed, failure = check.run_check(2, *grade.student_functions(2, tmp_path))
    assert not passed and failure == "needs ex1_group_norm.py first: it is not implemented yet"


def test_ex2_failing_through_a_wrong_ex1_says_so(tmp_path):
    """ex2 is right but imports an ex1 with a biased std: ex2 fails, with a note naming ex1."""
    wrong = textwrap.dedent(RIGHT[1]).replace("r.std(1, keepdim=True)",
                                              "r.std(1, keepdim=True, unbiased=False)")
    write_answers(tmp_path, {**RIGHT, 1: wrong})
    passed, failure = check.check(2, folder=tmp_path)
    assert not passed
    assert failure.split("\n")[-1] == "note: this calls your ex1_group_norm.py, which fails exercise 1"
    write_answers(tmp_path, RIGHT)
    assert check.check(2, folder=tmp_path) == (True, "")


def test_ex2_must_return_float64(tmp_path):
    source = textwrap.dedent(RIGHT[2]).replace("    K = turn_rewards.shape[2] + 1\n",
                                               "    K = turn_rewards.shape[2] + 1\n    turn_rewards, outcome_rewards = turn_rewards.float(), outcome_rewards.float()\n")
    source = source.replace("dtype=torch.float64", "dtype=torch.float32")
    write_answers(tmp_path, {**RIGHT, 2: source})
    passed, failure = check.run_check(2, *grade.student_functions(2, tmp_path))
    assert not passed and failure.split("\n")[0] == "float64 out"
    assert failure.split("\n")[2:] == ["expected: 'torch.float64'", "got:      'torch.float32'"]


CATCH_ALL = ("def group_norm(r):\n    while True:\n        try:\n            while True:\n                pass\n"
             "        except BaseException:\n            pass\n")


@pytest.mark.parametrize("body, reason", [
    ("import sys\nsys.exit()\n", "called sys.exit(); return a value instead"),
    ("def group_norm(r):\n    import sys\n    sys.exit(0)\n", "called sys.exit(0); return a value instead"),
    ("def group_norm(r):\n    while True:\n        try:\n            pass\n        except Exception:\n            pass\n",
     "did not finish within 1 s (an endless loop?)"),
    (CATCH_ALL, "did not finish within 1 s (an endless loop?)"),  # before: a watchdog ended check.py
    ("def group_norm(r):\n    raise BaseException('boom')\n", "raised BaseException: boom"),
    ("def group_norm(r):\n    raise GeneratorExit\n", "raised GeneratorExit"),
    ("def group_norm(r):\n    raise KeyboardInterrupt\n", "raised KeyboardInterrupt"),  # no Ctrl-C
])
def test_an_exit_or_an_endless_loop_in_a_student_file_fails_and_the_table_goes_on(tmp_path, monkeypatch, capsys,
                                                                                   body, reason):
    monkeypatch.setattr(sandbox, "TIME_LIMIT", 1)
    write_answers(tmp_path, {**RIGHT, 1: body})
    assert check.main(["--dir", str(tmp_path)]) == 1  # before: exit 0 with an empty table, or a hang
    out = capsys.readouterr().out
    assert f" 1  group normalisation          failed: {reason}" in out
    assert " 7  BM25 scores                  passed" in out and "5/7 passed" in out  # ex2 imports ex1


def test_a_closed_pipe_ends_quietly():
    p = subprocess.run(f"{sys.executable} {ROOT / 'exercises' / 'check.py'} --solutions | head -1",
                       shell=True, capture_output=True, text=True, timeout=120)
    assert p.stdout.strip() == "checking the project's functions" and "Traceback" not in p.stderr


def test_what_a_student_file_prints_shows_under_its_row(tmp_path, capsys):
    write_answers(tmp_path, {**RIGHT, 3: "print('hello from ex3')\n" + textwrap.dedent(RIGHT[3])})
    assert check.main(["3", "--dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines()[2:4] == [
        " 3  token advantages and mask    passed", "      printed: hello from ex3"]


def test_control_characters_in_a_students_error_are_shown_escaped(tmp_path, capsys):
    """On 7b45f4d the message reached the terminal raw: it cleared the screen and printed a fake
    "passed" row over the real "failed" one."""
    fake = "\\x1b[2J\\r 1  group normalisation          passed"
    write_answers(tmp_path, {**RIGHT, 1: f"def group_norm(r):\n    raise ValueError('{fake}')\n"})
    assert check.main(["1", "--dir", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\r" not in out and "\\x1b[2J\\r" in out and "failed" in out


# ---------------------------------------------------------------- student files that attack the checker
# Each runs check.py in a process of its own (with TIME_LIMIT = 1 s), as CI would: a checker that
# runs the student's code in its own process would end, hang or pass here.
def run_checker(folder, *numbers, env=None):
    """check.py --dir folder numbers: (its completed process, the seconds it took)."""
    code = (f"import sys, check, sandbox; sandbox.TIME_LIMIT = 1; "
            f"sys.exit(check.main(['--dir', {str(folder)!r}] + {[str(n) for n in numbers]!r}))")
    start = time.monotonic()
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT / "exercises", capture_output=True, text=True,
                       timeout=90, env=env)
    return p, time.monotonic() - start


def running(pid):
    """Process pid exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def ended(pid, seconds=5):
    deadline = time.monotonic() + seconds
    while running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not running(pid)


def test_os_exit_at_import_fails(tmp_path):
    """Before: `check.py 1 2` exited 0 with no verdict, and CI read a pass."""
    write_answers(tmp_path, {**RIGHT, 1: "import os\nos._exit(0)\n" + textwrap.dedent(RIGHT[1])})
    p, _ = run_checker(tmp_path, 1, 2)
    assert p.returncode == 1, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert lines[2:4] == [" 1  group normalisation          failed: stopped before its checks were done "
                          "(exit code 0: os._exit()?)", "      while loading ex1_group_norm.py"]
    assert lines[4].startswith(" 2  turn advantages (OR/MR/MT)   failed: stopped before") and lines[-1] == "0/2 passed"


def test_an_endless_loop_in_c_is_killed(tmp_path):
    """sum(range(10 ** 13)) never returns to the interpreter: a signal handler cannot stop it; the
    worker running it is killed."""
    pid_file = tmp_path / "worker.pid"
    write_answers(tmp_path, {**RIGHT, 1: textwrap.dedent(f"""\
        import os

        def group_norm(r):
            with open({str(pid_file)!r}, "w") as f:
                f.write(str(os.getpid()))
            return sum(range(10 ** 13))
        """)})
    p, seconds = run_checker(tmp_path, 1, 7)
    assert p.returncode == 1 and seconds < 30, p.stdout + p.stderr
    assert p.stdout.splitlines()[2:6] == [" 1  group normalisation          failed: did not finish within 1 s "
                                          "(an endless loop?)", "      in the case: two samples",
                                          " 7  BM25 scores                  passed", "1/2 passed"]
    assert ended(int(pid_file.read_text()))


def test_a_thread_left_running_fails_and_does_not_hang_the_checker(tmp_path):
    source = "import threading, time\nthreading.Thread(target=time.sleep, args=(10 ** 6,)).start()\n"
    write_answers(tmp_path, {**RIGHT, 1: source + textwrap.dedent(RIGHT[1])})
    p, seconds = run_checker(tmp_path, 1, 7)
    assert p.returncode == 1 and seconds < 30, p.stdout + p.stderr
    assert p.stdout.splitlines()[2:5] == [
        " 1  group normalisation          failed: left 1 thread(s) running: end every thread it starts",
        " 7  BM25 scores                  passed", "1/2 passed"]


def test_a_fork_left_running_fails_and_is_killed(tmp_path):
    pid_file = tmp_path / "fork.pid"
    source = textwrap.dedent(f"""\
        import os, time
        if os.fork() == 0:  # the fork writes its pid, then sleeps for ever
            with open({str(pid_file)!r} + ".tmp", "w") as f:
                f.write(str(os.getpid()))
            os.rename({str(pid_file)!r} + ".tmp", {str(pid_file)!r})
            time.sleep(10 ** 6)
        while not os.path.exists({str(pid_file)!r}):
            time.sleep(0.01)
        """)
    write_answers(tmp_path, {**RIGHT, 1: source + textwrap.dedent(RIGHT[1])})
    p, seconds = run_checker(tmp_path, 1, 7)  # before: hung while the fork kept the output pipe open
    assert p.returncode == 1 and seconds < 30, p.stdout + p.stderr
    assert p.stdout.splitlines()[2:5] == [
        " 1  group normalisation          failed: left a process running (os.fork, os.setsid?): end every process it starts",
        " 7  BM25 scores                  passed", "1/2 passed"]
    assert ended(int(pid_file.read_text()))


def test_editing_the_checkers_functions_does_not_make_wrong_numbers_pass(tmp_path):
    """Before: this file got `1/1 passed`; now the checker compares in a process the file never sees."""
    source = textwrap.dedent("""\
        import sys

        def always(*args, **kwargs):
            return True

        sys.modules["__main__"].close = always
        for module in list(sys.modules.values()):
            if hasattr(module, "run_check"):  # check.py, however it was imported
                module.close = always
                module.run_check = module.check = lambda *args, **kwargs: (True, "")

        def group_norm(r):
            return r * 0 + 5
        """)
    write_answers(tmp_path, {**RIGHT, 1: source})
    p, _ = run_checker(tmp_path, 1)
    assert p.returncode == 1, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert lines[2] == " 1  group normalisation          failed: two samples"
    assert lines[5] == "      got:      [[5.0, 5.0]]" and lines[-1] == "0/1 passed"


UNPRINTABLE = "class Unprintable(Exception):\n    def __str__(self):\n        raise RuntimeError('no message')\n"


@pytest.mark.parametrize("body, first, got", [
    ("def group_norm(r):\n    raise Unprintable()\n", "two samples",
     "      got:      raised Unprintable: (its message could not be shown: str() raised RuntimeError)"),
    ("raise Unprintable()\n", "could not load ex1_group_norm.py: Unprintable: (its message could not be shown: "
                              "str() raised RuntimeError)", None),
    ("class Unprintable(BaseException):\n    __str__ = Unprintable.__str__\ndef group_norm(r):\n    raise Unprintable()\n",
     "raised Unprintable: (its message could not be shown: str() raised RuntimeError)", None),
])
def test_an_exception_that_cannot_be_printed_fails_one_exercise(tmp_path, body, first, got):
    """Before: formatting it crashed the checker, and the next exercise was never checked."""
    write_answers(tmp_path, {**RIGHT, 1: UNPRINTABLE + body})
    p, _ = run_checker(tmp_path, 1, 3)
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert lines[2] == f" 1  group normalisation          failed: {first}"
    assert got is None or got in lines
    assert " 3  token advantages and mask    passed" in lines and lines[-1] == "1/2 passed"


@pytest.mark.parametrize("value, got", [
    # a float whose == and - always say "equal"
    ("class Yes(float):\n    def __eq__(self, other):\n        return True\n    def __sub__(self, other):\n"
     "        return 0.0\n    __rsub__ = __sub__\n    __hash__ = float.__hash__\nVALUE = Yes(0.5)\n", "0.5"),
    ("class Broken:\n    def tolist(self):\n        raise ValueError('no list')\nVALUE = Broken()\n",
     "a value that could not be read (ValueError: no list)"),
])
def test_a_returned_object_that_lies_or_breaks_does_not_pass(tmp_path, capsys, value, got):
    """Only plain data leaves the worker: the object's own == or tolist never runs in the checker."""
    write_answers(tmp_path, {**RIGHT, 6: value + "def exact_match_reward(completion, answers):\n    return VALUE\n"})
    assert check.main(["6", "--dir", str(tmp_path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[2] == " 6  exact-match reward           failed: right answer" and lines[5] == f"      got:      {got}"


def signalled_checker(folder, exercises, marker, sig):
    """check.py on folder's answers, sent sig once a worker wrote marker: (process, stdout, stderr)."""
    p = subprocess.Popen([sys.executable, str(ROOT / "exercises" / "check.py"), "--dir", str(folder), *exercises],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         # a suite started in the background (cmd &) ignores SIGINT, and its children inherit that
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    p.send_signal(sig)
    return (p, *p.communicate(timeout=30))


def test_ctrl_c_stops_the_checker_and_its_worker(tmp_path):
    """Ctrl-C (SIGINT to the checker) ends it with one line and exit code 130, and the worker
    running the student's code ends with it."""
    marker = tmp_path / "worker.pid"
    write_answers(tmp_path, {**RIGHT, 1: textwrap.dedent(f"""\
        import os, time

        def group_norm(r):
            with open({str(marker)!r} + ".tmp", "w") as f:
                f.write(str(os.getpid()))
            os.rename({str(marker)!r} + ".tmp", {str(marker)!r})
            time.sleep(60)
        """)})
    p, out, err = signalled_checker(tmp_path, ["1", "7"], marker, signal.SIGINT)
    assert p.returncode == 130, out + err
    assert err.strip() == "interrupted (Ctrl-C): not checked: 1, 7"
    assert ended(int(marker.read_text()))


def test_a_child_that_left_its_group_does_not_outlive_the_checker(tmp_path):
    """os.setsid() in a child (or a double fork) left the worker's process group, so killing the
    group missed it: it outlived check.py and the exercise passed. The helper is the subreaper of
    everything a worker starts: the orphan comes back to it, is ended, and the exercise fails."""
    pid_file = tmp_path / "escaped.pid"
    source = textwrap.dedent(f"""\
        import os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:  # a double fork: the grandchild's parent exits at once
                with open({str(pid_file)!r} + ".tmp", "w") as f:
                    f.write(str(os.getpid()))
                os.rename({str(pid_file)!r} + ".tmp", {str(pid_file)!r})
                time.sleep(10 ** 6)
            os._exit(0)
        while not os.path.exists({str(pid_file)!r}):
            time.sleep(0.01)
        """)
    write_answers(tmp_path, {**RIGHT, 1: source + textwrap.dedent(RIGHT[1])})
    p, seconds = run_checker(tmp_path, 1, 7)
    assert p.returncode == 1 and seconds < 30, p.stdout + p.stderr
    assert p.stdout.splitlines()[2] == (" 1  group normalisation          failed: left a process running (os.fork, "
                                        "os.setsid?): end every process it starts")
    assert ended(int(pid_file.read_text()))


def test_a_deleted_temporary_folder_fails_that_exercise_and_the_next_is_checked(tmp_path):
    """A student file that deletes the checker's temporary folder (where the workers' reports go):
    before, a traceback, and exercise 2 was never checked."""
    own = tmp_path / "tmp"  # its own temporary folder: the glob must not reach a checker another test runs at once
    own.mkdir()
    finder = textwrap.dedent(f"""\
        import glob, os, shutil
        for folder in glob.glob(os.path.join({str(own)!r}, "check-*")):  # TMPDIR is the worker's own
            shutil.rmtree(folder, ignore_errors=True)
        """)
    write_answers(tmp_path, {**RIGHT, 1: finder + textwrap.dedent(RIGHT[1])})
    p, _ = run_checker(tmp_path, 1, 7, env={**os.environ, "TMPDIR": str(own)})
    assert p.stdout.splitlines()[2:5] == [" 1  group normalisation          failed: deleted check.py's temporary folder",
                                          " 7  BM25 scores                  passed", "1/2 passed"], p.stdout + p.stderr
    assert "Traceback" not in p.stderr


DETACHED = """\
    import os, signal, time
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:  # a double fork that ignores SIGTERM
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            with open({pid_file!r} + ".tmp", "w") as f:
                f.write(str(os.getpid()))
            os.rename({pid_file!r} + ".tmp", {pid_file!r})
            time.sleep(10 ** 6)
        os._exit(0)
    while not os.path.exists({pid_file!r}):
        time.sleep(0.01)
    """


def test_sigterm_to_the_checker_ends_a_detached_grandchild_that_ignores_it(tmp_path):
    """Before: `kill -TERM check.py` killed the helper, and a setsid'd grandchild that ignores
    SIGTERM lived on (its subreaper was gone). The helper's warden, its parent, now kills all
    that is left below it with SIGKILL."""
    pid_file, marker = tmp_path / "escaped.pid", tmp_path / "worker.pid"
    write_answers(tmp_path, {**RIGHT, 1: textwrap.dedent(DETACHED.format(pid_file=str(pid_file))) + textwrap.dedent(f"""\
        def group_norm(r):
            open({str(marker)!r}, "w").close()
            time.sleep(60)
        """)})
    p, out, err = signalled_checker(tmp_path, ["1", "7"], marker, signal.SIGTERM)
    assert p.returncode == 143 and err.strip() == "stopped (SIGTERM): not checked: 1, 7", out + err
    assert ended(int(pid_file.read_text()))


def test_a_killed_helper_leaves_no_process_and_the_next_exercise_is_checked(tmp_path):
    """Before: a student file that SIGKILLs its parent (the helper) left its detached sleeper
    running for ever. It now comes to the warden, which ends it."""
    pid_file = tmp_path / "escaped.pid"
    killer = "os.kill(os.getppid(), signal.SIGKILL)\ntime.sleep(5)\n"
    write_answers(tmp_path, {**RIGHT, 1: textwrap.dedent(DETACHED.format(pid_file=str(pid_file))) + killer
                             + textwrap.dedent(RIGHT[1])})
    p, seconds = run_checker(tmp_path, 1, 7)
    assert p.stdout.splitlines()[2:5] == [" 1  group normalisation          failed: killed check.py's helper process "
                                          "(its parent)", " 7  BM25 scores                  passed", "1/2 passed"], \
        p.stdout + p.stderr
    assert ended(int(pid_file.read_text()))


def test_the_worker_has_its_own_temporary_folder_and_it_is_removed(tmp_path):
    """Before: a student file that filled TMPDIR left its junk there (and an honest exercise 2
    failed). Each worker's TMPDIR is a folder of its own, removed when it ends; more than
    sandbox.TMP_LIMIT left there fails the exercise."""
    seen = tmp_path / "seen.txt"
    junk = textwrap.dedent(f"""\
        import os, tempfile
        for i in range(3):
            with open(os.path.join(tempfile.gettempdir(), f"junk{{i}}"), "wb") as f:
                f.write(b"x" * (7 * 2 ** 20))
        open({str(seen)!r}, "w").write(tempfile.gettempdir() + "\\n" + os.environ["TMPDIR"])
        """)
    later = textwrap.dedent(f"""\
        import os
        first = open({str(seen)!r}).read().split()[0]
        open({str(seen)!r}, "a").write(f"\\n{{os.path.exists(first)}}")
        """)  # exercise 7, checked next: is exercise 1's folder still there?
    write_answers(tmp_path, {**RIGHT, 1: junk + textwrap.dedent(RIGHT[1]), 7: later + textwrap.dedent(RIGHT[7])})
    own = tmp_path / "tmp"
    own.mkdir()
    p, _ = run_checker(tmp_path, 1, 7, env={**os.environ, "TMPDIR": str(own)})
    assert p.stdout.splitlines()[2:5] == [" 1  group normalisation          failed: left 21 MiB in its temporary "
                                          "folder (at most 16 MiB)", " 7  BM25 scores                  passed",
                                          "1/2 passed"], p.stdout + p.stderr
    module_tmp, env_tmp, still_there = seen.read_text().splitlines()
    assert module_tmp == env_tmp and Path(env_tmp).parent.parent == own and still_there == "False"
    assert list(own.iterdir()) == []  # the checker's folder is gone too


def test_a_full_temporary_disk_is_reported_as_such(tmp_path, capsys, monkeypatch):
    """A report cut short on a full disk read "exit code 0: os._exit()?". (A full disk cannot be
    made here without root: the free space is patched, and the worker stops as one whose report
    writes failed.)"""
    write_answers(tmp_path, {**RIGHT, 1: "import os\nos._exit(0)\n"})
    monkeypatch.setattr(sandbox, "free_space", lambda folder: 4096)
    assert check.main(["1", "--dir", str(tmp_path)]) == 1
    row = capsys.readouterr().out.splitlines()[2]
    assert row.startswith(" 1  group normalisation          failed: its report could not be written: ")
    assert row.endswith(" is full (the disk of TMPDIR; free some space, or set TMPDIR to a folder on another disk)")


def test_a_disk_too_full_for_the_checkers_files_is_one_line(tmp_path, capsys, monkeypatch):
    def no_space(*a, **k):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(sandbox.tempfile, "mkdtemp", no_space)
    assert check.main(["1", "--dir", str(tmp_path)]) == 1
    row = capsys.readouterr().out.splitlines()[2]
    assert row == (f" 1  group normalisation          failed: check.py could not make its files in "
                   f"{tempfile.gettempdir()}: No space left on device (free some space, or set TMPDIR to a "
                   f"folder on another disk)")


def test_the_sandbox_runs_any_files_function_and_knows_no_exercise(tmp_path, monkeypatch):
    """sandbox.py on its own: a function of any file, called with a report and JSON arguments in a
    worker; its lines come back, a time-out and a thread left running are said as such."""
    target = tmp_path / "anything.py"
    target.write_text(textwrap.dedent("""
        import threading, time

        def add(report, a, b):
            print("adding")
            report.write(sum=a + b)

        def spin(report):
            while True:
                pass

        def leave_a_thread(report):
            threading.Thread(target=time.sleep, args=(30,)).start()
    """))
    monkeypatch.setattr(sandbox, "TIME_LIMIT", 2)
    with sandbox.Sandbox("tester") as box:
        run = box.run((target, "add"), {"a": 2, "b": 3})
        assert run.lines == [{"sum": 5}] and run.printed == ["adding"]
        assert run.cut_short() == "" and run.left_behind() == ""
        assert box.run((target, "spin"), {}).cut_short(" here") == "did not finish within 2 s (an endless loop?) here"
        left = box.run((target, "leave_a_thread"), {})
        assert left.cut_short() == "" and left.left_behind() == "left 1 thread(s) running: end every thread it starts"
        assert box.run((target, "add"), {"a": 1}).cut_short().startswith("raised TypeError")
    source = (ROOT / "machinery" / "sandbox.py").read_text()
    assert not any(name in source for name in ("cases", "EXERCISES", "grade", "student_functions"))


def test_sigterm_prints_what_was_not_checked(tmp_path):
    """SIGTERM (a job's time limit, `kill`) ends the checker as Ctrl-C does: the rows so far, then
    one line naming the exercises not checked."""
    marker = tmp_path / "worker.pid"
    write_answers(tmp_path, {**RIGHT, 2: textwrap.dedent(f"""\
        import os, time

        def turn_advantages(*a, **k):
            open({str(marker)!r}, "w").close()
            time.sleep(60)
        """)})
    p, out, err = signalled_checker(tmp_path, ["1", "2", "7"], marker, signal.SIGTERM)
    assert p.returncode == 143, out + err
    assert " 1  group normalisation          passed" in out and err.strip() == "stopped (SIGTERM): not checked: 2, 7"


# ---------------------------------------------------------------- the quiz and the handout
QUIZ_MD = ROOT / "docs" / "quiz.md"


@pytest.fixture(scope="module")
def quiz_expected():
    return key.quiz_answers()


def run_quiz(argv, capsys):
    """check.py quiz argv: (exit code, stdout lines, stderr)."""
    code = check.main(["quiz", *argv])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def answers_file(tmp_path, lines):
    path = tmp_path / "answers.txt"
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_quiz_all_right(tmp_path, capsys, quiz_expected):
    """Three decimals, rounded or cut, are enough; a fraction works too."""
    answers = {key: f"{value:.3f}" for key, value in quiz_expected.items()}
    answers["6b"] = str(int(quiz_expected["6b"] * 1000) / 1000)  # 0.193, cut
    answers["5a"] = "-5/4"
    path = answers_file(tmp_path, ["# mine", ""] + [f"{key}: {value}" for key, value in answers.items()])
    code, lines, err = run_quiz(["--answers", str(path)], capsys)
    assert code == 0 and err == "", lines
    assert lines[0] == f"checking the quiz answers in {path}" and lines[-1] == f"{len(quiz.QUIZ)}/{len(quiz.QUIZ)} right"
    assert [line.split()[0] for line in lines[2:-1]] == [key for key, _ in quiz.QUIZ]
    assert all(line.endswith(" right") for line in lines[2:-1])


def test_quiz_one_wrong(tmp_path, capsys, quiz_expected):
    """5a answered with the per-sequence mean (5b's number): that row, and only it, is wrong."""
    answers = {**quiz_expected, "5a": quiz_expected["5b"]}
    path = answers_file(tmp_path, [f"{key}: {value}" for key, value in answers.items()])
    code, lines, _ = run_quiz(["--answers", str(path)], capsys)
    assert code == 1 and lines[-1] == f"{len(quiz.QUIZ) - 1}/{len(quiz.QUIZ)} right"
    wrong = [line for line in lines[2:-1] if not line.endswith(" right")]
    assert wrong == [" 5a   token mean: the loss                     wrong (you wrote -0.5)"]


def test_the_blank_answers_file_is_the_template(capsys):
    """exercises/quiz_answers.txt, as shipped, lists every numeric question and answers none."""
    path = ROOT / "exercises" / "quiz_answers.txt"
    assert path.read_text() == quiz.quiz_template()
    code, lines, _ = run_quiz([], capsys)  # the default: quiz_answers.txt beside check.py
    assert code == 1 and lines[0] == f"checking the quiz answers in {path}"
    assert lines[-1] == f"0/{len(quiz.QUIZ)} right" and all(line.endswith("no answer") for line in lines[2:-1])


@pytest.mark.parametrize("lines, why", [
    (["1: 0", "2a 0.707"], "line 2: '2a 0.707' is not \"question: number\", e.g. \"1: 0.25\" or \"1: -2/3\""),
    (["11: 3"], "line 1: there is no numeric question '11' (they are 1, 2a, 2b, 3, 4, 5a, 5b, 6a, 6b, 7a, 7b, "
                "8, 9, 10)"),
    (["2a: about 0.7"], "line 1: 'about 0.7' is not a number (decimals, or a fraction like -2/3)"),
    (["3: 1/0"], "line 1: '1/0' is not a number (decimals, or a fraction like -2/3)"),
    (["3: inf"], "line 1: 'inf' is not a number (decimals, or a fraction like -2/3)"),
    (["2a: 1", "", "2a: 2"], "line 3: 2a is answered twice (first on line 1)"),
])
def test_a_malformed_answers_file_gives_one_line(tmp_path, capsys, lines, why):
    path = answers_file(tmp_path, lines)
    code, out, err = run_quiz(["--answers", str(path)], capsys)
    assert code == 2 and out == [] and err == f"check.py quiz: {path} {why}\n"


def test_a_missing_answers_file_gives_one_line(tmp_path, capsys):
    code, out, err = run_quiz(["--answers", str(tmp_path / "none.txt")], capsys)
    assert code == 2 and out == [] and err == (
        f"check.py quiz: cannot read the answers file {tmp_path / 'none.txt'} (FileNotFoundError): write one "
        "answer a line, \"question: number\", e.g. \"1: 0.25\" or \"1: -2/3\" (docs/quiz.md)\n")


def test_an_answers_file_that_is_a_fifo_or_a_device_is_one_line_and_nothing_hangs(tmp_path, capsys):
    """On 7b45f4d `check.py quiz --answers FIFO` (no writer) hung, and /dev/zero read until memory ran out."""
    fifo = tmp_path / "answers"
    os.mkfifo(fifo)
    t0 = time.time()
    for path in (str(fifo), "/dev/zero"):
        code, out, err = run_quiz(["--answers", path], capsys)
        assert code == 2 and out == [] and err.startswith(f"check.py quiz: {path} is not a regular file")
    assert time.time() - t0 < 10


def test_the_quiz_page_asks_every_numeric_question_once_and_its_key_agrees(quiz_expected):
    """docs/quiz.md: each id in bold brackets once in the questions, and `[id] = value` in the
    answer key, equal to what check.py quiz expects (computed by the project's functions)."""
    import re
    questions, key = QUIZ_MD.read_text().split("\n" + handout.ANSWER_KEY + "\n")
    ids = [k for k, _ in quiz.QUIZ]
    assert re.findall(r"\*\*\[(\w+)\]\*\*", questions.split("\n## 1. ")[1]) == ids
    found = dict(re.findall(r"`\[(\w+)\] = (-?[0-9.]+)`", key))
    assert list(found) == ids
    assert all(quiz.quiz_right(float(found[k]), quiz_expected[k]) for k in ids), (found, quiz_expected)
    assert f"N/{len(ids)} right" in questions


def test_handout_writes_a_folder_a_student_can_check_from(tmp_path, right_folder):
    folder = tmp_path / "class" / "handout"
    assert check.main(["--handout", str(folder)]) == 0
    stubs = [filename for _, filename, _ in cases.EXERCISES.values()]
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        stubs + list(handout.FILES) + ["quiz.md", "quiz_answers.txt", "sealed.json", "README.md"])
    for name in stubs + list(handout.FILES):
        assert (folder / name).read_text() == handout.SOURCES.get(name, ROOT / "exercises" / name).read_text()
    quiz_md = (folder / "quiz.md").read_text()
    assert QUIZ_MD.read_text().startswith(quiz_md.rstrip()) and "Answer key" not in quiz_md
    readme = (folder / "README.md").read_text()
    for n, (_, filename, _) in cases.EXERCISES.items():  # each exercise before the file that solves it
        assert readme.index(f"`{filename}`") < readme.index(f"`{handout.SOLVED_BY[n]}`"), n
    assert readme.index("`ex7_bm25.py`") < readme.index("`retrieval.py`") < readme.index("`quiz.md`")
    # the student's own files, checked from elsewhere: ex1 answered, ex3 still a stub
    (folder / "ex1_group_norm.py").write_text((right_folder / "ex1_group_norm.py").read_text())
    p = subprocess.run([sys.executable, str(folder / "check.py"), "1", "3"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=180)
    assert p.returncode == 1 and p.stdout.splitlines()[1:] == [
        " #  topic                        result", " 1  group normalisation          passed",
        " 3  token advantages and mask    failed: not implemented yet", "1/2 passed"], p.stdout + p.stderr
    # the quiz, without the project beside it: against the sealed answers
    (folder / "quiz_answers.txt").write_text("".join(f"{k}: {v:.3f}\n" for k, v in key.quiz_answers().items()))
    p = subprocess.run([sys.executable, str(folder / "check.py"), "quiz"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.splitlines()[-1] == f"{len(quiz.QUIZ)}/{len(quiz.QUIZ)} right", p.stdout + p.stderr


def test_handout_refuses_a_folder_that_is_not_empty(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    for target in (tmp_path, tmp_path / "notes.txt"):
        assert check.main(["--handout", str(target)]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err == f"check.py --handout: {target} exists and is not an empty folder: name a new one\n"
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"] and (tmp_path / "notes.txt").read_text() == "mine"
    (tmp_path / "empty").mkdir()  # an empty folder is fine
    assert check.main(["--handout", str(tmp_path / "empty")]) == 0 and (tmp_path / "empty" / "README.md").is_file()


def test_handout_writes_all_or_nothing_a_dangling_link_a_read_only_folder_a_full_disk(tmp_path):
    """Each is one line and leaves nothing half-made, so the retry is not refused as "not an empty
    folder" (on 7b45f4d: FileExistsError, OSError 30 and 28 tracebacks, and a folder cut at 24,576 bytes).
    A file-size limit stands for the full disk (each write past it fails, EFBIG)."""
    import resource
    os.symlink(tmp_path / "nowhere", tmp_path / "dangling")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)

    def handout(target, limit=None):
        def limited():
            import signal
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        return subprocess.run([sys.executable, str(ROOT / "exercises" / "check.py"), "--handout", str(target)],
                              capture_output=True, text=True, timeout=300, preexec_fn=limited if limit else None)
    cases = [(tmp_path / "dangling", None, "exists and is not an empty folder"),
             (tmp_path / "full" / "class", 20_000, "cannot write")]
    if os.geteuid() != 0:  # root writes in a read-only folder all the same
        cases.append((locked / "class", None, "cannot write in"))
    for target, limit, says in cases:
        run = handout(target, limit)
        assert run.returncode == 2 and run.stderr.count("\n") == 1 and says in run.stderr, run.stderr
        assert "Traceback" not in run.stderr
    assert sorted(p.name for p in (tmp_path / "full").iterdir()) == []  # no half-made folder, no draft
    assert list(locked.iterdir()) == []
    assert handout(tmp_path / "full" / "class").returncode == 0  # the retry, with room: written whole
    locked.chmod(0o755)


def test_handout_refuses_to_hand_out_a_solved_exercise(tmp_path, monkeypatch, capsys, right_folder):
    """A teacher who solved the exercises in place would hand out the solutions: refused."""
    exercises = tmp_path / "exercises"
    shutil.copytree(ROOT / "exercises", exercises)
    (exercises / "ex3_token_advantages.py").write_text((right_folder / "ex3_token_advantages.py").read_text())
    monkeypatch.setattr(handout, "HERE", exercises)
    assert check.main(["--handout", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == (
        f"check.py --handout: {exercises / 'ex3_token_advantages.py'} is not a stub any more (a function without "
        "raise NotImplementedError): `git checkout -- exercises/` restores it\n")
    assert not (tmp_path / "out").exists()
