"""Runs that lose nothing: checkpoint rotation, corrupt checkpoints, a log cut by a crash, and
flags that are checked before anything is written to the run folder."""
import json
import os
import random
import sys

import pytest
import torch

from machinery import checkpoint
from tools import evaluate
import train
from policy import load_model


@pytest.fixture
def saved(tmp_path, tiny_model_dir):
    """A run folder with checkpoints of steps 2 (checkpoint.old's content) and 4 (checkpoint)."""
    model, tok = load_model(tiny_model_dir, "cpu")
    opt = {"policy": torch.optim.AdamW(model.parameters())}
    out = str(tmp_path / "run")
    for step in (2, 4):
        checkpoint.save_checkpoint({"policy": model}, tok, opt, step, random.Random(step), out)
        if step == 2:
            checkpoint.shutil.copytree(os.path.join(out, "checkpoint"), os.path.join(out, "step2"))
    return out, model, tok, opt


def load(out):
    return checkpoint.load_checkpoint(out, lambda folder: train.load_models(("policy",), folder, "cpu"))


def test_a_half_deleted_old_checkpoint_does_not_stop_later_saves(saved):
    out, model, tok, opt = saved
    os.makedirs(os.path.join(out, "checkpoint.old", "leftover"))  # a kill during rmtree(old)
    open(os.path.join(out, "checkpoint.old", "leftover", "x"), "w").close()
    checkpoint.save_checkpoint({"policy": model}, tok, opt, 6, random.Random(6), out)
    assert load(out)[3]["step"] == 6 and not os.path.exists(os.path.join(out, "checkpoint.old"))


def test_a_crash_between_the_renames_resumes_from_the_old_checkpoint(saved):
    out = saved[0]
    os.replace(os.path.join(out, "checkpoint"), os.path.join(out, "checkpoint.old"))
    os.makedirs(os.path.join(out, "checkpoint.tmp"))  # a save that died half-way is ignored
    folder, _, _, state = load(out)
    assert folder.endswith("checkpoint.old") and state["step"] == 4


