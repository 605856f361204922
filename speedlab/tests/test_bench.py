"""speedlab/bench.py --trl on a tiny random model: every phase is timed, tokens are counted the same way
on both sides, the report renders; the matmul peak and the tables use the dtype the phases
compute in (bf16 or fp32), and --fp32 turns autocast off on both sides. The TRL half is skipped
when TRL is not installed."""
import json
from collections import Counter
from types import SimpleNamespace

import pytest
import torch

from speedlab import bench


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
    assert 1 <= len(log["decode"]) <= 2 and all(t > 0 for t, *_ in log["decode"])  # 4 tokens: 3 decode forwards
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


@pytest.mark.scale
def test_trl_side_counts_the_same_things(setup):
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
            log["decode"] = [(0.02, 1e8, 1e8)]  # floor: 10 ms of reads at 10 GB/s
            return [log] * len(batches), {}, batches, 1000
        return run

    monkeypatch.setattr(bench, "import_trl", lambda: None)
    monkeypatch.setattr(bench, "load_model", lambda *a: (None, None))
    monkeypatch.setattr(bench, "search_prompts", lambda tok, n, seed=0: (["q"] * n, [[1, 2, 3]] * n))
    monkeypatch.setattr(bench, "matmul_gflops", lambda device, dt: peaks.append(dt) or 100.0)
    monkeypatch.setattr(bench, "bandwidth_gbs", lambda device: 10.0)
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
    summary = json.loads(out.splitlines()[-1])
    assert summary["peak_dtype"] == dtype and summary["bandwidth_gbs"] == 10.0
    floors = summary["by_beta"]["0"]
    assert floors["decode_step_ms"] == pytest.approx(20.0) and floors["decode_floor_ms"] == pytest.approx(10.0)
    assert floors["decode_floor_multiple"] == pytest.approx(2.0) and floors["trl_decode_floor_multiple"] == pytest.approx(2.0)
    # update: 6 x 1000 params x 18 tokens per step / 2 s = 54 kFLOP/s of a 100 GFLOP/s peak
    assert floors["update_floor_multiple"] == pytest.approx(100e9 / (6 * 1000 * 18 / 2.0))
    assert "| decode step / floor | **2.00×** | 2.00× |" in out


def test_fp32_turns_bf16_off_on_both_sides(setup, native_bf16, tmp_path):
    native_bf16(True)
    args = setup[0]
    assert bench.step_config(args, beta=0.0).bf16
    cfg = bench.step_config(SimpleNamespace(**{**vars(args), "fp32": True}), beta=0.0)
    assert not cfg.bf16


@pytest.mark.scale
def test_fp32_turns_bf16_off_on_trls_side(setup, native_bf16, tmp_path):
    import trl
    native_bf16(True)
    args = setup[0]
    cfg = bench.step_config(SimpleNamespace(**{**vars(args), "fp32": True}), beta=0.0)
    assert bench.step_config(args, beta=0.0).bf16 and not cfg.bf16
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


# ---------------------------------------------------------------- the floors
def test_decode_work_counts_every_weight_once_and_every_rows_cache(tiny_model_dir):
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    V = model.config.vocab_size
    # per layer: q 32x32, k 32x16, v 32x16, o 32x32, gate 32x64, up 32x64, down 64x32 = 9,216; the
    # tied LM head 32 V once (the embedding rows looked up are not counted)
    weights = 2 * 9216 + 32 * V
    cache = 2 * 2 * 2 * 8 * 10 * 3  # keys+values x layers x kv heads x head dim x context x rows
    flops, read = bench.decode_work(model, rows=3, context=10, dtype=torch.float32)
    assert flops == 2 * weights * 3 + 4 * 2 * 4 * 8 * 10 * 3  # + q.k and p.v over 4 heads
    assert read == 4 * (weights + cache)
    assert bench.decode_work(model, 3, 10, torch.bfloat16)[1] == 2 * (weights + cache)


def test_gpu_work_is_waited_for_before_each_clock_read(monkeypatch):
    """CUDA calls return before the GPU has run them: a timing must wait for the queue (synced)
    before reading the clock, or it measures the launch, not the work."""
    events, now = [], iter(range(100))
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: events.append("sync"))
    monkeypatch.setattr(bench.time, "perf_counter", lambda: events.append("clock") or next(now))
    bench.timed(lambda: events.append("work"), repeat=2)
    assert events == ["work", "sync", "clock", "work", "work", "sync", "clock"]
    events.clear()
    log = Counter()
    with bench.clock(log, "update"):
        events.append("work")
    assert events == ["sync", "clock", "work", "sync", "clock"]


