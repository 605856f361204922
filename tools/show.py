"""Credit you can see: one group of rollouts as a self-contained HTML page, or AT-GRPO's tree.

    python tools/show.py OUT [--step N] [--group I] [--out FILE]
    python tools/show.py OUT --tree [--step N] [--level E] [--out FILE.svg]   # an --algo at run

reads OUT/rollouts/step_N.jsonl (written at every step by checkpoint.save_rollouts: per sample its
group, role, per-turn rewards, and per token its text, mask, advantage and turn) and colours every model
token by the advantage it was trained with:

- MT-GRPO (--algo mt): one sample is a whole search episode. The turn-level advantage gives the
  tool-call turn A_1 = norm(R^T) + norm(R^O) and the answer turn A_2 = norm(R^O), so the two
  turns of one rollout can get different colours; GRPO-OR and GRPO-MR give every token one value.
- AT-GRPO (--algo at): one sample is one agent's turn. A group is keyed (environment, agent,
  turn), so its K candidates share one prompt (shown once); the episode continued from the best
  candidate (highest reward, ties to the lowest index), marked "chosen".

Prompt and environment tokens (mask 0, no loss) are grey and uncoloured. No JavaScript, no
external resources: the page opens anywhere.

The file is read, and each rollout cut into its turns, by machinery/rollout_files.py, which also
gives the trackers (train.py --report-to) the same group as a table.

--tree draws tree sampling on one level as an SVG picture (tree_svg): a column per agent and
turn, its K candidates with their rewards, the chosen one green, the next column grown from it.
trajectories_svg draws the GRPO baseline's K independent trajectories the same way (the lesson
notebook sets the two side by side).
"""
import argparse
import glob
import html
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the project root: python tools/show.py

import estimators
from atgrpo import Group, best_index
from machinery.cli import one_line
from machinery.records import read_json
from machinery.rollout_files import (advantage_of_turn, groups_of, pick_group, prompt_of, read_rollouts,
                                reward_labels, segments)
from tools import output

POS, NEG = (70, 180, 90), (220, 70, 60)  # colour of advantage +max and -max; 0 is white


def colour(adv, scale):
    """Diverging scale: white at 0, POS at adv >= +scale, NEG at adv <= -scale, linear between."""
    t = max(-1.0, min(1.0, adv / scale)) if scale > 0 else 0.0
    end = POS if t > 0 else NEG
    return "rgb(%d,%d,%d)" % tuple(int(255 + abs(t) * (e - 255) + 0.5) for e in end)


# ---------------------------------------------------------------- reading
def rollout_steps(out):
    """{step: path} of OUT's rollout files; a SystemExit saying what to do when there are none."""
    if not os.path.isdir(out):
        what = "not a folder" if os.path.exists(out) else "no such folder"
        raise SystemExit(f"{out}: {what}; pass the --out folder of a train.py run")
    files = glob.glob(os.path.join(out, "rollouts", "step_*.jsonl"))
    steps = {int(m.group(1)): f for f in files if (m := re.search(r"step_(\d+)\.jsonl$", f))}
    if not steps:
        raise SystemExit(f"{os.path.join(out, 'rollouts')}: no rollout files; "
                         "train with train.py first; rollouts are saved at every step")
    return steps


def text_html(row, scale, skip_prompt):
    """The rollout's tokens: coloured spans for model tokens, grey runs for masked tokens."""
    parts = []
    for kind, t, idx in segments(row):
        masked = "".join(html.escape(row["tokens"][i]) for i in idx)
        if kind == "prompt":
            if not skip_prompt:
                parts.append(f'<details><summary>prompt ({len(idx)} tokens, masked)</summary>'
                             f'<span class="m">{masked}</span></details>')
            continue
        if kind == "environment":  # its leading newlines go before the marker, which starts a line
            rest = masked.lstrip("\n")
            parts.append("\n" * (len(masked) - len(rest)) + f'<span class="mark env">environment</span>'
                         f'<span class="m">{rest}</span>')
            continue
        parts.append(f'<span class="mark">turn {t}</span>')
        for i in idx:
            tok, a = html.escape(row["tokens"][i]), row["adv"][i]
            parts.append(f'<span class="t" style="background:{colour(a, scale)}" title="advantage {a:+.4f}">'
                         f'{tok}</span>' if row["mask"][i] else f'<span class="m">{tok}</span>')
    return "".join(parts)


