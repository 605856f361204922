"""tools/credit.py and its report: Monte Carlo against a toy game whose Q is known exactly, each
figure by hand, and the tool end to end on a tiny model."""
import json
import os
import random
import re

import numpy as np
import pytest
from conftest import full_args
import torch

import estimators
from tools import credit, credit_figures, credit_report

# ---------------------------------------------------------------- the toy: Q known exactly
# Two turns, one agent, answers x or y. Turn 1: x earns 1, y 0. Turn 2: after x, x earns 0.5 and
# y 0; after y, x earns 3 and y 0. Solved: the answers "yx". The policy says x with probability
# P_X[state], the state being the answers so far.
P_X = {"": 0.5, "x": 0.5, "y": 0.25}
REWARD = {"x": 1.0, "y": 0.0, "xx": 0.5, "xy": 0.0, "yx": 3.0, "yy": 0.0}
# by hand: Q(s, a) = REWARD[s + a] + V(s + a), V(s) = sum_a P(a | s) Q(s, a), V(after turn 2) = 0
#   Q("", x) = 1 + (0.5 * 0.5 + 0.5 * 0) = 1.25     Q("", y) = 0 + (0.25 * 3 + 0.75 * 0) = 0.75
#   Q("x", x) = 0.5, Q("x", y) = 0                  Q("y", x) = 3,     Q("y", y) = 0
#   V("") = 1, V("x") = 0.25, V("y") = 0.75
Q = {("", "x"): 1.25, ("", "y"): 0.75, ("x", "x"): 0.5, ("x", "y"): 0.0, ("y", "x"): 3.0, ("y", "y"): 0.0}
V = {"": 1.0, "x": 0.25, "y": 0.75}
#   success: Q_s("", y) = P(x | "y") = 0.25, Q_s("", x) = 0, Q_s("y", x) = 1, the rest 0
Q_SUCCESS = {("", "x"): 0.0, ("", "y"): 0.25, ("x", "x"): 0.0, ("x", "y"): 0.0, ("y", "x"): 1.0, ("y", "y"): 0.0}
V_SUCCESS = {"": 0.125, "x": 0.0, "y": 0.25}


class Fork:
    roles = ("agent",)

    def __init__(self, level=0):
        self.level, self.turn, self.history = level, 0, ""

    done = property(lambda self: self.turn >= 2)
    solved = property(lambda self: self.history == "yx")

    def copy(self):
        twin = Fork(self.level)
        twin.turn, twin.history = self.turn, self.history
        return twin

    def messages(self, role):
        return [{"role": "user", "content": self.history}]

    def act(self, role, text):
        self.history += text
        self.turn += 1
        return REWARD[self.history]


def policy(seed):
    rng = random.Random(seed)

    def sample(role, message_lists):
        out = []
        for messages in message_lists:
            state = messages[0]["content"]
            out.append(([1] + [ord(c) for c in state], [7], "x" if rng.random() < P_X[state] else "y"))
        return out
    return sample


def histories(records, K):
    """The state of every record, rebuilt from the answers: a trajectory's earlier answers; the
    tree's turn 2 continues from its level's best turn-1 answer (x whenever one was sampled)."""
    out, trajectory, tree_turn1 = [], [], {}
    for r in records:
        if r["scheme"] == "trajectories":
            trajectory = [] if r["turn"] == 1 else trajectory
            out.append("".join(trajectory))
            trajectory.append(r["answer"])
        else:
            if r["turn"] == 1:
                tree_turn1.setdefault(r["cluster"], []).append(r["answer"])
                out.append("")
            else:
                out.append("x" if "x" in tree_turn1[r["cluster"]] else "y")
    return out



def search_advantages(turn_r, outcome_r, turns, turn=1):
    """credit.tool_advantages of one group of two-turn-form rewards (turn_r: one R^T_1 per episode),
    turn `turn`, for the rows that need the rewards alone."""
    group = {"turn_rewards": [[x] if not isinstance(x, list) else x for x in turn_r], "outcome": outcome_r,
             "turns": turns}
    return {e: a[:, turn - 1].tolist() for e, a in credit.tool_advantages(
        group, estimators.names("tool", trainable=False, needing=())).items()}

def test_monte_carlo_converges_to_the_exact_q_and_v():
    records = credit.game_records(Fork, [0, 1, 2], policy(0), K=4, M=4000, scale="group", chunk=10 ** 6)
    assert {r["scheme"] for r in records} == {"trajectories", "tree"}
    assert len([r for r in records if r["scheme"] == "trajectories"]) == 3 * 4 * 2
    for r, state in zip(records, histories(records, 4)):
        q = np.mean(r["q"]["return"])
        assert q == pytest.approx(Q[state, r["answer"]], abs=0.1), (r, state)
        assert np.mean(r["q"]["success"]) == pytest.approx(Q_SUCCESS[state, r["answer"]], abs=0.05)
        if "v" in r:  # a trajectory's answer: V from fresh episodes at its state
            assert np.mean(r["v"]["return"]) == pytest.approx(V[state], abs=0.1)
            assert np.mean(r["v"]["success"]) == pytest.approx(V_SUCCESS[state], abs=0.05)
    # A* of a trajectory's answer is Q - V at its own state
    a_star = credit_figures.true_advantages(records, "return")[0]
    for a, r, state in zip(a_star, records, histories(records, 4)):
        if "v" in r:
            assert a == pytest.approx(Q[state, r["answer"]] - V[state], abs=0.15)


def test_each_answer_carries_its_own_turns_advantage():
    """The estimators' advantages, record by record, from the answers by hand: GRPO the
    trajectory's normalised return; GiGPO that plus the return-to-go normalised in its anchor
    group; AT-GRPO the reward normalised in its group. A shift by one turn fails here."""
    K = 4
    records = credit.game_records(Fork, [0, 1], policy(3), K=K, M=2, scale="group")
    rows = [r for r in records if r["scheme"] == "trajectories"]
    answers = [rows[i]["answer"] + rows[i + 1]["answer"] for i in range(0, len(rows), 2)]  # two per trajectory
    returns = np.array([REWARD[a[0]] + REWARD[a] for a in answers]).reshape(-1, K)
    norm = lambda r: np.where(r.std(1, ddof=1, keepdims=True) > 0, (r - r.mean(1, keepdims=True)) / (r.std(1, ddof=1, keepdims=True) + 1e-4), 0)  # noqa: E731
    episode = norm(returns).reshape(-1)
    for j, a in enumerate(answers):
        for n in (0, 1):
            assert rows[2 * j + n]["adv"]["grpo"] == pytest.approx(episode[j])
            level, state = j // K, a[:n]
            to_go = lambda b: REWARD[b[0]] * (n == 0) + 0.95 ** (1 - n) * REWARD[b]  # noqa: E731  (gamma 0.95)
            anchor = np.array([[to_go(b) for b in answers[level * K:(level + 1) * K] if b[:n] == state]])
            mine = to_go(a)
            step = norm(anchor)[0][list(anchor[0]).index(mine)] if anchor.shape[1] > 1 else 0.0
            assert rows[2 * j + n]["adv"]["gigpo"] == pytest.approx(episode[j] + step), (j, n)
            assert rows[2 * j + n]["anchor"] == anchor.shape[1]  # the answers GiGPO grouped at that state
    tree = [r for r in records if r["scheme"] == "tree"]
    for at in range(0, len(tree), K):
        rewards = np.array([[REWARD[h + r["answer"]] for r, h in zip(tree[at:at + K], histories(records, K)[len(rows) + at:])]])
        assert [r["adv"]["at"] for r in tree[at:at + K]] == pytest.approx(norm(rewards)[0].tolist())


def test_the_anchor_line_counts_later_answers_that_share_a_state():
    records = [{"scheme": "trajectories", "turn": 1, "anchor": 4}, {"scheme": "trajectories", "turn": 2, "anchor": 3},
               {"scheme": "trajectories", "turn": 2, "anchor": 1}, {"scheme": "trajectories", "turn": 3, "anchor": 2},
               {"scheme": "tree", "turn": 2}]
    assert credit_report.anchor_line(records).startswith("GiGPO's anchor groups: 2 of 3 later answers (turns 2+)")


def test_the_figures_by_hand():
    adv, a_star = [1, -1, 0, 0], [2, -2, 1, -1]
    # Pearson: cov 1, std 0.7071 and 1.5811 -> 0.8944; Spearman: ranks [4, 1, 2.5, 2.5] and
    # [4, 1, 3, 2] -> 1.125 / (1.0607 * 1.1180) = 0.9487; sign: all |A*| > 0.8, adv 0 misses -> 2/4
    f = credit_figures.figures(adv, a_star, noise=0.4)
    assert f["pearson"] == pytest.approx(0.894427, abs=1e-6)
    assert f["spearman"] == pytest.approx(0.948683, abs=1e-6)
    assert f["sign"] == 0.5 and f["zero"] == 0.5
    assert credit_figures.figures(adv, a_star, noise=0.6)["sign"] == 1.0  # |A*| = 1 is now within the noise
    assert credit_figures.ranks([3, 1, 3, 2]).tolist() == [3.5, 1, 3.5, 2]
    assert np.isnan(credit_figures.pearson([0, 0, 0], [1, 2, 3]))  # equal advantages: no correlation


