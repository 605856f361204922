"""Grade a class with the teacher's own cases and key:

    python exercises/gradebook.py DIR [--out grades.csv]

DIR holds one folder per student, named for the student, with their ex*.py files (a copy of their
handout folder will do) and, if they did the quiz, their quiz_answers.txt. Everything a student
handed in is read into memory before any of it runs; each exercise then runs in a fresh folder
that holds only that student's seven ex*.py files, in a worker whose checker files (cases.py,
grade.py, sandbox.py) are a private copy made at the start, and its values are judged here,
against key.py, which the worker never sees. So nothing a student's file does to its folder, to
its report or to the checker's files can pass a wrong answer: a changed checker file fails the
exercise that changed it and is restored before the next one runs. The result is one CSV row per
student and exercise (student, exercise, passed, first failure), quiz included, and a table.

Its limits are the sandbox's (docs/exercises.md): the worker runs as the teacher, so a file could
read what the teacher's account can read, key.py included; grade untrusted files in a container.
It imports check.py, key.py, quiz.py, sandbox.py and cases.py; no file imports it.
"""
import argparse
import csv
import io
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import check
import key
import quiz
import sandbox
from cases import EXERCISES

HERE = Path(__file__).resolve().parent
RUNS = ("cases.py", "grade.py", "sandbox.py")  # what a worker loads: copied, checked after each run
SOURCES = {"sandbox.py": Path(sandbox.__file__)}  # where a file of RUNS comes from, if not from this folder
MAX_FILE = 2 ** 20  # bytes read of one handed-in file; a bigger one is not read
COLUMNS = ["student", "exercise", "passed", "first failure"]


class Submission:
    """One student's files, read at the start: {ex*.py name: bytes}, and quiz_answers.txt's text
    (None when absent); `problems` says what could not be read."""

    def __init__(self, folder):
        self.name, self.files, self.quiz, self.problems = folder.name, {}, None, []
        for _, filename, _ in EXERCISES.values():
            data = read(folder / filename, self.problems)
            if data is not None:
                self.files[filename] = data
        data = read(folder / quiz.QUIZ_ANSWERS, self.problems)
        if data is not None:
            self.quiz = data.decode("utf-8", errors="replace")


def read(path, problems):
    """The bytes of a plain file of at most MAX_FILE bytes, else None (and why, in problems)."""
    if not path.exists() and not path.is_symlink():
        return None
    if path.is_symlink() or not path.is_file():
        problems.append(f"{path.name} is not a plain file")
        return None
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FILE + 1)
    except OSError as error:
        problems.append(f"{path.name}: {error.strerror}")
        return None
    if len(data) > MAX_FILE:
        problems.append(f"{path.name} is over {MAX_FILE // 2 ** 20} MiB")
        return None
    return data


def submissions(folder):
    """Every student's Submission, by folder name; CheckError when there is none."""
    folder = Path(folder)
    if not folder.is_dir():
        raise quiz.CheckError(f"{folder} is not a folder: give the folder that holds one folder "
                              f"per student")
    found = [Submission(p) for p in sorted(folder.iterdir())
             if p.is_dir() and not p.is_symlink() and not p.name.startswith(".")]
    if not found:
        raise quiz.CheckError(f"{folder} holds no student folder (one folder per student, with "
                              f"their ex*.py files)")
    return found


class Grader:
    """The private copy of the checker's files, one sandbox for the whole class, and the key."""

    def __init__(self):
        self.copy = Path(tempfile.mkdtemp(prefix="grader-"))
        self.sources = {name: SOURCES.get(name, HERE / name).read_bytes() for name in RUNS}
        self.restore()
        self.box = sandbox.Sandbox("gradebook.py", script=self.copy / "sandbox.py",
                                   warm=(str(self.copy / "grade.py"), "warm", {"solutions": False}))
        self.expected = {n: check.expectations(n) for n in EXERCISES}  # key.py, in this process

    def restore(self):
        for name, data in self.sources.items():
            (self.copy / name).write_bytes(data)

    def intact(self):
        """True when the private checker files are as copied; else restore them, restart the
        helper (it may hold what they changed) and return False."""
        try:
            if all((self.copy / name).read_bytes() == data for name, data in self.sources.items()):
                return True
        except OSError:
            pass
        shutil.rmtree(self.copy, ignore_errors=True)
        self.copy.mkdir(parents=True, exist_ok=True)
        self.restore()
        if self.box.helper:
            self.box.drop_helper()
        return False

    def close(self):
        self.box.__exit__(None, None, None)
        shutil.rmtree(self.copy, ignore_errors=True)

    def exercises(self, student):
        """[(n, passed, first failure)] of one student: each exercise in a fresh folder."""
        rows, verdicts = [], {}
        for n, (_, filename, _) in EXERCISES.items():
            if filename not in student.files:
                rows.append((n, False, f"no {filename} handed in"))
                continue
            folder = Path(tempfile.mkdtemp(prefix=f"{n}-", dir=self.copy.parent))
            try:
                for name, data in student.files.items():
                    (folder / name).write_bytes(data)
                checker = check.Checker(folder=folder, expected=self.expected.__getitem__,
                                        checker=self.copy, box=self.box, verdicts=verdicts)
                passed, failure, _ = checker.check(n)  # exercise 2's note reads exercise 1's verdict
            finally:
                shutil.rmtree(folder, ignore_errors=True)
            if not self.intact():
                verdicts[n] = (False, "changed the checker's files", [], [])
                passed, failure = False, "changed the checker's files (they were restored)"
            rows.append((n, passed, one_line(failure)))
        return rows


