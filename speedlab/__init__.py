"""The speed lab: measurements behind docs/benchmarks.md, beside the lesson; nothing the lesson
needs imports it. Run from the project root as `python speedlab/NAME.py`.

    bench.py              a step's speed against the machine's peak and against TRL
    levers.py             every speed lever switched off alone against the default
    heap_lever.py         the update and a decode turn with glibc's own heap, and with freed memory kept
    micro_batch_lever.py  the update at several micro-batch sizes: what a larger one buys and costs
    cuda_card.py          the card's command timed on a GPU, rehearsed on a CPU with --tiny
"""
