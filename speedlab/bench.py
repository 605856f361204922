"""Measure what a training step costs on this machine, every variant in one run so the ratios
hold even when absolute seconds drift:

    python speedlab/bench.py          # ours alone: generate and forward+backward, fp32 vs bf16 autocast
    python speedlab/bench.py --trl    # one GRPO step, ours and TRL's GRPOTrainer side by side
    python speedlab/bench.py --trl --fp32     # the same with autocast off on both sides
    python speedlab/bench.py --shared-prompt  # AT-GRPO update: K candidates' shared prompt run once or K times
    python speedlab/bench.py --profile [--fp32]  # where a decode step and an update micro-batch spend their time

--trl needs TRL, kept out of the core requirements:
    pip install -c requirements.txt -r requirements-scale.txt

Precision: the phases compute in bf16 (autocast over fp32 weights) on a GPU and on a CPU with
native bf16 (AVX512-BF16 / AMX), else in fp32: most laptop CPUs have no native bf16, so training
there runs in fp32 (precision.bf16_ok). `python speedlab/bench.py` times bf16 against fp32 only where bf16 is
native; elsewhere it times fp32 alone and says so. `--trl --fp32` turns autocast off on both
sides (ours: the step's bf16 field; TRL: bf16=False), so ours / TRL can be measured in fp32 also
where bf16 runs; without it a CPU with no native bf16 already measures fp32. Every output line
and table names the precision it was measured in, and --trl the vector instructions this CPU's
kernels use ("instructions" in the --json line: AVX2 or AVX512, and whether bf16 is native; the
variables ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 make a
newer CPU run as the AVX2 kind, docs/benchmarks.md).

`python speedlab/bench.py` and --trl also measure the matmul peak of this CPU/GPU (2048 x 2048 on a
CPU, 8192 x 8192 on a GPU), in the same run and in the dtype the phases compute in (a line such as
"fp32 matmul peak at start: 612 GFLOP/s"); "% of peak" is relative to it, and the --json line
carries peak_gflops and peak_dtype.

--trl runs the same single-turn GRPO step on both sides: the same search prompts (one-shot example,
`<reasoning>` prefilled, as train.py builds them; identical token ids, checked), B questions x G
samples of at most L new tokens at temperature 1 (no top-k, no top-p, no stop strings), reward =
rewards.xml_format_reward, group-normalised advantages, the token-mean clipped loss (TRL's loss_type
"dapo"), mu = 1, AdamW, M sequences per forward/backward with gradient accumulation (by default 8 on
both sides: TRL's default, and train.py's `auto` on a CPU with the memory; the bench took 2 before
2026-11-28, docs/benchmarks.md), bf16 autocast over fp32 weights (fp32 with --fp32 or without native
bf16, see Precision); step k samples with torch seed k on both sides. Phases:

    generate   ours: decode.generate_turn    TRL: GRPOTrainer._generate_single_turn
    reference  ours: fast.update.fill_logprobs(ref) TRL: _get_per_token_logps_and_entropies(ref_model)
    update     ours: fast.update.policy_update TRL: the optimizer step (training_step x GA, grad
               clip, AdamW) minus _generate_and_score_completions
    step       all of it, rewards and bookkeeping included

Throughput: generated tokens / s for generate; trained tokens (completion tokens in the loss)
/ s for the others. FLOPs, the work a step needs: 2 N per token through a forward (generate and
reference), 6 N per token through forward + backward (update), N = the model's parameter count,
over each distinct prompt once plus every completion token. Work done again (a prompt run for
each of its G rows, padding) is not counted, so it shows as lost speed.
A forward hook on the first Linear layer records the dtype each phase really computes in.

The floors (--trl): a copy of 512 MB measures the memory bandwidth beside the matmul peak. A
decode step (DecodeClock: from the start of one one-token step to the next, sampling included:
seen on TRL's side through a hook on the model's forward, on ours through the decode loop's own
decode.WATCHERS, which also sees the steps a GPU replays as a CUDA graph) can take no less than
max(FLOPs / peak, bytes read / bandwidth): every Linear weight (LM head included) read once in
the compute dtype, 2 FLOPs per weight per row, and the keys/values of every row read once
(decode_work). Each side's mean decode step is printed beside its floor and as a multiple of it;
the update's multiple is FLOPs / peak.

Heap: on a CPU under glibc the bench, as train.py, first tells the C library to reuse freed memory
(fast/heap.py); being one process, TRL's side gets the same heap.
"""
import argparse
import contextlib
import functools
import gc
import json
import random
import resource
import tempfile
import time
import weakref
from collections import Counter, defaultdict
from dataclasses import replace

import torch

import os
import sys
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the project root: python speedlab/bench.py

import env_search
import env_sokoban
import questions as qa
import rewards
import retrieval
import sokoban
from mtgrpo import group_norm
import fast.decode
import fast.update
from fast.heap import keep_freed_memory
from machinery.precision import bf16_ok
from sample import Sample
from fast import decode
from fast.decode import generate_turn
from policy import BUNDLED, bundled_model_dir, load_model, prompt_ids
from config import Args
from machinery.cli import one_line

TRL_INSTALL = "pip install -c requirements.txt -r requirements-scale.txt"
PREFILL = "<reasoning>"
PHASES = ("generate", "reference", "update", "step")


# ---------------------------------------------------------------- shared
def synced():
    """Wait for the GPU's queued work (CUDA runs asynchronously: a clock read right after a call
    would miss the work still queued); nothing on a CPU, nor where no GPU is visible any more."""
    if torch.cuda.is_initialized() and torch.cuda.is_available():
        torch.cuda.synchronize()


def timed(fn, repeat=1):
    fn()  # warm-up
    synced()
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    synced()
    return (time.perf_counter() - start) / repeat


