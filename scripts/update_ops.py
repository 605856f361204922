"""Where the update's time goes, timed op by op outside torch.profiler, beside the profiler's own
account of the same update.

    .venv/bin/python scripts/update_ops.py          # bf16 autocast where native, else fp32
    .venv/bin/python scripts/update_ops.py --fp32

The update of tools/bench.py's single-turn step (2 search prompts x 8 rows + 64 trained tokens of
random ids, the rows of scripts/heap_lever.py, loss.policy_update_fast at micro-batch 2, learning rate 0, the heap kept as train.py
keeps it), run once to warm up and then three times: plain (its wall time), with every aten call
timed (a dispatch mode below autograd: each call's time includes the calls it makes inside, so
nothing is counted twice), and under torch.profiler (each op's self time, as bench.profiled
counts it). Both accounts are grouped by bench.KINDS; the ops on a block the size of the
embedding (the tied weight, its bf16 cast, its gradient) are also shown on their own.
"""
import argparse
import math
import os
import sys
import time
from collections import Counter

import torch
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from machinery.heap import keep_freed_memory  # noqa: E402
from machinery.precision import bf16_ok  # noqa: E402
from policy import BUNDLED, load_model  # noqa: E402
from scripts.heap_lever import rows  # noqa: E402
from tools import bench  # noqa: E402


class OpTimer(TorchDispatchMode):
    """Seconds per aten op (named as the profiler names it, aten::mm), and the seconds of the
    calls that read or write a tensor with as many elements as the embedding."""

    def __init__(self, vocabulary_block):
        super().__init__()
        self.seconds, self.block, self.vocabulary_block = Counter(), Counter(), vocabulary_block

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        start = time.perf_counter()
        out = func(*args, **(kwargs or {}))
        seconds = time.perf_counter() - start
        name = func.name().split(".")[0]  # aten::mm.default -> aten::mm
        self.seconds[name] += seconds
        tensors = [t for t in [*args, out] if isinstance(t, torch.Tensor)]
        if any(t.numel() == self.vocabulary_block for t in tensors):
            self.block[name] += seconds
        return out


def is_shape(shape):
    """Whether a profiler input shape is one tensor's (a list of ints, not empty)."""
    return isinstance(shape, list) and bool(shape) and all(isinstance(d, int) for d in shape)


def timer_account(update, vocabulary_block):
    """(wall seconds, {kind: seconds}, {op: seconds on a vocabulary-sized block}), every op timed."""
    timer = OpTimer(vocabulary_block)
    start = time.perf_counter()
    with timer:
        update()
    wall = time.perf_counter() - start
    return wall, bench.by_kind(timer.seconds.items(), wall), timer.block


def profiler_account(update, vocabulary_block):
    """The same under torch.profiler: each op's self time; an op is on the block if an input is."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        start = time.perf_counter()
        update()
        wall = time.perf_counter() - start
    ops = [(event.key, event.self_cpu_time_total / 1e6, event.input_shapes)
           for event in prof.key_averages(group_by_input_shape=True)]
    block = Counter()
    for name, seconds, shapes in ops:
        if any(is_shape(shape) and math.prod(shape) == vocabulary_block for shape in shapes):
            block[name] += seconds
    return wall, bench.by_kind(((name, seconds) for name, seconds, _ in ops), wall), block


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--fp32", action="store_true", help="autocast off: the fp32 path")
    args = p.parse_args()
    keep_freed_memory("cpu")
    model, tok = load_model(BUNDLED, "cpu")
    bf16 = bf16_ok("cpu") and not args.fp32
    samples = rows(bench.search_prompts(tok, 2)[1], [(64, True)], torch.Generator().manual_seed(0))

    def update():
        bench.forward_backward(model, samples, 2, "cpu", bf16)

    print(f"{bench.DTYPE_NAMES[bench.compute_dtype('cpu', bf16)]}, load {os.getloadavg()[0]:.2f}", flush=True)
    plain = bench.timed(update)  # the second of two calls
    block = model.get_input_embeddings().weight.numel()
    (timed, ops, timed_block), (profiled, kinds, profiled_block) = timer_account(update, block), profiler_account(update, block)
    print("\n| the update of 16 rows (s) | every op timed | under torch.profiler |\n|---|---|---|")
    for kind in [k for k, _ in bench.KINDS] + [bench.OUTSIDE]:
        print(f"| {kind} | {ops[kind]:.2f} ({100 * ops[kind] / timed:.0f} %) | {kinds[kind]:.2f} ({100 * kinds[kind] / profiled:.0f} %) |")
    print(f"| wall time | {timed:.2f} | {profiled:.2f} |\n\nplain (nothing timing the ops): {plain:.2f} s")
    print("\nops on a vocabulary-sized block (s): every op timed (a call's inner ops included) | "
          "under torch.profiler (self time, ops whose input is such a block)")
    for name in sorted(set(timed_block) | set(profiled_block), key=lambda n: -max(timed_block[n], profiled_block[n]))[:10]:
        print(f"  {name}: {timed_block[name]:.3f} | {profiled_block[name]:.3f}")
    print(f"  all: {sum(timed_block.values()):.3f} | {sum(profiled_block.values()):.3f}")
    print(f"\nload {os.getloadavg()[0]:.2f} at the end; {time.strftime('%Y-%m-%d %H:%M')}")


if __name__ == "__main__":
    main()
