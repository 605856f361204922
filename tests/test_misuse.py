"""Misuse that must not lose a run or end in a traceback: the run folder's lock and life cycle, a
run's identity on --resume, the checks of every task, and every tool's one-line errors
(scripts/probe_misuse.py runs the same cases end to end on the bundled model)."""
import dataclasses
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

import config
import train
from machinery import checkpoint

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOLD = ("import sys, time; from machinery import checkpoint; checkpoint.claim(sys.argv[1]); print('held', flush=True); "
        "time.sleep(60)")
HOLD_THEN_WRITE = ("import os, sys; from machinery import checkpoint; checkpoint.claim(sys.argv[1]); print('held', flush=True); "
                   "sys.stdin.readline()\ntry:\n    checkpoint.save_rollouts([], None, os.path.join(sys.argv[1], 'rollouts', 'x.jsonl'))\n"
                   "except SystemExit as e:\n    print(e, flush=True)")


def planpath_run(folder, **flags):
    """A Plan-Path run folder as train.py leaves it before its first checkpoint."""
    argv = ["--env", "planpath", "--out", str(folder)] + [x for k, v in flags.items()
                                                            for x in ("--" + k.replace("_", "-"), str(v))]
    os.makedirs(folder, exist_ok=True)
    json.dump(dataclasses.asdict(config.parse_args(argv)), open(os.path.join(folder, "args.json"), "w"))
    open(os.path.join(folder, "log.jsonl"), "w").write('{"step": 0}\n')
    return str(folder)


# ---------------------------------------------------------------- the lock and the folder's life
def test_a_lock_link_in_a_copied_folder_is_never_followed(tmp_path):
    """A run folder from someone else may hold `.lock` as a link to any file: claiming the folder
    must not truncate or write that file."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    run = tmp_path / "run"
    run.mkdir()
    os.symlink(victim, run / ".lock")
    checkpoint.claim(str(run))
    assert victim.read_text() == "precious\n" and os.path.abspath(str(run)) in checkpoint.HELD


def test_a_deleted_live_folder_never_gets_a_second_writer(tmp_path):
    """A trains in RUN; RUN is deleted and a new run makes RUN again. The lock is on the old
    folder's inode, so the new run may start, but A stops at its next write with one line and
    writes nothing into the new folder: never two writers in one folder."""
    run = tmp_path / "run"
    planpath_run(run)
    holder = subprocess.Popen([sys.executable, "-c", HOLD_THEN_WRITE, str(run)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert holder.stdout.readline().strip() == "held"
        shutil.rmtree(run)
        checkpoint.claim(str(run))  # the new run: a new folder, its own lock
        (run / "log.jsonl").write_text("new\n")
        holder.stdin.write("go\n")
        holder.stdin.flush()
        assert holder.stdout.readline() == "\n"  # the line starts on a line of its own, after the progress bar's text
        assert "was deleted or replaced while this run trained" in holder.stdout.readline()
        assert os.listdir(run) == ["log.jsonl"] and (run / "log.jsonl").read_text() == "new\n"
    finally:
        holder.kill()
        holder.wait()
        checkpoint.HELD.pop(os.path.abspath(str(run)), None)


def holding(run, **popen):
    """A child process holding RUN's lock (checkpoint.claim), once it says so."""
    child = subprocess.Popen([sys.executable, "-c", HOLD, str(run)], stdout=subprocess.PIPE, text=True, cwd=ROOT, **popen)
    assert child.stdout.readline().strip() == "held"
    return child


def refused(path, pid):
    """This process cannot lock PATH while the process PID holds it, with one line naming PID."""
    try:
        with pytest.raises(SystemExit, match=rf"is in use by another process \(pid {pid}\)"):
            checkpoint.claim(str(path))
    finally:
        checkpoint.HELD.pop(os.path.abspath(str(path)), None)


