"""Watch a run while it trains: TensorBoard, Weights & Biases or Trackio (--report-to, TRL's flag).

    python train.py --report-to tensorboard          then: tensorboard --logdir runs
    python train.py --report-to wandb,trackio        a list, as TRL's --report_to; all: every one installed

OUT/log.jsonl stays the run's record: each line is written there first, and the trackers follow
the log (follow). Every field of a line goes to each tracker at the line's step, named by its
section (tag): eval/ (eval_*), time/ (t_*, tokens_per_s), train/ (the rest); numbers as curves,
text (exact_match_each) as text. The run's flags go as the tracker's config. At each evaluation
step, one group of that step's rollouts goes as a table (rollout_files.group_table, the group
tools/show.py shows: the prompt's end, each turn, rewards and advantages), and for search the
greedy evaluation's episodes (rollout_files.greedy_table: which test question was answered).

The run folder keeps each tracker's place in OUT/trackers.json: the run's id (W&B's run id, in
Trackio's run name) and the last step each tracker took. --resume opens the same tracker run
(same W&B id, same OUT/tensorboard, same Trackio run) and gives it only the steps after its last
one: first the log's lines it has not had (a tracker added at --resume, or one switched off by an
error, catches up), then the new steps. So no step is written twice: the steps a crash makes
--resume repeat keep the values the tracker had first (on a CPU, --resume repeats them exactly).
A SIGKILL loses what W&B and Trackio, which write in the background, had not yet written, though
trackers.json counts it as sent: so --resume asks each one's own store for the last step it holds
(held: W&B's offline files or its server, Trackio's local database) and sends the steps after it
again. TensorBoard flushes at every step, and its resumed writer drops what lies past the last
step recorded (purge_step).

A tracker that raises (no key, full disk, its own bug) costs one warning line and is switched
off; training and the log go on. A tracker's background thread that raises costs one line too
(thread_failed), not its traceback. A tracker package that is not installed is refused before
anything starts (parse). Nothing needs the network: W&B runs offline unless an API key or
WANDB_MODE says otherwise (sync later: wandb sync OUT/wandb/offline-run-*), Trackio writes its
local store ($TRACKIO_DIR, by default ~/.cache/huggingface/trackio), TensorBoard OUT/tensorboard.
"""
import contextlib
import glob
import html
import importlib.util
import io
import json
import netrc
import os
import re
import secrets
import sqlite3
import sys
import threading

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
    given = [n.strip() for n in text.lower().split(",") if n.strip()]
    if "none" in given and set(given) != {"none"}:  # as transformers refuses it
        raise ValueError(f"--report-to {text}: none means no tracker; give it alone, or name the trackers")
    names = [n for n in given if n != "none"]
    if names == ["all"]:  # TRL's meaning: every tracker whose package is installed
        found = [n for n in TRACKERS if importlib.util.find_spec(n)]
        if not found:
            raise ValueError(f"--report-to all: no tracker package is installed ({', '.join(TRACKERS)}); install "
                             f"them with: .venv/bin/{INSTALL}, or give none")
        return ",".join(found)
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
def read_state(out, logged=None):
    """OUT/trackers.json as data: {"id": 8 lowercase letters or digits, "sent": {tracker: last
    step}, "folder": the run folder's identity}; SystemExit in one line when it is malformed or
    counts a step the log never had (`logged`, when given: the last step the log held, before a
    resume cut it back to its checkpoint); a new state when there is none, or new tracker runs, in one line,
    when the file came with a copy of another run's folder (cp -r A B; --resume B): B's steps must
    not go into A's tracker runs."""
    path = os.path.join(out, STATE)
    if not os.path.exists(path):  # (config.check_out asks before the folder exists)
        return {"id": secrets.token_hex(4), "sent": {}}  # its folder's identity: once Follow opens it
    here = folder_id(out)
    try:
        state = read_json(path, {"id": str, "sent": dict})
        if not re.fullmatch(r"[a-z0-9]{8}", state["id"]) or not all(
                n in TRACKERS and isinstance(s, int) and not isinstance(s, bool) and -1 <= s for n, s in state["sent"].items()):
            raise ValueError(f"{path}: 'id' must be 8 lowercase letters or digits and 'sent' map "
                             f"{', '.join(TRACKERS)} to step numbers")
        if logged is not None and any(s > logged for s in state["sent"].values()):
            raise ValueError(f"{path}: 'sent' counts step {max(state['sent'].values())}, past the log's last step "
                             f"({logged}), so that tracker would never get a step again")
    except ValueError as e:
        raise SystemExit(f"{e}; fix it, or delete it to start new tracker runs (the steps are sent again)") from None
    if state.get("folder", here) != here:  # made before the identity was kept: taken as this folder's
        # TensorBoard's run is its folder, and the copy brought it: it goes on from what it holds
        kept = {"tensorboard": state["sent"]["tensorboard"]} if "tensorboard" in state["sent"] and events(out) else {}
        if path not in NOTED:  # asked again later in the same run: one note
            NOTED.add(path)
            print(f"note: {path} came from another run folder (a copy): new tracker runs for this one, which "
                  "get the whole log" + ("; TensorBoard's folder came with the copy and goes on" if kept else ""))
        return {"id": secrets.token_hex(4), "sent": kept, "folder": here, "copied_from": state["id"]}
    return {**state, "folder": here}


