"""The card's device: one CUDA GPU. Skipped where torch finds none (tests/conftest.py); every other
test of the suite runs on the CPU. speedlab/gpu_check.py runs these first on a GPU machine.

- one train.py step on a tiny model, the default (decode steps replayed as a CUDA graph, the fast
  update with fast.update.FAST_UPDATE["cuda"]) and --plain;
- the plain and the fast update step with one gradient, for every lever setting: within 1e-4 of
  its norm in fp32 (the sums run in another order), 5e-2 under bf16 autocast (the shared prompt's
  keys round to bf16 once more);
- --micro-batch-size auto reads the GPU's free memory;
- --resume on a GPU continues as the uninterrupted run, within a tolerance: a CUDA run is not
  bit-reproducible (a backward sums with atomic adds, in no fixed order), so the weights after a
  step agree to about 1e-7, not exactly. The same tokens are sampled, the same rewards and
  advantages follow, and the logged floats agree to 1e-4 (relative) and the weights to 1e-5.
"""
import json
import os

import pytest
import torch

import fast.update
import train
from machinery import micro_batch
from fast import gpu_step
from sample import Sample
from test_loss import LEVERS, full_forward_gradient, update_gradient
from test_train import crash_at, strip_times, tiny_run

pytestmark = pytest.mark.cuda


def cuda_run(tmp_path, model_dir, name, *extra):
    return tiny_run(tmp_path, model_dir, name, "--device", "cuda", *extra)


@pytest.mark.parametrize("plain", [False, True])
def test_one_train_step_on_a_gpu(tmp_path, answering_model_dir, monkeypatch, plain):
    """The default step captures its decode steps as a CUDA graph and runs the fast update; --plain
    runs generate and the plain update, and captures nothing. Both train: grad norm > 0."""
    captured, capture = [], gpu_step.GraphedSteps.capture
    monkeypatch.setattr(gpu_step.GraphedSteps, "capture", lambda self: captured.append(1) or capture(self))
    out, flags = cuda_run(tmp_path, answering_model_dir, "run", "--steps", "1", "--num-generations", "4",
                          "--bf16", "true", "--plain", str(plain).lower())
    history = train.main(flags)
    assert bool(captured) is not plain
    assert history[-1]["step"] == 1 and history[-1]["grad_norm"] > 0 and history[-1]["gen_tokens"] > 0
    assert json.load(open(os.path.join(out, "args.json")))["device"] == "cuda"


def search_rows(seed=11):
    """Two questions' groups of two-turn rows with a tool result between the turns."""
    g = torch.Generator().manual_seed(seed)
    rand = lambda n: torch.randint(0, 1000, (n,), generator=g).tolist()  # noqa: E731
    samples = []
    for prompt in (rand(40), rand(31)):
        for t1, env, t2, a in ((13, 24, 12, 1.0), (22, 15, 30, -1.0), (14, 20, 11, 0.5), (9, 9, 9, -0.5)):
            turns = [0] * len(prompt) + [1] * t1 + [0] * env + [2] * t2
            samples.append(Sample(ids=prompt + rand(t1 + env + t2), mask=[int(k > 0) for k in turns],
                                  adv=[a * (k > 0) for k in turns], turn=turns))
    return samples


def relative_difference(got, want):
    return ((got - want).norm() / want.norm()).item()


@pytest.mark.parametrize("bf16, tolerance", [(False, 1e-4), (True, 5e-2)])
@pytest.mark.parametrize("cudnn", [False, True])
@pytest.mark.parametrize("use", LEVERS, ids=lambda u: f"shared_prompt={u['shared_prompt']},trained_only={u['trained_only']}")
def test_the_plain_and_the_fast_update_step_with_one_gradient(tiny_model_dir, monkeypatch, use, cudnn, bf16, tolerance):
    from policy import load_model
    monkeypatch.setitem(fast.update.FAST_UPDATE, "cuda", {**use, "cudnn": cudnn})
    model, _ = load_model(tiny_model_dir, "cuda")
    samples = search_rows()
    plain = update_gradient(model, samples, micro_batch_size=3, fast=False, bf16=bf16)
    assert plain.norm() > 0 and relative_difference(plain, full_forward_gradient(model, samples)) < tolerance
    for mb in (1, 3, 8):
        assert relative_difference(update_gradient(model, samples, micro_batch_size=mb, bf16=bf16), plain) < tolerance


def test_auto_reads_the_gpus_free_memory(tiny_model_dir, capsys):
    from policy import load_model
    free, where = micro_batch.free_bytes("cuda")
    assert where == "the GPU's free memory"
    assert free == pytest.approx(torch.cuda.mem_get_info()[0], rel=0.05)
    block = torch.empty(2 ** 30, dtype=torch.uint8, device="cuda")  # 1 GiB taken: 1 GiB less free
    assert micro_batch.free_bytes("cuda")[0] == pytest.approx(free - 2 ** 30, rel=0.05)
    del block
    model, _ = load_model(tiny_model_dir, "cuda")
    rows = micro_batch.auto_micro_batch(model, "cuda", 256)
    printed = capsys.readouterr().out
    assert rows in (1, 2, 4, 8, 16, 32) and f"micro-batch {rows} rows (auto: " in printed and "GiB free" in printed


def close(a, b, rel=1e-4, abs_=1e-6):
    """Log lines equal, floats within the tolerance."""
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= max(rel * max(abs(a), abs(b)), abs_)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k], rel, abs_) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y, rel, abs_) for x, y in zip(a, b))
    return a == b


def test_resume_on_a_gpu_continues_as_the_uninterrupted_run(tmp_path, answering_model_dir, monkeypatch):
    from transformers import AutoModelForCausalLM
    trains = ("--steps", "3", "--num-generations", "4", "--beta", "0.04", "--save-every", "1")
    full, flags = cuda_run(tmp_path, answering_model_dir, "full", *trains)
    train.main(flags)
    crashed, flags = cuda_run(tmp_path, answering_model_dir, "crashed", *trains)
    with crash_at(monkeypatch, 3), pytest.raises(SystemExit, match="stopped"):
        train.main(flags)
    history = train.main(["--resume", crashed])
    assert [h["step"] for h in history] == [0, 1, 2, 3] and all(h["grad_norm"] > 0 for h in history[1:])
    got, want = strip_times(os.path.join(crashed, "log.jsonl")), strip_times(os.path.join(full, "log.jsonl"))
    assert close(got, want), (got, want)
    rollouts = [open(os.path.join(run, "rollouts", "step_3.jsonl")).read() for run in (crashed, full)]
    assert rollouts[0] == rollouts[1]  # the same tokens sampled after the resume
    a = AutoModelForCausalLM.from_pretrained(os.path.join(full, "checkpoint")).state_dict()
    b = AutoModelForCausalLM.from_pretrained(os.path.join(crashed, "checkpoint")).state_dict()
    assert all(torch.allclose(a[k], b[k], rtol=1e-5, atol=1e-7) for k in a)