def test_one_writer_whoever_asks(tmp_path):
    """The lock is on the run folder itself: with a holder under another XDG_CACHE_HOME, the same
    folder reached through a symlink or a bind mount (where this machine lets the test mount) is
    refused to a second writer."""
    run = tmp_path / "run"
    run.mkdir()
    (tmp_path / "link").symlink_to(run)
    child = holding(run, env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache-a")})
    try:
        refused(run, child.pid)
        refused(tmp_path / "link", child.pid)
        mounted = tmp_path / "mounted"
        mounted.mkdir()
        if subprocess.run(["mount", "--bind", str(run), str(mounted)], capture_output=True).returncode == 0:
            try:
                refused(mounted, child.pid)
            finally:
                subprocess.run(["umount", str(mounted)], check=True)
    finally:
        child.kill()
        child.wait()


FLOCK = ("import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY); "
         "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)")  # what claim takes


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to run a child as another user")
def test_one_writer_across_users():
    """A run that user nobody holds is refused to root (the lock was once under each user's own
    cache folder, so root resumed a run nobody was training). The holder takes the lock as
    checkpoint.claim does, with the system's Python, which that user can run."""
    python = shutil.which("python3", path="/usr/bin:/bin")
    if python is None:
        pytest.skip("no system python3 for user nobody")
    shared = tempfile.mkdtemp(prefix="turn-rl-user-", dir="/tmp")
    os.chmod(shared, 0o777)
    other = subprocess.Popen([python, "-c", FLOCK, shared], stdout=subprocess.PIPE, text=True, user="nobody", cwd="/tmp")
    try:
        assert other.stdout.readline().strip() == "held"
        refused(shared, other.pid)
    finally:
        other.kill()
        other.wait()
        shutil.rmtree(shared)


def test_a_re_pointed_link_or_a_moved_folder_redirects_no_write(tmp_path):
    """--out L, a link to A: after `ln -sfn B L` the rest of a run went into B (no lock there, exit 0).
    The run holds its folder by the path it was given; every kind of write through L stops, names
    A, and B stays empty. A folder moved away is found where it went."""
    a, b, link = tmp_path / "A", tmp_path / "B", tmp_path / "L"
    a.mkdir()
    b.mkdir()
    os.symlink(a, link)
    checkpoint.claim(str(link))
    try:
        checkpoint.save_args({"steps": 1}, str(link))  # through the link while it leads to A: A gets it
        assert (a / "args.json").exists()
        os.remove(link)
        os.symlink(b, link)  # re-pointed
        writes = [lambda: checkpoint.save_args({"steps": 2}, str(link)),
                  lambda: checkpoint.save_json({}, str(link), "trackers.json"),
                  lambda: checkpoint.save_rollouts([], None, os.path.join(link, "rollouts", "step_2.jsonl")),
                  lambda: checkpoint.save_checkpoint({}, None, {}, 2, None, str(link)),
                  lambda: checkpoint.inside(str(link), "log.jsonl")]
        for write in writes:
            with pytest.raises(SystemExit, match=f"the run folder {link} now leads to another folder .*this run's folder "
                                                 f"is {a}: .*--resume {a}"):
                write()
        assert os.listdir(b) == []
        os.remove(link)
        os.symlink(a, link)
        os.rename(a, tmp_path / "A2")  # moved within the file system
        with pytest.raises(SystemExit, match=f"this run's folder is {tmp_path / 'A2'}") as stop:
            checkpoint.save_args({"steps": 3}, str(link))
        assert str(stop.value).startswith("\nthe run folder")  # on its own line, not after the bar's text
    finally:
        os.close(checkpoint.HELD.pop(os.path.abspath(str(link))))


def test_this_run_stops_when_its_folder_is_deleted_or_replaced(tmp_path):
    mine = tmp_path / "mine"
    checkpoint.claim(str(mine))  # this process's own run ...
    shutil.rmtree(mine)  # ... deleted under it
    with pytest.raises(SystemExit, match=f"the run folder {mine} was deleted or replaced while this run trained"):
        checkpoint.save_rollouts([], None, os.path.join(mine, "rollouts", "step_3.jsonl"))
    assert not mine.exists()
    mine.mkdir()  # made again by someone else: not the folder this run claimed
    with pytest.raises(SystemExit, match="was deleted or replaced"):
        checkpoint.save_checkpoint({}, None, {}, 3, None, str(mine))
    assert os.listdir(mine) == []


def test_a_failed_first_save_advises_starting_over(tmp_path, monkeypatch):
    """No checkpoint yet: --resume cannot work, so the line says --overwrite."""
    import random

    def full_disk(*args, **kwargs):
        raise RuntimeError("file write failed")
    monkeypatch.setattr(checkpoint.torch, "save", full_disk)
    monkeypatch.setattr(checkpoint.shutil, "disk_usage", lambda path: type("U", (), {"free": 0})())
    with pytest.raises(SystemExit, match="No checkpoint was saved before: make room, then start again with --overwrite"):
        checkpoint.save_checkpoint({}, None, {}, 1, random.Random(0), str(tmp_path))


# ---------------------------------------------------------------- a run's identity
def test_resume_refuses_a_flag_that_defines_the_run(tmp_path):
    run = planpath_run(tmp_path / "run")
    for flag, value, saved in (("--env", "sokoban", "'planpath'"), ("--algo", "grpo", "'at'"),
                               ("--num-generations", "8", "4"), ("--model", "other", "'smollm2-135m'"),
                               ("--team-alpha", "0.5", "1.0")):
        with pytest.raises(SystemExit):
            config.parse_args(["--resume", run, flag, value])
    err = run_parse(["--resume", run, "--env", "sokoban"])
    assert "--env 'sokoban': the run in" in err and "has 'planpath' (its args.json)" in err
    args = config.parse_args(["--resume", run, "--steps", "99", "--eval-every", "3", "--save-every", "2",
                              "--env", "planpath", "--algo", "auto", "--micro-batch-size", "4"])
    assert (args.steps, args.eval_every, args.save_every, args.env, args.algo) == (99, 3, 2, "planpath", "at")


def run_parse(argv):
    """The last line train.py's parser writes for argv (argparse: usage, then one error line)."""
    p = subprocess.run([sys.executable, "-c", f"import config; config.parse_args({argv!r})"], cwd=ROOT,
                       capture_output=True, text=True)
    assert p.returncode == 2, p.stderr
    return p.stderr.strip().splitlines()[-1]


def test_every_float_flag_refuses_nan_and_infinities():
    floats = [f.name for f in dataclasses.fields(config.Args) if f.type is float]
    assert {"alpha", "team_alpha", "learning_rate", "beta", "temperature"} <= set(floats)
    for name in floats:
        for bad in ("nan", "inf", "-inf"):
            with pytest.raises(SystemExit):
                config.parse_args(["--env", "planpath", f"--{name.replace('_', '-')}={bad}"])
    assert math.isfinite(config.parse_args(["--env", "planpath", "--team-alpha", "0.5"]).team_alpha)


# ---------------------------------------------------------------- every task's context check
class Config:
    def __init__(self, n):
        self.max_position_embeddings = n


class Model:
    def __init__(self, n):
        self.config = Config(n)


@pytest.mark.parametrize("env", ["planpath", "sokoban"])
def test_the_context_check_covers_the_games(env, tokenizer):
    """A larger grid's prompt does not fit a short context: one line before any work."""
    args = config.parse_args(["--env", env, "--size", "9", "--max-solution", "0", "--moves-per-turn", "3"])
    data, pool, test = train.load_task(args)
    train.check_prompts(Model(4096), tokenizer, data, pool, test[:4], args)  # fits
    with pytest.raises(SystemExit, match="does not fit the model's context of 300 tokens .* use a smaller --size"):
        train.check_prompts(Model(300), tokenizer, data, pool, test[:4], args)


# ---------------------------------------------------------------- every tool: one line
def test_evaluate_on_planpath_reports_the_distance(tiny_model_dir, monkeypatch):
    """docs/planpath.md's evaluate command: it ended in KeyError: 'box_distance'."""
    import fast.decode
    from tools import evaluate
    monkeypatch.setattr(fast.decode, "generate_turn", lambda model, tok, prefixes, *a, **k: [[28]] * len(prefixes))
    out = evaluate.main(["--env", "planpath", "--model", tiny_model_dir, "--n", "3", "--bf16", "false"])
    assert out["n"] == 3 and "distance" in out and "box_distance" not in out


@pytest.mark.parametrize("tool", ["evaluate", "show", "compare"])
def test_ctrl_c_and_a_failed_read_in_a_tool_are_one_line(tool, monkeypatch, tmp_path):
    import importlib
    module = importlib.import_module(f"tools.{tool}")
    for error, said in ((KeyboardInterrupt(), "stopped (Ctrl-C)"),
                        (OSError(5, "Input/output error", "runs/x/log.jsonl"), "could not read or write runs/x/log.jsonl")):
        def fail(*a, **k):
            raise error
        monkeypatch.setattr(module.argparse.ArgumentParser, "parse_args", fail)
        monkeypatch.setattr(module.argparse.ArgumentParser, "parse_known_args", fail)
        with pytest.raises(SystemExit) as stop:
            module.main([])
        assert said in str(stop.value) and str(stop.value).strip().count("\n") == 0


def test_a_missing_local_model_folder_is_no_such_folder(tmp_path):
    import policy
    for name in (str(tmp_path / "nothing"), "runs/typo/checkpoint", "./model"):
        with pytest.raises(SystemExit, match=f"--model {name}: no such folder"):
            policy.load_model(name, "cpu")


def test_a_full_disk_during_the_first_conversion_is_one_line(tmp_path, monkeypatch):
    """safetensors raises its own SafetensorError (not an OSError) when the disk is full."""
    import policy
    from conftest import fake_bundled_package
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    fake_bundled_package(monkeypatch, tmp_path)

    class SafetensorError(Exception):
        pass

    def convert(src, folder):
        raise SafetensorError("Error while serializing: IoError(Os { code: 28, kind: StorageFull })")
    monkeypatch.setattr(policy, "convert_gguf", convert)
    with pytest.raises(SystemExit, match=r"^cannot write the converted model to .*\(Error while serializing: "
                                         r"IoError.*\): free space there"):
        policy.bundled_model_dir()


def test_show_tree_on_a_malformed_row_names_the_file_and_line(tmp_path):
    from tools import show
    os.makedirs(tmp_path / "rollouts")
    row = {"group": "level 1 / planner / turn 1", "role": "planner", "rewards": [], "tokens": ["a"], "mask": [1],
           "adv": [0.0], "turn": [1]}
    (tmp_path / "rollouts" / "step_1.jsonl").write_text(json.dumps(row) + "\n")
    with pytest.raises(SystemExit, match=r"step_1.jsonl, line 1: 'rewards' is empty"):
        show.main([str(tmp_path), "--tree"])


# ---------------------------------------------------------------- every documented command
def documented_commands():
    """(doc, script, argv) of every `python FILE ...` line in the code blocks of README.md and docs/."""
    import glob
    import re
    import shlex
    found = []
    for doc in ["README.md", *sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))]:
        text = open(os.path.join(ROOT, doc)).read()
        for block in re.findall(r"```(?:bash|sh)?\n(.*?)```", text, re.S):
            for line in block.replace("\\\n", " ").splitlines():
                m = re.search(r"(?:^|&& )(?:\.venv/bin/)?python3? (\S+\.py)(.*)", line.strip())
                if m:
                    argv = shlex.split(m.group(2), comments=True)
                    found.append((os.path.basename(doc), m.group(1), [a for a in argv if a != "..."]))
    return found


