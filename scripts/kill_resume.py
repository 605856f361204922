"""Kill a training run again and again (SIGKILL, like a power cut) and resume it each time;
check that it ends with the same log and bit-identical weights as a run never interrupted.

    .venv/bin/python scripts/kill_resume.py --kills 20

A tiny random model (2 layers, the bundled tokenizer) trains on the search task with a
checkpoint after every step, so kills land in every phase. In turn, a kill comes at a random
time, while a checkpoint is being written (checkpoint.tmp exists), early (start-up, model
loading, log truncation), while checkpoints rotate (checkpoint.old exists), and while the log is
rewritten on resume (log.jsonl.tmp exists); the last two windows are short, and the script says
when it did not see them.

    .venv/bin/python scripts/kill_resume.py --kills 10 --report-to all

also feeds the trackers (train.py --report-to; W&B offline, Trackio in the temporary folder) and
counts, for each, the steps its own reader finds twice and the steps it lacks after the kills.
"""
import argparse
import json
from collections import Counter
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


# What the tiny model is taught to write: answers that earn different rewards (format, tool call,
# exact match), so a group's advantages are not all 0 and every update moves the weights. A
# random model's answers all earn the same; its grad norm is 0 at every step and "bit-identical
# weights" would compare two copies of the initial model.
ANSWERS = ["<answer>Paris</answer>", "<answer>London</answer>", "<search>capital</search>",
           "Paris", "<answer>", "the"]


def teach_to_answer(folder, steps=100, seed=0):
    """Train the model saved in folder, in place, to reply to the search task's prompt with one of
    ANSWERS (Adam, lr 1e-2, the loss on the answers' tokens only), then save it back. Its sampled
    replies are then ANSWERS and variations of them: rewards differ within a group."""
    from env_search import SYSTEM_PROMPT
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    prompt = tok.apply_chat_template([{"role": "system", "content": SYSTEM_PROMPT},
                                      {"role": "user", "content": "Which article is this about?"}],
                                     add_generation_prompt=True)
    prompt = list(prompt["input_ids"] if hasattr(prompt, "keys") else prompt)
    rows = [prompt + tok(a, add_special_tokens=False)["input_ids"] for a in ANSWERS]
    width = max(map(len, rows))
    ids = torch.tensor([r + [tok.eos_token_id] * (width - len(r)) for r in rows])
    labels = torch.tensor([[-100] * len(prompt) + r[len(prompt):] + [-100] * (width - len(r)) for r in rows])
    torch.manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(steps):
        optimizer.zero_grad()
        model(input_ids=ids, labels=labels).loss.backward()
        optimizer.step()
    model.save_pretrained(folder)


def tiny_model(folder):
    """A 2-layer Llama with the bundled tokenizer, taught to answer (teach_to_answer)."""
    tok = AutoTokenizer.from_pretrained(bundled_model_dir())
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True,
                         eos_token_id=tok.eos_token_id, bos_token_id=tok.bos_token_id)
    LlamaForCausalLM(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    teach_to_answer(folder)


def flags(model, steps, report_to="none"):
    return ["--report-to", report_to, "--model", model, "--steps", str(steps), "--batch-size", "1", "--num-generations", "4", "--beta", "0.04",
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
    up after 6 s and killing then); but for "early", the time counts from the run's first log
    line. Returns what was seen at the kill, or None if the run
    finished first."""
    wait = {"random": rng.uniform(1.0, 10.0), "early": rng.uniform(0.3, 4.0)}.get(how, 6.0)
    log = os.path.join(run, "log.jsonl")
    while how != "early" and proc.poll() is None and not os.path.exists(log):
        time.sleep(0.01)  # the windows start at the first log line: trackers can take longer to start than they last
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
    p.add_argument("--report-to", default="none", help="trackers to feed too (train.py's flag); their steps are counted")
    args = p.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        model, full, killed = (os.path.join(tmp, n) for n in ("model", "full", "killed"))
        os.environ.update(TRACKIO_DIR=os.path.join(tmp, "trackio"), WANDB_MODE="offline")  # for the runs and the reading
        tiny_model(model)
        t0 = time.time()
        err = open(os.path.join(tmp, "stderr.txt"), "w+")
        assert start(flags(model, args.steps, args.report_to) + ["--out", full], err).wait() == 0, "the uninterrupted run failed"
        print(f"uninterrupted run: {time.time() - t0:.0f} s", flush=True)
        kills, resumes, seen = 0, 0, []
        argv = flags(model, args.steps, args.report_to) + ["--out", killed]
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
            argv = ["--resume", killed] if has_ckpt else flags(model, args.steps, args.report_to) + ["--out", killed, "--overwrite"]
            resumes += has_ckpt
        same_log = log_lines(killed) == log_lines(full)
        a, b = weights(full), weights(killed)
        same_weights = a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
        counts = {w: seen.count(w) for w in dict.fromkeys(seen)}
        print(f"{kills} kills {counts}, {resumes} resumes: identical log {same_log}, "
              f"bit-identical weights {same_weights}")
        reported = json.load(open(os.path.join(killed, "args.json")))["report_to"]  # "all" as train.py read it
        for name in [] if reported == "none" else reported.split(","):
            print(tracker_steps(name, killed, args.steps))
        if not (same_log and same_weights):
            raise SystemExit(1)
        check_it_trained(log_lines(full), a, AutoModelForCausalLM.from_pretrained(model).state_dict())


def tracker_steps(name, run, steps):
    """One line: the steps 0..steps a tracker holds twice and those it lacks, by its own reader
    (scripts/tracker_readers.py), counting the key each line has once: t_eval at step 0 (an
    evaluation alone), t_update at every training step."""
    from scripts.tracker_readers import READ
    counts = Counter(step for step, tag, _ in READ[name](run) if tag == ("time/t_eval" if step == 0 else "time/t_update"))
    twice = sorted(s for s, n in counts.items() if n > 1)
    missing = sorted(set(range(steps + 1)) - set(counts))
    return f"{name}: steps twice {twice or 'none'}, missing {missing or 'none'}"


def check_it_trained(lines, final, initial):
    """The comparison above means something only if the run trained: a gradient at every step and
    final weights that differ from the initial ones."""
    norms = [line["grad_norm"] for line in lines if line["step"] > 0]
    moved = max((final[k] - initial[k]).abs().max().item() for k in initial)
    print(f"grad norm > 0 at {sum(n > 0 for n in norms)} of {len(norms)} steps; largest weight change {moved:.3g}")
    if not (norms and all(n > 0 for n in norms) and moved > 0):
        raise SystemExit("the reference run did not train (a step with grad norm 0, or unchanged weights): "
                         "the identical weights above prove nothing")


if __name__ == "__main__":
    main()
