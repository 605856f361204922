"""The teacher's key: the expected value of every case of cases.py, each worked out by hand in a
comment beside it; the project's own functions that solve each exercise (`check.py --solutions`);
and the quiz's numeric answers, computed with the project's functions.

Not for students: `check.py --handout` leaves this file out and seals the expected values instead
(seal.py), and gradebook.py grades a class with it. A case's entry is (name, expected), or
(name, expected, near misses): a list of (a known wrong value, what that value is) whose note is
printed when a failure gave that value. The names follow cases.py's order (a test checks it).

It imports cases.py; check.py, quiz.py, grade.py (for --solutions), handout.py and gradebook.py import it.
"""
import math
import sys
from pathlib import Path

from cases import t64

ROOT = Path(__file__).resolve().parent.parent  # the repository: the project's functions are there


def project():
    """Put the repository on sys.path, for the project's modules."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))


# ---------------------------------------------------------------- exercise 1: group_norm
KEY = {1: [
    # mean 2, deviations -1, +1; unbiased std sqrt((1 + 1) / (2 - 1)) = 1.414214
    # -> -+1 / (1.414214 + 0.0001) = -+0.707057   (biased std 1 would give -+0.9999)
    ("two samples", [[-0.707057, 0.707057]]),
    # mean 2, deviations -2, -1, 3; var (4 + 1 + 9) / 2 = 7, std 2.645751 (+ 0.0001)
    # -> -2 / 2.645851, -1 / 2.645851, 3 / 2.645851
    ("three samples", [[-0.755900, -0.377950, 1.133851]]),
    # row 1 as above; row 2: mean 2, deviations -+2, std sqrt(8) = 2.828427
    # -> -+2 / 2.828527 = -+0.707082: each row is normalised on its own
    ("two groups", [[-0.707057, 0.707057], [-0.707082, 0.707082]]),
    # mean 0.0005, deviations -+0.0005, std 0.000707107 (+ 0.0001 = 0.000807107)
    # -> -+0.0005 / 0.000807107 = -+0.619497   (without the 1e-4: -+0.707107)
    ("small spread, eps matters", [[-0.619497, 0.619497]]),
    # std 0: nothing to learn from this group
    ("equal rewards", [[0, 0, 0]]),
    ("equal rewards in one of two groups", [[0, 0], [-0.707057, 0.707057]]),
    # one sample: the unbiased std divides by G - 1 = 0
    ("one sample (G = 1)", [[0], [0]]),
]}

# ---------------------------------------------------------------- exercise 2: turn_advantages
# Hand values (unbiased std + 1e-4, as in exercise 1):
#   norm([1, 2, 3]) : mean 2, std 1                       -> [-1, 0, 1] / 1.0001
A = 1 / 1.0001  # 0.999900
#   norm([0, 0, 3]) : mean 1, var (1 + 1 + 4) / 2 = 3, std 1.732051 -> [-1, -1, 2] / 1.732151
B = [-0.577317, -0.577317, 1.154634]
#   norm([0, 1, 5]) : exercise 1, "three samples"
C = [-0.755900, -0.377950, 1.133851]
#   norm([1, 3]) = -norm([3, 1]) = [-0.707057, 0.707057]
D = 0.707057
KEY[2] = [
    ("float64 out", "torch.float64"),
    # R^O = [1, 3] -> norm = [-D, D] on both turns; the turn rewards are ignored
    ("or, K = 2", [[[-D, -D], [D, D]]]),
    # R^T + R^O = [4 + 1, 0 + 3] = [5, 3]: mean 4, deviations +-1, std sqrt(2) -> [D, -D]
    # (the outcome alone would say [-D, D])
    ("mr, K = 2", [[[D, D], [-D, -D]]]),
    # A_1 = norm(R^T) + norm(R^O) = [-A + B0, 0 + B1, A + B2], A_2 = norm(R^O) = B
    ("mt, K = 2", [[[-1.577217, B[0]], [-0.577317, B[1]], [2.154534, B[2]]]]),
    # alpha = 0.5: A_1 = norm(R^T) + 0.5 norm(R^O) = [-A + B0 / 2, B1 / 2, A + B2 / 2]
    #   = [-0.999900 - 0.288658, -0.288658, 0.999900 + 0.577317];  A_2 = norm(R^O) = B
    ("mt, K = 2, alpha = 0.5", [[[-1.288558, B[0]], [-0.288658, B[1]], [1.577217, B[2]]]]),
    # K = 3: R^T_1 = [1, 2, 3], R^T_2 = [0, 0, 3], R^O = [0, 1, 5]; alpha = 1:
    # A_1 = norm(R^T_1) + norm(R^T_2) + norm(R^O) = [-A + B0 + C0, B1 + C1, A + B2 + C2]
    # A_2 = norm(R^T_2) + norm(R^O) = [B0 + C0, B1 + C1, B2 + C2];  A_3 = norm(R^O) = C
    ("mt, K = 3", [[[-2.333117, -1.333217, C[0]], [-0.955267, -0.955267, C[1]],
                    [3.288384, 2.288484, C[2]]]]),
    # same rewards, alpha = 0.5:
    # A_1 = norm(R^T_1) + 0.5 norm(R^T_2) + 0.25 norm(R^O), A_2 = norm(R^T_2) + 0.5 norm(R^O)
    ("mt, K = 3, alpha = 0.5", [[[-1.477534, -0.955267, C[0]], [-0.383146, -0.766292, C[1]],
                                 [1.860680, 1.721559, C[2]]]]),
    # R^T_1 + R^T_2 + R^O = [1 + 0 + 3, 2 + 0 + 2, 3 + 3 + 1] = [4, 4, 7]
    # -> mean 5, deviations [-1, -1, 2] as for [0, 0, 3]: B
    ("mr, K = 3", [[[b, b, b] for b in B]]),
    # two groups: group 1 R^O = [1, 3], group 2 R^O = [3, 1] (R^T equal inside each group)
    ("two groups", [[[-D, -D], [D, D]], [[D, D], [-D, -D]]]),
    ("equal rewards", [[[0, 0], [0, 0], [0, 0]]]),
    ("one sample (G = 1)", [[[0, 0]]]),
]

# ---------------------------------------------------------------- exercise 3: token_advantages
KEY[3] = [
    # prompt (0, 0), then turn 1: A_1 = 0.5 on its tokens
    ("one turn", ([0, 0, 0.5, 0.5], [0, 0, 1, 1])),
    # prompt, turn 1, tool result (environment, 0), turn 2
    ("two turns, tool result between",
     ([0, 0, 0.5, 0.5, 0, 0, -1, -1, -1], [0, 0, 1, 1, 0, 0, 1, 1, 1])),
    ("K = 3 turns", ([0, 1.5, 0, -0.25, 0, 2.0, 2.0], [0, 1, 0, 1, 0, 1, 1])),
    # the mask says who wrote the token: A_1 = 0 still trains (mask 1)
    ("zero advantage keeps mask 1", ([0, 0, 0], [0, 1, 1])),
    ("only prompt tokens", ([0, 0, 0], [0, 0, 0])),
    ("empty sample", ([], [])),
]

# ---------------------------------------------------------------- exercise 4: k3_kl, grpo_loss
AVERAGES = {"token": "the token mean over all trained tokens",
            "seq": "the per-sequence mean of eq. 3 (each row's token mean, then the mean over rows)"}


def other_average(loss_type, value):
    """The near miss of a case that averages one way: the other average's value, and a note."""
    other = "seq" if loss_type == "token" else "token"
    return [(value, f"this is {AVERAGES[other]}; loss_type={loss_type!r} asks for "
                    f"{AVERAGES[loss_type]}")]


