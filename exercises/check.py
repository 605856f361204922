"""Checker for the exercises: every case below has its expected numbers worked out by hand.

    python exercises/check.py              check every exercise (your ex*.py files)
    python exercises/check.py 3            check exercise 3 only (several numbers work too)
    python exercises/check.py --dir PATH   check the ex*.py files of another folder
    python exercises/check.py --solutions  check the project's own functions (must all pass)

The exit code is 0 when every checked exercise passes, 1 otherwise. Floats are compared with a
tolerance of 1e-5 relative + 1e-6 absolute: tight enough to see the 1e-4 of group_norm. Each
exercise runs in a worker process of its own for at most TIME_LIMIT seconds, and check.py
compares what came back: an exit, a crash or an endless loop in a student's file fails that
exercise and the table goes on (see "running the checks" below). It needs Linux or macOS.

Each exercise has one section: its cases, then how to call the project's function (SOLUTIONS).
A case is (name, run, inputs, expected): run(**inputs) calls your function and returns what is
compared with expected; inputs are plain data (lists of numbers go in as float64 tensors), and a
failing case prints them with the expected value and what came back.
To use the checks from Python: run_check(n, *functions) -> (passed, failure), in your own
process, and check(n, folder=...) -> (passed, failure), in a worker as above.
"""
import argparse
import contextlib
import importlib.util
import json
import math
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

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


def loss_inputs(logp, adv, mask, old_logp=0.0, ref_logp=0.0, beta=0.0, eps_low=0.2,
                eps_high=0.2):
    """Every argument of grpo_loss for one case; a number for old_logp or ref_logp means that
    value on every token."""
    return dict(logp=logp, old_logp=old_logp, ref_logp=ref_logp, adv=adv, mask=mask, beta=beta,
                eps_low=eps_low, eps_high=eps_high)


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

    return [
        # d = ref - logp = [0, 1, -1] -> exp(d) - d - 1 = [0, e - 2, 1/e] = [0, 0.718282, 0.367879]
        ("k3_kl", kl, dict(logp=[[0.0, -1.0, 1.0]], ref_logp=[[0.0, 0.0, 0.0]]),
         [[0, 0.718282, 0.367879]]),
        # r = 1 everywhere, beta 0: loss = -(1 - 0.5) / 2 = -0.25
        ("ratio 1, beta 0", run_loss, loss_inputs([[0.0, 0.0]], [[1.0, -0.5]], [[1, 1]]), -0.25),
        # only the two trained tokens count: -(2 + 1) / 2 = -1.5 (not -(5 + 2 + 1) / 3, not -3 / 3)
        ("masked prompt token",
         run_loss, loss_inputs([[0.0, 0.0, 0.0]], [[5.0, 2.0, 1.0]], [[0, 1, 1]]), -1.5),
        # token mean over the batch: -(1 + 2 + 3) / 3 = -2 (the mean of row means would be -2.25)
        ("batch of two rows",
         run_loss, loss_inputs([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]],
                               [[1.0, 2.0, 9.0], [3.0, 9.0, 9.0]], [[1, 1, 0], [1, 0, 0]]), -2.0),
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
    ]


def ex4_solution():
    import loss

    def grpo_loss(*args):
        return loss.grpo_loss(*args)[0]  # the project returns (loss, kl, clipped)
    return loss.k3_kl, grpo_loss


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


# ---------------------------------------------------------------- running the checks
# check.py never runs a student's code in its own process. A helper process imports torch once
# and forks a fresh worker for each exercise (forking takes milliseconds; starting Python and
# importing torch takes 1-2 s). The worker imports the student's file, runs the cases and writes
# what the functions returned, as plain JSON data, to a report file. The checker waits for the
# worker at most TIME_LIMIT seconds, then kills it and whatever it started, reads the report and
# compares the values with the expected ones itself. So a student's file that calls os._exit,
# loops in C, leaves a thread or a fork running, edits close() or raises an exception that cannot
# be printed fails its exercise, and the table goes on. (The cases are public: a file can still
# hand back the expected values themselves. The checker tests honest work, not honesty.)
CASES = {1: ex1_cases, 2: ex2_cases, 3: ex3_cases, 4: ex4_cases, 5: ex5_cases, 6: ex6_cases,
         7: ex7_cases}