def set_aside_copied_wandb(out, old_id):
    """A copied folder's OUT/wandb holds the original run's W&B session (offline-run-…-OLD_ID): `wandb
    sync OUT/wandb/offline-run-*` would upload it beside the copy's new run, with the same first
    steps. It is renamed copied-from-…, out of that pattern and of W&B's own resume, once; its
    files are kept. Returns the folders set aside."""
    moved = []
    for path in sorted(p for p in glob.glob(os.path.join(out, "wandb", f"*-{old_id}"))
                       if not os.path.basename(p).startswith("copied-from-")):
        target = os.path.join(os.path.dirname(path), "copied-from-" + os.path.basename(path))
        os.rename(checkpoint.inside(out, "wandb", os.path.basename(path)), checkpoint.inside(out, "wandb", os.path.basename(target)))
        moved.append(target)
    if moved:
        print(f"note: {os.path.join(out, 'wandb')} held the W&B run {old_id} of the folder this one was copied from; "
              f"set aside as {', '.join(os.path.basename(m) for m in moved)}, so a sync uploads only this run's")
    return moved


NOTED = set()  # the trackers.json files whose copy note was printed


def events(out):
    """The event files in OUT/tensorboard (none: the folder was deleted, or never made)."""
    return glob.glob(os.path.join(out, "tensorboard", "events.out.tfevents.*"))


def folder_id(out):
    """The run folder's identity: its device and inode, the same across a rename, new in a copy."""
    st = os.stat(out)
    return [st.st_dev, st.st_ino]


# ---------------------------------------------------------------- following the log
class Follow:
    """The trackers of --report-to, fed the log's lines (send) after the log has them."""

    def __init__(self, args, flags, history, logged=None):
        self.out = args.out
        self.state, self.live = read_state(args.out, logged), {}  # logged: the last step the log held
        self.state["folder"] = folder_id(args.out)
        if "copied_from" in self.state:  # a copy: the original's W&B session is not this run's
            set_aside_copied_wandb(args.out, self.state.pop("copied_from"))
        stale = getattr(threading.excepthook, "__self__", None)  # a run that crashed (in a notebook) left its own
        self.hook = stale.hook if isinstance(stale, Follow) else threading.excepthook
        if args.report_to != "none":  # a tracker's own thread that fails: one line, not its traceback
            threading.excepthook = self.thread_failed
        for name in [] if args.report_to == "none" else args.report_to.split(","):
            self.attempt(name, "open", lambda: self.open(name, flags))
        for line in history:  # what the log holds and a tracker has not had
            self.send(line)

    def open(self, name, flags):
        """The tracker, and its step counted as sent only where its own store holds it: a kill
        loses what W&B or Trackio had not yet written, and those steps are sent again."""
        sent = self.state["sent"]
        self.live[name] = TRACKERS[name](self.out, self.state["id"], flags, sent.get(name))
        held = self.live[name].held()
        if name in sent and held is not None and held < sent[name]:
            tqdm.write(f"note: {name} holds steps up to {held}, not {sent[name]} (lost at a kill, or its folder "
                       "deleted): they are sent again", file=sys.stderr)
            sent[name] = held

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
        tagged, tables = values(line), self.tables(step) if "t_eval" in line else {}
        for name in todo:
            if self.attempt(name, f"log step {step}", lambda: self.live[name].log(step, tagged, tables)):
                sent[name] = step
        checkpoint.save_json(self.state, self.out, STATE)

    def tables(self, step):
        """{tag: (columns, data)} at an evaluation step: the group of the step's rollouts that
        tools/show.py shows (eval/episodes; none at step 0) and the greedy evaluation's episodes
        (eval/greedy; search). An unreadable file is a note, not a table."""
        out = {}
        for tag_, name, read in (("eval/episodes", f"step_{step}.jsonl", self.group),
                                 ("eval/greedy", f"eval_step_{step}.jsonl", rollout_files.greedy_table)):
            path = os.path.join(self.out, "rollouts", name)
            if os.path.exists(path):
                try:
                    out[tag_] = read(path)
                except SystemExit as e:
                    tqdm.write(f"note: no {tag_} table at step {step}: {e}", file=sys.stderr)
        return out

    def group(self, path):
        groups = rollout_files.groups_of(rollout_files.read_rollouts(path))
        return rollout_files.group_table(groups[rollout_files.pick_group(groups)][1])

    def thread_failed(self, failure):
        """A background thread (TensorBoard's writer, Trackio's sender) raised: one warning line.
        The tracker's next call in this thread raises too, and attempt() switches it off."""
        e = failure.exc_value
        tqdm.write(f"warning: a tracker's background thread ({failure.thread.name if failure.thread else '?'}) failed "
                   f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); training and "
                   f"{os.path.join(self.out, 'log.jsonl')} go on", file=sys.stderr)

    def close(self):
        for name in list(self.live):
            self.attempt(name, "close", self.live[name].close)
        threading.excepthook = self.hook