# ratio 1 and beta 0 below unless said otherwise: every trained token's term is its A, and the
# loss is minus the average of the trained A's, averaged one way or the other:
#   token: sum over all trained tokens / their number;  seq: mean over rows of each row's mean
KEY[4] = [
    # d = ref - logp = [0, 1, -1] -> exp(d) - d - 1 = [0, e - 2, 1/e] = [0, 0.718282, 0.367879]
    ("k3_kl", [[0, 0.718282, 0.367879]]),
    # r = 1 everywhere, beta 0: loss = -(1 - 0.5) / 2 = -0.25
    ("ratio 1, beta 0", -0.25),
    # only the two trained tokens count: -(2 + 1) / 2 = -1.5 (not -(5 + 2 + 1) / 3, not -3 / 3)
    ("masked prompt token", -1.5),
    # token mean: -(1 + 2 + 3) / 3 = -2;  eq. 3's mean of the row means: -(1.5 + 3) / 2 = -2.25
    ("batch of two rows, token", -2.0, other_average("token", -2.25)),
    # r = 1.5, A = 1, eps_high 0.28: min(1.5, 1.28) = 1.28 -> loss -1.28
    ("clip active above", -1.28),
    # r = 0.5, A = -1, eps_low 0.2: min(-0.5, 0.8 * -1) = -0.8 -> loss 0.8
    ("clip active below", 0.8),
    # r = 0.5, A = 1: min(0.5, 0.8) = 0.5; r = 1.5, A = -1: min(-1.5, -1.2) = -1.5
    # -> loss -(0.5 - 1.5) / 2 = 0.5: the min keeps the unclipped, worse value
    ("clip inactive (pessimistic side)", 0.5),
    # r = 1; k3 = [0, e - 2] (see "k3_kl"); beta 0.1:
    # -( (1 - 0) + (1 - 0.1 * 0.718282) ) / 2 = -(1 + 0.928172) / 2 = -0.964086
    ("beta 0.1", -0.964086),
    # beta 0: the reference does not matter, loss -(2 + 1) / 2 = -1.5
    ("beta 0 ignores the reference", -1.5),
    # loss = -(r1 * 1 + r2 * -2) / 2 with r = exp(logp), at r = 1: d/dlogp = [-0.5, 1.0];
    # the masked token gets 0
    ("gradient", [[-0.5, 1.0, 0.0]]),
    # r = 1.5 with A = 1 and r = 0.5 with A = -1 sit on their clip bound: constant, gradient 0;
    # the third token (r = 1, A = 1) gets -1 / 3
    ("clipped tokens get no gradient", [[0, 0, -0.333333]]),
    # rows of 5 and 1 trained tokens, A = +1 and -2: token -(5 - 2) / 6 = -0.5
    # (eq. 3: -(1 - 2) / 2 = +0.5: the one token weighs as much as the five)
    ("rows of 5 and 1 trained tokens, token", -0.5, other_average("token", 0.5)),
    # a row with no trained token adds nothing: -(2 + 1 + 3 + 5) / 4 = -2.75
    ("a fully masked row, token", -2.75, other_average("token", -1.666667)),
    # token weight 1/3 on each trained token: -A / 3
    ("gradient of two rows, token", [[-0.333333, 0.666667], [-1.333333, 0.0]],
     other_average("token", [[-0.25, 0.5], [-2.0, 0.0]])),
    # loss_type "seq": eq. 3 as printed. One row: its token mean, -(2 + 1) / 2 = -1.5
    ("one sample, seq", -1.5),
    # row means 1.5 and 3 -> -(1.5 + 3) / 2 = -2.25 (the token mean would be -2)
    ("batch of two rows, seq", -2.25, other_average("seq", -2.0)),
    # row means +1 and -2 -> -(1 - 2) / 2 = +0.5 (the token mean -0.5: the other sign)
    ("rows of 5 and 1 trained tokens, seq", 0.5, other_average("seq", -0.5)),
    # row means 2, 3 and, for the row with no trained token, 0 (its sum 0 over max(0, 1)):
    # -(2 + 3 + 0) / 3 = -1.666667; G = 3 counts it
    ("a fully masked row, seq", -1.666667,
     other_average("seq", -2.75)
     + [(-2.5, "a row with no trained token still counts in G: it adds 0 to the sum and 1 to G")]),
    # weight 1 / (|o_i| G): row 1 1 / (2 * 2) = 0.25, row 2 1 / (1 * 2) = 0.5 -> -A * weight
    ("gradient of two rows, seq", [[-0.25, 0.5], [-2.0, 0.0]],
     other_average("seq", [[-0.333333, 0.666667], [-1.333333, 0.0]])),
]

