"""Compare the advantage estimators of a paper on one seed, one data stream and one budget.

    python tools/compare.py --env search  --out runs/cmp-search  -- --steps 30 --eval-every 10
    python tools/compare.py --env sokoban --out runs/cmp-sokoban --jobs 2 -- --steps 24 --num-generations 4
    python tools/compare.py --env search  --out runs/cmp-search  --report-only
    python tools/compare.py --env sokoban --out runs/seeds --seeds 0 1 2 -- --steps 60   # OUT/ALGO-sSEED

--env search runs the three estimators of the MT-GRPO paper (Zeng et al. 2025, arXiv 2505.11821v1),
whose training curves and results table set GRPO-OR (outcome reward only) against GRPO-MR (turn
and outcome reward merged) and MT-GRPO (turn-level advantages): tool execution rate, exact match
and total reward against steps. --env sokoban and --env planpath set AT-GRPO's agent- and
turn-wise groups with tree sampling (Zhao et al. 2025, arXiv 2510.11062v1) against standard GRPO
grouping (one group of trajectories per level). Each algorithm runs `train.py --algo A --out OUT/A` with the flags after
`--`, identical for all. A run that already reached --steps is kept, one with a checkpoint is
resumed (`train.py --resume`), so a comparison can span sessions; --steps may grow between calls.
With --seeds each algorithm runs once per seed (OUT/ALGO-sSEED, `--seed SEED`), and the report
gives the mean over seeds with the lowest and highest in brackets, and the plot a band.
OUT/results.md gets the table, OUT/compare.png the curves (matplotlib: requirements-plot.txt).
"""
import argparse
import ctypes
import dataclasses
import os
import shlex
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the project root: python tools/compare.py

import config
import estimators
import tasks
from machinery.cli import one_line
from machinery.records import read_json, read_jsonl
from tools import output

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # train.py is there
# runs that are an algorithm with flags of their own: the paper's single-agent baseline and per-role policies
VARIANTS = {"grpo-solo": ("grpo", ["--single-agent"]), "at-roles": ("at", ["--policy", "per-role"])}
NAMES = {e.name: e.label for e in estimators.TABLE} | {"grpo-solo": "GRPO one agent", "at-roles": "AT-GRPO per-role"}
# each task's runs: its own order (task.Task.order, Plan-Path adds the paper's two variants), else its
# kind's paper's estimators, baselines first (the table's order)
PAPER = {"tool": "MT-GRPO", "game": "AT-GRPO"}
ORDER = {n: t.order or estimators.names(t.kind, paper=PAPER[t.kind]) for n, t in tasks.TASKS.items()}
# the signal meter (train.signal), the first thing to look at when a run does not learn
SIGNAL = [("groups", "groups per step"), ("zero_adv_groups", "zero-advantage groups (no gradient)")]
NOTE = {"tool": "Training metrics are means over the G sampled rollouts of a step; the evaluation is "
                "greedy, on the first --eval-n test questions.",
        "game": "Training metrics are not like for like: AT-GRPO's episodes continue from the best of "
                   "K candidates at every agent and turn, GRPO's are K independent trajectories. "
                   "Compare the greedy evaluation (one episode per held-out level)."}
MAY_DIFFER = {"algo", "out", "resume", "overwrite", "steps"}  # steps: a run may be extended


# ---------------------------------------------------------------- runs: plan, then execute
def read_log(run):
    """The run's log records (a last line cut by a kill is skipped, as --resume does); a line
    that is not a log record is a ValueError naming it."""
    path = os.path.join(run, "log.jsonl")
    return read_jsonl(path, {"step": int}, log_problem, cut_end=True, empty=True) if os.path.exists(path) else []


NUMBERS = {k for t in tasks.TASKS.values() for k, _ in (*t.table, *((p, p) for p in t.plot))}


