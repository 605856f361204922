"""Every two-role task through every door on a tiny model: train.py (--algo at, grpo, gigpo;
--policy per-role; --single-agent), tools/show.py (the episodes and the tree), tools/evaluate.py,
tools/credit.py (live, then --from) and tools/compare.py. A scripted sampler answers from a small
pool per role, right, wrong and unreadable, so the rewards differ; the pool's rewards by hand are in
each task's own tests (test_sudoku.py, test_env_math.py, test_env_code.py), and here the logged
rewards are checked to be among the values those answers can earn."""
import json
import os
import random
import re

import pytest

import policy
import tasks
import train
from tools import compare, credit, evaluate, show

FENCE = "```python\n"


def name_in(messages):
    """The function a coding prompt asks for: "Write a Python function NAME(...)"."""
    return re.search(r"Write a Python function (\w+)\(", messages[-1]["content"]).group(1)


POOLS = {  # role -> answers (a function of the prompt's messages), as the model's text with its prefill
    "sudoku": {r: lambda m: ["<answer>R1C1=1</answer>", "<answer>R2C3=4</answer>", "<answer>R4C4=2 R1C2=3</answer>",
                             "fill it"] for r in ("planner", "executor")},
    "math": {"tool": lambda m: ["<answer>2 + 3</answer>", "<answer>6 * 7 - 1</answer>", "<answer>1 / 0</answer>", "hm"],
             "reasoner": lambda m: ["<answer>5</answer>", "<answer>41</answer>", "<answer>3/4</answer>", "no idea"]},
    "code": {"tester": lambda m: [f"{FENCE}assert {name_in(m)}(1) == 1\n```", f"{FENCE}assert {name_in(m)}(2) == 0\n```",
                                  f"{FENCE}print('hi')\n```"],
             "coder": lambda m: [f"{FENCE}def {name_in(m)}(*args):\n    return 1\n```",
                                 f"{FENCE}def {name_in(m)}(*args):\n    while True:\n        pass\n```", "no code"]},
}
FAMILIES = [n for n in POOLS if n in tasks.TASKS]


def scripted(pools):
    def make(models, tok, args, stop_strings, greedy=False):
        rng = random.Random(0)

        def sample(role, message_lists):
            texts = [rng.choice(pools[role](m)) for m in message_lists]
            return [(policy.prompt_ids(tok, m, args.prefill), tok(t[len(args.prefill):], add_special_tokens=False)["input_ids"], t)
                    for m, t in zip(message_lists, texts)]
        return sample
    return make


def small(env, tmp_path, name, *extra):
    return ["--env", env, "--steps", "1", "--batch-size", "2", "--num-generations", "2", "--max-turns", "2",
            "--max-completion-length", "8", "--eval-n", "3", "--eval-every", "1", "--save-every", "1",
            "--micro-batch-size", "4", "--bf16", "false", "--out", str(tmp_path / name), *extra]


@pytest.mark.parametrize("env", FAMILIES)
def test_every_door_runs_the_task(env, tmp_path, tiny_model_dir, monkeypatch):
    task = tasks.TASKS[env]
    sampler = scripted(POOLS[env])
    monkeypatch.setattr(train, "chat_sampler", sampler)
    monkeypatch.setattr(credit, "chat_sampler", sampler)
    flags = ["--model", tiny_model_dir]
    history = train.main([*small(env, tmp_path, "at"), *flags])
    line = history[-1]
    assert line["step"] == 1 and {f"reward_{r}" for r in task.roles} <= set(line)
    assert {f"eval_{k}" for k in ("success", "board_ablation_success", "distinct_answers", "success_each")} <= set(line)
    assert ("eval_best_constant_success" in line) == bool(task.constant) and len(line["eval_success_each"]) == 3
    rows = [json.loads(r) for r in open(tmp_path / "at" / "rollouts" / "step_1.jsonl")]
    assert {r["role"] for r in rows} == set(task.roles) and all(r["group"].startswith("level ") for r in rows)
    assert "turn 1" in open(show.main([str(tmp_path / "at"), "--step", "1"]), encoding="utf-8").read()
    assert open(show.main([str(tmp_path / "at"), "--tree"]), encoding="utf-8").read().startswith("<")
    checkpoint = str(tmp_path / "at" / "checkpoint")
    out = evaluate.main(["--model", checkpoint, "--n", "3", "--chunk", "3", "--bf16", "false"])
    assert out["env"] == env and out["success"] == line["eval_success"]  # greedy: the same answers
    measured = credit.main(["--model", checkpoint, "--states", "2", "--num-generations", "2", "--continuations", "2",
                            "--bootstrap", "10", "--json", str(tmp_path / "credit.json")])
    assert measured["settings"]["env"] == env and measured["records"]
    again = credit.main(["--from", str(tmp_path / "credit.json")])
    assert json.dumps(again["figures"]) == json.dumps(measured["figures"])
    for algo, extra in (("grpo", ()), ("gigpo", ()), ("at", ("--policy", "per-role")), ("grpo", ("--single-agent",))):
        name = f"{algo}{''.join(extra)}"
        history = train.main([*small(env, tmp_path, name, "--algo", algo, "--eval-every", "0", *extra), *flags])
        assert history[-1]["step"] == 1
    assert sorted(os.listdir(tmp_path / "at--policyper-role" / "checkpoint")) >= sorted(task.roles)


@pytest.mark.parametrize("env", FAMILIES)
def test_compare_runs_the_task(env, tmp_path, tiny_model_dir):
    compare.main(["--env", env, "--out", str(tmp_path / "cmp"), "--algos", "at", "grpo", "--",
                  *small(env, tmp_path, "unused")[2:-2], "--model", tiny_model_dir])
    report = open(tmp_path / "cmp" / "results.md").read()
    assert f"({env})" in report.splitlines()[0]
