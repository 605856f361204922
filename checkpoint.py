"""Checkpoints of a run folder, so that `train.py --resume OUT` continues a run exactly, and the
rollouts of every step, for show.py.

OUT/checkpoint is one Hugging Face folder (a shared policy; `from_pretrained` loads it) or one
subfolder per role (per-role policies), plus trainer_state.pt: the step, the optimizers, and the
torch and data RNG states. It is written to checkpoint.tmp and then renamed, so a crash while
saving leaves the previous checkpoint whole; a resume falls back to that previous checkpoint
when the newer one is missing or unreadable.
"""
import json
import os
import shutil

import torch


def save_args(args, out):
    """Write OUT/args.json (a dict of the run's flags) to a new file that then replaces it, so a
    kill mid-write never leaves a half-written one for --resume to read."""
    with open(os.path.join(out, "args.json.tmp"), "w") as f:
        json.dump(args, f, indent=1)
    os.replace(os.path.join(out, "args.json.tmp"), os.path.join(out, "args.json"))


def save_checkpoint(models, tok, optimizers, step, rng, out):
    """Write OUT/checkpoint atomically (see the module docstring). The previous checkpoint is
    kept as checkpoint.old until the new one is in place; what a crash left of an older
    checkpoint.old (even half deleted) is removed first."""
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
        shutil.rmtree(old, ignore_errors=True)
        os.replace(final, old)
    os.replace(tmp, final)
    shutil.rmtree(old, ignore_errors=True)


def load_checkpoint(out, load):
    """(folder, models, tokenizer, trainer state) of the newest checkpoint of OUT that reads
    whole: checkpoint, else checkpoint.old (a crash between the two renames, or a corrupt or
    truncated file in the newer one). load(folder) -> (models, tokenizer)."""
    problems = []
    for folder in (os.path.join(out, "checkpoint"), os.path.join(out, "checkpoint.old")):
        if not os.path.exists(os.path.join(folder, "trainer_state.pt")):
            continue
        try:
            state = torch.load(os.path.join(folder, "trainer_state.pt"), weights_only=False)
            models, tok = load(folder)
        except (Exception, SystemExit) as e:  # unreadable: try the previous checkpoint
            problems.append(f"{folder}: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
            continue
        if problems:
            print(f"skipped an unreadable checkpoint ({problems[0]}); resuming from {folder}")
        return folder, models, tok, state
    raise SystemExit(f"--resume {out}: no readable checkpoint in that folder"
                     + (f" ({'; '.join(problems)})" if problems else " yet (the first save is at step --save-every)"))


def restore(state, optimizers, rng):
    """Load the optimizer and RNG states saved with a checkpoint; returns its step."""
    for name, optimizer in optimizers.items():
        optimizer.load_state_dict(state["optimizers"][name])
    torch.set_rng_state(state["torch_rng"])
    rng.setstate(state["data_rng"])
    return state["step"]


def truncate_log(path, step):
    """Keep the log lines up to the checkpoint's step and return them as records. A line that a
    crash cut short is dropped; the log is rewritten to a new file that then replaces it."""
    records = []
    for line in open(path, encoding="utf-8") if os.path.exists(path) else []:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if record["step"] <= step:
            records.append(record)
    with open(path + ".tmp", "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in records)
    os.replace(path + ".tmp", path)
    return records


# ---------------------------------------------------------------- rollouts (every step, for show.py)
def save_rollouts(samples, tok, path):
    """OUT/rollouts/step_N.jsonl: one JSON line per sample for show.py: its group, role and per-turn rewards, and per
    token its text, mask (1 = trained), advantage and turn (1..K; 0 = prompt or environment)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        for s in samples:
            f.write(json.dumps({"group": s.group, "role": s.role, "rewards": s.rewards,
                                "tokens": token_pieces(tok, s.ids), "mask": s.mask,
                                "adv": s.adv, "turn": s.turn}) + "\n")


def token_pieces(tok, ids):
    """The text of each token. A character split over several byte-level tokens is shown on the
    last of them (the others get ""), so no token decodes to the replacement character."""
    texts, start = [], 0
    for i in range(len(ids)):
        piece = tok.decode(ids[start:i + 1])
        partial = piece.endswith("\ufffd") and i + 1 - start < 4  # UTF-8 needs at most 4 bytes
        texts.append("" if partial else piece)
        start = start if partial else i + 1
    return texts