def one_line(failure):
    """A failure's lines on one line, its labels' padding dropped."""
    return " | ".join(re.sub(r"^(input|expected|got): +", r"\1: ", line) for line in failure.split("\n"))


def quiz_row(student, expected):
    """The quiz's (passed, first failure): every numeric answer right, or what was not."""
    if student.quiz is None:
        return False, f"no {quiz.QUIZ_ANSWERS} handed in"
    try:
        answers = quiz.parse_quiz_answers(student.quiz, quiz.QUIZ_ANSWERS)
    except quiz.CheckError as error:
        return False, str(error)
    wrong = [k for k, _ in quiz.QUIZ
             if answers.get(k) is None or not quiz.quiz_right(answers[k], expected[k])]
    right = len(quiz.QUIZ) - len(wrong)
    if not wrong:
        return True, f"{right}/{len(quiz.QUIZ)} right"
    first = wrong[0]
    said = "no answer" if answers.get(first) is None else f"wrote {answers[first]:g}"
    return False, f"{right}/{len(quiz.QUIZ)} right; first wrong: {first} ({said})"


def grade_class(folder, progress=print):
    """The CSV rows of a class: [student, exercise, passed, first failure]."""
    students = submissions(folder)
    expected_quiz = key.quiz_answers()
    grader, rows = Grader(), []
    try:
        for i, student in enumerate(students, 1):
            start = time.time()
            for n, passed, failure in grader.exercises(student):
                rows.append([student.name, str(n), "yes" if passed else "no", failure])
            passed, failure = quiz_row(student, expected_quiz)
            rows.append([student.name, "quiz", "yes" if passed else "no", failure])
            if student.problems:
                rows.append([student.name, "files", "no", "; ".join(student.problems)])
            progress(f"[{i}/{len(students)}] {student.name}: "
                     f"{sum(r[2] == 'yes' for r in rows if r[0] == student.name and r[1].isdigit())}"
                     f"/{len(EXERCISES)} exercises passed ({time.time() - start:.1f} s)")
    finally:
        grader.close()
    return rows


def table(rows):
    """A student x exercise table of the CSV rows: + passed, - failed."""
    students = list(dict.fromkeys(r[0] for r in rows))
    columns = [str(n) for n in EXERCISES] + ["quiz"]
    mark = {(r[0], r[1]): "+" if r[2] == "yes" else "-" for r in rows}
    width = max(len("student"), *map(len, students))
    lines = [f"{'student':<{width}}  " + "  ".join(f"{c:>4}" for c in columns)]
    lines += [f"{s:<{width}}  " + "  ".join(f"{mark.get((s, c), '?'):>4}" for c in columns)
              for s in students]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="gradebook.py", description="Grade a class: one folder per student (their ex*.py "
        "files and quiz_answers.txt), with the teacher's cases and key (docs/exercises.md).")
    parser.add_argument("submissions", help="the folder that holds one folder per student")
    parser.add_argument("--out", default="grades.csv",
                        help="the CSV to write: student, exercise, passed, first failure")
    args = parser.parse_args(argv)
    if not hasattr(os, "fork"):
        parser.error("gradebook.py forks a worker per exercise: run it on Linux or macOS (or WSL)")
    return gradebook_main(args.submissions, args.out)


def gradebook_main(folder, out):
    out = Path(out)
    if not out.absolute().parent.is_dir() or out.is_dir():
        print(f"gradebook.py: cannot write {out}: its folder does not exist or it is a folder",
              file=sys.stderr)
        return 2
    try:
        rows = grade_class(folder)
    except quiz.CheckError as error:
        print(f"gradebook.py: {error}", file=sys.stderr)
        return 2
    text = io.StringIO()
    csv.writer(text, lineterminator="\n").writerows([COLUMNS] + rows)
    draft = out.absolute().parent / f".{out.name}.part"
    try:
        draft.write_text(text.getvalue())
        os.replace(draft, out)
    except OSError as error:
        print(f"gradebook.py: cannot write {out}: {error.strerror}", file=sys.stderr)
        return 2
    print(table(rows))
    print(f"wrote {out}: {len(rows)} rows ({', '.join(COLUMNS)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