def needs_an_extra(script, argv):
    """A documented command that needs an optional extra: tools/scale_trl.py (requirements-scale.txt),
    or a --report-to naming a tracker (requirements-trackers.txt); the second test checks these."""
    names = argv[argv.index("--report-to") + 1].split(",") if "--report-to" in argv else []
    return script == "tools/scale_trl.py" or any(n not in ("none", "all") for n in names)


class Parsed(Exception):
    """Raised once a command's own parser accepted its flags: the work itself is not run."""


def check_documented(commands):
    """Each (doc, script, argv): FILE exists and its flags parse with FILE's own parser (train.py's
    also pass their checks; the train.py flags after a compare.py `--` too)."""
    import argparse
    import importlib.util
    from unittest import mock
    real = argparse.ArgumentParser.parse_known_args

    def parse_then_stop(self, *a, **k):
        raise Parsed(real(self, *a, **k))
    for doc, script, argv in commands:
        assert os.path.exists(os.path.join(ROOT, script)), f"{doc}: {script} does not exist"
        if script == "train.py" and "--resume" not in argv:
            config.parse_args(argv)
            continue
        if script == "tools/compare.py" and "--" in argv:  # the flags it passes to train.py
            config.parse_args(["--env", argv[argv.index("--env") + 1], *argv[argv.index("--") + 1:]])
        spec = importlib.util.spec_from_file_location("documented_" + os.path.basename(script)[:-3],
                                                      os.path.join(ROOT, script))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        try:
            with mock.patch.object(argparse.ArgumentParser, "parse_known_args", parse_then_stop):
                module.main(argv)
        except Parsed:
            continue
        except SystemExit as e:
            pytest.fail(f"{doc}: python {script} {' '.join(argv)}: {e}")
        pytest.fail(f"{doc}: python {script} {' '.join(argv)} ran without parsing its flags")