def rollout_html(k, row, scale, skip_prompt, chosen):
    rewards = ", ".join(f"{l}: {r:.3f}" for l, r in zip(reward_labels(row), row["rewards"]))
    advs = ", ".join(f'<span class="sw" style="background:{colour(a, scale)}">turn {t}: {a:+.3f}</span>'
                     for t, a in advantage_of_turn(row).items()) or "none"
    role = f" · {html.escape(row['role'])}" if row["role"] else ""
    badge = ' <span class="chosen">chosen (best reward)</span>' if chosen else ""
    return (f'<div class="rollout{" best" if chosen else ""}"><div class="head"><b>rollout {k}</b>{role}'
            f'{badge} · rewards {rewards} · advantages {advs}</div>'
            f'<div class="text">{text_html(row, scale, skip_prompt)}</div></div>')


# ---------------------------------------------------------------- the page
CSS = """body{font:14px/1.45 system-ui,sans-serif;margin:24px;max-width:1100px;color:#111}
h1{font-size:20px;margin:0 0 4px}.run{color:#444;margin:0 0 12px}
.legend{border:1px solid #ccc;padding:8px 12px;margin-bottom:14px;background:#fafafa}
.bar{display:inline-block;width:240px;height:14px;vertical-align:middle;border:1px solid #999;
background:linear-gradient(to right,rgb%s,#fff,rgb%s)}
.rollout{border:1px solid #bbb;margin:10px 0;border-radius:4px}.best{border:2px solid #2a6}
.head{background:#f0f0f0;padding:5px 10px;border-bottom:1px solid #ddd}
.text{white-space:pre-wrap;font:13px/1.6 ui-monospace,monospace;padding:8px 10px;word-break:break-word}
.t{box-shadow:inset -1px 0 rgba(0,0,0,.12)}.m{color:#888}
.mark{font:bold 11px system-ui,sans-serif;background:#333;color:#fff;padding:1px 5px;margin:0 4px;border-radius:3px}
.env{background:#888}.sw{padding:0 4px;border:1px solid #999;border-radius:3px}
.chosen{background:#2a6;color:#fff;padding:0 6px;border-radius:3px}
details{margin-bottom:4px}summary{color:#666;cursor:pointer;font-family:system-ui,sans-serif}
""" % (NEG, POS)


