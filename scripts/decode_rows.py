"""What a decode step costs as its rows grow: the part every step pays whatever the rows (each
weight read once, some two thousand aten calls, Python between them) and the part that grows with
them (attention over every row's cache, more rows through each matmul).

    .venv/bin/python scripts/decode_rows.py          # bf16 autocast where native, else fp32
    .venv/bin/python scripts/decode_rows.py --fp32

For R = 1, 2, 4, 8, 16, 32 rows (the bench's 4 search prompts, R / 4 rows each; 1 and 2 rows: the
first prompt) one sampled turn of 33 new tokens through generate_turn (seed 0; sampled, as training
runs it: in fp32 only sampled turns run the packed Linears), each R once a round, 3 rounds,
each R's best round kept (rows leave as they stop: the table gives their mean). The decode steps are timed as tools/bench.py times them (DecodeClock: from
one one-token forward to the next), and their floor (bench.decode_work, bench.floor_seconds) is
taken with the matmul peak and copy bandwidth measured in this run. Then, at 1 and 16 rows, where
a step's time goes (bench.profiled: a 17-token turn less a 1-token turn, per step) and how many
aten calls a step makes (counted below autograd, a 12-token turn less a 2-token turn, per step).
"""
import argparse
import os
import sys
import time
import types

import torch
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from machinery.decode import generate_turn  # noqa: E402
from machinery.heap import keep_freed_memory  # noqa: E402
from machinery.precision import bf16_ok  # noqa: E402
from policy import BUNDLED, load_model  # noqa: E402
from tools import bench  # noqa: E402

ROWS = (1, 2, 4, 8, 16, 32)


class AtenCalls(TorchDispatchMode):
    """Counts every aten call that reaches a kernel (below autograd and autocast)."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls += 1
        return func(*args, **(kwargs or {}))


def sweep(turn, clock, peak, bandwidth, rounds):
    """{R: (seconds a step, its floor, rows on average)} of each R's best round."""
    best = {}
    for r in range(rounds):
        for rows in ROWS:
            turn(rows, 33)
            timed = [a for a, b in zip(clock.calls, clock.calls[1:]) if a and b]  # the steps take() times
            mean_rows = sum(rows for _, rows, _ in timed) / len(timed)
            steps = clock.take()
            seconds = sum(s for s, _, _ in steps) / len(steps)
            floor = sum(bench.floor_seconds(f, b, peak, bandwidth) for _, f, b in steps) / len(steps)
            if rows not in best or seconds < best[rows][0]:
                best[rows] = seconds, floor, mean_rows
            print(f"round {r + 1}, {rows} rows: {1e3 * seconds:.1f} ms a step ({len(steps)} steps, "
                  f"{mean_rows:.1f} rows on average)", flush=True)
    return best


def where_time_goes(turn, rows):
    """{kind: ms a step} under the profiler, and the aten calls a step, for `rows` rows."""
    one, long = bench.profiled(lambda: turn(rows, 1)), bench.profiled(lambda: turn(rows, 17))
    counted = []
    for tokens in (2, 12):
        with AtenCalls() as mode:
            turn(rows, tokens)
        counted.append(mode.calls)
    return {k: 1e3 * (long[1][k] - one[1][k]) / 16 for k in long[1]}, (counted[1] - counted[0]) / 10


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--fp32", action="store_true", help="autocast off: the fp32 path")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    keep_freed_memory("cpu")
    model, tok = load_model(BUNDLED, "cpu")
    bf16 = bf16_ok("cpu") and not args.fp32
    dtype = bench.compute_dtype("cpu", bf16)
    prompts = bench.search_prompts(tok, 4)[1]
    clock = bench.DecodeClock(model, types.SimpleNamespace(phase="generate"), dtype)

    def turn(rows, tokens):
        torch.manual_seed(0)
        return generate_turn(model, tok, [prompts[i * 4 // rows] for i in range(rows)] if rows >= 4
                             else prompts[:1] * rows, tokens, bf16=bf16)

    peak, bandwidth = bench.matmul_gflops("cpu", dtype), bench.bandwidth_gbs("cpu")
    print(f"{bench.DTYPE_NAMES[dtype]} matmul peak {peak:.0f} GFLOP/s, copy bandwidth {bandwidth:.1f} GB/s; "
          f"load {os.getloadavg()[0]:.2f}", flush=True)
    turn(16, 33), clock.take()  # warm-up: packs the Linears, fills the heap
    best = sweep(turn, clock, peak, bandwidth, args.rounds)
    print(f"\n| rows (on average) | ms a step (best of {args.rounds}) | floor (ms) | × floor | ms a row |\n|---|---|---|---|---|")
    for rows, (seconds, floor, mean_rows) in best.items():
        print(f"| {rows} ({mean_rows:.1f}) | {1e3 * seconds:.1f} | {1e3 * floor:.1f} | {seconds / floor:.1f}× "
              f"| {1e3 * seconds / mean_rows:.1f} |")

    (one, one_calls), (many, many_calls) = where_time_goes(turn, 1), where_time_goes(turn, 16)
    print(f"\n| {bench.DTYPE_NAMES[dtype]}, per decode step (under the profiler) | 1 row (ms) | 16 rows (ms) |\n|---|---|---|")
    for kind in [k for k, _ in bench.KINDS] + [bench.OUTSIDE]:
        print(f"| {kind} | {one[kind]:.1f} | {many[kind]:.1f} |")
    print(f"| total | {sum(one.values()):.1f} | {sum(many.values()):.1f} |")
    print(f"| aten calls a step | {one_calls:.0f} | {many_calls:.0f} |")
    print(f"\nload {os.getloadavg()[0]:.2f} at the end; {time.strftime('%Y-%m-%d %H:%M')}")


if __name__ == "__main__":
    main()
