"""--report-to: each tracker holds every log.jsonl value at its step, read back with its own reader
(TensorBoard's event reader, the W&B offline run file, Trackio's local store); a resumed run goes
on in the same tracker run with no step twice; a tracker that raises is switched off while
training and the log go on; a tracker that is not installed is refused before anything starts."""
import glob
import json
import os
import shutil
import subprocess
import sys
from collections import Counter

import pytest
from conftest import full_args

from machinery import rollout_files, trackers
from scripts.tracker_readers import READ, read_tensorboard, read_trackio, read_wandb, trackio_run
import train

NAMES = tuple(trackers.TRACKERS)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def offline_wandb(tmp_path, monkeypatch):
    """No API key anywhere: W&B must choose offline mode itself; its caches under tmp_path."""
    for key in ("WANDB_API_KEY", "WANDB_MODE", "WANDB_PROJECT", "WANDB_BASE_URL"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    for key in ("WANDB_CACHE_DIR", "WANDB_CONFIG_DIR", "WANDB_DATA_DIR", "WANDB_ARTIFACT_DIR"):
        monkeypatch.setenv(key, str(tmp_path / "wandb-home"))


def tiny_run(tmp_path, tiny_model_dir, name, *extra):
    out = str(tmp_path / name)
    return out, ["--model", tiny_model_dir, "--batch-size", "1", "--num-generations", "2",
                 "--max-completion-length", "6", "--eval-n", "2", "--eval-every", "2", "--save-every", "2",
                 "--micro-batch-size", "2", "--learning-rate", "1e-3", "--warmup-steps", "1", "--bf16", "false",
                 "--out", out, *extra]


def log_of(out):
    return [json.loads(line) for line in open(os.path.join(out, "log.jsonl"))]


def expected(out):
    """[(step, tag, value)] the log says each tracker should hold: every field of every line,
    and a table of the rollouts at each evaluation step after 0."""
    want = [(line["step"], trackers.tag(k), v) for line in log_of(out) for k, v in line.items() if k != "step"]
    return (want + [(line["step"], "eval/episodes", None) for line in log_of(out) if "t_eval" in line and line["step"]]
            + [(line["step"], "eval/greedy", None) for line in log_of(out) if "t_eval" in line])


def assert_holds(got, out, rel=1e-12, repeated=()):
    """got holds each value of the log at its step, once, and nothing else; at the repeated steps
    (a crash's, done again by --resume) the times are the first pass's."""
    keys = [(step, t) for step, t, _ in got]
    assert len(keys) == len(set(keys)), "a step written twice"
    got = {(step, t): v for step, t, v in got}
    want = expected(out)
    assert sorted(got) == sorted((step, t) for step, t, _ in want)
    for step, t, v in want:
        if step in repeated and t.startswith("time/"):
            continue
        if isinstance(v, str) or v is None:
            assert v is None or got[step, t] == v, (step, t)
        else:
            assert got[step, t] == pytest.approx(v, rel=rel, abs=1e-30, nan_ok=True), (step, t)


# ---------------------------------------------------------------- the pure parts, by hand
def test_each_field_gets_its_section():
    assert trackers.tag("eval_exact_match_rate") == "eval/exact_match_rate"
    assert trackers.tag("t_generate") == "time/t_generate" and trackers.tag("tokens_per_s") == "time/tokens_per_s"
    assert trackers.tag("loss") == "train/loss" and trackers.tag("zero_adv_groups") == "train/zero_adv_groups"
    line = {"step": 3, "loss": 0.5, "groups": 2, "eval_exact_match_each": "0110", "kl": None, "moves": {"a": 1}}
    assert trackers.values(line) == {"train/loss": 0.5, "train/groups": 2, "eval/exact_match_each": "0110",
                                     "train/moves": '{"a": 1}'}


def test_the_flag_takes_trl_s_values_and_lists(monkeypatch):
    installed = {"tensorboard", "trackio"}
    monkeypatch.setattr(trackers.importlib.util, "find_spec", lambda name: object() if name in installed else None)
    assert trackers.parse("none") == "none" and trackers.parse("") == "none"
    assert trackers.parse("TensorBoard, trackio,tensorboard") == "tensorboard,trackio"
    assert trackers.parse("all") == "tensorboard,trackio"  # TRL: every one installed
    assert trackers.parse("none, none") == "none"
    with pytest.raises(ValueError, match="none means no tracker; give it alone"):  # transformers refuses it too
        trackers.parse("none,tensorboard")
    monkeypatch.setattr(trackers.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ValueError, match="--report-to all: no tracker package is installed .*or give none"):
        trackers.parse("all")  # before: silently none
    monkeypatch.setattr(trackers.importlib.util, "find_spec", lambda name: object() if name in installed else None)
    for text, name in (("tensorboard,mlflow", "mlflow"), ("all,wandb", "all")):
        with pytest.raises(ValueError, match=f"'{name}' is not a tracker; give none, all \\(alone\\), or one or more "
                                             "of tensorboard, wandb, trackio"):
            trackers.parse(text)
    with pytest.raises(ValueError, match=r"the wandb package is not installed; .*pip install -r requirements-trackers.txt"):
        trackers.parse("trackio,wandb")


def test_a_missing_package_is_refused_before_anything_is_written(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(trackers.importlib.util, "find_spec", lambda name: None if name == "wandb" else object())
    out = tmp_path / "run"
    for report in (["wandb"], ["tensorboard", "wandb"], ["tensorboard,wandb"]):  # a list as TRL writes it, or commas
        with pytest.raises(SystemExit):
            train.main(["--report-to", *report, "--out", str(out), "--model", str(tmp_path / "no-model")])
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert err.endswith("the wandb package is not installed; install the trackers with: "
                            ".venv/bin/pip install -r requirements-trackers.txt -c requirements.txt")
    assert not out.exists()


def test_a_malformed_trackers_file_is_refused_in_one_line(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    for text, why in (('{"id": "ABC", "sent": {}}', "8 lowercase"), ('{"id": "abcd1234", "sent": {"tb": 3}}', "'sent' map"),
                      ('{"id": "abcd1234", "sent": {"wandb": true}}', "'sent' map"), ("[", "bad JSON")):
        (out / "trackers.json").write_text(text)
        with pytest.raises(SystemExit, match=f"{why}.*; fix it, or delete it") as stop:
            trackers.read_state(str(out))
        assert "\n" not in str(stop.value)


def test_a_group_as_a_table_with_each_turn_rewards_and_advantages():
    """Text columns, then the rewards and advantages as numbers, a column each (a tracker sorts
    them); TensorBoard's Markdown escapes the text and writes the numbers to 3 decimals."""
    toks = ["sys ", "Q?", "<search>x</search>", "\n<result>doc</result>\n", "<answer>y</answer>"]
    row = {"group": "g", "role": "", "rewards": [0.7, 1.5], "tokens": toks, "mask": [0, 0, 1, 0, 1],
           "adv": [0, 0, 0.25, 0, -0.5], "turn": [0, 0, 1, 0, 2]}
    columns, data = rollout_files.group_table([row], prompt_end=3)
    assert columns == ["rollout", "prompt (end)", "turn 1", "turn 2", "reward: turn 1", "reward: turn 2 (outcome)",
                       "advantage: turn 1", "advantage: turn 2"]
    assert data == [[0, " Q?", "<search>x</search> [environment] <result>doc</result>", "<answer>y</answer>",
                     0.7, 1.5, 0.25, -0.5]]
    text = trackers.markdown(columns, data)
    assert text.splitlines()[1] == "|---|---|---|---|---|---|---|---|"
    assert "&lt;search&gt;x&lt;/search&gt;" in text and text.count("\n") == 2  # tags shown as text, one row
    assert text.endswith("| +0.700 | +1.500 | +0.250 | -0.500 |")


class Spy:
    """Records every call made on it, by name; Table keeps its arguments."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        return lambda *a, **k: self.calls.append((name, a, k)) or (a, k)


def test_w_and_b_commits_each_step_and_trackio_gets_plain_text():
    """W&B holds a step logged with an explicit step in memory until the next one comes, unless
    it is committed: a kill then lost the last step although trackers.json counted it. Trackio
    shows plain text: its cells are not HTML-escaped (TensorBoard's Markdown is)."""
    table = (["rollout", "turn 1", "reward: turn 1"], [[0, "<search>a|b</search>", 0.5]])
    wandb = object.__new__(trackers.WandB)
    wandb.run, wandb.wandb = Spy(), Spy()
    wandb.log(3, {"train/loss": 1.0}, {"eval/episodes": table})
    (name, args, kwargs), = wandb.run.calls
    assert name == "log" and kwargs == {"step": 3, "commit": True} and args[0]["train/loss"] == 1.0
    trackio = object.__new__(trackers.Trackio)
    trackio.run, trackio.trackio = Spy(), Spy()
    trackio.log(3, {}, {"eval/episodes": table})
    (_, (logged,), _), = trackio.run.calls
    assert logged["eval/episodes"] == ((), {"columns": table[0], "data": table[1]})  # as they are


def test_a_copied_run_folder_gets_new_tracker_runs(tmp_path, capsys):
    """cp -r A B, then --resume B: B's steps must not go into A's tracker runs (the same W&B id, one
    Trackio run for both). trackers.json keeps its folder's identity; a copy starts new runs."""
    a = tmp_path / "A"
    a.mkdir()
    state = {**trackers.read_state(str(a)), "sent": {"tensorboard": 2}, "folder": trackers.folder_id(str(a))}
    (a / "trackers.json").write_text(json.dumps(state))
    assert trackers.read_state(str(a), logged=2)["id"] == state["id"]  # the same folder: the same runs
    os.rename(a, tmp_path / "A2")  # a renamed folder is the same run
    assert trackers.read_state(str(tmp_path / "A2"), logged=2)["id"] == state["id"]
    shutil.copytree(tmp_path / "A2", tmp_path / "B")
    copied = trackers.read_state(str(tmp_path / "B"), logged=2)
    assert copied["id"] != state["id"] and copied["sent"] == {} and "came from another run folder" in capsys.readouterr().out
    old = {k: v for k, v in state.items() if k != "folder"}  # a file from before the identity was kept
    (tmp_path / "B" / "trackers.json").write_text(json.dumps(old))
    assert trackers.read_state(str(tmp_path / "B"), logged=2)["id"] == state["id"]


def test_a_copied_folder_sets_the_originals_wandb_session_aside(tmp_path, capsys):
    """cp -a RUN COPY; rm -rf RUN; --resume COPY: on 7b45f4d the copy's wandb/ kept the old session
    beside the new one, and a sync uploaded two runs, [1, 2] and [1, 2, 3]. Now the old one is
    renamed out of offline-run-*, once, its files kept; the original folder keeps its own."""
    import types
    run = tmp_path / "RUN"
    (run / "wandb" / f"offline-run-20261202_000000-{'a' * 8}").mkdir(parents=True)
    (run / "wandb" / f"offline-run-20261202_000000-{'a' * 8}" / f"run-{'a' * 8}.wandb").write_text("steps 1, 2")
    (run / "trackers.json").write_text(json.dumps({"id": "a" * 8, "sent": {"wandb": 2}, "folder": trackers.folder_id(str(run))}))
    shutil.copytree(run, tmp_path / "COPY")
    args = types.SimpleNamespace(out=str(tmp_path / "COPY"), report_to="none")
    follow = trackers.Follow(args, {}, [], logged=2)
    assert follow.state["id"] != "a" * 8 and "copied_from" not in follow.state
    assert os.listdir(tmp_path / "COPY" / "wandb") == [f"copied-from-offline-run-20261202_000000-{'a' * 8}"]
    assert "set aside as copied-from-offline-run" in capsys.readouterr().out
    assert os.listdir(run / "wandb") == [f"offline-run-20261202_000000-{'a' * 8}"]  # the original keeps its own
    trackers.Follow(args, {}, [], logged=2)  # a later resume of the copy: nothing more to set aside
    assert "set aside" not in capsys.readouterr().out


@pytest.mark.parametrize("sent", [99, 10 ** 30, -2])
def test_a_step_the_log_never_had_is_refused(tmp_path, sent):
    """trackers.json with a step past the log's last (or below -1): that tracker would silently
    never get a step again. One line, before anything is written."""
    (tmp_path / "trackers.json").write_text(json.dumps({"id": "abcd1234", "sent": {"tensorboard": sent}}))
    with pytest.raises(SystemExit, match="fix it, or delete it"):
        trackers.read_state(str(tmp_path), logged=4)


@pytest.mark.trackers("tensorboard")
def test_a_tensorboard_folder_it_cannot_write_is_one_warning_line(tmp_path, tiny_model_dir, capsys, monkeypatch):
    """Before: the promised warning, then a 45-line traceback from TensorBoard's writer thread. Its
    folder is now tried before the writer starts (a folder it may not write is staged by the check
    failing: the tests run as root, who writes through chmod)."""
    out, flags = tiny_run(tmp_path, tiny_model_dir, "run", "--steps", "1", "--eval-every", "0", "--report-to", "tensorboard")
    monkeypatch.setattr(trackers, "writable", lambda folder: (_ for _ in ()).throw(PermissionError(13, "Permission denied")))
    train.main(flags)
    err = capsys.readouterr().err
    assert err.count("warning: tensorboard failed to open") == 1 and "Traceback" not in err
    assert not os.path.exists(os.path.join(out, "tensorboard"))


@pytest.mark.trackers("tensorboard")
def test_a_tracker_thread_that_fails_is_one_warning_line(tmp_path, capsys):
    """TensorBoard's writer and Trackio's sender write in threads of their own; one that raised
    printed its whole traceback (45 lines for TensorBoard's). Now one line, and training goes on."""
    import threading
    args = full_args("--out", str(tmp_path), "--report-to", "tensorboard")
    original = threading.excepthook
    trackers.Follow(args, {"seed": 0}, [])  # a run that crashed: never closed, its hook left in place
    watch = trackers.Follow(args, {"seed": 0}, [])

    def writer():
        raise OSError(28, "No space left on device")
    thread = threading.Thread(target=writer, name="EventLoggerThread")
    thread.start()
    thread.join()
    watch.close()
    err = capsys.readouterr().err
    assert err.splitlines() == [f"warning: a tracker's background thread (EventLoggerThread) failed (OSError: [Errno 28] "
                                f"No space left on device); training and {tmp_path}/log.jsonl go on"]
    assert threading.excepthook is original  # given back, the crashed run's too


def test_w_and_b_is_offline_unless_a_key_is_set(tmp_path, monkeypatch):
    assert not trackers.has_wandb_key()  # the fixture: no key in the environment, no ~/.netrc
    (tmp_path / "netrc").write_text("machine api.wandb.ai\n  login user\n  password abc\n")
    monkeypatch.setenv("NETRC", str(tmp_path / "netrc"))
    assert trackers.has_wandb_key()  # where `wandb login` keeps it
    monkeypatch.setenv("WANDB_BASE_URL", "https://wandb.example.org")
    assert not trackers.has_wandb_key()  # a key for another host
    monkeypatch.setenv("WANDB_API_KEY", "abc")
    assert trackers.has_wandb_key()


@pytest.mark.trackers("tensorboard")
def test_tensorboard_drops_what_a_killed_run_wrote_past_its_last_step(tmp_path):
    """A kill after TensorBoard wrote step 2 but before trackers.json said so: the resumed
    writer starts at step 2 again, and the reader must show step 2 once, the new value."""
    first = trackers.TensorBoard(str(tmp_path), "abcd1234", {"seed": 0}, None)
    for step in (1, 2):
        first.log(step, {"train/loss": float(step)}, {})
    first.close()
    again = trackers.TensorBoard(str(tmp_path), "abcd1234", {"seed": 0}, 1)  # trackers.json: step 1 sent
    again.log(2, {"train/loss": 20.0}, {})
    again.close()
    assert sorted((s, v) for s, _, v in read_tensorboard(str(tmp_path))[0]) == [(1, 1.0), (2, 20.0)]


# ---------------------------------------------------------------- a run, read back
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.trackers(n)) for n in NAMES])
def test_the_tracker_holds_every_log_value_at_its_step(tmp_path, tiny_model_dir, name):
    out, flags = tiny_run(tmp_path, tiny_model_dir, "run", "--steps", "3", "--report-to", name)
    train.main(flags)
    assert_holds(READ[name](out), out, rel=1e-6 if name == "tensorboard" else 1e-12)  # TensorBoard keeps float32
    flags = json.load(open(os.path.join(out, "args.json")))
    if name == "tensorboard":
        got, hparams = read_tensorboard(out)
        assert hparams  # the flags, in the HPARAMS tab
        episodes = dict(((s, t), v) for s, t, v in got)[2, "eval/episodes"]
        assert episodes.startswith("| rollout | prompt (end) | turn 1 | turn 2 | reward: turn 1 | reward: turn 2 (outcome) |")
        assert "turn 2 (outcome)" in episodes
        greedy = dict(((s, t), v) for s, t, v in got)[2, "eval/greedy"]  # which test question was answered
        assert greedy.startswith("| question # | question | answers | episode | exact match |")
        assert greedy.count("\n") == 1 + 2 and greedy.splitlines()[2].endswith(("| +0.000 |", "| +1.000 |"))
    if name == "wandb":
        _, ids, config = read_wandb(out)
        assert ids == {json.load(open(os.path.join(out, "trackers.json")))["id"]}
        assert {k: config[k] for k in flags} == flags
    if name == "trackio":
        config = read_trackio(out)[1]
        assert {k: config[k] for k in flags} == flags


@pytest.mark.trackers
def test_the_same_rollouts_with_every_tracker_as_without(tmp_path, tiny_model_dir):
    plain, flags = tiny_run(tmp_path, tiny_model_dir, "plain", "--steps", "2")
    train.main(flags)
    watched, flags = tiny_run(tmp_path, tiny_model_dir, "watched", "--steps", "2", "--report-to", "all")
    train.main(flags)
    for step in (1, 2):
        assert open(os.path.join(plain, "rollouts", f"step_{step}.jsonl")).read() == \
            open(os.path.join(watched, "rollouts", f"step_{step}.jsonl")).read()


@pytest.mark.trackers
def test_resume_goes_on_in_the_same_tracker_runs_with_no_step_twice(tmp_path, tiny_model_dir, monkeypatch):
    """A crash at step 4 (its line logged and sent, its checkpoint not written) makes --resume
    repeat steps 3 and 4; the trackers keep them once, and take step 5 in the run they had. (A tracker added at
    --resume catching up: test_a_tracker_that_raises_...)"""
    out, flags = tiny_run(tmp_path, tiny_model_dir, "resumed", "--steps", "4", "--report-to", "all")
    real_save = train.checkpoint.save_checkpoint

    def crash_at_4(models, tok, opts, step, rng, folder):
        if step == 4:
            raise KeyboardInterrupt
        real_save(models, tok, opts, step, rng, folder)
    monkeypatch.setattr(train.checkpoint, "save_checkpoint", crash_at_4)
    with pytest.raises(SystemExit, match="stopped"):
        train.main(flags)
    assert json.load(open(os.path.join(out, "trackers.json")))["sent"] == {name: 4 for name in NAMES}
    import trackio
    import wandb
    wandb.finish()  # what the crashed process's exit does (their atexit hooks)
    trackio.finish()
    monkeypatch.setattr(train.checkpoint, "save_checkpoint", real_save)
    train.main(["--resume", out, "--steps", "5"])  # and a new step, which each tracker's run must take
    for name in NAMES:  # the first pass's steps 3 and 4 are the resumed run's, but for their times
        assert_holds(READ[name](out), out, rel=1e-6 if name == "tensorboard" else 1e-12, repeated=(3, 4))
    runs = glob.glob(os.path.join(out, "wandb", "offline-run-*"))
    assert len(runs) == 2 and len(read_wandb(out)[1]) == 1  # two sessions of one W&B run
    assert len(glob.glob(os.path.join(out, "tensorboard", "events.*"))) == 2  # one folder, two writers
    from trackio.sqlite_storage import SQLiteStorage
    records = [r for r in SQLiteStorage.get_run_records(trackers.PROJECT) if r["name"] == trackio_run(out)]
    assert len(records) == 1  # one Trackio run (one run id), continued


@pytest.mark.trackers("tensorboard")
def test_tensorboard_is_whole_after_its_folder_is_deleted_or_the_run_copied(tmp_path, tiny_model_dir, capsys):
    """rm -rf RUN/tensorboard, then --resume: TensorBoard held the new step only. cp -a RUN COPY,
    rm -rf RUN, --resume COPY: steps [1, 1, 2, 2, 3] and the copy note three times. Now every step
    once, the note once, and the project's reader reads both folders."""
    out, flags = tiny_run(tmp_path, tiny_model_dir, "run", "--steps", "2", "--eval-every", "0", "--report-to", "tensorboard")
    train.main(flags)
    shutil.rmtree(os.path.join(out, "tensorboard"))
    train.main(["--resume", out, "--steps", "3"])
    assert "note: tensorboard holds steps up to -1, not 2" in capsys.readouterr().err
    assert sorted({s for s, t, _ in read_tensorboard(out)[0] if t == "train/loss"}) == [1, 2, 3]
    copy = str(tmp_path / "copy")
    shutil.copytree(out, copy, symlinks=True)
    shutil.rmtree(out)
    train.main(["--resume", copy, "--steps", "4"])
    assert capsys.readouterr().out.count("came from another run folder") == 1
    steps = [s for s, t, _ in read_tensorboard(copy)[0] if t == "train/loss"]
    assert sorted(steps) == [1, 2, 3, 4]  # no step twice
    assert_holds(read_tensorboard(copy)[0], copy, rel=1e-6)


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.trackers(n)) for n in ("wandb", "trackio")])
def test_steps_a_kill_lost_are_sent_again_once(tmp_path, tiny_model_dir, name, capsys):
    """W&B and Trackio write in the background: a SIGKILL loses what they had not written, though
    trackers.json counts it as sent (kill_resume.py found W&B without steps 0-6). --resume asks
    the tracker's own store which steps it holds and sends the rest again, each once. The loss is
    staged: W&B's first session deleted, Trackio's steps from 1 on deleted from its store."""
    out, flags = tiny_run(tmp_path, tiny_model_dir, "run", "--steps", "2", "--report-to", name)
    train.main(flags)
    assert json.load(open(os.path.join(out, "trackers.json")))["sent"] == {name: 2}
    if name == "wandb":
        shutil.rmtree(glob.glob(os.path.join(out, "wandb", "offline-run-*"))[0])
        held = -1
    else:
        import sqlite3
        from trackio.sqlite_storage import SQLiteStorage
        with sqlite3.connect(SQLiteStorage.get_project_db_path(trackers.PROJECT)) as db:
            db.execute("DELETE FROM metrics WHERE run_name = ? AND step >= 1", (trackio_run(out),))
        held = 0
    capsys.readouterr()
    train.main(["--resume", out, "--steps", "3"])
    assert f"note: {name} holds steps up to {held}, not 2 (lost at a kill, or its folder deleted): they are sent again" in capsys.readouterr().err
    assert_holds(READ[name](out), out)  # every step once, none missing


