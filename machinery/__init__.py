"""Machinery: skip on first reading. The plumbing every run uses, whichever path computes it; not
what the papers say. The faster path is a package of its own (fast/).

    precision.py     bf16 autocast where the hardware has it, fp32 elsewhere
    micro_batch.py   --micro-batch-size auto: the rows an update runs at once, from the free memory
    checkpoint.py    the run folder: one writer, checkpoints, --resume, the rollouts of each step
    records.py       JSON and JSONL files read as data, every problem one line
    rollout_files.py a step's saved rollouts read back: groups, each rollout cut into turns, a
                     group as a table
    trackers.py      --report-to: TensorBoard, W&B or Trackio fed from the log while the run trains
    cli.py           what every command shares: Ctrl-C or a failed read or write as one line, not a
                     traceback; a progress bar over long work
    sandbox.py       untrusted code in a forked worker with limits: the exercises' checker, and the
                     coding team's programs (env_code.py)
"""