SOLUTIONS = {1: ex1_solution, 2: ex2_solution, 3: ex3_solution, 4: ex4_solution, 5: ex5_solution,
             6: ex6_solution, 7: ex7_solution}
TIME_LIMIT = 10  # seconds per exercise; the project's own functions take well under one
START_LIMIT = 120  # seconds for the helper to start (importing torch on a busy machine)
OUTPUT_LIMIT = 64 * 2 ** 20  # bytes a worker may write to a file: a print loop cannot fill the disk
HELPER = "--helper"  # check.py's hidden mode: the helper process (see serve)


# ------------------------------------------------ comparing (in the checker, on plain data only)
def close(got, expected):
    """got matches expected: numbers within 1e-5 relative + 1e-6 absolute (NaN never matches),
    lists and tuples element by element with the same length, anything else with ==."""
    if isinstance(expected, (list, tuple)):
        return (isinstance(got, (list, tuple)) and len(got) == len(expected)
                and all(close(g, e) for g, e in zip(got, expected)))
    if isinstance(expected, (int, float)) and not isinstance(expected, bool):
        if isinstance(got, bool) or not isinstance(got, (int, float)):
            return False
        return abs(got - expected) <= 1e-6 + 1e-5 * abs(expected)
    return got == expected


def show(x, limit=100):
    """One short line for a value: floats to 6 significant digits."""
    if isinstance(x, float):
        text = f"{x:.6g}"
        text = text if any(c in text for c in ".en") else text + ".0"  # 4.0 stays a float
    elif isinstance(x, list):
        text = "[" + ", ".join(show(v, limit) for v in x) + "]"
    elif isinstance(x, tuple):
        text = "(" + ", ".join(show(v, limit) for v in x) + ("," if len(x) == 1 else "") + ")"
    else:
        text = repr(x)
    return text if len(text) <= limit else text[:limit - 1] + "…"


class Shown:
    """A returned value that is not plain data (a dict, a FakeEnv...): only its repr crosses
    from the worker. It prints as that repr and equals no expected value."""

    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return self.text


def unplain(data, depth=0):
    """The value that plain() wrote as JSON: tuples come back, anything else as a Shown."""
    if depth > 30:
        return Shown("…")
    if isinstance(data, list):
        return [unplain(v, depth + 1) for v in data]
    if isinstance(data, dict):
        if isinstance(data.get("tuple"), list):
            return tuple(unplain(v, depth + 1) for v in data["tuple"])
        return Shown(str(data.get("repr", "?"))[:300])
    return data


def judge(n, cases, results):
    """(passed, failure) of exercise n from its results, one per case in order (see outcome).
    failure is "" when every case passes, else the first failing case as lines: its name, its
    input, what was expected and what came back. None when the results end before a failing
    case: the worker stopped, and the caller says why."""
    for i, ((name, _, inputs, expected), result) in enumerate(zip(cases, results)):
        if "missing" in result:  # NotImplementedError
            other = result["missing"]
            if other != EXERCISES[n][1] and other in [f for _, f, _ in EXERCISES.values()]:
                return False, f"needs {other} first: it is not implemented yet"  # ex2 calling ex1
            return False, "not implemented yet" if i == 0 else f"{name}: not implemented yet"
        if "raised" in result:
            return False, failure(name, inputs, expected, one_line(result["raised"]))
        got = unplain(result.get("got"))
        if not close(got, expected):
            return False, failure(name, inputs, expected, show(got))
    return (True, "") if len(results) >= len(cases) else None


def failure(name, inputs, expected, got):
    """The lines that report a failing case (lists of numbers went in as float64 tensors)."""
    given = ", ".join(f"{key}={show(value, 300)}" for key, value in inputs.items())
    return "\n".join([name, f"input:    {given}", f"expected: {show(expected)}",
                      f"got:      {got}"])


def one_line(text):
    return str(text).replace("\n", " ")[:160]


def run_check(n, *functions):
    """Run exercise n's cases on the given functions (two for exercise 4: k3_kl, grpo_loss) in
    this process: for functions you trust. Returns (passed, failure) as judge does."""
    cases = CASES[n](*functions)
    return judge(n, cases, list(outcomes(cases))) or (False, "stopped before every case ran")


# ------------------------------------------------ running the cases (in the worker)
def outcomes(cases):
    """What the functions return on each case (see outcome), up to the first case that fails."""
    for name, run, inputs, expected in cases:
        result = outcome(run, inputs)
        yield result
        # stop at the first failure (it is what the student needs); the checker judges again
        if "got" not in result or not close(unplain(result["got"]), expected):
            return