def test_the_noise_ceiling_by_hand():
    # halves [1, 2, 3, 4] and [1, 3, 2, 4]: r = 0.8, Spearman-Brown 2r/(1+r) = 0.8889, ceiling 0.9428;
    # differences [0, -1, 1, 0]: std 0.7071, noise 0.3536
    n = credit_figures.noise_ceiling([1, 2, 3, 4], [1, 3, 2, 4])
    assert n["split_half"] == pytest.approx(0.8)
    assert n["ceiling"] == pytest.approx((1.6 / 1.8) ** 0.5)
    assert n["noise"] == pytest.approx(0.5 ** 0.5 / 2)


def test_true_advantage_shared_state_or_its_own_v():
    records = [{"state": "s", "q": {"t": [1.0, 3.0]}}, {"state": "s", "q": {"t": [0.0, 1.0]}},
               {"state": "u", "q": {"t": [2.0, 2.0]}, "v": {"t": [1.0, 0.0]}}]
    a, a1, a2 = credit_figures.true_advantages(records, "t")
    assert a1.tolist() == [0.5, -0.5, 1.0] and a2.tolist() == [1.0, -1.0, 2.0]
    assert a.tolist() == [0.75, -0.75, 1.5]


def test_search_turn_one_advantages_by_hand():
    # G = 3: R^T_1 = [0.7, 0, 0], R^O = [1.9, 1.9, 0]. norm(R^O): mean 1.2667, std 1.0970 ->
    # [0.5773, 0.5773, -1.1547]; norm(R^T): [1.1547, -0.5773, -0.5773]; MT A_1 is their sum,
    # MR normalises R^T + R^O = [2.6, 1.9, 0]: mean 1.5, std 1.3454 -> [0.8176, 0.2973, -1.1149]
    adv = search_advantages([0.7, 0, 0], [1.9, 1.9, 0], [2, 2, 2])
    assert adv["or"] == pytest.approx([0.5773, 0.5773, -1.1547], abs=1e-3)
    assert adv["mt"] == pytest.approx([1.7320, 0.0, -1.7320], abs=1e-3)  # not A_2 = norm(R^O)
    assert adv["mr"] == pytest.approx([0.8176, 0.2973, -1.1149], abs=1e-3)
    assert search_advantages([0, 0], [1, 1], [2, 2])["mt"] == [0, 0]  # equal rewards: no credit


def test_search_answer_turn_advantages_by_hand():
    # the same episodes, turn 2 (the answer): GRPO-OR and MT-GRPO give norm(R^O), the same numbers
    # by construction; GRPO-MR gives the answer the query's norm(R^T + R^O), which rewards the
    # answer of episode 2 (R^O = 1.9, like episode 1's) less than episode 1's for its query's R^T
    adv = search_advantages([0.7, 0, 0], [1.9, 1.9, 0], [2, 2, 2], turn=2)
    assert adv["or"] == pytest.approx([0.5773, 0.5773, -1.1547], abs=1e-3)
    assert adv["mt"] == adv["or"]
    assert adv["mr"] == pytest.approx([0.8176, 0.2973, -1.1149], abs=1e-3)


def test_the_answer_turn_s_true_advantage_is_its_outcome_minus_the_mean_at_its_state():
    """Q(s_2, a) is the episode's own R^O (the answer ends it); V(s_2) the mean R^O of the M answers
    resampled after the same tool result: two answer records of one question, by hand."""
    records = [{"state": "q0 e0", "turn": 2, "q": {"outcome": [1.0, 1.0]}, "v": {"outcome": [0.25, 0.75]}},
               {"state": "q0 e1", "turn": 2, "q": {"outcome": [0.0, 0.0]}, "v": {"outcome": [0.5, 0.5]}}]
    a, a1, a2 = credit_figures.true_advantages(records, "outcome")
    assert a.tolist() == [0.5, -0.5] and a1.tolist() == [0.75, -0.5] and a2.tolist() == [0.25, -0.5]


def test_search_tables_put_both_turns_side_by_side():
    import random
    rng, records = random.Random(0), []
    for qi in range(4):
        turn_r, outcome_r = [rng.choice([0.0, 0.7]) for _ in range(4)], [rng.choice([0.0, 1.9]) for _ in range(4)]
        a1, a2 = (search_advantages(turn_r, outcome_r, [2] * 4, turn=k) for k in (1, 2))
        for i in range(4):
            v = [rng.random(), rng.random()]
            records.append({"state": f"question {qi}", "cluster": qi, "turn": 1, "adv": {e: a1[e][i] for e in a1},
                            "q": {"return": [turn_r[i] + x for x in v], "outcome": v}})
            records.append({"state": f"question {qi}, episode {i}", "cluster": qi, "turn": 2, "adv": {e: a2[e][i] for e in a2},
                            "q": {"return": [outcome_r[i]] * 2, "outcome": [outcome_r[i]] * 2},
                            "v": {"return": v, "outcome": v}})
    settings = {"env": "search", "model": "toy", "states": 4, "num_generations": 4, "continuations": 2, "bf16": False,
                "temperature": 1.0, "bootstrap": 20}
    figures = credit_figures.analyse(records, "search", bootstrap=20)
    assert figures["outcome"]["turn 2"]["n"] == 16 and figures["outcome"]["turn 1"]["n"] == 16
    assert figures["outcome"]["turn 2"]["differences"]["mt-or"] == [0.0, 0.0, 0.0]  # the same advantages
    text = credit_report.tables({"settings": settings, "figures": figures})
    assert "**search, both turns: Pearson with A*** (95 % interval)" in text and "turn 2, Pearson MT-GRPO − GRPO-MR" in text
    old = {"settings": settings, "figures": credit_figures.analyse([r for r in records if r["turn"] == 1], "search", bootstrap=20)}
    rows = credit_report.summary([{"settings": settings, "figures": figures}, old]).splitlines()
    cells = [c.strip() for c in rows[-1].strip("|").split("|")]
    assert "MT-GRPO − GRPO-MR, outcome, turn 2" in rows[2] and cells.count("–") == 2  # no turn 2 before


def test_play_out_takes_turns_from_the_role_that_acts_next():
    class Two:
        roles, team_share = ("a", "b"), 0.0  # no team term shared after a turn

        def __init__(self):
            self.said = []
        done = property(lambda self: len(self.said) >= 3)

        def messages(self, role):
            return [{"role": "user", "content": role}]

        def act(self, role, text):
            self.said.append(role)
            return 1.0
    sampler = lambda role, ms: [([0], [0], "x") for _ in ms]  # noqa: E731
    envs = [Two(), Two()]
    assert credit.play_out(envs, [1, 0], sampler) == [3.0, 3.0]
    assert envs[0].said == ["b", "a", "b"] and envs[1].said == ["a", "b", "a"]


def test_analyse_intervals_and_differences_on_the_toy():
    records = credit.game_records(Fork, list(range(6)), policy(1), K=4, M=16, scale="group")
    out = credit_figures.analyse(records, "planpath", bootstrap=50)
    cell = out["return"]["turns 2+"]
    for e in ("grpo", "gigpo", "at"):
        v, lo, hi = cell[e]["pearson"]
        assert lo <= v <= hi
    assert set(cell["differences"]) == {"at-grpo", "gigpo-grpo", "at-gigpo"}
    assert out["return"]["turn 1"]["n"] + cell["n"] == out["return"]["all turns"]["n"]
    assert "| GiGPO |" in credit_report.tables({"settings": {"env": "planpath", "model": "toy", "states": 6,
                                                             "num_generations": 4, "continuations": 16, "bf16": False,
                                                             "temperature": 1.0, "bootstrap": 50}, "figures": out})


def test_the_tool_on_a_tiny_model_and_again_from_its_json(tiny_model_dir, tmp_path, capsys, monkeypatch):
    from conftest import force_cpu_bf16
    force_cpu_bf16(monkeypatch, False)  # a CPU without native bf16: --bf16 true computes, and is labelled, fp32
    path = tmp_path / "credit.json"
    common = ["--bootstrap", "20"]
    live = credit.main(["--env", "planpath", "--model", tiny_model_dir, "--states", "2", "--num-generations", "2",
                        "--continuations", "2", "--bf16", "true", "--json", str(path)] + common)
    assert live["settings"]["bf16"] is False and "fp32" in live["machine"]["precision"]
    assert live["settings"]["levels"] == "ours" and live["settings"]["flags"]["levels"] == "ours"  # every setting kept
    assert live["settings"]["flags"]["max_turns"] > 0 and "out" not in live["settings"]["flags"]
    printed = capsys.readouterr().out
    again = credit.main(["--from", str(path)])
    assert capsys.readouterr().out.strip() in printed  # the same tables, no model
    credit.main(["--from", str(path), str(path)])
    assert "**planpath: Pearson differences**" in capsys.readouterr().out
    assert json.dumps(again["figures"]) == json.dumps(live["figures"])
    assert len([r for r in live["records"] if r["scheme"] == "tree"]) % 2 == 0


