"""What a Plan-Path run's groups looked like (AT-GRPO or GRPO), step by step, from its saved rollouts.

    .venv/bin/python scripts/rollout_groups.py runs/planpath-tune-at

For each OUT/rollouts/step_N.jsonl: the number of (environment, agent, turn) groups, the
fraction whose candidates all got the same reward (zero advantage: no gradient; the same
measure train.py logs as zero_adv_groups for runs made after it existed), the fraction of
answers without a readable move (as the environment reads them), and how many answers
begin with each move U, D, L, R (the first-move counts of docs/results-planpath.md, and the
meter for runs made before train.py logged it). The last two columns are the update's work
(loss.policy_update_fast, beta = 0): the rows it runs (those with a non-zero advantage) of all
rows, and the prompts it runs (one per distinct prompt of those rows) against one per run of
neighbouring rows with the same prompt, which is all that tree sampling's groups need and
all that GRPO's trajectories, listed trajectory by trajectory, can use.
"""
import argparse
import collections
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import planpath  # noqa: E402
from moves import parse_moves  # noqa: E402
from machinery import records  # noqa: E402


def first_move(tokens):
    """The first move letter the model wrote after its last <answer> tag ("" if none)."""
    text = "".join(tokens).rsplit("<answer>", 1)[-1].split("</answer>")[0].strip()[:1].upper()
    return text if text in planpath.MOVES else ""


def answer_text(row):
    """What the environment read of a row's answer: Plan-Path's prefill <answer>, then the
    trained (model) tokens but special ones such as <|im_end|> (the sampler decodes without them)."""
    return "<answer>" + "".join(t for t, m in zip(row["tokens"], row["mask"])
                                if m and not (t.startswith("<|") and t.endswith("|>")))


def step_report(path):
    rows = records.read_jsonl(path, {"group": str, "rewards": list, "tokens": list, "mask": list, "adv": list})
    groups = collections.defaultdict(list)
    for row in rows:
        groups[row["group"]].append(tuple(row["rewards"]))
    zero = sum(len(set(rewards)) == 1 for rewards in groups.values()) / len(groups)
    unreadable = sum(parse_moves(answer_text(row)) is None for row in rows) / len(rows)
    moves = collections.Counter(first_move(row["tokens"]) for row in rows)
    return len(groups), zero, unreadable, moves, update_work(rows)


def update_work(rows):
    """(rows run, rows, prompts run, prompt runs of neighbouring rows) of the update at beta = 0."""
    trained = [r for r in rows if 1 in r["mask"]]
    prompt = lambda r: tuple(r["tokens"][:r["mask"].index(1)])  # noqa: E731 (the tokens before the first trained one)
    live = [r for r in trained if any(a for a, m in zip(r["adv"], r["mask"]) if m)]
    neighbours = sum(i == 0 or prompt(r) != prompt(trained[i - 1]) for i, r in enumerate(trained))
    return len(live), len(rows), len({prompt(r) for r in live}), neighbours


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", help="a run folder (--out) with a rollouts/ subfolder")
    folder = os.path.join(p.parse_args(argv).run, "rollouts")
    if not os.path.isdir(folder):
        p.error(f"{folder}: no rollouts folder; give a run folder made by train.py")
    steps = sorted((int(m[1]), f) for f in os.listdir(folder) if (m := re.fullmatch(r"step_(\d+)\.jsonl", f)))
    print("| step | groups | zero-advantage groups | unreadable answers | U | D | L | R | rows the update runs "
          "| prompts it runs (by neighbours) |\n|---|---|---|---|---|---|---|---|---|---|")
    for step, name in steps:
        try:
            n, zero, unreadable, moves, (live, rows, prompts, neighbours) = step_report(os.path.join(folder, name))
        except ValueError as e:
            p.exit(1, f"{e}\n")
        print(f"| {step} | {n} | {zero:.2f} | {unreadable:.2f} | " + " | ".join(str(moves[m]) for m in "UDLR") +
              f" | {live} of {rows} | {prompts} ({neighbours}) |")


if __name__ == "__main__":
    main()