def outcome(run, inputs):
    """What run(**inputs) gave, as JSON data: {"got": plain value}, {"raised": "raised Type:
    message"}, or {"missing": the ex*.py file that raised NotImplementedError, or None}."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = run(**inputs)
    except NotImplementedError as error:
        return {"missing": raised_in(error)}
    except Exception as error:  # a bug in the function under test: report, do not crash
        return {"raised": "raised " + describe(error)}
    try:
        data = plain(got)
        json.dumps(data)  # what JSON cannot hold (an int of 5000 digits) fails here
        return {"got": data}
    except Exception as error:
        return {"raised": f"a value that could not be read ({describe(error)})"}


def plain(x, depth=0):
    """x as JSON data: numbers, strings, booleans and None as they are, lists (1000 items at
    most), a tuple as {"tuple": [...]}, tensors and numpy values through tolist(), anything else
    as {"repr": its repr}. Only such data reaches the checker: no object of the student's."""
    if depth > 20:
        return {"repr": "…"}
    if x is None:
        return None
    for kind in (bool, int, float, str):
        if isinstance(x, kind):
            return kind(x)
    if isinstance(x, (list, tuple)):
        items = [plain(v, depth + 1) for v in list(x)[:1000]]
        items += [{"repr": f"… {len(x) - 1000} more"}] if len(x) > 1000 else []
        return {"tuple": items} if isinstance(x, tuple) else items
    if hasattr(x, "tolist"):
        return plain(x.tolist(), depth + 1)
    return {"repr": repr(x)[:300]}


def describe(error):
    """'Type: message' on one line, even for an exception whose str() fails."""
    try:
        text = str(error)
    except BaseException as inner:
        text = f"(its message could not be shown: str() raised {type(inner).__name__})"
    name = type(error).__name__
    return one_line(f"{name}: {text}" if text else name)


def raised_in(error):
    """The exercise file (ex*.py) of the innermost frame that raised `error`, or None."""
    try:
        files = [Path(frame.filename).name for frame in traceback.extract_tb(error.__traceback__)]
    except Exception:
        return None
    files = [f for f in files if f.startswith("ex") and f.endswith(".py")]
    return files[-1] if files else None


def student_functions(n, folder):
    """The functions exercise n asks for, imported from folder/exN_*.py."""
    _, filename, names = EXERCISES[n]
    # so that ex2 can `from ex1_group_norm import group_norm`, from this folder
    if str(folder) in sys.path:
        sys.path.remove(str(folder))
    sys.path.insert(0, str(folder))
    for _, other, _ in EXERCISES.values():
        sys.modules.pop(Path(other).stem, None)
    name = f"student_{Path(filename).stem}"
    spec = importlib.util.spec_from_file_location(name, folder / filename)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    missing = [name for name in names if not hasattr(module, name)]
    if missing:
        raise AttributeError(f"{filename} defines no {', '.join(missing)}")
    return [getattr(module, name) for name in names]


def project_functions(n):
    """The project's own functions for exercise n (--solutions)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return SOLUTIONS[n]()


def exercises_used_by(n):
    """The other exercises whose ex*.py file exercise n's file imported (just loaded)."""
    return [m for m, (_, filename, _) in EXERCISES.items()
            if m != n and Path(filename).stem in sys.modules]


class Report:
    """The worker's report: one JSON line per step, flushed at once (a killed worker's report
    keeps every line before the kill), each with the worker's pid: lines that a fork of the
    worker writes carry another pid, and the checker ignores them."""

    def __init__(self, path):
        self.file = open(path, "a", encoding="utf-8")

    def write(self, **fields):
        self.file.write(json.dumps({"pid": os.getpid(), **fields}) + "\n")
        self.file.flush()


