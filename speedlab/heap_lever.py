"""The update and a decode turn with glibc's own heap settings, and with freed memory kept for reuse
(fast/heap.py), each in a fresh process, alternating, timed in one run.

    .venv/bin/python speedlab/heap_lever.py             # bf16 autocast where native, else fp32
    .venv/bin/python speedlab/heap_lever.py --fp32

Each process loads the bundled model and runs, twice each (the second one timed, the first fills
the heap): the update of speedlab/bench.py's single-turn step (2 search prompts x G = 8 rows + 64
trained tokens), the update of a two-turn step (64 trained + 160 tool-result tokens + 64 trained),
both fast.update.policy_update at micro-batch 2 with learning rate 0, and one sampled decode turn of
the 16 rows (64 new tokens, seed 0). Page faults are the process's minor faults during the timed
call. The gradient and the tokens must be the same bit for bit: the heap changes where memory
comes from, not what is computed.
"""
import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import fast.update  # noqa: E402
from fast.decode import generate_turn  # noqa: E402
from fast.heap import keep_freed_memory  # noqa: E402
from machinery.precision import bf16_ok  # noqa: E402
from policy import BUNDLED, load_model  # noqa: E402
from sample import Sample  # noqa: E402
from speedlab import bench  # noqa: E402
from config import Args  # noqa: E402

VARIANTS = ("glibc's own", "kept for reuse")
TIMED = ("update, single turn", "update, two turns", "decode turn, 16 rows x 64 tokens")


def rows(prompts, parts, g):
    """8 rows per prompt, random tokens after it: `parts` = [(length, trained)]."""
    out = []
    for prompt in prompts:
        for _ in range(8):
            ids, mask = list(prompt), [0] * len(prompt)
            for n, trained in parts:
                ids += torch.randint(0, 40000, (n,), generator=g).tolist()
                mask += [int(trained)] * n
            out.append(Sample(ids=ids, mask=mask, adv=[float(m) for m in mask]))
    return out


def updates(prompts):
    """The two updates timed: the bench's single-turn step and a two-turn one, seed 0."""
    g = torch.Generator().manual_seed(0)
    return {TIMED[0]: rows(prompts, [(64, True)], g),
            TIMED[1]: rows(prompts, [(64, True), (160, False), (64, True)], g)}


def summed_gradient(model, samples, bf16, micro_batch_size=2):
    """fast.update.policy_update at learning rate 0; the summed absolute gradient it steps with."""
    grads = []

    class Keep(torch.optim.SGD):
        def step(self):
            grads.append(sum(p.grad.double().abs().sum().item() for p in model.parameters()))
            model.zero_grad(set_to_none=True)

    fast.update.policy_update(model, Keep(model.parameters(), lr=0.0), samples,
                       Args(micro_batch_size=micro_batch_size, temperature=1.0, beta=0.0, device="cpu", bf16=bf16))
    return grads[0]


def twice(fn):
    """(seconds, page faults, result) of the second of two calls."""
    fn()
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults, out


def alternating(script, variants, rounds, extra, report):
    """{variant: [the JSON line of each process]}: `script --child VARIANT` in a fresh process once per
    variant and round, the order reversed every other round; report(round, variant, load, that line)
    after each."""
    runs = {v: [] for v in variants}
    for r in range(rounds):
        for variant in (variants if r % 2 == 0 else variants[::-1]):
            load = os.getloadavg()[0]
            line = subprocess.run([sys.executable, script, "--child", str(variant), *extra],
                                  capture_output=True, text=True, check=True).stdout.splitlines()[-1]
            runs[variant].append(json.loads(line))
            report(r + 1, variant, load, runs[variant][-1])
    return runs


def child(variant, fp32):
    """One process: the three timings, a checksum of each result, peak memory, as a JSON line."""
    kept = keep_freed_memory("cpu") if variant == VARIANTS[1] else False
    bf16 = bf16_ok("cpu") and not fp32
    model, tok = load_model(BUNDLED, "cpu")
    prompts = bench.search_prompts(tok, 2)[1]
    out = {"heap_kept": kept}
    for name, samples in updates(prompts).items():
        out[name] = twice(lambda: summed_gradient(model, samples, bf16))

    def turn():
        torch.manual_seed(0)
        new = generate_turn(model, tok, [p for p in prompts for _ in range(8)], 64, bf16=bf16)
        return hashlib.sha256(str(new).encode()).hexdigest()[:16]

    out[TIMED[2]] = twice(turn)
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--fp32", action="store_true")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return child(args.child, args.fp32)
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    runs = alternating(__file__, VARIANTS, args.rounds, ["--fp32"] * args.fp32, lambda r, variant, load, run: print(
        f"round {r}, {variant} (load {load:.2f}): " + ", ".join(
            f"{k} {run[k][0]:.2f} s ({run[k][1]} faults)" for k in TIMED), flush=True))
    dtype = "bf16" if bf16_ok("cpu") and not args.fp32 else "fp32"
    print(f"\n{dtype}, each row: best (mean) seconds of {args.rounds} processes per heap, page faults of the best\n")
    print(f"| | {' | '.join(VARIANTS)} | kept vs own |\n|---|---|---|---|")
    for key in TIMED:
        cells, best = [], {}
        for variant in VARIANTS:
            seconds = [run[key][0] for run in runs[variant]]
            top = min(runs[variant], key=lambda run: run[key][0])
            best[variant] = min(seconds)
            cells.append(f"{min(seconds):.2f} ({sum(seconds) / len(seconds):.2f}), {top[key][1]:,} faults")
        print(f"| {key} | {' | '.join(cells)} | {best[VARIANTS[0]] / best[VARIANTS[1]]:.2f}× |")
    print("| peak resident memory (MB, largest) | " + " | ".join(
        f"{max(run['peak_rss_mb'] for run in runs[v]):.0f}" for v in VARIANTS) + " | |")
    same = {key: len({run[key][2] for v in VARIANTS for run in runs[v]}) == 1 for key in TIMED}
    print(f"\nsame gradient / tokens in every process: {same}")
    print(f"heap setting took effect in the kept processes: {all(run['heap_kept'] for run in runs[VARIANTS[1]])}")


if __name__ == "__main__":
    main()