def test_sokoban_is_measured_like_planpath(tiny_model_dir, capsys, monkeypatch):
    """AT-GRPO's other game: the same three estimators on its trajectories and its tree. The load
    recorded is the one at the start (it used to be read at the end)."""
    loads = iter(range(1, 10 ** 6))
    monkeypatch.setattr(credit.os, "getloadavg", lambda: (float(next(loads)), 0.0, 0.0))
    live = credit.main(["--env", "sokoban", "--model", tiny_model_dir, "--states", "2", "--num-generations", "2",
                        "--continuations", "2", "--bootstrap", "20"])
    assert live["settings"]["env"] == "sokoban" and "sokoban, model" in capsys.readouterr().out
    assert live["machine"]["load_at_start"] == 1.0
    assert {e for r in live["records"] for e in r["adv"]} == {"grpo", "gigpo", "at"}
    assert set(live["figures"]["success"]) == {"all turns", "turn 1", "turns 2+"}
    assert credit_report.record_problem(live["records"][0], "sokoban", "record 0") is None


def test_search_on_a_tiny_model(answering_model_dir, capitals, monkeypatch):
    from config import parse_args
    args = parse_args(["--model", answering_model_dir, "--bf16", "false", "--max-completion-length", "6"])
    real = credit.rewards.score_episodes

    def turn_rewards_that_differ(envs, rubric):  # the tiny model never calls the tool: R^T_1 from the query's length
        turn, outcome, means = real(envs, rubric)
        return [[0.1 * (len(e.completion[0]["content"]) % 4)] for e in envs], outcome, means
    monkeypatch.setattr(credit.rewards, "score_episodes", turn_rewards_that_differ)
    from policy import load_model
    model, tok = load_model(answering_model_dir, "cpu")
    qs = [{"question": "capital of France?", "answers": ["Paris"]}, {"question": "capital of Germany?", "answers": ["Berlin"]}]
    import tqdm
    with tqdm.tqdm(disable=True) as bar:
        records = credit.tool_records(model, tok, qs, capitals, args, G=3, M=4, chunk=5, bar=bar)
    first = [r for r in records if r["turn"] == 1]
    assert len(first) == 6 and {r["cluster"] for r in records} == {0, 1}
    without_critic = {e for e in credit_figures.ESTIMATORS["search"] if "values" not in estimators.BY_NAME[e].needs}
    assert all(len(r["q"]["return"]) == 2 and set(r["adv"]) == without_critic for r in records)
    answers = [r for r in records if r["turn"] == 2]
    assert answers and len(answers) <= 6 and all(r["adv"]["mt"] == r["adv"]["or"] for r in answers)
    for r in answers:  # V(s_2): the M continuations' R^O, which are the query's Q^ of R^O
        query = first[3 * r["cluster"] + int(r["state"].split("episode ")[1].split(",")[0])]
        assert r["v"]["outcome"] == query["q"]["outcome"] and r["q"]["outcome"][0] == r["q"]["outcome"][1]
    for qi in (0, 1):  # each answer's advantages: the estimators' A_2 from its group's R^T_1 (replayed) and R^O
        group = first[3 * qi:3 * qi + 3]
        mine = sorted((r for r in answers if r["cluster"] == qi), key=lambda r: r["state"])
        if len(mine) == 3:
            outcome = [r["q"]["outcome"][0] for r in mine]
            turn = [q["q"]["return"][0] - q["q"]["outcome"][0] for q in group]
            want = search_advantages(turn, outcome, [2] * 3, turn=2)
            for i, r in enumerate(mine):  # R^T_1 comes back from a difference of means: equal up to rounding
                assert {e: r["adv"][e] for e in want} == {e: pytest.approx(want[e][i], abs=1e-9) for e in want}
    # the rewards differed, R^T_1 too (some queries called the tool): A_2 is not A_1, the check above meant something
    assert any(r["adv"]["mr"] != r["adv"]["mt"] for r in answers) and any(q["adv"]["mt"] != q["adv"]["or"] for q in first)
    # every record keeps its group's raw rewards, from which any estimator of the table is scored again, the same
    import copy
    assert all(credit_report.group_ok(r["group"], r["turn"]) for r in records)
    again = copy.deepcopy(records)
    settings = {"flags": {"alpha": args.alpha}, "scale_rewards": args.scale_rewards}
    assert credit.scored({"records": again, "settings": {"env": "search"}}) == [e for e in credit_figures.ESTIMATORS["search"]
                                                                             if e in without_critic]
    assert credit.rescore({"settings": settings, "records": again}, sorted(without_critic)) == []
    assert [r["adv"] for r in again] == [r["adv"] for r in records]
    assert credit.rescore({"settings": settings, "records": again}, ["loo"]) == [] and set(again[0]["adv"]) == {"loo"}


def test_rescoring_by_hand_and_a_file_without_raw_rewards():
    """G = 2, K = 2: R^T_1 (0.7, 0), R^O (1.0, 0.0), both played 2 turns. Episode 0's query: GRPO-OR
    0.5 / (std 0.7071 + 1e-4); per-turn LOO (1.7 - 0) / (std of (1.7, 0) 1.2021 + 1e-4). A record
    measured before raw rewards were kept keeps its advantages, and says what it cannot give."""
    group = {"turn_rewards": [[0.7], [0.0]], "outcome": [1.0, 0.0], "turns": [2, 2], "episode": 0}
    new = {"cluster": 0, "turn": 1, "adv": {"or": 9.0}, "group": group}
    old = {"cluster": 1, "turn": 1, "adv": {"or": 0.25, "mt": 0.5}}
    result = {"settings": {"flags": {"alpha": 1.0}, "scale_rewards": "group"}, "records": [new, old]}
    assert credit.rescore(result, ["or", "loo"]) == ["loo"]  # the old record has no raw rewards for loo
    assert new["adv"] == pytest.approx({"or": 0.5 / (np.std([1.0, 0.0], ddof=1) + 1e-4),
                                        "loo": 1.7 / (np.std([1.7, 0.0], ddof=1) + 1e-4)})
    assert old["adv"] == {"or": 0.25, "mt": 0.5}
    for bad in ({**group, "turns": [0, 2]}, {**group, "episode": 2}, {**group, "outcome": [1.0, float("nan")]},
                {**group, "turn_rewards": [[0.7], [0.0, 0.1]]}, {**group, "turns": [1, 2]}):  # the record is turn 1 of
        assert not credit_report.group_ok(bad, 2 if bad["turns"] == [1, 2] else 1)  # an episode that played 1
    assert credit_report.record_problem({"state": "s", "cluster": 0, "turn": 1, "adv": {"or": 0.1}, "group": {
        **group, "turns": [0, 2]}, "q": {"return": [0, 0], "outcome": [0, 0]}}, "search", "record 0")


@pytest.mark.parametrize("argv, says", [
    (["--continuations", "3"], "even"),
    (["--states", "1"], "at least 2"),
    (["--num-generations", "1"], "at least 2"),
    (["--bootstrap", "1000000"], "--bootstrap from 10 to 100000"),
    (["--from", "/nonexistent.json"], "nonexistent"),
    (["--estimators", "loo"], "give --from FILE"),
    (["--from", "x.json", "--estimators", "loo,nope"], "nope is not a tool-use estimator"),
    (["--from", "x.json", "--estimators", ""], "holds an empty name"),
    (["--from", "x.json", "--pair", "mt"], "--pair mt: give two estimators"),
    (["--pair", "mt_ppo,mt"], "scores no mt_ppo (a row with a critic needs a checkpoint with one"),  # no critic/
    (["--env", "planpath", "--pair", "gigpo,mt"], "--env planpath scores no mt; it scores grpo, gigpo"),
    (["--from", "COMMITTED", "--pair", "mt,ppo"], "search-step0-fp32.json scores no ppo"),  # analysed without it
])
def test_bad_input_is_one_line(argv, says, capsys, monkeypatch):
    committed = os.path.join(os.path.dirname(__file__), "..", "docs", "runs", "credit", "search-step0-fp32.json")
    monkeypatch.setattr(credit, "measure", fails(AssertionError("measured instead of refusing")))
    monkeypatch.setattr(credit, "analyse", fails(AssertionError("analysed instead of refusing")))
    with pytest.raises(SystemExit) as e:
        credit.main([committed if a == "COMMITTED" else a for a in argv])
    assert says in str(e.value) + capsys.readouterr().err


@pytest.mark.parametrize("content", ["[]", '{"settings": {}, "records": []}', "not json",
                                     '{"settings": {"env": "search", "model": "m", "states": 2, "num_generations": 2, '
                                     '"continuations": 2, "bf16": false, "temperature": 1, "bootstrap": 10}, '
                                     '"records": [{"state": "s", "cluster": 0, "turn": 1, "adv": {"mt": "x"}, '
                                     '"q": {"return": [1, 2], "outcome": [1, 2]}}]}'])
