"""tools/credit.py: Monte Carlo against a toy game whose Q is known exactly, each figure by hand,
and the tool end to end on a tiny model."""
import json
import random

import numpy as np
import pytest

from tools import credit

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
    a_star = credit.true_advantages(records, "return")[0]
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
    tree = [r for r in records if r["scheme"] == "tree"]
    for at in range(0, len(tree), K):
        rewards = np.array([[REWARD[h + r["answer"]] for r, h in zip(tree[at:at + K], histories(records, K)[len(rows) + at:])]])
        assert [r["adv"]["at"] for r in tree[at:at + K]] == pytest.approx(norm(rewards)[0].tolist())


def test_the_figures_by_hand():
    adv, a_star = [1, -1, 0, 0], [2, -2, 1, -1]
    # Pearson: cov 1, std 0.7071 and 1.5811 -> 0.8944; Spearman: ranks [4, 1, 2.5, 2.5] and
    # [4, 1, 3, 2] -> 1.125 / (1.0607 * 1.1180) = 0.9487; sign: all |A*| > 0.8, adv 0 misses -> 2/4
    f = credit.figures(adv, a_star, noise=0.4)
    assert f["pearson"] == pytest.approx(0.894427, abs=1e-6)
    assert f["spearman"] == pytest.approx(0.948683, abs=1e-6)
    assert f["sign"] == 0.5 and f["zero"] == 0.5
    assert credit.figures(adv, a_star, noise=0.6)["sign"] == 1.0  # |A*| = 1 is now within the noise
    assert credit.ranks([3, 1, 3, 2]).tolist() == [3.5, 1, 3.5, 2]
    assert np.isnan(credit.pearson([0, 0, 0], [1, 2, 3]))  # equal advantages: no correlation


def test_the_noise_ceiling_by_hand():
    # halves [1, 2, 3, 4] and [1, 3, 2, 4]: r = 0.8, Spearman-Brown 2r/(1+r) = 0.8889, ceiling 0.9428;
    # differences [0, -1, 1, 0]: std 0.7071, noise 0.3536
    n = credit.noise_ceiling([1, 2, 3, 4], [1, 3, 2, 4])
    assert n["split_half"] == pytest.approx(0.8)
    assert n["ceiling"] == pytest.approx((1.6 / 1.8) ** 0.5)
    assert n["noise"] == pytest.approx(0.5 ** 0.5 / 2)


def test_true_advantage_shared_state_or_its_own_v():
    records = [{"state": "s", "q": {"t": [1.0, 3.0]}}, {"state": "s", "q": {"t": [0.0, 1.0]}},
               {"state": "u", "q": {"t": [2.0, 2.0]}, "v": {"t": [1.0, 0.0]}}]
    a, a1, a2 = credit.true_advantages(records, "t")
    assert a1.tolist() == [0.5, -0.5, 1.0] and a2.tolist() == [1.0, -1.0, 2.0]
    assert a.tolist() == [0.75, -0.75, 1.5]


def test_search_turn_one_advantages_by_hand():
    # G = 3: R^T_1 = [0.7, 0, 0], R^O = [1.9, 1.9, 0]. norm(R^O): mean 1.2667, std 1.0970 ->
    # [0.5773, 0.5773, -1.1547]; norm(R^T): [1.1547, -0.5773, -0.5773]; MT A_1 is their sum,
    # MR normalises R^T + R^O = [2.6, 1.9, 0]: mean 1.5, std 1.3454 -> [0.8176, 0.2973, -1.1149]
    adv = credit.search_advantages([0.7, 0, 0], [1.9, 1.9, 0])
    assert adv["or"] == pytest.approx([0.5773, 0.5773, -1.1547], abs=1e-3)
    assert adv["mt"] == pytest.approx([1.7320, 0.0, -1.7320], abs=1e-3)  # not A_2 = norm(R^O)
    assert adv["mr"] == pytest.approx([0.8176, 0.2973, -1.1149], abs=1e-3)
    assert credit.search_advantages([0, 0], [1, 1])["mt"] == [0, 0]  # equal rewards: no credit


def test_play_out_takes_turns_from_the_role_that_acts_next():
    class Two:
        roles = ("a", "b")

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
    out = credit.analyse(records, "planpath", bootstrap=50)
    cell = out["return"]["turns 2+"]
    for e in ("grpo", "gigpo", "at"):
        v, lo, hi = cell[e]["pearson"]
        assert lo <= v <= hi
    assert set(cell["differences"]) == {"at-grpo", "gigpo-grpo", "at-gigpo"}
    assert out["return"]["turn 1"]["n"] + cell["n"] == out["return"]["all turns"]["n"]
    assert "| GiGPO |" in credit.tables({"settings": {"env": "planpath", "model": "toy", "states": 6, "num_generations": 4,
                                                        "continuations": 16, "bf16": False, "temperature": 1.0,
                                                        "bootstrap": 50}, "figures": out})


def test_the_tool_on_a_tiny_model_and_again_from_its_json(tiny_model_dir, tmp_path, capsys, monkeypatch):
    from conftest import force_cpu_bf16
    force_cpu_bf16(monkeypatch, False)  # a CPU without native bf16: --bf16 true computes, and is labelled, fp32
    path = tmp_path / "credit.json"
    common = ["--bootstrap", "20"]
    live = credit.main(["--env", "planpath", "--model", tiny_model_dir, "--states", "2", "--num-generations", "2",
                        "--continuations", "2", "--bf16", "true", "--json", str(path)] + common)
    assert live["settings"]["bf16"] is False and "fp32" in live["machine"]["precision"]
    printed = capsys.readouterr().out
    again = credit.main(["--from", str(path)])
    assert capsys.readouterr().out.strip() in printed  # the same tables, no model
    credit.main(["--from", str(path), str(path)])
    assert "**planpath: Pearson differences**" in capsys.readouterr().out
    assert json.dumps(again["figures"]) == json.dumps(live["figures"])
    assert len([r for r in live["records"] if r["scheme"] == "tree"]) % 2 == 0


def test_search_on_a_tiny_model(tiny_model_dir, capitals, monkeypatch):
    import train
    args = train.parse_args(["--model", tiny_model_dir, "--bf16", "false", "--max-completion-length", "6"])
    from policy import load_model
    model, tok = load_model(tiny_model_dir, "cpu")
    qs = [{"question": "capital of France?", "answers": ["Paris"]}, {"question": "capital of Germany?", "answers": ["Berlin"]}]
    import tqdm
    with tqdm.tqdm(disable=True) as bar:
        records = credit.search_records(model, tok, qs, capitals, args, G=3, M=4, chunk=5, bar=bar)
    assert len(records) == 6 and {r["cluster"] for r in records} == {0, 1}
    assert all(len(r["q"]["return"]) == 2 and set(r["adv"]) == {"or", "mr", "mt"} for r in records)


@pytest.mark.parametrize("argv, says", [
    (["--continuations", "3"], "even"),
    (["--states", "1"], "at least 2"),
    (["--num-generations", "1"], "at least 2"),
    (["--from", "/nonexistent.json"], "nonexistent"),
])
def test_bad_input_is_one_line(argv, says, capsys):
    with pytest.raises(SystemExit) as e:
        credit.main(argv)
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