@pytest.mark.parametrize("broken", ["model.safetensors", "trainer_state.pt"])
def test_a_corrupt_checkpoint_falls_back_to_the_previous_one(saved, broken, capsys):
    out = saved[0]
    os.rename(os.path.join(out, "step2"), os.path.join(out, "checkpoint.old"))  # as after a kill
    path = os.path.join(out, "checkpoint", broken)
    data = open(path, "rb").read()
    open(path, "wb").write(data[:len(data) // 3])  # truncated
    folder, models, _, state = load(out)
    assert folder.endswith("checkpoint.old") and state["step"] == 2
    assert "skipped an unreadable checkpoint" in capsys.readouterr().out
    import shutil
    shutil.rmtree(os.path.join(out, "checkpoint.old"))
    with pytest.raises(SystemExit, match="no readable checkpoint"):
        load(out)


def test_truncate_log_drops_later_and_cut_lines_and_replaces_the_file(tmp_path):
    path = str(tmp_path / "log.jsonl")
    lines = [json.dumps({"step": s, "reward": s / 10}) + "\n" for s in range(4)]
    open(path, "w").write("".join(lines) + '{"step": 4, "rew')  # the last line cut by a kill
    records, _ = checkpoint.truncate_log(path, 2)
    assert [r["step"] for r in records] == [0, 1, 2]
    assert open(path).read() == "".join(lines[:3]) and not os.path.exists(path + ".tmp")
    checkpoint.truncate_log(path, 2)
    assert open(path).read() == "".join(lines[:3])


BAD_FLAGS = [("--batch-size", "0"), ("--num-generations", "1"), ("--num-iterations", "0"),
             ("--steps", "-1"), ("--save-every", "0"), ("--eval-n", "0"), ("--micro-batch-size", "0"),
             ("--max-completion-length", "0"), ("--temperature", "0"), ("--top-k", "0"),
             ("--max-words", "0"), ("--top-p", "0"), ("--size", "2")]


@pytest.mark.parametrize("flag,value", BAD_FLAGS)
def test_a_bad_flag_is_one_clear_error(flag, value, capsys):
    with pytest.raises(SystemExit):
        train.parse_args([flag, value])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"{flag} is " in err and "must be" in err


def make_run(tmp_path, args=None, checkpoint_folder=False):
    run = tmp_path / "run"
    os.makedirs(run / "checkpoint" if checkpoint_folder else run)
    (run / "args.json").write_text(json.dumps(args or {"batch_size": 2}))
    (run / "log.jsonl").write_text('{"step": 0}\n')
    return run


def test_nothing_is_written_when_the_model_cannot_load(tmp_path):
    run = make_run(tmp_path)
    with pytest.raises(SystemExit, match="not a model"):
        train.main(["--out", str(run), "--overwrite", "--model", str(tmp_path)])
    assert json.loads((run / "args.json").read_text()) == {"batch_size": 2}
    assert (run / "log.jsonl").read_text() == '{"step": 0}\n'


def test_a_bad_flag_with_resume_is_not_saved(tmp_path):
    run = make_run(tmp_path, dict(vars(train.parse_args([]))))
    before = (run / "args.json").read_text()
    with pytest.raises(SystemExit):
        train.main(["--resume", str(run), "--batch-size", "0"])
    assert (run / "args.json").read_text() == before


def test_an_existing_run_is_not_overwritten_without_resume(tmp_path):
    run = make_run(tmp_path, checkpoint_folder=True)
    with pytest.raises(SystemExit, match=f"continue it with --resume {run}"):
        train.main(["--out", str(run)])
    assert (run / "log.jsonl").read_text() == '{"step": 0}\n'
    with pytest.raises(SystemExit, match="is a file"):
        train.main(["--out", str(run / "log.jsonl")])


def test_a_batch_larger_than_the_training_set_is_refused(tmp_path):
    qs = tmp_path / "qs.jsonl"
    qs.write_text('{"question": "Who?", "answers": ["A"]}\n')
    with pytest.raises(SystemExit, match="more than the 1 training questions"):
        train.main(["--train-questions", str(qs), "--test-questions", str(qs), "--out", str(tmp_path / "o")])
    assert not os.path.exists(tmp_path / "o")


def test_a_test_split_smaller_than_eval_n_is_said(tmp_path, tiny_model_dir, capsys):
    qs, corpus = tmp_path / "qs.jsonl", tmp_path / "corpus.jsonl"
    qs.write_text('{"question": "Who?", "answers": ["A"]}\n' * 2)
    corpus.write_text('{"title": "A", "text": "A is a letter."}\n')
    train.main(["--train-questions", str(qs), "--test-questions", str(qs), "--corpus", str(corpus),
                "--model", tiny_model_dir, "--batch-size", "1", "--steps", "1", "--eval-n", "5",
                "--num-generations", "2", "--max-completion-length", "4", "--bf16", "false",
                "--out", str(tmp_path / "o")])
    note = "the test split has only 2 items; each evaluation uses them all, not --eval-n 5"
    assert note in capsys.readouterr().err


def test_task_flags_of_a_run_do_not_leak_into_the_other_task(tmp_path):
    run = make_run(tmp_path, {"env": "search", "prefill": "<reasoning>", "top_k": 3}, checkpoint_folder=True)
    ours, args = evaluate.parse_args(["--env", "sokoban", "--model", str(run / "checkpoint")])
    assert args.env == "sokoban" and args.prefill == "<answer>"
    ours, args = evaluate.parse_args(["--model", str(run / "checkpoint")])
    assert args.env == "search" and args.prefill == "<reasoning>" and args.top_k == 3


def test_a_per_role_checkpoint_on_search_names_the_problem(tmp_path):
    for role in ("planner", "executor"):
        os.makedirs(tmp_path / "ckpt" / role)
    args = train.parse_args([])
    with pytest.raises(SystemExit, match=r"one model per role \(a per-role run of --env sokoban or sudoku or planpath\)"):
        evaluate.load_policy(str(tmp_path / "ckpt"), args, "cpu")


def test_a_dead_retrieval_server_stops_the_run_before_it_starts(tmp_path):
    with pytest.raises(SystemExit, match="start the retrieval server or drop --retriever-url"):
        train.main(["--retriever-url", "http://127.0.0.1:9", "--out", str(tmp_path / "o")])
    assert not os.path.exists(tmp_path / "o")


# ---------------------------------------------------------------- one writer, files as data
HOLD = ("import sys, time; from machinery import checkpoint; checkpoint.claim(sys.argv[1]); print('held', flush=True); "
        "time.sleep(60)")


def test_a_run_folder_has_one_writer_and_a_dead_writer_holds_nothing(tmp_path):
    import subprocess
    import sys
    run = make_run(tmp_path, dict(vars(train.parse_args([]))))
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(run)], stdout=subprocess.PIPE, text=True,
                              cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        assert holder.stdout.readline().strip() == "held"
        for argv in (["--resume", str(run)], ["--out", str(run), "--overwrite"]):
            with pytest.raises(SystemExit, match=rf"is in use by another process \(pid {holder.pid}\)"):
                train.main(argv)
        assert (run / "log.jsonl").read_text() == '{"step": 0}\n'
    finally:
        holder.kill()
        holder.wait()
    checkpoint.claim(str(run))  # the kernel released the killed holder's lock
    assert os.path.abspath(str(run)) in checkpoint.HELD


def test_a_pickle_in_the_trainer_state_runs_nothing(saved, tmp_path):
    out = saved[0]
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    torch.save({"step": 4, "optimizers": {}, "torch_rng": Payload(), "data_rng": None},
               os.path.join(out, "checkpoint", "trainer_state.pt"))
    with pytest.raises(SystemExit, match="no readable checkpoint"):
        load(out)
    assert not marker.exists()


def test_a_checkpoint_state_of_the_wrong_shape_is_skipped(saved):
    out = saved[0]
    torch.save({"step": "4"}, os.path.join(out, "checkpoint", "trainer_state.pt"))
    with pytest.raises(SystemExit, match="lacks step, optimizers"):
        load(out)


@pytest.mark.parametrize("edit, message", [
    (lambda a: {**a, "one_shot": "false"}, "one_shot is 'false', not JSON true or false"),
    (lambda a: {**a, "batch_size": 2.5}, "batch_size is 2.5, not an integer"),
    (lambda a: {**a, "steps": True}, "steps is True, not an integer"),
    (lambda a: {**a, "colour": "red"}, "unknown key 'colour'"),
    (lambda a: {k: v for k, v in a.items() if k not in ("train_questions", "test_questions")},
     "lacks train_questions, test_questions"),
    (lambda a: [a], "must hold a JSON object, not a list"),
    # a value of the right type that a flag would refuse: args.json and its key, not argparse's usage block
    (lambda a: {**a, "learning_rate": float("nan")}, r"args.json: learning_rate is nan \(--learning-rate is nan; "),
    (lambda a: {**a, "report_to": "mlflow"}, r"args.json: report_to is 'mlflow' \(--report-to mlflow: "),
    (lambda a: {**a, "levels": "public"}, r"args.json: levels is 'public' \(--levels public .*needs --env planpath"),
    (lambda a: {**a, "max_calls": 0}, r"args.json: max_calls is 0 \(--max-calls is 0; it must be at least 1\); fix it"),
])
def test_args_json_is_checked_like_the_command_line_on_resume(tmp_path, edit, message):
    run = make_run(tmp_path, edit(dict(vars(train.parse_args([])))))
    before = (run / "args.json").read_text()
    with pytest.raises(SystemExit, match=message):
        train.main(["--resume", str(run)])
    assert (run / "args.json").read_text() == before


@pytest.mark.parametrize("text, problem", [("", "bad JSON"), ("{", "bad JSON"), ("\xff", "not UTF-8")])
def test_unreadable_args_json_is_one_line(tmp_path, text, problem):
    run = make_run(tmp_path)
    (run / "args.json").write_bytes(text.encode("latin-1"))
    with pytest.raises(SystemExit, match=f"args.json: {problem}.*; restore it or start a new run"):
        train.parse_args(["--resume", str(run)])


@pytest.mark.parametrize("lines, problem", [('[1]\n', "line 1: expected a JSON object"),
                                            ('{"step": 0}\n{"reward": 1}\n', "line 2: missing key 'step'"),
                                            ('{"step": 0}\n{"step": 1\n{"step": 2}\n', "line 2: bad JSON")])
def test_a_damaged_log_stops_a_resume_with_the_line_named(tmp_path, lines, problem):
    path = tmp_path / "log.jsonl"
    path.write_text(lines)
    with pytest.raises(SystemExit, match=f"log.jsonl, {problem}.*fix or delete that line"):
        checkpoint.truncate_log(str(path), 5)
    assert path.read_text() == lines


def test_a_run_without_a_checkpoint_is_not_overwritten_and_overwrite_clears_it(tmp_path):
    run = make_run(tmp_path)  # a finished run whose checkpoint was deleted to save disk
    os.makedirs(run / "rollouts")
    (run / "rollouts" / "step_1.jsonl").write_text("{}\n")
    with pytest.raises(SystemExit, match=r"holds a run \(log.jsonl, rollouts\): continue it with --resume"):
        train.main(["--out", str(run), "--model", "/not/a/model"])
    assert (run / "log.jsonl").read_text() == '{"step": 0}\n'
    checkpoint.start_over(str(run))
    assert sorted(os.listdir(run)) == ["args.json"]


@pytest.mark.parametrize("argv, message", [
    (["--out", ""], "--out is empty"),
    (["--out", "{run}", "--overwrite"], "rollouts should be a folder of the run"),
    (["--resume", "{run}", "--overwrite"], "give one of them"),
])
def test_run_folder_mistakes_are_refused_before_the_model_loads(tmp_path, argv, message, capsys):
    run = make_run(tmp_path, dict(vars(train.parse_args([]))))
    (run / "rollouts").write_text("not a folder")
    with pytest.raises(SystemExit) as stop:
        train.main([a.format(run=run) for a in argv] + ["--model", "/not/a/model"])
    assert message in str(stop.value) + capsys.readouterr().err


def test_a_failed_save_is_one_line_and_keeps_the_previous_checkpoint(saved, monkeypatch):
    out, model, tok, opt = saved

    def full_disk(*args, **kwargs):
        raise RuntimeError("[enforce fail at inline_container.cc:783] . PytorchStreamWriter failed "
                           "writing file data/3: file write failed\nmore lines")
    monkeypatch.setattr(checkpoint.torch, "save", full_disk)
    with pytest.raises(SystemExit, match=r"could not save the checkpoint of step 6 .* file write failed "
                                         r"\(.* GB free there\)\. The previous checkpoint is kept") as stop:
        checkpoint.save_checkpoint({"policy": model}, tok, opt, 6, random.Random(6), out)
    assert "\n" not in str(stop.value) and f"--resume {out}" in str(stop.value)
    assert load(out)[3]["step"] == 4 and not os.path.exists(os.path.join(out, "checkpoint.tmp"))


@pytest.mark.parametrize("error, message", [
    (KeyboardInterrupt(), "stopped (Ctrl-C). Continue with python train.py --resume"),
    (OSError(28, "No space left on device", "runs/x/log.jsonl"),
     "could not write runs/x/log.jsonl: No space left on device; make room"),
])
def test_ctrl_c_and_a_failed_write_end_in_one_line(tmp_path, monkeypatch, error, message):
    run = tmp_path / "run"
    os.makedirs(run / "checkpoint")

    def interrupted(args):
        raise error
    monkeypatch.setattr(train, "train", interrupted)
    with pytest.raises(SystemExit) as stop:
        train.main(["--out", str(run), "--overwrite"])
    assert message in str(stop.value) and str(stop.value).strip().count("\n") == 0


def test_resume_with_another_out_is_refused_before_anything_is_written(tmp_path, capsys):
    """--resume RUN --out OTHER once extended RUN silently and never made OTHER: one line now.
    The same folder named twice (another spelling of the path) is fine."""
    run = make_run(tmp_path, dict(vars(train.parse_args([]))))
    with pytest.raises(SystemExit):
        train.parse_args(["--resume", str(run), "--out", str(tmp_path / "branch"), "--steps", "6"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "continues that run in its own folder, not in --out" in err and "copy the run folder" in err
    assert not (tmp_path / "branch").exists() and (run / "log.jsonl").read_text() == '{"step": 0}\n'
    assert train.parse_args(["--resume", str(run), "--out", str(tmp_path / "." / "run")]).out == str(run)


def test_a_run_from_before_hf_generate_was_dropped_resumes(tmp_path, capsys):
    """--hf-generate (generate with the fast update) is gone: --plain alone chooses the path. A run
    saved with it resumes, the key dropped (it chose how a step is computed, which may change on
    --resume); the flag itself is refused as unknown."""
    run = make_run(tmp_path, {**vars(train.parse_args([])), "hf_generate": True})
    assert train.parse_args(["--resume", str(run), "--steps", "6"]).steps == 6
    with pytest.raises(SystemExit):
        train.parse_args(["--hf-generate"])
    assert "unrecognized arguments: --hf-generate" in capsys.readouterr().err


# ---------------------------------------------------------------- a failed save names its cause
SAVE_IN_A_CHILD = """
import random, resource, signal, sys, torch
sys.path.insert(0, {root!r})
from machinery import checkpoint
from policy import load_model
model, tok = load_model({model!r}, "cpu")
opt = {{"policy": torch.optim.AdamW(model.parameters())}}
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # as Python's own default: a write past the limit fails
resource.setrlimit(resource.RLIMIT_FSIZE, (2 ** 20, 2 ** 20))
checkpoint.save_checkpoint({{"policy": model}}, tok, opt, 1, random.Random(0), {out!r})
"""


def test_a_save_stopped_by_the_file_size_limit_says_so(tmp_path, tiny_model_dir):
    """ulimit -f 1 MB, a real save of a 6 MB model: before, torch's "unexpected pos" and "make room"."""
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = SAVE_IN_A_CHILD.format(root=root, model=tiny_model_dir, out=str(tmp_path / "run"))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert "a file reached the file-size limit of 1048576 bytes (ulimit -f)" in p.stderr
    assert "No checkpoint was saved before: raise it (ulimit -f unlimited), then start again" in p.stderr
    assert "make room" not in p.stderr and "unexpected pos" not in p.stderr


def test_a_save_on_a_full_disk_says_the_disk_is_full(saved, monkeypatch):
    out, model, tok, opt = saved

    def full(*args, **kwargs):  # what torch says on a full disk names no cause
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 320 vs 214")
    monkeypatch.setattr(checkpoint.torch, "save", full)
    monkeypatch.setattr(checkpoint.shutil, "disk_usage", lambda path: type("U", (), {"free": 10_000_000})())
    with pytest.raises(SystemExit, match=r"step 6 in .*: the disk is full \(0.01 GB free there\)\. The previous "
                                         r"checkpoint is kept: make room, then python train.py --resume"):
        checkpoint.save_checkpoint({"policy": model}, tok, opt, 6, random.Random(6), out)


def test_a_save_on_a_really_full_disk_says_the_disk_is_full(tmp_path, tiny_model_dir):
    """A 4 MB tmpfs (needs root and mount; skipped elsewhere) and a real save of a 6 MB model."""
    import subprocess
    disk = tmp_path / "small"
    disk.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)],
                                           capture_output=True).returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    try:
        model, tok = load_model(tiny_model_dir, "cpu")
        with pytest.raises(SystemExit, match=r"the disk is full \(0.00 GB free there\)\. No checkpoint was saved "
                                             r"before: make room, then start again with --overwrite"):
            checkpoint.save_checkpoint({"policy": model}, tok, {}, 1, random.Random(0), str(disk / "run"))
        assert not os.path.exists(disk / "run" / "checkpoint.tmp")
    finally:
        subprocess.run(["umount", str(disk)])


