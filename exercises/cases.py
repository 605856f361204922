"""The exercises' cases: every expected number is worked out by hand, in a comment beside it.

check.py runs them (`python exercises/check.py`); read this file when you are stuck. Each exercise
has one section: its cases, then how to call the project's function (its solution). A case is
(name, run, inputs, expected): run(**inputs) calls your function and returns what is compared
with expected; inputs are plain data (lists of numbers go in as float64 tensors), and a failing
case prints them with the expected value and what came back. A case may end with a list of known
wrong answers, (value, note): a failure that gave that value prints the note too. Floats are
compared with a tolerance of 1e-5 relative + 1e-6 absolute: tight enough to see the 1e-4 of
group_norm.

This file imports no other file of the exercises: check.py, grade.py, quiz.py and handout.py import it.
"""
import math


# number: (topic, file, the functions the file must define)
EXERCISES = {
    1: ("group normalisation", "ex1_group_norm.py", ["group_norm"]),
    2: ("turn advantages (OR/MR/MT)", "ex2_turn_advantages.py", ["turn_advantages"]),
    3: ("token advantages and mask", "ex3_token_advantages.py", ["token_advantages"]),
    4: ("clipped GRPO loss + k3 KL", "ex4_grpo_loss.py", ["k3_kl", "grpo_loss"]),
    5: ("AT-GRPO tree step", "ex5_tree_step.py", ["tree_step"]),
    6: ("exact-match reward", "ex6_exact_match.py", ["exact_match_reward"]),
    7: ("BM25 scores", "ex7_bm25.py", ["bm25_scores"]),
}


def t64(rows):
    """A float64 tensor: the checks feed float64 so hand values to 6 digits are exact enough."""
    import torch  # here, not at the top: only the workers that run the cases need torch
    return torch.tensor(rows, dtype=torch.float64)


# ---------------------------------------------------------------- exercise 1: group_norm
def ex1_cases(group_norm):
    def norm(rewards):
        return group_norm(t64(rewards))

    return [
        # mean 2, deviations -1, +1; unbiased std sqrt((1 + 1) / (2 - 1)) = 1.414214
        # -> -+1 / (1.414214 + 0.0001) = -+0.707057   (biased std 1 would give -+0.9999)
        ("two samples", norm, dict(rewards=[[1.0, 3.0]]), [[-0.707057, 0.707057]]),
        # mean 2, deviations -2, -1, 3; var (4 + 1 + 9) / 2 = 7, std 2.645751 (+ 0.0001)
        # -> -2 / 2.645851, -1 / 2.645851, 3 / 2.645851
        ("three samples", norm, dict(rewards=[[0.0, 1.0, 5.0]]),
         [[-0.755900, -0.377950, 1.133851]]),
        # row 1 as above; row 2: mean 2, deviations -+2, std sqrt(8) = 2.828427
        # -> -+2 / 2.828527 = -+0.707082: each row is normalised on its own
        ("two groups", norm, dict(rewards=[[1.0, 3.0], [0.0, 4.0]]),
         [[-0.707057, 0.707057], [-0.707082, 0.707082]]),
        # mean 0.0005, deviations -+0.0005, std 0.000707107 (+ 0.0001 = 0.000807107)
        # -> -+0.0005 / 0.000807107 = -+0.619497   (without the 1e-4: -+0.707107)
        ("small spread, eps matters", norm, dict(rewards=[[0.0, 0.001]]), [[-0.619497, 0.619497]]),
        # std 0: nothing to learn from this group
        ("equal rewards", norm, dict(rewards=[[0.1, 0.1, 0.1]]), [[0, 0, 0]]),
        ("equal rewards in one of two groups", norm, dict(rewards=[[0.7, 0.7], [1.0, 3.0]]),
         [[0, 0], [-0.707057, 0.707057]]),
        # one sample: the unbiased std divides by G - 1 = 0
        ("one sample (G = 1)", norm, dict(rewards=[[2.0], [5.0]]), [[0], [0]]),
    ]


