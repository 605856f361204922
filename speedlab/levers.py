"""Every speed lever of a CPU step switched off alone against the default, timed in one process.

    .venv/bin/python speedlab/levers.py            # bf16 autocast where native, else fp32
    .venv/bin/python speedlab/levers.py --fp32     # fp32 on any CPU

Two workloads, each on the bundled model:
    bench      speedlab/bench.py --trl's step: 2 search prompts x G = 8 rows, one sampled turn of at
               most 64 tokens (generation), then fast.update.policy_update of 16 rows with the same
               prompts and 64 trained tokens each (update; random tokens, seed 0, learning rate 0)
    short run  the README's short run's work: train.tool_step of two training questions x G = 8
               (two turns and the tool call between them: generation), then the update of the
               samples it played (advantages of the default's first round, learning rate 0)

Each lever is switched off inside this script only (the module's function swapped for the
plain one for the duration of the call, then restored); the product has no switch for it. One
round times the default, then each lever off; every other round runs in the opposite order.
Each configuration keeps its best round. "off / default" is the lever's gain on generation; the
step's gain adds the default's update time to both sides. The sampled tokens of each
configuration are compared with the default's (same seed): "same tokens" says whether the lever
changes what is generated. The kept heap (fast/heap.py) is process-wide and is measured in
fresh processes by speedlab/heap_lever.py; CUDA graphs and attention without cuDNN only on a GPU
(speedlab/cuda_card.py).
"""
import argparse
import contextlib
import hashlib
import os
import random
import sys
import time
from unittest import mock

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import fast.update  # noqa: E402
from config import parse_args  # noqa: E402
import train  # noqa: E402
from fast import cpu_step, decode, heap  # noqa: E402
from machinery.precision import bf16_ok  # noqa: E402
from policy import BUNDLED, load_model  # noqa: E402
from speedlab import bench  # noqa: E402
from speedlab.heap_lever import rows  # noqa: E402


def multinomial(probs):
    return torch.multinomial(probs, 1)[:, 0]


# lever -> (what it is, how it is switched off); every lever here speeds up generation
LEVERS = {
    "packed Linears": ("the Linears over oneDNN-packed weights (cpu_step.packed_linears)",
                       lambda: mock.patch.object(cpu_step, "packable", lambda model, greedy=False: False)),
    "written-out step": ("the one-token step written out op by op (cpu_step.decode_step)",
                         lambda: mock.patch.object(cpu_step, "written_out", lambda model: False)),
    "ready mask": ("the (rows, 1, 1, keys) mask passed ready (decode.one_token_mask)",
                   lambda: mock.patch.object(decode, "one_token_mask", lambda model, attn: attn)),
    "shared start": ("the start all prompts share prefilled once (decode.shared_length)",
                     lambda: mock.patch.object(decode, "shared_length", lambda prompts: 0)),
    "rows leave": ("stopped rows leave the batch (decode.leave_batch)",
                   lambda: mock.patch.object(decode, "leave_batch",
                                             lambda going, active, cache, attn, pos, token: (active, attn, pos, token))),
    "decode.draw": ("one uniform number a row instead of torch.multinomial",
                    lambda: mock.patch.object(decode, "draw", multinomial)),
}


def digest(x):
    return hashlib.sha256(str(x).encode()).hexdigest()[:12]


