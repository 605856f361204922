"""Watch a run while it trains: TensorBoard, Weights & Biases or Trackio (--report-to, TRL's flag).

    python train.py --report-to tensorboard          then: tensorboard --logdir runs
    python train.py --report-to wandb,trackio        a list, as TRL's --report_to; all: every one installed

OUT/log.jsonl stays the run's record: each line is written there first, and the trackers follow
the log (follow). Every field of a line goes to each tracker at the line's step, named by its
section (tag): eval/ (eval_*), time/ (t_*, tokens_per_s), train/ (the rest); numbers as curves,
text (exact_match_each) as text. The run's flags go as the tracker's config. At each evaluation
step, one group of that step's rollouts goes as a table (rollouts.group_table, the group
tools/show.py shows: the prompt's end, each turn, rewards and advantages).

The run folder keeps each tracker's place in OUT/trackers.json: the run's id (W&B's run id, in
Trackio's run name) and the last step each tracker took. --resume opens the same tracker run
(same W&B id, same OUT/tensorboard, same Trackio run) and gives it only the steps after its last
one: first the log's lines it has not had (a tracker added at --resume, or one switched off by an
error, catches up), then the new steps. So no step is written twice: the steps a crash makes
--resume repeat keep the values the tracker had first (on a CPU, --resume repeats them exactly).
A SIGKILL is the exception: W&B and Trackio write in the background, and what they had not
written is lost though trackers.json counts it as sent (docs/training.md has a measurement).
TensorBoard flushes at every step, and its resumed writer drops what lies past the last step
recorded (purge_step).

A tracker that raises (no key, full disk, its own bug) costs one warning line and is switched
off; training and the log go on. A tracker package that is not installed is refused before
anything starts (parse). Nothing needs the network: W&B runs offline unless an API key or
WANDB_MODE says otherwise (sync later: wandb sync OUT/wandb/offline-run-*), Trackio writes its
local store ($TRACKIO_DIR, by default ~/.cache/huggingface/trackio), TensorBoard OUT/tensorboard.
"""
import contextlib
import html
import importlib.util
import io
import json
import netrc
import os
import re
import secrets
import sys

from tqdm import tqdm

from machinery import checkpoint, rollout_files
from machinery.records import read_json

INSTALL = "pip install -r requirements-trackers.txt -c requirements.txt"
PROJECT = "turn-rl"  # the W&B (unless WANDB_PROJECT says otherwise) and Trackio project
STATE = "trackers.json"


# ---------------------------------------------------------------- the flag
def parse(text):
    """--report-to's value (none, all, or names joined by commas) as the names it means, joined by
    commas; ValueError in one line for an unknown name or a package that is not installed."""
    names = [n.strip() for n in text.lower().split(",") if n.strip() not in ("", "none")]
    if names == ["all"]:  # TRL's meaning: every tracker whose package is installed
        return ",".join(n for n in TRACKERS if importlib.util.find_spec(n)) or "none"
    for name in names:
        if name not in TRACKERS:
            raise ValueError(f"--report-to {text}: {name!r} is not a tracker; give none, all (alone), or one "
                             f"or more of {', '.join(TRACKERS)} (tensorboard,wandb)")
        if importlib.util.find_spec(name) is None:
            raise ValueError(f"--report-to {name}: the {name} package is not installed; install the trackers "
                             f"with: .venv/bin/{INSTALL}")
    return ",".join(dict.fromkeys(names)) or "none"


def tag(key):
    """A log field's name in the trackers: its section, then the field."""
    if key.startswith("eval_"):
        return "eval/" + key[len("eval_"):]
    return ("time/" if key.startswith("t_") or key == "tokens_per_s" else "train/") + key


def values(line):
    """{tag: value} of a log line: numbers stay numbers, text stays text, a list or dict becomes
    its JSON text; None (nothing measured) is left out."""
    return {tag(k): v if isinstance(v, (int, float, str)) and not isinstance(v, bool) else json.dumps(v)
            for k, v in line.items() if k != "step" and v is not None}


