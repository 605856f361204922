"""The exercises' cases: what each case gives your function, and how it calls it.

check.py runs them (`python check.py`). Each exercise has one section. A case is (name, run,
inputs): run(**inputs) calls your function and returns what check.py compares with the expected
value; inputs are plain data (lists of numbers go in as float64 tensors), and a failing case
prints them with what came back. The expected values are not in this file: in a handout folder
check.py holds them sealed (sealed.json, salted hashes), in the repository the teacher's key has
them (key.py). Work a failing case out by hand from its input: that is the exercise.

This file imports no other file of the exercises: check.py, grade.py, quiz.py and key.py import it.
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
WITHOUT_TORCH = {6, 7}  # plain Python: these two run where PyTorch is not installed


def t64(rows):
    """A float64 tensor: the checks feed float64 so that 6 digits are exact enough."""
    import torch  # here, not at the top: only the workers that run the cases need torch
    return torch.tensor(rows, dtype=torch.float64)


# ---------------------------------------------------------------- exercise 1: group_norm
def ex1_cases(group_norm):
    def norm(rewards):
        return group_norm(t64(rewards))

    return [
        ("two samples", norm, dict(rewards=[[1.0, 3.0]])),
        ("three samples", norm, dict(rewards=[[0.0, 1.0, 5.0]])),
        ("two groups", norm, dict(rewards=[[1.0, 3.0], [0.0, 4.0]])),  # each row on its own
        ("small spread, eps matters", norm, dict(rewards=[[0.0, 0.001]])),
        ("equal rewards", norm, dict(rewards=[[0.1, 0.1, 0.1]])),
        ("equal rewards in one of two groups", norm, dict(rewards=[[0.7, 0.7], [1.0, 3.0]])),
        ("one sample (G = 1)", norm, dict(rewards=[[2.0], [5.0]])),
    ]


# ---------------------------------------------------------------- exercise 2: turn_advantages
def ex2_cases(turn_advantages):
    def adv(turn_rewards, outcome_rewards, algo, alpha=1.0):
        return turn_advantages(t64(turn_rewards), t64(outcome_rewards), algo, alpha)

    def dtype(**inputs):
        return str(adv(**inputs).dtype)

    three_turns = dict(turn_rewards=[[[1.0, 0.0], [2.0, 0.0], [3.0, 3.0]]],
                       outcome_rewards=[[0.0, 1.0, 5.0]], algo="mt")
    return [
        ("float64 out", dtype, dict(turn_rewards=[[[4.0], [0.0]]], outcome_rewards=[[1.0, 3.0]],
                                    algo="or")),  # the docstring's promise
        ("or, K = 2", adv, dict(turn_rewards=[[[4.0], [0.0]]], outcome_rewards=[[1.0, 3.0]],
                                algo="or")),
        ("mr, K = 2", adv, dict(turn_rewards=[[[4.0], [0.0]]], outcome_rewards=[[1.0, 3.0]],
                                algo="mr")),
        ("mt, K = 2", adv, dict(turn_rewards=[[[1.0], [2.0], [3.0]]],
                                outcome_rewards=[[0.0, 0.0, 3.0]], algo="mt")),
        # alpha at K = 2 weighs the outcome in A_1
        ("mt, K = 2, alpha = 0.5", adv, dict(turn_rewards=[[[1.0], [2.0], [3.0]]],
                                             outcome_rewards=[[0.0, 0.0, 3.0]], algo="mt",
                                             alpha=0.5)),
        ("mt, K = 3", adv, three_turns),
        ("mt, K = 3, alpha = 0.5", adv, dict(three_turns, alpha=0.5)),  # exponents, 1-based
        ("mr, K = 3", adv, dict(turn_rewards=[[[1.0, 0.0], [2.0, 0.0], [3.0, 3.0]]],
                                outcome_rewards=[[3.0, 2.0, 1.0]], algo="mr")),
        ("two groups", adv, dict(turn_rewards=[[[0.5], [0.5]], [[0.0], [0.0]]],
                                 outcome_rewards=[[1.0, 3.0], [3.0, 1.0]], algo="mt")),
        ("equal rewards", adv, dict(turn_rewards=[[[0.2], [0.2], [0.2]]],
                                    outcome_rewards=[[1.9, 1.9, 1.9]], algo="mt")),
        ("one sample (G = 1)",
         adv, dict(turn_rewards=[[[0.7]]], outcome_rewards=[[1.0]], algo="mr")),
    ]


# ---------------------------------------------------------------- exercise 3: token_advantages
def ex3_cases(token_advantages):
    def tok(turn_of_token, turn_adv):
        adv, mask = token_advantages(turn_of_token, turn_adv)
        return list(adv), list(mask)

    return [
        ("one turn", tok, dict(turn_of_token=[0, 0, 1, 1], turn_adv=[0.5])),
        ("two turns, tool result between",
         tok, dict(turn_of_token=[0, 0, 1, 1, 0, 0, 2, 2, 2], turn_adv=[0.5, -1.0])),
        ("K = 3 turns", tok, dict(turn_of_token=[0, 1, 0, 2, 0, 3, 3], turn_adv=[1.5, -0.25, 2.0])),
        ("zero advantage keeps mask 1", tok, dict(turn_of_token=[0, 1, 1], turn_adv=[0.0])),
        ("only prompt tokens", tok, dict(turn_of_token=[0, 0, 0], turn_adv=[0.7])),
        ("empty sample", tok, dict(turn_of_token=[], turn_adv=[0.7])),
    ]


# ---------------------------------------------------------------- exercise 4: k3_kl, grpo_loss
LN15, LN05 = math.log(1.5), math.log(0.5)  # ratios r = 1.5 and r = 0.5 against old_logp = 0


def loss_inputs(logp, adv, mask, old_logp=0.0, ref_logp=0.0, beta=0.0, eps_low=0.2,
                eps_high=0.2, loss_type="token"):
    """Every argument of grpo_loss for one case; a number for old_logp or ref_logp means that
    value on every token."""
    return dict(logp=logp, old_logp=old_logp, ref_logp=ref_logp, adv=adv, mask=mask, beta=beta,
                eps_low=eps_low, eps_high=eps_high, loss_type=loss_type)


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

    two_rows = ([[0.0] * 3] * 2, [[1.0, 2.0, 9.0], [3.0, 9.0, 9.0]], [[1, 1, 0], [1, 0, 0]])
    five_and_one = ([[0.0] * 5] * 2, [[1.0] * 5, [-2.0, 9.0, 9.0, 9.0, 9.0]],
                    [[1] * 5, [1, 0, 0, 0, 0]])
    empty_row = ([[0.0] * 3] * 3, [[2.0, 9.0, 9.0], [1.0, 3.0, 5.0], [4.0, 4.0, 4.0]],
                 [[1, 0, 0], [1, 1, 1], [0, 0, 0]])
    grad_rows = ([[0.0, 0.0]] * 2, [[1.0, -2.0], [4.0, 9.0]], [[1, 1], [1, 0]])
    return [
        ("k3_kl", kl, dict(logp=[[0.0, -1.0, 1.0]], ref_logp=[[0.0, 0.0, 0.0]])),
        ("ratio 1, beta 0", run_loss, loss_inputs([[0.0, 0.0]], [[1.0, -0.5]], [[1, 1]])),
        ("masked prompt token",
         run_loss, loss_inputs([[0.0, 0.0, 0.0]], [[5.0, 2.0, 1.0]], [[0, 1, 1]])),
        ("batch of two rows, token", run_loss, loss_inputs(*two_rows)),
        ("clip active above",
         run_loss, loss_inputs([[LN15]], [[1.0]], [[1]], eps_high=0.28)),
        ("clip active below",
         run_loss, loss_inputs([[LN05]], [[-1.0]], [[1]], eps_high=0.28)),
        ("clip inactive (pessimistic side)",
         run_loss, loss_inputs([[LN05, LN15]], [[1.0, -1.0]], [[1, 1]])),
        ("beta 0.1",
         run_loss, loss_inputs([[-1.0, -1.0]], [[1.0, 1.0]], [[1, 1]], old_logp=[[-1.0, -1.0]],
                               ref_logp=[[-1.0, 0.0]], beta=0.1)),
        ("beta 0 ignores the reference",
         run_loss, loss_inputs([[0.0, 0.0]], [[2.0, 1.0]], [[1, 1]], ref_logp=[[-3.0, 2.0]])),
        ("gradient", grad, loss_inputs([[0.0, 0.0, 0.0]], [[1.0, -2.0, 4.0]], [[1, 1, 0]])),
        ("clipped tokens get no gradient",
         grad, loss_inputs([[LN15, LN05, 0.0]], [[1.0, -1.0, 1.0]], [[1, 1, 1]])),
        ("rows of 5 and 1 trained tokens, token", run_loss, loss_inputs(*five_and_one)),
        ("a fully masked row, token", run_loss, loss_inputs(*empty_row)),
        ("gradient of two rows, token", grad, loss_inputs(*grad_rows)),
        ("one sample, seq",
         run_loss, loss_inputs([[0.0, 0.0, 0.0]], [[2.0, 1.0, 7.0]], [[1, 1, 0]], loss_type="seq")),
        ("batch of two rows, seq", run_loss, loss_inputs(*two_rows, loss_type="seq")),
        ("rows of 5 and 1 trained tokens, seq",
         run_loss, loss_inputs(*five_and_one, loss_type="seq")),
        ("a fully masked row, seq", run_loss, loss_inputs(*empty_row, loss_type="seq")),
        ("gradient of two rows, seq", grad, loss_inputs(*grad_rows, loss_type="seq")),
    ]


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
        ("rewards, in candidate order", rewards, env_inputs(["0.5", "2", "1"])),
        ("chosen = argmax", chosen, env_inputs(["0.5", "2", "1"])),
        ("negative rewards", chosen, env_inputs(["-2", "-0.5", "-1"])),
        ("ties go to the lowest index", chosen, env_inputs(["1", "3", "3", "2"])),
        ("all rewards equal", chosen, env_inputs(["0", "0", "0"])),
        ("one candidate (K = 1)", rewards_and_chosen, env_inputs(["-1"])),
        ("key at the first turn", key, env_inputs(["1", "2"])),
        ("key at a later turn", key, env_inputs(["1", "2"], turn=2, env_id=3, role="executor")),
        ("original env not acted on", original_after, env_inputs(["0.5", "2", "1"], turn=2)),
        ("branch is a copy", branch_is, env_inputs(["0.5", "2", "1"])),
        ("branch is the chosen candidate's copy",
         branch_after, env_inputs(["0.5", "2", "1"], turn=2)),
    ]


# ---------------------------------------------------------------- exercise 6: exact_match_reward
def said(*turns):
    """A completion: assistant and user (environment) messages alternating, assistant first."""
    return [{"role": "assistant" if i % 2 == 0 else "user", "content": text}
            for i, text in enumerate(turns)]


def ex6_cases(em):
    return [
        ("right answer",
         em, dict(completion=said("<reasoning>France.</reasoning>\n<answer>Paris</answer>"),
                  answers=["Paris"])),
        ("wrong answer", em, dict(completion=said("<answer>Lyon</answer>"), answers=["Paris"])),
        ("case and whitespace", em, dict(completion=said("<answer>  paris \n</answer>"),
                                         answers=["PARIS "])),
        ("a substring is not exact", em, dict(completion=said("<answer>Paris, France</answer>"),
                                              answers=["Paris"])),
        ("several aliases", em, dict(completion=said("<answer>clinton</answer>"),
                                     answers=["Bill Clinton", "W. J. Clinton", "Clinton"])),
        ("no <answer> tag", em, dict(completion=said("<reasoning>It is Paris</reasoning>\nParis"),
                                     answers=["Paris"])),
        ("unclosed <answer> tag", em, dict(completion=said("<answer>Paris"), answers=["Paris"])),
        ("empty answer", em, dict(completion=said("<answer>   </answer>"), answers=["Paris"])),
        ("blank answer, blank alias", em, dict(completion=said("<answer></answer>"),
                                               answers=["", "Paris"])),
        ("answer in an earlier turn",
         em, dict(completion=said("<answer>Paris</answer>", "<result>ok</result>",
                                  "<reasoning>ok</reasoning>"), answers=["Paris"])),
        ("answer in the last turn",
         em, dict(completion=said("<answer>Paris</answer>", "<result>no</result>",
                                  "<answer>Lyon</answer>"), answers=["Paris"])),
        ("answer only in a tool result",
         em, dict(completion=said("<tool>{}</tool>", "<result><answer>Paris</answer></result>",
                                  "<reasoning>?</reasoning>"), answers=["Paris"])),
        ("no assistant turn", em, dict(completion=said(), answers=["Paris"])),
    ]


# ---------------------------------------------------------------- exercise 7: bm25_scores
DOCS = [["cat", "sat", "mat"], ["dog", "sat"], ["cat", "cat", "dog", "ran"]]


def ex7_cases(bm25_scores):
    def bm25(query_terms, doc_terms, **k1_and_b):
        return list(bm25_scores(query_terms, doc_terms, **k1_and_b))

    return [
        ("one term, default k1 and b", bm25, dict(query_terms=["cat"], doc_terms=DOCS)),
        ("two terms", bm25, dict(query_terms=["dog", "ran"], doc_terms=DOCS, k1=1.5, b=0.75)),
        ("repeated query term",
         bm25, dict(query_terms=["cat", "dog", "cat"], doc_terms=DOCS, k1=1.5, b=0.75)),
        ("term in no document", bm25, dict(query_terms=["zebra"], doc_terms=DOCS, k1=1.5, b=0.75)),
        ("empty query", bm25, dict(query_terms=[], doc_terms=DOCS, k1=1.5, b=0.75)),
        ("b = 0", bm25, dict(query_terms=["cat"], doc_terms=DOCS, k1=1.5, b=0.0)),
        ("k1 = 1.2, b = 0.5", bm25, dict(query_terms=["cat"], doc_terms=DOCS, k1=1.2, b=0.5)),
        ("an empty document",
         bm25, dict(query_terms=["cat"], doc_terms=[["cat", "dog"], []], k1=1.5, b=0.75)),
    ]


CASES = {1: ex1_cases, 2: ex2_cases, 3: ex3_cases, 4: ex4_cases, 5: ex5_cases, 6: ex6_cases,
         7: ex7_cases}
