"""The fast path: the same training step the lesson's code computes, computed faster. Skip on first
reading: nothing here is in the papers.

    decode.py    the decode loop: one turn of every active episode over a turn-sized cache, one
                 prefill per distinct prompt, rows leaving the batch as they stop (in place of
                 generation.hf_generate_turn, transformers' generate)
    cpu_step.py  its one-token step on a CPU: Linears over weights packed once, the step written out
    gpu_step.py  the same on a GPU: attention without cuDNN, the steps replayed as one CUDA graph
    onednn.py    the only private torch ops called (oneDNN's), each with a public fallback
    heap.py      on a CPU under glibc, freed memory reused instead of faulted in anew
    update.py    the update (in place of loss.policy_update and loss.fill_logprobs): silent rows
                 skipped, and by device a shared prompt run once or rows of several groups per
                 micro-batch (FAST_UPDATE)

policy.fast_path is the one seam: `python train.py --plain true` gets None there and runs none of
this; otherwise train.py and policy.py take decode.generate_turn, update.policy_update,
update.fill_logprobs and heap.keep_freed_memory from here (tests/test_plain.py checks both). Each
lever is kept where it measured faster on that kind of device (docs/benchmarks.md).
"""