@pytest.mark.trackers("trackio")
def test_a_locked_trackio_database_is_one_warning_line_not_a_stall(tmp_path, tiny_model_dir, capsys):
    """Before: another process holding Trackio's database made --resume wait 65 s and print
    Trackio's raw warnings. Now Trackio is switched off in one line, and a later --resume sends it
    the steps it missed."""
    import contextlib
    import sqlite3
    import time
    from trackio.sqlite_storage import SQLiteStorage
    out, flags = tiny_run(tmp_path, tiny_model_dir, "run", "--steps", "1", "--eval-every", "0", "--report-to", "trackio")
    train.main(flags)
    db = SQLiteStorage.get_project_db_path(trackers.PROJECT)
    capsys.readouterr()
    with contextlib.closing(sqlite3.connect(db, isolation_level=None)) as holder:
        holder.execute("BEGIN EXCLUSIVE")
        start = time.monotonic()
        train.main(["--resume", out, "--steps", "2"])
        seconds = time.monotonic() - start
    err = capsys.readouterr().err
    assert (f"warning: trackio failed to open (RuntimeError: its database {db} is locked by another process "
            f"(database is locked); end that process); it is switched off") in err, err
    assert seconds < 25 and "Warning:" not in err, (seconds, err)
    train.main(["--resume", out, "--steps", "2"])  # the lock gone: step 2 sent
    assert_holds(READ["trackio"](out), out)


