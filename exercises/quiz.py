"""The quiz's numeric answers (docs/quiz.md): the questions and `check.py quiz`, which checks a
student's answers file against the teacher's key (key.py, the project's own functions) where it
is beside this file, or against the sealed answers of a handout folder (sealed.json, seal.py)."""
import argparse
import os
import re
import stat
import sys
from fractions import Fraction
from pathlib import Path

HERE = Path(__file__).resolve().parent


# ---------------------------------------------------------------- the quiz (docs/quiz.md)
# Each numeric answer of the quiz: (its id in docs/quiz.md, what it asks).
QUIZ = [
    ("1", "equal rewards [0.5 x 4]: each advantage"),
    ("2a", "GRPO-MR: A_2 of sample 1"),
    ("2b", "MT-GRPO: A_2 of sample 1"),
    ("3", "AT-GRPO: groups in one step"),
    ("4", "mu = 1: the ratio r_t"),
    ("5a", "token mean: the loss"),
    ("5b", "per-sequence mean (eq. 3): the loss"),
    ("6a", "k3 at equal log-probs"),
    ("6b", "k3 at pi 0.5, pi_ref 0.25"),
    ("7a", "tool result: trained tokens |T|"),
    ("7b", "tool result: the loss"),
    ("8", "one sample (G = 1): the advantage"),
    ("9", "mu = 2, r = 1.5, A = +1: the term"),
    ("10", "rewards [10, 11]: advantage of sample 2"),
]
QUIZ_ANSWERS = "quiz_answers.txt"  # the student's answers, beside check.py
QUIZ_FORMAT = '"question: number", e.g. "1: 0.25" or "1: -2/3"'


class CheckError(Exception):
    """What check.py reports in one line, with exit code 2: a quiz answers file it cannot read,
    no expected values to check against, a handout folder it will not write."""


def quiz_checker(folder=HERE):
    """right(id, number) -> bool: against the key's answers (three decimals are enough) or the
    sealed ones; CheckError when neither is beside check.py."""
    if (folder / "key.py").is_file():
        import key
        expected = key.quiz_answers()
        return lambda k, got: quiz_right(got, expected[k])
    import seal
    try:
        sealed = seal.SealedFile(folder / "sealed.json")
        assert all(isinstance(sealed.quiz[k], list) for k, _ in QUIZ)
    except (OSError, ValueError, KeyError, TypeError, AssertionError):
        raise CheckError("the quiz's answers need the teacher's key.py (in the repository) or the "
                         "sealed.json of a handout folder beside check.py") from None
    return sealed.quiz_right


def quiz_right(got, expected):
    """Three decimals are enough: got, rounded to three, is the expected value rounded or cut to
    three (the same rule as the sealed answers', seal.quiz_texts)."""
    import seal
    return seal.text(got, seal.QUIZ_DECIMALS) in seal.quiz_texts(expected)


def read_quiz_answers(path):
    """{id: number or None (left blank)} from an answers file: one "id: number" per line; blank
    lines and lines starting with # are skipped. CheckError (one line) for anything else."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO with no writer: no hang
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):  # a FIFO, /dev/zero: refused before a byte is read
                raise CheckError(f"{path} is not a regular file: write your answers in a text file, "
                                 f"{QUIZ_FORMAT} (docs/quiz.md)")
            data = f.read(ANSWERS_LIMIT + 1)
        if len(data) > ANSWERS_LIMIT:
            raise CheckError(f"{path} is larger than {ANSWERS_LIMIT // 1000} kB: the answers file holds one short "
                             f"line a question, {QUIZ_FORMAT} (docs/quiz.md)")
        text = data.decode()
    except (OSError, UnicodeDecodeError) as error:
        raise CheckError(f"cannot read the answers file {path} ({type(error).__name__}): write "
                        f"one answer a line, {QUIZ_FORMAT} (docs/quiz.md)") from None
    return parse_quiz_answers(text, path)


ANSWERS_LIMIT = 100_000  # bytes: a few lines of numbers


def parse_quiz_answers(text, path):
    """read_quiz_answers on a file's text; path names the file in the errors."""
    ids, answers, where = [key for key, _ in QUIZ], {}, {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        at = f"{path} line {number}"
        key, colon, value = (part.strip() for part in line.partition(":"))
        if not colon:
            raise CheckError(f"{at}: {line[:40]!r} is not {QUIZ_FORMAT}")
        if key not in ids:
            raise CheckError(f"{at}: there is no numeric question {key[:20]!r} (they are "
                            f"{', '.join(ids)})")
        if key in answers:
            raise CheckError(f"{at}: {key} is answered twice (first on line {where[key]})")
        answers[key], where[key] = number_in(value, at) if value else None, number
    return answers


def number_in(text, at):
    """The number written as text: decimals or a fraction (-2/3); CheckError otherwise."""
    number = text.replace("\u2212", "-").replace(" ", "")  # a typographic minus is a minus
    if len(number) <= 40 and re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)(/\d*[1-9]\d*)?", number):
        return float(Fraction(number))
    raise CheckError(f"{at}: {text[:40]!r} is not a number (decimals, or a fraction like -2/3)")


def quiz_template():
    """The blank answers file: the format, then one line per numeric question."""
    return ("# Quiz answers (quiz.md): one numeric answer a line, " + QUIZ_FORMAT + ".\n"
            "# Three decimals are enough. Leave an answer blank to skip it.\n"
            "# Check them:  python check.py quiz   (in the repository: python exercises/check.py quiz)\n"
            + "".join(f"{key}:\n" for key, _ in QUIZ))


def quiz_main(argv):
    """check.py quiz [--answers PATH]: a table of right / wrong per numeric answer. Exit code 0
    when all are right, 1 otherwise, 2 for an answers file that cannot be read (one line)."""
    parser = argparse.ArgumentParser(prog="check.py quiz",
                                     description="Check the quiz's numeric answers (docs/quiz.md).")
    parser.add_argument("--answers", default=str(HERE / QUIZ_ANSWERS),
                        help=f"the answers file (default: {QUIZ_ANSWERS} beside check.py)")
    args = parser.parse_args(argv)
    try:
        answers = read_quiz_answers(args.answers)
        right_answer = quiz_checker()
    except CheckError as error:
        print(f"check.py quiz: {error}", file=sys.stderr)
        return 2
    print(f"checking the quiz answers in {args.answers}")
    print(f" #    {'question':<40} result")
    right = 0
    for key, label in QUIZ:
        got = answers.get(key)
        ok = got is not None and right_answer(key, got)
        right += ok
        result = "no answer" if got is None else "right" if ok else f"wrong (you wrote {got:g})"
        print(f" {key:<4} {label:<40} {result}")
    print(f"{right}/{len(QUIZ)} right")
    return 0 if right == len(QUIZ) else 1