# ---------------------------------------------------------------- the run folder's place
def read_state(out):
    """OUT/trackers.json as data: {"id": 8 lowercase letters or digits, "sent": {tracker: last
    step}}; SystemExit in one line when it is malformed; a new state when there is none."""
    path = os.path.join(out, STATE)
    if not os.path.exists(path):
        return {"id": secrets.token_hex(4), "sent": {}}
    try:
        state = read_json(path, {"id": str, "sent": dict})
        if not re.fullmatch(r"[a-z0-9]{8}", state["id"]) or not all(
                n in TRACKERS and isinstance(s, int) and not isinstance(s, bool) for n, s in state["sent"].items()):
            raise ValueError(f"{path}: 'id' must be 8 lowercase letters or digits and 'sent' map "
                             f"{', '.join(TRACKERS)} to step numbers")
    except ValueError as e:
        raise SystemExit(f"{e}; fix it, or delete it to start new tracker runs (the steps are sent again)") from None
    return state


# ---------------------------------------------------------------- following the log
class Follow:
    """The trackers of --report-to, fed the log's lines (send) after the log has them."""

    def __init__(self, args, flags, history):
        self.out, self.env, self.algo = args.out, args.env, args.algo
        self.state, self.live = read_state(args.out), {}
        for name in [] if args.report_to == "none" else args.report_to.split(","):
            self.attempt(name, "open", lambda: self.open(name, flags))
        for line in history:  # what the log holds and a tracker has not had
            self.send(line)

    def open(self, name, flags):
        self.live[name] = TRACKERS[name](self.out, self.state["id"], flags, self.state["sent"].get(name))

    def attempt(self, name, what, act):
        """act(), or one warning line and the tracker switched off; True if it went."""
        try:
            act()
            return True
        except (Exception, SystemExit) as e:
            self.live.pop(name, None)
            tqdm.write(f"warning: {name} failed to {what} ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
                       + ("" if what == "close" else f"; it is switched off, training and {os.path.join(self.out, 'log.jsonl')}"
                          f" go on (--resume {self.out} later gives it the steps it missed)"), file=sys.stderr)
            return False

    def send(self, line):
        step, sent = line["step"], self.state["sent"]
        todo = [n for n in self.live if step > sent.get(n, -1)]
        if not todo:
            return
        tagged, table = values(line), self.episodes(step) if "t_eval" in line else None
        for name in todo:
            if self.attempt(name, f"log step {step}", lambda: self.live[name].log(step, tagged, table)):
                sent[name] = step
        checkpoint.save_json(self.state, self.out, STATE)

    def episodes(self, step):
        """(columns, data) of the group tools/show.py shows for this step, or None (step 0: no
        rollouts; an unreadable file: a note)."""
        path = os.path.join(self.out, "rollouts", f"step_{step}.jsonl")
        if not os.path.exists(path):
            return None
        try:
            groups = rollout_files.groups_of(rollout_files.read_rollouts(path))
        except SystemExit as e:
            tqdm.write(f"note: no episode table at step {step}: {e}", file=sys.stderr)
            return None
        return rollout_files.group_table(groups[rollout_files.pick_group(groups)][1], self.env, self.algo)

    def close(self):
        for name in list(self.live):
            self.attempt(name, "close", self.live[name].close)


