"""How far Plan-Path's test levels go without reading the grid: the best fixed answers (every move
string up to 6 moves, played again and again) and a policy that follows only the positions line.

    .venv/bin/python scripts/planpath_constants.py               # the 64 default test levels, 4 moves
    .venv/bin/python scripts/planpath_constants.py --size 6 --min-solution 2
    .venv/bin/python scripts/planpath_constants.py --levels public                        # the public code's levels
    .venv/bin/python scripts/planpath_constants.py --levels public --n 3000 --paths-only  # their path lengths only

docs/planpath.md quotes its numbers; train.py's evaluation logs the same best constant
(best_constant_success, evaluate_games.py).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import env_planpath as pp  # noqa: E402
import planpath  # noqa: E402
from moves import constant_successes  # noqa: E402


def follow_words(levels, turns, around_walls=False):
    """Success of a policy that reads only the positions line: the row move it names first, then
    the column move; with around_walls, the first of the two that is not blocked. How far the
    words go without the grid (docs/planpath.md)."""
    def pick(grid):
        named = pp.named_moves(grid)
        free = [m for m in named if not planpath.move(grid, m)[1]]
        return (free if around_walls and free else named)[0]
    solved = 0
    for grid in levels:
        for _ in range(turns):
            grid = planpath.move(grid, pick(grid))[0]
            if grid.pos == grid.goal:
                solved += 1
                break
    return solved / len(levels)


def path_report(levels, moves):
    """One line: the mean shortest path, how many levels need a detour round walls (a shortest path
    longer than the Manhattan distance), and how many the solver reaches in `moves` moves."""
    n, lengths = len(levels), [planpath.distance(g) for g in levels]
    detours = sum(d > abs(g.pos[0] - g.goal[0]) + abs(g.pos[1] - g.goal[1]) for g, d in zip(levels, lengths))
    short = sum(d <= moves for d in lengths)
    return (f"{n} levels: mean shortest path {sum(lengths) / n:.2f} moves (from {min(lengths)} to {max(lengths)}); "
            f"a detour round walls {detours} ({detours / n:.3f}); at most {moves} moves {short} ({short / n:.3f})")


def constants_report(args):
    """The best fixed answers on the test levels train.py evaluates on, and how varied they are."""
    levels = tuple(pp.make_level(10 ** 9 + i, args) for i in range(args.n))
    print(path_report(levels, args.max_turns))
    if args.paths_only:
        return
    best = sorted(constant_successes(planpath.solves, levels, args.max_turns).items(), key=lambda kv: -kv[1])[:5]
    where = "the public levels" if args.levels == "public" else \
        f"size {args.size}, paths of {args.min_solution} to {args.max_solution} moves"
    print(f"{args.n} test levels, {where}, {args.max_turns} moves: best constant answers " +
          ", ".join(f"{a} {s:.3f}" for a, s in best))
    print("first move optimal: " + ", ".join(
        f"{m} {sum(m in planpath.optimal_moves(g) for g in levels) / len(levels):.2f}" for m in planpath.MOVES))
    print(f"following the words line alone: {follow_words(levels, args.max_turns):.3f}; the words and a step "
          f"around a blocked cell: {follow_words(levels, args.max_turns, around_walls=True):.3f}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=int, default=7, help="grid size including the wall border")
    p.add_argument("--min-solution", type=int, default=3, help="shortest path at least this many moves")
    p.add_argument("--max-solution", type=int, default=4, help="shortest path at most this many moves (0: no limit)")
    p.add_argument("--max-turns", type=int, default=4, help="moves a fixed answer plays")
    p.add_argument("--n", type=int, default=64, help="test levels")
    p.add_argument("--levels", choices=("ours", "public"), default="ours",
                   help="public: the public code's 10 x 10 levels (no --size or path bounds)")
    p.add_argument("--paths-only", action="store_true", help="only the path lengths (fast for a large --n)")
    args = p.parse_args(argv)
    try:
        constants_report(args)
    except ValueError as e:
        p.error(str(e))


if __name__ == "__main__":
    main()
