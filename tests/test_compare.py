"""tools/compare.py: the resume decision, the args check, the report (a hand-checked cell), the
optional plots, and one end-to-end comparison on a tiny model that is then extended."""
import dataclasses
import json
import os
import shutil
import sys

import pytest

from tools import compare
import train


def make_run(folder, algo, env="search", log=(), checkpoint=None, name=None, **flags):
    """A run folder as train.py leaves it: args.json, log.jsonl, maybe checkpoint/trainer_state.pt."""
    run = os.path.join(folder, name or algo)
    os.makedirs(run, exist_ok=True)
    argv = ["--env", env, "--algo", algo, "--out", run]
    for k, v in flags.items():
        argv += ["--" + k.replace("_", "-"), str(v)]
    json.dump(dataclasses.asdict(train.parse_args(argv)), open(os.path.join(run, "args.json"), "w"))
    with open(os.path.join(run, "log.jsonl"), "w") as f:
        f.writelines(json.dumps(l) + "\n" for l in log)
    if checkpoint:
        os.makedirs(os.path.join(run, checkpoint))
        open(os.path.join(run, checkpoint, "trainer_state.pt"), "w").close()
    return run


def want(run, algo="mt", env="search", *flags):
    return train.parse_args(["--env", env, "--algo", algo, "--out", run, *flags])


def search_log(steps, offset=0.0):
    """Evaluations at 0, 3, 6 and one training line per step, with values easy to check by hand."""
    log = [{"step": 0, "eval_reward": 0.5, "eval_exact_match_rate": 0.1, "t_eval": 10.0}]
    for s in range(1, steps + 1):
        line = {"step": s, "reward": s / 10 + offset, "exact_match_rate": s / 100, "tool_execution_rate": 1.0,
                "t_generate": 1.0, "t_reference": 0.0, "t_update": 2.0, "groups": 4, "zero_adv_groups": s / 8}
        if s % 3 == 0:
            line.update(eval_reward=0.5 + s / 10, eval_exact_match_rate=0.1 + s / 10 + offset, t_eval=10.0)
        log.append(line)
    return log


def test_plan_fresh_resume_done_and_extend(tmp_path):
    assert compare.plan(str(tmp_path / "mt"), want(str(tmp_path / "mt"))) == "fresh"
    log2 = [{"step": 0}, {"step": 1}, {"step": 2}]
    run = make_run(tmp_path / "a", "mt", log=log2, checkpoint="checkpoint", steps=4)
    assert compare.plan(run, want(run, "mt", "search", "--steps", "4")) == "resume"
    run = make_run(tmp_path / "b", "mt", log=log2, checkpoint="checkpoint.old", steps=4)
    assert compare.plan(run, want(run, "mt", "search", "--steps", "4")) == "resume"
    run = make_run(tmp_path / "c", "mt", log=log2, steps=4)  # crashed before the first save, or checkpoint deleted
    assert compare.plan(run, want(run, "mt", "search", "--steps", "4")) == "kept"
    assert compare.plan(run, want(run, "mt", "search", "--steps", "4"), restart=True) == "fresh"
    run = make_run(tmp_path / "d", "mt", log=log2, checkpoint="checkpoint", steps=2)
    assert compare.plan(run, want(run, "mt", "search", "--steps", "2")) == "done"
    assert compare.plan(run, want(run, "mt", "search", "--steps", "6")) == "resume"  # extend the run


def test_a_folder_run_with_other_flags_is_a_clear_error(tmp_path):
    run = make_run(tmp_path, "at", "sokoban", log=[{"step": 0}], checkpoint="checkpoint", learning_rate=2e-5)
    with pytest.raises(SystemExit, match=r"at was run with learning_rate 2e-05, you asked 1e-05: use another --out"):
        compare.plan(run, want(run, "at", "sokoban", "--learning-rate", "1e-5"))
    with pytest.raises(SystemExit, match="--algo is set by tools/compare.py"):
        compare.main(["--env", "sokoban", "--out", str(tmp_path), "--", "--algo", "grpo"])


