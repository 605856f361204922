"""speedlab/cuda_card.py, the card's command timed on a GPU, rehearsed on a CPU (--tiny): its
sections run (graphed and the static-cache one too, eager on a CPU; new_lengths with its profile),
greedy tokens of our loop equal generate's in fp32, every turn of train.py is timed, and the
update really runs on a random model (vary_rewards), whose own rewards would leave every
advantage 0."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def card(tmp_path, *flags):
    subprocess.run([sys.executable, os.path.join(ROOT, "speedlab", "cuda_card.py"), "--tiny", "--skip", "bench",
                    "--out", str(tmp_path), *flags], check=True, capture_output=True, cwd=ROOT,
                   env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    return json.load(open(tmp_path / "card.json"))


def test_the_card_rehearses_on_a_cpu_and_its_update_runs(tmp_path):
    out = card(tmp_path)
    assert not [k for k in out if k.endswith("_error")], out
    assert set(out["seconds"]) == {"decode", "new_lengths", "train", "graphed", "compiled"}
    assert out["graphed"]["fp32"]["rows_identical"] == "8/8"  # GraphedSteps, eager on a CPU
    assert {k for k in out["compiled_generate"] if k.startswith("static")} == {
        "static cache, first call (compiles)", "static cache, second call"}  # on a CPU: not compiled
    assert [r["variant"] for r in out["new_lengths"]] == ["ours", "ours, cuDNN attention allowed", "generate",
                                                          "update micro-batch, ours",
                                                          "update micro-batch, ours, cuDNN attention allowed"] * 3
    assert (tmp_path / "prof_new_lengths.txt").stat().st_size > 0
    assert out["decode_rows_identical"]["fp32"] == "8/8"
    assert all(row["tokens"] == 8 * 16 and row["multiple"] > 0 for row in out["decode"].values())
    turns = out["train"]["turns"]
    assert [t["rows"] for t in turns] == [8, 8] and all(t["ms_per_token_step"] > 0 for t in turns)
    (step,) = out["train"]["steps"]
    assert step["gen_tokens"] > 0 and step["zero_adv_groups"] < 1  # some group has advantages to train on
