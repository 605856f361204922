"""The card's command on one CUDA GPU, offline: a Qwen2.5-0.5B-shaped random model, timed.

    python speedlab/cuda_card.py --smollm DIR --out DIR      # on a CUDA machine (minutes)
    .venv/bin/python speedlab/cuda_card.py --tiny             # a CPU rehearsal: tiny shape, few tokens

No hub weights: Qwen2.5-0.5B's published shape with random weights and the test suite's
Qwen2.5-style tokenizer (tests/qwen_style.py, built from SmolLM2's tokenizer.json: --smollm, by
default the bundled model's). A random model rarely ends a turn, so every turn runs its full 256
tokens: the slowest case. Six sections, each timed, each failing on its own:

1. decode: 64 rows (8 search prompts x G = 8) of 256 new tokens, our decode loop
   (machinery/decode.generate_turn; on a GPU its steps replay a CUDA graph) against transformers'
   `generate` (hf_generate_turn), greedy in bf16 and in fp32 (rows with identical tokens counted)
   and sampled at T = 0.9; each decode step against its floor (bench.decode_work over the matmul
   peak, bf16 where native, and the copy bandwidth, both measured there);
2. new lengths: turns at key lengths not seen before (new_lengths_section), our loop with and
   without cuDNN's attention and `generate`, and an update's micro-batch with and without it:
   the cost of cuDNN's graph per new shape;
3. the card's step: `train.py` with the README's GPU settings for 3 steps: seconds per phase, every
   turn's decode steps, peak GPU memory (allocated and reserved), the final checkpoint's save;
4. `speedlab/bench.py --trl --json --betas 0` at the card's settings (needs TRL);
5. graphed: greedy turns of our loop with its steps replayed as one CUDA graph (gpu_step.GraphedSteps,
   the default on a GPU) against the loop without graphs, bf16 and fp32: ms a step, equal rows;
6. `generate` over a static cache, which transformers compiles on a GPU (mode "reduce-overhead":
   CUDA graphs), against eager `generate`, greedy, on bf16 weights: the compile, the time after
   it, and whether the tokens agree.

Writes card.json (every number) and bench.txt under --out.
"""
import argparse
import contextlib
import gc
import io
import json
import os
import sys
import tempfile
import time
from types import SimpleNamespace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests"), os.path.join(ROOT, "scripts")]
import torch  # noqa: E402

import qwen_style  # noqa: E402
import train  # noqa: E402

from fast import decode  # noqa: E402
import generation  # noqa: E402
from fast.decode import generate_turn  # noqa: E402
from generation import hf_generate_turn  # noqa: E402
from machinery.precision import autocast, bf16_ok  # noqa: E402
from policy import load_model  # noqa: E402
from qwen_shaped_smoke import CARD, SHAPES  # noqa: E402
from speedlab import bench  # noqa: E402

TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            initializer_range=0.3)  # weights large enough that greedy tokens vary (0.02: one token repeated)


def settings(tiny):
    """Questions, G, new tokens a turn and train steps: the card's, or a CPU rehearsal's."""
    return SimpleNamespace(questions=2, G=4, tokens=16, steps=1) if tiny else \
        SimpleNamespace(questions=8, G=8, tokens=256, steps=3)


def gb(n):
    return round(n / 2 ** 30, 2)


def timed_turn(model, tok, prompts, max_new_tokens, *args, reference=False, **kwargs):
    """(seconds, new tokens) of one generate_turn (its arguments; hf_generate_turn's with
    `reference`), the GPU waited for first."""
    bench.synced()
    start = time.perf_counter()
    new = (hf_generate_turn if reference else generate_turn)(model, tok, prompts, max_new_tokens, *args, **kwargs)
    return time.perf_counter() - start, new


