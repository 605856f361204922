"""What an AT-GRPO run's groups looked like, step by step, from its saved rollouts.

    .venv/bin/python scripts/rollout_groups.py runs/planpath-tune-at

For each OUT/rollouts/step_N.jsonl: the number of (environment, agent, turn) groups, the
fraction whose candidates all got the same reward (zero advantage: no gradient; the same
measure train.py logs as zero_adv_groups for runs made after it existed), the fraction of
answers without a readable move (reward at most the format penalty), and how many answers
begin with each move U, D, L, R (the first-move counts of docs/results-planpath.md, and the
meter for runs made before train.py logged it).
"""
import argparse
import collections
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import env_planpath  # noqa: E402
import records  # noqa: E402


def first_move(tokens):
    """The first move letter the model wrote after its last <answer> tag ("" if none)."""
    text = "".join(tokens).rsplit("<answer>", 1)[-1].split("</answer>")[0].strip()[:1].upper()
    return text if text in env_planpath.MOVES else ""


def step_report(path):
    rows = records.read_jsonl(path, {"group": str, "rewards": list, "tokens": list})
    groups = collections.defaultdict(list)
    for row in rows:
        groups[row["group"]].append(tuple(row["rewards"]))
    zero = sum(len(set(rewards)) == 1 for rewards in groups.values()) / len(groups)
    unreadable = sum(row["rewards"][0] <= env_planpath.FORMAT_PENALTY for row in rows) / len(rows)
    moves = collections.Counter(first_move(row["tokens"]) for row in rows)
    return len(groups), zero, unreadable, moves


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", help="a run folder (--out) with a rollouts/ subfolder")
    folder = os.path.join(p.parse_args(argv).run, "rollouts")
    if not os.path.isdir(folder):
        p.error(f"{folder}: no rollouts folder; give a run folder made by train.py")
    steps = sorted((int(m[1]), f) for f in os.listdir(folder) if (m := re.fullmatch(r"step_(\d+)\.jsonl", f)))
    print("| step | groups | zero-advantage groups | unreadable answers | U | D | L | R |\n|---|---|---|---|---|---|---|---|")
    for step, name in steps:
        try:
            n, zero, unreadable, moves = step_report(os.path.join(folder, name))
        except ValueError as e:
            p.exit(1, f"{e}\n")
        print(f"| {step} | {n} | {zero:.2f} | {unreadable:.2f} | " + " | ".join(str(moves[m]) for m in "UDLR") + " |")


if __name__ == "__main__":
    main()
