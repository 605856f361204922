"""AT-GRPO tree sampling and grouping, on real Sokoban tasks with a scripted random policy."""
import random

import pytest
import torch

import env_sokoban as sk
import sokoban
from atgrpo import (Group, best_index, parallel_rollout, trajectory_samples, tree_rollout, tree_samples,
                    tree_step)

MOVES = ["U", "D", "L", "R"]


def random_policy(seed, log):
    """sample(role, message_lists): random move answers; records every prompt it was given."""
    rng = random.Random(seed)

    def sample(role, message_lists):
        out = []
        for messages in message_lists:
            log.append((role, repr(messages)))
            text = "<answer>" + " ".join(rng.choice(MOVES) for _ in range(rng.randint(1, 3))) + "</answer>"
            if rng.random() < 0.1:
                text = "garbage"
            prompt = list(range(len(messages[-1]["content"]) % 7 + 1))
            out.append((prompt, [rng.randint(0, 9) for _ in range(3)], text))
        return out
    return sample


def levels(n, seed0=0):
    return [sk.SokobanTask(sokoban.level_for(seed0 + i, size=6, boxes=1, reverse_steps=6), max_turns=3)
            for i in range(n)]


def test_best_index_is_greedy_with_ties_to_the_lowest():
    assert best_index([0.1, 0.5, 0.5, -1]) == 1
    assert best_index([0.0, 0.0]) == 0


class Counter:
    """A fake environment: the reward of an answer is the number in its text."""
    def __init__(self, turn=0):
        self.turn, self.acted = turn, []

    def copy(self):
        return Counter(self.turn)

    def act(self, role, text):
        self.acted.append(text)
        return float(text)


def test_tree_step_scores_copies_and_continues_from_the_best():
    env = Counter(turn=2)
    candidates = [([1], [2], t) for t in ("0.5", "3", "3", "-1")]
    group, branch = tree_step(env, "level 7", "planner", candidates)
    assert group.key == ("level 7", "planner", 3)  # two turns done: this is turn 3
    assert group.rewards == [0.5, 3.0, 3.0, -1.0] and group.chosen == 1  # tie: the lower index
    assert branch.acted == ["3"] and env.acted == []  # the chosen copy; the original never acts


def test_every_group_shares_one_byte_identical_prompt():
    log = []
    groups, _ = tree_rollout(levels(3), [10, 11, 12], random_policy(0, log), K=4)
    assert len(log) == 4 * len(groups)
    for g_index in range(len(groups)):
        prompts = {p for _, p in log[4 * g_index:4 * g_index + 4]}
        assert len(prompts) == 1


def test_the_episode_continues_from_the_chosen_candidate():
    envs = levels(4)
    groups, final = tree_rollout(envs, [0, 1, 2, 3], random_policy(1, []), K=5)
    for i, start in enumerate(envs):
        replay = start.copy()
        for g in (g for g in groups if g.key[0] == i):
            assert g.chosen == best_index(g.rewards)
            # the chosen candidate's reward is what acting on the replayed state gives
            assert replay.act(g.key[1], g.candidates[g.chosen][2]) == pytest.approx(g.rewards[g.chosen])
        assert replay.state == final[i].state and replay.turn == final[i].turn
        assert start.turn == 0 and start.state == start.level  # the originals were never stepped


def test_group_keys_never_merge_environments_or_turns():
    envs = levels(3)
    groups, final = tree_rollout(envs, ["a", "b", "c"], random_policy(2, []), K=3)
    keys = [g.key for g in groups]
    assert len(keys) == len(set(keys))
    for env_id, e in zip("abc", final):
        turns = {t for (i, role, t) in keys if i == env_id and role == "executor"}
        assert turns == set(range(1, e.turn + 1))  # one executor group per turn played, from turn 1
    samples = tree_samples(groups)
    assert len(samples) == 3 * len(groups)
    for g, chunk in zip(groups, (samples[3 * k:3 * k + 3] for k in range(len(groups)))):
        advs = [s.adv[-1] for s in chunk]
        assert all(s.role == g.key[1] for s in chunk)
        if len(set(g.rewards)) == 1:
            assert advs == [0.0, 0.0, 0.0]
        else:
            assert sum(advs) == pytest.approx(0, abs=1e-9)
            assert advs.index(max(advs)) == g.rewards.index(max(g.rewards))


