"""`check.py --handout DIR`: a student's folder, with the stubs, the checker, the expected values
sealed (seal.py), the quiz without its answer key, a blank answers file and a README with the
order (docs/exercises.md). No expected value and no worked answer goes into it: the teacher's key
(key.py), this file and gradebook.py stay in the repository."""
import json
import os
import secrets
import shutil
import sys
import tempfile
from pathlib import Path

import grade
import key
import sandbox
import seal
from cases import CASES, EXERCISES
from quiz import QUIZ_ANSWERS, CheckError, quiz_template

HERE = Path(__file__).resolve().parent
FILES = ("check.py", "cases.py", "grade.py", "quiz.py", "sandbox.py", "seal.py")  # the checker's files
SOURCES = {"sandbox.py": Path(sandbox.__file__)}  # where a file comes from, if not from this folder
SEALED = "sealed.json"


# ---------------------------------------------------------------- the handout (--handout DIR)
# The project's file that solves each exercise: a student does the exercise before reading it.
SOLVED_BY = {1: "mtgrpo.py", 2: "mtgrpo.py", 3: "mtgrpo.py", 4: "loss.py", 5: "atgrpo.py",
             6: "rewards.py", 7: "retrieval.py"}
ANSWER_KEY = "## Answer key"  # docs/quiz.md's last section, left out of a handout


def handout_readme():
    """The handout's README.md: the commands, then the exercises in order, each solving file
    named only after the exercises it solves."""
    steps, step = [], 0
    for n in sorted(EXERCISES):
        step += 1
        topic, filename, _ = EXERCISES[n]
        steps.append(f"{step}. `{filename}`: {topic}. Check it: `python check.py {n}`.")
        if SOLVED_BY.get(n + 1) != SOLVED_BY[n]:
            done = [m for m in sorted(EXERCISES) if SOLVED_BY[m] == SOLVED_BY[n]]
            which = (f"exercise {done[0]}" if len(done) == 1
                     else f"exercises {done[0]} to {done[-1]}")
            steps.append(f"   Then read the project's `{SOLVED_BY[n]}`, its answer to {which}, "
                         f"and compare it with yours.")
    steps.append(f"{step + 1}. The quiz, `quiz.md`: write its numeric answers in `{QUIZ_ANSWERS}`, "
                 f"then `python check.py quiz`.")
    return "\n".join([
        "# Exercises: MT-GRPO and AT-GRPO from their equations", "",
        "Seven functions to write, each from a paper's equation, in the `ex*.py` files of this",
        "folder, then a quiz. Each file has the paper reference, the equation, the function's",
        "signature and hints; its body is `raise NotImplementedError`. Edit only the `ex*.py` files",
        f"and `{QUIZ_ANSWERS}`. You need Python 3 on Linux or macOS (on Windows, WSL), and PyTorch",
        "for exercises 1 to 5.",
        "", "```bash",
        "python check.py          # every exercise: a table of passed / failed",
        "python check.py 3        # one exercise (several numbers work too)",
        f"python check.py quiz     # the quiz's numeric answers, from {QUIZ_ANSWERS}",
        "```", "",
        "A failing exercise shows its first failing case: its name, its input and what came back.",
        "The expected values are sealed (`sealed.json` holds salted hashes, not the numbers): work",
        "the case out by hand from its input. `cases.py` holds the cases. `sandbox.py` runs your",
        "file in a process of its own and `grade.py` compares what it returned; you need not read",
        "them, nor `quiz.py` and `seal.py`. Your teacher grades your files with the teacher's own",
        "copy of the cases and the expected values, not with this folder.", "",
        "## In this order", "",
        "Do each exercise before you read the project's file that solves it: write the function",
        "from the equation first, then read how the project wrote it (in the project's",
        "repository, which your teacher has).", "",
        *steps, ""])


def project_values(n):
    """Exercise n's expected values as the project's functions compute them (full precision),
    each checked against the key's hand value: [(name, value, near misses)]."""
    cases = CASES[n](*key.SOLUTIONS[n]())
    entries = key.expected(n)
    values = []
    for (name, run, inputs), (_, hand, near) in zip(cases, entries):
        result = grade.outcome(run, inputs)
        got = grade.unplain(result.get("got"))
        if "got" not in result or not grade.close(got, hand):
            raise CheckError(f"exercise {n}, case {name!r}: the project's functions disagree with "
                             f"key.py; `python exercises/check.py --solutions` shows how")
        values.append((name, got, near))
    return values


def handout_files():
    """{file name: text} of a handout folder; CheckError (one line) when one cannot be made."""
    for _, filename, names in EXERCISES.values():
        if (HERE / filename).read_text().count("raise NotImplementedError") < len(names):
            raise CheckError(f"{HERE / filename} is not a stub any more (a function without raise "
                             f"NotImplementedError): `git checkout -- exercises/` restores it")
    quiz_page = key.ROOT / "docs" / "quiz.md"
    if not quiz_page.is_file():
        raise CheckError(f"no {quiz_page}: --handout needs the repository")
    sealed = seal.sealed_file({n: project_values(n) for n in sorted(EXERCISES)},
                              key.quiz_answers(), secrets.token_hex(16))
    files = {name: SOURCES.get(name, HERE / name).read_text() for name in
             [filename for _, filename, _ in EXERCISES.values()] + list(FILES)}
    files["quiz.md"] = quiz_page.read_text().split("\n" + ANSWER_KEY)[0].rstrip() + "\n"
    files[QUIZ_ANSWERS] = quiz_template()
    files[SEALED] = json.dumps(sealed, indent=1) + "\n"
    files["README.md"] = handout_readme()
    return files


def write_handout(folder):
    """Write a student's folder (see docs/exercises.md): every file is made first in a new folder
    beside it, which then takes its name, so a failure leaves nothing half-written. CheckError
    (one line) when it cannot."""
    folder = Path(folder)
    if folder.is_symlink() or (folder.exists() and (not folder.is_dir() or any(folder.iterdir()))):
        raise CheckError(f"{folder} exists and is not an empty folder: name a new one")
    files = handout_files()
    parent = folder.absolute().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        draft = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=parent))
    except OSError as error:
        raise CheckError(f"cannot write in {parent}: {error.strerror}") from None
    try:
        for name, text in files.items():
            (draft / name).write_text(text)
        os.chmod(draft, 0o755)
        if folder.exists():
            folder.rmdir()  # empty, as checked above
        draft.rename(folder)
    except OSError as error:
        shutil.rmtree(draft, ignore_errors=True)
        raise CheckError(f"cannot write {folder}: {error.strerror or error}") from None


def handout_main(folder):
    try:
        write_handout(folder)
    except CheckError as error:
        print(f"check.py --handout: {error}", file=sys.stderr)
        return 2
    print(f"wrote {folder}: README.md (the order), the seven ex*.py stubs, "
          f"{', '.join(FILES)}, {SEALED} (the expected values, sealed), "
          f"quiz.md (without its answer key), {QUIZ_ANSWERS}")
    return 0