def log_problem(line):
    """What is wrong with a log line for the report, or None: the values it averages and plots
    (timings t_*, the metrics of the tables and plots) must be numbers, EACH's strings 0s and 1s."""
    for k, v in line.items():
        if k in ("eval_" + t.each for t in tasks.TASKS.values()):
            if not (isinstance(v, str) and set(v) <= {"0", "1"}):
                return f"'{k}' must be a string of 0s and 1s"
        elif (k.startswith("t_") or k.removeprefix("eval_") in NUMBERS) and (
                isinstance(v, bool) or not isinstance(v, (int, float))):
            return f"'{k}' must be a number, got {type(v).__name__}"
    return None


def read_args(run):
    """The run's args.json: an object that names at least its env and algo."""
    return read_json(os.path.join(run, "args.json"), {"env": str, "algo": str})


def plan(run, want, restart=False):
    """'done', 'resume', 'fresh' or 'kept' for the run folder `run` and the requested config.Args
    `want`. 'kept': the folder holds a log or rollouts but no checkpoint to resume from (deleted to
    save disk, say); it is left as it is unless `restart` (--restart) lets a fresh run replace it.
    A folder is reused only if it was run with the same flags (all but algo, out and steps)."""
    log = read_log(run)
    done = bool(log) and log[-1]["step"] >= want.steps
    ckpt = any(os.path.exists(os.path.join(run, c, "trainer_state.pt"))
               for c in ("checkpoint", "checkpoint.old"))  # where machinery.checkpoint.load_checkpoint looks
    if not (done or ckpt) or not os.path.exists(os.path.join(run, "args.json")):
        kept = log or os.path.isdir(os.path.join(run, "rollouts"))
        return "kept" if kept and not restart else "fresh"
    saved, default = read_args(run), config.Args()
    for k, v in dataclasses.asdict(want).items():
        old = saved.get(k, getattr(default, k))  # a flag newer than the run: it ran with the default
        if k not in MAY_DIFFER and old != v:
            raise SystemExit(f"{run} was run with {k} {old!r}, you asked {v!r}: "
                             "use another --out or the same flags")
    return "done" if done else "resume"


def command(env, algo, run, flags, state):
    """The train.py command of one run; a fresh run starts over what a run killed before its
    first checkpoint left in its folder."""
    where = ["--resume", run] if state == "resume" else ["--out", run, "--overwrite"]
    return [sys.executable, os.path.join(ROOT, "train.py"), "--env", env, "--algo", algo, *where, *flags]


def die_with_parent():
    """In the child, before train.py starts (Linux): SIGTERM it when tools/compare.py ends, however it
    ends, so a killed tools/compare.py leaves no train.py writing a run folder."""
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: Ctrl-C still reaches the whole process group
        pass


def execute(cmd, out_file, threads, echo):
    """Run one train.py; its output goes to out_file (appended) and, if echo, to the terminal."""
    env = {**os.environ, **({"OMP_NUM_THREADS": str(threads)} if threads else {})}
    t0 = time.time()
    with open(out_file, "ab") as f:
        f.write(f"$ {shlex.join(cmd)}\n".encode())
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                                preexec_fn=die_with_parent)
        for chunk in iter(lambda: proc.stdout.read1(4096), b""):
            f.write(chunk)
            f.flush()  # `tail -f OUT/ALGO.out` follows a run
            if echo:
                sys.stdout.buffer.write(chunk)
                sys.stdout.flush()
    return proc.wait(), time.time() - t0


def run_folders(out, algo, seeds):
    """{seed: run folder} of one algorithm: OUT/ALGO, or OUT/ALGO-sSEED per seed."""
    return {s: os.path.join(out, f"{algo}-s{s}") for s in seeds} if seeds else {None: os.path.join(out, algo)}


