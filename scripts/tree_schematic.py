"""AT-GRPO's tree sampling as one picture: a toy Plan-Path level, K = 3 scripted candidates per
agent and turn for two turns (planner, then executor), beside the GRPO baseline's K = 3
independent trajectories of the same level.

    .venv/bin/python scripts/tree_schematic.py [--out docs/tree-schematic.svg]

No model plays: the candidates are fixed texts (SCRIPT), and everything else is the project's own
code. The level is a literal grid (planpath.parse_grid), the environment env_planpath.PlanPathTask,
the tree atgrpo.tree_rollout (each candidate scored on its own env.copy() by env.act, greedy argmax,
ties to the lowest index, the next agent's K candidates all from the chosen copy), the baseline
atgrpo.parallel_rollout, and the two figures tools/show.py's tree_svg and trajectories_svg, set
beside the level and a legend. The mini grid in a box is where you stand after that answer
(PlanPathTask.play from the state the answer was given in); the planner's move is only tried on a
copy. tests/test_tree_schematic.py checks the picture against the environment and that
docs/tree-schematic.svg is a fresh render.
"""
import argparse
import html
import os
import re
import sys
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import atgrpo  # noqa: E402
import planpath  # noqa: E402
from env_planpath import PlanPathTask  # noqa: E402
from moves import parse_moves  # noqa: E402
from machinery.cli import one_line  # noqa: E402
from tools import output, show  # noqa: E402

DEFAULT_OUT = os.path.join(ROOT, "docs", "tree-schematic.svg")
LEVEL = planpath.parse_grid("....\n"
                            ".#G.\n"
                            ".@.#\n"
                            "....")  # shortest path R U (2 moves); U from the start is blocked
K, TURNS, ALPHA, ENV_ID = 3, 2, 1.0, "toy"
SCRIPT = {  # (agent, turn): the K candidate texts; trajectory k of the baseline answers the k-th
    ("planner", 1): ["<answer>U</answer>", "<answer>R</answer>", "<answer>L</answer>"],
    ("executor", 1): ["<answer>R</answer>", "<answer>U</answer>", "<answer>D</answer>"],
    ("planner", 2): ["<answer>R</answer>", "<answer>D</answer>", "<answer>U</answer>"],
    ("executor", 2): ["<answer>U</answer>", "<answer>L</answer>", "move up"],  # no tags: no readable move
}
NS = "{http://www.w3.org/2000/svg}"
WALL, FLOOR, GOAL, YOU, LINE = "#666", "#ffffff", "#f2c230", "#2f6fd0", "#bbb"
TREE_AT, TRAJ_AT, LEFT = (222, 54), (222, 312), 14  # where the two figures and the level panel go


# ---------------------------------------------------------------- the two rollouts
def make_task():
    """The toy level as the two-role task: 2 turns, one move an answer, reward local + ALPHA * team."""
    return PlanPathTask(LEVEL, max_turns=TURNS, alpha=ALPHA, planner=True, moves_per_turn=1)


def scripted(role, message_lists):
    """The policy: the k-th prompt of a call gets SCRIPT's k-th candidate for its agent and turn (the
    turn read from the prompt). In the tree a call holds one prompt K times; in the baseline one
    prompt per trajectory, all K active here (no trajectory ends before the last turn). Prompt and
    response ids are the texts' characters: equal prompts, equal ids (show.py counts the prompts)."""
    out = []
    for k, messages in enumerate(message_lists):
        turn = int(re.search(r"Turn (\d+) of", messages[-1]["content"]).group(1))
        text = SCRIPT[role, turn][k % K]
        prompt = "\n".join(m["content"] for m in messages)
        out.append(([ord(ch) for ch in prompt], [ord(ch) for ch in text], text))
    return out


def tree():
    """AT-GRPO on the toy level: the groups (atgrpo.Group, play order) and, by column (group) and row
    (candidate), (the state it answered from, its text)."""
    groups, _ = atgrpo.tree_rollout([make_task()], [ENV_ID], scripted, K)
    env, starts = make_task(), []
    for g in groups:  # the chosen branch, replayed: every candidate of a group starts from it
        starts.append(env)
        env = env.copy()
        env.act(g.key[1], g.candidates[g.chosen][2])
    return groups, [[(start, c[2]) for c in g.candidates] for start, g in zip(starts, groups)]


def trajectories():
    """The GRPO baseline: K independent trajectories (lists of atgrpo.Turn) and, by column and row,
    (the state each answer was given in, the answer)."""
    trajs, _ = atgrpo.parallel_rollout([make_task() for _ in range(K)], scripted)
    starts = [[None] * K for _ in range(max(map(len, trajs)))]
    for k, traj in enumerate(trajs):
        env = make_task()
        for j, t in enumerate(traj):
            starts[j][k] = env, t.candidate[2]
            env = env.copy()
            env.act(t.role, t.candidate[2])
    return trajs, starts