DTYPE_NAMES = {torch.bfloat16: "bf16", torch.float32: "fp32"}


def compute_dtype(device, bf16=True):
    """The dtype the phases compute in: bf16 under autocast where the hardware has it and bf16
    is on, else fp32 (precision.autocast is then a no-op)."""
    return torch.bfloat16 if bf16 and bf16_ok(device) else torch.float32


def matmul_gflops(device, dtype, n=None, repeat=10):
    """(n x n) @ (n x n) throughput in `dtype`: the ceiling the phases computing in that dtype
    are compared against (n: 2048 on a CPU, 8192 on a GPU, which a smaller product leaves idle)."""
    n = n or (8192 if device.startswith("cuda") else 2048)
    a = torch.randn(n, n, device=device, dtype=dtype)
    seconds = timed(lambda: a @ a, repeat)
    return 2 * n ** 3 / seconds / 1e9


def bandwidth_gbs(device, megabytes=None, repeat=5):
    """Memory bandwidth: bytes read plus bytes written per second by one large copy (fp32), far
    larger than the caches (512 MB on a CPU, 2 GB on a GPU). The ceiling of a step that reads its
    weights and cache once."""
    megabytes = megabytes or (2048 if device.startswith("cuda") else 512)
    a = torch.ones(megabytes * 2 ** 20 // 4, device=device)
    b = torch.empty_like(a)
    seconds = timed(lambda: b.copy_(a), repeat)
    return 2 * a.numel() * a.element_size() / seconds / 1e9


@functools.lru_cache(maxsize=4)
def linear_weights(model):
    """The number of Linear weights (and biases) of a model, counted once per model."""
    return sum(p.numel() for m in model.modules() if isinstance(m, torch.nn.Linear) for p in m.parameters())


def decode_work(model, rows, context, dtype):
    """(FLOPs, bytes read) of one decode step of `rows` rows over `context` keys each: every Linear
    weight read once (the LM head included; norms and the embedding rows looked up are left out),
    2 FLOPs per weight per row, and the keys/values of every row read once by attention
    (4 FLOPs per key per head dimension: q.k and p.v). In `dtype`'s bytes: under autocast the
    weights are read as the bf16 copies made once per turn, and the cache holds bf16."""
    c = model.config.get_text_config()
    weights = linear_weights(model)
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    kv_heads = getattr(c, "num_key_value_heads", None) or c.num_attention_heads
    flops = 2 * weights * rows + 4 * c.num_hidden_layers * c.num_attention_heads * head_dim * context * rows
    cache = 2 * c.num_hidden_layers * kv_heads * head_dim * context * rows
    size = torch.empty((), dtype=dtype).element_size()
    return flops, size * (weights + cache)


def floor_seconds(flops, bytes_read, peak_gflops, bandwidth):
    """The least time a step can take: its arithmetic at the matmul peak, or its reads at the
    copy bandwidth, whichever is longer."""
    return max(flops / (peak_gflops * 1e9), bytes_read / (bandwidth * 1e9))


class DecodeClock:
    """Times the decode steps of generation the same way for both sides, while the probe's phase is
    "generate": a decode step is the time from the start of one one-token step to the next within
    a turn (the forward, sampling the next token, the loop's bookkeeping); its work (decode_work)
    is counted for the same rows and keys. transformers' generate (TRL's side) is seen through a
    pre-hook on the model's forward; our decode loop tells its steps itself (decode.WATCHERS), since
    a step it replays as a CUDA graph calls no forward, and the forwards it makes inside a turn
    (prefills, a graph's capture) are then not noted again."""

    clocks = weakref.WeakSet()  # every clock alive: `told` hands each the loop's events for its model

    def __init__(self, model, probe, dtype):
        self.model, self.probe, self.dtype, self.calls, self.in_loop = model, probe, dtype, [], False
        model.register_forward_pre_hook(self._note, with_kwargs=True)
        DecodeClock.clocks.add(self)
        if told not in decode.WATCHERS:
            decode.WATCHERS.append(told)

    def watch(self, event, rows, keys):
        self.in_loop = event != "end"
        if self.probe.phase == "generate" and event != "end":
            self.calls.append((time.perf_counter(), rows, keys) if event == "step" else None)

    def _note(self, module, args, kwargs):
        if self.probe.phase != "generate" or self.in_loop:
            return
        ids, attn, cache = (kwargs.get(k) for k in ("input_ids", "attention_mask", "past_key_values"))
        if ids is None or ids.shape[1] != 1 or attn is None and cache is None:
            self.calls.append(None)  # a prefill: the next forward starts a new turn
            return
        # the mask's last dimension (2-D, or a ready 4-D mask); generate drops an all-ones mask
        context = attn.shape[-1] if attn is not None else cache.get_seq_length() + 1
        self.calls.append((time.perf_counter(), ids.shape[0], context))

    def take(self):
        """[(seconds, FLOPs, bytes)] of every decode step followed by another, since the last take
        (the work is counted here, outside the timed steps)."""
        calls, self.calls = self.calls, []
        return [(b[0] - a[0], *decode_work(self.model, a[1], a[2], self.dtype))
                for a, b in zip(calls, calls[1:]) if a and b]


def told(model, event, rows, keys):
    """The bench's one entry in decode.WATCHERS: each live clock of `model` notes the loop's event."""
    for clock in list(DecodeClock.clocks):
        if clock.model is model:
            clock.watch(event, rows, keys)


def search_prompts(tok, n, seed=0):
    """n real search prompts as train.py builds them (system prompt, one-shot example, a training
    question, then the `<reasoning>` prefill), as text and as token ids of that text."""
    retriever = retrieval.make_retriever()
    train = qa.split_by_article(qa.make_questions(retrieval.load_wiki_corpus()))[0]
    envs = [env_search.SearchEnv(q["question"], q["answers"], retriever, one_shot=True)
            for q in random.Random(seed).sample(train, n)]
    texts = [tok.apply_chat_template(e.messages, add_generation_prompt=True, tokenize=False) + PREFILL
             for e in envs]
    return texts, [tok(t, add_special_tokens=False)["input_ids"] for t in texts]


def format_reward(completion_text):
    """The bench's reward on both sides: the XML format reward of the one generated turn."""
    return rewards.xml_format_reward([{"role": "assistant", "content": PREFILL + completion_text}])


def n_params(model):
    return sum(p.numel() for p in model.parameters())


class DtypeProbe:
    """Records the output dtype of each model's first Linear layer (the LM head and the query, key
    and value projections aside: a hook on one of those keeps cpu_step.decode_step from stacking
    them), per phase: the proof that a phase really computes in bf16 (autocast) and not in fp32."""

    def __init__(self, *models):
        self.phase, self.seen = None, defaultdict(set)
        for model in filter(None, models):
            layer = next(m for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)
                         and not n.endswith(("lm_head", "q_proj", "k_proj", "v_proj")))
            layer.register_forward_hook(self._record)

    def _record(self, module, inputs, output):
        if self.phase:
            self.seen[self.phase].add(str(output.dtype).removeprefix("torch."))

    @contextlib.contextmanager
    def __call__(self, phase):
        before, self.phase = self.phase, phase
        try:
            yield
        finally:
            self.phase = before


