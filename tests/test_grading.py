"""Grading a class (exercises/handout.py, seal.py, gradebook.py): a handout holds no expected value of
the cases or the quiz, only sealed hashes, against which a student's own check still passes a right
answer and fails a wrong one; and the teacher's gradebook.py grades a folder of submissions with the
teacher's own cases and key, so that neither a forged report nor a rewritten checker file passes a
wrong answer."""
import csv
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "exercises"))  # the checker's files import each other by name
import cases  # noqa: E402
import gradebook  # noqa: E402
import key  # noqa: E402
import seal  # noqa: E402
from test_exercises import RIGHT, write_answers  # noqa: E402


@pytest.fixture(scope="module")
def handout_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("class") / "handout"
    p = subprocess.run([sys.executable, str(ROOT / "exercises" / "check.py"), "--handout", str(folder)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    return folder


def telling(value):
    """A number that takes three decimals or more to write: one a student could not guess or read
    from a case's input (those are integers and numbers like 0.5, 1.2, -0.25)."""
    return value != round(value, 2)


def expected_numbers():
    """Every telling number of the key's expected values, near misses and the quiz's answers."""
    found = set()
    for n in key.KEY:
        for _, value, near in key.expected(n):
            found.update(seal.numbers([value] + [v for v, _ in near]))
    found.update(key.quiz_answers().values())
    return sorted(x for x in found if telling(x))


def written(x):
    """How a number may be written down: 3 to 6 decimals, rounded or cut, and its repr."""
    forms = {repr(x)}
    for d in range(3, 7):
        forms.add(f"{x:.{d}f}")
        forms.add(f"{int(x * 10 ** d) / 10 ** d:.{d}f}")
    return {f.rstrip("0") for f in forms}


def test_a_handout_holds_no_expected_value(handout_folder):
    """No telling number of the cases' expected values or of the quiz's answers appears in any file
    of a handout, in any of the ways it may be written; the teacher's files are not there."""
    numbers = expected_numbers()
    assert len(numbers) > 40 and any(abs(x - 0.707057) < 1e-6 for x in numbers)
    names = {p.name for p in handout_folder.iterdir()}
    assert not names & {"key.py", "gradebook.py", "handout.py", "quiz_expected.json"}
    text = "\n".join(p.read_text() for p in handout_folder.iterdir())
    leaks = {x: sorted(f for f in written(x) if re.search(r"(?<![\d.])" + re.escape(f) + r"(?!\d)", text))
             for x in numbers}
    assert {x: f for x, f in leaks.items() if f} == {}
    # the same search finds them in the repository's key, so it can fail
    key_text = (ROOT / "exercises" / "key.py").read_text() + (ROOT / "docs" / "quiz.md").read_text()
    assert all(any(f in key_text for f in written(x)) for x in (0.707057, -1.288558, 0.193147))


def test_the_sealed_values_are_salted_per_handout(handout_folder, tmp_path):
    """Two handouts seal the same value differently, and a hash is no plain digest of the answer."""
    import hashlib
    import json
    other = tmp_path / "other"
    subprocess.run([sys.executable, str(ROOT / "exercises" / "check.py"), "--handout", str(other)],
                   capture_output=True, timeout=300, check=True)
    one, two = (json.loads((f / "sealed.json").read_text()) for f in (handout_folder, other))
    assert one["salt"] != two["salt"]
    assert one["cases"]["1"][0]["expected"] != two["cases"]["1"][0]["expected"]
    plain = hashlib.sha256(seal.text([[-0.707057, 0.707057]], 5).encode()).hexdigest()
    assert plain not in json.dumps(one)


def test_seal_text_and_decimals():
    """Ints and floats, lists and tuples alike; -0 is 0; a number close to a rounding boundary gets
    other decimals, so that float noise cannot flip its text."""
    assert seal.text([1, (2.0, -0.0)], 3) == "[1.000,[2.000,0.000]]" == seal.text([1.0, [2, 0]], 3)
    assert seal.text(True, 3) == "true" != seal.text(1, 3) and seal.text("a", 2) == '"a"'
    assert seal.decimals_for([0.707057]) == 5  # 70705.7: 0.2 of a step from the boundary
    assert seal.decimals_for([0.123465]) == 4  # 12346.5 at 5 decimals sits on the boundary, 1234.65 at 4 not
    assert seal.quiz_texts(0.1931471805599454) == {"0.193"} and seal.quiz_texts(0.7076) == {"0.708", "0.707"}
    assert seal.quiz_texts(-1.25) == {"-1.250"} and seal.quiz_texts(0.7) == {"0.700"}


def run_check(folder, *args):
    return subprocess.run([sys.executable, str(folder / "check.py"), *args], cwd=folder.parent,
                          capture_output=True, text=True, timeout=300)


def test_a_handout_checks_right_and_wrong_answers_against_the_sealed_values(handout_folder, tmp_path):
    """Right answers pass; a wrong one fails with its input and what came back, the expected value
    shown as sealed, and a known wrong answer still gets its note."""
    import shutil
    folder = tmp_path / "mine"
    shutil.copytree(handout_folder, folder)
    write_answers(folder, RIGHT)
    p = run_check(folder)
    assert p.returncode == 0 and p.stdout.splitlines()[-1] == "7/7 passed", p.stdout + p.stderr
    loss = textwrap.dedent(RIGHT[4]).replace('if loss_type == "token":', 'if loss_type == "seq":')
    write_answers(folder, {1: textwrap.dedent(RIGHT[1]).replace("(std + 1e-4)", "std"), 4: loss})
    lines = run_check(folder, "1", "4").stdout.splitlines()
    assert lines[2:6] == [" 1  group normalisation          failed: two samples",
                          "      input:    rewards=[[1.0, 3.0]]",
                          "      expected: sealed (your teacher's key has it)",
                          "      got:      [[-0.707107, 0.707107]]"]
    assert lines[6] == " 4  clipped GRPO loss + k3 KL    failed: batch of two rows, token"
    assert lines[9:11] == ["      got:      -2.25",
                           "      note: this is the per-sequence mean of eq. 3 (each row's token mean, then the "
                           "mean over rows); loss_type='token' asks for the token mean over all trained tokens"]
    (folder / "quiz_answers.txt").write_text("1: 0\n2a: 0.708\n5a: -5/4\n")  # 2a is 0.707007
    out = run_check(folder, "quiz").stdout
    assert " 5a   token mean: the loss                     right" in out and "wrong (you wrote 0.708)" in out


def test_the_teachers_commands_refuse_to_run_in_a_handout(handout_folder):
    for flag in ("--solutions", "--handout"):
        p = run_check(handout_folder, flag, *(["x"] if flag == "--handout" else []))
        assert p.returncode == 2 and f"{flag} needs the teacher's key.py beside check.py" in p.stderr


def test_the_checker_runs_exercises_6_and_7_without_torch(handout_folder, tmp_path):
    """Where torch cannot be imported (a torch.py first on PYTHONPATH that raises ImportError stands
    in for a missing one), exercises 6 and 7 are checked and the others say, in one line, that they
    need it."""
    import os
    import shutil
    folder = tmp_path / "no-torch"
    shutil.copytree(handout_folder, folder)
    write_answers(folder, {6: RIGHT[6], 7: RIGHT[7]})
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "torch.py").write_text("raise ImportError('no torch here')\n")
    p = subprocess.run([sys.executable, str(folder / "check.py"), "1", "6", "7"], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "PYTHONPATH": str(blocker)})
    assert p.stdout.splitlines()[2:] == [
        " 1  group normalisation          failed: needs PyTorch (pip install torch); exercises 6 and 7 run "
        "without it", " 6  exact-match reward           passed", " 7  BM25 scores                  passed",
        "2/3 passed"], p.stdout + p.stderr