def ex1_solution():
    import mtgrpo
    return mtgrpo.group_norm,


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


def ex2_cases(turn_advantages):
    def adv(turn_rewards, outcome_rewards, algo, alpha=1.0):
        return turn_advantages(t64(turn_rewards), t64(outcome_rewards), algo, alpha)

    def dtype(**inputs):
        return str(adv(**inputs).dtype)

    return [
        # the docstring's promise: a float64 tensor (groups, G, K)
        ("float64 out", dtype, dict(turn_rewards=[[[4.0], [0.0]]], outcome_rewards=[[1.0, 3.0]],
                                    algo="or"), "torch.float64"),
        # R^O = [1, 3] -> norm = [-D, D] on both turns; the turn rewards are ignored
        ("or, K = 2", adv, dict(turn_rewards=[[[4.0], [0.0]]], outcome_rewards=[[1.0, 3.0]],
                                algo="or"), [[[-D, -D], [D, D]]]),
        # R^T + R^O = [4 + 1, 0 + 3] = [5, 3]: mean 4, deviations +-1, std sqrt(2) -> [D, -D]
        # (the outcome alone would say [-D, D])
        ("mr, K = 2", adv, dict(turn_rewards=[[[4.0], [0.0]]], outcome_rewards=[[1.0, 3.0]],
                                algo="mr"), [[[D, D], [-D, -D]]]),
        # A_1 = norm(R^T) + norm(R^O) = [-A + B0, 0 + B1, A + B2], A_2 = norm(R^O) = B
        ("mt, K = 2", adv, dict(turn_rewards=[[[1.0], [2.0], [3.0]]],
                                outcome_rewards=[[0.0, 0.0, 3.0]], algo="mt"),
         [[[-1.577217, B[0]], [-0.577317, B[1]], [2.154534, B[2]]]]),
        # K = 3: R^T_1 = [1, 2, 3], R^T_2 = [0, 0, 3], R^O = [0, 1, 5]; alpha = 1:
        # A_1 = norm(R^T_1) + norm(R^T_2) + norm(R^O) = [-A + B0 + C0, B1 + C1, A + B2 + C2]
        # A_2 = norm(R^T_2) + norm(R^O) = [B0 + C0, B1 + C1, B2 + C2];  A_3 = norm(R^O) = C
        ("mt, K = 3", adv, dict(turn_rewards=[[[1.0, 0.0], [2.0, 0.0], [3.0, 3.0]]],
                                outcome_rewards=[[0.0, 1.0, 5.0]], algo="mt"),
         [[[-2.333117, -1.333217, C[0]], [-0.955267, -0.955267, C[1]],
           [3.288384, 2.288484, C[2]]]]),
        # same rewards, alpha = 0.5:
        # A_1 = norm(R^T_1) + 0.5 norm(R^T_2) + 0.25 norm(R^O), A_2 = norm(R^T_2) + 0.5 norm(R^O)
        ("mt, K = 3, alpha = 0.5", adv, dict(turn_rewards=[[[1.0, 0.0], [2.0, 0.0], [3.0, 3.0]]],
                                             outcome_rewards=[[0.0, 1.0, 5.0]], algo="mt",
                                             alpha=0.5),
         [[[-1.477534, -0.955267, C[0]], [-0.383146, -0.766292, C[1]],
           [1.860680, 1.721559, C[2]]]]),
        # R^T_1 + R^T_2 + R^O = [1 + 0 + 3, 2 + 0 + 2, 3 + 3 + 1] = [4, 4, 7]
        # -> mean 5, deviations [-1, -1, 2] as for [0, 0, 3]: B
        ("mr, K = 3", adv, dict(turn_rewards=[[[1.0, 0.0], [2.0, 0.0], [3.0, 3.0]]],
                                outcome_rewards=[[3.0, 2.0, 1.0]], algo="mr"),
         [[[b, b, b] for b in B]]),
        # two groups: group 1 R^O = [1, 3], group 2 R^O = [3, 1] (R^T equal inside each group)
        ("two groups", adv, dict(turn_rewards=[[[0.5], [0.5]], [[0.0], [0.0]]],
                                 outcome_rewards=[[1.0, 3.0], [3.0, 1.0]], algo="mt"),
         [[[-D, -D], [D, D]], [[D, D], [-D, -D]]]),
        ("equal rewards", adv, dict(turn_rewards=[[[0.2], [0.2], [0.2]]],
                                    outcome_rewards=[[1.9, 1.9, 1.9]], algo="mt"),
         [[[0, 0], [0, 0], [0, 0]]]),
        ("one sample (G = 1)",
         adv, dict(turn_rewards=[[[0.7]]], outcome_rewards=[[1.0]], algo="mr"),
         [[[0, 0]]]),
    ]