def test_a_bad_json_file_is_one_line(content, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(SystemExit) as e:
        credit.main(["--from", str(path)])
    assert "not a tools/credit.py --json file" in str(e.value)


# ---------------------------------------------------------------- outputs checked first, inputs read as data
def toy_result(bootstrap=10):
    """A small measurement of the toy game, as credit.measure returns it."""
    records = credit.game_records(Fork, [0, 1, 2], policy(0), K=2, M=2, scale="group")
    for r in records:
        del r["_ids"]  # what the gradient reads; measure drops it
    return {"settings": {"env": "planpath", "model": "toy", "states": 3, "num_generations": 2, "continuations": 2,
                         "bf16": False, "temperature": 1.0, "scale_rewards": "group", "bootstrap": bootstrap, "seed": 0},
            "machine": {"cpu": "toy", "precision": "fp32", "threads": 1, "load_at_start": 0.0, "seconds": 1.0},
            "records": records}


def fails(error):
    """A stand-in that raises `error` whatever it is given."""
    def stand_in(*args, **kwargs):
        raise error
    return stand_in


def unwritable(tmp_path, case):
    """(a destination that cannot be written, what the refusal says) for one case."""
    import os
    if case == "folder":
        return str(tmp_path), "is a folder; give a file name"
    if case == "fifo":
        os.mkfifo(tmp_path / "fifo")  # writing there would block until a reader comes
        return str(tmp_path / "fifo"), "is a FIFO, not a regular file; give a file name"
    if case == "parent is a file":
        (tmp_path / "file").write_text("x")
        return str(tmp_path / "file" / "out.json"), f"cannot be made: {tmp_path / 'file'} is a file, not a folder"
    if case == "proc":  # read-only even for root, who ignores chmod
        return "/proc/no-such-folder/out.json", "cannot be written: no file can be made in /proc"
    if os.geteuid() == 0:
        pytest.skip("root writes through chmod; the /proc case covers root")
    if case == "read-only folder":
        (tmp_path / "ro").mkdir()
        (tmp_path / "ro").chmod(0o555)
        return str(tmp_path / "ro" / "out.json"), "Permission denied"
    (tmp_path / "old.json").write_text("{}")  # "read-only file"
    (tmp_path / "old.json").chmod(0o444)
    return str(tmp_path / "old.json"), "cannot be written (Permission denied)"


CASES = ["folder", "fifo", "parent is a file", "proc", "read-only folder", "read-only file"]


@pytest.mark.parametrize("flag", ["--json", "--png"])
@pytest.mark.parametrize("case", CASES)
def test_an_unwritable_output_is_refused_before_the_measurement(case, flag, tmp_path, monkeypatch):
    """Before: 20 minutes of measuring, then 'Is a directory' (or a hang on a FIFO) and nothing written."""
    import os
    monkeypatch.setattr(credit, "measure", lambda *a: pytest.fail("measured before checking the output"))
    path, says = unwritable(tmp_path, case)
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(SystemExit) as stop:
        credit.main(["--env", "planpath", flag, path])
    assert str(stop.value).startswith(f"{flag} {path} ") and says in str(stop.value) and "\n" not in str(stop.value)
    assert sorted(os.listdir(tmp_path)) == before  # no empty file left behind


def test_png_without_matplotlib_is_refused_before_the_measurement(tmp_path, monkeypatch):
    """Before: the measurement ran, then "no PNG: matplotlib is not installed"."""
    monkeypatch.setattr(credit, "has_matplotlib", lambda: False)
    monkeypatch.setattr(credit, "measure", lambda *a: pytest.fail("measured before checking matplotlib"))
    with pytest.raises(SystemExit, match="--png needs matplotlib: pip install -r requirements-plot.txt"):
        credit.main(["--env", "planpath", "--png", str(tmp_path / "a.png")])


def test_missing_folders_are_made_at_the_end_and_the_check_makes_nothing(tmp_path, monkeypatch):
    import os
    monkeypatch.setattr(credit, "measure", fails(KeyboardInterrupt()))
    with pytest.raises(SystemExit, match="stopped"):  # stopped during the measurement: no folder, no empty file
        credit.main(["--env", "planpath", "--json", str(tmp_path / "new" / "a.json")])
    assert os.listdir(tmp_path) == []
    monkeypatch.setattr(credit, "measure", lambda *a: toy_result())
    live = credit.main(["--env", "planpath", "--json", str(tmp_path / "new" / "deeper" / "a.json")])
    assert credit_report.read_result(str(tmp_path / "new" / "deeper" / "a.json"))["records"] == live["records"]


def test_a_write_that_fails_at_the_end_keeps_the_measurement(tmp_path, monkeypatch, capsys):
    """The disk filled up during the measurement: the result goes to a file of its own, named in
    one line, or is printed when no folder takes it."""
    import tempfile
    from tools import output
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    monkeypatch.setattr(credit, "measure", lambda *a: toy_result())

    full = fails(OSError(28, "No space left on device"))
    monkeypatch.setattr(output, "write_text", full)
    path = str(tmp_path / "c.json")
    with pytest.raises(SystemExit) as stop:
        credit.main(["--env", "planpath", "--json", path])
    message = str(stop.value)
    assert message.startswith(f"could not write {path}: No space left on device; the measurement is not lost, "
                              f"it is in {tmp_path / 'tmp'}/credit-") and "\n" not in message
    kept = message.split("it is in ")[1].split(" ")[0]
    assert credit_report.read_result(kept)["records"] == toy_result()["records"]
    assert f"--from {kept} --json FILE writes it again" in message
    monkeypatch.setattr(tempfile, "mkstemp", full)  # no folder takes it: printed
    with pytest.raises(SystemExit, match="it is printed above"):
        credit.main(["--env", "planpath", "--json", path])
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["records"] == toy_result()["records"]


def test_a_png_that_fails_at_the_end_points_to_the_json(tmp_path, monkeypatch):
    monkeypatch.setattr(credit, "measure", lambda *a: toy_result())
    monkeypatch.setattr(credit_report, "plot", fails(OSError(28, "No space left on device")))
    monkeypatch.setattr(credit, "picture_problem", lambda path: None)  # the plot is faked: no matplotlib needed
    path = str(tmp_path / "c.json")
    with pytest.raises(SystemExit, match=f"could not write {tmp_path}/c.png: No space left on device; the measurement "
                                         f"is not lost, it is in {path} "):
        credit.main(["--env", "planpath", "--json", path, "--png", str(tmp_path / "c.png")])
    assert credit_report.read_result(path)["settings"]["model"] == "toy"


def damaged(result, change):
    change(result)
    return result


@pytest.mark.parametrize("change, says", [
    (lambda r: r["settings"].update(bootstrap=10 ** 9), "settings: 'bootstrap' must be a whole number from 10 to 100000, got 1000000000"),
    (lambda r: r["settings"].update(bootstrap="1000"), "settings: 'bootstrap' must be a whole number from 10 to 100000, got \"1000\""),
    (lambda r: r["settings"].update(continuations=3), "settings: 'continuations' must be an even whole number"),
    (lambda r: r["settings"].update(bf16="yes"), "settings: 'bf16' must be true or false"),
    (lambda r: r["settings"].update(temperature=float("nan")), "settings: 'temperature' must be a number, at least 0, got NaN"),
    (lambda r: r["settings"].update(levels="mars"), "settings: 'levels' must be ours or public, got \"mars\""),
    (lambda r: r["settings"].update(max_calls=0), "settings: 'max_calls' must be a whole number, at least 1"),
    (lambda r: r["settings"].pop("states"), "settings lacks 'states'"),
    (lambda r: r["settings"].update(flags={"alpha": float("nan")}), "settings: 'flags' must be an object whose alpha is a finite number"),
    (lambda r: r["settings"].update(flags={"alpha": "x"}), "settings: 'flags' must be an object whose alpha is a finite number"),
    (lambda r: r["settings"].update(scale_rewards="nosuch"), "settings: 'scale_rewards' must be group or batch or none, got \"nosuch\""),
    (lambda r: r["machine"].update(seconds="20 min"), "machine: 'seconds' must be a number"),
    (lambda r: r.update(machine=[]), "'machine' must be an object"),
    (lambda r: r["records"][2].pop("q"), "record 2 lacks 'q'"),
    (lambda r: r["records"][3]["q"].update(success=[1.0]), "record 3: 'q' must be two finite numbers for each of return and success"),
    (lambda r: r["records"][4]["adv"].update(grpo=float("inf")), "record 4: 'adv' must be finite numbers keyed by grpo, gigpo, at"),
    (lambda r: r["records"][5]["adv"].update(mt=1.0), "record 5: 'adv' must be finite numbers keyed by"),
    (lambda r: r["records"][6].update(cluster="0"), "record 6: 'cluster' must be a whole number, at least 0, got \"0\""),
    (lambda r: r["records"][7].update(turn=0), "record 7: 'turn' must be a whole number, at least 1"),
    (lambda r: r["records"][8].update(state=None), "record 8: 'state' must be text, got null"),
    (lambda r: r["records"][9].update(v={"return": [0, 1]}), "record 9: 'v' must be two finite numbers"),
    (lambda r: r["records"].__setitem__(10, [1, 2]), "record 10 must be an object"),
])
def test_a_json_with_bad_settings_or_records_is_one_line_before_any_analysis(change, says, tmp_path, monkeypatch):
    """Before: settings.bootstrap 10**9 ran until killed; the string "1000", a record without q, a
    NaN ended in a traceback or in NaN figures."""
    monkeypatch.setattr(credit, "analyse", lambda *a: pytest.fail("analysed a bad file"))
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(damaged(toy_result(), change)))
    with pytest.raises(SystemExit) as stop:
        credit.main(["--from", str(path)])
    assert str(stop.value).startswith(f"{path} is not a tools/credit.py --json file: {says}")
    assert "\n" not in str(stop.value)