def test_the_ceilings_use_sizes_that_fill_a_gpu(monkeypatch):
    sizes = []
    monkeypatch.setattr(bench, "timed", lambda fn, repeat=1: 1.0)
    monkeypatch.setattr(bench.torch, "randn", lambda n, m, **k: sizes.append(n) or torch.zeros(1))
    monkeypatch.setattr(bench.torch, "ones", lambda n, **k: sizes.append(n) or torch.zeros(1))
    bench.matmul_gflops("cpu", torch.float32), bench.matmul_gflops("cuda", torch.float32)
    bench.bandwidth_gbs("cpu"), bench.bandwidth_gbs("cuda")
    assert sizes == [2048, 8192, 512 * 2 ** 18, 2048 * 2 ** 18]


def test_the_floor_is_the_longer_of_arithmetic_and_reads():
    assert bench.floor_seconds(2e9, 1e9, peak_gflops=100, bandwidth=10) == pytest.approx(0.1)  # reads
    assert bench.floor_seconds(4e10, 1e9, peak_gflops=100, bandwidth=10) == pytest.approx(0.4)  # FLOPs


def test_bandwidth_counts_the_bytes_read_and_written(monkeypatch):
    monkeypatch.setattr(bench, "timed", lambda fn, repeat=1: fn() is not None and 0.5)
    assert bench.bandwidth_gbs("cpu", megabytes=8) == pytest.approx(2 * 8 * 2 ** 20 / 0.5 / 1e9)


def test_decode_clock_times_one_token_forwards_in_the_generate_phase(tiny_model_dir, monkeypatch):
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    probe = bench.DtypeProbe(model)
    clock = bench.DecodeClock(model, probe, torch.float32)
    ticks = iter(range(100))
    monkeypatch.setattr(bench.time, "perf_counter", lambda: float(next(ticks)))

    def forward(rows, width):
        ids = torch.ones(rows, width, dtype=torch.long)
        model(input_ids=ids, attention_mask=torch.ones(rows, 6 if width == 1 else width))

    forward(2, 5)  # outside the generate phase: not seen
    with probe("generate"):
        for rows, width in [(2, 5), (2, 1), (2, 1), (1, 1), (3, 4), (3, 1), (3, 1)]:  # two turns
            forward(rows, width)
    steps = clock.take()
    # turn 1: forwards at t = 0, 1, 2 (prefill untimed) -> steps 0->1 (2 rows) and 1->2 (2 rows);
    # turn 2 starts with a prefill, so 2->(its first decode at t = 3) is no step; 3->4 (3 rows)
    assert [(t, bench.decode_work(model, 2, 6, torch.float32)) for t, *_ in steps[:2]] == \
        [(1.0, bench.decode_work(model, 2, 6, torch.float32))] * 2
    assert [s[1:] for s in steps] == [bench.decode_work(model, r, 6, torch.float32) for r in (2, 2, 3)]
    assert clock.take() == []
    with probe("generate"):  # generate's own loop passes no mask when there is no padding
        cache = model(input_ids=torch.ones(2, 5, dtype=torch.long), use_cache=True).past_key_values
        for _ in range(3):
            model(input_ids=torch.ones(2, 1, dtype=torch.long), past_key_values=cache)
    assert [s[1:] for s in clock.take()] == [bench.decode_work(model, 2, c, torch.float32) for c in (6, 7)]
    with probe("generate"):  # the decode loop's ready (rows, 1, 1, keys) mask on a CPU
        cache = model(input_ids=torch.ones(2, 5, dtype=torch.long), use_cache=True).past_key_values
        for keys in (6, 7, 8):
            model(input_ids=torch.ones(2, 1, dtype=torch.long), past_key_values=cache,
                  attention_mask=torch.ones(2, 1, 1, keys, dtype=torch.bool))
    assert [s[1:] for s in clock.take()] == [bench.decode_work(model, 2, c, torch.float32) for c in (6, 7)]


def test_decode_clock_times_the_steps_a_gpu_replays_as_a_graph(tiny_model_dir):
    """A replayed CUDA graph calls no forward (gpu_step.GraphedSteps): the clock notes those steps
    where they are called, once each, with the keys they attend. Here they run eagerly (graphed=
    True on a CPU): as many steps, of the same rows and keys, as the loop's forwards give."""
    from fast.decode import generate_turn
    from policy import load_model
    model, tok = load_model(tiny_model_dir, "cpu")
    probe = bench.DtypeProbe(model)
    clock = bench.DecodeClock(model, probe, torch.float32)
    prompts = [[5, 6, 7], [8, 9], [5, 6, 7]]
    work = {}
    for graphed in (False, True):
        with probe("generate"):
            generate_turn(model, tok, prompts, 6, greedy=True, bf16=False, graphed=graphed)
        work[graphed] = [s[1:] for s in clock.take()]
    assert len(work[True]) == 4 and work[True] == work[False]


