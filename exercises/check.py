"""Checker for the exercises: a table of passed / failed, one row per exercise.

    python check.py              check every exercise (your ex*.py files)
    python check.py 3            check exercise 3 only (several numbers work too)
    python check.py --dir PATH   check the ex*.py files of another folder
    python check.py quiz         check the quiz's numeric answers (quiz_answers.txt beside this
                                 file, or --answers PATH; quiz.md)
  in the repository only (exercises/check.py; they need the teacher's key, key.py):
    --solutions                  check the project's own functions (must all pass)
    --handout DIR                write a student's folder (docs/exercises.md)
  and the teacher's grading of a class: python exercises/gradebook.py DIR (gradebook.py)

The exit code is 0 when every checked exercise passes, 1 otherwise (2: a usage error, an answers
file that cannot be read, a handout folder that exists and is not empty). The cases are in
cases.py, beside this file. Each exercise runs in a worker process of its own for at most
sandbox.TIME_LIMIT seconds, and check.py compares what came back with the expected values, which
the worker never sees: the teacher's key (key.py) in the repository, sealed hashes (sealed.json,
seal.py) in a handout folder. An exit, a crash or an endless loop in a student's file fails that
exercise and the table goes on. It needs Linux or macOS. What the worker runs and how its values
are compared is in grade.py, how a file is run in isolation in sandbox.py (beside this file in a
handout, machinery/sandbox.py in the repository): you do not need to read them. The quiz is quiz.py.

To use the checks from Python: run_check(n, *functions) -> (passed, failure), in your own
process, and check(n, folder=...) -> (passed, failure), in a worker as above.
"""
import argparse
import functools
import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the files beside this one, however it is loaded
if not (Path(__file__).resolve().parent / "sandbox.py").is_file():  # a handout has its copy beside this
    sys.path.insert(1, str(Path(__file__).resolve().parent.parent / "machinery"))  # file; the repository, machinery/
import grade  # noqa: E402 (runs an exercise's cases in the worker, and judges what came back)
import quiz  # noqa: E402
import sandbox  # noqa: E402 (runs a function in a worker process of its own, with limits)
from cases import CASES, EXERCISES  # noqa: E402

HERE = Path(__file__).resolve().parent
SEALED = "sealed.json"  # a handout's sealed expected values (seal.py)


# ---------------------------------------------------------------- the expected values
# They stay in this process: the teacher's key (key.py) where it is beside this file (the
# repository), else the sealed values a handout holds (sealed.json).
def has_key(folder=HERE):
    return (Path(folder) / "key.py").is_file()


@functools.lru_cache(maxsize=None)
def expectations(n, folder=HERE):
    """Exercise n's expectations, one per case: grade.Open from the key, or seal.Sealed (read
    once: main's first check and each exercise's verdict share them)."""
    names = [name for name, _, _ in CASES[n](*[None] * len(EXERCISES[n][2]))]
    if has_key(folder):
        import key
        entries = key.expected(n)
        if [name for name, _, _ in entries] != names:
            raise quiz.CheckError(f"key.py's cases of exercise {n} are not cases.py's")
        return [grade.Open(value, near) for _, value, near in entries]
    import seal
    try:
        return seal.SealedFile(Path(folder) / SEALED).expectations(n, names)
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise quiz.CheckError(f"no expected values: neither the teacher's key.py nor a readable "
                              f"{SEALED} is beside check.py ({type(error).__name__}); ask your "
                              f"teacher for the handout folder") from None


# ---------------------------------------------------------------- running the checks
# check.py never runs a student's code in its own process: sandbox.py runs grade.check_exercise
# in a worker process of its own, for at most sandbox.TIME_LIMIT seconds, and check.py compares
# what came back with the expected values (grade.judge).
def run_check(n, *functions):
    """Run exercise n's cases on the given functions (two for exercise 4: k3_kl, grpo_loss) in
    this process: for functions you trust. Returns (passed, failure) as grade.judge does."""
    cases = CASES[n](*functions)
    return (grade.judge(n, cases, expectations(n), list(grade.outcomes(cases)))
            or (False, "stopped before every case ran"))


def check(n, solutions=False, folder=HERE):
    """(passed, first_failure) of exercise n, on the student's file or the project's code, in a
    worker process of its own, within sandbox.TIME_LIMIT seconds."""
    with Checker(solutions, folder) as checker:
        return checker.check(n)[:2]