def same_figures(got, want, tol=1e-12):
    """Equal, numbers within tol (relative, and absolute near 0): recomputed on another CPU the sums
    of the bootstrap and the cosines round otherwise in the last bits (4.4e-16 seen). Text, keys,
    lengths, whole numbers and NaN where NaN must match exactly."""
    if isinstance(got, dict) and isinstance(want, dict):
        return got.keys() == want.keys() and all(same_figures(got[k], want[k], tol) for k in got)
    if isinstance(got, list) and isinstance(want, list):
        return len(got) == len(want) and all(same_figures(a, b, tol) for a, b in zip(got, want))
    if isinstance(got, float) and isinstance(want, float):
        return (got != got and want != want) or abs(got - want) <= tol * max(1.0, abs(want))
    return type(got) is type(want) and got == want


def test_the_figures_compare_within_their_tolerance_only():
    want = {"pearson": [0.5, 0.25, 0.75], "n": 12, "name": "turn 1", "nan": [float("nan")]}
    assert same_figures({**want, "pearson": [0.5 + 4.4e-16, 0.25, 0.75]}, want)
    for bad in ({**want, "pearson": [0.5 + 1e-9, 0.25, 0.75]}, {**want, "n": 13}, {**want, "name": "turn 2"},
                {**want, "nan": [0.0]}, {**want, "pearson": [0.5, 0.25]}, {k: v for k, v in want.items() if k != "n"}):
        assert not same_figures(bad, want)


def differing_advantages(again, result):
    """[(record index, estimator, saved, re-scored)] where a re-scored advantage differs from the saved one by more than 1e-12."""
    return [(i, e, v, b["adv"].get(e)) for i, (a, b) in enumerate(zip(result["records"], again["records"]))
            for e, v in a["adv"].items() if b["adv"].get(e) is None or abs(b["adv"][e] - v) > 1e-12]


def test_every_committed_measurement_loads_and_reproduces():
    """docs/runs/credit/*.json pass the checks, and their figures come out the same within 1e-12 (about 15 s)."""
    import glob
    import os
    paths = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "docs", "runs", "credit", "*.json")))
    assert len(paths) == 25  # the first page's six, the answer turn's three, K = 3 twice, Sokoban, public levels, two updates,
    # the field's estimators at step 0 (two turns, K = 3), on two trained K = 3 checkpoints and on the trained two-turn one;
    # Sudoku, the math team and the coding team at step 0; MT-PPO's checkpoint after 30 steps, with its critic, and MT-GRPO's
    import copy
    for path in paths:
        result = credit_report.read_result(path)
        asked = {d for cells in result["figures"].values() for cell in cells.values() for d in cell["differences"]}
        pairs = [tuple(d.split("-")) for d in sorted(asked)]  # the pre-registered ones and any --pair it was measured with
        figures = credit_figures.analyse(result["records"], result["settings"]["env"], result["settings"]["bootstrap"],
                                         pairs=pairs)
        assert same_figures(json.loads(json.dumps(figures)), result["figures"]), path
        if all("states" in r.get("group", {}) and "info_gain" in r["group"] for r in result["records"]):
            again = copy.deepcopy(result)  # the estimators the file saved, from the raw rewards and inputs kept
            saved = sorted({e for r in result["records"] for e in r["adv"]})
            assert credit.rescore(again, saved) == [], path
            assert not differing_advantages(again, result), (path, differing_advantages(again, result)[:3])
        if "gram" in result:  # the update's cosines, from the kept Gram matrix
            assert same_figures(json.loads(json.dumps(credit_figures.update(result, pairs))), result["update"]), path


def test_the_committed_within_state_measurement_reproduces():
    """docs/runs/credit/within-state/*.json (tools/credit_bias.py) pass its checks, and their
    figures come out the same within 1e-12."""
    import glob
    import os
    from tools import credit_bias
    paths = glob.glob(os.path.join(os.path.dirname(__file__), "..", "docs", "runs", "credit", "within-state", "*.json"))
    assert len(paths) == 3  # the first K = 3 checkpoint; both retrained ones, with the field's estimators
    for path in paths:
        result = credit_bias.read_state_result(path)
        figures = credit_bias.inside(result["records"], result["settings"]["bootstrap"])
        assert same_figures(json.loads(json.dumps(figures)), result["figures"]), path


def test_a_real_full_disk_leaves_no_half_file_and_prints_the_measurement(tmp_path):
    """A file-size limit stands for the full disk: every write past 4 kB fails (EFBIG). The cut
    --json is removed, so are the cut copies in the temporary and the current folder, and the
    measurement is printed: the last resort, still one line of error."""
    import os
    import subprocess
    import sys
    source = tmp_path / "toy.json"
    source.write_text(json.dumps(toy_result()))
    (tmp_path / "tmp").mkdir()
    (tmp_path / "cwd").mkdir()
    script = ("import json, resource, signal, sys\nsignal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
              "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\nfrom tools import credit\n"
              "credit.measure = lambda *a: json.load(open(sys.argv[1]))  # the measurement, done\n"
              "credit.main(['--env', 'planpath', '--json', sys.argv[2]])")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    run = subprocess.run([sys.executable, "-c", script, str(source), str(tmp_path / "out.json")],
                         cwd=tmp_path / "cwd", capture_output=True, text=True, timeout=300,
                         env={**os.environ, "TMPDIR": str(tmp_path / "tmp"), "PYTHONPATH": root, "OMP_NUM_THREADS": "1"})
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines()[-1].startswith(f"could not write {tmp_path / 'out.json'}: File too large; "
                                                          "the measurement is not lost, it is printed above")
    assert json.loads(run.stdout.strip().splitlines()[-1])["records"] == json.loads(source.read_text())["records"]
    assert sorted(os.listdir(tmp_path)) == ["cwd", "tmp", "toy.json"] and not os.listdir(tmp_path / "tmp") + os.listdir(tmp_path / "cwd")


# ---------------------------------------------------------------- the update (tools/credit_gradient.py)
def tabular_gradient(state, answer):
    """grad log pi(answer | state) of the toy's policy as a softmax with one logit per (state, answer):
    e_(s, a) - sum_b pi(b | s) e_(s, b), six coordinates (states "", "x", "y"; answers x, y)."""
    h = np.zeros(6)
    at = 2 * ["", "x", "y"].index(state)
    h[at:at + 2] = [-P_X[state], -(1 - P_X[state])]
    h[at + "xy".index(answer)] += 1
    return h


def test_the_update_cosine_by_hand():
    """Two trajectories of the toy, "xx" and "yx": four answers. A* from the exact Q - V: 0.25,
    0.25, -0.25, 2.25. GRPO: returns 1.5 and 3 -> -0.7071, -0.7071, +0.7071, +0.7071.
    g(A*) = (0.25, -0.25, 0.125, -0.125, 1.6875, -1.6875); g(GRPO) = 0.7071 (-1, 1, -0.5, 0.5, 0.75, -0.75);
    cos = 1.90625 / (2.41899 * 1.90394) = 0.41390."""
    from tools import credit_gradient
    states, answers = ["", "x", "", "y"], ["x", "x", "y", "x"]
    h = np.array([tabular_gradient(s, a) for s, a in zip(states, answers)])
    a_star = np.array([Q[s, a] - V[s] for s, a in zip(states, answers)])
    assert a_star.tolist() == [0.25, 0.25, -0.25, 2.25]
    grpo = np.array([-1, -1, 1, 1]) * 0.70711
    H = h @ h.T
    assert credit_gradient.cosine(H, grpo, a_star) == pytest.approx(0.41390, abs=1e-4)
    assert credit_gradient.cosine(H, grpo, -a_star) == pytest.approx(-0.41390, abs=1e-4)  # the wrong sign of A*
    assert credit_gradient.cosine(H, np.roll(grpo, 1), a_star) != pytest.approx(0.41390, abs=1e-2)  # shifted a turn
    assert credit_gradient.cosine(H, a_star, a_star) == pytest.approx(1.0)
    assert np.isnan(credit_gradient.cosine(H, np.zeros(4), a_star))  # no update at all


