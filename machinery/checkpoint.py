"""The run folder: one writer at a time, checkpoints so that `train.py --resume OUT` continues a
run exactly, and the rollouts of every step, for tools/show.py.

One writer: the process that writes a run holds an OS advisory lock (flock; Linux and macOS) on
the run folder itself, through an open descriptor of the folder. Every user, cache setting and
path to the folder (a symlink, a bind mount) reaches the same inode, so they all meet the same
lock; no file in the folder is opened for it (a `.lock` link in a folder copied from someone
else is never followed), and the kernel releases it when the process ends, even on a kill. A run
also checks, before each of its writes, that its folder is still the one it locked (still_ours):
if someone deleted or replaced it, the run stops with one line and writes nothing more, so a new
run on that path never shares a folder with it. On Linux every write goes through the held folder
itself (inside: /proc/self/fd/N/...), so not even a replacement between that check and the write
can receive a byte of this run. The folder is held by the path the run was given, not by where a
link led: if the link is re-pointed, or the folder moved, the run stops and says where its folder
is now.

OUT/checkpoint is one Hugging Face folder (a shared policy; `from_pretrained` loads it) or one
subfolder per role (per-role policies), plus trainer_state.pt: the step, the optimizers, and the
torch and data RNG states. It is written to checkpoint.tmp and then renamed, so a crash while
saving leaves the previous checkpoint whole; a resume falls back to that previous checkpoint
when the newer one is missing or unreadable. trainer_state.pt is read with weights_only=True:
tensors and plain types only, so a state file from someone else cannot run code.
"""
import contextlib
import errno
import json
import os
import re
import shutil

import torch

from machinery.records import read_jsonl

try:
    import fcntl
    import resource
except ImportError:  # Windows: no fcntl, so runs there are not locked (and no ulimit -f)
    fcntl = resource = None

HELD = {}  # run folder (its path as given, made absolute; links not resolved) -> the folder held open and locked


# ---------------------------------------------------------------- one writer per run folder
def claim(out, make=True):
    """Lock OUT for this process, or stop with one line naming the process that holds it (a second
    train.py on the same --out, or a --resume of a run that is still training). make: also make
    the folder if it is not there; without it a folder not made yet is left unlocked (train.py
    takes the lock with make=False before loading anything, and again, making the folder, at its
    first write)."""
    key = os.path.abspath(out)  # the path, not where a link leads now: a re-pointed link is caught by still_ours
    if fcntl is None or key in HELD or not (make or os.path.isdir(out)):
        return
    try:
        os.makedirs(out, exist_ok=True)
        fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY)  # held: its inode is not reused
    except OSError as e:
        raise SystemExit(f"cannot write to the run folder {out}: {e.strerror}; choose another --out") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        who = holder(fd)
        os.close(fd)
        raise SystemExit(f"{out} is in use by {who}: wait for that run to end or stop it; "
                         "two processes writing one run would mix their logs and checkpoints") from None
    HELD[key] = fd


def holder(fd):
    """Which process holds the lock on the folder open as fd: its pid from Linux's /proc/locks, as
    this process's namespace sees it, or "another process" where that cannot be read."""
    folder = os.fstat(fd)
    inode = f"{os.major(folder.st_dev):02x}:{os.minor(folder.st_dev):02x}:{folder.st_ino}"
    try:
        with open("/proc/locks") as f:
            pids = [fields[4] for fields in map(str.split, f)
                    if fields[1:2] == ["FLOCK"] and fields[5:6] == [inode] and fields[4].isdigit()]
    except OSError:
        pids = []
    return f"another process (pid {pids[0]})" if pids else "another process"