@pytest.mark.parametrize("argv", [["speedlab/micro_batch_lever.py", "--sizes", "0", "4"],
                                  ["speedlab/micro_batch_lever.py", "--rounds", "0"],
                                  ["speedlab/heap_lever.py", "--rounds", "0"]])
def test_the_lever_scripts_refuse_nothing_to_time_in_one_line(argv):
    """A size of 0 once made micro_batch_lever's child run the whole sweep, and no rounds left
    the tables empty: both are refused before anything runs."""
    p = subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "at least 1" in p.stderr.splitlines()[-1] and "Traceback" not in p.stderr


def test_every_documented_command_names_a_file_and_its_flags_parse():
    """Each `python FILE ...` of the README and docs/ that needs no optional extra. A renamed file or
    flag in the code fails here until the docs follow."""
    commands = documented_commands()
    assert len(commands) > 50 and {s for _, s, _ in commands} >= {"train.py", "tools/compare.py", "tools/evaluate.py"}
    check_documented([c for c in commands if not needs_an_extra(c[1], c[2])])


@pytest.mark.scale
@pytest.mark.trackers
def test_every_documented_command_that_needs_an_extra_parses():
    """The same for the commands that need TRL or a tracker (CI's second pass, with the extras)."""
    commands = [c for c in documented_commands() if needs_an_extra(c[1], c[2])]
    assert {s for _, s, _ in commands} >= {"tools/scale_trl.py", "train.py"}
    check_documented(commands)


