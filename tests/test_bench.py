"""tools/bench.py --trl on a tiny random model: every phase is timed, tokens are counted the same way
on both sides, the report renders; the matmul peak and the tables use the dtype the phases
compute in (bf16 or fp32), and --fp32 turns autocast off on both sides. The TRL half is skipped
when TRL is not installed."""
import json
from collections import Counter
from types import SimpleNamespace

import pytest
import torch

from tools import bench


@pytest.fixture
def setup(tiny_model_dir, tokenizer):
    args = SimpleNamespace(model=tiny_model_dir, device="cpu", batch_size=1, num_generations=2,
                           max_completion_length=4, micro_batch_size=1, learning_rate=1e-5, fp32=False)
    text = tokenizer.apply_chat_template([{"role": "user", "content": "Where is Paris?"}],
                                         add_generation_prompt=True, tokenize=False) + bench.PREFILL
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    return args, bench.step_config(args, beta=0.04), [text] * 2, [[ids, ids]]


def check_run(run, batches):
    logs, dtypes, prompts, params = run
    log = logs[0]
    assert {"generate", "reference", "update", "step"} <= log.keys()
    assert log["step"] >= log["generate"] + log["reference"]
    assert 2 <= log["generated"] <= 2 * 4 and log["trained"] == log["generated"]
    assert log["positions"] == log["prompt"] + log["trained"] == 2 * len(batches[0][0]) + log["trained"]
    assert log["distinct_prompt"] == len(batches[0][0])  # the two rows share one prompt
    assert prompts == batches  # generated from exactly these token ids
    assert set(dtypes) == {"generate", "reference", "update"}
    assert params > 0
    return logs, params


def test_our_step_times_each_phase_and_reports(setup):
    args, cfg, _, batches = setup
    logs, params = check_run(bench.run_ours(args, cfg, batches), batches)
    rows, total = bench.summarize(logs, params, peak=100.0)
    assert set(rows) == {"generate", "reference", "update", "step"}
    assert rows["update"]["tok_s"] == pytest.approx(total["trained"] / total["update"])
    needed = total["distinct_prompt"] + total["trained"]  # the shared prompt counts once
    assert rows["update"]["peak"] == pytest.approx(6 * params * needed / total["update"] / 1e9 / 100.0)
    assert "| update |" in bench.table(0.04, rows, rows, "fp32")


def test_trl_side_counts_the_same_things(setup):
    pytest.importorskip("trl")
    args, cfg, texts, batches = setup
    check_run(bench.run_trl(args, cfg, batches, texts), batches)


def test_shared_prompt_bench_times_three_variants(tiny_model_dir, capsys):
    args = SimpleNamespace(model=tiny_model_dir, device="cpu", num_generations=2, sequences=4,
                           max_completion_length=3)
    bench.shared_prompt_bench(args)
    out = capsys.readouterr().out
    assert "2 groups x K = 2" in out and "+ 3 trained tokens" in out
    for row in ("prompt 2 times, 2 rows", "prompt once, 1 row", "prompt once, 2 rows"):
        assert row in out


def test_speedups_are_ours_over_trl_per_phase():
    # ours 100 tok/s generate and 50 trained tok/s update; TRL half as fast in both
    ours = {"generate": dict(tok_s=100.0, peak=0.2), "update": dict(tok_s=50.0, peak=0.4), "step": dict(tok_s=20.0, peak=0.3)}
    trl = {"generate": dict(tok_s=50.0, peak=0.1), "update": dict(tok_s=25.0, peak=0.2), "step": dict(tok_s=10.0, peak=0.15)}
    total = {"generated": 800, "trained": 800, "positions": 6000, "distinct_prompt": 600}
    out = bench.speedups(ours, trl, total, {**total, "generated": 900}, 2)
    assert out["generate_speedup"] == 2.0 and out["update_speedup"] == 2.0 and out["step_speedup"] == 2.0
    assert out["update_peak_fraction"] == 0.4 and out["generate_peak_fraction"] == 0.2
    assert out["ours_generated_tokens_per_step"] == 400 and out["trl_generated_tokens_per_step"] == 450


# ---------------------------------------------------------------- precision and the matmul peak
@pytest.fixture
def native_bf16(monkeypatch):
    """native_bf16(True / False): pretend this CPU has (or lacks) native bf16, in bench and precision."""
    from machinery import precision

    def force(native):
        monkeypatch.setattr(bench, "bf16_ok", lambda device: native)
        monkeypatch.setattr(precision, "bf16_ok", lambda device: native)
    return force