def decode_section(path, device, s, out, rounds):
    """Our decode loop against generate, greedy (bf16, fp32) and sampled, on the same prompts."""
    model, tok = load_model(path, device)
    prompts = [p for p in bench.search_prompts(tok, s.questions)[1] for _ in range(s.G)]
    dtype = bench.compute_dtype(device)  # bf16 where native (a GPU), else fp32: emulated bf16 is slow
    peak, bandwidth = bench.matmul_gflops(device, dtype), bench.bandwidth_gbs(device)
    out["ceilings"] = dict(matmul_tflops=peak / 1e3, matmul_dtype=bench.DTYPE_NAMES[dtype],
                           copy_bandwidth_gbs=bandwidth)
    probe = SimpleNamespace(phase="generate")
    clock = bench.DecodeClock(model, probe, torch.bfloat16)
    generate_turn(model, tok, prompts, 8), hf_generate_turn(model, tok, prompts, 8)  # warm-up
    tokens, rows = {}, {}
    variants = [("ours greedy bf16", False, True, True), ("generate greedy bf16", True, True, True),
                ("ours greedy fp32", False, True, False), ("generate greedy fp32", True, True, False),
                ("ours sampled bf16", False, False, True), ("generate sampled bf16", True, False, True)]
    for r in range(rounds):  # later rounds in the reverse order: a drift of the machine shows
        for name, reference, greedy, bf16 in variants if r % 2 == 0 else variants[::-1]:
            row, tokens[name] = decode_variant(model, tok, prompts, s, clock, (peak, bandwidth), bf16,
                                               reference=reference, greedy=greedy)
            rows[f"{name}, round {r + 1}"] = row
            print(f"{name}, round {r + 1}: {row['seconds']:.2f} s, {row['tokens']} tokens, "
                  f"{row.get('ms', 0):.1f} ms a decode step", flush=True)
    for kind in ("bf16", "fp32"):
        same = sum(a == b for a, b in zip(tokens[f"ours greedy {kind}"], tokens[f"generate greedy {kind}"]))
        out["decode_rows_identical"] = {**out.get("decode_rows_identical", {}), kind: f"{same}/{len(prompts)}"}
    out["decode"] = rows
    del model, clock
    return prompts


def decode_variant(model, tok, prompts, s, clock, ceilings, bf16, **kwargs):
    """(row, new tokens) of one timed turn at T = 0.9: seconds, tokens, and its decode steps
    against their floor (bench.decode_summary over the ceilings: matmul peak, copy bandwidth)."""
    clock.dtype = torch.bfloat16 if bf16 and bf16_ok(str(model.device)) else torch.float32
    clock.take()
    torch.manual_seed(0)
    seconds, new = timed_turn(model, tok, prompts, s.tokens, temperature=0.9, bf16=bf16, **kwargs)
    floor = bench.decode_summary([{"decode": clock.take()}], *ceilings)
    tokens = sum(map(len, new))
    return dict(seconds=seconds, tokens=tokens, tok_s=tokens / seconds, **(floor or {})), new


@contextlib.contextmanager
def swapped(module, name, value):
    """module.name is value within the context."""
    kept = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, kept)