# ---------------------------------------------------------------- the teacher's gradebook
FORGER = """\
import sys

def group_norm(r):
    # find the report the worker writes, and any expected value within reach
    frame, report, leaked = sys._getframe(), None, None
    while frame:
        for value in frame.f_locals.values():
            if type(value).__name__ == "Report":
                report = value
            if isinstance(value, list) and value and isinstance(value[0], tuple) and len(value[0]) > 3:
                leaked = [case[3] for case in value]  # a case that carried its expected value
        frame = frame.f_back
    try:
        import key  # the teacher's key on the worker's path
        leaked = [entry[1] for entry in key.KEY[1]]
    except ImportError:
        pass
    if report is not None:
        for i in range(7):  # forged lines: the expected values if found, else anything
            report.write(case=i, got=leaked[i] if leaked else [[0.0, 0.0]])
    return r * 0
"""
REWRITER = """\
import pathlib
import sys

def group_norm(r):
    # the checker's cases.py that this worker loaded, and the one in this file's folder
    for path in {pathlib.Path(sys.modules["cases"].__file__), pathlib.Path(__file__).parent / "cases.py"}:
        path.write_text(path.read_text() + "\\nCASES[1] = lambda *f: []\\n" if path.exists() else "CASES = {}\\n")
    return r * 0
"""


