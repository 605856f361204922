"""Kill a training run again and again (SIGKILL, like a power cut) and resume it each time;
check that it ends with the same log and bit-identical weights as a run never interrupted.

    .venv/bin/python scripts/kill_resume.py --kills 20

A tiny random model (2 layers, the bundled tokenizer) trains on the search task with a
checkpoint after every step, so kills land in every phase. In turn, a kill comes at a random
time, while a checkpoint is being written (checkpoint.tmp exists), early (start-up, model
loading, log truncation), while checkpoints rotate (checkpoint.old exists), and while the log is
rewritten on resume (log.jsonl.tmp exists); the last two windows are short, and the script says
when it did not see them.
"""
import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, HERE)
from policy import bundled_model_dir  # noqa: E402


def tiny_model(folder):
    tok = AutoTokenizer.from_pretrained(bundled_model_dir())
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True,
                         eos_token_id=tok.eos_token_id, bos_token_id=tok.bos_token_id)
    LlamaForCausalLM(config).save_pretrained(folder)
    tok.save_pretrained(folder)


def flags(model, steps):
    return ["--model", model, "--steps", str(steps), "--batch-size", "1", "--num-generations", "2",
            "--max-completion-length", "8", "--eval-n", "2", "--eval-every", "3", "--save-every", "1",
            "--micro-batch-size", "2", "--learning-rate", "1e-3", "--warmup-steps", "1", "--bf16", "false"]


def start(argv, err):
    """train.py in a new process; its errors go to the file err (a pipe nobody reads would fill
    up with progress bars and stop the run)."""
    return subprocess.Popen([sys.executable, os.path.join(HERE, "train.py"), *argv],
                            stdout=subprocess.DEVNULL, stderr=err, cwd=HERE)


WAIT_FOR = {"tmp": "checkpoint.tmp", "old": "checkpoint.old", "truncation": "log.jsonl.tmp"}


def kill_when(proc, run, how, rng):
    """SIGKILL proc after a random time ("random", "early": during start-up, model loading and
    log truncation), or as soon as a file of a checkpoint save or log rewrite appears (giving
    up after 6 s and killing then). Returns what was seen at the kill, or None if the run
    finished first."""
    wait = {"random": rng.uniform(1.0, 10.0), "early": rng.uniform(0.3, 4.0)}.get(how, 6.0)
    deadline, seen = time.time() + wait, how if how in ("random", "early") else how + " (not seen)"
    while proc.poll() is None and time.time() < deadline:
        if how in WAIT_FOR and os.path.exists(os.path.join(run, WAIT_FOR[how])):
            seen = how
            break
        time.sleep(0.001)
    if proc.poll() is not None:
        return None
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return seen


def log_lines(run):
    lines = [json.loads(l) for l in open(os.path.join(run, "log.jsonl"))]
    return [{k: v for k, v in l.items() if not k.startswith("t_") and k != "tokens_per_s"} for l in lines]


def weights(run):
    return AutoModelForCausalLM.from_pretrained(os.path.join(run, "checkpoint")).state_dict()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--kills", type=int, default=20)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        model, full, killed = (os.path.join(tmp, n) for n in ("model", "full", "killed"))
        tiny_model(model)
        t0 = time.time()
        err = open(os.path.join(tmp, "stderr.txt"), "w+")
        assert start(flags(model, args.steps) + ["--out", full], err).wait() == 0, "the uninterrupted run failed"
        print(f"uninterrupted run: {time.time() - t0:.0f} s", flush=True)
        kills, resumes, seen = 0, 0, []
        argv = flags(model, args.steps) + ["--out", killed]
        while True:
            err.seek(0)
            err.truncate()
            proc = start(argv, err)
            how = ("random", "tmp", "early", "old", "truncation")[kills % 5]
            what = kill_when(proc, killed, how, rng) if kills < args.kills else None
            if what is None:
                code = proc.wait()
                if code != 0:
                    err.seek(0)
                    raise SystemExit(f"a resume failed (exit {code}): {err.read()[-2000:]}")
                break
            kills += 1
            seen.append(what)
            print(f"kill {kills}: {what}; left: " + ", ".join(n for n in ("checkpoint", "checkpoint.tmp", "checkpoint.old")
                                                            if os.path.exists(os.path.join(killed, n))), flush=True)
            has_ckpt = any(os.path.exists(os.path.join(killed, c, "trainer_state.pt")) for c in ("checkpoint", "checkpoint.old"))
            argv = ["--resume", killed] if has_ckpt else flags(model, args.steps) + ["--out", killed, "--overwrite"]
            resumes += has_ckpt
        same_log = log_lines(killed) == log_lines(full)
        a, b = weights(full), weights(killed)
        same_weights = a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
        counts = {w: seen.count(w) for w in dict.fromkeys(seen)}
        print(f"{kills} kills {counts}, {resumes} resumes: identical log {same_log}, "
              f"bit-identical weights {same_weights}")
        if not (same_log and same_weights):
            raise SystemExit(1)


if __name__ == "__main__":
    main()