def new_lengths_section(path, device, s, folder, out, turns=3):
    """Greedy bf16 turns at key lengths not seen before in the process (the prompts one token
    shorter at every turn), in turn: our loop without CUDA graphs (graphed=False: every step meets
    a new key length) and attention without cuDNN's backend (gpu_step.sdpa_without_cudnn), the same
    with cuDNN's attention allowed, and `generate`.
    cuDNN builds a graph for every new shape; on the H100 steps at new key lengths took 64-78 ms,
    at lengths seen before 19-26 ms. Per turn: ms a decode step and the caching allocator's device
    allocations; then an update's micro-batch at new lengths, forward and backward, with and
    without cuDNN's attention (the update keeps SDPA's choice); a 32-token turn of our loop with
    cuDNN allowed under torch.profiler (host and GPU) to prof_new_lengths.txt."""
    model, tok = load_model(path, device)
    base = [p for p in bench.search_prompts(tok, s.questions)[1] for _ in range(s.G)]
    generate_turn(model, tok, base, 8), hf_generate_turn(model, tok, base, 8)  # warm-up
    allowed = contextlib.nullcontext  # in place of gpu_step.sdpa_without_cudnn: SDPA picks any backend
    variants = [("ours", decode.sdpa_without_cudnn), ("ours, cuDNN attention allowed", allowed),
                ("generate", decode.sdpa_without_cudnn)]  # generate's turn never reads it
    rows, cut = [], 0
    activities = [torch.profiler.ProfilerActivity.CPU] + [torch.profiler.ProfilerActivity.CUDA] * (device != "cpu")
    with swapped(decode, "sdpa_without_cudnn", allowed), \
            torch.profiler.profile(activities=activities) as prof:
        cut += 1
        timed_turn(model, tok, [p[:-cut] for p in base], 32, greedy=True, graphed=False)
    with open(os.path.join(folder, "prof_new_lengths.txt"), "w") as f:
        f.write(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25, max_name_column_width=60))
    for turn in range(turns):
        for name, attention in variants:
            cut += 1
            memory = torch.cuda.memory_stats() if device.startswith("cuda") else {}
            with swapped(decode, "sdpa_without_cudnn", attention):
                took, new = timed_turn(model, tok, [p[:-cut] for p in base], s.tokens, greedy=True,
                                       **(dict(reference=True) if name == "generate" else dict(graphed=False)))
            row = dict(variant=name, turn=turn, ms=round(1e3 * took / max(max(map(len, new)) - 1, 1), 2))
            if memory:
                row["device_allocations"] = torch.cuda.memory_stats()["num_device_alloc"] - memory["num_device_alloc"]
            rows.append(row)
            print(f"new lengths: {row}", flush=True)
        for name, attention in variants[:2]:  # an update's micro-batch: 2 padded rows, forward and backward
            cut += 1
            batch = generation.left_padded([base[0][:-cut] + base[1][:s.tokens], base[-1][:-cut] + base[0][:s.tokens - 9]],
                                       tok.pad_token_id, model.device)
            row = dict(variant=f"update micro-batch, {name}", turn=turn,
                       ms=round(1e3 * micro_batch_seconds(model, batch, s.tokens, attention(model)), 2))
            rows.append(row)
            print(f"new lengths: {row}", flush=True)
    out["new_lengths"] = rows


def micro_batch_seconds(model, batch, trained, attention):
    """Seconds of one forward and backward of a padded micro-batch (ids, mask, positions), the LM
    head over the last `trained` positions as in the update, under the run's autocast and the
    given attention context; the gradients dropped after."""
    ids, mask, positions = batch
    bench.synced()
    start = time.perf_counter()
    with autocast(str(model.device)), attention:
        logits = model(input_ids=ids, attention_mask=mask, position_ids=positions, logits_to_keep=trained).logits
    logits.float().logsumexp(-1).mean().backward()
    bench.synced()
    model.zero_grad(set_to_none=True)
    return time.perf_counter() - start


def train_section(path, device, s, work, out):
    """The card's command for s.steps steps: per-step phases, every turn's decode steps (timed
    around fast.decode.generate_turn) and the GPU's peak memory."""
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    sizes = ["--batch-size", str(s.questions), "--num-generations", str(s.G), "--max-completion-length", str(s.tokens)]
    turns, start = [], time.perf_counter()
    with timed_turns(turns):
        history = train.main(["--model", path, *CARD, *sizes, "--steps", str(s.steps), "--eval-every", "0",
                              "--out", os.path.join(work, "run")])
    wall = time.perf_counter() - start
    keys = ("t_generate", "gen_tokens", "t_reference", "t_update", "tokens_per_s", "zero_adv_groups")
    steps = [{k: line[k] for k in keys} for line in history if "t_update" in line]
    out["train"] = dict(wall_seconds=wall, steps=steps, turns=turns, args=CARD + sizes)
    if device.startswith("cuda"):
        out["train"].update(peak_allocated_gib=gb(torch.cuda.max_memory_allocated()),
                            peak_reserved_gib=gb(torch.cuda.max_memory_reserved()))