def test_masks_prompt_and_response():
    groups, _ = tree_rollout(levels(1), [0], random_policy(3, []), K=2)
    s = tree_samples(groups)[0]
    prompt, response, _ = groups[0].candidates[0]
    assert s.ids == prompt + response and s.mask == [0] * len(prompt) + [1] * len(response)


def test_baseline_grouping_normalises_trajectory_returns_per_level():
    K = 4
    envs = [e.copy() for e in levels(2) for _ in range(K)]  # K independent trajectories per level
    trajectories, _ = parallel_rollout(envs, random_policy(4, []))
    samples = trajectory_samples(trajectories, ["lv0", "lv1"], K)
    returns = [sum(t.reward for t in tr) for tr in trajectories]
    advs, i = [], 0
    for tr in trajectories:  # samples come trajectory by trajectory, one per answer
        mine = {round(s.adv[-1], 9) for s in samples[i:i + len(tr)]}
        assert len(mine) == 1  # one advantage per trajectory
        advs.append(mine.pop())
        i += len(tr)
    assert i == len(samples)
    for level in range(2):
        js = range(level * K, (level + 1) * K)
        mine = [advs[j] for j in js]
        assert sum(mine) == pytest.approx(0, abs=1e-6) or all(a == 0 for a in mine)
        assert advs[max(js, key=lambda j: returns[j])] == max(mine)
    assert {s.group_name for s in samples[:len(trajectories[0])]} == {"trajectories of level lv0"}


def test_single_agent_setting_has_only_executor_groups():
    envs = [sk.SokobanTask(sokoban.level_for(i, reverse_steps=6), max_turns=2, planner=False) for i in range(2)]
    groups, _ = tree_rollout(envs, [0, 1], random_policy(5, []), K=2)
    assert {g.key[1] for g in groups} == {"executor"}


def test_scale_rewards_reaches_both_groupings():
    from atgrpo import Turn
    c = ([1], [2], "<answer>U</answer>")
    groups = [Group((0, "planner", 1), [c, c], [1.0, 3.0], 1), Group((0, "executor", 1), [c, c], [0.0, 0.0], 0)]
    # none: r - group mean; batch: divided by the std of [1, 3, 0, 0]: mean 1, sqrt((0 + 4 + 1 + 1) / 3) = 1.414214 (+1e-4)
    assert [s.adv[-1] for s in tree_samples(groups, "none")] == [-1.0, 1.0, 0.0, 0.0]
    assert [s.adv[-1] for s in tree_samples(groups, "batch")] == pytest.approx([-0.707057, 0.707057, 0, 0], abs=1e-6)
    assert tree_samples([], "batch") == []
    one = [[Turn("executor", 1, c, r)] for r in [2.0, 0.0, 5.0, 5.0]]  # K = 2 trajectories of 2 levels
    assert [s.adv[-1] for s in trajectory_samples(one, [0, 1], 2, "none")] == [1.0, -1.0, 0.0, 0.0]


def board_in(messages):
    """The board a prompt shows, parsed back from sokoban.board_text."""
    lines = messages[-1]["content"].split("\n")
    rows = lines[next(i for i, l in enumerate(lines) if l.endswith("The board:")) + 1:]
    rows = rows[:next(i for i, l in enumerate(rows) if not l.startswith("#"))]
    return sokoban.parse_board([r.replace(" ", "").replace("_", " ") for r in rows])


def solver_policy(role, message_lists):
    """Reads the board of each prompt and answers the first move of an optimal solution."""
    return [([1], [2], f"<answer>{(sokoban.solve(board_in(m)) or 'U')[0]}</answer>") for m in message_lists]


