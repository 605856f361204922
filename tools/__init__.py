"""Tools around training, run from the project root as `python tools/NAME.py`; nothing at the
root imports them.

    evaluate.py         a policy on held-out questions or levels (docs/tools.md)
    compare.py          several algorithms and seeds side by side, with paired intervals (docs/tools.md)
    show.py             the per-token credit page of a run's rollouts, and the AT-GRPO tree (docs/tools.md)
    credit.py           every advantage estimator against the true advantage (docs/tools.md)
    credit_report.py    no script: credit's tables and plot, and the checks of a --from file
    credit_gradient.py  no script: each estimator's update against the true one (credit --gradient)
    credit_bias.py      does an estimator favour "search again" over "answer now"? across states, and inside one
    scale_trl.py        MT-GRPO inside TRL's GRPOTrainer, for many GPUs (docs/scale.md)
    output.py           no script: where credit, compare and show write, checked before their work

The speed lab (bench.py and the lever scripts) lives in speedlab/.
"""