def test_the_update_on_the_toy_follows_the_exact_q():
    """tools/credit.py's records of the toy, with the tabular gradients: the cosine of each estimator
    from Monte Carlo A* (M = 4000) is the one from the exact Q - V, within the noise."""
    from tools import credit_gradient
    records = credit.game_records(Fork, [0, 1, 2], policy(0), K=4, M=4000, scale="group", chunk=10 ** 6)
    h = np.array([tabular_gradient(s, r["answer"]) for r, s in zip(records, histories(records, 4))])
    a_stars = {t: credit_figures.true_advantages(records, t) for t in ("return",)}
    out = credit_gradient.update_figures(records, h @ h.T, ("grpo", "gigpo", "at"), (("at", "grpo"),), a_stars,
                                         credit_figures.interval, bootstrap=20)["return"]
    exact = np.array([Q[s, r["answer"]] - V[s] for r, s in zip(records, histories(records, 4))])
    for e in ("grpo", "gigpo", "at"):
        ix = [i for i, r in enumerate(records) if e in r["adv"]]
        adv = np.array([records[i]["adv"][e] for i in ix])
        want = credit_gradient.cosine((h @ h.T)[np.ix_(ix, ix)], adv, exact[ix])
        assert out[e]["cosine"][0] == pytest.approx(want, abs=0.02), e
        assert out[e]["n"] == len(ix) and out[e]["ceiling"] > 0.99  # 4000 continuations: almost no noise
    assert out["differences"]["at-grpo"][0] == pytest.approx(out["at"]["cosine"][0] - out["grpo"]["cosine"][0])


def test_the_count_sketch_keeps_inner_products():
    from tools import credit_gradient
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(3_000_000, generator=g), torch.randn(3_000_000, generator=g)
    y = 0.6 * x + 0.8 * y  # cosine 0.6
    sketch = credit_gradient.CountSketch(len(x), dim=2 ** 16)
    sx, sy = sketch(x), sketch(y)
    assert float(sx @ sy / (sx.norm() * sy.norm())) == pytest.approx(0.6, abs=0.02)
    small = credit_gradient.CountSketch(10, dim=16)
    assert small.exact and small(torch.arange(10.0)).tolist() == list(range(10))


