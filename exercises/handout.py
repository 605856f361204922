"""`check.py --handout DIR`: a student's folder, with the stubs, the checker, the quiz without its
answer key, a blank answers file and a README with the order (docs/exercises.md)."""
import json
import shutil
import sys
from pathlib import Path

from cases import EXERCISES
from quiz import QUIZ_ANSWERS, QUIZ_EXPECTED, ROOT, CheckError, quiz_expected, quiz_template

HERE = Path(__file__).resolve().parent
FILES = ("check.py", "cases.py", "grade.py", "quiz.py", "handout.py", "sandbox.py")  # the checker's files


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
        f"and `{QUIZ_ANSWERS}`. You need Python 3 and PyTorch, on Linux or macOS (on Windows, WSL).",
        "", "```bash",
        "python check.py          # every exercise: a table of passed / failed",
        "python check.py 3        # one exercise (several numbers work too)",
        f"python check.py quiz     # the quiz's numeric answers, from {QUIZ_ANSWERS}",
        "```", "",
        "A failing exercise shows its first failing case: the input, the expected value and what",
        "came back. `cases.py` holds the cases, each with its arithmetic in a comment: read it",
        "when you are stuck. `sandbox.py` runs your file in a process of its own and `grade.py`",
        "compares what it returned; you need not read them, nor `quiz.py` and `handout.py`.", "",
        "## In this order", "",
        "Do each exercise before you read the project's file that solves it: write the function",
        "from the equation first, then read how the project wrote it (in the project's",
        "repository, which your teacher has).", "",
        *steps, ""])


def write_handout(folder):
    """Write a student's folder (see docs/exercises.md); CheckError (one line) when it cannot."""
    folder = Path(folder)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise CheckError(f"{folder} exists and is not an empty folder: name a new one")
    for _, filename, names in EXERCISES.values():
        if (HERE / filename).read_text().count("raise NotImplementedError") < len(names):
            raise CheckError(f"{HERE / filename} is not a stub any more (a function without raise "
                            f"NotImplementedError): `git checkout -- exercises/` restores it")
    quiz = ROOT / "docs" / "quiz.md"
    if not quiz.is_file():
        raise CheckError(f"no {quiz}: --handout needs the repository")
    questions = quiz.read_text().split("\n" + ANSWER_KEY)[0].rstrip() + "\n"
    expected = quiz_expected()
    folder.mkdir(parents=True, exist_ok=True)
    for _, filename, _ in EXERCISES.values():
        shutil.copyfile(HERE / filename, folder / filename)
    for filename in FILES:
        shutil.copyfile(HERE / filename, folder / filename)
    (folder / "quiz.md").write_text(questions)
    (folder / QUIZ_ANSWERS).write_text(quiz_template())
    (folder / QUIZ_EXPECTED).write_text(json.dumps(expected, indent=1) + "\n")
    (folder / "README.md").write_text(handout_readme())


def handout_main(folder):
    try:
        write_handout(folder)
    except CheckError as error:
        print(f"check.py --handout: {error}", file=sys.stderr)
        return 2
    print(f"wrote {folder}: README.md (the order), the seven ex*.py stubs, "
          f"{', '.join(FILES)}, "
          f"quiz.md (without its answer key), {QUIZ_ANSWERS}, {QUIZ_EXPECTED}")
    return 0
