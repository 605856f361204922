"""Does the bundled model's first Plan-Path move depend on the prompt? A sampling probe.

    .venv/bin/python scripts/planpath_prompt_probe.py

For 24 training levels (seeds 0-23) x 8 samples at the training sampler's settings, the
planner's first answer under five prompt variants: how many answers have no readable move,
each first move's count, and the fraction of samples whose first move is optimal (a uniformly
random move scores 0.375 on these levels). Variants change the answer-format line, the
positions line, or the temperature; the task code is untouched (the variants are set on the
module attributes the prompt reads, and put back). Its table is in docs/results-planpath.md.
"""
import collections
import os
import re
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import config  # noqa: E402
import env_planpath as pp  # noqa: E402
import planpath  # noqa: E402
import env_two_roles  # noqa: E402
import moves  # noqa: E402
from policy import chat_sampler, load_model, pick_device  # noqa: E402

DEFAULT_FORMAT = moves.ANSWER_FORMAT[1]
WHERE = pp.where


def where_in_words(grid):
    """The positions line without the move letters: "2 rows down and 2 columns left"."""
    return re.sub(r" \([UDLR]\)", "", WHERE(grid))


VARIANTS = [  # (name, answer format, positions line, temperature)
    ("positions in words only (`2 rows down`)", DEFAULT_FORMAT, where_in_words, 1.0),
    ("positions with letters (`2 rows down (D)`), the default", DEFAULT_FORMAT, WHERE, 1.0),
    ("letters, and the example `<answer>U</answer>`", DEFAULT_FORMAT.replace(">L<", ">U<"), WHERE, 1.0),
    ("words only, no example in the format line", "Answer with one move, U, D, L or R, inside <answer></answer> "
     "tags.", where_in_words, 1.0),
    ("words only, temperature 1.5", DEFAULT_FORMAT, where_in_words, 1.5),
]


def main():
    args = config.parse_args(["--env", "planpath"])
    torch.manual_seed(0)
    model, tok = load_model(args.model, pick_device("auto"))
    levels = [planpath.level_for(seed, args.size, solution=(args.min_solution, args.max_solution)) for seed in range(24)]
    print("| prompt | unreadable | L | U | D | R | first move optimal |\n|---|---|---|---|---|---|---|")
    for name, answer_format, where, temperature in VARIANTS:
        moves.ANSWER_FORMAT[1], pp.where, args.temperature = answer_format, where, temperature
        try:
            sample = chat_sampler({"planner": model}, tok, args, env_two_roles.STOP_STRINGS)
            outs = sample("planner", [pp.PlanPathTask(level).messages("planner") for level in levels for _ in range(8)])
        finally:
            moves.ANSWER_FORMAT[1], pp.where = DEFAULT_FORMAT, WHERE
        firsts = [(moves or "-")[0] for moves in (moves.parse_moves(text) for _, _, text in outs)]
        count = collections.Counter(firsts)
        optimal = sum(m in planpath.optimal_moves(levels[i // 8]) for i, m in enumerate(firsts)) / len(firsts)
        print(f"| {name} | {count['-']} | " + " | ".join(str(count[m]) for m in "LUDR") + f" | {optimal:.2f} |",
              flush=True)


if __name__ == "__main__":
    main()