def test_a_save_whose_folder_another_program_deleted_says_so(saved, monkeypatch):
    """A second writer removed checkpoint.tmp mid-save: the fix is to stop it, not to make room."""
    out, model, tok, opt = saved

    def deleted_under_us(obj, path, **kwargs):
        checkpoint.shutil.rmtree(os.path.dirname(path))
        raise RuntimeError("Parent directory checkpoint.tmp does not exist.")
    monkeypatch.setattr(checkpoint.torch, "save", deleted_under_us)
    with pytest.raises(SystemExit) as stop:
        checkpoint.save_checkpoint({"policy": model}, tok, opt, 6, random.Random(6), out)
    assert ("checkpoint.tmp was deleted while it was written: another program works in this folder. The "
            "previous checkpoint is kept: stop it (a second train.py, a clean-up script), then") in str(stop.value)
    assert "make room" not in str(stop.value)


def test_a_resume_notes_the_steps_whose_log_lines_a_power_cut_lost(tmp_path, capsys):
    """A power cut can zero the last block of a file: the lines of steps 3 and 4 are gone, the
    checkpoint of step 4 is whole. The resume says so; the log keeps lines 0-2 and the gap."""
    path = tmp_path / "log.jsonl"
    lines = "".join(json.dumps({"step": s, "reward": s / 10}) + "\n" for s in range(5))
    keep = len("".join(json.dumps({"step": s, "reward": s / 10}) + "\n" for s in range(3)))
    path.write_bytes(lines[:keep].encode() + b"\0" * (len(lines) - keep))
    records, _ = checkpoint.truncate_log(str(path), 4)
    assert [r["step"] for r in records] == [0, 1, 2]
    assert "has no line for step 3, 4 (lost in a crash" in capsys.readouterr().out
    checkpoint.truncate_log(str(path), 2)  # nothing lost up to step 2: nothing said
    assert capsys.readouterr().out == ""


