"""Machinery: skip on first reading. What makes a run fast and safe, not what the papers say.

    decode.py      where a turn ends for any chat model; transformers' generate (the plain path)
                   and the faster decode loop (one prefill per distinct prompt, a turn-sized KV
                   cache, CUDA graphs on a GPU)
    cpu_step.py    the decode loop's one-token step on a CPU: packed Linears, the step written out
    gpu_step.py    the same on a GPU: attention without cuDNN, the steps replayed as a CUDA graph
    onednn.py      the only private torch ops called (oneDNN's), each with a public fallback
    precision.py   bf16 autocast where the hardware has it, fp32 elsewhere
    memory.py      --micro-batch-size auto: the rows an update runs at once, from the free memory
    heap.py        on a CPU under glibc, freed memory reused instead of faulted in anew
    checkpoint.py  the run folder: one writer, checkpoints, --resume, the rollouts of each step
    records.py     JSON and JSONL files read as data, every problem one line
    rollouts.py    a step's rollouts read back: groups, each rollout cut into turns, a group as a table
    trackers.py    --report-to: TensorBoard, W&B or Trackio fed from the log while the run trains
    cli.py         what every command shares: Ctrl-C or a failed read or write as one line, not a
                   traceback; a progress bar over long work

`python train.py --plain true` runs a step without any of the fast path (decode loop, cpu_step,
gpu_step, onednn's packing, heap, the fast update in loss.py), so the code the papers need can be stepped through alone.
"""
