"""speedlab/gpu_check.py, the project's GPU check, rehearsed on a CPU (--tiny): every section runs
and writes its part of gpu_check.json and gpu_check.md; the update's variants all step with the
plain update's gradient; the fast setting it chooses is one it measured at auto's micro-batch; the
train section runs train.py as the default and as --plain."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.scale  # the bench section runs TRL's side
def test_the_gpu_check_rehearses_on_a_cpu(tmp_path):
    run = subprocess.run([sys.executable, os.path.join(ROOT, "speedlab", "gpu_check.py"), "--tiny", "--out", str(tmp_path)],
                         capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.load(open(tmp_path / "gpu_check.json"))
    assert not [k for k in out if k.endswith("_error")], out
    assert list(out["seconds"]) == ["tests", "update", "train", "bench"]
    assert "collected" in out["tests"]["summary"] and out["tests"]["returncode"] == 0
    u = out["update"]
    assert len(u["variants"]) == 10 and u["rows"] == 4
    for name, row in u["variants"].items():  # in bf16 each shape of matmul rounds its own way (seen: 1.7e-3)
        assert row["best"] > 0 and len(row["seconds"]) == 1, name
        assert row["gradient_vs_plain"] < (2e-2 if u["bf16"] else 1e-5), name
    chosen = u["variants"][u["chosen"]["name"]]
    assert not chosen["plain"] and (chosen["micro_batch"] == u["auto_micro_batch"] or chosen["levers"]["shared_prompt"])
    assert set(u["half_the_groups_silent"]) == {"plain", "fast, chosen"}
    assert set(out["train"]) == {"default", "plain"}
    assert all(len(row["steps"]) == 1 and row["steps"][0]["t_update"] > 0 for row in out["train"].values())
    assert out["bench"]["by_beta"]["0"]["update_speedup"] > 0 and out["bench_micro_batch"] == min(u["auto_micro_batch"], 4)
    md = open(tmp_path / "gpu_check.md").read()
    assert "| plain, 1 rows |" in md and "**train.py**" in md and "**Against TRL**" in md
    assert "## chosen" in open(tmp_path / "profile.txt").read()