@contextlib.contextmanager
def clock(log, phase, probe=None):
    """Add the seconds spent in the block to log[phase] (and tag the probe with the phase)."""
    synced()
    start = time.perf_counter()
    with probe(phase) if probe else contextlib.nullcontext():
        yield
    synced()
    log[phase] += time.perf_counter() - start


def forward_backward(model, samples, micro_batch_size, device, bf16=True):
    """The compute of an update (fast.update.policy_update: each group's shared prompt once, then
    micro-batches with gradient accumulation, backward), with a learning rate of 0."""
    cfg = Args(micro_batch_size=micro_batch_size, temperature=1.0, beta=0.0, device=device, bf16=bf16)
    fast.update.policy_update(model, torch.optim.SGD(model.parameters(), lr=0.0), samples, cfg)


# ---------------------------------------------------------------- ours alone: fp32 vs bf16
def precision_bench(args):
    """generate and forward+backward on the default run's shapes, fp32 vs bf16 autocast, each
    against the matmul peak of its dtype. Without native bf16 only fp32 is timed: precision.autocast
    is then a no-op, so a "bf16" row would time fp32 again and print a speed-up of 1 that means
    nothing, and forcing torch.autocast would time an emulated bf16 that training never uses."""
    model, tok = load_model(args.model, args.device)
    prompts = search_prompts(tok, args.sequences)[1]
    # update batch: prompt + a full-length turn, as long as a two-turn episode of the default run
    length = max(map(len, prompts)) + 2 * args.max_completion_length + 200
    ids = [p + [tok.eos_token_id] * (length - len(p)) for p in prompts]
    samples = [Sample(ids=x, mask=[0] * len(p) + [1] * (length - len(p)), adv=[1.0] * length)
               for x, p in zip(ids, prompts)]

    def generate(bf16):
        torch.manual_seed(0)
        return generate_turn(model, tok, prompts, args.max_completion_length, bf16=bf16)

    def update(bf16):
        forward_backward(model, samples, args.micro_batch_size, args.device, bf16)

    print(f"{args.model} on {args.device}: {args.sequences} sequences, {args.max_completion_length} "
          f"new tokens, update length {length} tokens, micro-batch {args.micro_batch_size}")
    if not bf16_ok(args.device):
        print(f"no native bf16 on this {args.device}: training computes in fp32 here (bf16 autocast "
              f"would be emulated and is not used), so only fp32 is timed")
    rows, params = {}, n_params(model)
    precisions = (False, True) if bf16_ok(args.device) else (False,)
    for bf16 in precisions:
        n_new = sum(map(len, generate(bf16)))
        g = timed(lambda: generate(bf16))
        u = timed(lambda: update(bf16))
        rows[compute_dtype(args.device, bf16)] = (g, u)
        print(f"{'bf16 autocast' if bf16 else 'fp32':<14} generate {g:6.1f} s ({n_new / g:6.1f} tok/s)   "
              f"forward+backward {u:6.1f} s ({args.sequences * length / u:7.1f} tok/s)")
    if len(rows) == 2:
        (fg, fu), (bg, bu) = rows[torch.float32], rows[torch.bfloat16]
        print(f"bf16 / fp32 speed-up: generate {fg / bg:.2f}x, forward+backward {fu / bu:.2f}x")
    for dtype, (_, u) in rows.items():
        name, peak = DTYPE_NAMES[dtype], matmul_gflops(args.device, dtype)
        train_flops = 6 * params * args.sequences * length / u / 1e9
        print(f"{name} matmul peak {peak:.0f} GFLOP/s; {name} forward+backward reaches {train_flops:.0f} "
              f"GFLOP/s (6 x {params / 1e6:.0f}M params x tokens / s) = {100 * train_flops / peak:.0f}% of it")