def ex2_solution():
    import mtgrpo
    return mtgrpo.turn_advantages,


# ---------------------------------------------------------------- exercise 3: token_advantages
def ex3_cases(token_advantages):
    def tok(turn_of_token, turn_adv):
        adv, mask = token_advantages(turn_of_token, turn_adv)
        return list(adv), list(mask)

    return [
        # prompt (0, 0), then turn 1: A_1 = 0.5 on its tokens
        ("one turn", tok, dict(turn_of_token=[0, 0, 1, 1], turn_adv=[0.5]),
         ([0, 0, 0.5, 0.5], [0, 0, 1, 1])),
        # prompt, turn 1, tool result (environment, 0), turn 2
        ("two turns, tool result between",
         tok, dict(turn_of_token=[0, 0, 1, 1, 0, 0, 2, 2, 2], turn_adv=[0.5, -1.0]),
         ([0, 0, 0.5, 0.5, 0, 0, -1, -1, -1], [0, 0, 1, 1, 0, 0, 1, 1, 1])),
        ("K = 3 turns", tok, dict(turn_of_token=[0, 1, 0, 2, 0, 3, 3], turn_adv=[1.5, -0.25, 2.0]),
         ([0, 1.5, 0, -0.25, 0, 2.0, 2.0], [0, 1, 0, 1, 0, 1, 1])),
        # the mask says who wrote the token: A_1 = 0 still trains (mask 1)
        ("zero advantage keeps mask 1", tok, dict(turn_of_token=[0, 1, 1], turn_adv=[0.0]),
         ([0, 0, 0], [0, 1, 1])),
        ("only prompt tokens", tok, dict(turn_of_token=[0, 0, 0], turn_adv=[0.7]),
         ([0, 0, 0], [0, 0, 0])),
        ("empty sample", tok, dict(turn_of_token=[], turn_adv=[0.7]), ([], [])),
    ]


def ex3_solution():
    import mtgrpo
    return mtgrpo.token_advantages,


# ---------------------------------------------------------------- exercise 4: k3_kl, grpo_loss
LN15, LN05 = math.log(1.5), math.log(0.5)  # ratios r = 1.5 and r = 0.5 against old_logp = 0
AVERAGES = {"token": "the token mean over all trained tokens",
            "seq": "the per-sequence mean of eq. 3 (each row's token mean, then the mean over rows)"}


def loss_inputs(logp, adv, mask, old_logp=0.0, ref_logp=0.0, beta=0.0, eps_low=0.2,
                eps_high=0.2, loss_type="token"):
    """Every argument of grpo_loss for one case; a number for old_logp or ref_logp means that
    value on every token."""
    return dict(logp=logp, old_logp=old_logp, ref_logp=ref_logp, adv=adv, mask=mask, beta=beta,
                eps_low=eps_low, eps_high=eps_high, loss_type=loss_type)


def other_average(loss_type, value):
    """The near miss of a case that averages one way: the other average's value, and a note."""
    other = "seq" if loss_type == "token" else "token"
    return [(value, f"this is {AVERAGES[other]}; loss_type={loss_type!r} asks for "
                    f"{AVERAGES[loss_type]}")]