def after(env, text):
    """Where you stand after `text` is played from env's state (PlanPathTask.play; no readable move:
    where you were). For the planner this is the proposal, tried on a copy."""
    moves = parse_moves(text)
    return env.state.pos if moves is None else env.play(moves[:env.moves_per_turn])[0].pos


# ---------------------------------------------------------------- drawing
def esc(text):
    return html.escape(str(text))


def text(x, y, words, size=12, weight="normal", fill="#111", cls=""):
    c = f' class="{cls}"' if cls else ""
    b = ' font-weight="bold"' if weight == "bold" else ""
    return f'<text{c} x="{x:g}" y="{y:g}" font-size="{size}"{b} fill="{fill}">{esc(words)}</text>'


def grid_picture(grid, pos, left, top, cell, hollow=False, cls="state"):
    """The level's cells (walls grey, goal yellow) and a blue dot where you stand: hollow for a
    proposal tried on a copy."""
    out = [f'<g class="{cls}" data-pos="{pos[0]},{pos[1]}">']
    for r in range(grid.shape[0]):
        for c in range(grid.shape[1]):
            fill = WALL if (r, c) in grid.walls else GOAL if (r, c) == grid.goal else FLOOR
            out.append(f'<rect x="{left + c * cell:g}" y="{top + r * cell:g}" width="{cell}" height="{cell}" '
                       f'fill="{fill}" stroke="{LINE}" stroke-width="0.6"/>')
    cx, cy, radius = left + (pos[1] + 0.5) * cell, top + (pos[0] + 0.5) * cell, cell * 0.32
    dot = f'fill="white" stroke="{YOU}" stroke-width="{max(1.5, cell / 12):g}"' if hollow else f'fill="{YOU}"'
    out.append(f'<circle cx="{cx:g}" cy="{cy:g}" r="{radius:g}" {dot}/></g>')
    return "".join(out)


def with_states(svg, cells, cls, left, top):
    """tools/show.py's figure moved to (left, top), a mini grid in each candidate box: where you stand
    after that answer. The boxes are read from the figure itself (its g.node rects)."""
    root = ET.fromstring(svg)
    minis = []
    for g in root.iter(NS + "g"):
        if "node" not in g.get("class", "").split():
            continue
        column, row, rect = int(g.get("data-column")), int(g.get("data-row")), g.find(NS + "rect")
        env, candidate = cells[column][row]
        x, y, w, h = (float(rect.get(a)) for a in ("x", "y", "width", "height"))
        cell = (h - 10) / LEVEL.shape[0]
        minis.append(grid_picture(LEVEL, after(env, candidate), x + w - 5 - cell * LEVEL.shape[1], y + 5, cell,
                                  hollow=env.next_role == "planner"))
    return (f'<g class="{cls}" transform="translate({left},{top})">\n{svg.strip()}\n' + "\n".join(minis) + "\n</g>",
            float(root.get("height")))


def level_panel(left, top):
    """The toy level, large, with its coordinates and what the symbols are."""
    cell, (rows, cols) = 30, LEVEL.shape
    gx, gy = left + 16, top + 40
    out = [text(left, top, "the level", 13, "bold"), text(left, top + 16, f"{rows} x {cols} grid, (row, col)")]
    out += [text(gx + (c + 0.5) * cell - 4, gy - 6, c, 11, fill="#555") for c in range(cols)]
    out += [text(left + 2, gy + (r + 0.5) * cell + 4, r, 11, fill="#555") for r in range(rows)]
    out.append(grid_picture(LEVEL, LEVEL.pos, gx, gy, cell, cls="level"))
    out.append(text(gx + (LEVEL.goal[1] + 0.5) * cell - 4, gy + (LEVEL.goal[0] + 0.5) * cell + 5, "G", 14, "bold"))
    d = planpath.distance(LEVEL)
    lines = [f"blue dot: you {LEVEL.pos}", f"yellow: the goal {LEVEL.goal}", "grey: a wall (so is the edge)",
             f"shortest: {' '.join(planpath.solve(LEVEL))} ({d} moves)"]
    y = gy + rows * cell + 22
    for words in lines:
        out.append(text(left, y, words))
        y += 17
    return out