# ---------------------------------------------------------------- shared prompt (AT-GRPO)
def shared_prompt_bench(args):
    """forward+backward of AT-GRPO groups (K candidates of one Sokoban prompt, a full-length
    answer each, bf16 autocast where native, else fp32): the prompt run K times (each row's
    first token made different, so nothing is shared: the same shapes), and the prompt run once
    per group (fast.update.SharedPrompt) with micro-batches of 1 row and of K rows."""
    model, tok = load_model(args.model, args.device)
    K, g = args.num_generations, torch.Generator().manual_seed(0)
    tasks = [env_sokoban.SokobanTask(sokoban.level_for(s, 5, 1, 4)) for s in range(args.sequences // K)]
    prompts = [prompt_ids(tok, t.messages("planner"), "<answer>") for t in tasks]
    groups = [[Sample(ids=p + torch.randint(0, 1000, (args.max_completion_length,), generator=g).tolist(),
                      mask=[0] * len(p) + [1] * args.max_completion_length,
                      adv=[0.0] * len(p) + [1.0] * args.max_completion_length) for _ in range(K)] for p in prompts]
    unshared = [[replace(s, ids=[100 + k] + s.ids[1:]) for k, s in enumerate(group)]
                for group in groups]

    def update(groups, mb):
        forward_backward(model, [s for group in groups for s in group], mb, args.device)

    rows = {f"prompt {K} times, {K} rows": timed(lambda: update(unshared, K), 2),
            "prompt once, 1 row": timed(lambda: update(groups, 1), 2),
            f"prompt once, {K} rows": timed(lambda: update(groups, K), 2)}
    print(f"{args.model} on {args.device}: {len(groups)} groups x K = {K}, prompt {len(prompts[0])} tokens "
          f"+ {args.max_completion_length} trained tokens, forward+backward in "
          f"{DTYPE_NAMES[compute_dtype(args.device)]}")
    base = rows[f"prompt {K} times, {K} rows"]
    for name, seconds in rows.items():
        print(f"{name:<24} {seconds:6.2f} s   speed-up {base / seconds:.2f}x")


# ---------------------------------------------------------------- where the time goes: --profile
KINDS = (  # what a profiled aten op counts as; the first kind whose test matches
    ("attention", lambda n: "scaled_dot_product" in n or "flash" in n),
    ("matmuls", lambda n: n in {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul",
                                "aten::linear", "mkldnn::_linear_pointwise"}),  # the last: cpu_step.packed_linears
    ("casts and copies", lambda n: n in {"aten::copy_", "aten::_to_copy", "aten::to", "aten::clone", "aten::contiguous"}),
    ("sampling and log-probs over the vocabulary", lambda n: n in {
        "aten::multinomial", "aten::exponential_", "aten::argmax", "aten::softmax", "aten::_softmax",
        "aten::log_softmax", "aten::_log_softmax", "aten::_log_softmax_backward_data", "aten::div", "aten::div_",
        "aten::cumsum", "aten::searchsorted", "aten::rand", "aten::uniform_", "aten::gather"}),
    ("other ops (elementwise, norms, indexing, zero fills)", lambda n: True),
)
OUTSIDE = "Python and dispatch between the ops"


def profiled(fn, kinds=KINDS):
    """(wall seconds, {kind: seconds}) of fn() under torch.profiler: each op's self time added to its
    kind (`kinds`, by default KINDS), and the wall time the ops leave uncovered as OUTSIDE (profiling
    slows the Python side, so that share is an upper bound)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        fn()
        wall = time.perf_counter() - start
    return wall, by_kind(((event.key, event.self_cpu_time_total / 1e6) for event in prof.key_averages()), wall, kinds)


def by_kind(seconds_per_op, wall, kinds=KINDS):
    """{kind: seconds} of (op name, seconds) pairs, each op under the first of `kinds` whose test
    matches, and the wall time they leave uncovered as OUTSIDE."""
    totals = Counter()
    for name, seconds in seconds_per_op:
        totals[next(k for k, test in kinds if test(name))] += seconds
    totals[OUTSIDE] = max(0.0, wall - sum(totals.values()))
    return totals


def profile_bench(args):
    """Where a decode step and an update micro-batch spend their time: the bench's 16 search
    prompts (B questions x G rows), decoded for 1 token and for 1 + S tokens with the same seed
    (the difference is S decode steps), and one micro-batch of 2 rows of one question (its prompt
    once, forward and backward), in bf16 autocast where native (fp32 with --fp32)."""
    model, tok = load_model(args.model, args.device)
    bf16 = bf16_ok(args.device) and not args.fp32
    ids = search_prompts(tok, args.batch_size, args.seed)[1]
    prompts = [p for p in ids for _ in range(args.num_generations)]
    decoded = []
    counter = model.register_forward_pre_hook(
        lambda m, a, k: decoded.append(k["input_ids"].shape[0]) if k["input_ids"].shape[1] == 1 else None,
        with_kwargs=True)

    def generate(n):
        torch.manual_seed(0)
        return generate_turn(model, tok, prompts, n, bf16=bf16)

    generate(1 + args.decode_steps)  # warm-up
    decoded.clear()
    one, long = profiled(lambda: generate(1)), profiled(lambda: generate(1 + args.decode_steps))
    counter.remove()
    steps = len(decoded)
    new = generate(args.max_completion_length)[:2]
    samples = [Sample(ids=prompts[0] + n, mask=[0] * len(prompts[0]) + [1] * len(n),
                      adv=[0.0] * len(prompts[0]) + [1.0] * len(n)) for n in new]
    forward_backward(model, samples, 2, args.device, bf16)  # warm-up
    update = profiled(lambda: forward_backward(model, samples, 2, args.device, bf16))
    step = {k: (long[1][k] - one[1][k]) / steps for k in long[1]}
    dtype = DTYPE_NAMES[compute_dtype(args.device, bf16)]
    print(f"{args.model} on {args.device} in {dtype}: decode step = ({steps} decode forwards, "
          f"{sum(decoded) / steps:.1f} rows on average, prompts of {min(map(len, ids))}-{max(map(len, ids))} "
          f"tokens); update micro-batch = 2 rows of {len(prompts[0])} prompt + {max(map(len, new))} completion tokens\n")
    print(f"| {dtype} | decode step (ms) | share | update micro-batch (ms) | share |\n|---|---|---|---|---|")
    for kind in [k for k, _ in KINDS] + [OUTSIDE]:
        print(f"| {kind} | {1e3 * step[kind]:.1f} | {100 * step[kind] / sum(step.values()):.0f} % "
              f"| {1e3 * update[1][kind]:.0f} | {100 * update[1][kind] / update[0]:.0f} % |")
    print(f"| total (under the profiler) | {1e3 * (long[0] - one[0]) / steps:.1f} | 100 % | {1e3 * update[0]:.0f} | 100 % |")
    print("\nThe whole two-turn update a training step runs, by kind of op: speedlab/update_profile.py "
          "(docs/benchmarks.md).")


# ---------------------------------------------------------------- side by side: ours
def step_config(args, beta):
    """config.Args of the bench step (the fields policy_update reads); bf16 autocast where the
    hardware has it, unless --fp32."""
    return Args(num_generations=args.num_generations, max_completion_length=args.max_completion_length,
                beta=beta, micro_batch_size=args.micro_batch_size, learning_rate=args.learning_rate,
                temperature=1.0, loss_type="token", num_iterations=1, device=args.device,
                bf16=bf16_ok(args.device) and not args.fp32)


def our_step(model, ref, tok, optimizer, prompts, cfg, probe):
    """One single-turn GRPO step with policy.py; returns seconds per phase and token counts."""
    log = Counter()
    with clock(log, "step"):
        torch.manual_seed(cfg.seed)  # run_ours seeds step k with k, as TRLPhases does
        with clock(log, "generate", probe):
            new = generate_turn(model, tok, prompts, cfg.max_completion_length, cfg.temperature,
                                bf16=cfg.bf16)
        r = torch.tensor([format_reward(tok.decode(n, skip_special_tokens=True)) for n in new])
        adv = group_norm(r.view(-1, cfg.num_generations)).view(-1).tolist()
        samples = [Sample(ids=p + n, mask=[0] * len(p) + [1] * len(n), adv=[0.0] * len(p) + [a] * len(n))
                   for p, n, a in zip(prompts, new, adv)]
        if ref is not None:
            with clock(log, "reference", probe):
                fast.update.fill_logprobs(ref, samples, "ref_logp", cfg.temperature, cfg.micro_batch_size, cfg.bf16)
        with clock(log, "update", probe):
            fast.update.policy_update(model, optimizer, samples, cfg)
    log.update(generated=sum(map(len, new)), trained=sum(map(len, new)), prompt=sum(map(len, prompts)),
               distinct_prompt=sum(map(len, set(map(tuple, prompts)))),
               positions=sum(len(s.ids) for s in samples))
    return log, [list(p) for p in prompts]


def run_ours(args, cfg, batches):
    """All steps with policy.py on fresh models. Returns per-step logs, the dtype per phase, the
    prompt ids of each step and N."""
    torch.manual_seed(0)
    model, tok = load_model(args.model, args.device)
    ref = load_model(args.model, args.device)[0].requires_grad_(False) if cfg.beta > 0 else None
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.learning_rate, weight_decay=0.0)
    probe = DtypeProbe(model, ref)
    clock = DecodeClock(model, probe, compute_dtype(args.device, cfg.bf16))
    logs, prompts = [], []
    for k, batch in enumerate(batches):
        log, used = our_step(model, ref, tok, optimizer, batch, replace(cfg, seed=k), probe)
        log["decode"] = clock.take()
        logs.append(log)
        prompts.append(used)
    return logs, dict(probe.seen), prompts, n_params(model)


# ---------------------------------------------------------------- side by side: TRL
def import_trl():
    try:
        import datasets
        import transformers
        import trl
    except ImportError as e:
        raise SystemExit(f"speedlab/bench.py --trl needs TRL ({e}). Run: {TRL_INSTALL}")
    return datasets, transformers, trl


def trl_config(trl, args, cfg, max_steps, out):
    """GRPOConfig with our step's settings (see the module docstring for what matches what)."""
    cpu = args.device == "cpu"
    return trl.GRPOConfig(
        output_dir=out, use_cpu=cpu, bf16=cfg.bf16, seed=0, max_steps=max_steps,
        per_device_train_batch_size=cfg.micro_batch_size,
        gradient_accumulation_steps=args.batch_size * cfg.num_generations // cfg.micro_batch_size,
        num_generations=cfg.num_generations, max_completion_length=cfg.max_completion_length,
        temperature=cfg.temperature, top_p=1.0, top_k=0, beta=cfg.beta, num_iterations=1,
        epsilon=cfg.epsilon, epsilon_high=cfg.epsilon_high, loss_type="dapo", scale_rewards="group",
        learning_rate=cfg.learning_rate, lr_scheduler_type="constant", warmup_steps=0,
        weight_decay=0.0, max_grad_norm=cfg.max_grad_norm, optim="adamw_torch",
        gradient_checkpointing=False,  # TRL's default is True; ours never recomputes activations
        disable_dropout=True,  # ours runs in eval(); SmolLM2's dropout is 0 anyway
        shuffle_dataset=False,  # step k trains on the same B questions as our step k
        report_to="none", save_strategy="no", logging_steps=10 ** 6, disable_tqdm=True,
        log_completions=False, dataloader_num_workers=0)


class TRLPhases:
    """Times the phases of TRL's GRPOTrainer by wrapping its own methods (trl 1.16 names) and a
    callback for the optimizer step. Also keeps the prompt ids TRL generated from, per step."""

    def __init__(self, trainer, probe, transformers, decode):
        self.trainer, self.probe, self.decode = trainer, probe, decode
        self.logs, self.prompts, self.log = [], [], None
        for name in ("_generate_single_turn", "_get_per_token_logps_and_entropies",
                     "_generate_and_score_completions", "compute_loss"):
            setattr(trainer, name, getattr(self, name.lstrip("_"))(getattr(trainer, name)))
        phases = self

        class StepClock(transformers.TrainerCallback):
            def on_step_begin(self, *_, **__):
                synced()
                phases.log, phases.start = Counter(), time.perf_counter()

            def on_step_end(self, *_, **__):
                synced()
                log = phases.log
                log["step"] = time.perf_counter() - phases.start
                log["update"] = log["step"] - log.pop("rollout")
                log["decode"] = phases.decode.take()
                phases.logs.append(log)

        trainer.add_callback(StepClock())

    def generate_single_turn(self, original):
        def wrapped(prompt_ids, *a, **k):
            torch.manual_seed(len(self.prompts))  # step k samples with seed k, as run_ours
            with clock(self.log, "generate", self.probe):
                completion_ids, logprobs = original(prompt_ids, *a, **k)
            self.prompts.append([list(p) for p in prompt_ids])
            self.log["generated"] += sum(map(len, completion_ids))
            self.log["distinct_prompt"] += sum(map(len, set(map(tuple, prompt_ids))))
            return completion_ids, logprobs
        return wrapped

    def get_per_token_logps_and_entropies(self, original):
        def wrapped(model, *a, **k):
            if model is not self.trainer.ref_model:
                if not torch.is_grad_enabled():  # old log-probs: TRL skips them when mu = 1
                    self.log["old_logp_calls"] += 1
                return original(model, *a, **k)
            with clock(self.log, "reference", self.probe):
                return original(model, *a, **k)
        return wrapped

    def generate_and_score_completions(self, original):
        def wrapped(inputs):
            with clock(self.log, "rollout"):
                out = original(inputs)
            trained = int(out["completion_mask"].sum())
            self.log.update(trained=trained, prompt=int(out["prompt_mask"].sum()),
                            positions=int(out["prompt_mask"].sum()) + trained,
                            padded=out["prompt_ids"].numel() + out["completion_ids"].numel())
            return out
        return wrapped

    def compute_loss(self, original):
        def wrapped(*a, **k):
            with self.probe("update"):
                return original(*a, **k)
        return wrapped


def run_trl(args, cfg, batches, texts):
    """All steps with TRL's GRPOTrainer on the same prompts, same return as run_ours."""
    datasets, transformers, trl = import_trl()
    path = bundled_model_dir() if args.model == BUNDLED else args.model
    unique = [t for i, t in enumerate(texts) if i % cfg.num_generations == 0]  # one per question

    def xml_format(completions, **_):
        return [format_reward(c) for c in completions]

    with tempfile.TemporaryDirectory() as out:
        trainer = trl.GRPOTrainer(model=path, reward_funcs=xml_format,
                                  args=trl_config(trl, args, cfg, len(batches), out),
                                  train_dataset=datasets.Dataset.from_dict({"prompt": unique}))
        probe = DtypeProbe(trainer.model, trainer.ref_model)
        clock = DecodeClock(trainer.model, probe, compute_dtype(args.device, cfg.bf16))
        phases = TRLPhases(trainer, probe, transformers, clock)
        assert next(trainer.model.parameters()).dtype == torch.float32, "TRL should keep fp32 weights"
        trainer.train()
    assert not any(log["old_logp_calls"] for log in phases.logs), "TRL computed old log-probs"
    return phases.logs, dict(probe.seen), phases.prompts, n_params(trainer.model)


# ---------------------------------------------------------------- side by side: report
def totals(logs):
    """The steps' counters added up (the decode steps' lists left out)."""
    return sum((Counter({k: v for k, v in log.items() if k != "decode"}) for log in logs), Counter())


def decode_summary(logs, peak, bandwidth):
    """The decode steps of the timed steps: mean milliseconds, mean floor (floor_seconds of each
    step's own work) and their ratio, the multiple of the floor."""
    steps = [d for log in logs for d in log.get("decode", ())]
    if not steps:
        return None
    seconds = sum(t for t, _, _ in steps)
    floor = sum(floor_seconds(f, b, peak, bandwidth) for _, f, b in steps)
    return dict(steps=len(steps), ms=1e3 * seconds / len(steps), floor_ms=1e3 * floor / len(steps),
                multiple=seconds / floor)


def summarize(logs, params, peak):
    """Per phase: total seconds, throughput (tokens / s) and FLOP/s of the work a step needs
    (each distinct prompt once, every completion token) as a fraction of `peak`."""
    total = totals(logs)
    needed = total["distinct_prompt"] + total["trained"]  # tokens a step must run through the model
    flops = {"generate": 2 * params * (total["distinct_prompt"] + total["generated"]),
             "reference": 2 * params * needed, "update": 6 * params * needed}
    flops["step"] = sum(flops[p] for p in ("generate", "update")) + (flops["reference"] if total["reference"] else 0)
    rows = {}
    for phase in PHASES:
        seconds = total[phase]
        if not seconds:
            continue
        tokens = total["generated"] if phase == "generate" else total["trained"]
        rows[phase] = dict(seconds=seconds / len(logs), tok_s=tokens / seconds,
                           peak=flops[phase] / seconds / 1e9 / peak)
    return rows, total


def table(beta, ours, trl, dtype):
    """Markdown rows for one beta (measured in `dtype`): seconds per step, tokens / s, ratio and
    % of the peak."""
    lines = [f"| β = {beta:g}, {dtype} | ours s/step | TRL s/step | ours tok/s | TRL tok/s "
             f"| ours / TRL speed | ours % of peak | TRL % of peak |", "|---|---|---|---|---|---|---|---|"]
    for phase in PHASES:
        if phase in ours and phase in trl:
            o, t = ours[phase], trl[phase]
            lines.append(f"| {phase} | {o['seconds']:.1f} | {t['seconds']:.1f} | {o['tok_s']:.1f} "
                         f"| {t['tok_s']:.1f} | **{o['tok_s'] / t['tok_s']:.2f}×** "
                         f"| {100 * o['peak']:.1f} % | {100 * t['peak']:.1f} % |")
    return "\n".join(lines)


def precision_note(args):
    """What both sides of --trl compute in, and why."""
    if args.fp32:
        return "fp32 on both sides (--fp32: autocast off, ours bf16=False, TRL bf16=False)"
    if bf16_ok(args.device):
        return "bf16 autocast over fp32 weights on both sides (--fp32 to measure fp32)"
    return f"fp32 on both sides (no native bf16 on this {args.device}: training runs in fp32 too)"


def instruction_set(device):
    """The vector instructions torch's CPU kernels use here (AVX2, AVX512, ...; capped by the
    ATEN_CPU_CAPABILITY and ONEDNN_MAX_CPU_ISA variables) and whether bf16 is native; on a GPU its name."""
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(device)
    return f"{torch.backends.cpu.get_cpu_capability()}, native bf16: {'yes' if bf16_ok(device) else 'no'}"


def side_by_side(args):
    """Ours and TRL on the same steps, for each beta, alternating which side goes first."""
    import_trl()  # fail before anything slow
    n_steps = args.warmup + args.steps
    per_step = args.batch_size * args.num_generations
    tok = load_model(args.model, args.device)[1]
    texts, ids = search_prompts(tok, args.batch_size * n_steps, args.seed)
    texts = [t for t in texts for _ in range(args.num_generations)]  # G samples per question
    ids = [p for p in ids for _ in range(args.num_generations)]
    batches = [ids[i:i + per_step] for i in range(0, len(ids), per_step)]
    dtype = compute_dtype(args.device, not args.fp32)
    print(f"precision: {precision_note(args)}; instructions: {instruction_set(args.device)}")
    peak, bandwidth = matmul_gflops(args.device, dtype), bandwidth_gbs(args.device)
    print(f"{DTYPE_NAMES[dtype]} matmul peak at start: {peak:.0f} GFLOP/s; copy bandwidth {bandwidth:.1f} GB/s")
    results = {}
    for beta in args.betas:
        cfg = step_config(args, beta)
        logs, dtypes, used, params = defaultdict(list), {}, {}, 0
        for r in range(args.rounds):
            for side in (("ours", "trl") if r % 2 == 0 else ("trl", "ours")):
                start = time.perf_counter()
                run = run_ours(args, cfg, batches) if side == "ours" else run_trl(args, cfg, batches, texts)
                side_logs, dtypes[side], used[side], params = run
                logs[side] += side_logs[args.warmup:]
                print(f"beta {beta:g} round {r + 1} {side}: {time.perf_counter() - start:.0f} s; per step "
                      + ", ".join(f"{k} {v:.1f}" for k, v in sorted(totals(side_logs[args.warmup:]).items())
                                  if k in PHASES) + " s summed; generated tokens per step "
                      + str([log["generated"] for log in side_logs]), flush=True)
                gc.collect()
        same = used["ours"] == used["trl"]
        print(f"beta {beta:g}: identical prompt token ids on both sides: {same}")
        print(f"beta {beta:g}: dtype of the first Linear's output per phase: ours {dtypes['ours']}, "
              f"TRL {dtypes['trl']}")
        results[beta] = {side: logs[side] for side in ("ours", "trl")}, params
    peak, bandwidth = max(peak, matmul_gflops(args.device, dtype)), max(bandwidth, bandwidth_gbs(args.device))
    print(f"{DTYPE_NAMES[dtype]} matmul peak (best of start and end): {peak:.0f} GFLOP/s; "
          f"copy bandwidth {bandwidth:.1f} GB/s")
    return report(args, results, peak, bandwidth, DTYPE_NAMES[dtype])


def speedups(ours, trl, o_total, t_total, n):
    """The headline numbers of one beta: ours / TRL in tokens per second per phase, our share of
    the matmul peak (in the dtype the phases compute in), and the tokens per step of each side."""
    out = {f"{p}_speedup": ours[p]["tok_s"] / trl[p]["tok_s"] for p in PHASES if p in ours and p in trl}
    out.update({f"{p}_peak_fraction": ours[p]["peak"] for p in ("generate", "update", "step")},
               trl_update_peak_fraction=trl["update"]["peak"], trl_generate_peak_fraction=trl["generate"]["peak"])
    for side, total in (("ours", o_total), ("trl", t_total)):
        out[f"{side}_generated_tokens_per_step"] = total["generated"] / n
        out[f"{side}_trained_tokens_per_step"] = total["trained"] / n
        out[f"{side}_update_tokens_per_step"] = total["positions"] / n
        out[f"{side}_distinct_prompt_tokens_per_step"] = total["distinct_prompt"] / n
    return out


def floor_table(beta, ours, trl, update, dtype):
    """Markdown rows: the mean decode step of each side against its floor, and the update's
    multiple of its floor (FLOPs / matmul peak)."""
    lines = [f"| β = {beta:g}, {dtype} | ours | TRL |", "|---|---|---|"]
    if ours and trl:
        lines += [f"| decode step (ms, mean of {ours['steps']} / {trl['steps']}) | {ours['ms']:.1f} | {trl['ms']:.1f} |",
                  f"| its floor (ms) | {ours['floor_ms']:.1f} | {trl['floor_ms']:.1f} |",
                  f"| decode step / floor | **{ours['multiple']:.2f}×** | {trl['multiple']:.2f}× |"]
    lines.append(f"| update / floor (FLOPs / peak) | **{1 / update['ours']:.2f}×** | {1 / update['trl']:.2f}× |")
    return "\n".join(lines)


def report(args, results, peak, bandwidth, dtype):
    """Print the tables, measured in `dtype` ("bf16" or "fp32"); return {"peak_gflops",
    "peak_dtype", "bandwidth_gbs", "by_beta": {beta: speedups and floors}} (the --json line)."""
    summary = {"peak_gflops": peak, "peak_dtype": dtype, "bandwidth_gbs": bandwidth, "by_beta": {}}
    print(f"\n{args.model} on {args.device}, computing in {dtype}: {args.batch_size} questions "
          f"x G = {args.num_generations}, at most {args.max_completion_length} new tokens, micro-batch "
          f"{args.micro_batch_size}, {args.steps} timed steps after {args.warmup} warm-up "
          f"x {args.rounds} round(s); {dtype} matmul peak {peak:.0f} GFLOP/s\n")
    for beta, (logs, params) in results.items():
        ours, o_total = summarize(logs["ours"], params, peak)
        trl, t_total = summarize(logs["trl"], params, peak)
        print(table(beta, ours, trl, dtype))
        n = len(logs["ours"])
        print(f"\nper step (β = {beta:g}): generated tokens ours {o_total['generated'] / n:.0f}, "
              f"TRL {t_total['generated'] / n:.0f}; tokens through the update (prompt + completion) "
              f"ours {o_total['positions'] / n:.0f}, TRL {t_total['positions'] / n:.0f} "
              f"(padded to {t_total['padded'] / n:.0f})\n")
        floors = {side: decode_summary(logs[side], peak, bandwidth) for side in ("ours", "trl")}
        print(floor_table(beta, floors["ours"], floors["trl"],
                          {"ours": ours["update"]["peak"], "trl": trl["update"]["peak"]}, dtype) + "\n")
        summary["by_beta"][f"{beta:g}"] = {**speedups(ours, trl, o_total, t_total, n),
                                          **floor_fields(floors["ours"], floors["trl"], ours["update"]["peak"])}
    return summary


def floor_fields(ours, trl, update_peak_fraction):
    """The --json fields of the floors: each side's mean decode step, its floor and the multiple."""
    out = {"update_floor_multiple": 1 / update_peak_fraction}
    for side, row in (("", ours), ("trl_", trl)):
        if row:
            out.update({f"{side}decode_step_ms": row["ms"], f"{side}decode_floor_ms": row["floor_ms"],
                        f"{side}decode_floor_multiple": row["multiple"]})
    return out


# ---------------------------------------------------------------- main
@one_line
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--trl", action="store_true", help="one GRPO step, ours and TRL side by side")
    p.add_argument("--shared-prompt", action="store_true", help="AT-GRPO groups: the prompt once vs K times")
    p.add_argument("--profile", action="store_true", help="where a decode step and an update micro-batch spend their time")
    p.add_argument("--decode-steps", type=int, default=16, help="--profile: decode steps profiled")
    p.add_argument("--model", default=BUNDLED)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--max-completion-length", type=int, default=Args.max_completion_length)
    p.add_argument("--micro-batch-size", type=int, help="rows a forward/backward, both sides (default 8, TRL's "
                   "per_device_train_batch_size default and train.py's auto on a CPU with the memory; with --trl "
                   "the largest of 8, 4, 2, 1 that divides the step's rows)")
    p.add_argument("--sequences", type=int, default=16, help="without --trl: batch_size x num_generations (all rows)")
    p.add_argument("--batch-size", type=int, default=Args.batch_size, help="--trl: questions per step")
    p.add_argument("--num-generations", type=int, default=Args.num_generations, help="--trl: G; --shared-prompt: K")
    p.add_argument("--betas", type=float, nargs="+", default=[0.0, 0.04], help="--trl: KL weights to run")
    p.add_argument("--learning-rate", type=float, default=Args.learning_rate)
    p.add_argument("--steps", type=int, default=3, help="--trl: timed steps per side")
    p.add_argument("--warmup", type=int, default=1, help="--trl: untimed steps first")
    p.add_argument("--rounds", type=int, default=1, help="--trl: repeat ours/TRL, alternating the order")
    p.add_argument("--seed", type=int, default=0, help="--trl: which training questions")
    p.add_argument("--json", action="store_true", help="--trl: end with one JSON line of the ratios")
    p.add_argument("--fp32", action="store_true", help="--trl: autocast off on both sides (fp32 also where bf16 runs)")
    args = p.parse_args(argv)
    if args.decode_steps < 1:
        p.error("--decode-steps must be at least 1")
    if args.json and not args.trl or args.fp32 and not (args.trl or args.profile):
        p.error("--json goes with --trl; --fp32 with --trl or --profile")
    rows = args.batch_size * args.num_generations
    if args.micro_batch_size is None:
        args.micro_batch_size = next(m for m in (8, 4, 2, 1) if not args.trl or rows % m == 0)
    if args.trl and (args.micro_batch_size < 1 or rows % args.micro_batch_size):
        p.error(f"--micro-batch-size {args.micro_batch_size} must divide the step's {rows} rows "
                "(--batch-size x --num-generations): TRL accumulates whole micro-batches")
    kept = keep_freed_memory(args.device)  # as train.py does; both sides of --trl run in this process
    print("heap: freed memory kept for reuse (fast/heap.py), for all measured here" if kept else
          "heap: as the C library sets it (fast/heap.py changes nothing here)")
    summary = side_by_side(args) if args.trl else shared_prompt_bench(args) if args.shared_prompt else \
        profile_bench(args) if args.profile else precision_bench(args)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak resident memory {rss:.0f} MB")
    if args.json:  # one line: ours / TRL per phase, fractions of the peak, tokens per step
        print(json.dumps({**summary, "peak_rss_mb": rss, "instructions": instruction_set(args.device),
                          "heap_kept": kept}))


if __name__ == "__main__":
    main()