@pytest.mark.trackers("tensorboard")
def test_a_tracker_that_raises_is_switched_off_and_training_goes_on(tmp_path, tiny_model_dir, monkeypatch, capsys):
    real_log = trackers.TensorBoard.log

    def fails_at_2(self, step, values, table):
        if step == 2:
            raise OSError(28, "No space left on device")
        real_log(self, step, values, table)
    monkeypatch.setattr(trackers.TensorBoard, "log", fails_at_2)
    out, flags = tiny_run(tmp_path, tiny_model_dir, "run", "--steps", "3", "--report-to", "tensorboard")
    history = train.main(flags)
    assert [h["step"] for h in history] == [line["step"] for line in log_of(out)] == [0, 1, 2, 3]
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning: tensorboard")]
    assert warnings == [f"warning: tensorboard failed to log step 2 (OSError: [Errno 28] No space left on device); "
                        f"it is switched off, training and {out}/log.jsonl go on (--resume {out} later gives it the "
                        "steps it missed)"]
    assert sorted({s for s, _, _ in read_tensorboard(out)[0]}) == [0, 1]
    monkeypatch.setattr(trackers.TensorBoard, "log", real_log)
    train.main(["--resume", out, "--steps", "4"])  # the log's steps 2 and 3 first, then step 4
    assert_holds(read_tensorboard(out)[0], out, rel=1e-6)