def check_envs(env, out, algos, seeds):
    """A run folder of another task is refused: its report would carry this --env's title and
    rows. Folders without args.json (not run yet) pass; a damaged one is a ValueError."""
    for name in algos:
        for run in run_folders(out, name, seeds).values():
            if os.path.exists(os.path.join(run, "args.json")):
                theirs = read_args(run)["env"]
                if theirs != env:
                    fix = f"give --env {theirs}" if theirs in ORDER else f"move it out of {out}"
                    raise SystemExit(f"{run} is a run of --env {theirs!r} (its args.json), not {env}: {fix}, "
                                     "or another --out")


def check_outputs(out):
    """OUT and the report written in it (results.md, compare.png), checked before any run: a
    report that cannot be written is not found out after hours of training."""
    output.check(out, "--out", fix="give another --out", folder=True)
    for name in ("results.md", "compare.png"):
        output.check(os.path.join(out, name), "--out:", fix="move it away or give another --out")


def check_runs(runs):
    """The folder and the OUT/NAME.out of each run about to train, before the first starts."""
    for run in runs:
        output.check(run, "--out:", fix="move it away or give another --out", folder=True)
        output.check(run + ".out", "--out:", fix="move it away or give another --out")


def run_all(env, out, flags, jobs, algos, seeds, restart=False):
    """Check every run folder first (a mismatch stops before any compute), then run the rest.
    A folder with a log but no checkpoint is reported and left as it is (plan: 'kept')."""
    for bad in ("--algo", "--out", "--resume", "--env") + (("--seed",) if seeds else ()):
        if any(f == bad or f.startswith(bad + "=") for f in flags):
            raise SystemExit(f"{bad} is set by tools/compare.py; give --env, --out and --seeds before the --")
    todo = []
    for name in algos:
        algo, own = VARIANTS.get(name, (name, []))
        for seed, run in run_folders(out, name, seeds).items():
            mine = flags + own + (["--seed", str(seed)] if seeds else [])
            state = plan(run, config.parse_args(["--env", env, *mine, "--algo", algo, "--out", run]), restart)
            if state == "kept":
                last = (read_log(run) or [{"step": 0}])[-1]["step"]
                print(f"{os.path.basename(run):>10}: {run} has a log to step {last} but no checkpoint: delete it "
                      "or give --restart (which starts that run over); left as it is")
                continue
            print(f"{os.path.basename(run):>10}: {state}")
            if state != "done":
                todo.append((os.path.basename(run), command(env, algo, run, mine, state)))
    check_runs([os.path.join(out, name) for name, _ in todo])  # run_folders' paths
    os.makedirs(out, exist_ok=True)
    threads = max(1, (os.cpu_count() or 1) // jobs) if jobs > 1 else 0
    if jobs > 1 and todo:
        print(f"{len(todo)} runs, {jobs} at a time, {threads} threads each; output in {out}/ALGO.out")

    def one(item):
        name, cmd = item
        print(f"{name:>10}: {shlex.join(cmd)}", flush=True)
        code, seconds = execute(cmd, os.path.join(out, name + ".out"), threads, echo=jobs == 1)
        result = "finished" if code == 0 else f"FAILED (exit {code})"
        print(f"{name:>10}: {result} after {duration(seconds)}", flush=True)
        return code
    with ThreadPoolExecutor(jobs) as pool:
        return [a for (a, _), code in zip(todo, pool.map(one, todo)) if code]


# ---------------------------------------------------------------- report: table and curves
def duration(seconds):
    m, s = divmod(round(seconds), 60)
    return f"{m} min {s} s" if m else f"{s} s"


def summary(run, keys):
    """First and last greedy evaluation, the training mean over the last third of the steps, the
    summed train + eval time of every session (model loading not included), the command."""
    log = read_log(run)
    evals = [l for l in log if any(k.startswith("eval_") for k in l)]
    steps = [l for l in log if "t_update" in l]
    last = steps[-max(1, len(steps) // 3):] if steps else []
    first, final = (last[0]["step"], last[-1]["step"]) if last else (0, 0)
    span = "" if not last else f" step {final}" if first == final else f" steps {first}–{final}"
    seconds = sum(l.get(k, 0.0) for l in log for k in ("t_generate", "t_reference", "t_update", "t_eval"))
    return {"evals": evals[:1] + evals[1:][-1:],
            "span": span,
            "train": {k: float(np.mean([l[k] for l in last])) for k in keys if last and k in last[0]},
            "last_step": log[-1]["step"] if log else "—", "time": duration(seconds),
            "command": f"`{train_command(run)}`" if os.path.exists(os.path.join(run, "args.json")) else "not run"}


def train_command(run):
    """The train.py command of a run folder: the flags of its args.json that are not defaults."""
    saved = read_args(run)
    default = dataclasses.asdict(config.parse_args(["--env", saved["env"], "--algo", saved["algo"]]))
    flags = [x for k, v in saved.items() if k not in ("resume", "overwrite") and v != default.get(k)
             for x in ("--" + k.replace("_", "-"), str(v).lower() if isinstance(v, bool) else str(v))]
    return "python train.py " + shlex.join(["--env", saved["env"], "--algo", saved["algo"], *flags])


def table(head, rows):
    return [f"| {' | '.join(map(str, r))} |" for r in [head, ["---"] * len(head), *rows]]


def over_seeds(values):
    """One table cell: the value, or with several seeds their mean (lowest–highest); — if none."""
    values = [v for v in values if v is not None]
    if len(values) <= 1:
        return f"{values[0]:.3f}" if values else "—"
    return f"{np.mean(values):.3f} ({min(values):.3f}–{max(values):.3f})"


# the differences given with intervals, from the per-question (per-level) 0/1 string each evaluation logs


def paired_difference(a, b, resamples=2000, seed=0):
    """Mean of a - b over (seed, question) pairs of per-question 0/1 strings (one per seed, the
    same questions in the same order), with a 95 % percentile bootstrap interval: each resample
    draws the seeds and the questions with replacement (the same questions for every seed)."""
    d = np.array([[int(x) - int(y) for x, y in zip(sa, sb)] for sa, sb in zip(a, b)], dtype=float)
    rng = np.random.default_rng(seed)
    S, Q = d.shape
    means = [d[rng.integers(S, size=S)][:, rng.integers(Q, size=Q)].mean() for _ in range(resamples)]
    low, high = np.percentile(means, [2.5, 97.5])
    return float(d.mean()), float(low), float(high)


def intervals(env, runs, algos):
    """Table rows for the task's pairs (task.Task.pairs), over the seeds whose runs of both setups logged
    its `each` string at their last evaluation (a seed not yet run, or run before it existed, is left out), when
    those cover the same questions (levels); the last column says how many seeds were paired."""
    each = {a: [r["evals"][-1].get("eval_" + tasks.TASKS[env].each) if r["evals"] else None for r in runs[a]] for a in algos}
    rows = []
    for a, b in tasks.TASKS[env].pairs:
        pairs = [(x, y) for x, y in zip(each.get(a, []), each.get(b, [])) if x and y]
        if pairs and len({len(x) for pair in pairs for x in pair}) == 1:
            mean, low, high = paired_difference(*zip(*pairs))
            rows.append([f"{NAMES[a]} − {NAMES[b]}", f"{mean:+.3f}", f"{low:+.3f} to {high:+.3f}",
                         f"{len(pairs)} × {len(pairs[0][0])}"])
    return rows


def report(env, out, algos=None, seeds=()):
    """OUT/results.md (also printed): greedy evaluations, training means, each run's command and time."""
    task = tasks.TASKS[env]
    rows, algos = list(task.table), algos or ORDER[env]
    keys = [k for k, _ in rows + SIGNAL]
    runs = {a: [summary(r, keys) for r in run_folders(out, a, seeds).values()] for a in algos}
    n = f" ({len(seeds)} seed{'s' * (len(seeds) > 1)})" if seeds else ""
    evals = [(a, i) for a in algos for i in range(max(len(r["evals"]) for r in runs[a]))]  # (algo, 0: first, 1: last eval)
    step = lambda a, i: "/".join(sorted({str(r["evals"][i]["step"]) for r in runs[a] if len(r["evals"]) > i}))
    ran = [a for a in algos if any(r["evals"] or r["train"] for r in runs[a])] or algos  # the title names these
    lines = [f"# {' vs '.join(NAMES[a] for a in ran)} ({env}){n}", ""]
    lines += table(["greedy eval on test", *(f"{NAMES[a]} step {step(a, i)}" for a, i in evals)],
                   [[label, *(over_seeds([r["evals"][i].get("eval_" + k) for r in runs[a] if len(r["evals"]) > i])
                              for a, i in evals)] for k, label in rows])
    lines += [""] + table(["training mean (sampled), last third", *(NAMES[a] + runs[a][0]["span"] for a in algos)],
                          [[label, *(over_seeds([r["train"].get(k) for r in runs[a]]) for a in algos)]
                           for k, label in rows + SIGNAL])
    lines += ["", "Rates are fractions of the maximum; rewards are in reward units. A zero-advantage group "
                  "(all its rewards equal, or one sample) gives no gradient." +
              (" With several seeds: mean (lowest–highest)." if seeds else "")]
    pairs = intervals(env, runs, algos)
    if pairs:
        what, items = ("exact match" if task.kind == "tool" else "success"), task.item + "s"
        lines += [""] + table([f"{what} at the last evaluation", "difference", "95 % interval",
                               f"seeds × {items}"], pairs)
        lines += ["", f"Paired by seed and {items[:-1]}; the interval is a percentile bootstrap that resamples "
                      f"the seeds and the {items} (2,000 resamples). An interval that contains 0 does not "
                      "separate the two."]
    lines += ["", NOTE[task.kind], ""] + table(
        ["run", "last step", "train + eval time", "command"],
        [[NAMES[a] + ("" if s is None else f" seed {s}"), r["last_step"], r["time"], r["command"]]
         for a in algos for s, r in zip(run_folders(out, a, seeds), runs[a])])
    text = "\n".join(lines) + "\n"
    output.write_text(os.path.join(out, "results.md"), text)
    print("\n" + text)
    plot(env, out, algos, seeds)


def by_step(logs, key):
    """[(step, [value of each log])] for the steps where every log has `key`."""
    found = [{l["step"]: l[key] for l in log if key in l} for log in logs if log]
    common = sorted(set.intersection(*(set(f) for f in found))) if found else []
    return [(s, [f[s] for f in found]) for s in common]


def moving_average(values, width=5):
    return [float(np.mean(values[max(0, i - width + 1):i + 1])) for i in range(len(values))]


def plot(env, out, algos, seeds=()):
    """OUT/compare.png: one panel per metric, x = step; per algorithm the greedy evaluations
    (markers; with seeds their mean and a band from the lowest to the highest) and the sampled
    training metric (thin line, trailing mean over 5 steps, mean over seeds)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("pip install -r requirements-plot.txt for the plots")
        return
    keys = [*tasks.TASKS[env].plot, "zero_adv_groups"]
    algos = [a for a in algos if any(read_log(r) for r in run_folders(out, a, seeds).values())]
    fig, axes = plt.subplots(1, len(keys), figsize=(5 * len(keys), 4), squeeze=False)
    for i, a in enumerate(algos):
        logs, color = [read_log(r) for r in run_folders(out, a, seeds).values()], f"C{i}"
        for ax, k in zip(axes[0], keys):
            ev, tr = by_step(logs, "eval_" + k), by_step(logs, k)
            if ev:
                steps, values = zip(*ev)
                ax.plot(steps, [np.mean(v) for v in values], "o-", color=color, label=f"{NAMES[a]} greedy eval")
                if len(logs) > 1:
                    ax.fill_between(steps, [min(v) for v in values], [max(v) for v in values], color=color, alpha=0.2)
            if tr:
                ax.plot([s for s, _ in tr], moving_average([np.mean(v) for _, v in tr]), "-", lw=0.8,
                        alpha=0.6, color=color, label=f"{NAMES[a]} training (5-step mean)")
    for ax, k in zip(axes[0], keys):
        ax.set(title=k, xlabel="step")
        if k.endswith(("success", "rate", "groups")):  # rates on one 0-1 scale, so a gap of one level looks its size
            ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    fig.suptitle(f"{' vs '.join(NAMES[a] for a in algos)} ({env}), against training steps")
    fig.legend(*axes[0][0].get_legend_handles_labels(), loc="lower center", ncol=len(algos), fontsize=8)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    fig.savefig(os.path.join(out, "compare.png"), dpi=100)
    plt.close(fig)
    print(f"plots: {os.path.join(out, 'compare.png')}")


@one_line
def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    flags = argv[argv.index("--") + 1:] if "--" in argv else []
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        usage=f"tools/compare.py --env {{{','.join(sorted(ORDER))}}} --out DIR [--jobs N] [--seeds S ...] [--algos A ...] "
              "[--restart] [--report-only] [-- TRAIN_FLAGS...]")
    p.add_argument("--env", choices=sorted(ORDER), required=True)
    p.add_argument("--out", required=True, help="one run folder per algorithm, results.md, compare.png")
    p.add_argument("--jobs", type=int, default=1, help=(
        "algorithms run at once (default 1). Parallel runs share the CPU cores: each gets "
        "OMP_NUM_THREADS = cores // jobs, and its output goes only to OUT/ALGO.out"))
    p.add_argument("--report-only", action="store_true", help="run nothing; report on the run folders as they are")
    p.add_argument("--seeds", type=int, nargs="+", default=[], help="one run per seed: OUT/ALGO-sSEED")
    p.add_argument("--algos", nargs="+", help="only these algorithms (default: all of the paper's; any --algo "
                   "of the env, estimators.py)")
    p.add_argument("--restart", action="store_true", help="start over a run folder that has a log but no "
                   "checkpoint to resume from (its log and rollouts are deleted); without it such a folder is kept")
    args, extra = p.parse_known_args(argv[:len(argv) - len(flags) - ("--" in argv)])
    if extra:
        p.error(f"unrecognized arguments: {' '.join(extra)} (train.py's flags go after --)")
    algos, allowed = args.algos or ORDER[args.env], (*ORDER[args.env], *(
        a for a in estimators.names(tasks.TASKS[args.env].kind) if a not in ORDER[args.env]))  # the field's too, when named
    if set(algos) - set(allowed):
        p.error(f"--algos: choose from {' '.join(allowed)} for --env {args.env}")
    if args.report_only and not any(os.path.exists(os.path.join(r, "log.jsonl")) for a in algos
                                    for r in run_folders(args.out, a, args.seeds).values()):
        raise SystemExit(f"{args.out}: no run logs of {', '.join(algos)} there; give the --out of an earlier "
                         "tools/compare.py (and its --seeds)")
    check_outputs(args.out)
    try:
        check_envs(args.env, args.out, algos, args.seeds)
        failed = [] if args.report_only else run_all(args.env, args.out, flags, max(1, args.jobs), algos, args.seeds,
                                                     args.restart)
        report(args.env, args.out, algos, args.seeds)
    except ValueError as e:  # a damaged log or args.json
        raise SystemExit(f"{e}; fix or delete that run folder") from None
    if failed:
        raise SystemExit(f"failed: {', '.join(failed)} (see {args.out}/NAME.out); the same command resumes")


if __name__ == "__main__":
    main()
