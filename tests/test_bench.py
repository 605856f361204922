"""bench.py --trl on a tiny random model: every phase is timed, tokens are counted the same way
on both sides, the report renders. The TRL half is skipped when TRL is not installed."""
from types import SimpleNamespace

import pytest

import bench


@pytest.fixture
def setup(tiny_model_dir, tokenizer):
    args = SimpleNamespace(model=tiny_model_dir, device="cpu", batch_size=1, num_generations=2,
                           max_completion_length=4, micro_batch_size=1, learning_rate=1e-5)
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
    assert "| update |" in bench.table(0.04, rows, rows)


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