@pytest.mark.trackers("tensorboard", "wandb")
def test_overwrite_starts_new_tracker_runs(tmp_path, tiny_model_dir):
    out, flags = tiny_run(tmp_path, tiny_model_dir, "run", "--steps", "1", "--eval-every", "0",
                          "--report-to", "tensorboard,wandb")
    train.main(flags)
    first = json.load(open(os.path.join(out, "trackers.json")))["id"]
    train.main(flags + ["--overwrite"])
    assert json.load(open(os.path.join(out, "trackers.json")))["id"] != first
    assert len(glob.glob(os.path.join(out, "tensorboard", "events.*"))) == 1
    assert read_wandb(out)[1] == {json.load(open(os.path.join(out, "trackers.json")))["id"]}


@pytest.mark.chromium
@pytest.mark.trackers("tensorboard")
def test_the_tensorboard_page_screenshot_shows_the_curves(tmp_path, tiny_model_dir):
    """scripts/screenshot_tensorboard.sh: TensorBoard serves the run, headless Chromium draws its
    SCALARS page with the curves (TensorBoard's orange bar, its first run's line colour)."""
    from tests.test_show import read_png
    out, flags = tiny_run(tmp_path, tiny_model_dir, "run", "--steps", "3", "--report-to", "tensorboard")
    train.main(flags)
    png = str(tmp_path / "curves.png")
    run = subprocess.run(["bash", "scripts/screenshot_tensorboard.sh", out, png, "^(train/loss|eval/reward)$"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHON": sys.executable})  # this environment, .venv or not
    assert run.returncode == 0 and run.stdout.strip() == png, run.stderr[-2000:]
    w, h, bpp, rows = read_png(png)
    pixels = Counter(bytes(r[i:i + 3]) for r in rows for i in range(0, w * bpp, bpp))
    assert (w, h) == (1600, 1080) and pixels[bytes((245, 124, 0))] > 10000  # the page, not a blank one
    assert pixels[bytes((255, 112, 67))] > 100  # the curves are drawn


def test_offline_w_and_b_never_asks_for_its_url(tmp_path, monkeypatch, capsys):
    """Every offline start printed W&B's "URL not available in offline run": the code read run.url."""
    from types import SimpleNamespace

    class Run:
        @property
        def url(self):
            raise AssertionError("run.url read offline")
    fake = SimpleNamespace(init=lambda **k: Run(), Settings=lambda **k: None)
    monkeypatch.setitem(sys.modules, "wandb", fake)
    monkeypatch.setenv("WANDB_MODE", "offline")
    trackers.WandB(str(tmp_path), "abcd1234", {}, None)
    assert "offline; upload it later with: wandb sync" in capsys.readouterr().out


@pytest.mark.trackers("wandb", "trackio")
def test_run_name_and_project_name_the_tracker_runs(tmp_path, tiny_model_dir):
    """--run-name and --project (TRL's and transformers' names) for W&B and Trackio; without them the
    run folder's name and turn-rl."""
    out, flags = tiny_run(tmp_path, tiny_model_dir, "run", "--steps", "1", "--eval-every", "0",
                          "--report-to", "wandb,trackio", "--run-name", "mt-seed-0", "--project", "credit-lab")
    train.main(flags)
    names = []
    read_wandb(out, names)
    assert names == [("credit-lab", "mt-seed-0")]
    got, _ = read_trackio(out, "credit-lab", "mt-seed-0")
    assert {step for step, _, _ in got} == {1}


def test_the_greedy_evaluation_is_kept_and_read_back_as_data(tmp_path):
    """OUT/rollouts/eval_step_N.jsonl: one line per test question, in order; a damaged file is one
    line (and no table: training goes on)."""
    from types import SimpleNamespace
    from machinery import checkpoint
    envs = [SimpleNamespace(question=f"Q{i}?", answers=["A", "B"], completion=[
        {"role": "assistant", "content": "<tool>x</tool>"}, {"role": "user", "content": "doc"},
        {"role": "assistant", "content": f"<answer>{i}</answer>"}]) for i in range(2)]
    checkpoint.save_greedy(envs, "01", str(tmp_path), 4)
    path = tmp_path / "rollouts" / "eval_step_4.jsonl"
    columns, data = rollout_files.greedy_table(str(path))
    assert columns == ["question #", "question", "answers", "episode", "exact match"]
    assert data == [[0, "Q0?", "A | B", "<tool>x</tool> [environment] doc <answer>0</answer>", 0.0],
                    [1, "Q1?", "A | B", "<tool>x</tool> [environment] doc <answer>1</answer>", 1.0]]
    path.write_text('{"question": 3}\n')
    with pytest.raises(SystemExit, match="eval_step_4.jsonl.*question, answers, completion and exact_match"):
        rollout_files.greedy_table(str(path))
    checkpoint.save_greedy([], "", str(tmp_path), 5)  # the games: no file
    assert not (tmp_path / "rollouts" / "eval_step_5.jsonl").exists()