# ---------------------------------------------------------------- the trackers
class TensorBoard:
    """OUT/tensorboard: scalars, text, the flags as hyperparameters (the HPARAMS tab)."""

    def __init__(self, out, run_id, flags, last):
        from torch.utils.tensorboard import SummaryWriter
        from torch.utils.tensorboard.summary import hparams
        folder = checkpoint.inside(out, "tensorboard")
        self.had = bool(events(out))  # none, though steps were sent: the folder was deleted, so they are sent again
        writable(folder)  # its writer fails in a thread of its own, with a traceback, not here
        # purge_step: events past the last step taken (a kill after writing them) are dropped
        self.writer = SummaryWriter(folder, purge_step=None if last is None else last + 1)
        if not self.had:  # a new folder (a new run, or its folder deleted): its flags, once
            for summary in hparams(flags, {}):
                self.writer.file_writer.add_summary(summary)
        print(f"TensorBoard: watch it with: tensorboard --logdir {os.path.join(out, 'tensorboard')}")

    def held(self):
        """None (it flushes every step, and purge_step drops what lies past trackers.json's count),
        or -1 where its folder held no events when it opened."""
        return None if self.had else -1

    def log(self, step, values, tables):
        for key, value in values.items():
            if isinstance(value, str):
                self.writer.add_text(key, value, step)
            else:
                self.writer.add_scalar(key, value, step)
        for key, table in tables.items():
            self.writer.add_text(key, markdown(*table), step)
        self.writer.flush()

    def close(self):
        self.writer.close()


class WandB:
    """Offline unless an API key (WANDB_API_KEY, or `wandb login`'s ~/.netrc) or WANDB_MODE is set."""

    def __init__(self, out, run_id, flags, last):
        import wandb
        self.wandb, mode = wandb, os.environ.get("WANDB_MODE") or ("online" if has_wandb_key() else "offline")
        self.run = wandb.init(project=flags.get("project") or os.environ.get("WANDB_PROJECT", PROJECT), id=run_id,
                              resume="allow", name=flags.get("run_name") or os.path.basename(os.path.abspath(out)),
                              dir=out, mode=mode,
                              config=flags if last is None else None,  # a resumed run keeps its first config
                              settings=wandb.Settings(silent=True, console="off", disable_git=True))
        where = (f"offline; upload it later with: wandb sync {os.path.join(out, 'wandb')}/offline-run-*"
                 if mode == "offline" else f"online: {self.run.url}" if mode == "online" else mode)  # no url offline
        print(f"W&B: run {run_id}, {where}")
        self.out, self.id, self.mode = out, run_id, mode

    def held(self):
        """The last step W&B holds: its offline files' history, or the server's (online); None
        when it cannot say."""
        if self.mode == "online":
            return self.run.starting_step - 1
        if self.mode != "offline":
            return None
        steps = [int(i.value_json) for path in glob.glob(os.path.join(self.out, "wandb", f"offline-run-*-{self.id}",
                                                                        f"run-{self.id}.wandb"))
                 for r in wandb_records(path) if r.WhichOneof("record_type") == "history"
                 for i in r.history.item if (i.key or "/".join(i.nested_key)) == "_step"]
        return max(steps, default=-1)

    def log(self, step, values, tables):
        tables = {key: self.wandb.Table(*table) for key, table in tables.items()}
        self.run.log({**values, **tables}, step=step, commit=True)  # held in memory until committed

    def close(self):
        self.run.finish()


