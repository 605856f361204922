"""Machinery: skip on first reading. What makes a run fast and safe, not what the papers say.

    decode.py      where a turn ends for any chat model; transformers' generate and the faster
                   decode loop (one prefill per distinct prompt, a turn-sized KV cache)
    precision.py   bf16 autocast where the hardware has it, fp32 elsewhere
    heap.py        on a CPU under glibc, freed memory reused instead of faulted in anew
    checkpoint.py  the run folder: one writer, checkpoints, --resume, the rollouts of each step
    records.py     JSON and JSONL files read as data, every problem one line

`python train.py --plain true` runs a step without the decode loop (and without the fast update
in loss.py), so the code the papers need can be stepped through alone.
"""
