"""The project's GPU check: one command that checks and times the card's machine, one CUDA GPU.

    python speedlab/gpu_check.py --out DIR                   # on a CUDA machine: ~5 min on an H200, ~8 on an H100
    .venv/bin/python speedlab/gpu_check.py --tiny --out DIR  # the CPU rehearsal (the suite runs it)

The model is Qwen2.5-0.5B's published shape with random weights and the test suite's Qwen2.5-style
tokenizer (tests/qwen_style.py, from SmolLM2's tokenizer.json: --smollm, by default the bundled
model's): no hub weights. A random model's turns all earn the same rewards, so its advantages are
0 and the update would skip every row: the rewards here are the text's length (cuda_card.vary_rewards),
which differs within a group. The card's settings: 8 questions x G = 8, 256 tokens a turn, mu = 2.
Four sections, in this order, each timed and each failing on its own:

1. tests    `pytest -m cuda`: tests/test_cuda.py and the other tests marked cuda.
2. update   one train.py step's rollouts (two-turn search episodes), then the update as each variant
            runs it, side by side: the plain update (loss.policy_update) at 8, 16 and 32 rows a
            micro-batch, and the fast one (fast.update.policy_update) under each setting of its levers
            (fast.update.FAST_UPDATE). Round 0 runs every variant on the same rows, whose gradient is compared
            with the plain update's at the same micro-batch; rounds 1 and 2 drop a few tokens from every row, other counts for
            each variant, so that each meets shapes it has not met before, as every training step
            does (cuDNN's attention builds a graph per shape); a variant's time is its best of those
            two (a variant whose round 0 took over 15 s is not run again). Then the rows of half the groups set silent (A = 0), which the fast update skips.
            The fastest fast setting at the micro-batch `auto` picks becomes the fast update's on
            this device for the sections below.
3. train    train.py for 3 steps at the card's settings, the default and --plain (the checkpoint's
            save switched off): seconds per phase, the micro-batch auto chose, peak GPU memory.
4. bench    speedlab/bench.py --trl --betas 0 at that micro-batch: ours against TRL's GRPOTrainer
            (needs TRL).

Writes DIR/gpu_check.json (every number, rewritten after each section), DIR/gpu_check.md (the tables
docs/benchmarks.md cites), DIR/bench.txt, DIR/tests.txt and DIR/profile.txt (the update's ops under
torch.profiler, default and chosen setting). docs/benchmarks.md says how to carry the check to a
GPU machine with no network (speedlab/gpu_kit.sh).
"""
import argparse
import contextlib
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from types import SimpleNamespace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests"), os.path.join(ROOT, "scripts")]
import torch  # noqa: E402

import fast.update  # noqa: E402
import loss  # noqa: E402
import qwen_style  # noqa: E402
import config  # noqa: E402
import policy  # noqa: E402
import train  # noqa: E402
from machinery import checkpoint, micro_batch  # noqa: E402
from machinery.precision import bf16_ok  # noqa: E402
from qwen_shaped_smoke import CARD, SHAPES  # noqa: E402
from sample import Sample  # noqa: E402
from speedlab import bench, cuda_card  # noqa: E402

SECTIONS = ("tests", "update", "train", "bench")
CPU_DEFAULT = dict(shared_prompt=True, trained_only=False, cudnn=True)  # the fast update before the GPU was measured


def settings(tiny):
    """The card's settings (module docstring), or the rehearsal's: 2 questions x G = 2, 16 tokens, no
    one-shot example, one step, one timed round."""
    if tiny:
        return SimpleNamespace(questions=2, G=2, tokens=16, steps=1, micro_batches=(1, 2, 4), rounds=2, bench_steps=1,
                               one_shot=["--one-shot", "false"], slow=60)
    return SimpleNamespace(questions=8, G=8, tokens=256, steps=3, micro_batches=(8, 16, 32), rounds=3, bench_steps=2,
                           one_shot=[], slow=15)


