"""Where the time of one whole update goes on a CPU, by kind of op: the README's short run's update
(two training questions x G = 8 episodes of two turns with the tool's result between them,
fast.update.policy_update at 8 rows a micro-batch, the shared prompt run once), as train.py runs it.

    .venv/bin/python speedlab/update_profile.py           # bf16 autocast where native, else fp32
    .venv/bin/python speedlab/update_profile.py --fp32    # fp32 on any CPU
    .venv/bin/python speedlab/update_profile.py --bench   # the bench's single-turn update instead

It plays the episodes once (train.tool_step, seed 0), runs the update once untimed, twice timed
(learning rate 0: the weights stay), then once under torch.profiler, and prints each kind's self
time. With --bench it takes the single-turn update of speedlab/bench.py --trl instead, as
speedlab/levers.py's bench workload builds it: two training prompts x 8 rows, each row 64 random
tokens after its prompt, all trained (the bench's sampled turns end anywhere from 10 to 64 tokens,
padded to the micro-batch's longest), at the same 8 rows a micro-batch. speedlab/bench.py --profile
breaks down a 2-row micro-batch of the single-turn bench.
"""
import argparse
import dataclasses
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from fast import heap  # noqa: E402
from machinery.precision import bf16_ok  # noqa: E402
from policy import BUNDLED, load_model  # noqa: E402
from speedlab import bench  # noqa: E402
from speedlab.levers import Workload  # noqa: E402

MATMULS = {"aten::mm", "aten::addmm", "aten::bmm"}
VOCABULARY = {"aten::gather", "aten::div", "aten::fill_", "aten::index_copy"}  # with the log-softmax's two
KINDS = (  # the rows of the table, for bench.profiled: the first kind whose test matches an aten op
    ("matmuls", lambda op: op in MATMULS),
    ("attention (SDPA, forward and backward)", lambda op: "scaled_dot_product" in op),
    ("vocabulary-sized: log-softmax and its backward, temperature, gather, zero fills",
     lambda op: "log_softmax" in op or op in VOCABULARY),
    ("casts and copies", lambda op: op in ("aten::copy_", "aten::_to_copy")),
    ("other ops (elementwise, norms, autograd's own)", lambda op: True),
)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--fp32", action="store_true", help="autocast off (fp32) also where bf16 is native")
    p.add_argument("--bench", action="store_true", help="the bench's single-turn update, not the short run's")
    args = p.parse_args(argv)
    bf16 = bf16_ok("cpu") and not args.fp32
    heap.keep_freed_memory("cpu")  # as train.py does
    model, tok = load_model(BUNDLED, "cpu")
    work = Workload("bench" if args.bench else "short run", model, tok, bf16)
    work.args = dataclasses.replace(work.args, micro_batch_size=8)
    if not args.bench:  # the bench's rows are made up front; the short run's are played
        work.generation()
    rows = work.samples
    print(f"{'bf16' if bf16 else 'fp32'}; load at start {os.getloadavg()[0]:.2f}; {len(rows)} rows of "
          f"{min(len(s.ids) for s in rows)}-{max(len(s.ids) for s in rows)} tokens, "
          f"{sum(sum(s.mask) for s in rows)} trained", flush=True)
    work.update()  # warm-up
    timed = [work.update()[0] for _ in range(2)]
    print(f"update, timed twice: {timed[0]:.2f} s, {timed[1]:.2f} s (load {os.getloadavg()[0]:.2f})")
    kinds = bench.profiled(work.update, KINDS)[1]
    del kinds[bench.OUTSIDE]  # the table gives the ops' own time only
    total = sum(kinds.values())
    print(f"\n| {'bf16' if bf16 else 'fp32'}, one update | s | share |\n|---|---|---|")
    for name, seconds in kinds.most_common():
        print(f"| {name} | {seconds:.2f} | {100 * seconds / total:.0f} % |")
    print(f"| total (self time under the profiler) | {total:.2f} | 100 % |")


if __name__ == "__main__":
    main()