def ex4_cases(k3_kl, grpo_loss):
    def kl(logp, ref_logp):
        return k3_kl(t64(logp), t64(ref_logp))

    def tensors(logp, old_logp, ref_logp, adv, mask, **rest):
        import torch
        logp = t64(logp)
        old_logp, ref_logp = (torch.full_like(logp, x) if isinstance(x, float) else t64(x)
                              for x in (old_logp, ref_logp))
        return logp, old_logp, ref_logp, t64(adv), t64(mask), *rest.values()

    def run_loss(**inputs):
        return grpo_loss(*tensors(**inputs))

    def grad(**inputs):
        """The gradient of the loss with respect to logp."""
        logp, *rest = tensors(**inputs)
        logp.requires_grad_(True)
        grpo_loss(logp, *rest).backward()
        return logp.grad

    # ratio 1 and beta 0 below unless said otherwise: every trained token's term is its A, and
    # the loss is minus the average of the trained A's, averaged one way or the other:
    #   token: sum over all trained tokens / their number;  seq: mean over rows of each row's mean
    two_rows = ([[0.0] * 3] * 2, [[1.0, 2.0, 9.0], [3.0, 9.0, 9.0]], [[1, 1, 0], [1, 0, 0]])
    five_and_one = ([[0.0] * 5] * 2, [[1.0] * 5, [-2.0, 9.0, 9.0, 9.0, 9.0]],
                    [[1] * 5, [1, 0, 0, 0, 0]])
    empty_row = ([[0.0] * 3] * 3, [[2.0, 9.0, 9.0], [1.0, 3.0, 5.0], [4.0, 4.0, 4.0]],
                 [[1, 0, 0], [1, 1, 1], [0, 0, 0]])
    grad_rows = ([[0.0, 0.0]] * 2, [[1.0, -2.0], [4.0, 9.0]], [[1, 1], [1, 0]])
    return [
        # d = ref - logp = [0, 1, -1] -> exp(d) - d - 1 = [0, e - 2, 1/e] = [0, 0.718282, 0.367879]
        ("k3_kl", kl, dict(logp=[[0.0, -1.0, 1.0]], ref_logp=[[0.0, 0.0, 0.0]]),
         [[0, 0.718282, 0.367879]]),
        # r = 1 everywhere, beta 0: loss = -(1 - 0.5) / 2 = -0.25
        ("ratio 1, beta 0", run_loss, loss_inputs([[0.0, 0.0]], [[1.0, -0.5]], [[1, 1]]), -0.25),
        # only the two trained tokens count: -(2 + 1) / 2 = -1.5 (not -(5 + 2 + 1) / 3, not -3 / 3)
        ("masked prompt token",
         run_loss, loss_inputs([[0.0, 0.0, 0.0]], [[5.0, 2.0, 1.0]], [[0, 1, 1]]), -1.5),
        # token mean: -(1 + 2 + 3) / 3 = -2;  eq. 3's mean of the row means: -(1.5 + 3) / 2 = -2.25
        ("batch of two rows, token", run_loss, loss_inputs(*two_rows), -2.0,
         other_average("token", -2.25)),
        # r = 1.5, A = 1, eps_high 0.28: min(1.5, 1.28) = 1.28 -> loss -1.28
        ("clip active above",
         run_loss, loss_inputs([[LN15]], [[1.0]], [[1]], eps_high=0.28), -1.28),
        # r = 0.5, A = -1, eps_low 0.2: min(-0.5, 0.8 * -1) = -0.8 -> loss 0.8
        ("clip active below",
         run_loss, loss_inputs([[LN05]], [[-1.0]], [[1]], eps_high=0.28), 0.8),
        # r = 0.5, A = 1: min(0.5, 0.8) = 0.5; r = 1.5, A = -1: min(-1.5, -1.2) = -1.5
        # -> loss -(0.5 - 1.5) / 2 = 0.5: the min keeps the unclipped, worse value
        ("clip inactive (pessimistic side)",
         run_loss, loss_inputs([[LN05, LN15]], [[1.0, -1.0]], [[1, 1]]), 0.5),
        # r = 1; k3 = [0, e - 2] (see "k3_kl"); beta 0.1:
        # -( (1 - 0) + (1 - 0.1 * 0.718282) ) / 2 = -(1 + 0.928172) / 2 = -0.964086
        ("beta 0.1",
         run_loss, loss_inputs([[-1.0, -1.0]], [[1.0, 1.0]], [[1, 1]], old_logp=[[-1.0, -1.0]],
                               ref_logp=[[-1.0, 0.0]], beta=0.1), -0.964086),
        # beta 0: the reference does not matter, loss -(2 + 1) / 2 = -1.5
        ("beta 0 ignores the reference",
         run_loss, loss_inputs([[0.0, 0.0]], [[2.0, 1.0]], [[1, 1]], ref_logp=[[-3.0, 2.0]]), -1.5),
        # loss = -(r1 * 1 + r2 * -2) / 2 with r = exp(logp), at r = 1: d/dlogp = [-0.5, 1.0];
        # the masked token gets 0
        ("gradient", grad, loss_inputs([[0.0, 0.0, 0.0]], [[1.0, -2.0, 4.0]], [[1, 1, 0]]),
         [[-0.5, 1.0, 0.0]]),
        # r = 1.5 with A = 1 and r = 0.5 with A = -1 sit on their clip bound: constant, gradient 0;
        # the third token (r = 1, A = 1) gets -1 / 3
        ("clipped tokens get no gradient",
         grad, loss_inputs([[LN15, LN05, 0.0]], [[1.0, -1.0, 1.0]], [[1, 1, 1]]),
         [[0, 0, -0.333333]]),
        # rows of 5 and 1 trained tokens, A = +1 and -2: token -(5 - 2) / 6 = -0.5
        # (eq. 3: -(1 - 2) / 2 = +0.5: the one token weighs as much as the five)
        ("rows of 5 and 1 trained tokens, token", run_loss, loss_inputs(*five_and_one), -0.5,
         other_average("token", 0.5)),
        # a row with no trained token adds nothing: -(2 + 1 + 3 + 5) / 4 = -2.75
        ("a fully masked row, token", run_loss, loss_inputs(*empty_row), -2.75,
         other_average("token", -1.666667)),
        # token weight 1/3 on each trained token: -A / 3
        ("gradient of two rows, token", grad, loss_inputs(*grad_rows),
         [[-0.333333, 0.666667], [-1.333333, 0.0]],
         other_average("token", [[-0.25, 0.5], [-2.0, 0.0]])),
        # loss_type "seq": eq. 3 as printed. One row: its token mean, -(2 + 1) / 2 = -1.5
        ("one sample, seq",
         run_loss, loss_inputs([[0.0, 0.0, 0.0]], [[2.0, 1.0, 7.0]], [[1, 1, 0]], loss_type="seq"),
         -1.5),
        # row means 1.5 and 3 -> -(1.5 + 3) / 2 = -2.25 (the token mean would be -2)
        ("batch of two rows, seq", run_loss, loss_inputs(*two_rows, loss_type="seq"), -2.25,
         other_average("seq", -2.0)),
        # row means +1 and -2 -> -(1 - 2) / 2 = +0.5 (the token mean -0.5: the other sign)
        ("rows of 5 and 1 trained tokens, seq",
         run_loss, loss_inputs(*five_and_one, loss_type="seq"), 0.5,
         other_average("seq", -0.5)),
        # row means 2, 3 and, for the row with no trained token, 0 (its sum 0 over max(0, 1)):
        # -(2 + 3 + 0) / 3 = -1.666667; G = 3 counts it
        ("a fully masked row, seq", run_loss, loss_inputs(*empty_row, loss_type="seq"), -1.666667,
         other_average("seq", -2.75)
         + [(-2.5, "a row with no trained token still counts in G: it adds 0 to the sum and 1 "
                   "to G")]),
        # weight 1 / (|o_i| G): row 1 1 / (2 * 2) = 0.25, row 2 1 / (1 * 2) = 0.5 -> -A * weight
        ("gradient of two rows, seq", grad, loss_inputs(*grad_rows, loss_type="seq"),
         [[-0.25, 0.5], [-2.0, 0.0]],
         other_average("seq", [[-0.333333, 0.666667], [-1.333333, 0.0]])),
    ]