# ---------------------------------------------------------------- the trackers
class TensorBoard:
    """OUT/tensorboard: scalars, text, the flags as hyperparameters (the HPARAMS tab)."""

    def __init__(self, out, run_id, flags, last):
        from torch.utils.tensorboard import SummaryWriter
        from torch.utils.tensorboard.summary import hparams
        # purge_step: events past the last step taken (a kill after writing them) are dropped
        self.writer = SummaryWriter(os.path.join(out, "tensorboard"), purge_step=None if last is None else last + 1)
        if last is None:  # a new run: its flags, once
            for summary in hparams(flags, {}):
                self.writer.file_writer.add_summary(summary)
        print(f"TensorBoard: watch it with: tensorboard --logdir {os.path.join(out, 'tensorboard')}")

    def log(self, step, values, table):
        for key, value in values.items():
            if isinstance(value, str):
                self.writer.add_text(key, value, step)
            else:
                self.writer.add_scalar(key, value, step)
        if table:
            self.writer.add_text("eval/episodes", markdown(*table), step)
        self.writer.flush()

    def close(self):
        self.writer.close()


class WandB:
    """Offline unless an API key (WANDB_API_KEY, or `wandb login`'s ~/.netrc) or WANDB_MODE is set."""

    def __init__(self, out, run_id, flags, last):
        import wandb
        self.wandb, mode = wandb, os.environ.get("WANDB_MODE") or ("online" if has_wandb_key() else "offline")
        self.run = wandb.init(project=os.environ.get("WANDB_PROJECT", PROJECT), id=run_id, resume="allow",
                              name=os.path.basename(os.path.abspath(out)), dir=out, mode=mode,
                              config=flags if last is None else None,  # a resumed run keeps its first config
                              settings=wandb.Settings(silent=True, console="off", disable_git=True))
        print(f"W&B: run {run_id}, " + {"offline": f"offline; upload it later with: wandb sync "
                                                   f"{os.path.join(out, 'wandb')}/offline-run-*",
                                        "online": f"online: {self.run.url}"}.get(mode, mode))

    def log(self, step, values, table):
        episodes = {"eval/episodes": self.wandb.Table(*table)} if table else {}
        self.run.log({**values, **episodes}, step=step)

    def close(self):
        self.run.finish()


class Trackio:
    """The local store ($TRACKIO_DIR or ~/.cache/huggingface/trackio), project turn-rl, one run
    per run folder: its name is the folder's and the run's id."""

    def __init__(self, out, run_id, flags, last):
        import trackio
        self.trackio, name = trackio, f"{os.path.basename(os.path.abspath(out))}-{run_id}"
        with contextlib.redirect_stdout(io.StringIO()):  # its banner would break the progress bar
            self.run = trackio.init(project=PROJECT, name=name, config=flags, resume="allow", embed=False,
                                    auto_log_cpu=False, auto_log_gpu=False)
        print(f"Trackio: run {name}; watch it with: trackio show --project {PROJECT}")

    def log(self, step, values, table):
        episodes = {"eval/episodes": self.trackio.Table(columns=table[0], data=[[escape(c) for c in row] for row in
                                                                                  table[1]])} if table else {}
        self.run.log({**values, **episodes}, step=step)

    def close(self):
        with contextlib.redirect_stdout(io.StringIO()):
            self.trackio.finish()  # the run trackio.init made its current one


TRACKERS = {"tensorboard": TensorBoard, "wandb": WandB, "trackio": Trackio}  # each named as its package


def has_wandb_key():
    """An API key in the environment or in ~/.netrc (where `wandb login` keeps it)."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    host = re.sub(r"^https?://", "", os.environ.get("WANDB_BASE_URL", "api.wandb.ai")).split("/")[0]
    try:
        return netrc.netrc(os.environ.get("NETRC")).authenticators(host) is not None
    except (OSError, netrc.NetrcParseError):
        return False


def escape(cell):
    """A table cell as Markdown text: tags (<search>) shown, not read as HTML; one line."""
    return html.escape(str(cell)).replace("|", "&#124;").replace("\n", " ⏎ ")


def markdown(columns, data):
    """A Markdown table (TensorBoard's text)."""
    return "\n".join(["| " + " | ".join(map(escape, columns)) + " |", "|" + "---|" * len(columns)]
                     + ["| " + " | ".join(map(escape, row)) + " |" for row in data])