def test_commands_for_fresh_resumed_and_finished_runs(tmp_path, monkeypatch):
    out = str(tmp_path)
    make_run(out, "or", log=search_log(6), checkpoint="checkpoint", steps=6, seed=3)
    make_run(out, "mr", log=search_log(4), checkpoint="checkpoint", steps=6, seed=3)
    calls = []
    monkeypatch.setattr(compare, "execute", lambda cmd, out_file, threads, echo: calls.append(
        (cmd, out_file, threads, echo)) or (0, 1.0))
    monkeypatch.setattr(compare, "plot", lambda *a: None)
    compare.main(["--env", "search", "--out", out, "--jobs", "2", "--", "--steps", "6", "--seed", "3"])
    cmds = {c[0][c[0].index("--algo") + 1]: c for c in calls}
    assert sorted(cmds) == ["mr", "mt"]  # or is done
    assert cmds["mr"][0][-6:] == ["--resume", os.path.join(out, "mr"), "--steps", "6", "--seed", "3"]
    assert cmds["mt"][0][-7:] == ["--out", os.path.join(out, "mt"), "--overwrite", "--steps", "6", "--seed", "3"]
    assert cmds["mt"][0][:2] == [sys.executable, os.path.join(compare.ROOT, "train.py")]
    assert all(c[2] == max(1, os.cpu_count() // 2) and c[3] is False for c in calls)  # threads split
    assert cmds["mt"][1] == os.path.join(out, "mt.out")


def test_a_run_with_a_log_but_no_checkpoint_is_kept_not_overwritten(tmp_path, monkeypatch, capsys):
    """A finished run whose checkpoint was deleted to save disk, extended with more steps: it
    cannot resume, and starting it over would delete its log and rollouts. It is reported and
    left as it is; --restart starts it over."""
    out = str(tmp_path)
    run = make_run(out, "mt", log=search_log(6), steps=6, seed=3)
    os.makedirs(os.path.join(run, "rollouts"))
    before = open(os.path.join(run, "log.jsonl")).read()
    calls = []
    monkeypatch.setattr(compare, "execute", lambda cmd, *a, **k: calls.append(cmd) or (0, 1.0))
    monkeypatch.setattr(compare, "plot", lambda *a: None)
    compare.main(["--env", "search", "--out", out, "--algos", "mt", "--", "--steps", "9", "--seed", "3"])
    assert calls == [] and open(os.path.join(run, "log.jsonl")).read() == before
    assert f"{run} has a log to step 6 but no checkpoint: delete it or give --restart" in capsys.readouterr().out
    compare.main(["--env", "search", "--out", out, "--algos", "mt", "--restart", "--", "--steps", "9", "--seed", "3"])
    assert "--overwrite" in calls[0]


def test_execute_tees_the_output_and_sets_the_threads(tmp_path, capfd):
    cmd = [sys.executable, "-c", "import os; print('thread', os.environ['OMP_NUM_THREADS'])"]
    code, seconds = compare.execute(cmd, str(tmp_path / "x.out"), 3, echo=True)
    assert code == 0 and seconds > 0
    assert "thread 3" in capfd.readouterr().out
    assert open(tmp_path / "x.out").read().endswith("thread 3\n")


def test_report_table_cells_by_hand(tmp_path, monkeypatch, capsys):
    out = str(tmp_path)
    make_run(out, "or", log=search_log(6), steps=6)
    make_run(out, "mt", log=search_log(6, offset=1.0), steps=6, learning_rate=2e-5)
    monkeypatch.setattr(compare, "execute", lambda *a: pytest.fail("--report-only ran something"))
    monkeypatch.setattr(compare, "plot", lambda *a: None)
    compare.main(["--env", "search", "--out", out, "--report-only"])
    text = open(os.path.join(out, "results.md")).read()
    assert text in capsys.readouterr().out
    assert text.startswith("# GRPO-OR vs MT-GRPO (search)\n")  # GRPO-MR has no run: the title leaves it out
    assert "| greedy eval on test | GRPO-OR step 0 | GRPO-OR step 6 | MT-GRPO step 0 | MT-GRPO step 6 |" in text
    # MT-GRPO exact match at step 6: 0.1 + 6/10 + 1.0; GRPO-MR has no run: no columns
    assert "| exact match rate | 0.100 | 0.700 | 0.100 | 1.700 |" in text
    # training mean over the last third (steps 5 and 6): reward (0.5 + 0.6) / 2 (+ 1.0 for MT-GRPO)
    assert "| training mean (sampled), last third | GRPO-OR steps 5–6 | GRPO-MR | MT-GRPO steps 5–6 |" in text
    assert "| total reward (max 2.6) | 0.550 | — | 1.550 |" in text
    assert "Rates are fractions of the maximum; rewards are in reward units." in text
    # the signal meter over the last third: 4 groups a step, zero-advantage fraction (5/8 + 6/8) / 2
    assert "| groups per step | 4.000 | — | 4.000 |" in text
    assert "| zero-advantage groups (no gradient) | 0.688 | — | 0.688 |" in text
    # time: 6 steps x 3 s + 3 evaluations x 10 s; command: the flags that are not defaults
    assert "| MT-GRPO | 6 | 48 s | `python train.py --env search --algo mt --steps 6 --learning-rate 2e-05 --out " in text
    assert "| GRPO-MR | — | 0 s | not run |" in text


def test_table_without_matplotlib(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    make_run(str(tmp_path), "at", "sokoban", log=[{"step": 0, "eval_success": 0.25}])
    compare.main(["--env", "sokoban", "--out", str(tmp_path), "--report-only"])
    assert "pip install -r requirements-plot.txt for the plots" in capsys.readouterr().out
    assert "| success rate | 0.250 |\n" in open(tmp_path / "results.md").read()
    assert not os.path.exists(tmp_path / "compare.png")


@pytest.mark.plot
def test_png_with_matplotlib(tmp_path):
    make_run(str(tmp_path), "or", log=search_log(6), steps=6)
    make_run(str(tmp_path), "mt", log=search_log(6, offset=0.5), steps=6)
    compare.main(["--env", "search", "--out", str(tmp_path), "--report-only"])
    assert open(tmp_path / "compare.png", "rb").read(8) == b"\x89PNG\r\n\x1a\n"


def test_end_to_end_then_extended_on_a_tiny_model(tmp_path, tiny_model_dir):
    """Two AT-GRPO vs GRPO runs of one step side by side, then both extended to two steps:
    the second call resumes each from its checkpoint (about 20 s: four train.py processes)."""
    out = str(tmp_path / "cmp")
    flags = ["--model", tiny_model_dir, "--batch-size", "1", "--num-generations", "2",
             "--max-completion-length", "4", "--eval-every", "1", "--eval-n", "2", "--save-every", "1",
             "--max-turns", "1", "--bf16", "false"]
    compare.main(["--env", "sokoban", "--out", out, "--jobs", "2", "--", *flags, "--steps", "1"])
    compare.main(["--env", "sokoban", "--out", out, "--jobs", "2", "--", *flags, "--steps", "2"])
    for algo in ("at", "grpo"):
        assert [l["step"] for l in compare.read_log(os.path.join(out, algo))] == [0, 1, 2]
        assert "resumed from" in open(os.path.join(out, algo + ".out")).read()
    text = open(os.path.join(out, "results.md")).read()
    assert "| greedy eval on test | GRPO step 0 | GRPO step 2 | AT-GRPO step 0 | AT-GRPO step 2 |" in text
    assert "| success rate |" in text and "--steps 2" in text


def test_seeds_run_one_folder_each_and_report_mean_and_range(tmp_path, monkeypatch):
    out = str(tmp_path)
    for seed, final in ((0, 0.25), (1, 0.5), (2, 0.125)):
        log = [{"step": 0, "eval_success": 0.0, "t_eval": 1.0}, {"step": 4, "success": final, "t_update": 1.0,
                                                                   "eval_success": final, "t_eval": 1.0}]
        make_run(out, "at", "sokoban", log=log, name=f"at-s{seed}", seed=seed)
    calls = []
    monkeypatch.setattr(compare, "execute", lambda cmd, *a, **k: calls.append(cmd) or (0, 1.0))
    monkeypatch.setattr(compare, "plot", lambda *a: None)
    compare.main(["--env", "sokoban", "--out", out, "--seeds", "0", "1", "2", "--algos", "grpo", "--", "--steps", "4"])
    assert sorted(c[c.index("--out") + 1] for c in calls) == [os.path.join(out, f"grpo-s{s}") for s in range(3)]
    assert all(c[-2:] == ["--seed", c[c.index("--out") + 1][-1]] for c in calls)
    compare.main(["--env", "sokoban", "--out", out, "--seeds", "0", "1", "2", "--algos", "at", "--report-only"])
    text = open(os.path.join(out, "results.md")).read()
    # success at step 4: mean of 0.25, 0.5, 0.125 = 0.291667, lowest 0.125, highest 0.5
    assert "| success rate | 0.000 (0.000–0.000) | 0.292 (0.125–0.500) |" in text
    assert "| AT-GRPO seed 2 | 4 |" in text and "(3 seeds)" in text
    compare.main(["--env", "sokoban", "--out", out, "--seeds", "0", "--algos", "at", "--report-only"])
    assert "(1 seed)" in open(os.path.join(out, "results.md")).read()
    with pytest.raises(SystemExit, match="--seed is set by tools/compare.py"):
        compare.main(["--env", "sokoban", "--out", out, "--seeds", "0", "--", "--seed", "1"])
    assert compare.by_step([[{"step": 0, "x": 1}, {"step": 2, "x": 3}], [{"step": 2, "x": 5}]], "x") == [(2, [3, 5])]


def test_paired_difference_by_hand():
    assert compare.paired_difference(["1111"], ["0000"]) == (1.0, 1.0, 1.0)
    assert compare.paired_difference(["1010", "0110"], ["1010", "0110"]) == (0.0, 0.0, 0.0)
    # one seed, differences 1, 0, 0, 0: the mean of 4 draws is 0 with probability 0.32 and at most
    # 0.5 with probability 0.95, so the 2.5 % and 97.5 % points are 0 and 0.75
    assert compare.paired_difference(["1000"], ["0000"]) == (0.25, 0.0, 0.75)
    # pairing: each seed's questions are compared with the same seed's (not 0.5 from the rates alone)
    assert compare.paired_difference(["10", "01"], ["01", "10"])[0] == 0.0


def test_search_report_gives_intervals_for_the_pairs(tmp_path, monkeypatch):
    out = str(tmp_path)
    for algo, each in (("or", ["0000", "0001"]), ("mr", ["0100", "0101"]), ("mt", ["1100", "1101"])):
        for seed in (0, 1):
            log = search_log(3)
            log[-1]["eval_exact_match_each"] = each[seed]
            make_run(out, algo, log=log, name=f"{algo}-s{seed}", seed=seed)
    monkeypatch.setattr(compare, "plot", lambda *a: None)
    compare.main(["--env", "search", "--out", out, "--seeds", "0", "1", "--report-only"])
    text = open(os.path.join(out, "results.md")).read()
    # MT - MR: question 1 is right for MT only, on both seeds: 2 of 8 pairs, mean 0.25
    assert "| MT-GRPO − GRPO-MR | +0.250 |" in text and "| 2 × 4 |" in text
    assert "| MT-GRPO − GRPO-OR | +0.500 |" in text and "| GRPO-MR − GRPO-OR | +0.250 |" in text
    make_run(out, "mr", log=search_log(3), name="mr-s1", seed=1)  # a run without per-question results
    compare.main(["--env", "search", "--out", out, "--seeds", "0", "1", "--report-only"])
    text = open(os.path.join(out, "results.md")).read()  # MR - OR over seed 0 only: 1 of 4 questions
    assert "| GRPO-MR − GRPO-OR | +0.250 | +0.000 to +0.750 | 1 × 4 |" in text
    assert "| MT-GRPO − GRPO-OR | +0.500 |" in text and "| MT-GRPO − GRPO-MR | +0.250 | +0.000 to +0.750 | 1 × 4 |" in text
    for algo in ("mt", "mr"):  # seed 1 of MT and MR not run yet: MT - MR has no seed to pair
        shutil.rmtree(os.path.join(out, f"{algo}-s1"))
    shutil.rmtree(os.path.join(out, "mt-s0"))
    compare.main(["--env", "search", "--out", out, "--seeds", "0", "1", "--report-only"])
    text = open(os.path.join(out, "results.md")).read()
    assert "MT-GRPO − GRPO-MR" not in text and "| GRPO-MR − GRPO-OR | +0.250 |" in text


def test_report_only_on_a_folder_without_runs_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="no run logs of or, mr, mt there"):
        compare.main(["--env", "search", "--out", str(tmp_path / "typo"), "--report-only"])


def test_a_log_cut_by_a_kill_is_read_and_a_damaged_one_is_one_line(tmp_path, monkeypatch, capsys):
    out = str(tmp_path)
    make_run(out, "mt", log=search_log(6), steps=6)
    monkeypatch.setattr(compare, "plot", lambda *a: None)
    with open(os.path.join(out, "mt", "log.jsonl"), "a") as f:
        f.write('{"step": 7, "rew')  # what a kill mid-write leaves; --resume drops it too
    compare.main(["--env", "search", "--out", out, "--algos", "mt", "--report-only"])
    assert "MT-GRPO step 6 |" in capsys.readouterr().out
    with open(os.path.join(out, "mt", "log.jsonl"), "a") as f:
        f.write('\n{"reward": 1}\n')  # the cut line is no longer the last: damage, named
    with pytest.raises(SystemExit, match=r"log.jsonl, line 8: bad JSON .*; fix or delete that run folder"):
        compare.main(["--env", "search", "--out", out, "--algos", "mt", "--report-only"])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_killed_compare_leaves_no_train_running(tmp_path):
    """The parent stands for tools/compare.py: SIGKILL it, and its child (standing for train.py) ends."""
    import signal
    import subprocess
    import time
    parent = subprocess.Popen([sys.executable, "-c",
                               "import subprocess, sys, time\nfrom tools import compare\n"
                               "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], "
                               "preexec_fn=compare.die_with_parent)\n"
                               "print(child.pid, flush=True)\ntime.sleep(60)"],
                              stdout=subprocess.PIPE, text=True, cwd=compare.ROOT)
    child = int(parent.stdout.readline())
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    for _ in range(50):
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(child, signal.SIGKILL)
    pytest.fail("the child outlived its parent")


@pytest.mark.parametrize("damage, message", [
    (lambda run: open(os.path.join(run, "log.jsonl"), "a").write("[1]\n"), "log.jsonl, line 8: expected a JSON object"),
    (lambda run: open(os.path.join(run, "log.jsonl"), "a").write('{"reward": 1}\n'), "line 8: missing key 'step'"),
    (lambda run: open(os.path.join(run, "log.jsonl"), "a").write('{"step": 7, "reward": "high"}\n'),
     "line 8: 'reward' must be a number, got str"),
    (lambda run: open(os.path.join(run, "log.jsonl"), "a").write('{"step": 7, "t_update": null}\n'),
     "line 8: 't_update' must be a number, got NoneType"),
    (lambda run: open(os.path.join(run, "log.jsonl"), "a").write('{"step": 7, "eval_exact_match_each": "01x"}\n'),
     "line 8: 'eval_exact_match_each' must be a string of 0s and 1s"),
    (lambda run: os.remove(os.path.join(run, "log.jsonl")) or os.mkdir(os.path.join(run, "log.jsonl")),
     "log.jsonl is a folder, not a JSONL file"),
    (lambda run: json.dump({"algo": "mt"}, open(os.path.join(run, "args.json"), "w")), "args.json: missing key 'env'"),
    (lambda run: open(os.path.join(run, "args.json"), "w").write("[]"),
     "args.json must hold a JSON object, not a list"),
])
def test_a_damaged_run_folder_is_one_line(tmp_path, monkeypatch, damage, message):
    """Before: a traceback (AttributeError, KeyError, IsADirectoryError, TypeError in the mean)."""
    out = str(tmp_path)
    run = make_run(out, "mt", log=search_log(6), steps=6)
    damage(run)
    monkeypatch.setattr(compare, "plot", lambda *a: None)
    with pytest.raises(SystemExit, match=f"{message}.*; fix or delete that run folder") as stop:
        compare.main(["--env", "search", "--out", out, "--algos", "mt", "--report-only"])
    assert "\n" not in str(stop.value.code)


def test_planpath_runs_the_paper_s_four_setups_and_pairs_them_by_level(tmp_path, monkeypatch):
    """--env planpath runs single-agent GRPO, two-agent GRPO, AT-GRPO shared and per-role, each
    with its own flags; the report pairs them level by level (success_each)."""
    out = str(tmp_path)
    calls = []
    monkeypatch.setattr(compare, "execute", lambda cmd, out_file, threads, echo: calls.append(cmd) or (0, 1.0))
    monkeypatch.setattr(compare, "plot", lambda *a: None)
    compare.main(["--env", "planpath", "--out", out, "--", "--steps", "2"])  # execute is faked: nothing runs
    tails = {os.path.basename(c[c.index("--out") + 1]): c[c.index("--algo") + 1:] for c in calls}
    assert tails["grpo-solo"][0] == "grpo" and "--single-agent" in tails["grpo-solo"]
    assert tails["at-roles"][0] == "at" and tails["at-roles"][-4:] == ["--steps", "2", "--policy", "per-role"]
    assert tails["grpo"][0] == "grpo" and "--single-agent" not in tails["grpo"] and "--policy" not in tails["grpo"]
    for name, each, flags in (("at", "1100", {}), ("grpo", "1000", {}), ("grpo-solo", "0000", {"single_agent": True}),
                              ("at-roles", "1110", {"policy": "per-role"})):
        algo = compare.VARIANTS.get(name, (name,))[0]
        make_run(out, algo, "planpath", log=[{"step": 0, "eval_success": each.count("1") / 4, "eval_success_each": each}],
                 name=name, **flags)
    compare.main(["--env", "planpath", "--out", out, "--report-only"])
    text = open(os.path.join(out, "results.md")).read()
    assert "| AT-GRPO − GRPO | +0.250 |" in text and "| AT-GRPO − GRPO one agent | +0.500 |" in text
    assert "| AT-GRPO per-role − GRPO | +0.500 |" in text and "| 1 × 4 |" in text and "seeds × levels" in text


# ---------------------------------------------------------------- runs of another task, outputs checked first
def test_runs_of_another_env_are_refused_not_reported_under_its_title(tmp_path, monkeypatch):
    """Before: --env planpath --report-only over Sokoban runs wrote '# AT-GRPO (planpath)' and
    never said Sokoban; without --report-only the runs kept (no checkpoint) were reported so too."""
    out = str(tmp_path)
    for algo in ("at", "grpo"):
        make_run(out, algo, "sokoban", log=[{"step": 0, "eval_success": 0.25}])
    monkeypatch.setattr(compare, "execute", lambda *a: pytest.fail("ran a training"))
    says = f"^{os.path.join(out, 'grpo')} is a run of --env 'sokoban' \\(its args.json\\), not planpath: give --env sokoban, or another --out$"
    with pytest.raises(SystemExit, match=says):
        compare.main(["--env", "planpath", "--out", out, "--report-only"])
    with pytest.raises(SystemExit, match=says):
        compare.main(["--env", "planpath", "--out", out, "--", "--steps", "2"])
    assert not os.path.exists(os.path.join(out, "results.md"))
    compare.main(["--env", "sokoban", "--out", out, "--report-only"])  # its own env: reported
    assert open(os.path.join(out, "results.md")).read().startswith("# GRPO vs AT-GRPO (sokoban)")


def unwritable_out(out, case):
    """(the --out to give, what the refusal says) with one thing of OUT's that cannot be written."""
    if case == "out is a file":
        open(out + "/file", "w").close()
        return out + "/file", f"^--out {out}/file is a file, not a folder; give another --out$"
    if case == "out under /proc":
        return "/proc/no-such/cmp", "^--out /proc/no-such/cmp cannot be written: no file can be made in /proc"
    if case == "results.md is a folder":
        os.makedirs(os.path.join(out, "results.md"))
        return out, f"^--out: {out}/results.md is a folder; move it away or give another --out$"
    if case == "compare.png is a FIFO":
        os.mkfifo(os.path.join(out, "compare.png"))
        return out, f"^--out: {out}/compare.png is a FIFO, not a regular file; move it away"
    if case == "ALGO.out is a folder":
        os.makedirs(os.path.join(out, "mt.out"))
        return out, f"^--out: {out}/mt.out is a folder; move it away"
    open(os.path.join(out, "mt"), "w").close()  # "a run folder is a file"
    return out, f"^--out: {out}/mt is a file, not a folder; move it away"


@pytest.mark.parametrize("case", ["out is a file", "out under /proc", "results.md is a folder", "compare.png is a FIFO",
                                  "ALGO.out is a folder", "a run folder is a file"])
def test_an_unwritable_out_is_refused_before_any_run(case, tmp_path, monkeypatch):
    """Before: the report failed after every run had trained (or hung on a FIFO); an ALGO.out or
    run folder that cannot be written surfaced when its turn came, after the runs before it."""
    monkeypatch.setattr(compare, "execute", lambda *a: pytest.fail("ran a training before checking --out"))
    monkeypatch.setattr(compare, "plot", lambda *a: None)
    out, says = unwritable_out(str(tmp_path), case)
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(SystemExit, match=says):
        compare.main(["--env", "search", "--out", out, "--jobs", "2", "--", "--steps", "2"])
    assert sorted(os.listdir(tmp_path)) == before  # nothing made, nothing left behind