def ex4_solution():
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
    import loss
    return loss.loss_weights(mask, loss_type, mask.sum().item(), len(mask))


# ---------------------------------------------------------------- exercise 5: tree_step
class FakeEnv:
    """A stand-in environment: the reward of a text is the number written in it, every act is
    remembered in history and completes a turn, and the env keeps a list of the copies made
    from it."""

    def __init__(self, turn=0, history=()):
        self.turn = turn  # turns completed so far
        self.history = list(history)  # (role, text) of every act so far
        self.copies = []  # every env.copy() made from this env, in order

    def copy(self):
        twin = FakeEnv(self.turn, self.history)
        self.copies.append(twin)
        return twin

    def act(self, role, text):
        self.history.append((role, text))
        self.turn += 1
        return float(text)

    def __repr__(self):
        return f"FakeEnv(turn={self.turn}, history={self.history})"


def env_inputs(texts, turn=0, env_id=7, role="planner"):
    """One case of exercise 5: tree_step(env, env_id, role, candidates) on a FakeEnv that has
    played `turn` turns (each ("planner", "x")), one candidate per text."""
    return dict(texts=texts, turn=turn, env_id=env_id, role=role)


def ex5_cases(tree_step):
    def step(texts, turn, env_id, role):
        """The env and tree_step's (key, rewards, chosen, branch)."""
        env = FakeEnv(turn, [("planner", "x")] * turn)
        candidates = [([1, 2, 3], [10 + j], text) for j, text in enumerate(texts)]
        return env, tree_step(env, env_id, role, candidates)

    def key(**inputs):
        return step(**inputs)[1][0]

    def rewards(**inputs):
        return list(step(**inputs)[1][1])

    def chosen(**inputs):
        return step(**inputs)[1][2]

    def rewards_and_chosen(**inputs):
        return rewards(**inputs), chosen(**inputs)

    def original_after(**inputs):  # (turn, history) of the env tree_step was given, after the call
        env, _ = step(**inputs)
        return env.turn, env.history

    def branch_is(**inputs):
        env, (_, _, _, branch) = step(**inputs)
        if branch is env:
            return "the original env"
        return "a copy of env" if any(branch is c for c in env.copies) else repr(branch)

    def branch_after(**inputs):  # (turn, history) of the branch tree_step returned
        _, (_, _, _, branch) = step(**inputs)
        return branch.turn, branch.history

    return [
        ("rewards, in candidate order", rewards, env_inputs(["0.5", "2", "1"]), [0.5, 2.0, 1.0]),
        ("chosen = argmax", chosen, env_inputs(["0.5", "2", "1"]), 1),
        ("negative rewards", chosen, env_inputs(["-2", "-0.5", "-1"]), 1),
        ("ties go to the lowest index", chosen, env_inputs(["1", "3", "3", "2"]), 1),
        ("all rewards equal", chosen, env_inputs(["0", "0", "0"]), 0),
        ("one candidate (K = 1)", rewards_and_chosen, env_inputs(["-1"]), ([-1.0], 0)),
        # env.turn = 0 turns played: this is turn 1
        ("key at the first turn", key, env_inputs(["1", "2"]), (7, "planner", 1)),
        # env.turn = 2 turns played: this is turn 3
        ("key at a later turn", key, env_inputs(["1", "2"], turn=2, env_id=3, role="executor"),
         (3, "executor", 3)),
        # still its 2 turns: nothing was played on it
        ("original env not acted on", original_after, env_inputs(["0.5", "2", "1"], turn=2),
         (2, [("planner", "x"), ("planner", "x")])),
        ("branch is a copy", branch_is, env_inputs(["0.5", "2", "1"]), "a copy of env"),
        # the chosen copy played one act, the best text "2", after the 2 turns it was copied with
        ("branch is the chosen candidate's copy",
         branch_after, env_inputs(["0.5", "2", "1"], turn=2),
         (3, [("planner", "x"), ("planner", "x"), ("planner", "2")])),
    ]


