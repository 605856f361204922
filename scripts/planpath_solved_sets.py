"""Which test levels a Plan-Path run solved, against the levels two text-only rules solve.

    .venv/bin/python scripts/planpath_solved_sets.py docs/runs/planpath-seeds/at-s0 [more runs]

For the last evaluation in each run's log.jsonl (its success_each, one 0/1 per test level):
how many levels it solved, how many of those have the goal to the right (the positions line
names R), and how many of them two rules solve that read only the positions line, never the
grid: "words" follows the line (the row move first, scripts/planpath_constants.py), "words, no R"
takes the first named move other than R that is not blocked, else U. A policy whose solved
levels all lie inside a rule's is explained by that rule as well as by the grid.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import config  # noqa: E402
import env_planpath as pp  # noqa: E402
import planpath  # noqa: E402
from planpath_constants import follow_words  # noqa: E402
from machinery import records  # noqa: E402


def no_r_solves(grid, turns):
    """The "words, no R" rule: the first named move other than R that is not blocked, else U."""
    for _ in range(turns):
        free = [m for m in pp.named_moves(grid) if m != "R" and not planpath.move(grid, m)[1]]
        grid = planpath.move(grid, (free or ["U"])[0])[0]
        if grid.pos == grid.goal:
            return True
    return False


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", help="run folders (--out) with log.jsonl and args.json")
    runs, args = p.parse_args(argv).runs, config.parse_args(["--env", "planpath"])
    print("| run | step | solved | goal to the right | inside 'words' | inside 'words, no R' |\n|---|---|---|---|---|---|")
    for run in runs:
        try:
            saved = records.read_json(os.path.join(run, "args.json"))
            evals = [r for r in records.read_jsonl(os.path.join(run, "log.jsonl"), {"step": int})
                     if isinstance(r.get("eval_success_each"), str)]
        except ValueError as e:
            p.exit(1, f"{e}\n")
        if not evals:
            p.exit(1, f"{run}: no evaluation with success_each in its log\n")
        size, low, high, turns = (saved.get(k, getattr(args, k)) for k in ("size", "min_solution", "max_solution", "max_turns"))
        each = evals[-1]["eval_success_each"]
        levels = [planpath.level_for(10 ** 9 + i, size, solution=(low, high or None)) for i in range(len(each))]
        solved = [g for g, c in zip(levels, each) if c == "1"]
        words = sum(follow_words([g], turns) == 1 for g in solved)
        no_r = sum(no_r_solves(g, turns) for g in solved)
        right = sum("R" in pp.named_moves(g) for g in solved)
        print(f"| {run} | {evals[-1]['step']} | {len(solved)} | {right} | {words} | {no_r} |")
    levels_all = [planpath.level_for(10 ** 9 + i, args.size, solution=(args.min_solution, args.max_solution or None))
                  for i in range(args.eval_n)]
    print(f"\nOn the {args.eval_n} default test levels: goal to the right {sum('R' in pp.named_moves(g) for g in levels_all)}, "
          f"'words' solves {sum(follow_words([g], args.max_turns) == 1 for g in levels_all)}, "
          f"'words, no R' {sum(no_r_solves(g, args.max_turns) for g in levels_all)}.")


if __name__ == "__main__":
    main()