def page(out, step, groups, gi):
    """The whole HTML page for group gi of one step."""
    try:
        args = read_json(os.path.join(out, "args.json"))
    except (OSError, ValueError):  # the page names env and algo "?" then
        args = {}
    env, algo = str(args.get("env", "?")), str(args.get("algo", "?"))  # as data: shown, escaped
    name, rows = groups[gi]
    scale = max((abs(a) for r in rows for a, m in zip(r["adv"], r["mask"]) if m), default=0.0)
    prompts = [prompt_of(r) for r in rows]
    shared = len(rows) > 1 and prompts[0] and all(p == prompts[0] for p in prompts)
    best = best_index([sum(r["rewards"]) for r in rows])  # the candidate the episode continued from
    title = f"step {step} · group {gi} (of 0-{len(groups) - 1}): {name}"
    body = [f"<h1>{html.escape(title)}</h1>",
            f'<p class="run">run {html.escape(out)} · env {html.escape(env)} · algo {html.escape(algo)} '
            f"({estimators.BY_NAME[algo].summary if algo in estimators.BY_NAME else 'unknown'}) · {len(rows)} rollouts</p>",
            '<div class="legend">advantage <span class="bar"></span> ' + (
                f"from {-scale:+.3f} (red) through 0 (white) to {scale:+.3f} (green): intensity = "
                "advantage / max |advantage| of this group; hover a token for its exact value." if scale else
                "all 0 in this group (equal rewards): it teaches nothing, every token is white.") +
            ' <span class="m">Grey text</span>: prompt and environment '
            'tokens (mask 0, no loss). <span class="mark">turn k</span> and <span class="mark env">'
            "environment</span> mark where each turn starts.</div>"]
    if shared:
        body.append(f'<details><summary>the prompt all {len(rows)} rollouts share ({len(prompts[0])} '
                    f'tokens, masked)</summary><div class="text m">{html.escape("".join(prompts[0]))}'
                    "</div></details>")
    body += [rollout_html(k, r, scale, shared, algo == "at" and k == best) for k, r in enumerate(rows)]
    body.append("<p class=\"run\">groups of this step (python tools/show.py OUT --group I): " + "; ".join(
        f"{i}: {html.escape(n)}" for i, (n, _) in enumerate(groups)) + "</p>")
    return (f'<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f"<style>{CSS}</style></head><body>{''.join(body)}</body></html>\n")


# ---------------------------------------------------------------- the AT-GRPO tree as a picture
W, H, GAP = 132, 38, 34  # node width and height, space between columns (SVG pixels)


def short(text, n=16):
    """What a node shows of an answer: the text after <answer> (a prefill in rollout files) up to
    the next tag, or the raw text when that is empty; at most n characters."""
    inside = text.split("<answer>", 1)[-1].split("<", 1)[0]
    text = " ".join((inside if inside.strip() else text).split()) or "(no text)"
    return text if len(text) <= n else text[:n - 1] + "…"


def tree_svg(groups, title="", K=None):
    """AT-GRPO tree sampling of one environment as an SVG picture. groups: the atgrpo.Groups of
    that environment in play order (one column per agent and turn). Each column is one group
    (env, agent, turn): its K candidates, each with its reward; the chosen one (best reward,
    ties to the lowest) is green, and every candidate of the next column grows from it, so
    the K of a column share one prompt (the header counts the distinct prompts). A column with
    fewer than K (default: its largest column's) candidates has rows missing: dashed empty boxes
    stand in their place and a red caption names them (missing_rows)."""
    K = K or max(len(g.candidates) for g in groups)
    columns = [(g.key, g.candidates, g.rewards, g.chosen) for g in groups]
    links = [(c - 1, columns[c - 1][3], c, k) for c in range(1, len(columns)) for k in range(len(columns[c][1]))]
    holes = [(c, k) for c, g in enumerate(groups) for k in range(len(g.candidates), K)]
    return figure(columns, links, title, [f"group (e, {g.key[1][:8]}, {g.key[2]})" for g in groups],
                  holes=holes, caption=missing_rows(groups, K))


def missing_rows(groups, K):
    """One line naming what the step file lacks of this level's tree, or "": every agent plays
    every turn until the episode ends, each with K candidates (rows), so a column with fewer, or
    an agent's turn absent before the last one there, is rows missing (a cut or edited file)."""
    roles = list(dict.fromkeys(g.key[1] for g in groups))  # in play order
    counts = {(g.key[2], roles.index(g.key[1])): len(g.candidates) for g in groups}
    last = max(counts)
    short = [f"turn {t} {roles[r]} {counts.get((t, r), 0)} of {K}" for t in range(1, last[0] + 1)
             for r in range(len(roles)) if (t, r) <= last and counts.get((t, r), 0) < K]
    return (f"rows missing from the step file: {', '.join(short)} candidates; the tree shows only "
            "those there") if short else ""


def trajectories_svg(trajectories, title=""):
    """The GRPO baseline on one environment: K independent trajectories (lists of atgrpo.Turn),
    one row each; column j holds the K answers of the j-th agent-turn, which, after the first,
    come from K different prompts. The whole level is one group of K returns."""
    K, depth = len(trajectories), max(len(t) for t in trajectories)
    columns = []
    for j in range(depth):
        turns = [t[j] if j < len(t) else None for t in trajectories]
        first = next(t for t in turns if t)
        columns.append(((None, first.role, first.turn), [t.candidate if t else None for t in turns],
                        [t.reward if t else None for t in turns], None))
    links = [(c - 1, k, c, k) for c in range(1, depth) for k in range(K) if columns[c][1][k]]
    returns = [f"return {sum(t.reward for t in traj):+.2f}" for traj in trajectories]
    return figure(columns, links, title, ["group (e): returns"] * depth, returns)


def figure(columns, links, title, group_names, row_notes=None, holes=(), caption=""):
    """Columns [(key, K candidates, K rewards, chosen index or None)] as boxes, links
    [(column, row, column, row)] as lines, a start node feeding the first column; holes
    [(column, row)]: dashed empty boxes where a candidate is missing, named by the caption."""
    K = max([len(c[1]) for c in columns] + [k + 1 for _, k in holes])
    x = lambda c: 70 + c * (W + GAP)  # noqa: E731  left edge of column c
    y = lambda k: 74 + k * (H + 14)  # noqa: E731  top edge of row k
    start = (y(0) + y(K - 1)) / 2 + H / 2  # the start node, level with the middle row
    width = max(x(len(columns)) + (110 if row_notes else 0), 20 + 7.5 * len(caption))  # 7.5: a 12 px monospace character
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:g}" height="{y(K) + (30 if caption else 10)}" '
           'font-family="monospace" font-size="12"><rect width="100%" height="100%" fill="white"/>',
           f'<text x="10" y="18" font-weight="bold">{html.escape(title)}</text>',
           f'<circle class="start" cx="30" cy="{start}" r="8" fill="#555"/>']
    out += [line(38, start, x(0), y(k) + H / 2) for k in range(len(columns[0][1]))]
    out += [line(x(c0) + W, y(k0) + H / 2, x(c1), y(k1) + H / 2) for c0, k0, c1, k1 in links]
    for c, ((_, role, turn), candidates, rewards, chosen) in enumerate(columns):
        prompts = len({tuple(cand[0]) for cand in candidates if cand})
        out.append(f'<text x="{x(c)}" y="40" font-weight="bold">turn {turn} · {html.escape(str(role))}</text>'
                   f'<text class="group" x="{x(c)}" y="54" fill="#444" font-size="11">{html.escape(group_names[c])}</text>'
                   f'<text class="prompts" x="{x(c)}" y="66" fill="#444" font-size="11">{prompts} prompt{"s" * (prompts != 1)}</text>')
        out += [node(x(c), y(k), c, k, cand[2], r, k == chosen)
                for k, (cand, r) in enumerate(zip(candidates, rewards)) if cand is not None]
    out += [f'<g class="hole" data-column="{c}" data-row="{k}"><rect x="{x(c)}" y="{y(k)}" width="{W}" height="{H}" rx="4" '
            f'fill="none" stroke="#b00" stroke-dasharray="4 3"/><text x="{x(c) + 6}" y="{y(k) + 23}" fill="#b00">missing</text></g>'
            for c, k in holes]
    for k, note in enumerate(row_notes or []):
        out.append(f'<text class="note" x="{x(len(columns)) - GAP + 8}" y="{y(k) + H / 2 + 4}">{html.escape(note)}</text>')
    if caption:
        out.append(f'<text class="caption" x="10" y="{y(K) + 16}" fill="#b00">{html.escape(caption)}</text>')
    return "\n".join(out + ["</svg>"]) + "\n"