def test_a_gpus_random_state_is_saved_and_restored(tmp_path, tiny_model_dir, monkeypatch):
    """On a GPU the decode loop draws its tokens from the GPU's own generator: a checkpoint keeps
    its state beside the CPU's, and --resume sets it back (else the resumed run samples other
    tokens than the uninterrupted one; tests/test_cuda.py checks it on a GPU). Staged here on a
    CPU with torch.cuda's state functions faked."""
    gpu = [torch.tensor([7, 8, 9], dtype=torch.uint8)]
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: gpu)
    model, tok = load_model(tiny_model_dir, "cpu")
    opt = {"policy": torch.optim.AdamW(model.parameters())}
    out = str(tmp_path / "run")
    checkpoint.save_checkpoint({"policy": model}, tok, opt, 3, random.Random(3), out)
    state = load(out)[3]
    assert [t.tolist() for t in state["cuda_rng"]] == [[7, 8, 9]]
    restored = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "set_rng_state_all", lambda states: restored.extend(states))
    assert checkpoint.restore(state, opt, random.Random()) == 3
    assert [t.tolist() for t in restored] == [[7, 8, 9]]
    restored.clear()
    checkpoint.restore({**state, "cuda_rng": []}, opt, random.Random())  # saved on a CPU, or before the key
    assert restored == []