def test_decode_summary_is_the_mean_step_against_the_mean_floor():
    # two steps of 30 and 10 ms; floors 10 ms (reads) and 5 ms (FLOPs) at 100 GFLOP/s, 10 GB/s
    logs = [{"decode": [(0.03, 1e8, 1e8)]}, {"decode": [(0.01, 5e8, 1e7)]}, {}]
    row = bench.decode_summary(logs, peak=100, bandwidth=10)
    assert row == pytest.approx(dict(steps=2, ms=20.0, floor_ms=7.5, multiple=0.04 / 0.015))
    assert bench.decode_summary([{}], 100, 10) is None


def test_profile_kinds():
    kind = {name: next(k for k, test in bench.KINDS if test(name)) for name in (
        "aten::_scaled_dot_product_flash_attention_for_cpu", "aten::mm", "aten::copy_", "aten::multinomial",
        "aten::_log_softmax", "aten::add")}
    assert list(kind.values()) == ["attention", "matmuls", "casts and copies",
                                   "sampling and log-probs over the vocabulary",
                                   "sampling and log-probs over the vocabulary",
                                   "other ops (elementwise, norms, indexing, zero fills)"]


def test_profile_prints_a_decode_step_and_an_update_micro_batch(tiny_model_dir, tokenizer, monkeypatch, capsys):
    ids = tokenizer("Where is Paris? Answer:", add_special_tokens=False)["input_ids"]
    monkeypatch.setattr(bench, "search_prompts", lambda tok, n, seed=0: (None, [ids] * n))
    bench.main(["--profile", "--model", tiny_model_dir, "--batch-size", "1", "--num-generations", "2",
                "--max-completion-length", "3", "--decode-steps", "2", "--fp32"])
    out = capsys.readouterr().out
    assert "in fp32: decode step" in out and "| total (under the profiler) |" in out
    for kind, _ in bench.KINDS:
        assert f"| {kind} |" in out
    assert f"| {bench.OUTSIDE} |" in out


def test_profile_needs_a_decode_step(capsys):
    with pytest.raises(SystemExit):
        bench.main(["--profile", "--decode-steps", "0"])
    assert "--decode-steps must be at least 1" in capsys.readouterr().err


@pytest.mark.parametrize("rows", ["8", "3", "0"])
def test_trl_s_micro_batch_must_divide_the_step(rows, capsys):
    """TRL accumulates whole micro-batches (gradient_accumulation_steps = rows // micro-batch): a
    micro-batch of 8 for 4 rows made it 0 and TRL failed deep inside. One line, before any model."""
    with pytest.raises(SystemExit):
        bench.main(["--trl", "--batch-size", "2", "--num-generations", "2", "--micro-batch-size", rows])
    assert "must divide the step's 4 rows" in capsys.readouterr().err


@pytest.mark.parametrize("questions, G, rows", [(2, 8, 8), (3, 2, 2), (1, 4, 4), (5, 3, 1)])
def test_the_default_micro_batch_is_8_or_the_most_that_divides_the_step(questions, G, rows, monkeypatch):
    """By default both sides run 8 rows a forward/backward (TRL's per_device_train_batch_size and
    train.py's auto on a CPU with the memory), or the largest of 4, 2, 1 that divides the step."""
    seen = []
    monkeypatch.setattr(bench, "side_by_side", lambda args: seen.append(args.micro_batch_size) or {})
    monkeypatch.setattr(bench, "keep_freed_memory", lambda device: False)
    bench.main(["--trl", "--batch-size", str(questions), "--num-generations", str(G)])
    assert seen == [rows]


def test_no_wait_where_no_gpu_is_visible(monkeypatch):
    """A CPU timing in a process whose GPU was used before and is hidden now (a CPU test after a CUDA
    test, under CUDA_VISIBLE_DEVICES=""): torch.cuda.synchronize would fail there
    ("invalid argument to exchangeDevice", seen on an H200), and there is nothing to wait for."""
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: (_ for _ in ()).throw(RuntimeError("exchangeDevice")))
    bench.synced()
