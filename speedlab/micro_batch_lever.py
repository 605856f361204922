"""The update at several micro-batch sizes, each in a fresh process, alternating, timed in one run:
how much a larger micro-batch buys, and what memory it costs.

    .venv/bin/python speedlab/micro_batch_lever.py             # bf16 autocast where native, else fp32
    .venv/bin/python speedlab/micro_batch_lever.py --fp32

Each process loads the bundled model, keeps freed memory as train.py does, and runs, twice each
(the second one timed): the update of speedlab/bench.py's single-turn step (2 search prompts x G = 8
rows + 64 trained tokens) and of a two-turn step (64 trained + 160 tool-result tokens + 64
trained), the rows of speedlab/heap_lever.py, fast.update.policy_update with learning rate 0 at M
rows a micro-batch, for each M of --sizes. The fraction of the matmul peak counts the work as
speedlab/bench.py does (6 x parameters x the tokens an update must run: each distinct prompt once,
every token after it; no optimizer step, so higher than the bench's update column), against the
matmul peak measured before the first process and after the last, the higher of the two (as the
bench takes it). Micro-batches only change the order in which gradients add up, so the gradients
must agree up to rounding (relative difference of the summed absolute gradient against the first
size's).
"""
import argparse
import json
import os
import resource
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from fast.heap import keep_freed_memory  # noqa: E402
from machinery.precision import bf16_ok  # noqa: E402
from policy import BUNDLED, load_model  # noqa: E402
from speedlab.heap_lever import TIMED, alternating, summed_gradient, twice, updates  # noqa: E402
from speedlab import bench  # noqa: E402

SIZES = (2, 4, 8, 16)
SHAPES = TIMED[:2]  # the single-turn and the two-turn update


def child(size, fp32):
    """One process: each shape's seconds, its gradient's summed absolute value and the tokens its
    update must run, and the peak memory, as a JSON line."""
    keep_freed_memory("cpu")
    bf16 = bf16_ok("cpu") and not fp32
    model, tok = load_model(BUNDLED, "cpu")
    prompts = bench.search_prompts(tok, 2)[1]
    out = {"params": sum(p.numel() for p in model.parameters())}
    for name, samples in updates(prompts).items():
        seconds, _, grad = twice(lambda: summed_gradient(model, samples, bf16, size))
        per_prompt = len(samples) // len(prompts)
        tokens = sum(len(s.ids) for s in samples) - (per_prompt - 1) * sum(map(len, prompts))  # each prompt once
        out[name] = [seconds, grad, tokens]
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--fp32", action="store_true")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--sizes", type=int, nargs="+", default=SIZES)
    p.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child is not None:
        return child(args.child, args.fp32)
    if args.rounds < 1 or min(args.sizes) < 1:
        p.error("--rounds and every --sizes value must be at least 1")
    bf16 = bf16_ok("cpu") and not args.fp32
    dtype = torch.bfloat16 if bf16 else torch.float32
    peak = bench.matmul_gflops("cpu", dtype)
    print(f"{bench.DTYPE_NAMES[dtype]} matmul peak {peak:.0f} GFLOP/s; load {os.getloadavg()[0]:.2f}", flush=True)
    runs = alternating(__file__, args.sizes, args.rounds, ["--fp32"] * args.fp32, lambda r, size, load, run: print(
        f"round {r}, micro-batch {size} (load {load:.2f}): " + ", ".join(f"{k} {run[k][0]:.2f} s" for k in SHAPES),
        flush=True))
    peak = max(peak, bench.matmul_gflops("cpu", dtype))
    print(f"\n{bench.DTYPE_NAMES[dtype]}, best (mean) seconds of {args.rounds} processes per size; "
          f"% of the matmul peak ({peak:.0f} GFLOP/s) at the best\n")
    first = args.sizes[0]
    print("| `--micro-batch-size` | " + " | ".join(map(str, args.sizes)) + " |\n|---|" + "---|" * len(args.sizes))
    for key in SHAPES:
        best = {m: min(run[key][0] for run in runs[m]) for m in args.sizes}
        mean = {m: sum(run[key][0] for run in runs[m]) / len(runs[m]) for m in args.sizes}
        flops = {m: 6 * runs[m][0]["params"] * runs[m][0][key][2] for m in args.sizes}
        print(f"| {key} (s) | " + " | ".join(f"{best[m]:.2f} ({mean[m]:.2f})" for m in args.sizes) + " |")
        print(f"| {key}: vs {first} | " + " | ".join(f"{best[first] / best[m]:.2f}×" for m in args.sizes) + " |")
        print(f"| {key}: % of peak | " + " | ".join(
            f"{100 * flops[m] / best[m] / 1e9 / peak:.1f} %" for m in args.sizes) + " |")
        print(f"| {key}: gradient vs {first} | " + " | ".join(
            f"{abs(runs[m][0][key][1] / runs[first][0][key][1] - 1):.1e}" for m in args.sizes) + " |")
    print("| peak resident memory (MB, largest) | " + " | ".join(
        f"{max(run['peak_rss_mb'] for run in runs[m]):.0f}" for m in args.sizes) + " |")
    print(f"\nload {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