def constant_policy(role, message_lists):
    return [([1], [2], "<answer>R</answer>") for _ in message_lists]


def test_evaluation_tells_a_board_reader_from_a_constant_answer():
    from config import parse_args
    from env_sokoban import make_level
    from evaluate_games import distinct, evaluate
    from moves import constant_successes
    args = parse_args(["--env", "sokoban"])  # the default curriculum: 3-4 optimal moves, 4 turns of one move
    seeds = [10 ** 9 + i for i in range(12)]
    reader = evaluate(solver_policy, seeds, args, sk.TASK)
    assert reader["success"] == 1.0  # it plays an optimal solution on every level
    assert reader["board_ablation_success"] < 0.5  # shown another level, it plays that level's moves
    solutions = [sokoban.solve(make_level(s, args)) for s in seeds]
    assert reader["distinct_answers"] == distinct(tuple(s) for s in solutions) >= 4
    levels = tuple(make_level(s, args) for s in seeds)
    assert reader["best_constant_success"] == max(constant_successes(sokoban.solves, levels, 4).values())
    constant = evaluate(constant_policy, seeds, args, sk.TASK)
    right = sum(sokoban.solves(level, "RRRR") for level in levels) / len(levels)
    assert constant["success"] == constant["board_ablation_success"] == right  # blind: no change
    assert constant["distinct_answers"] == 1 and constant["best_constant_success"] >= right
    # played a few levels at a time (train.py's progress bar), the decoys still wrap around all levels
    in_parts = evaluate(solver_policy, seeds, args, sk.TASK, lambda levels: [levels[i:i + 5] for i in range(0, 12, 5)])
    assert in_parts == reader


def test_distinct_counts_a_sequence_that_begins_another_with_it():
    from evaluate_games import distinct
    assert distinct([("R",), ("R", "R"), ("R", "R")]) == 1
    assert distinct([("R",), ("L", "R"), ("R", "U"), ("R", "D")]) == 3
    assert distinct([]) == 0


def test_the_ablation_plays_on_the_real_level_and_restarts_a_solved_decoy():
    env = sk.SokobanTask(sokoban.parse_board(["#######", "#@  $.#", "#     #", "#######"]), max_turns=3)  # R R R
    decoy = sk.SokobanTask(sokoban.parse_board(["######", "#@$ .#", "#    #", "######"]), max_turns=3)  # R R
    seen = []

    def reader(role, message_lists):
        seen.extend(board_in(m) for m in message_lists)
        return solver_policy(role, message_lists)
    from evaluate_games import ShownAnother
    _, (shown,) = parallel_rollout([ShownAnother(env, decoy)], reader)
    final = shown.real
    assert final.answers == ("R", "R", "R") and final.solved  # the decoy's moves, played on env
    assert seen[-1] == decoy.level  # the decoy was solved after 2 turns and shown again from its start


# ---------------------------------------------------------------- any environment: a toy one
class Guess:
    """A toy two-agent environment, not Sokoban: each turn a "hinter" and then a "guesser" say a
    number; an answer scores minus its distance to the turn's target (3 then 7); two turns."""
    roles = ("hinter", "guesser")
    team_share = 0.0

    def __init__(self):
        self.turn, self.next_role, self.said = 0, "hinter", []

    @property
    def done(self):
        return self.turn >= 2

    def copy(self):
        twin = Guess()
        twin.turn, twin.next_role, twin.said = self.turn, self.next_role, list(self.said)
        return twin

    def messages(self, role):
        return [{"role": "user", "content": f"{role}, turn {self.turn + 1}, so far {self.said}"}]

    def act(self, role, text):
        self.said.append(text)
        if role == "guesser":
            self.turn += 1
        return -abs(int(text) - (3, 7)[self.turn - (role == "guesser")])