def node(left, top, column, row, text, reward, chosen):
    """One candidate: its answer and reward in a box, green and bold if the episode went on from it."""
    fill, stroke, width = ("#d7f0dc", "#2a6", 3) if chosen else ("#f6f6f6", "#999", 1)
    return (f'<g class="node{" chosen" * chosen}" data-column="{column}" data-row="{row}" data-reward="{reward:.4f}">'
            f'<rect x="{left}" y="{top}" width="{W}" height="{H}" rx="4" fill="{fill}" stroke="{stroke}" '
            f'stroke-width="{width}"/><text x="{left + 6}" y="{top + 15}">{html.escape(short(text))}</text>'
            f'<text x="{left + 6}" y="{top + 31}" fill="#333">r = {reward:+.2f}</text></g>')


def line(x0, y0, x1, y1):
    return f'<line x1="{x0}" y1="{y0}" x2="{x1}" y2="{y1}" stroke="#aaa"/>'


def level_groups(rows, level=None):
    """An AT-GRPO run's rollout rows -> the atgrpo.Groups of one level (the first by default)
    in play order, for tree_svg. Group names read "level E / AGENT / turn T" (tree_samples)."""
    named = [(re.fullmatch(r"level (.+) / (.+) / turn (\d+)", name), rows) for name, rows in groups_of(rows)]
    if not named or not all(m for m, _ in named):
        raise SystemExit("--tree draws AT-GRPO tree sampling; these rollouts are not from a train.py "
                         "--algo at run (their groups are not 'level E / AGENT / turn T')")
    levels = list(dict.fromkeys(m.group(1) for m, _ in named))
    level = levels[0] if level is None else level
    if level not in levels:
        raise SystemExit(f"--level {level}: not in this step; its levels are {', '.join(levels)}")
    groups = []
    for m, members in named:
        if m.group(1) == level:
            candidates = [(prompt_of(r), [t for t, k in zip(r["tokens"], r["mask"]) if k],
                           "".join(t for t, k in zip(r["tokens"], r["mask"]) if k)) for r in members]
            rewards = [r["rewards"][0] for r in members]
            groups.append(Group((level, m.group(2), int(m.group(3))), candidates, rewards, best_index(rewards)))
    return groups


