"""The quiz's numeric answers (docs/quiz.md): the questions, their expected values computed with
the project's own functions, and `check.py quiz`, which checks a student's answers file."""
import argparse
import json
import math
import re
import sys
from fractions import Fraction
from pathlib import Path

from cases import ex4_solution, t64

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent  # the repository, when this file is in its exercises/ folder


# ---------------------------------------------------------------- the quiz (docs/quiz.md)
# Each numeric answer of the quiz: (its id in docs/quiz.md, what it asks). quiz_expected()
# computes the answers with the project's own functions (project_quiz_answers), or, in a handout
# folder without the project, reads the ones --handout computed (quiz_expected.json).
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
QUIZ_EXPECTED = "quiz_expected.json"  # a handout's expected answers, beside check.py
QUIZ_FORMAT = '"question: number", e.g. "1: 0.25" or "1: -2/3"'


class CheckError(Exception):
    """What check.py reports in one line, with exit code 2: a quiz answers file it cannot read,
    no way to compute the quiz's answers, a handout folder it will not write."""


class QuizLevel:
    """Question 3's environment for atgrpo.tree_rollout: two agents, three turns, reward = the
    number in the text; nothing else."""
    roles = ("planner", "executor")
    team_share = 0.0  # no shared team term

    def __init__(self, turn=0):
        self.turn = turn

    @property
    def done(self):
        return self.turn >= 3

    def copy(self):
        return QuizLevel(self.turn)

    def messages(self, role):
        return [{"role": "user", "content": f"turn {self.turn + 1}, {role}"}]

    def act(self, role, text):
        self.turn += role == self.roles[-1]  # a turn ends once every agent has acted
        return float(text)


def project_quiz_answers():
    """Every numeric answer of the quiz, {id: value}, from the project's own functions."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import torch

    import atgrpo
    import loss
    import mtgrpo
    _, grpo_loss = ex4_solution()

    def norm(rows):
        return mtgrpo.group_norm(t64(rows))

    def loss_at_ratio_1(adv, mask, loss_type="token"):
        logp = torch.zeros_like(t64(adv))
        return grpo_loss(logp, logp, logp, t64(adv), t64(mask), 0.0, 0.2, 0.2, loss_type).item()

    def second_turn_adv(algo):  # R^T = [1, 0], R^O = [1, 1]: A_2 of sample 1
        return mtgrpo.turn_advantages([[[1.0], [0.0]]], [[1.0, 1.0]], algo)[0, 0, 1].item()

    def sampler(role, message_lists):  # K = 4 candidates per prompt, rewards 0, 1, 2, 0, ...
        return [([1], [2], str(j % 3)) for j in range(len(message_lists))]

    groups, _ = atgrpo.tree_rollout([QuizLevel() for _ in range(4)], [0, 1, 2, 3], sampler, K=4)
    logp = torch.randn(3, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    old = logp.detach()  # mu = 1: pi_old is the policy itself (loss.accumulate)
    # prompt 2 tokens | turn 1 (model) 4 | tool result 3 | turn 2 (model) 2;  A_1 = 1, A_2 = -0.5
    adv7, mask7 = mtgrpo.token_advantages([0] * 2 + [1] * 4 + [0] * 3 + [2] * 2, [1.0, -0.5])
    rows5 = ([[2.0, 2.0, 2.0], [-1.0, 0.0, 0.0]], [[1, 1, 1], [1, 0, 0]])  # 3 and 1 trained tokens
    ratio_15 = torch.tensor([math.log(1.5)], dtype=torch.float64)
    term9, _ = loss.clipped_surrogate(ratio_15, torch.zeros(1, dtype=torch.float64),
                                      torch.ones(1, dtype=torch.float64), 0.2, 0.2)
    answers = {
        "1": norm([[0.5] * 4])[0, 0].item(),
        "2a": second_turn_adv("mr"),
        "2b": second_turn_adv("mt"),
        "3": len({g.key for g in groups}),
        "4": torch.exp(logp - old).mean().item(),
        "5a": loss_at_ratio_1(*rows5),
        "5b": loss_at_ratio_1(*rows5, loss_type="seq"),
        "6a": loss.k3_kl(t64([-1.3]), t64([-1.3])).item(),
        "6b": loss.k3_kl(t64([math.log(0.5)]), t64([math.log(0.25)])).item(),
        "7a": sum(mask7),
        "7b": loss_at_ratio_1([adv7], [mask7]),
        "8": norm([[5.0]])[0, 0].item(),
        "9": term9.item(),
        "10": norm([[10.0, 11.0]])[0, 1].item(),
    }
    return {key: float(value) for key, value in answers.items()}


def project_here():
    """The project's code is in the folder above this one (check.py in the repository)."""
    return all((ROOT / name).is_file() for name in ("mtgrpo.py", "loss.py", "atgrpo.py"))


def quiz_expected():
    """{id: expected value}: computed with the project's functions where the project is, else
    the values a handout saved beside this file."""
    if project_here():
        return project_quiz_answers()
    try:
        saved = json.loads((HERE / QUIZ_EXPECTED).read_text())
        return {key: float(saved[key]) for key, _ in QUIZ}
    except (OSError, ValueError, KeyError, TypeError):
        raise CheckError(f"the expected answers need the project's code (run check.py in the "
                        f"repository) or the {QUIZ_EXPECTED} that --handout writes") from None


def quiz_right(got, expected):
    """Three decimals are enough: rounded or cut, either passes."""
    return abs(got - expected) <= 1e-3 * (1 + abs(expected))


def read_quiz_answers(path):
    """{id: number or None (left blank)} from an answers file: one "id: number" per line; blank
    lines and lines starting with # are skipped. CheckError (one line) for anything else."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise CheckError(f"cannot read the answers file {path} ({type(error).__name__}): write "
                        f"one answer a line, {QUIZ_FORMAT} (docs/quiz.md)") from None
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
        expected = quiz_expected()
    except CheckError as error:
        print(f"check.py quiz: {error}", file=sys.stderr)
        return 2
    print(f"checking the quiz answers in {args.answers}")
    print(f" #    {'question':<40} result")
    right = 0
    for key, label in QUIZ:
        got = answers.get(key)
        ok = got is not None and quiz_right(got, expected[key])
        right += ok
        result = "no answer" if got is None else "right" if ok else f"wrong (you wrote {got:g})"
        print(f" {key:<4} {label:<40} {result}")
    print(f"{right}/{len(QUIZ)} right")
    return 0 if right == len(QUIZ) else 1