def still_ours(out):
    """Stop with one line if OUT is no longer the folder this process claimed (deleted, or
    deleted and made again): writing on would recreate it or write into another run."""
    held = HELD.get(os.path.abspath(out))
    if held is None:
        return
    ours = os.fstat(held)
    try:
        folder = os.stat(out)
        same = (folder.st_dev, folder.st_ino) == (ours.st_dev, ours.st_ino) and ours.st_nlink > 0
    except OSError:
        same = False
    if same:
        return
    now = held_path(held) if ours.st_nlink > 0 else None
    if now is None:
        raise SystemExit(f"\nthe run folder {out} was deleted or replaced while this run trained: stopped "  # \n: after the bar's text
                         "without writing more (its lock is released; start a new run there if you wish)")
    raise SystemExit(f"\nthe run folder {out} now leads to another folder (moved, or a link re-pointed); this run's "
                     f"folder is {now}: stopped without writing more; continue it with python train.py --resume {now}")


def held_path(fd):
    """Where the folder held open as fd is now (Linux: /proc/self/fd/N), or None where that cannot be read."""
    try:
        path = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None
    return path if os.path.isdir(path) else None


def inside(out, *names):
    """Where to write OUT/names: once still_ours has passed, the path through the folder this
    process holds open, where Linux gives one (/proc/self/fd/N is the held folder itself, whatever
    stands at its path now). A write there lands in this run's folder, or fails if the folder was
    deleted, and never reaches a folder made again at the same path, even one made between the
    check and the write. Elsewhere (macOS, Windows, a folder not claimed) the plain path, and
    still_ours alone guards the writes."""
    still_ours(out)
    fd = HELD.get(os.path.abspath(out))
    if fd is not None and os.path.isdir(f"/proc/self/fd/{fd}"):
        return os.path.join(f"/proc/self/fd/{fd}", *names)
    return os.path.join(out, *names)


def save_args(args, out):
    """Write OUT/args.json (a dict of the run's flags) for --resume to read."""
    save_json(args, out, "args.json", indent=1)


def save_json(record, out, name, indent=None):
    """Write OUT/name (args.json, trackers.json) to a new file that then replaces it, so a kill
    mid-write never leaves a half-written one for --resume to read."""
    path = inside(out, name)
    try:
        with open(path + ".tmp", "w") as f:
            json.dump(record, f, indent=indent)
        os.replace(path + ".tmp", path)
    except OSError:  # a full disk: no half-written name.tmp left behind
        with contextlib.suppress(OSError):
            os.remove(path + ".tmp")
        raise


def start_over(out):
    """Delete what an earlier run left in OUT (its log, rollouts, checkpoints, trackers): a new run
    must not mix its lines or rollouts with another's. config.check_out allows it only with
    --overwrite."""
    for name in ("log.jsonl", "rollouts", "checkpoint", "checkpoint.old", "checkpoint.tmp", "trackers.json",
                 "tensorboard", "wandb"):  # and its trackers' place and files (machinery/trackers.py)
        path = inside(out, name)
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.exists(path):
            os.remove(path)