LEGEND = [
    ("chosen", "chosen: the highest reward of its group (argmax, ties to the lowest index); the next "
               "agent's K = 3 candidates all start from its state"),
    ("other", "another candidate: scored on its own copy of the environment (env.copy(), env.act), then dropped"),
    ("hollow", "mini grid, hollow dot: where the planner's proposal would put you, tried on a copy of the grid"),
    ("solid", "mini grid, solid dot: where you stand after the executor's move, played on the grid"),
    ("text", "group (e, agent, turn): AT-GRPO normalises the K rewards of one agent at one turn, answers to "
             "one prompt"),
    ("text", "r = local + team (alpha = 1): per move -0.01 (blocked -0.10) + the drop in BFS distance, +1 and "
             "+0.5 on reaching the goal in the fewest moves; team: the distance drop, +1 at the goal; "
             "no readable move: -3"),
]


def legend(left, top, width):
    """One line per mark, a swatch before each; long lines wrap at `width` pixels."""
    out, y, per_line = [text(left, top, "legend", 13, "bold")], top + 20, int((width - 2 * left - 34) / 7.4)
    for mark, words in LEGEND:
        if mark in ("chosen", "other"):
            fill, stroke, w = ("#d7f0dc", "#2a6", 3) if mark == "chosen" else ("#f6f6f6", "#999", 1)
            out.append(f'<rect x="{left}" y="{y - 11}" width="26" height="14" rx="3" fill="{fill}" stroke="{stroke}" '
                       f'stroke-width="{w}"/>')
        elif mark in ("hollow", "solid"):
            out.append(grid_picture(LEVEL, (2, 2), left + 3, y - 13, 5, hollow=mark == "hollow", cls="swatch"))
        for line in wrap(words, per_line):
            out.append(text(left + 34, y, line, cls="legend"))
            y += 16
        y += 7 if mark in ("hollow", "solid") else 3
    return out, y


def wrap(words, n):
    """Lines of at most n characters, broken at spaces."""
    lines = [""]
    for word in words.split():
        if lines[-1] and len(lines[-1]) + 1 + len(word) > n:
            lines.append("")
        lines[-1] += (" " if lines[-1] else "") + word
    return lines


def picture():
    """The whole SVG: title, the level, the tree, the trajectories, the legend."""
    groups, tree_starts = tree()
    trajs, traj_starts = trajectories()
    tree_part, tree_h = with_states(show.tree_svg(groups, f"AT-GRPO tree sampling: K = {K} candidates per agent and "
                                                  "turn, one group each", K), tree_starts, "tree", *TREE_AT)
    traj_part, traj_h = with_states(show.trajectories_svg(trajs, f"GRPO baseline: K = {K} independent trajectories "
                                                          "of the same level"), traj_starts, "trajectories", *TRAJ_AT)
    width = TRAJ_AT[0] + 862
    below = TRAJ_AT[1] + traj_h + 8
    note = ("From the first answer on, each trajectory is in a state of its own (its executor sees its own planner's "
            "proposal, its turn 2 starts from its own grid), so the prompts differ and no two answers can share an "
            "(e, agent, turn) group: GRPO groups the K returns of the level, and every answer of a trajectory gets "
            "its return's advantage.")
    notes = [text(TRAJ_AT[0] + 10, below + 16 * i, line, cls="note") for i, line in enumerate(wrap(note, 112))]
    key_y = below + 16 * len(notes) + 22
    keys, bottom = legend(LEFT, key_y, width)
    title = (f"AT-GRPO tree sampling vs. the GRPO baseline on one Plan-Path level: K = {K}, {TURNS} turns of "
             "planner then executor")
    sub = ("Answers are scripted, not a model's; every reward is env_planpath.PlanPathTask's, each candidate "
           "acting on its own env.copy() (atgrpo.tree_step).")
    body = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{bottom + 6:g}" '
            f'viewBox="0 0 {width} {bottom + 6:g}" font-family="monospace" font-size="12">',
            f'<rect width="{width}" height="{bottom + 6:g}" fill="white"/>',
            text(LEFT, 22, title, 15, "bold", cls="title"), text(LEFT, 42, sub, 12, fill="#333", cls="subtitle"),
            *level_panel(LEFT, TREE_AT[1] + 22), tree_part, traj_part, *notes,
            f'<line x1="{TRAJ_AT[0]}" y1="{TRAJ_AT[1] - 6}" x2="{width - LEFT}" y2="{TRAJ_AT[1] - 6}" stroke="#ddd"/>',
            f'<line x1="{LEFT}" y1="{key_y - 20}" x2="{width - LEFT}" y2="{key_y - 20}" stroke="#ddd"/>',
            *keys, "</svg>"]
    assert tree_h <= TRAJ_AT[1] - TREE_AT[1], "the tree runs into the trajectories"
    return "\n".join(body) + "\n"


@one_line
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=DEFAULT_OUT, help="the SVG file to write (default: docs/tree-schematic.svg)")
    a = p.parse_args(argv)
    output.check(a.out, "--out")
    output.write_text(a.out, picture())
    print(a.out)
    return a.out


if __name__ == "__main__":
    main()