# ---------------------------------------------------------------- exercise 5: tree_step
KEY[5] = [
    ("rewards, in candidate order", [0.5, 2.0, 1.0]),
    ("chosen = argmax", 1),
    ("negative rewards", 1),
    ("ties go to the lowest index", 1),
    ("all rewards equal", 0),
    ("one candidate (K = 1)", ([-1.0], 0)),
    # env.turn = 0 turns played: this is turn 1
    ("key at the first turn", (7, "planner", 1)),
    # env.turn = 2 turns played: this is turn 3
    ("key at a later turn", (3, "executor", 3)),
    # still its 2 turns: nothing was played on it
    ("original env not acted on", (2, [("planner", "x"), ("planner", "x")])),
    ("branch is a copy", "a copy of env"),
    # the chosen copy played one act, the best text "2", after the 2 turns it was copied with
    ("branch is the chosen candidate's copy",
     (3, [("planner", "x"), ("planner", "x"), ("planner", "2")])),
]

# ---------------------------------------------------------------- exercise 6: exact_match_reward
KEY[6] = [
    ("right answer", 1.0),
    ("wrong answer", 0.0),
    # "  paris \n" -> "paris";  "PARIS " -> "paris"
    ("case and whitespace", 1.0),
    ("a substring is not exact", 0.0),
    ("several aliases", 1.0),
    ("no <answer> tag", 0.0),
    ("unclosed <answer> tag", 0.0),
    ("empty answer", 0.0),
    ("blank answer, blank alias", 0.0),
    # the last turn has no answer: the answer of the earlier turn counts
    ("answer in an earlier turn", 1.0),
    # the last answer counts, not the first
    ("answer in the last turn", 0.0),
    # a tool result ("user") is not the model's answer
    ("answer only in a tool result", 0.0),
    ("no assistant turn", 0.0),
]