def ex5_solution():
    import atgrpo

    def tree_step(env, env_id, role, candidates):
        group, branch = atgrpo.tree_step(env, env_id, role, candidates)
        return group.key, group.rewards, group.chosen, branch
    return tree_step,


# ---------------------------------------------------------------- exercise 6: exact_match_reward
def said(*turns):
    """A completion: assistant and user (environment) messages alternating, assistant first."""
    return [{"role": "assistant" if i % 2 == 0 else "user", "content": text}
            for i, text in enumerate(turns)]


def ex6_cases(em):
    return [
        ("right answer",
         em, dict(completion=said("<reasoning>France.</reasoning>\n<answer>Paris</answer>"),
                  answers=["Paris"]), 1.0),
        ("wrong answer", em, dict(completion=said("<answer>Lyon</answer>"), answers=["Paris"]),
         0.0),
        # "  paris \n" -> "paris";  "PARIS " -> "paris"
        ("case and whitespace", em, dict(completion=said("<answer>  paris \n</answer>"),
                                         answers=["PARIS "]), 1.0),
        ("a substring is not exact", em, dict(completion=said("<answer>Paris, France</answer>"),
                                              answers=["Paris"]), 0.0),
        ("several aliases", em, dict(completion=said("<answer>clinton</answer>"),
                                     answers=["Bill Clinton", "W. J. Clinton", "Clinton"]), 1.0),
        ("no <answer> tag", em, dict(completion=said("<reasoning>It is Paris</reasoning>\nParis"),
                                     answers=["Paris"]), 0.0),
        ("unclosed <answer> tag", em, dict(completion=said("<answer>Paris"), answers=["Paris"]),
         0.0),
        ("empty answer", em, dict(completion=said("<answer>   </answer>"), answers=["Paris"]), 0.0),
        ("blank answer, blank alias", em, dict(completion=said("<answer></answer>"),
                                               answers=["", "Paris"]), 0.0),
        # the last turn has no answer: the answer of the earlier turn counts
        ("answer in an earlier turn",
         em, dict(completion=said("<answer>Paris</answer>", "<result>ok</result>",
                                  "<reasoning>ok</reasoning>"), answers=["Paris"]), 1.0),
        # the last answer counts, not the first
        ("answer in the last turn",
         em, dict(completion=said("<answer>Paris</answer>", "<result>no</result>",
                                  "<answer>Lyon</answer>"), answers=["Paris"]), 0.0),
        # a tool result ("user") is not the model's answer
        ("answer only in a tool result",
         em, dict(completion=said("<tool>{}</tool>", "<result><answer>Paris</answer></result>",
                                  "<reasoning>?</reasoning>"), answers=["Paris"]), 0.0),
        ("no assistant turn", em, dict(completion=said(), answers=["Paris"]), 0.0),
    ]