def grade_class(tmp_path, students):
    submissions = tmp_path / "submissions"
    for name, answers in students.items():
        (submissions / name).mkdir(parents=True)
        write_answers(submissions / name, answers)
    out = tmp_path / "grades.csv"
    assert gradebook.main([str(submissions), "--out", str(out)]) == 0
    with open(out) as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["student", "exercise", "passed", "first failure"]
    return {(r[0], r[1]): (r[2], r[3]) for r in rows[1:]}


def test_the_gradebook_grades_a_class_and_neither_forgery_nor_rewriting_passes(tmp_path, capsys):
    """A right student passes, a wrong one fails with the case; a file that forges its report with
    whatever expected values it can reach, and one that rewrites the checker's cases.py, fail; the
    students graded after them are graded as before."""
    wrong = textwrap.dedent(RIGHT[1]).replace("(std + 1e-4)", "std")
    grades = grade_class(tmp_path, {"a-right": RIGHT, "b-forger": {**RIGHT, 1: FORGER},
                                    "c-rewriter": {**RIGHT, 1: REWRITER}, "d-right": RIGHT,
                                    "e-wrong": {**RIGHT, 1: wrong}})
    for student in ("a-right", "d-right"):
        assert all(grades[student, str(n)] == ("yes", "") for n in cases.EXERCISES), student
        assert grades[student, "quiz"] == ("no", "no quiz_answers.txt handed in")
    assert grades["b-forger", "1"][0] == "no" and "got: [[0.0, 0.0]]" in grades["b-forger", "1"][1]
    assert grades["c-rewriter", "1"] == ("no", "changed the checker's files (they were restored)")
    assert grades["c-rewriter", "2"][0] == "no"  # ex2 imports the rewriter's ex1
    assert grades["e-wrong", "1"] == ("no", "two samples | input: rewards=[[1.0, 3.0]] | expected: "
                                            "[[-0.707057, 0.707057]] | got: [[-0.707107, 0.707107]]")
    assert (ROOT / "exercises" / "cases.py").read_text().count("CASES[1] = lambda") == 0
    table = capsys.readouterr().out
    assert "a-right        +     +     +     +     +     +     +     -" in table


def test_the_forger_passes_where_the_key_is_within_its_reach(tmp_path, monkeypatch):
    """The forgery above is a real one: with key.py copied beside the worker's checker files (the
    mistake the gradebook does not make), the forged report passes a wrong group_norm."""
    monkeypatch.setattr(gradebook, "RUNS", gradebook.RUNS + ("key.py",))
    grades = grade_class(tmp_path, {"forger": {1: FORGER}})
    assert grades["forger", "1"] == ("yes", "")


def test_the_gradebook_reads_the_quiz_and_says_what_it_could_not_read(tmp_path):
    submissions = tmp_path / "class"
    (submissions / "ana").mkdir(parents=True)
    answers = key.quiz_answers()
    (submissions / "ana" / "quiz_answers.txt").write_text(
        "".join(f"{k}: {v:.3f}\n" for k, v in answers.items()).replace("2b: 0.000", "2b: 0.707"))
    (submissions / "bob").mkdir()
    (submissions / "bob" / "quiz_answers.txt").write_text("1 0\n")
    (submissions / "bob" / "ex1_group_norm.py").symlink_to("/etc/passwd")
    out = tmp_path / "g.csv"
    assert gradebook.main([str(submissions), "--out", str(out)]) == 0
    rows = {(r[0], r[1]): r[2:] for r in csv.reader(open(out))}
    assert rows["ana", "quiz"] == ["no", "13/14 right; first wrong: 2b (wrote 0.707)"]
    assert rows["bob", "quiz"][0] == "no" and "is not \"question: number\"" in rows["bob", "quiz"][1]
    assert rows["bob", "files"] == ["no", "ex1_group_norm.py is not a plain file"]
    assert rows["bob", "1"] == ["no", "no ex1_group_norm.py handed in"]


def test_the_gradebook_refuses_in_one_line(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    for argv, says in (([str(tmp_path / "none")], "is not a folder"),
                       ([str(tmp_path / "empty")], "holds no student folder"),
                       ([str(tmp_path / "empty"), "--out", str(tmp_path / "no" / "g.csv")], "cannot write")):
        assert gradebook.main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("gradebook.py: ") and says in err and err.count("\n") == 1
