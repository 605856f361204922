"""Credit you can see: one group of rollouts as a self-contained HTML page.

    python show.py OUT [--step N] [--group I] [--out FILE]

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
"""
import argparse
import glob
import html
import os
import re
import sys

from atgrpo import best_index
from records import read_json, read_jsonl

KEYS = ("group", "role", "rewards", "tokens", "mask", "adv", "turn")
ALGOS = {"mt": "MT-GRPO, turn-level advantages", "mr": "GRPO-MR, merged reward",
         "or": "GRPO-OR, outcome reward", "at": "AT-GRPO, agent- and turn-wise groups",
         "grpo": "GRPO baseline, trajectory groups"}
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


def read_rollouts(path):
    """One dict per line, as checkpoint.save_rollouts writes them; a last line cut by a kill is
    left out with a note (--resume writes that step again), any other bad line stops with it named."""
    types = {"group": str, "role": str} | {k: list for k in ("tokens", "mask", "adv", "turn", "rewards")}
    try:
        rows = read_jsonl(path, types, row_problem, cut_end=True)
    except ValueError as e:
        raise SystemExit(f"{e}; expected one JSON object with {', '.join(KEYS)} per line, as train.py "
                         "writes them") from None
    with open(path, "rb") as f:
        if sum(1 for line in f if line.strip()) > len(rows):
            print(f"note: {path}: its last line was cut (the run stopped while writing it) and is "
                  "left out", file=sys.stderr)
    return rows


def row_problem(row):
    """What is wrong with a rollout row whose keys have the right types, or None: the per-token
    lists are as long as tokens, tokens are text, the rest numbers (the page escapes and colours them)."""
    if not len(row["tokens"]) == len(row["mask"]) == len(row["adv"]) == len(row["turn"]):
        return "tokens, mask, adv and turn differ in length"
    if not all(isinstance(t, str) for t in row["tokens"]):
        return "'tokens' must hold only strings"
    for key in ("mask", "adv", "turn", "rewards"):
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in row[key]):
            return f"'{key}' must hold only numbers"
    return None


def groups_of(rows):
    """[(group name, its rows)] in the order the groups first appear."""
    groups = {}
    for row in rows:
        groups.setdefault(row["group"], []).append(row)
    return list(groups.items())


def pick_group(groups, index=None):
    """Index I, or by default the first group that trains (some advantage not zero), else 0."""
    if index is None:
        return next((i for i, (_, rows) in enumerate(groups)
                     if any(a for r in rows for a in r["adv"])), 0)
    if not 0 <= index < len(groups):
        raise SystemExit(f"--group {index}: this step has {len(groups)} groups; "
                         f"pick one of 0..{len(groups) - 1}")
    return index


# ---------------------------------------------------------------- one rollout
def segments(row):
    """Runs of tokens [(kind, turn, indices)]: the prompt, each turn's model tokens, and the
    environment tokens between turns (tool results, error messages)."""
    segs, seen_model = [], False
    for i, t in enumerate(row["turn"]):
        kind = "turn" if t > 0 else ("environment" if seen_model else "prompt")
        seen_model |= t > 0
        if segs and segs[-1][:2] == (kind, t):
            segs[-1][2].append(i)
        else:
            segs.append((kind, t, [i]))
    return segs


def prompt_of(row):
    """The prompt's tokens (the masked tokens before the first model token)."""
    segs = segments(row)
    return [row["tokens"][i] for i in segs[0][2]] if segs and segs[0][0] == "prompt" else []


def advantage_of_turn(row):
    """{turn k: A_k}: every model token of turn k carries its turn's advantage A_k."""
    return dict(sorted((t, a) for a, m, t in zip(row["adv"], row["mask"], row["turn"]) if m and t > 0))


def reward_labels(row, env, algo):
    """Search: rewards[k] belongs to turn k, the last one is the outcome reward R^O.
    Sokoban: AT-GRPO's one reward belongs to the turn the sample's tokens were generated at;
    the GRPO baseline gives every sample of a trajectory that trajectory's return."""
    turns = sorted(advantage_of_turn(row)) or [1]
    if algo == "grpo":
        return ["trajectory return"]
    if len(row["rewards"]) == 1:
        return [f"turn {turns[0]}"]
    return [f"turn {k + 1}" + (" (outcome)" if env == "search" and k == len(row["rewards"]) - 1 else "")
            for k in range(len(row["rewards"]))]


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


def rollout_html(k, row, env, algo, scale, skip_prompt, chosen):
    rewards = ", ".join(f"{l}: {r:.3f}" for l, r in zip(reward_labels(row, env, algo), row["rewards"]))
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
            f"({ALGOS.get(algo, 'unknown')}) · {len(rows)} rollouts</p>",
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
    body += [rollout_html(k, r, env, algo, scale, shared, algo == "at" and k == best) for k, r in enumerate(rows)]
    body.append("<p class=\"run\">groups of this step (python show.py OUT --group I): " + "; ".join(
        f"{i}: {html.escape(n)}" for i, (n, _) in enumerate(groups)) + "</p>")
    return (f'<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f"<style>{CSS}</style></head><body>{''.join(body)}</body></html>\n")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out", help="the --out folder of a train.py run")
    p.add_argument("--step", type=int, help="training step (default: the last one saved)")
    p.add_argument("--group", type=int, help="group index (default: the first with a non-zero advantage)")
    p.add_argument("--out", dest="file", help="HTML file to write (default OUT/show_step_N.html)")
    a = p.parse_args(argv)
    steps = rollout_steps(a.out)
    step = max(steps) if a.step is None else a.step
    if step not in steps:
        raise SystemExit(f"{a.out}: no rollouts for step {step}; available steps: "
                         + ", ".join(map(str, sorted(steps))))
    groups = groups_of(read_rollouts(steps[step]))
    gi = pick_group(groups, a.group)
    path = a.file or os.path.join(a.out, f"show_step_{step}.html")
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(page(a.out, step, groups, gi))
    except OSError as e:
        raise SystemExit(f"could not write {path}: {e.strerror or e}; give another --out") from None
    print(path)
    return path


if __name__ == "__main__":
    main()