class Trackio:
    """The local store ($TRACKIO_DIR or ~/.cache/huggingface/trackio), project turn-rl, one run
    per run folder: its name is the folder's and the run's id."""

    def __init__(self, out, run_id, flags, last):
        import trackio
        from trackio.sqlite_storage import SQLiteStorage
        self.trackio, name = trackio, f"{flags.get('run_name') or os.path.basename(os.path.abspath(out))}-{run_id}"
        project = flags.get("project") or PROJECT
        unlocked(SQLiteStorage.get_project_db_path(project))
        with contextlib.redirect_stdout(io.StringIO()):  # its banner would break the progress bar
            self.run = trackio.init(project=project, name=name, config=flags, resume="allow", embed=False,
                                    auto_log_cpu=False, auto_log_gpu=False)
        print(f"Trackio: run {name}; watch it with: trackio show --project {project}")
        self.project, self.name = project, name

    def held(self):
        from trackio.sqlite_storage import SQLiteStorage
        step = SQLiteStorage.get_max_step_for_run(self.project, self.name)  # its local store
        return -1 if step is None else step

    def log(self, step, values, tables):
        tables = {key: self.trackio.Table(columns=table[0], data=table[1]) for key, table in tables.items()}
        self.run.log({**values, **tables}, step=step)

    def close(self):
        with contextlib.redirect_stdout(io.StringIO()):
            self.trackio.finish()  # the run trackio.init made its current one


def unlocked(db, seconds=2.0):
    """Raise in one line when another process holds Trackio's database db for writing (a crashed
    writer, a copy open in a DB browser): Trackio itself would wait 30 s at each of its calls."""
    if not os.path.exists(db):
        return
    try:
        with contextlib.closing(sqlite3.connect(db, timeout=seconds, isolation_level=None)) as conn:
            conn.execute("BEGIN IMMEDIATE")  # the write lock Trackio's writes need, released at once
            conn.execute("ROLLBACK")
    except sqlite3.OperationalError as e:
        if "locked" not in str(e):  # another fault (permissions, a damaged file): Trackio's own error then
            return
        raise RuntimeError(f"its database {db} is locked by another process ({e}); end that process") from None


def wandb_records(path):
    """The records of a W&B run file, as W&B's protobuf: a ':W&B' header, then LevelDB-log blocks
    of 32 KiB whose records (FULL 1, or FIRST 2 / MIDDLE 3 / LAST 4 pieces) have a 7-byte header;
    a record cut short by a kill ends the list."""
    from wandb.proto import wandb_internal_pb2 as pb
    data, records, part = open(path, "rb").read(), [], b""
    pos = 7 if data[:4] == b":W&B" else len(data)
    while pos + 7 <= len(data):
        left = 32768 - pos % 32768
        length, kind = int.from_bytes(data[pos + 4:pos + 6], "little"), data[pos + 6]
        if left < 7 or kind == 0:  # the block's zero padding
            pos += left
            continue
        if pos + 7 + length > len(data):
            break
        part, pos = part + data[pos + 7:pos + 7 + length], pos + 7 + length
        if kind in (1, 4):
            records.append(pb.Record.FromString(part))
            part = b""
    return records


TRACKERS = {"tensorboard": TensorBoard, "wandb": WandB, "trackio": Trackio}  # each named as its package
TABLES = ("eval/episodes", "eval/greedy")  # the tables a tracker gets at an evaluation


def has_wandb_key():
    """An API key in the environment or in ~/.netrc (where `wandb login` keeps it)."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    host = re.sub(r"^https?://", "", os.environ.get("WANDB_BASE_URL", "api.wandb.ai")).split("/")[0]
    try:
        return netrc.netrc(os.environ.get("NETRC")).authenticators(host) is not None
    except (OSError, netrc.NetrcParseError):
        return False


def writable(folder):
    """Make the folder if needed and check that a file can be made in it; OSError if not."""
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, ".write-test"), "w"):
        pass
    os.remove(os.path.join(folder, ".write-test"))


def escape(text):
    """A table cell as Markdown text: tags (<search>) shown, not read as HTML; one line."""
    return html.escape(str(text)).replace("|", "&#124;").replace("\n", " ⏎ ")


def markdown(columns, data):
    """A Markdown table (TensorBoard's text): text escaped, numbers to 3 decimals, None as –."""
    return "\n".join(["| " + " | ".join(map(escape, columns)) + " |", "|" + "---|" * len(columns)]
                     + ["| " + " | ".join(map(cell, row)) + " |" for row in data])


def cell(value):
    return "–" if value is None else f"{value:+.3f}" if isinstance(value, float) else escape(value)
