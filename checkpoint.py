"""Checkpoints of a run folder, so that `train.py --resume OUT` continues a run exactly.

OUT/checkpoint is one Hugging Face folder (a shared policy; `from_pretrained` loads it) or one
subfolder per role (per-role policies), plus trainer_state.pt: the step, the optimizers, and the
torch and data RNG states. It is written to checkpoint.tmp and then renamed, so a crash while
saving leaves the previous checkpoint whole.
"""
import json
import os
import shutil

import torch


def save_checkpoint(models, tok, optimizers, step, rng, out):
    """Write OUT/checkpoint atomically (see the module docstring)."""
    final, tmp, old = (os.path.join(out, n) for n in ("checkpoint", "checkpoint.tmp", "checkpoint.old"))
    shutil.rmtree(tmp, ignore_errors=True)
    for name, model in models.items():
        folder = tmp if name == "policy" else os.path.join(tmp, name)
        model.save_pretrained(folder)
        tok.save_pretrained(folder)
    torch.save({"step": step, "optimizers": {n: o.state_dict() for n, o in optimizers.items()},
                "torch_rng": torch.get_rng_state(), "data_rng": rng.getstate()},
               os.path.join(tmp, "trainer_state.pt"))
    if os.path.exists(final):
        os.replace(final, old)
    os.replace(tmp, final)
    shutil.rmtree(old, ignore_errors=True)


def checkpoint_dir(out):
    """The folder to resume from: checkpoint, or checkpoint.old after a crash between renames."""
    for name in ("checkpoint", "checkpoint.old"):
        if os.path.exists(os.path.join(out, name, "trainer_state.pt")):
            return os.path.join(out, name)
    raise SystemExit(f"--resume {out}: no checkpoint in that folder yet (first save is at step --save-every)")


def restore(ckpt, optimizers, rng):
    """Load the optimizer and RNG states saved with a checkpoint; returns its step."""
    state = torch.load(os.path.join(ckpt, "trainer_state.pt"), weights_only=False)
    for name, optimizer in optimizers.items():
        optimizer.load_state_dict(state["optimizers"][name])
    torch.set_rng_state(state["torch_rng"])
    rng.setstate(state["data_rng"])
    return state["step"]


def truncate_log(path, step):
    """Drop log lines written after the checkpoint we resume from."""
    lines = [l for l in open(path) if json.loads(l)["step"] <= step] if os.path.exists(path) else []
    with open(path, "w") as f:
        f.writelines(lines)