class OnlyTheInterface:
    """An environment seen through atgrpo.ENVIRONMENT alone: any other attribute is an error, and
    the names read are recorded."""
    read = set()

    def __init__(self, env):
        object.__setattr__(self, "env", env)

    def __getattribute__(self, name):
        import atgrpo
        if name not in atgrpo.ENVIRONMENT:
            raise AttributeError(f"atgrpo read {name!r}, which its environment interface does not list")
        OnlyTheInterface.read.add(name)
        env = object.__getattribute__(self, "env")
        return (lambda: OnlyTheInterface(env.copy())) if name == "copy" else getattr(env, name)


def test_the_environment_interface_is_complete():
    """Tree sampling and the baseline read only what atgrpo's docstring lists, and all of it."""
    import atgrpo
    sample = lambda role, message_lists: [([1], [2], "3") for _ in message_lists]  # noqa: E731
    OnlyTheInterface.read.clear()
    atgrpo.rollout_samples(lambda env_id: OnlyTheInterface(Guess()), ["a"], sample, K=2, algo="at")
    atgrpo.rollout_samples(lambda env_id: OnlyTheInterface(Guess()), ["a"], sample, K=2, algo="grpo")
    assert OnlyTheInterface.read == set(atgrpo.ENVIRONMENT)
    listed = atgrpo.__doc__.split("An environment is any object with")[1].split("and nothing else")[0]
    assert [line.split()[0].split("(")[0] for line in listed.strip().splitlines()] == list(atgrpo.ENVIRONMENT)


def test_at_grpo_on_a_toy_environment_through_the_public_functions():
    """K = 3 answers per (environment, agent, turn), always "2", "3", "7" in that order: the tree
    keeps the best, every group shares one prompt, and the advantages are the group's norm."""
    import mtgrpo
    from atgrpo import rollout_samples
    prompts = []

    def sample(role, message_lists):
        prompts.extend(repr(m) for m in message_lists)
        return [([len(m[0]["content"])], [int(t)], t) for m, t in zip(message_lists, ["2", "3", "7"] * len(message_lists))]

    samples, played, final = rollout_samples(lambda env_id: Guess(), ["a", "b"], sample, K=3, algo="at")
    assert len(samples) == 2 * 2 * 2 * 3  # environments x turns x agents x K
    assert [s.group_name for s in samples[:3]] == ["level a / hinter / turn 1"] * 3
    assert len({prompts[i] for i in range(3)}) == 1  # the K candidates share their prompt
    # turn 1 target 3: rewards -1, 0, -4 -> the tree continues from "3"; turn 2 target 7: from "7"
    assert played == [("hinter", 0), ("hinter", 0), ("guesser", 0), ("guesser", 0)] * 2  # per turn, agent, env
    assert [e.said for e in final] == [["3", "3", "7", "7"]] * 2
    want = mtgrpo.group_norm(torch.tensor([[-1.0, 0.0, -4.0]], dtype=torch.float64)).tolist()[0]
    assert [s.adv[-1] for s in samples[:3]] == pytest.approx(want)
    assert all(s.mask == [0, 1] and s.turn[-1] in (1, 2) for s in samples)
    # the baseline at the same budget: K independent trajectories per environment, grouped by level
    samples, _, final = rollout_samples(lambda env_id: Guess(), ["a"], sample, K=3, algo="grpo")
    assert len(final) == 3 and len(samples) == 3 * 2 * 2


def project_imports(path):
    """The modules a file imports by name: `from fast import decode` is "fast.decode"."""
    import ast
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return names