@contextlib.contextmanager
def timed_turns(turns):
    """Within the context every turn policy.py decodes appends (rows, longest prompt, longest new
    turn, seconds, ms a token step) to turns."""
    import fast.decode
    plain = fast.decode.generate_turn

    def timed(model, tok, prompts, *args, **kwargs):
        seconds, new = timed_turn(model, tok, prompts, *args, **kwargs)
        longest = max(map(len, new))
        turns.append(dict(rows=len(prompts), prompt=max(map(len, prompts)), new=longest, seconds=round(seconds, 3),
                          ms_per_token_step=round(1e3 * seconds / max(longest, 1), 2)))
        print(f"turn: {turns[-1]}", flush=True)
        return new

    fast.decode.generate_turn = timed
    try:
        yield
    finally:
        fast.decode.generate_turn = plain


class Tee(io.StringIO):
    """Keeps what is printed and prints it too."""

    def write(self, text):
        sys.__stdout__.write(text)
        return super().write(text)


def bench_section(path, device, s, folder, out):
    """speedlab/bench.py --trl --json --betas 0 (in this process, so that vary_rewards holds), its output kept."""
    argv = ["--trl", "--json", "--betas", "0", "--model", path, "--device", device, "--batch-size", str(s.questions),
            "--num-generations", str(s.G), "--max-completion-length", str(s.tokens), "--steps", "2", "--warmup", "1"]
    with contextlib.redirect_stdout(Tee()) as text:
        bench.main(argv)
    with open(os.path.join(folder, "bench.txt"), "w") as f:
        f.write("speedlab/bench.py " + " ".join(argv) + "\n" + text.getvalue())
    out["bench"] = json.loads([line for line in text.getvalue().splitlines() if line.startswith("{")][-1])


def graphed_section(path, device, s, prompts, out):
    """Greedy turns of our decode loop with its steps replayed as one CUDA graph (the default on a
    GPU: gpu_step.GraphedSteps) against the same loop without (graphed=False, the loop as before),
    bf16 and fp32: ms a decode step (the turn over its tokens, prefill and capture included) and
    rows whose tokens agree. On a CPU the graphed path's fixed-shape steps run eagerly."""
    model, tok = load_model(path, device)
    rows = {}
    for bf16 in (True, False):
        kind = "bf16" if bf16 else "fp32"
        loop_seconds, loop = timed_turn(model, tok, prompts, s.tokens, greedy=True, bf16=bf16, graphed=False)
        seconds, new = timed_turn(model, tok, prompts, s.tokens, greedy=True, bf16=bf16, graphed=True)
        same = sum(a == b for a, b in zip(loop, new))
        rows[kind] = dict(loop_ms=round(1e3 * loop_seconds / s.tokens, 2),
                          graphed_ms=round(1e3 * seconds / s.tokens, 2), rows_identical=f"{same}/{len(prompts)}")
        print(f"graphed {kind}: {rows[kind]}", flush=True)
    out["graphed"] = rows


def compiled_section(path, device, s, prompts, out):
    """generate over a static cache, which transformers compiles on a GPU (CUDA graphs), against
    eager generate, greedy. Both on bf16 weights without autocast: transformers' static cache takes
    the dtype of the first keys it stores, fp32 under autocast (rotary embeddings), and then
    refuses the bf16 values. Eager timed once, the static cache twice (the first call compiles)."""
    model, tok = load_model(path, device)
    model.to(torch.bfloat16)
    rows, tokens = {}, {}
    for call, cache in [("eager generate", None), ("static cache, first call (compiles)", "static"),
                        ("static cache, second call", "static")]:
        model.generation_config.cache_implementation = cache
        seconds, tokens[call] = timed_turn(model, tok, prompts, s.tokens, greedy=True, bf16=False, reference=True)
        rows[call] = dict(seconds=seconds, tokens=sum(map(len, tokens[call])))
        print(f"bf16 weights, {call}: {seconds:.2f} s", flush=True)
    same = sum(a == b for a, b in zip(tokens["eager generate"], tokens["static cache, second call"]))
    rows["rows_identical_compiled_vs_eager"] = f"{same}/{len(prompts)}"
    out["compiled_generate"] = rows