def save_checkpoint(models, tok, optimizers, step, rng, out):
    """Write OUT/checkpoint atomically (see the module docstring). The previous checkpoint is
    kept as checkpoint.old until the new one is in place; what a crash left of an older
    checkpoint.old (even half deleted) is removed first."""
    final, tmp, old = (inside(out, n) for n in ("checkpoint", "checkpoint.tmp", "checkpoint.old"))
    shutil.rmtree(tmp, ignore_errors=True)
    made = False  # once checkpoint.tmp is made, its absence means someone else deleted it
    try:
        os.makedirs(tmp)
        made = True
        for name, model in models.items():
            folder = tmp if name == "policy" else os.path.join(tmp, name)
            model.save_pretrained(folder)
            tok.save_pretrained(folder)
        torch.save({"step": step, "optimizers": {n: o.state_dict() for n, o in optimizers.items()},
                    "torch_rng": torch.get_rng_state(), "data_rng": rng.getstate(),  # a GPU samples with its own:
                    "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else []},
                   os.path.join(tmp, "trainer_state.pt"))
    except Exception as e:  # disk full, file too large, read-only: torch raises RuntimeError for these
        still_ours(out)  # or the folder was replaced while it was written: that, in one line
        cause, fix = why_not_saved(e, tmp, made, out)
        shutil.rmtree(tmp, ignore_errors=True)
        then = (f"The previous checkpoint is kept: {fix}, then python train.py --resume {out}"
                if os.path.exists(os.path.join(final, "trainer_state.pt")) else
                f"No checkpoint was saved before: {fix}, then start again with --overwrite")
        raise SystemExit(f"could not save the checkpoint of step {step} in {out}: {cause}. {then}") from None
    if os.path.exists(final):
        shutil.rmtree(old, ignore_errors=True)
        os.replace(final, old)
    os.replace(tmp, final)
    shutil.rmtree(old, ignore_errors=True)


def why_not_saved(error, tmp, made, out):
    """(cause, fix) of a failed save, in words. torch's own message ("unexpected pos", "file write
    failed") names no cause, so the folder is looked at while checkpoint.tmp is still there."""
    if made and not os.path.isdir(tmp):
        return ("checkpoint.tmp was deleted while it was written: another program works in this folder",
                "stop it (a second train.py, a clean-up script)")
    codes, chained = set(), error
    while chained is not None:  # the OSError may sit under torch's error; safetensors (Rust) says
        codes.add(getattr(chained, "errno", None))  # "... (os error 27)" in its own error's text
        codes.update(int(n) for n in re.findall(r"os error (\d+)", str(chained)))
        chained = chained.__cause__ or chained.__context__
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0] if resource else None
    limited = limit is not None and limit != resource.RLIM_INFINITY
    biggest = max((os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(tmp) for f in fs), default=0)
    if errno.EFBIG in codes or (limited and biggest >= limit):
        return (f"a file reached the file-size limit of {limit} bytes (ulimit -f)",
                "raise it (ulimit -f unlimited)")
    free = shutil.disk_usage(out).free
    if (codes & {errno.ENOSPC, errno.EDQUOT} or free < 2 ** 26) and no_inodes(out):
        return (f"the disk has no inode left: no file can be made there ({free / 1e9:.2f} GB free)",
                "delete files there (many small ones free the most)")
    if codes & {errno.ENOSPC, errno.EDQUOT} or free < 2 ** 26:  # under 64 MB left: the save used it up
        return f"the disk is full ({free / 1e9:.2f} GB free there)", "make room"
    if errno.EROFS in codes:
        return "the disk is read-only", "make it writable"
    first = str(error).splitlines()[0] if str(error) else type(error).__name__
    return f"{first} ({free / 1e9:.1f} GB free there)", "fix that"


def no_inodes(out):
    """Whether the file system under OUT has no inode left for a new file (os.statvfs)."""
    try:
        stats = os.statvfs(out)
        return stats.f_files > 0 and stats.f_favail == 0
    except (OSError, AttributeError):
        return False