def ex6_solution():
    import rewards
    return rewards.exact_match_reward,


# ---------------------------------------------------------------- exercise 7: bm25_scores
# N = 3 documents, |d| = 3, 2, 4, avgdl = 9 / 3 = 3
DOCS = [["cat", "sat", "mat"], ["dog", "sat"], ["cat", "cat", "dog", "ran"]]
# idf(cat) = idf(dog) = ln(1 + (3 - 2 + 0.5) / (2 + 0.5)) = ln(1.6) = 0.470004   (n = 2)
# idf(ran)            = ln(1 + (3 - 1 + 0.5) / (1 + 0.5)) = ln(8/3) = 0.980829   (n = 1)
# length part k1 * (1 - b + b |d| / avgdl), k1 1.5, b 0.75: |d| 2 -> 1.125, 3 -> 1.5, 4 -> 1.875
# tf part tf * 2.5 / (tf + length part):
#   cat in doc 0: 2.5 / 2.5 = 1;   cat in doc 2: 5 / 3.875 = 1.290323
#   dog in doc 1: 2.5 / 2.125 = 1.176471;   dog and ran in doc 2: 2.5 / 2.875 = 0.869565
# score = idf * tf part:  cat [0.470004, 0, 0.606456]   dog [0, 0.552945, 0.408699]
#                         ran [0, 0, 0.852895]