def test_the_layout_the_readme_promises():
    """The papers are pure, sampling does not depend on the loss, no game module reaches the
    algorithm, the flags reach no model code, machinery stands below the root, the root never
    reaches into tools/, nothing of the lesson (root, machinery, tools) imports the speed lab, and
    the fast path (fast/) is imported by the lesson in one place only: the seam, policy.fast_path."""
    import pathlib
    root = pathlib.Path(__file__).resolve().parent.parent
    files = {p.relative_to(root).with_suffix("").as_posix().replace("/", "."): p
             for p in [*root.glob("*.py"), *root.glob("machinery/*.py"), *root.glob("tools/*.py"),
                       *root.glob("fast/*.py")]}
    files["fast"] = files.pop("fast.__init__")
    assert not {name for name, path in files.items() if any(i.startswith("speedlab") for i in project_imports(path))}
    direct = {name: {i for i in project_imports(path) if i in files} for name, path in files.items()}
    lesson = [name for name in files if name != "fast" and not name.startswith("fast.")]
    assert [name for name in lesson if any(i == "fast" or i.startswith("fast.") for i in direct[name])] == ["policy"]

    def reach(name, seam=True):  # every project module `name` imports, directly or through others
        seen, todo = set(), [name]
        while todo:
            for i in direct[todo.pop()] - seen:
                if seam or not (i == "fast" or i.startswith("fast.")):
                    seen.add(i)
                    todo.append(i)
        return seen
    assert project_imports(files["mtgrpo"]) <= {"torch"}
    assert project_imports(files["atgrpo"]) <= {"dataclasses", "torch", "mtgrpo", "sample", "sample.Sample",
                                                "dataclasses.dataclass", "mtgrpo.group_norm"}
    assert "loss" not in reach("policy", seam=False) and "loss" not in reach("generation")
    assert "loss" not in reach("fast.decode")
    for game in ("env_sokoban", "env_planpath", "env_two_roles", "sokoban", "planpath"):
        assert "atgrpo" not in reach(game), game
    assert not reach("config") & {"policy", "loss", "generation", "fast", "train"}
    assert "transformers" not in {i.split(".")[0] for m in reach("config") | {"config"} for i in project_imports(files[m])}
    for name in lesson:
        if "." not in name:  # the root
            assert not {i for i in reach(name) if i.startswith("tools")}, name
        if name.startswith("machinery."):
            assert all(i.startswith("machinery") for i in reach(name)), name
    for name in files:
        if name.startswith("fast"):  # the fast path stands on the lesson, never on tools/
            assert not {i for i in reach(name) if i.startswith("tools")}, name
    assert [name for name in files if name in reach(name)] == []  # no file imports its importer, even inside a function
    # the exercises import each other, and the sandbox (machinery/sandbox.py, a copy beside them in a handout), by bare names
    checker = {p.stem: p for p in [*root.glob("exercises/*.py"), root / "machinery" / "sandbox.py"]}
    direct = {name: {i.split(".")[0] for i in project_imports(path)} & set(checker) for name, path in checker.items()}
    assert [name for name in checker if name in reach(name)] == []
    assert direct["cases"] == set() and direct["sandbox"] == set()  # the sandbox knows no exercise
    assert direct["grade"] == {"cases", "sandbox", "key"} and {"grade", "sandbox"} <= direct["check"]
    # the key stays with the teacher: no file a handout ships imports it at its top (grade.py only
    # in project_functions, for --solutions), and nothing imports the teacher's gradebook
    assert not any("gradebook" in imports for imports in direct.values())


@pytest.mark.parametrize("script", ["tools/evaluate.py", "tools/show.py", "tools/compare.py", "tools/credit.py", "speedlab/bench.py", "speedlab/update_profile.py",
                                    "scripts/planpath_constants.py"])