def load_checkpoint(out, load):
    """(folder, models, tokenizer, trainer state) of the newest checkpoint of OUT that reads
    whole: checkpoint, else checkpoint.old (a crash between the two renames, or a corrupt or
    truncated file in the newer one). load(folder) -> (models, tokenizer)."""
    problems = []
    for folder in (os.path.join(out, "checkpoint"), os.path.join(out, "checkpoint.old")):
        if not os.path.exists(os.path.join(folder, "trainer_state.pt")):
            continue
        try:
            state = torch.load(os.path.join(folder, "trainer_state.pt"), weights_only=True)
            check_state(state)
            models, tok = load(folder)
        except (Exception, SystemExit) as e:  # unreadable: try the previous checkpoint
            problems.append(f"{folder}: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
            continue
        if problems:
            print(f"skipped an unreadable checkpoint ({problems[0]}); resuming from {folder}")
        return folder, models, tok, state
    raise SystemExit(f"--resume {out}: no readable checkpoint in that folder"
                     + (f" ({'; '.join(problems)})" if problems else " yet (the first save is at step --save-every)"))


def check_state(state):
    """trainer_state.pt holds what save_checkpoint writes, or ValueError says what is wrong."""
    if not isinstance(state, dict) or not {"step", "optimizers", "torch_rng", "data_rng"} <= set(state):
        raise ValueError("trainer_state.pt lacks step, optimizers, torch_rng or data_rng")
    if not isinstance(state["step"], int) or not isinstance(state["optimizers"], dict):
        raise ValueError("trainer_state.pt: step must be an int and optimizers a dict")


def restore(state, optimizers, rng):
    """Load the optimizer and RNG states saved with a checkpoint; returns its step."""
    try:
        for name, optimizer in optimizers.items():
            optimizer.load_state_dict(state["optimizers"][name])
        torch.set_rng_state(state["torch_rng"])
        if state.get("cuda_rng") and torch.cuda.is_available():  # saved on a GPU (none before this key)
            torch.cuda.set_rng_state_all(state["cuda_rng"][:torch.cuda.device_count()])
        rng.setstate(state["data_rng"])
    except (KeyError, ValueError, TypeError, RuntimeError) as e:
        raise SystemExit(f"the checkpoint's trainer_state.pt does not fit this run ({type(e).__name__}: "
                         f"{e}); resume with the run's own settings, or start a new run") from None
    return state["step"]


def truncate_log(path, step):
    """Keep the log lines up to the checkpoint's step; return them as records, and the last step
    the log held before (-1 if none). A last line that a crash cut short is dropped; a line that
    is not a log record stops the resume with one line naming it. The log is rewritten to a new
    file that then replaces it."""
    try:
        records = read_jsonl(path, {"step": int}, cut_end=True, empty=True) if os.path.exists(path) else []
    except ValueError as e:
        raise SystemExit(f"{e}: the run's log is damaged; fix or delete that line, then resume") from None
    logged = max((r["step"] for r in records), default=-1)
    records = [r for r in records if r["step"] <= step]
    lost = sorted(set(range(1, step + 1)) - {r["step"] for r in records})
    if lost:
        print(f"note: {path} has no line for step {', '.join(map(str, lost))} (lost in a crash: a power "
              f"cut can zero a file's last block); the checkpoint of step {step} is whole and the run "
              "goes on from it, and the log keeps that gap")
    write = inside(os.path.dirname(path), os.path.basename(path))
    with open(write + ".tmp", "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in records)
    os.replace(write + ".tmp", write)
    return records, logged


# ---------------------------------------------------------------- rollouts (every step, for tools/show.py)
def save_rollouts(samples, tok, path):
    """OUT/rollouts/step_N.jsonl: one JSON line per sample for tools/show.py: its group, role and per-turn rewards, and per
    token its text, mask (1 = trained), advantage and turn (1..K; 0 = prompt or environment)."""
    out = os.path.dirname(os.path.dirname(path))  # OUT/rollouts/step_N.jsonl
    os.makedirs(inside(out, "rollouts"), exist_ok=True)
    with open(inside(out, "rollouts", os.path.basename(path)), "w") as f:
        for s in samples:
            f.write(json.dumps({"group": s.group_name, "role": s.role, "rewards": s.rewards,
                                "tokens": token_pieces(tok, s.ids), "mask": s.mask,
                                "adv": s.adv, "turn": s.turn}) + "\n")


def save_greedy(envs, exact_match_each, out, step):
    """OUT/rollouts/eval_step_N.jsonl: the greedy evaluation's search episodes, one a line: the
    question, its answers, the episode's messages (env.completion) and its exact match (0/1, the
    character of exact_match_each); nothing for the games."""
    if envs:
        os.makedirs(inside(out, "rollouts"), exist_ok=True)
        with open(inside(out, "rollouts", f"eval_step_{step}.jsonl"), "w") as f:
            f.writelines(json.dumps({"question": e.question, "answers": e.answers, "completion": e.completion,
                                     "exact_match": int(c)}) + "\n" for e, c in zip(envs, exact_match_each))


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
