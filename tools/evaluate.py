"""Evaluate a policy, greedy by default, on held-out questions or levels.

    python tools/evaluate.py                                        # bundled model, search, 64 test questions
    python tools/evaluate.py --model runs/mt/checkpoint --json      # a trained run (its args.json is read)
    python tools/evaluate.py --model Qwen/Qwen2.5-0.5B --n 500      # a hub model (needs the network)
    python tools/evaluate.py --env sokoban --model runs/at/checkpoint
    python tools/evaluate.py --env planpath --model runs/planpath/checkpoint
    python tools/evaluate.py --env calc --model runs/calc/checkpoint

Any task of tasks.py. Search: the MT-GRPO paper's Table 5 metrics (Zeng et al. 2025, arXiv 2505.11821v1),
each as a rate (fraction of its maximum, averaged over episodes) and in reward units; another tool-use
task: each reward of its rubric, the same way. Sokoban (AT-GRPO):
success rate, moves played, and the box-goal distance left; Plan-Path the same with the moves
to the goal left. Any train.py flag that shapes the
task (--size, --reverse-steps, --max-turns, --one-shot, --test-questions ...) may follow; for a
run's checkpoint the run's own settings are the defaults.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the project root: python tools/evaluate.py

import rewards
import config
import policy
import tasks
import train
from policy import BUNDLED, pick_device
from machinery.cli import one_line
from machinery.records import read_json

# Table 5 of the MT-GRPO paper: metric -> reward component of its rubric (its maximum: rewards.MAXIMA)
TABLE_5 = {"tool_execution": "tool_execution", "answer_in_results": "answer_in_results",
           "format": "xml_format", "exact_match": "exact_match"}
GAME_UNITS = {"success": "rate", "best_constant_success": "rate", "board_ablation_success": "rate",
              "distinct_answers": "count", "moves": "per level", "turns": "per level"}
# run settings that define the task (read from a checkpoint's args.json)
TASK_KEYS = ("env", "policy", "prefill", "one_shot", "top_k", "max_words", "retriever_url", "corpus", "max_calls",
             "train_questions", "test_questions", "max_completion_length", *(o.name for o in tasks.options()))


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", default=BUNDLED, help="checkpoint folder, hub id or the bundled model")
    p.add_argument("--env", choices=list(tasks.TASKS), help=f"default: the run's, else {config.Args.env}")
    p.add_argument("--split", choices=["test", "train"], default="test")
    p.add_argument("--n", type=int, default=64, help="questions or levels")
    p.add_argument("--chunk", type=int, default=16, help="questions or levels played together (one batch per turn)")
    p.add_argument("--sample", action="store_true", help="sample at --temperature instead of greedy")
    p.add_argument("--json", action="store_true", help="end with one JSON line of the metrics")
    ours, rest = p.parse_known_args(argv)
    if ours.n < 1 or ours.chunk < 1:
        p.error("--n and --chunk must be at least 1")
    return ours, run_args(ours, rest)


def run_args(ours, rest):
    """config.Args for the task: a checkpoint's args.json first, then the flags given here."""
    saved_path = os.path.join(os.path.dirname(os.path.abspath(ours.model)), "args.json")
    saved = {}
    if os.path.isdir(ours.model) and os.path.exists(saved_path):
        try:  # its task flags then go through train.parse_args like any flag
            saved = read_json(saved_path)
        except (OSError, ValueError) as e:
            raise SystemExit(f"{e}; tools/evaluate.py reads the task flags of the checkpoint's run there") from None
    if ours.env and saved.get("env", ours.env) != ours.env:
        saved = {}  # a run of the other task: its prefill, sizes, questions do not apply here
    argv = [f"--{k.replace('_', '-')}={saved[k]}" for k in TASK_KEYS if k in saved]
    if ours.env:
        argv.append(f"--env={ours.env}")
    return config.parse_args(argv + rest + ["--model", ours.model, "--eval-n", str(ours.n)])


def load_policy(path, args, device):
    """({"policy": model}, tok), or {role: model} for a per-role checkpoint (one subfolder per role)."""
    roles = tasks.TASKS[args.env].roles
    per_role = bool(roles) and all(os.path.isdir(os.path.join(path, r)) for r in roles)
    if args.policy == "per-role" and not per_role:
        raise SystemExit(f"{path}: a per-role checkpoint has {' and '.join(r + '/' for r in roles)} subfolders")
    teams = [n for n, t in tasks.TASKS.items() if t.roles and all(os.path.isdir(os.path.join(path, r)) for r in t.roles)]
    if args.policy != "per-role" and teams:
        raise SystemExit(f"{path} holds one model per role (a per-role run of --env {' or '.join(teams)}): "
                         "evaluate it with the run's --env")
    roles = roles if per_role else ("policy",)
    return policy.load_models(roles, path, device, subfolders=True)


def evaluation_set(args, split):
    """(data, items): test or train questions / level seeds."""
    data, pool, test = train.load_task(args)
    items = test if split == "test" else list(pool[:args.eval_n])
    if len(items) < args.eval_n:
        print(f"note: the {split} split has only {len(items)} items", file=sys.stderr)
    return data, items


def evaluate(models, tok, args, split, chunk, greedy=True):
    """Mean metrics over the split, `chunk` episodes played together, under a progress bar."""
    data, items = evaluation_set(args, split)
    if items:  # the longest prompt, with its new tokens, must fit
        train.check_prompts(next(iter(models.values())), tok, data, [], items, args)
    metrics = train.evaluate_policy(models, tok, items, data, args, greedy, chunk, desc=f"evaluate {args.env}")
    return {k: v for k, v in metrics.items() if not isinstance(v, str)}, len(items)  # not exact_match_each


def report(metrics, args, ours, n):
    """Print the metrics for people; return them as one flat dict for --json."""
    task = tasks.TASKS[args.env]
    head = f"{args.env}, {ours.split} split, {n} {task.item}s, " \
           f"{'sampled' if ours.sample else 'greedy'}, model {args.model}"
    print("\n" + head)
    out = {"env": args.env, "split": ours.split, "n": n, "model": args.model, "greedy": not ours.sample}
    if task.kind == "tool":
        maxima = task.rubric.maxima
        print(f"{'metric (rate: fraction of the maximum)':<40}{'rate':>8}")
        for name, key in (TABLE_5 if task.rubric is rewards.MT_GRPO else {k: k for k in maxima}).items():
            out[name], out[name + "_reward"] = metrics[key] / maxima[key], metrics[key]
            print(f"{name:<40}{out[name]:>8.3f}")
        out["reward"] = metrics["reward"]
        print(f"{f'total reward (reward units, max {sum(maxima.values()):g})':<40}{metrics['reward']:>8.3f}")
    else:
        labels = dict(task.table)  # every number the task's evaluation logs, with its unit or its label
        for name, value in metrics.items():
            out[name] = value
            print(f"{f'{name} ({GAME_UNITS.get(name) or labels.get(name, name)})':<40}{value:>8.3f}")
    return out


@one_line
def main(argv=None):
    ours, args = parse_args(sys.argv[1:] if argv is None else argv)
    models, tok = load_policy(args.model, args, pick_device(args.device))
    t0 = time.time()
    metrics, n = evaluate(models, tok, args, ours.split, ours.chunk, greedy=not ours.sample)
    out = report(metrics, args, ours, n)
    out["seconds"] = round(time.time() - t0, 1)
    print(f"({out['seconds']} s)")
    if ours.json:
        print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