def test_tools_run_as_scripts_from_the_root(script):
    """The docs' commands (`python tools/evaluate.py ...`) find the project's modules from tools/."""
    import pathlib
    import subprocess
    import sys
    root = pathlib.Path(__file__).resolve().parent.parent
    run = subprocess.run([sys.executable, script, "--help"], cwd=root, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "usage" in run.stdout, run.stderr[-500:]


# ---------------------------------------------------------------- GiGPO: anchor-state groups
def test_gigpo_by_hand():
    """One level, K = 2 trajectories of two answers. Both first answers are given at the start P;
    both second answers at the same state Q (an anchor state); gamma = 0.5.
      rewards   A: 1, 0   B: 0, 2        returns A 1, B 2
      to go     A: 1 + 0.5 * 0 = 1, 0    B: 0 + 0.5 * 2 = 1, 2
      scale none: A^E = -0.5, +0.5; at P: 1, 1 -> 0, 0; at Q: 0, 2 -> -1, +1
                  A = A^E + A^S: A -0.5, -1.5; B 0.5, 1.5
      scale group: A^E = -/+ 0.5 / (0.70711 + 1e-4); at Q -/+ 1 / (1.41421 + 1e-4)"""
    from atgrpo import Turn, discounted_returns, gigpo_samples
    P, Q = [1, 2], [1, 3]
    A = [Turn("executor", 1, (P, [7], "R"), 1.0), Turn("executor", 2, (Q, [8], "D"), 0.0)]
    B = [Turn("executor", 1, (P, [9], "U"), 0.0), Turn("executor", 2, (Q, [8], "D"), 2.0)]
    assert discounted_returns([1.0, 0.0], 0.5) == [1.0, 0.0] and discounted_returns([0.0, 2.0], 0.5) == [1.0, 2.0]
    samples = gigpo_samples([A, B], ["lv"], 2, omega=1.0, gamma=0.5, scale="none")
    assert [s.adv[-1] for s in samples] == pytest.approx([-0.5, -1.5, 0.5, 1.5])
    assert [s.adv for s in samples[:1]] == [[0.0, 0.0, -0.5]]  # prompt tokens carry no advantage
    e, q = 0.5 / (0.5 ** 0.5 + 1e-4), 1 / (2 ** 0.5 + 1e-4)
    assert [s.adv[-1] for s in gigpo_samples([A, B], ["lv"], 2, gamma=0.5)] == pytest.approx([-e, -e - q, e, e + q])
    # omega = 0 is the GRPO baseline on the same trajectories
    assert [s.adv for s in gigpo_samples([A, B], ["lv"], 2, omega=0.0, gamma=0.5)] == \
        [s.adv for s in trajectory_samples([A, B], ["lv"], 2)]


def test_gigpo_anchor_groups_stay_inside_a_level_and_a_state_reached_once_adds_nothing():
    """Two levels whose answers share a prompt P: they are never one anchor group. In level 2 the
    second answers are at different states, so their step advantage is 0 (a group of one)."""
    from atgrpo import Turn, gigpo_samples
    P = [5]
    level1 = [[Turn("executor", 1, (P, [7], "R"), 1.0)], [Turn("executor", 1, (P, [7], "R"), 1.0)]]
    level2 = [[Turn("executor", 1, (P, [7], "R"), 0.0), Turn("executor", 2, ([6], [7], "R"), 3.0)],
              [Turn("executor", 1, (P, [7], "R"), 2.0), Turn("executor", 2, ([4], [7], "R"), 0.0)]]
    samples = gigpo_samples(level1 + level2, ["a", "b"], 2, gamma=1.0, scale="none")
    # level 1: equal returns and equal to-go at P: 0 everywhere (mixing in level 2's P would not be)
    assert [s.adv[-1] for s in samples[:2]] == [0.0, 0.0]
    # level 2: returns 3, 2 -> A^E +0.5, -0.5; at P to-go 3, 2 -> +0.5, -0.5; second answers alone -> 0
    assert [s.adv[-1] for s in samples[2:]] == pytest.approx([1.0, 0.5, -1.0, -0.5])
    assert {s.group_name for s in samples[2:]} == {"trajectories of level b"}


def test_train_steps_with_gigpo(tmp_path, tiny_model_dir):
    """`train.py --env planpath --algo gigpo`: one step through atgrpo.rollout_samples, logged."""
    import json
    import train
    out = tmp_path / "gigpo"
    train.main(["--env", "planpath", "--algo", "gigpo", "--model", tiny_model_dir, "--steps", "1", "--batch-size", "1",
                "--num-generations", "2", "--max-completion-length", "3", "--max-turns", "2", "--eval-every", "0",
                "--bf16", "false", "--out", str(out)])
    line = json.loads(open(out / "log.jsonl").read().splitlines()[-1])
    assert line["step"] == 1 and line["groups"] == 1  # the level's K trajectories: one episode group
    assert json.load(open(out / "args.json"))["algo"] == "gigpo"