@pytest.mark.parametrize("target", ["log.jsonl", "rollouts", "checkpoint.old",
                                    *(pytest.param(t, marks=pytest.mark.trackers("tensorboard")) for t in ("trackers.json", "tensorboard"))])
def test_a_folder_replaced_under_a_write_receives_nothing(tmp_path, tiny_model_dir, monkeypatch, target):
    """The folder replaced (rm -rf, mkdir) right after a write's check that it is still the run's,
    before the write itself, at each kind of write: the log line, the rollouts, the checkpoint (after
    its last path is taken), the trackers' state and TensorBoard's folder. Every write goes through the held folder
    (checkpoint.inside), so the new folder stays empty, and the run stops with the one line."""
    import shutil
    out = tmp_path / "run"
    real, done = checkpoint.inside, []

    def replaced_after_the_check(folder, *names):
        path = real(folder, *names)  # the check passes, then the folder is replaced
        writing = sys._getframe(1).f_code.co_name != "start_over"  # a write, not the clean-up of a new run
        step_1 = names[0] != "log.jsonl" or (out / "rollouts").exists()  # the log: step 1's line
        if names[0] == target and writing and step_1 and not done:
            done.append(1)
            shutil.rmtree(out)
            out.mkdir()
        return path
    monkeypatch.setattr(checkpoint, "inside", replaced_after_the_check)
    flags = ["--model", tiny_model_dir, "--steps", "2", "--batch-size", "1", "--num-generations", "2",
             "--max-completion-length", "4", "--eval-every", "0", "--save-every", "1", "--bf16", "false",
             "--out", str(out), "--report-to", "tensorboard" if target in ("trackers.json", "tensorboard") else "none"]
    with pytest.raises(SystemExit, match="was deleted or replaced while this run trained"):
        train.main(flags)
    assert done and os.listdir(out) == []