def test_matmul_gflops_multiplies_in_the_given_dtype(monkeypatch):
    for dtype in (torch.float32, torch.bfloat16):
        assert bench.matmul_gflops("cpu", dtype, n=8, repeat=1) > 0
    seen = []
    monkeypatch.setattr(bench, "timed", lambda fn, repeat=1: seen.append(fn().dtype) or 1.0)
    assert bench.matmul_gflops("cpu", torch.float32, n=8) == pytest.approx(2 * 8 ** 3 / 1e9)
    assert seen == [torch.float32]


@pytest.mark.parametrize("native, fp32, dtype", [(True, False, "bf16"), (True, True, "fp32"),
                                                 (False, False, "fp32")])
def test_trl_peak_and_tables_use_the_dtype_of_the_phases(native_bf16, monkeypatch, capsys, native, fp32, dtype):
    """main(--trl) with both sides faked: the peak is measured in the dtype the phases compute in,
    both sides get that precision, and the output and the JSON line say which."""
    native_bf16(native)
    peaks, sides = [], []

    def fake_run(side):
        def run(args, cfg, batches, *texts):
            sides.append((side, cfg.bf16))
            log = Counter(generate=1.0, reference=1.0, update=2.0, step=5.0, generated=8, trained=8,
                          prompt=20, distinct_prompt=10, positions=28, padded=30)
            return [log] * len(batches), {}, batches, 1000
        return run

    monkeypatch.setattr(bench, "import_trl", lambda: None)
    monkeypatch.setattr(bench, "load_model", lambda *a: (None, None))
    monkeypatch.setattr(bench, "search_prompts", lambda tok, n, seed=0: (["q"] * n, [[1, 2, 3]] * n))
    monkeypatch.setattr(bench, "matmul_gflops", lambda device, dt: peaks.append(dt) or 100.0)
    monkeypatch.setattr(bench, "run_ours", fake_run("ours"))
    monkeypatch.setattr(bench, "run_trl", fake_run("trl"))
    bench.main(["--trl", "--json", "--betas", "0", "--steps", "1", "--warmup", "0", "--batch-size", "1",
                "--num-generations", "2"] + ["--fp32"] * fp32)
    out = capsys.readouterr().out
    torch_dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[dtype]
    assert peaks == [torch_dtype, torch_dtype]  # at the start and at the end
    assert sides == [("ours", dtype == "bf16"), ("trl", dtype == "bf16")]
    assert f"{dtype} matmul peak at start: 100 GFLOP/s" in out and f"| β = 0, {dtype} |" in out
    assert ("--fp32: autocast off" in out) == fp32 and ("no native bf16" in out) == (not native)
    assert json.loads(out.splitlines()[-1])["peak_dtype"] == dtype


def test_fp32_turns_bf16_off_on_both_sides(setup, native_bf16, tmp_path):
    native_bf16(True)
    args = setup[0]
    assert bench.step_config(args, beta=0.0).bf16
    cfg = bench.step_config(SimpleNamespace(**{**vars(args), "fp32": True}), beta=0.0)
    assert not cfg.bf16
    trl = pytest.importorskip("trl")
    assert not bench.trl_config(trl, args, cfg, 1, str(tmp_path)).bf16


@pytest.mark.parametrize("native", [True, False])
def test_precision_bench_times_bf16_only_where_native(native_bf16, tiny_model_dir, tokenizer, monkeypatch,
                                                      capsys, native):
    native_bf16(native)
    peaks = []
    ids = tokenizer("Where is Paris?", add_special_tokens=False)["input_ids"]
    monkeypatch.setattr(bench, "search_prompts", lambda tok, n, seed=0: (None, [ids] * n))
    monkeypatch.setattr(bench, "matmul_gflops", lambda device, dtype: peaks.append(dtype) or 100.0)
    bench.precision_bench(SimpleNamespace(model=tiny_model_dir, device="cpu", sequences=1,
                                          max_completion_length=2, micro_batch_size=1))
    out = capsys.readouterr().out
    assert "fp32 matmul peak 100 GFLOP/s; fp32 forward+backward" in out
    if native:
        assert peaks == [torch.float32, torch.bfloat16] and "bf16 / fp32 speed-up" in out
        assert "bf16 matmul peak 100 GFLOP/s; bf16 forward+backward" in out
    else:  # training runs in fp32 here: no bf16 row, no speed-up, a note saying why
        assert peaks == [torch.float32] and "speed-up" not in out
        assert not any(line.startswith("bf16") for line in out.splitlines())
        assert "no native bf16 on this cpu: training computes in fp32" in out