# ---------------------------------------------------------------- exercise 7: bm25_scores
# N = 3 documents, |d| = 3, 2, 4, avgdl = 9 / 3 = 3
# idf(cat) = idf(dog) = ln(1 + (3 - 2 + 0.5) / (2 + 0.5)) = ln(1.6) = 0.470004   (n = 2)
# idf(ran)            = ln(1 + (3 - 1 + 0.5) / (1 + 0.5)) = ln(8/3) = 0.980829   (n = 1)
# length part k1 * (1 - b + b |d| / avgdl), k1 1.5, b 0.75: |d| 2 -> 1.125, 3 -> 1.5, 4 -> 1.875
# tf part tf * 2.5 / (tf + length part):
#   cat in doc 0: 2.5 / 2.5 = 1;   cat in doc 2: 5 / 3.875 = 1.290323
#   dog in doc 1: 2.5 / 2.125 = 1.176471;   dog and ran in doc 2: 2.5 / 2.875 = 0.869565
# score = idf * tf part:  cat [0.470004, 0, 0.606456]   dog [0, 0.552945, 0.408699]
#                         ran [0, 0, 0.852895]
KEY[7] = [
    ("one term, default k1 and b", [0.470004, 0.0, 0.606456]),
    # the scores of the two terms add up: doc 2 = 0.408699 + 0.852895
    ("two terms", [0.0, 0.552945, 1.261594]),
    # distinct terms: "cat" twice counts once -> cat + dog
    ("repeated query term", [0.470004, 0.552945, 1.015155]),
    ("term in no document", [0.0, 0.0, 0.0]),
    ("empty query", [0.0, 0.0, 0.0]),
    # b = 0: no length normalisation, cat in doc 2: 5 / (2 + 1.5) = 1.428571 -> * 0.470004
    ("b = 0", [0.470004, 0.0, 0.671434]),
    # k1 1.2, b 0.5: length part 1.2 * (0.5 + 0.5 |d| / 3): |d| 3 -> 1.2, 4 -> 1.4
    # cat in doc 0: 2.2 / 2.2 = 1; in doc 2: 4.4 / 3.4 = 1.294118 -> * 0.470004
    ("k1 = 1.2, b = 0.5", [0.470004, 0.0, 0.608240]),
    # N = 2, avgdl = (2 + 0) / 2 = 1; idf(cat) = ln(1 + 1.5 / 1.5) = ln 2 = 0.693147;
    # length part 1.5 * (0.25 + 0.75 * 2) = 2.625; tf part 2.5 / 3.625 = 0.689655
    ("an empty document", [0.478033, 0.0]),
]


def expected(n):
    """Exercise n's expectations in cases.py's order: [(name, expected value, near misses)]."""
    return [(entry[0], entry[1], entry[2] if len(entry) > 2 else []) for entry in KEY[n]]


# ---------------------------------------------------------------- the project's functions (--solutions)
def ex1_solution():
    project()
    import mtgrpo
    return mtgrpo.group_norm,


def ex2_solution():
    project()
    import mtgrpo
    return mtgrpo.turn_advantages,


def ex3_solution():
    project()
    import mtgrpo
    return mtgrpo.token_advantages,


def ex4_solution():
    project()
    import loss

    def grpo_loss(logp, old_logp, ref_logp, adv, mask, beta, eps_low, eps_high, loss_type="token"):
        weight = step_weights(mask, loss_type)
        # the project returns (loss, kl, clipped)
        return loss.grpo_loss(logp, old_logp, ref_logp, adv, mask, beta, eps_low, eps_high,
                              weight)[0]
    return loss.k3_kl, grpo_loss


def step_weights(mask, loss_type):
    """The weight of each token in loss.py's average `loss_type` when mask (B, T) is the whole step
    (the loss is -sum(weight * term)): loss.loss_weights itself, so the two cannot drift apart."""
    project()
    import loss
    return loss.loss_weights(mask, loss_type, mask.sum().item(), len(mask))


def ex5_solution():
    project()
    import atgrpo

    def tree_step(env, env_id, role, candidates):
        group, branch = atgrpo.tree_step(env, env_id, role, candidates)
        return group.key, group.rewards, group.chosen, branch
    return tree_step,


def ex6_solution():
    project()
    import rewards
    return rewards.exact_match_reward,


def ex7_solution():
    project()
    import retrieval

    def bm25_scores(query_terms, doc_terms, k1=1.5, b=0.75):
        docs = [{"title": "", "text": " ".join(d)} for d in doc_terms]
        return retrieval.BM25Retriever(docs, k1=k1, b=b).scores(" ".join(query_terms)).tolist()
    return bm25_scores,


SOLUTIONS = {1: ex1_solution, 2: ex2_solution, 3: ex3_solution, 4: ex4_solution, 5: ex5_solution,
             6: ex6_solution, 7: ex7_solution}


# ---------------------------------------------------------------- the quiz's answers (docs/quiz.md)
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


def quiz_answers():
    """Every numeric answer of the quiz, {id: value}, from the project's own functions."""
    project()
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