def work(request):
    """The worker, just forked by the helper: check one exercise, write the report, and end with
    os._exit, so that a thread the student's code left running cannot keep it alive."""
    try:
        os.setpgid(0, 0)  # its own process group: the checker kills it and all it started at once
        null, out = os.open(os.devnull, os.O_RDONLY), os.open(request["output"], os.O_WRONLY)
        for fd, to in ((0, null), (1, out), (2, out)):  # prints go to a file, no pipe stays open
            os.dup2(to, fd)
        os.close(null)
        os.close(out)
        sys.stdout.reconfigure(line_buffering=True)  # a killed worker's prints are there too
        import resource
        resource.setrlimit(resource.RLIMIT_FSIZE, (OUTPUT_LIMIT, OUTPUT_LIMIT))
        report = Report(request["report"])
        try:
            check_here(request["n"], request["solutions"], Path(request["folder"]), report)
        except SystemExit as stop:
            try:
                code = "" if stop.code is None else repr(stop.code)
            except BaseException:
                code = "…"
            report.write(stop=f"called sys.exit({code}); return a value instead")
        except BaseException as error:  # KeyboardInterrupt, GeneratorExit, the student's own
            report.write(stop="raised " + describe(error))
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(0)


def check_here(n, solutions, folder, report):
    """The worker's checks of exercise n: load the functions, then one report line per case."""
    try:
        functions = project_functions(n) if solutions else student_functions(n, folder)
    except Exception as error:
        where = "the project's code" if solutions else EXERCISES[n][1]
        report.write(stop=f"could not load {where}: {describe(error)}")
        return
    report.write(loaded=True, used=[] if solutions else exercises_used_by(n))
    for i, result in enumerate(outcomes(CASES[n](*functions))):
        report.write(case=i, **result)
    with contextlib.suppress(ChildProcessError):  # reap finished forks: only running ones count
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    threads = [t for t in threading.enumerate() if t.is_alive() and not t.daemon]
    report.write(done=True, threads=len(threads) - 1)  # less the main thread


# ------------------------------------------------ the helper process (check.py --helper)
def serve(solutions):
    """The helper: import torch (and, for --solutions, the project's modules) once, then for each
    request from the checker fork a worker, send its pid, wait for it and send its exit code. It
    runs no student code itself, so every worker starts from the same clean state."""
    import torch  # noqa: F401  (the 1-2 s import, paid once instead of once per exercise)
    if solutions:
        for n in SOLUTIONS:
            project_functions(n)
    requests = Lines(0)
    send("ready")
    while True:
        try:
            request = json.loads(requests.next(None))
        except EOFError:  # the checker is done
            return
        pid = os.fork()
        if pid == 0:
            work(request)  # never returns
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)  # as the worker does: the group exists before the pid is sent
        send(pid)
        send(wait_for(pid))


def wait_for(pid):
    """Worker pid's exit code (-N: killed by signal N). Should the checker go away meanwhile
    (its end of our stdin closes), kill the worker's group and end the helper."""
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if select.select([0], [], [], 0.02)[0] and not os.read(0, 4096):
            kill_group(pid)
            os._exit(0)


def send(value):
    os.write(1, f"{value}\n".encode())