def vary_rewards():
    """A random model's turns all score the same rewards, so every group's advantages are 0 and
    the update skips every row (fast.update.policy_update): its cost would go unmeasured. Here the
    outcome reward (train.py) and the bench's reward (both sides) become the text's length in
    thousands of characters, which differs between a group's samples: the update then runs every
    row, as with a trained model whose samples score differently. For measuring only."""
    import rewards
    rewards.outcome_reward = lambda completion, answers, rubric=rewards.MT_GRPO: len(str(completion)) / 1000
    bench.format_reward = lambda text: len(text) / 1000


def run_section(name, run, out, device):
    """run(), timed into out["seconds"]; a failure is noted as out[name + "_error"] and leaves the
    other sections to run (returns None then). Memory is freed after."""
    start, result = time.perf_counter(), None
    try:
        result = run()
    except (Exception, SystemExit) as e:
        out[f"{name}_error"] = f"{type(e).__name__}: {str(e)[-800:]}"
        print(f"{name} failed: {out[f'{name}_error']}", flush=True)
    out["seconds"][name] = time.perf_counter() - start
    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return result


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--tiny", action="store_true", help="a CPU rehearsal: tiny model, 2 x 4 rows, 16 tokens, 1 step")
    p.add_argument("--smollm", default=None, help="folder with SmolLM2's tokenizer.json (default: the bundled model's)")
    p.add_argument("--out", default=".", help="folder for card.json and bench.txt")
    p.add_argument("--skip", nargs="*", default=[],
                   choices=["decode", "new_lengths", "train", "bench", "graphed", "compiled"])
    p.add_argument("--decode-rounds", type=int, default=1, help="decode: rounds of the variants (every other reversed)")
    p.add_argument("--train-steps", type=int, default=None, help="train: steps (default 3; --tiny 1)")
    p.add_argument("--same-rewards", action="store_true",
                   help="keep the real rewards (all equal on a random model: no update runs)")
    args = p.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    s = settings(args.tiny)
    s.steps = args.train_steps or s.steps
    if not args.same_rewards:
        vary_rewards()
    smollm = args.smollm or __import__("policy").bundled_model_dir()
    import transformers
    out = dict(device=bench.instruction_set(device), torch=torch.__version__, transformers=transformers.__version__,
               settings=vars(s), rewards="real" if args.same_rewards else "text length (vary_rewards)", seconds={})
    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        path = os.path.join(work, "model")
        shape = TINY if args.tiny else SHAPES["0.5B"]
        qwen_style.save_model(path, "base", smollm, max_position_embeddings=32768, **shape)
        prompts = None
        sections = [("decode", lambda: decode_section(path, device, s, out, args.decode_rounds)),
                    ("new_lengths", lambda: new_lengths_section(path, device, s, args.out, out)),
                    ("train", lambda: train_section(path, device, s, work, out)),
                    ("bench", lambda: bench_section(path, device, s, args.out, out)),
                    ("graphed", lambda: graphed_section(path, device, s, prompts, out)),
                    ("compiled", lambda: compiled_section(path, device, s, prompts, out))]
        for name, run in sections:
            if name in args.skip or name in ("graphed", "compiled") and prompts is None:
                continue
            result = run_section(name, run, out, device)
            if name == "decode" and result is not None:
                prompts = result
            with open(os.path.join(args.out, "card.json"), "w") as f:
                json.dump(out, f, indent=1)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