class Workload:
    """One workload's generation and update as calls that return (seconds, a digest of the result)."""

    def __init__(self, name, model, tok, bf16):
        self.name, self.model, self.tok, self.bf16 = name, model, tok, bf16
        self.args = parse_args(["--micro-batch-size", "2", "--device", "cpu",
                                      "--eval-n", "8", *(["--bf16", "false"] if not bf16 else [])])
        if name == "bench":
            prompts = bench.search_prompts(tok, 2)[1]
            self.prompts = [p for p in prompts for _ in range(8)]
            self.samples = rows(prompts, [(64, True)], torch.Generator().manual_seed(0))
        else:
            retriever, train_qs, _ = train.load_task(self.args)
            self.retriever, self.questions = retriever, random.Random(0).sample(train_qs, 2)
            self.samples = None

    def generation(self):
        torch.manual_seed(0)
        start = time.perf_counter()
        if self.name == "bench":
            new = decode.generate_turn(self.model, self.tok, self.prompts, 64, 1.0, bf16=self.bf16)
            return time.perf_counter() - start, digest(new)
        samples = train.tool_step({"policy": self.model}, self.tok, self.questions, self.retriever, self.args)[0]
        seconds = time.perf_counter() - start
        self.samples = self.samples or samples  # the update trains the default's first episodes
        return seconds, digest([s.ids for s in samples])

    def update(self):
        optimizer = torch.optim.SGD(self.model.parameters(), lr=0.0)
        start = time.perf_counter()
        fast.update.policy_update(self.model, optimizer, self.samples, self.args)
        seconds = time.perf_counter() - start
        grad = sum(p.grad.double().abs().sum().item() for p in self.model.parameters() if p.grad is not None)
        self.model.zero_grad(set_to_none=True)
        return seconds, f"{grad:.6e}"


def measure(work, levers, rounds, log):
    """{config: {part: (best seconds, digest of its first result)}} for "default" (generation and
    update) and each lever off (generation)."""
    configs = ["default", *levers]
    best = {c: {} for c in configs}
    work.generation(), work.update()  # warm-up, untimed
    for r in range(rounds):
        for config in (configs if r % 2 == 0 else configs[::-1]):
            off = LEVERS[config][1]() if config != "default" else contextlib.nullcontext()
            parts = ("generation", "update") if config == "default" else ("generation",)
            with off:
                for part in parts:
                    load = os.getloadavg()[0]
                    seconds, result = getattr(work, part)()
                    kept = best[config].get(part)
                    best[config][part] = (min(seconds, kept[0]) if kept else seconds, kept[1] if kept else result)
                    log(f"{work.name}, round {r + 1}, {config}: {part} {seconds:.2f} s (load {load:.2f})")
    return best


def table(work, best):
    """Markdown rows: lever, default s, off s, off / default, step off / default, same tokens."""
    d = best["default"]
    step = d["generation"][0] + d["update"][0]
    out = []
    for lever, timed in best.items():
        if lever == "default":
            continue
        seconds, result = timed["generation"]
        default, same = d["generation"][0], result == d["generation"][1]
        out.append(f"| {work} | {lever} | {default:.2f} | {seconds:.2f} | {seconds / default:.2f}× | "
                   f"{(step - default + seconds) / step:.2f}× | {'yes' if same else 'no'} |")
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--fp32", action="store_true", help="autocast off (fp32) also where bf16 is native")
    p.add_argument("--rounds", type=int, default=3, help="rounds; each configuration keeps its best")
    p.add_argument("--workloads", nargs="+", choices=["bench", "short run"], default=["bench", "short run"])
    p.add_argument("--levers", nargs="+", choices=list(LEVERS), default=list(LEVERS), help="these levers only")
    args = p.parse_args(argv)
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    bf16 = bf16_ok("cpu") and not args.fp32
    heap.keep_freed_memory("cpu")  # as train.py does
    model, tok = load_model(BUNDLED, "cpu")
    print(f"{'bf16' if bf16 else 'fp32'}; {bench.instruction_set('cpu')}; load at start "
          f"{os.getloadavg()[0]:.2f}; rounds {args.rounds}", flush=True)
    lines = []
    for name in args.workloads:
        work = Workload(name, model, tok, bf16)
        lines += table(name, measure(work, args.levers, args.rounds, lambda s: print(s, flush=True)))
    print("\n| workload | lever off | generation, default (s) | off (s) | off / default | step off / default | same tokens |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