def ex7_cases(bm25_scores):
    def bm25(query_terms, doc_terms, **k1_and_b):
        return list(bm25_scores(query_terms, doc_terms, **k1_and_b))

    return [
        ("one term, default k1 and b", bm25, dict(query_terms=["cat"], doc_terms=DOCS),
         [0.470004, 0.0, 0.606456]),
        # the scores of the two terms add up: doc 2 = 0.408699 + 0.852895
        ("two terms", bm25, dict(query_terms=["dog", "ran"], doc_terms=DOCS, k1=1.5, b=0.75),
         [0.0, 0.552945, 1.261594]),
        # distinct terms: "cat" twice counts once -> cat + dog
        ("repeated query term",
         bm25, dict(query_terms=["cat", "dog", "cat"], doc_terms=DOCS, k1=1.5, b=0.75),
         [0.470004, 0.552945, 1.015155]),
        ("term in no document", bm25, dict(query_terms=["zebra"], doc_terms=DOCS, k1=1.5, b=0.75),
         [0.0, 0.0, 0.0]),
        ("empty query", bm25, dict(query_terms=[], doc_terms=DOCS, k1=1.5, b=0.75),
         [0.0, 0.0, 0.0]),
        # b = 0: no length normalisation, cat in doc 2: 5 / (2 + 1.5) = 1.428571 -> * 0.470004
        ("b = 0", bm25, dict(query_terms=["cat"], doc_terms=DOCS, k1=1.5, b=0.0),
         [0.470004, 0.0, 0.671434]),
        # k1 1.2, b 0.5: length part 1.2 * (0.5 + 0.5 |d| / 3): |d| 3 -> 1.2, 4 -> 1.4
        # cat in doc 0: 2.2 / 2.2 = 1; in doc 2: 4.4 / 3.4 = 1.294118 -> * 0.470004
        ("k1 = 1.2, b = 0.5", bm25, dict(query_terms=["cat"], doc_terms=DOCS, k1=1.2, b=0.5),
         [0.470004, 0.0, 0.608240]),
        # N = 2, avgdl = (2 + 0) / 2 = 1; idf(cat) = ln(1 + 1.5 / 1.5) = ln 2 = 0.693147;
        # length part 1.5 * (0.25 + 0.75 * 2) = 2.625; tf part 2.5 / 3.625 = 0.689655
        ("an empty document",
         bm25, dict(query_terms=["cat"], doc_terms=[["cat", "dog"], []], k1=1.5, b=0.75),
         [0.478033, 0.0]),
    ]


def ex7_solution():
    import retrieval

    def bm25_scores(query_terms, doc_terms, k1=1.5, b=0.75):
        docs = [{"title": "", "text": " ".join(d)} for d in doc_terms]
        return retrieval.BM25Retriever(docs, k1=k1, b=b).scores(" ".join(query_terms)).tolist()
    return bm25_scores,


CASES = {1: ex1_cases, 2: ex2_cases, 3: ex3_cases, 4: ex4_cases, 5: ex5_cases, 6: ex6_cases,
         7: ex7_cases}
SOLUTIONS = {1: ex1_solution, 2: ex2_solution, 3: ex3_solution, 4: ex4_solution, 5: ex5_solution,
             6: ex6_solution, 7: ex7_solution}