@pytest.mark.parametrize("flag, value", [("--max-calls", "3"), ("--levels", "public")])
def test_a_run_from_before_a_flag_keeps_that_flags_default(tmp_path, capsys, flag, value):
    """A run saved before --max-calls (or --levels) existed ran with its default: --resume keeps it,
    and giving another value is refused like any flag of the run's identity (before: episodes went
    from 2 turns to 4 in mid-run)."""
    key = flag[2:].replace("-", "_")
    saved = {k: v for k, v in vars(train.parse_args([])).items() if k != key}
    run = make_run(tmp_path, saved)
    resumed = train.parse_args(["--resume", str(run)])
    assert getattr(resumed, key) == getattr(train.parse_args([]), key)
    with pytest.raises(SystemExit):
        train.parse_args(["--resume", str(run), flag, value])
    err = capsys.readouterr().err
    assert f"{flag} " in err and "--resume keeps a run's settings" in err
    train.parse_args(["--resume", str(run), "--plain", "true", "--report-to", "none"])  # these may change


BLOCKS = dict(f_frsize=4096, f_blocks=10 ** 6, f_bfree=10 ** 6, f_bavail=10 ** 6)  # 4 GB free, for shutil.disk_usage


def test_out_of_inodes_is_said_as_such(tmp_path, monkeypatch):
    """ENOSPC with gigabytes free: the file system has no inode left (many small files), which
    "the disk is full (0.19 GB free)" misnamed."""
    from types import SimpleNamespace
    monkeypatch.setattr(checkpoint.os, "statvfs", lambda path: SimpleNamespace(f_files=1000, f_favail=0, **BLOCKS))
    cause, fix = checkpoint.why_not_saved(OSError(28, "No space left on device"), str(tmp_path / "tmp"), False, str(tmp_path))
    assert cause.startswith("the disk has no inode left: no file can be made there") and "small ones" in fix
    monkeypatch.setattr(checkpoint.os, "statvfs", lambda path: SimpleNamespace(f_files=1000, f_favail=10, **BLOCKS))
    assert checkpoint.why_not_saved(OSError(28, "No space"), str(tmp_path / "tmp"), False, str(tmp_path))[0].startswith(
        "the disk is full")


def test_a_failed_json_write_leaves_no_tmp_file(tmp_path, monkeypatch):
    """A full disk at --resume left args.json.tmp behind (half written); the old args.json stays."""
    (tmp_path / "args.json").write_text('{"steps": 3}')

    def full(record, f, indent=None):
        f.write('{"ste')
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(checkpoint.json, "dump", full)
    with pytest.raises(OSError):
        checkpoint.save_args({"steps": 4}, str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == ["args.json"] and (tmp_path / "args.json").read_text() == '{"steps": 3}'