def group_size(out, rows):
    """K of an AT-GRPO run: its args.json's --num-generations (never changed by --resume), or the
    step's largest group where that is unreadable or smaller."""
    try:
        k = read_json(os.path.join(out, "args.json")).get("num_generations")
    except (OSError, ValueError):
        k = None
    largest = max(len(members) for _, members in groups_of(rows))
    return max(k, largest) if isinstance(k, int) and not isinstance(k, bool) else largest


def run_file(run, path):
    """Whether path is a file the run itself keeps, which a page must never replace."""
    inside = os.path.relpath(os.path.realpath(path), os.path.realpath(run))
    return not inside.startswith("..") and (inside in ("log.jsonl", "args.json", "trackers.json") or inside.split(
        os.sep)[0] in ("rollouts", "checkpoint", "checkpoint.old", "checkpoint.tmp", "tensorboard", "wandb"))


@one_line
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out", help="the --out folder of a train.py run")
    p.add_argument("--step", type=int, help="training step (default: the last one saved)")
    p.add_argument("--group", type=int, help="group index (default: the first with a non-zero advantage)")
    p.add_argument("--out", dest="file", help="file to write (default OUT/show_step_N.html, with --tree "
                   "OUT/tree_step_N.svg)")
    p.add_argument("--tree", action="store_true", help="draw one level's AT-GRPO tree as an SVG picture instead")
    p.add_argument("--level", help="with --tree: the level (default: the step's first)")
    a = p.parse_args(argv)
    steps = rollout_steps(a.out)
    step = max(steps) if a.step is None else a.step
    if step not in steps:
        raise SystemExit(f"{a.out}: no rollouts for step {step}; available steps: "
                         + ", ".join(map(str, sorted(steps))))
    path = a.file or os.path.join(a.out, f"tree_step_{step}.svg" if a.tree else f"show_step_{step}.html")
    output.check(path, "--out" if a.file else "", fix=None if a.file else "give --out FILE elsewhere")  # before the reading
    if a.file and run_file(a.out, path):
        raise SystemExit(f"--out {path} is one of the run's own files (its log, args, rollouts, checkpoints or "
                         "trackers): the page would replace it; give a file elsewhere")
    if a.file and any(output.same_file(path, f) for f in (os.path.join(a.out, "log.jsonl"),
                                                         os.path.join(a.out, "args.json"), steps[step])):
        raise SystemExit(f"--out {path} is the same file as one the page reads: it would replace it; give a file elsewhere")
    rows = read_rollouts(steps[step])
    if a.tree:
        groups = level_groups(rows, a.level)
        K = group_size(a.out, rows)
        gaps = missing_rows(groups, K)
        if gaps:  # said here too, not only in the picture
            print(f"note: {steps[step]}: {gaps}", file=sys.stderr)
        text = tree_svg(groups, f"AT-GRPO tree sampling, K = {K}: step {step}, level e = {groups[0].key[0]}", K)
    else:
        groups = groups_of(rows)
        text = page(a.out, step, groups, pick_group(groups, a.group))
    try:
        output.write_text(path, text)
    except OSError as e:
        raise SystemExit(f"could not write {path}: {e.strerror or e}; give another --out") from None
    print(path)
    return path


if __name__ == "__main__":
    main()
