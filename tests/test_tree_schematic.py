"""scripts/tree_schematic.py: the picture parses, names its groups, marks the argmax of the rewards it
shows, shows the rewards the environment gives, and docs/tree-schematic.svg is a fresh render."""
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import tree_schematic as ts  # noqa: E402

NS = "{http://www.w3.org/2000/svg}"
PLAY = [("planner", 1), ("executor", 1), ("planner", 2), ("executor", 2)]  # the order the agents act in


@pytest.fixture(scope="module")
def svg(tmp_path_factory):
    """The script run as a command, into a temporary folder."""
    path = tmp_path_factory.mktemp("schematic") / "tree.svg"
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "tree_schematic.py"), "--out", str(path)],
                   check=True, capture_output=True, cwd=str(path.parent))
    return path.read_text(encoding="utf-8")


def figure(svg, cls):
    """The <g class=cls> holding one of tools/show.py's figures."""
    root = ET.fromstring(svg)
    (g,) = [g for g in root.iter(NS + "g") if g.get("class") == cls]
    return g


def nodes(fig):
    """{(column, row): (answer shown, reward shown, chosen)} of a figure's candidate boxes."""
    out = {}
    for g in fig.iter(NS + "g"):
        if "node" in g.get("class", "").split():
            answer, reward = (t.text for t in g.findall(NS + "text"))
            shown = re.fullmatch(r"r = ([+-]\d+\.\d\d)", reward)
            assert shown, reward
            out[int(g.get("data-column")), int(g.get("data-row"))] = (answer, float(shown.group(1)),
                                                                     "chosen" in g.get("class").split())
    return out


def texts(fig, cls):
    return [t.text for t in fig.iter(NS + "text") if t.get("class") == cls]


def test_the_picture_parses_and_names_its_groups(svg):
    root = ET.fromstring(svg)
    assert root.tag == NS + "svg" and float(root.get("width")) > 0 and float(root.get("height")) > 0
    tree, trajectories = figure(svg, "tree"), figure(svg, "trajectories")
    # the tree: one group per (e, agent, turn), each of K answers to one prompt
    assert texts(tree, "group") == [f"group (e, {role}, {turn})" for role, turn in PLAY]
    assert texts(tree, "prompts") == ["1 prompt"] * 4
    assert sorted(nodes(tree)) == [(c, k) for c in range(4) for k in range(ts.K)]
    # the baseline: after the first answer the K trajectories answer K different prompts
    assert texts(trajectories, "group") == ["group (e): returns"] * 4
    assert texts(trajectories, "prompts") == ["1 prompt"] + [f"{ts.K} prompts"] * 3
    assert not any(chosen for *_, chosen in nodes(trajectories).values())
    assert all(int(t.get("font-size", 12)) >= 11 for t in root.iter(NS + "text"))  # legible


def test_the_chosen_candidate_is_the_argmax_of_the_rewards_shown(svg):
    tree = figure(svg, "tree")
    shown = nodes(tree)
    inner = tree.find(NS + "svg")
    boxes = {(int(g.get("data-column")), int(g.get("data-row"))): g.find(NS + "rect")
             for g in inner.iter(NS + "g") if "node" in g.get("class", "").split()}
    lines = {tuple(float(line.get(a)) for a in ("x1", "y1", "x2", "y2")) for line in inner.iter(NS + "line")}
    for c in range(4):
        rewards = [shown[c, k][1] for k in range(ts.K)]
        chosen = [k for k in range(ts.K) if shown[c, k][2]]
        assert chosen == [rewards.index(max(rewards))], (c, rewards, chosen)  # ties: the lowest index
        if c < 3:  # every candidate of the next column grows from the chosen one
            box = boxes[c, chosen[0]]
            x, y = float(box.get("x")) + float(box.get("width")), float(box.get("y")) + float(box.get("height")) / 2
            for k in range(ts.K):
                nxt = boxes[c + 1, k]
                assert (x, y, float(nxt.get("x")), float(nxt.get("y")) + float(nxt.get("height")) / 2) in lines


def test_the_rewards_shown_are_the_environments(svg):
    """Replayed here by hand on env_planpath.PlanPathTask: the tree scores each candidate on its own
    copy and goes on from the best; trajectory k plays the k-th candidate of every agent and turn."""
    tree, trajectories = nodes(figure(svg, "tree")), nodes(figure(svg, "trajectories"))
    env = ts.make_task()
    for c, (role, turn) in enumerate(PLAY):
        candidates = ts.SCRIPT[role, turn]
        branches = [env.copy() for _ in candidates]
        rewards = [b.act(role, text) for b, text in zip(branches, candidates)]
        for k, (text, r) in enumerate(zip(candidates, rewards)):
            answer, reward, _ = tree[c, k]
            assert reward == float(f"{r:.2f}") and answer in text, (c, k, tree[c, k], text, r)
        env = branches[rewards.index(max(rewards))]
    assert env.done and env.solved  # the tree reaches the goal in the two turns
    returns = []
    for k in range(ts.K):
        env, total = ts.make_task(), 0.0
        for c, (role, turn) in enumerate(PLAY):
            r = env.act(role, ts.SCRIPT[role, turn][k])
            total += r
            assert trajectories[c, k][1] == float(f"{r:.2f}"), (c, k, trajectories[c, k], r)
        returns.append(f"return {total:+.2f}")
    assert texts(figure(svg, "trajectories"), "note") == returns


def test_the_committed_picture_is_a_fresh_render(svg):
    assert ts.DEFAULT_OUT == os.path.join(ROOT, "docs", "tree-schematic.svg")
    with open(ts.DEFAULT_OUT, encoding="utf-8") as f:
        assert f.read() == svg, "docs/tree-schematic.svg is stale: run .venv/bin/python scripts/tree_schematic.py"