TINY_RUN = ["--steps", "1", "--eval-every", "1", "--eval-n", "2", "--batch-size", "1", "--num-generations", "2",
            "--max-completion-length", "4", "--micro-batch-size", "2", "--bf16", "false", "--warmup-steps", "1"]


def run_documented(commands, tiny_model_dir, tmp_path):
    """Runs each documented `train.py` (but --resume) and `tools/evaluate.py` command of `commands`:
    the same flags, on the tiny model, one step, two test items; the distinct commands run."""
    from tools import evaluate
    seen = set()
    for i, (doc, script, argv) in enumerate(commands):
        if script not in ("train.py", "tools/evaluate.py") or "--resume" in argv or tuple(argv) in seen:
            continue
        seen.add(tuple(argv))
        keep = [a for j, a in enumerate(argv) if a not in ("--model", "--out") and (j == 0 or argv[j - 1] not in ("--model", "--out"))]
        try:
            if script == "train.py":
                train.main(keep + TINY_RUN + ["--model", tiny_model_dir, "--out", str(tmp_path / f"run{i}")])
            else:
                evaluate.main(keep + ["--model", tiny_model_dir, "--n", "2", "--bf16", "false", "--max-completion-length", "4"])
        except SystemExit as e:
            pytest.fail(f"{doc}: python {script} {' '.join(argv)}: {e}")
    return seen


def test_documented_train_and_evaluate_commands_run_on_a_tiny_model(tiny_model_dir, tmp_path):
    """Every documented `train.py` and `tools/evaluate.py` command that needs no extra runs. A
    documented command that crashes fails here."""
    assert len(run_documented([c for c in documented_commands() if not needs_an_extra(c[1], c[2])],
                              tiny_model_dir, tmp_path)) >= 15


@pytest.mark.trackers
def test_documented_train_commands_that_report_to_a_tracker_run_on_a_tiny_model(tiny_model_dir, tmp_path):
    """The same for the documented commands with --report-to a tracker (CI's second pass)."""
    assert len(run_documented([c for c in documented_commands() if needs_an_extra(c[1], c[2])],
                              tiny_model_dir, tmp_path)) >= 1