def test_the_gram_matrix_gives_the_loss_gradient(tiny_model_dir):
    """|g(A)|^2 from H equals the squared norm of loss.py's own gradient (token mean, ratio 1), times
    |T|^2: the h_i are the loss's per-answer gradients."""

    import loss
    from policy import load_model
    from sample import Sample
    from tools import credit_gradient
    model, _ = load_model(tiny_model_dir, "cpu")
    rows = [([1, 5, 9], [4, 4, 7]), ([1, 5], [8]), ([2, 3, 3, 6], [5, 1])]
    adv = np.array([0.5, -1.0, 2.0])
    n_params = sum(p.numel() for p in model.parameters())
    H = credit_gradient.answer_gram(model, rows, temperature=1.0, bf16=False, dim=n_params)  # exact: no projection
    samples = [Sample(ids=c + a, turn=[0] * len(c) + [1] * len(a)) for c, a in rows]
    for s, a in zip(samples, adv):
        s.adv, s.mask = [a] * len(s.ids), [int(t > 0) for t in s.turn]
    args = full_args(micro_batch_size=2, bf16=False)
    model.zero_grad()
    n_tokens = sum(len(a) for _, a in rows)
    for i in range(0, 3, 2):  # the loss's micro-batches, as policy_update runs them
        ids, attn, mask, a = loss.pad_batch(samples[i:i + 2], "cpu")
        logp = loss.token_logprobs(model, ids, attn, 1.0)
        loss.accumulate(dict(loss=0.0, kl=0.0, clip_fraction=0.0), logp, samples[i:i + 2], mask[:, 1:], a[:, 1:],
                        n_tokens, 3, args)
    norm2 = sum(float((p.grad.double() ** 2).sum()) for p in model.parameters() if p.grad is not None)
    assert adv @ H @ adv / n_tokens ** 2 == pytest.approx(norm2, rel=1e-5)  # float32 sums: thread order
    sketched = credit_gradient.answer_gram(model, rows, temperature=1.0, bf16=False, dim=n_params // 4)
    assert adv @ sketched @ adv / n_tokens ** 2 == pytest.approx(norm2, rel=0.05)  # a projection: close, not equal


# ---------------------------------------------------------------- K turns on search (--max-calls)
def test_search_with_three_turns_on_scripted_turns(tiny_model_dir, capitals, monkeypatch):
    """--max-calls 2: scripted turns (search France or Germany, answer Paris or Berlin) so that some
    episodes search twice. Every turn k that did not end its episode is continued: its Q is the
    mean return from k, and the next turn's V the mean return from k + 1 of the same continuations;
    the last turn's Q is exact."""
    import tqdm
    from conftest import CALL

    from config import parse_args
    from policy import load_model
    args = parse_args(["--model", tiny_model_dir, "--bf16", "false", "--max-calls", "2"])
    model, tok = load_model(tiny_model_dir, "cpu")
    rng = random.Random(4)
    texts = [CALL % "capital of France", CALL % "capital of Germany", "<answer>Paris</answer>", "<answer>Berlin</answer>"]
    monkeypatch.setattr(credit, "turn_generator", lambda *a, **k: lambda prompts: [
        tok(rng.choice(texts), add_special_tokens=False)["input_ids"] for _ in prompts])
    qs = [{"question": "capital of France?", "answers": ["Paris"]}, {"question": "capital of Germany?", "answers": ["Berlin"]}]
    with tqdm.tqdm(disable=True) as bar:
        records = credit.tool_records(model, tok, qs, capitals, args, G=4, M=4, chunk=6, bar=bar)
    assert {r["turn"] for r in records} == {1, 2, 3} and {r["kind"] for r in records} == {"call", "answer", "last"}
    for r in records:
        assert r["kind"] == ("last" if r["turn"] == 3 else "answer" if "<answer>" in r["answer"] else "call")
        last = r["kind"] != "call"  # an answer, or turn 3: the episode ends there
        assert (r["q"]["return"][0] == r["q"]["return"][1]) or not last  # the last turn's Q is exact
        if r["turn"] == 3:  # MT-GRPO's A_K = alpha^0 norm(R^O) = GRPO-OR's
            assert r["adv"]["mt"] == r["adv"]["or"] == r["adv"]["mt_half"]
    for before, r in zip(records, records[1:]):  # an episode's turns follow each other
        if r["turn"] >= 2:  # V(s_k): the continuations of turn k - 1; their return from k is that from k - 1 less R^T_{k-1}
            assert before["turn"] == r["turn"] - 1 and before["kind"] == "call"
            assert r["v"]["outcome"] == before["q"]["outcome"]
            paid = [x - y for x, y in zip(before["q"]["return"], r["v"]["return"])]  # the call's own turn reward:
            assert paid[0] == pytest.approx(paid[1]) and min(abs(paid[0] - t) for t in (0.2, 0.7)) < 1e-9  # every call ran
    assert credit_figures.call_bias(records, bootstrap=20)["calls"] >= 1


def test_the_call_bonus_by_hand():
    """adv = 2 A* + 1 [calls] gives a bonus c = 1 in advantage units, c / b = 0.5 in the return's;
    adv = A* gives none. Turn 3 of 3 (kind "last") is not a decision and stays out."""
    rng, records = random.Random(0), []
    for qi in range(6):
        for kind in ("call", "answer", "call", "answer", "last"):
            x = rng.uniform(-1, 1)
            records.append({"cluster": qi, "state": f"q{qi} {len(records)}", "turn": 3 if kind == "last" else 1, "kind": kind,
                            "q": {"return": [x, x], "outcome": [x, x]}, "v": {"return": [0.0, 0.0], "outcome": [0.0, 0.0]},
                            "adv": {"mt": 2 * x + (kind == "call") + 5 * (kind == "last"), "or": x}})
    bias = credit_figures.call_bias(records, bootstrap=30)
    assert (bias["calls"], bias["answers"]) == (12, 12)
    for target in ("return", "outcome"):
        assert bias[target]["mt"]["bonus"] == pytest.approx([1.0, 1.0, 1.0])
        assert bias[target]["mt"]["bonus_in_return"] == pytest.approx([0.5, 0.5, 0.5])
        assert bias[target]["or"]["bonus"] == pytest.approx([0.0, 0.0, 0.0], abs=1e-9)
    assert credit_figures.call_bias([r for r in records if r["kind"] != "answer"]) is None  # one kind: nothing to compare
    assert "| MT-GRPO | 1.00 [1.00, 1.00] | 0.50 [0.50, 0.50] |" in "\n".join(credit_report.bias_table(bias, "search"))


def test_a_bootstrap_draw_without_an_answer_is_left_out_and_counted():
    """adv = 2 A* + 1 [calls] in every question, so every draw that holds a call and an answer fits
    c = 1 exactly. Question 1 has calls only: a draw of it alone has no answer, the fit is singular
    (lstsq would give an arbitrary c); such draws are left out and counted, and the interval stays
    [1, 1]."""
    rng, records = random.Random(1), []
    for qi, kinds in enumerate((("call", "answer", "call", "answer"), ("call", "call", "call"))):
        for kind in kinds:
            x = rng.uniform(-1, 1)
            records.append({"cluster": qi, "state": f"q{qi} {len(records)}", "turn": 1, "kind": kind,
                            "q": {"return": [x, x], "outcome": [x, x]}, "v": {"return": [0.0, 0.0], "outcome": [0.0, 0.0]},
                            "adv": {"mt": 2 * x + (kind == "call"), "or": x}})
    bias = credit_figures.call_bias(records, bootstrap=200)
    mt = bias["return"]["mt"]
    assert mt["singular_draws"] > 20 and mt["bonus"] == pytest.approx([1.0, 1.0, 1.0])
    assert mt["bonus_in_return"] == pytest.approx([0.5, 0.5, 0.5]) and mt["b_not_positive_draws"] == 0


def test_the_across_state_specifications_and_terms_add_up():
    """MT-GRPO's c splits into its terms (the fit is linear in the advantage): norm(R^T_1) +
    norm(R^T_2) + norm(R^O) = c, on the committed K = 3 measurement; and its specifications run."""
    import os
    result = credit_report.read_result(os.path.join(os.path.dirname(__file__), "..", "docs", "runs", "credit",
                                                    "search-mt3-k3-bf16.json"))
    bias = credit_figures.call_bias(result["records"], bootstrap=50)
    total = sum(t["bonus"][0] for t in bias["mt_terms"].values())
    assert total == pytest.approx(bias["return"]["mt"]["bonus"][0], abs=1e-9)
    assert set(bias["specifications"]) == {"pooled", "turn 2 alone", "a turn dummy", "question effects",
                                           "turn 2 alone, V(s) a covariate"}
    assert bias["specifications"]["pooled"]["mt"]["bonus"][0] == pytest.approx(bias["return"]["mt"]["bonus"][0])
    assert all(v["bonus"][1] == v["bonus"][1] for v in bias["specifications"]["question effects"].values())


def test_a_kept_gram_matrix_is_read_as_data_and_gives_the_update_again(tmp_path, capsys):
    result = toy_result()
    n = len(result["records"])
    h = np.array([tabular_gradient(s, r["answer"]) for r, s in zip(result["records"], histories(result["records"], 2))])
    result["gram"] = (h @ h.T).tolist()
    path = tmp_path / "g.json"
    path.write_text(json.dumps(result))
    again = credit.main(["--from", str(path)])
    assert set(again["update"]) == {"return", "success"} and "cosine of each estimator's policy gradient" in capsys.readouterr().out
    asymmetric = [row[:] for row in result["gram"]]
    asymmetric[0][1] = 3 * asymmetric[0][1] + 5
    indefinite = [[1.0 if i == j else (0.9 if (i + j) % 2 else -0.9) for j in range(n)] for i in range(n)]
    for bad, says in ((result["gram"][:-1], f"'gram' must be {n} lists"), ([[float("nan")] * n] * n, "finite"),
                      ("gram", "lists"), (asymmetric, "'gram' must be symmetric"),
                      (indefinite, "'gram' must have no negative eigenvalue")):
        path.write_text(json.dumps({**result, "gram": bad}).replace("NaN", "1e999"))
        with pytest.raises(SystemExit, match=says):
            credit.main(["--from", str(path)])


def test_the_tables_name_the_levels_and_the_turns_a_measurement_used():
    """planpath-public-step0-bf16.json measured the public levels, search-mt3-k3-bf16.json three turns;
    a file without the key measured the default (our levels, two turns)."""
    base = {"env": "planpath", "model": "m"}
    assert credit_report.where({**base, "levels": "public"}) == ", the public levels"
    assert credit_report.where(base) == credit_report.where({**base, "levels": "ours"}) == ""
    assert credit_report.where({"env": "search", "max_calls": 2}) == ", K = 3 turns"
    assert credit_report.where({"env": "search"}) == ""


# ---------------------------------------------------------------- the call bias inside a state
def test_a_continuation_is_scored_with_the_rest_of_its_group_as_it_is():
    """Row 0 of a group of 2 replaced by a continuation that earned R^T = (0.2, 0), R^O = 0; row 1
    keeps (0.2, 0.7), 1.5. norm over the pair: R^O (0, 1.5) gives row 0 -0.75 / (std 1.0607 + 1e-4);
    R^T_2 (0, 0.7) gives -0.35 / (0.4950 + 1e-4); the merged rewards (0.2, 2.4) -1.1 / (1.5556 +
    1e-4). A_2: GRPO-OR norm(R^O), MT-GRPO norm(R^T_2) + norm(R^O), alpha 0.5 norm(R^T_2) + norm(R^O) / 2."""
    from tools import credit_bias
    o = -0.75 / (np.std([0, 1.5], ddof=1) + 1e-4)
    t2 = -0.35 / (np.std([0, 0.7], ddof=1) + 1e-4)
    mr = -1.1 / (np.std([0.2, 2.4], ddof=1) + 1e-4)
    # the field's: the continuation answered at turn 2 (2 turns), row 1 played 3. Per-turn LOO at turn
    # 2: both played it, episode rewards 0.2 and 2.4. Kevin: returns (gamma 0.4) row 0 [0.2, 0.0],
    # row 1 [0.2 + 0.4 * 1.3, 0.7 + 0.4 * 1.5, 1.5], normalised over all five (population std)
    pool = [0.2, 0.0, 0.72, 1.3, 1.5]
    kevin = (0.0 - np.mean(pool)) / (np.std(pool) + 1e-8)
    adv, terms = credit_bias.a_2([[0.2, 0.7], [0.2, 0.7]], [1.5, 1.5], [3, 3], 0, [0.2, 0.0], 0.0, 2, 1.0, "group")
    want = {"or": o, "mr": mr, "mt": t2 + o, "mt_half": t2 + o / 2, "loo": 2 * mr,  # -2.2 / the same std
            "kevin": kevin}
    assert set(adv) == set(credit_bias.INSIDE) and {e: adv[e] for e in want if e in adv} == pytest.approx(
        {e: v for e, v in want.items() if e in adv})
    assert terms == pytest.approx({"norm(R^T_2)": t2, "norm(R^O)": o})
    same, _ = credit_bias.a_2([[0.2, 0.7], [0.2, 0.7]], [1.5, 1.5], [3, 3], 0, [0.2, 0.7], 1.5, 3, 1.0, "group")
    # the same rewards as the row it replaced: no group-relative credit; Kevin's still ranks the turns
    want = {"or": 0.0, "mr": 0.0, "mt": 0.0, "mt_half": 0.0, "loo": 0.0,
            "kevin": (1.3 - np.mean([0.72, 1.3, 1.5])) / (np.std([0.72, 1.3, 1.5]) + 1e-8)}
    assert {e: same[e] for e in want if e in same} == pytest.approx({e: v for e, v in want.items() if e in same})


def test_the_gap_inside_a_state_by_hand():
    """Four states; in each, every continuation's advantage is 2 x its return + 1 if it calls: the
    gap of the advantage is 2 gap_Q + 1, so the fit gives c = 1, b = 2. A state with calls only is
    left out of the gaps; "neither" continuations are counted and not compared."""
    from tools import credit_bias
    rng, records = random.Random(3), []
    for qi in range(4):
        conts = []
        for kind in ("call", "answer", "call", "answer", "neither"):
            ret = rng.uniform(0, 2)
            value = 2 * ret + (kind == "call")
            conts.append({"kind": kind, "return": ret, "adv": {e: value for e in ("or", "mr", "mt", "mt_half")},
                          "terms": {"norm(R^T_2)": float(kind == "call"), "norm(R^O)": 2 * ret}})
        records.append({"cluster": qi, "state": f"q{qi}", "continuations": conts})
    records.append({"cluster": 4, "state": "q4", "continuations": [{**records[0]["continuations"][0]}]})
    figures = credit_bias.inside(records, bootstrap=50)
    assert (figures["states"], figures["with_both_kinds"]) == (5, 4)
    assert figures["continuations"] == {"call": 9, "answer": 8, "neither": 4}
    for e in ("or", "mr", "mt", "mt_half"):
        assert figures[e]["bonus"][0] == pytest.approx(1.0) and figures[e]["slope"][0] == pytest.approx(2.0)
    assert figures["norm(R^T_2)"]["mean_gap"] == pytest.approx([1.0, 1.0, 1.0])
    assert "| MT-GRPO | " in "\n".join(credit_bias.inside_table(figures))


def test_hard_links_count_as_the_same_file(tmp_path):
    """--json and --png that are two names of one file (a hard link): the picture would overwrite the
    measurement; so would --json over the --from file of credit_bias.py through a hard link."""
    from tools import credit_bias
    (tmp_path / "a.json").write_text("{}")
    os.link(tmp_path / "a.json", tmp_path / "b.png")
    with pytest.raises(SystemExit, match="--json and --png both name"):
        credit.main(["--json", str(tmp_path / "a.json"), "--png", str(tmp_path / "b.png")])
    os.link(tmp_path / "a.json", tmp_path / "c.json")
    with pytest.raises(SystemExit, match="is the --from file: writing it would replace"):
        credit_bias.main(["--from", str(tmp_path / "a.json"), "--json", str(tmp_path / "c.json")])
    assert (tmp_path / "a.json").read_text() == "{}"


@pytest.mark.parametrize("name, argv, says", [
    ("planpath-step0-bf16.json", ["--estimators", "mt"], "--estimators re-scores tool-use measurements"),
    ("search-step0-fp32.json", ["--env", "calc"], "--env calc: "),
])
def test_a_flag_a_saved_measurement_makes_pointless_is_refused_not_ignored(name, argv, says):
    """On 7b45f4d both printed the file's tables and exited 0, saying nothing of the flag."""
    path = os.path.join(os.path.dirname(__file__), "..", "docs", "runs", "credit", name)
    with pytest.raises(SystemExit, match=re.escape(says)):
        credit.main(["--from", path, *argv])


def test_a_state_measurement_is_read_as_data(tmp_path):
    """Each bad value of a --from file is one line naming the file, the record and the key: NaN or
    infinite returns and advantages, a text advantage, a null term, a fractional bootstrap, an array,
    deep nesting, bytes that are not UTF-8 (each was a traceback or a table of dashes before)."""
    from tools import credit_bias
    cont = {"kind": "call", "return": 0.5, "adv": {"mt": 0.1, "or": -0.2}, "terms": {"norm(R^T_2)": 0.0, "norm(R^O)": 0.1}}
    good = {"settings": {"bootstrap": 20}, "records": [{"cluster": 0, "continuations": [cont, {**cont, "kind": "answer"}]}]}
    path = tmp_path / "state.json"
    path.write_text(json.dumps(good))
    assert credit_bias.read_state_result(str(path)) == good

    def bad(c=None, settings=None):
        return {"settings": settings or {"bootstrap": 20}, "records": [{"cluster": 0, "continuations": [{**cont, **(c or {})}]}]}
    cases = [(bad({"return": float("nan")}), "continuation 0: 'return' must be a finite number, got NaN"),
             (bad({"return": float("-inf")}), "'return' must be a finite number"),
             (bad({"adv": {"mt": float("nan")}}), "'adv' must be finite numbers"),
             (bad({"adv": {"mt": "0.5"}}), "'adv' must be finite numbers"),
             (bad({"adv": {"nope": 0.5}}), "'adv' must be finite numbers keyed by or, mr"),
             (bad({"terms": {"norm(R^T_2)": None, "norm(R^O)": 0.1}}), "'terms' must be finite numbers"),
             (bad({"kind": "maybe"}), "'kind' must be call or answer"),
             (bad(settings={"bootstrap": 10.5}), "'bootstrap' must be a whole number from 10 to 100000, got 10.5"),
             ({**good, "records": [{"cluster": 0, "continuations": [[1, 2]]}]},  # an AttributeError on 7b45f4d
              "record 0, continuation 0 must be an object, got [1, 2]")]
    for value, message in cases:
        path.write_text(json.dumps(value))
        with pytest.raises(SystemExit, match=f"{path} is not a tools/credit_bias.py --json file: .*{re.escape(message)}"):
            credit_bias.read_state_result(str(path))
    for text in ("[1, 2]", "[" * 100_000 + "]" * 100_000):
        path.write_text(text)
        with pytest.raises(SystemExit, match="is not a tools/credit_bias.py --json file"):
            credit_bias.read_state_result(str(path))
    path.write_bytes(b'{"settings": {"bootstrap": 20}, "records": ["\xff"]}')
    with pytest.raises(SystemExit, match="not UTF-8 text"):
        credit_bias.read_state_result(str(path))


def test_the_state_measurement_runs_on_a_tiny_model_and_again_from_its_json(tiny_model_dir, tmp_path, capsys):
    from tools import credit_bias
    path = tmp_path / "state.json"
    live = credit_bias.main(["--model", tiny_model_dir, "--states", "2", "--num-generations", "2", "--per-kind", "1",
                             "--most", "2", "--max-calls", "2", "--max-completion-length", "8", "--bf16", "false",
                             "--bootstrap", "20", "--json", str(path)])
    assert live["settings"]["max_calls"] == 2 and isinstance(live["records"], list)
    again = credit_bias.main(["--from", str(path)])
    assert again["figures"] == live["figures"]
    path.write_text(json.dumps({**live, "records": [{"cluster": 0}]}))
    with pytest.raises(SystemExit, match="is the --from file: writing it would replace"):
        credit_bias.main(["--from", str(path), "--json", str(path)])
    with pytest.raises(SystemExit, match="is not a tools/credit_bias.py --json file: record 0 must be an object"):
        credit_bias.main(["--from", str(path)])
    with pytest.raises(SystemExit):  # two turns: no turn can both call and answer
        credit_bias.main(["--model", tiny_model_dir, "--states", "2", "--max-calls", "1"])
    assert "--max-calls 2 or more is needed" in capsys.readouterr().err


@pytest.mark.plot
def test_json_and_png_cannot_name_one_file_and_the_picture_needs_a_format(tmp_path, capsys):
    """--json m.png --png m.png wrote the measurement, then the picture over it ("wrote" twice, exit
    0); --png x.out failed in matplotlib after the measurement. Both are refused first."""
    source = tmp_path / "toy.json"
    source.write_text(json.dumps(toy_result()))
    same = tmp_path / "m.png"
    with pytest.raises(SystemExit, match="--json and --png both name .*m.png: the picture would overwrite"):
        credit.main(["--from", str(source), "--json", str(same), "--png", str(tmp_path / "." / "m.png")])
    with pytest.raises(SystemExit, match=r"--png .*x.out: matplotlib writes .*png.*; end the file's name"):
        credit.main(["--from", str(source), "--png", str(tmp_path / "x.out")])
    assert not same.exists() and not (tmp_path / "x.out").exists()
    kept = source.read_text()
    for flag in ("--json", "--png"):  # an output that names the measurement read: it would be replaced
        with pytest.raises(SystemExit, match=f"{flag} .*toy.json is a --from file: writing it would replace"):
            credit.main(["--from", str(source), flag, str(tmp_path / "." / "toy.json")])
    assert source.read_text() == kept


def test_a_saved_measurement_is_scored_for_the_estimators_asked(capsys):
    """--from FILE --estimators loo,kevin on a committed file with raw rewards: the tables hold those
    two (no MT-GRPO − GRPO-MR line, no KeyError: the report once needed both), and the rest is as saved."""
    import os
    path = os.path.join(os.path.dirname(__file__), "..", "docs", "runs", "credit", "search-step0-field-bf16.json")
    result = credit.main(["--from", path, "--estimators", "loo,kevin"])
    cell = result["figures"]["return"]["turn 1"]
    assert {"loo", "kevin"} <= set(cell) and not {"or", "mr", "mt"} & set(cell)
    saved = credit_report.read_result(path)["figures"]["return"]["turn 1"]
    assert cell["loo"] == saved["loo"] and cell["kevin"] == saved["kevin"]  # the same numbers from the raw rewards
    out = capsys.readouterr().out
    assert "| per-turn LOO |" in out and "| GRPO-MR |" not in out


class SharedTeam:
    """Two roles, two turns: each answer earns its length; when the second role ends a turn the
    first gets a team term of 0.5 (team_share), as a shared team term does."""
    roles = ("first", "second")

    def __init__(self):
        self.turn, self.next, self.team_share = 0, 0, 0.0

    done = property(lambda self: self.turn >= 2)

    def copy(self):
        import copy
        return copy.copy(self)

    def messages(self, role):
        return [{"role": "user", "content": f"{role} {self.turn}"}]

    def act(self, role, text):
        assert role == self.roles[self.next]
        self.next = (self.next + 1) % 2
        self.turn += self.next == 0
        self.team_share = 0.5 if self.next == 0 else 0.0
        return float(len(text))


def test_a_team_term_shared_after_the_turn_counts_in_the_return_and_replays():
    """The return counts the first role's team term once per turn, at the answer that ends the turn
    (by hand: "ab" 2 + "c" 1 + 0.5, twice = 7); a trajectory's earlier answer carries its team term
    (atgrpo.Turn.share) and replays to its own reward."""
    import atgrpo
    sampler = lambda role, lists: [((), (), "ab" if role == "first" else "c") for _ in lists]  # noqa: E731
    assert credit.play_out([SharedTeam()], [0], sampler) == [7.0]
    (trajectory,), _ = atgrpo.parallel_rollout([SharedTeam()], sampler)
    assert [(t.reward, t.share) for t in trajectory] == [(2.5, 0.5), (1.0, 0.0), (2.5, 0.5), (1.0, 0.0)]
    env, earned = credit.replayed(SharedTeam(), "first", "ab", trajectory[0].reward - trajectory[0].share)
    assert earned == 2.0 and credit.replayed(env, "second", "c", 1.0)[1] == 1.5  # the turn's end: 1 + 0.5
    with pytest.raises(RuntimeError, match="not deterministic"):
        credit.replayed(SharedTeam(), "first", "ab", trajectory[0].reward)  # the share is not its own