def variants(sizes):
    """(name, plain?, levers, micro-batch) of the update table."""
    rows = dict(shared_prompt=False, trained_only=True, cudnn=False)
    return ([(f"plain, {m} rows", True, None, m) for m in sizes]
            + [("fast: shared prompt, cuDNN attention allowed (the CPU's)", False, CPU_DEFAULT, sizes[0]),
               ("fast: shared prompt, without cuDNN", False, {**CPU_DEFAULT, "cudnn": False}, sizes[0])]
            + [(f"fast: rows, trained positions, without cuDNN, {m} rows", False, rows, m) for m in sizes]
            + [(f"fast: rows, trained positions, cuDNN allowed, {sizes[1]} rows", False, {**rows, "cudnn": True}, sizes[1]),
               (f"fast: rows, all positions, without cuDNN, {sizes[1]} rows", False, {**rows, "trained_only": False},
                sizes[1])])


@contextlib.contextmanager
def fast_levers(device, use):
    """fast.update.FAST_UPDATE of this device set to `use` within the context."""
    kind = "cuda" if device.startswith("cuda") else "cpu"
    kept = fast.update.FAST_UPDATE[kind]
    fast.update.FAST_UPDATE[kind] = use
    try:
        yield
    finally:
        fast.update.FAST_UPDATE[kind] = kept


class Record(torch.optim.Optimizer):
    """An optimizer that keeps the gradient it is given (flattened) and moves nothing."""

    def __init__(self, params):
        super().__init__(params, {})
        self.grad = None

    def step(self, closure=None):
        self.grad = torch.cat([p.grad.flatten().float() for g in self.param_groups for p in g["params"]])


def trimmed(samples, k):
    """The rows with their last k tokens dropped: the same rows at shapes not met before."""
    return [Sample(ids=s.ids[:-k], mask=s.mask[:-k], adv=s.adv[:-k], turn=s.turn[:-k]) for s in samples] if k else samples