class Lines:
    """Lines read from a pipe, each within a time limit: a silent peer cannot block the reader."""

    def __init__(self, fd):
        self.fd, self.buffer = fd, b""

    def next(self, timeout):
        """The next line; TimeoutError after `timeout` seconds (None: no limit), EOFError when
        the other end has closed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self.fd], [], [], left)[0]:
                raise TimeoutError
            chunk = os.read(self.fd, 4096)
            if not chunk:
                raise EOFError
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode()


def kill_group(pid):
    """SIGKILL process group pid: a worker and every process it started (unless one left the
    group on purpose: untrusted code belongs in a sandbox)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def group_alive(pid):
    try:
        os.killpg(pid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


# ------------------------------------------------ the checker
class Helper:
    """The checker's end of the helper process (see serve)."""

    def __init__(self, solutions):
        command = [sys.executable, str(Path(__file__).resolve()), HELPER]
        # a session of its own: Ctrl-C in the terminal reaches the checker only, which cleans up
        self.process = subprocess.Popen(command + (["--solutions"] if solutions else []),
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        start_new_session=True)
        self.lines = Lines(self.process.stdout.fileno())
        try:
            ready = self.lines.next(START_LIMIT) == "ready"
        except (EOFError, TimeoutError):
            ready = False
        except BaseException:  # Ctrl-C while it imports torch
            self.close()
            raise
        if not ready:
            self.close()
            raise RuntimeError("check.py's helper process did not start (see above)")

    def fork(self, request):
        """A new worker for request: its pid."""
        self.process.stdin.write((json.dumps(request) + "\n").encode())
        self.process.stdin.flush()
        pid = int(self.lines.next(30))
        if pid <= 1:  # never a worker; and killpg(1) would kill every process of the user
            raise ValueError(pid)
        return pid

    def exit_code(self, timeout):
        return int(self.lines.next(timeout))

    def close(self):
        self.process.kill()
        self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            with contextlib.suppress(OSError):
                pipe.close()


class Checker:
    """One run of check.py: the helper process, a folder for the workers' files, and the
    verdicts so far (a note on exercise 2 needs exercise 1's)."""

    def __init__(self, solutions=False, folder=HERE):
        self.solutions, self.folder = solutions, os.path.abspath(folder)
        self.files = tempfile.mkdtemp(prefix="check-")
        self.helper, self.verdicts = None, {}

    def __enter__(self):
        return self

    def __exit__(self, *error):
        if self.helper:
            self.helper.close()
        shutil.rmtree(self.files, ignore_errors=True)

    def check(self, n):
        """(passed, failure, printed) of exercise n. The failure of a file that imports another
        exercise's file gets a note when that file fails its own exercise."""
        passed, failure, used, printed = self.verdict(n)
        for m in used:
            if not passed and "not implemented" not in failure and not self.verdict(m)[0]:
                failure += f"\nnote: this calls your {EXERCISES[m][1]}, which fails exercise {m}"
        return passed, failure, printed

    def verdict(self, n):
        if n not in self.verdicts:
            self.verdicts[n] = self.run(n)
        return self.verdicts[n]

    def run(self, n):
        """Exercise n in a fresh worker: (passed, failure, the other exercises its file imported,
        the last lines it printed)."""
        # new files with random names, read later through these handles: whatever the student's
        # code does to the paths (delete them, put a pipe there) cannot block or crash the checker
        (report_fd, report), (output_fd, output) = (tempfile.mkstemp(dir=self.files)
                                                    for _ in range(2))
        with open(report_fd, "rb") as report_file, open(output_fd, "rb") as output_file:
            request = dict(n=n, solutions=self.solutions, folder=self.folder, report=report,
                           output=output)
            pid, how = self.run_worker(request)
            left = group_alive(pid)  # a fork, or another process the student's code left running
            kill_group(pid)
            return self.judged(n, pid, how, left, report_file) + (printed(output_file),)

    def judged(self, n, pid, how, left, report_file):
        """(passed, failure, used) of exercise n from worker pid's report and how it ended."""
        cases = CASES[n](*[None] * len(EXERCISES[n][2]))  # names, inputs, expected values only
        try:
            steps = read_report(report_file, pid)
            passed, failure = judge(n, cases, steps["cases"]) or (False, "")
            if not failure:
                loading = "the project's code" if self.solutions else EXERCISES[n][1]
                failure = unfinished(n, cases, steps, how, left, loading)
            used = [m for m in steps["used"] if isinstance(m, int) and m in EXERCISES and m != n]
        except Exception:  # a report no honest worker writes
            passed, failure, used = False, "its report could not be read", []
        return passed and not failure, failure, used

    def run_worker(self, request):
        """Fork a worker for request and wait at most TIME_LIMIT s for it. Returns (pid, how):
        how is its exit code, "timeout" (it was killed), or "helper" (the helper went away)."""
        pid = self.start(request)
        try:
            return pid, self.helper.exit_code(TIME_LIMIT)
        except TimeoutError:
            kill_group(pid)
            try:
                self.helper.exit_code(5)  # the killed worker's: the helper can serve the next
            except (OSError, EOFError, ValueError):
                self.drop_helper()
            return pid, "timeout"
        except (OSError, EOFError, ValueError):  # the student's code killed the helper?
            kill_group(pid)
            self.drop_helper()
            return pid, "helper"
        except BaseException:  # Ctrl-C: the worker must not outlive the checker
            kill_group(pid)
            raise

    def start(self, request):
        if self.helper:
            try:
                return self.helper.fork(request)
            except (OSError, EOFError, ValueError):  # gone since the last worker
                self.drop_helper()
        self.helper = Helper(self.solutions)
        return self.helper.fork(request)

    def drop_helper(self):
        self.helper.close()
        self.helper = None


def read_report(file, pid):
    """What worker pid wrote: its case results in order, and loaded, used, stop, done, threads."""
    steps = {"cases": [], "loaded": False, "used": [], "stop": "", "done": False, "threads": 0}
    for line in file.read().splitlines():
        try:
            fields = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if not isinstance(fields, dict) or fields.get("pid") != pid:
            continue  # a line from a fork of the worker
        if "case" in fields:
            if fields["case"] == len(steps["cases"]):
                steps["cases"].append(fields)
        else:
            steps.update((key, fields[key]) for key in steps if key in fields)
    return steps


def unfinished(n, cases, steps, how, left, loading):
    """Why exercise n fails although no case failed, or "" when its worker finished cleanly.
    loading: the file (or code) the worker imports."""
    if not steps["loaded"]:
        where = f"\nwhile loading {loading}"
    elif len(steps["cases"]) < len(cases):
        where = f"\nin the case: {cases[len(steps['cases'])][0]}"
    else:
        where = ""
    if steps["stop"]:
        return one_line(steps["stop"])
    if how == "timeout":
        return f"did not finish within {TIME_LIMIT} s (an endless loop?){where}"
    if how == "helper":
        return "killed check.py's helper process (its parent)"
    if not steps["done"]:
        why = f"killed by {signal_name(-how)}" if how < 0 else f"exit code {how}: os._exit()?"
        return f"stopped before its checks were done ({why}){where}"
    if len(steps["cases"]) < len(cases):
        return "stopped before every case was checked (did it change check.py's functions?)"
    if steps["threads"]:
        return f"left {steps['threads']} thread(s) running: end every thread it starts"
    if left:
        return "left a process running (os.fork?): end every process it starts"
    return "" if how == 0 else f"ended with exit code {how}"


def signal_name(number):
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def printed(file, lines=20):
    """The last lines the student's code printed (stdout and stderr), control characters shown
    as '?' so that they cannot redraw the table."""
    size = file.seek(0, os.SEEK_END)
    file.seek(max(0, size - 4000))
    text = file.read().decode(errors="replace").splitlines()
    shown = ["".join(c if c.isprintable() else "?" for c in line)[:200] for line in text[-lines:]]
    return (["…"] if size > 4000 or len(text) > lines else []) + shown


def check(n, solutions=False, folder=HERE):
    """(passed, first_failure) of exercise n, on the student's file or the project's code, in a
    worker process of its own, within TIME_LIMIT seconds."""
    with Checker(solutions, folder) as checker:
        return checker.check(n)[:2]


def row(n, passed, first):
    """The table row of exercise n: its number, topic and result (the first line of a failure)."""
    return f" {n}  {EXERCISES[n][0]:<28} {'passed' if passed else 'failed: ' + first}"


def main(argv=None):
    parser = argparse.ArgumentParser(description="Check the exercises (exercises/ex*.py).")
    parser.add_argument("numbers", nargs="*", type=int, help="exercises to check (default: all)")
    parser.add_argument("--solutions", action="store_true",
                        help="check the project's own functions instead of the ex*.py files")
    parser.add_argument("--dir", default=str(HERE), help="folder with the ex*.py files")
    args = parser.parse_args(argv)
    numbers = args.numbers or sorted(EXERCISES)
    unknown = [n for n in numbers if n not in EXERCISES]
    if unknown:
        parser.error(f"no exercise {unknown[0]}: choose from 1 to {len(EXERCISES)}")
    if not hasattr(os, "fork"):
        parser.error("check.py forks a worker per exercise: run it on Linux or macOS (or WSL)")
    print("checking the project's functions" if args.solutions else f"checking {args.dir}")
    print(f" #  {'topic':<28} result")
    passed = 0
    with Checker(args.solutions, args.dir) as checker:
        for n in numbers:
            ok, report, output = checker.check(n)
            passed += ok
            first, *rest = report.split("\n")
            print(row(n, ok, first))
            for line in rest + [f"printed: {line}" for line in output]:
                print(f"{'':6}{line}")
    print(f"{passed}/{len(numbers)} passed")
    return 0 if passed == len(numbers) else 1


if __name__ == "__main__":
    if sys.argv[1:2] == [HELPER]:
        with contextlib.suppress(BrokenPipeError):  # the checker went away: nothing to say
            serve(solutions="--solutions" in sys.argv)
        sys.exit()
    try:
        sys.exit(main())
    except BrokenPipeError:  # `check.py | head`: the reader has gone; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    except KeyboardInterrupt:  # Ctrl-C: one line, not a traceback
        print("\ninterrupted: the exercises after the last row were not checked", file=sys.stderr)
        sys.exit(130)