class Checker:
    """One student's (or the project's) checks: the verdicts so far (a note on exercise 2 needs
    exercise 1's), run in a sandbox (its helper process and files; one may be shared), and
    judged against `expected` (n -> expectations: this folder's key or sealed values by default).
    `checker` is the folder whose grade.py the workers run."""

    def __init__(self, solutions=False, folder=HERE, expected=expectations, checker=HERE, box=None,
                 verdicts=None):
        self.solutions, self.folder = solutions, os.path.abspath(folder)
        self.expected, self.grade = expected, str(Path(checker) / "grade.py")
        self.own_box = box is None
        self.sandbox = box or sandbox.Sandbox(
            "check.py", warm=(self.grade, "warm", {"solutions": solutions}))
        self.verdicts = {} if verdicts is None else verdicts  # n -> verdict; a caller may share them

    def __enter__(self):
        return self

    def __exit__(self, *error):
        if self.own_box:
            self.sandbox.__exit__(*error)

    def check(self, n):
        """(passed, failure, printed) of exercise n. The failure of a file that imports another
        exercise's file gets a note when that file fails its own exercise."""
        passed, failure, used, printed = self.verdict(n)
        for m in used:
            if not passed and "not implemented" not in failure and not self.verdict(m)[0]:
                failure += (f"\nnote: this calls your {EXERCISES[m][1]}, "
                            f"which fails exercise {m}")
        return passed, failure, printed

    def verdict(self, n):
        if n not in self.verdicts:
            self.verdicts[n] = self.run(n)
        return self.verdicts[n]

    def run(self, n):
        """Exercise n in a fresh worker: (passed, failure, the other exercises its file imported,
        the last lines it printed)."""
        run = self.sandbox.run((self.grade, "check_exercise"),
                               dict(n=n, solutions=self.solutions, folder=self.folder))
        if run.problem:
            return False, run.problem, [], run.printed
        cases = CASES[n](*[None] * len(EXERCISES[n][2]))  # names and inputs only
        try:
            steps = read_steps(run.lines)
            passed, failure = grade.judge(n, cases, self.expected(n), steps["cases"]) or (False, "")
            if not failure:
                failure = self.unfinished(n, cases, steps, run)
            used = [m for m in steps["used"] if isinstance(m, int) and m in EXERCISES and m != n]
        except Exception:  # a report no honest worker writes
            return False, "its report could not be read", [], run.printed
        return passed and not failure, run.full if failure and run.full else failure, used, run.printed

    def unfinished(self, n, cases, steps, run):
        """Why the exercise fails although no case failed, or "" when its worker finished cleanly."""
        if not steps["loaded"]:
            loading = "the project's code" if self.solutions else EXERCISES[n][1]
            where = f"\nwhile loading {loading}"
        elif len(steps["cases"]) < len(cases):
            where = f"\nin the case: {cases[len(steps['cases'])][0]}"
        else:
            where = ""
        early = run.cut_short(where)
        if early:
            return early
        if len(steps["cases"]) < len(cases):
            return "stopped before every case was checked (did it change check.py's functions?)"
        return run.left_behind()


def read_steps(lines):
    """The worker's report lines (grade.check_exercise's): the case results in order, loaded, used."""
    steps = {"cases": [], "loaded": False, "used": []}
    for fields in lines:
        if "case" in fields:
            if fields["case"] == len(steps["cases"]):
                steps["cases"].append(fields)
        else:
            steps.update((key, fields[key]) for key in ("loaded", "used") if key in fields)
    return steps


def row(n, passed, first):
    """The table row of exercise n: its number, topic and result (the first line of a failure)."""
    return f" {n}  {EXERCISES[n][0]:<28} {'passed' if passed else 'failed: ' + first}"


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["quiz"]:
        return quiz.quiz_main(argv[1:])
    parser = argparse.ArgumentParser(
        description="Check the exercises (the ex*.py files beside check.py).",
        epilog="check.py quiz [--answers PATH]: check the quiz's numeric answers (quiz.md)")
    parser.add_argument("numbers", nargs="*", type=int, help="exercises to check (default: all)")
    parser.add_argument("--solutions", action="store_true",
                        help="check the project's own functions instead of the ex*.py files")
    parser.add_argument("--dir", default=str(HERE), help="folder with the ex*.py files")
    parser.add_argument("--handout", metavar="DIR",
                        help="write a student's folder DIR (new or empty): stubs, checker, sealed "
                             "expected values, quiz, README with the order")
    args = parser.parse_args(argv)
    teacher = [flag for flag, given in (("--solutions", args.solutions), ("--handout", args.handout))
               if given]
    if teacher and not has_key():
        parser.error(f"{teacher[0]} needs the teacher's key.py beside check.py: run "
                     f"exercises/check.py in the repository")
    if args.handout is not None:
        import handout
        return handout.handout_main(args.handout)
    numbers = args.numbers or sorted(EXERCISES)
    unknown = [n for n in numbers if n not in EXERCISES]
    if unknown:
        parser.error(f"no exercise {unknown[0]}: choose from 1 to {len(EXERCISES)}")
    if not hasattr(os, "fork"):
        parser.error("check.py forks a worker per exercise: run it on Linux or macOS (or WSL)")
    try:
        expectations(numbers[0])  # a folder with neither the key nor sealed values: one line
    except quiz.CheckError as error:
        print(f"check.py: {error}", file=sys.stderr)
        return 2
    print("checking the project's functions" if args.solutions else f"checking {args.dir}")
    print(f" #  {'topic':<28} result")
    passed, done = 0, []
    signal.signal(signal.SIGTERM, stopped)  # as Ctrl-C: the rows so far, and what was not checked
    try:
        with Checker(args.solutions, args.dir) as checker:
            for n in numbers:
                ok, report, output = checker.check(n)
                passed += ok
                done.append(n)
                first, *rest = [visible(line) for line in report.split("\n")]  # the student's error is text
                print(row(n, ok, first))
                for line in rest + [f"printed: {line}" for line in output]:
                    print(f"{'':6}{line}")
    except KeyboardInterrupt as e:
        left = ", ".join(str(n) for n in numbers if n not in done)
        print(f"\n{str(e) or 'interrupted (Ctrl-C)'}: not checked: {left}", file=sys.stderr)
        return 143 if str(e).startswith("stopped") else 130
    print(f"{passed}/{len(numbers)} passed")
    return 0 if passed == len(numbers) else 1


def visible(line):
    """A line as text: a control character (an escape sequence, a carriage return) is shown as its
    escape, \\x1b, so a student's exception message cannot clear the screen or redraw a row."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in line)


def stopped(signum, frame):
    raise KeyboardInterrupt("stopped (SIGTERM)")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # `check.py | head`: the reader has gone; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    except KeyboardInterrupt:  # Ctrl-C before the table: one line, not a traceback
        print("\ninterrupted (Ctrl-C): no exercise was checked", file=sys.stderr)
        sys.exit(130)