def silenced(samples, G):
    """Half the groups with every advantage 0 (equal rewards): the rows the fast update skips."""
    return [Sample(ids=s.ids, mask=s.mask, adv=[0.0] * len(s.adv) if (i // G) % 2 else s.adv, turn=s.turn)
            for i, s in enumerate(samples)]


def run_update(model, samples, args, plain, use, device):
    """(seconds, peak GiB, gradient) of one update of `samples` by a variant."""
    optimizer = Record(model.parameters())
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    bench.synced()
    start = time.perf_counter()
    if plain:
        loss.policy_update(model, optimizer, samples, args)
    else:
        with fast_levers(device, use):
            fast.update.policy_update(model, optimizer, samples, args)
    bench.synced()
    seconds = time.perf_counter() - start
    peak = cuda_card.gb(torch.cuda.max_memory_allocated()) if device.startswith("cuda") else None
    return seconds, peak, optimizer.grad


def card_args(path, s, device, *extra):
    sizes = ["--batch-size", str(s.questions), "--num-generations", str(s.G), "--max-completion-length", str(s.tokens)]
    return ["--model", path, *CARD, *sizes, "--device", device, "--eval-every", "0", *s.one_shot, *extra]


def update_section(path, device, s, work, folder, out):
    """The update table (module docstring, section 2); sets the fast update's levers for the rest."""
    args = config.parse_args(card_args(path, s, device, "--out", os.path.join(work, "unused"), "--max-grad-norm", "1e9"))
    models, tok = policy.load_models(("policy",), path, device)
    model = models["policy"]
    auto = micro_batch.auto_micro_batch(model, device, s.tokens)
    data, pool, _ = train.load_task(args)
    torch.manual_seed(0)
    samples, _, _ = train.tool_step(models, tok, pool[:s.questions], data, args)
    trained = sum(sum(x.mask) for x in samples)
    out["update"] = dict(rows=len(samples), trained_tokens=trained, positions=sum(len(x.ids) for x in samples),
                         auto_micro_batch=auto, bf16=args.bf16 and bf16_ok(device), variants={})
    table = variants(s.micro_batches)
    times, plain_grads = {name: [] for name, *_ in table}, {}
    for r in range(s.rounds):
        for j, (name, plain, use, m) in enumerate(table if r % 2 == 0 else table[::-1]):
            rows = trimmed(samples, 0 if r == 0 else 1 + j + r * len(table))
            row = out["update"]["variants"].setdefault(name, dict(plain=plain, levers=use, micro_batch=m))
            if r > 0 and (row.get("round_0_seconds") or 0) > s.slow:  # a variant that slow loses anyway
                times[name].append(f"not run: round 0 took over {s.slow} s")
                continue
            try:
                seconds, peak, grad = run_update(model, rows, SimpleNamespace(**{**vars(args), "micro_batch_size": m}),
                                                 plain, use, device)
            except torch.OutOfMemoryError:
                times[name].append("out of memory")
                model.zero_grad(set_to_none=True)
                gc.collect()
                torch.cuda.empty_cache()
                continue
            if r == 0:  # the gradient against the plain update's at the same micro-batch (the sums' order)
                if plain:
                    plain_grads[m] = grad
                reference = plain_grads.get(m if not use or not use["shared_prompt"] else s.micro_batches[0])
                row["gradient_vs_plain"] = ((grad - reference).norm() / reference.norm()).item() if reference is not None else None
                row["peak_gib"], row["round_0_seconds"] = peak, round(seconds, 3)
            else:
                times[name].append(seconds)
            del grad
            print(f"update round {r}: {name}: {seconds:.2f} s", flush=True)
        plain_grads.clear()  # round 0 compared the gradients; their memory is freed
    for name, seconds in times.items():
        row = out["update"]["variants"][name]
        row["seconds"] = [x if isinstance(x, str) else round(x, 3) for x in seconds]
        numbers = [x for x in seconds if not isinstance(x, str)]
        row["best"] = round(min(numbers), 3) if numbers else None
    chosen = choose(out["update"]["variants"], auto)
    out["update"]["chosen"] = chosen
    silent = silenced(samples, s.G)
    out["update"]["half_the_groups_silent"] = {
        name: round(min(run_update(model, trimmed(silent, 2 + len(table) * s.rounds + k), SimpleNamespace(
            **{**vars(args), "micro_batch_size": auto}), plain, use, device)[0] for k in (1, 2)), 3)
        for name, plain, use in (("plain", True, None), ("fast, chosen", False, chosen["levers"]))}
    profile(model, trimmed(samples, 5 + len(table) * s.rounds), args, auto, device, chosen["levers"], folder)
    fast.update.FAST_UPDATE["cuda" if device.startswith("cuda") else "cpu"] = chosen["levers"]
    print(f"update: the fast update's levers on {device} from here on: {chosen}", flush=True)


def choose(rows, auto):
    """The fastest fast setting at the micro-batch auto picks (a shared prompt's micro-batch holds one
    group, so its size does not matter); ties to the first."""
    fast = [(row["best"], name, row) for name, row in rows.items()
            if not row["plain"] and row.get("best") is not None and (row["micro_batch"] == auto or row["levers"]["shared_prompt"])]
    if not fast:
        return dict(name="none measured at auto's micro-batch", levers=fast.update.levers("cuda"), seconds=None)
    best, name, row = min(fast, key=lambda t: t[0])
    return dict(name=name, levers=row["levers"], seconds=best)


def profile(model, samples, args, m, device, chosen, folder):
    """The update's ops under torch.profiler: the CPU's setting and the chosen one."""
    activities = [torch.profiler.ProfilerActivity.CPU] + [torch.profiler.ProfilerActivity.CUDA] * device.startswith("cuda")
    key = "self_cuda_time_total" if device.startswith("cuda") else "self_cpu_time_total"
    with open(os.path.join(folder, "profile.txt"), "w") as f:
        for name, use in (("the CPU's setting", CPU_DEFAULT), ("chosen", chosen)):
            with torch.profiler.profile(activities=activities) as prof:
                run_update(model, samples, SimpleNamespace(**{**vars(args), "micro_batch_size": m}),
                           False, use, device)
            f.write(f"## {name}: {use}, {m} rows a micro-batch\n")
            f.write(prof.key_averages().table(sort_by=key, row_limit=15, max_name_column_width=60) + "\n")


def train_section(path, device, s, folder, out):
    """train.py for s.steps steps, the default and --plain: phases per step, micro-batch, peak memory."""
    out["train"] = {}
    for name, extra in (("default", []), ("plain", ["--plain", "true"])):
        if device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
        run = os.path.join(folder, f"run-{name}")
        start = time.perf_counter()
        history = train.main(card_args(path, s, device, "--steps", str(s.steps), "--out", run, *extra))
        keys = ("t_generate", "gen_tokens", "t_reference", "t_update", "tokens_per_s", "zero_adv_groups")
        row = dict(wall_seconds=round(time.perf_counter() - start, 1),
                   micro_batch=json.load(open(os.path.join(run, "args.json")))["micro_batch_size"],
                   steps=[{k: line[k] for k in keys} for line in history if "t_update" in line])
        if device.startswith("cuda"):
            row.update(peak_allocated_gib=cuda_card.gb(torch.cuda.max_memory_allocated()),
                       peak_reserved_gib=cuda_card.gb(torch.cuda.max_memory_reserved()))
        out["train"][name] = row
        print(f"train {name}: {row}", flush=True)
        gc.collect()
        if device.startswith("cuda"):
            torch.cuda.empty_cache()


def bench_section(path, device, s, folder, out):
    """speedlab/bench.py --trl --betas 0 at the micro-batch auto picks (both sides)."""
    m = min(out.get("update", {}).get("auto_micro_batch") or 2, s.questions * s.G)  # TRL: at most the step's rows
    argv = ["--trl", "--json", "--betas", "0", "--model", path, "--device", device, "--batch-size", str(s.questions),
            "--num-generations", str(s.G), "--max-completion-length", str(s.tokens), "--steps", str(s.bench_steps),
            "--warmup", "1", "--micro-batch-size", str(m)]
    with contextlib.redirect_stdout(cuda_card.Tee()) as text:
        bench.main(argv)
    with open(os.path.join(folder, "bench.txt"), "w") as f:
        f.write("speedlab/bench.py " + " ".join(argv) + "\n" + text.getvalue())
    out["bench_micro_batch"] = m
    out["bench"] = json.loads([line for line in text.getvalue().splitlines() if line.startswith("{")][-1])


def tests_section(folder, out, tiny):
    """pytest -m cuda in a fresh process; the summary line and the count of each outcome."""
    command = [sys.executable, "-m", "pytest", "-q", "-m", "cuda", "-p", "no:cacheprovider", "tests", "speedlab/tests"]
    if tiny:  # the rehearsal: a collection only (no GPU here: every cuda test would be skipped)
        command.append("--collect-only")
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    with open(os.path.join(folder, "tests.txt"), "w") as f:
        f.write(" ".join(command) + "\n" + run.stdout + run.stderr)
    lines = run.stdout.strip().splitlines()
    out["tests"] = dict(returncode=run.returncode, summary=lines[-1] if lines else run.stderr[-300:])
    if run.returncode not in (0, 5):  # 5: nothing collected
        raise RuntimeError(f"pytest -m cuda: {out['tests']['summary']}")


def markdown(out):
    """The tables of gpu_check.md."""
    lines = [f"# GPU check: {out['device']}", "",
             f"torch {out['torch']}, transformers {out['transformers']}; {out['settings']}; code {out['commit']}", ""]
    if "tests" in out:
        lines += [f"**CUDA tests** (`pytest -m cuda`): {out['tests']['summary']}", ""]
    if "update" in out:
        u = out["update"]
        lines += [f"**The update** of one step's rollouts ({u['rows']} rows, {u['trained_tokens']} trained tokens of "
                  f"{u['positions']}; `auto` picks {u['auto_micro_batch']} rows), seconds (best of 2 at new shapes), "
                  "peak memory, gradient against the plain update's (relative norm of the difference):", "",
                  "| variant | seconds | vs plain at auto | peak GiB | gradient |", "|---|---|---|---|---|"]
        plain = u["variants"].get(f"plain, {u['auto_micro_batch']} rows", {}).get("best")
        for name, row in u["variants"].items():
            best = row.get("best")
            ratio = f"{plain / best:.2f}×" if plain and best else "–"
            grad = row.get("gradient_vs_plain")
            lines.append(f"| {name} | {best if best is not None else row.get('seconds')} | {ratio} | {row.get('peak_gib') or '–'} "
                         f"| {'–' if grad is None else f'{grad:.1e}'} |")
        lines += ["", f"Chosen for this device: {u['chosen']['name']} ({u['chosen']['levers']}).",
                  f"Half the groups silent (A = 0), at {u['auto_micro_batch']} rows: {u.get('half_the_groups_silent')}", ""]
    if "train" in out:
        lines += ["**train.py**, steps 1–3 (seconds):", "",
                  "| run | micro-batch | generate | reference + old | update | tokens/s | peak GiB (allocated) |",
                  "|---|---|---|---|---|---|---|"]
        for name, row in out["train"].items():
            steps = row["steps"]
            cell = lambda k: " / ".join(f"{s[k]:.1f}" if k != "tokens_per_s" else f"{s[k]:,.0f}" for s in steps)  # noqa: E731
            lines.append(f"| {name} | {row['micro_batch']} | {cell('t_generate')} | {cell('t_reference')} | "
                         f"{cell('t_update')} | {cell('tokens_per_s')} | {row.get('peak_allocated_gib') or '–'} |")
        lines.append("")
    if "bench" in out:
        b = out["bench"]["by_beta"]["0"]
        lines += [f"**Against TRL** (`speedlab/bench.py --trl --betas 0`, both sides at {out['bench_micro_batch']} rows "
                  "a micro-batch), ours / TRL's tokens per second: " + ", ".join(
                      f"{p} {b[p + '_speedup']:.2f}×" for p in ("generate", "update", "step")) + "", ""]
    errors = {k: v for k, v in out.items() if k.endswith("_error")}
    if errors:
        lines += ["**Failed sections:**", ""] + [f"- {k}: {v}" for k, v in errors.items()] + [""]
    lines.append("Seconds per section: " + ", ".join(f"{k} {v:.0f}" for k, v in out["seconds"].items()))
    return "\n".join(lines) + "\n"


def commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              timeout=10).stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--tiny", action="store_true", help="a CPU rehearsal: a tiny model, 2 x 2 rows, 16 tokens, 1 step (74 s on 2 idle cores, over 300 s at load 5: rehearse alone)")
    p.add_argument("--smollm", default=None, help="folder with SmolLM2's tokenizer.json (default: the bundled model's)")
    p.add_argument("--out", required=True, help="folder for gpu_check.json, gpu_check.md and the logs")
    p.add_argument("--skip", nargs="*", default=[], choices=SECTIONS)
    args = p.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() and not args.tiny else "cpu"
    s = settings(args.tiny)
    cuda_card.vary_rewards()
    smollm = args.smollm or __import__("policy").bundled_model_dir()
    import transformers
    out = dict(device=bench.instruction_set(device), torch=torch.__version__, transformers=transformers.__version__,
               commit=commit(), settings=dict(questions=s.questions, G=s.G, tokens=s.tokens, steps=s.steps),
               rewards="text length (cuda_card.vary_rewards)", seconds={})
    os.makedirs(args.out, exist_ok=True)
    checkpoint.save_checkpoint = lambda *a, **k: None  # the train section times steps, not saves
    with tempfile.TemporaryDirectory() as work:
        path = os.path.join(work, "model")
        qwen_style.save_model(path, "base", smollm, max_position_embeddings=32768,
                              **(cuda_card.TINY if args.tiny else SHAPES["0.5B"]))
        run = dict(tests=lambda: tests_section(args.out, out, args.tiny),
                   update=lambda: update_section(path, device, s, work, args.out, out),
                   train=lambda: train_section(path, device, s, work, out),
                   bench=lambda: bench_section(path, device, s, args.out, out))
        for name in SECTIONS:
            if name in args.skip:
                continue
            cuda_card.run_section(name, run[name], out, device)
            with open(os.path.join(args.out, "gpu_check.json"), "w") as f:
                json.dump(out, f, indent=1)
            with open(os.path.join(args.out, "gpu_check.md"), "w") as f:
                f.write(markdown(out))
    print(markdown(out))
    return out


if __name__ == "__main__":
    main()
