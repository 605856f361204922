"""The decode step, lever by lever: one row per lever, every row timed in the same run.

    .venv/bin/python scripts/decode_levers.py            # bf16 autocast where native, else fp32
    .venv/bin/python scripts/decode_levers.py --fp32     # fp32 on any CPU
    .venv/bin/python scripts/decode_levers.py --one-prompt --variants draw "draw + 4-D mask"

The bench's 16 rows (2 search prompts x G = 8, as `tools/bench.py --trl` samples them; with
--one-prompt 16 rows of the first prompt, so no row is padded, as in a one-question step, a
Sokoban planner turn, whose prompts all have one length; with --rows R the first R of them) are
prefilled once per variant; then `--steps` decode steps are timed, each drawing the next token at
temperature 1 and running the one-token forward into the turn-sized cache, as
`machinery.decode.generate_turn` does (no row leaves, so every step has all its rows). Each variant
runs once per round, in the same order, and keeps its best round. Beside the times: the floor of
the same steps (tools/bench.py: max(FLOPs / matmul peak, bytes / copy bandwidth), both measured
in this run), and whether the variant's greedy tokens equal the first row's (32 greedy steps).

    before               torch.multinomial, transformers' sampler (V exponential numbers a row)
    draw                 machinery.decode.draw, one uniform number a row (the fast path's sampler)
    draw + math SDPA     the one-token forward with torch's math attention backend
    draw + plain attn    attention for one query as matmul, softmax, matmul (bf16 only; a kernel
                         registered with transformers' AttentionInterface for this script)
    draw + 4-D mask      the (rows, 1, 1, keys) mask passed ready, so transformers builds none and
                         SDPA always gets one (decode.one_token_mask: the fast path since it was
                         measured here; without padding transformers passes no mask, and SDPA's
                         grouped-query attention without a mask is slow on a CPU)
    ... + packed Linears every Linear (the LM head too) through oneDNN over its weight packed once
                         into the kernel's blocked layout (decode.packed_linears, the fast path since
                         it was measured here: in bf16 where native, the same numbers as F.linear,
                         which runs oneDNN too; in fp32 for sampled turns, the same up to rounding,
                         oneDNN's fp32 kernel adding up otherwise than MKL's, which generate uses;
                         here its greedy rows are packed too, to show whether their tokens change)
    ... + written-out step  the one-token step written out op by op (decode.decode_step, the fast
                         path since it was measured here: the model's logits bit for bit, none of
                         the modules' calls and wrappers; with packed Linears q, k and v from one)
    draw + static cache  every step the same shapes: transformers' static cache layers sized for
                         the turn and a mask over all of it (zeros past the written keys), eager
    ... + torch.compile  the same forward compiled once (dynamic=False): one graph serves every
                         step; its compile time is printed apart (a row reads "failed" where no
                         compiler works)
"""
import argparse
import contextlib
import os
import sys
import time

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from transformers import AttentionInterface, AttentionMaskInterface
from transformers.cache_utils import Cache, StaticLayer
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import sdpa_mask

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from machinery import decode  # noqa: E402
from machinery.precision import autocast, bf16_ok  # noqa: E402
from policy import BUNDLED, load_model  # noqa: E402
from tools import bench  # noqa: E402


def plain_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    """One query token in bf16: scores as a matmul (the query heads of a key/value head stacked),
    softmax in fp32, matmul with the values. Anything else goes to transformers' SDPA."""
    if query.shape[2] != 1 or query.dtype != torch.bfloat16:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                      scaling=scaling, **kwargs)
    B, H, _, D = query.shape
    scores = (query.view(B, key.shape[1], H // key.shape[1], D) @ key.transpose(-1, -2)).float() * scaling
    if attention_mask is not None:
        scores = scores.masked_fill(~attention_mask, float("-inf"))
    return (scores.softmax(-1).to(value.dtype) @ value).view(B, 1, H, D), None


AttentionInterface.register("plain_one_token", plain_attention)
AttentionMaskInterface.register("plain_one_token", sdpa_mask)


def multinomial(probs):
    return torch.multinomial(probs, 1)[:, 0]


VARIANTS = {  # name: (sampler, context for the forward, attention implementation, 4-D mask)
    "before (torch.multinomial)": (multinomial, contextlib.nullcontext, "sdpa", False),
    "draw": (decode.draw, contextlib.nullcontext, "sdpa", False),
    "draw + math SDPA": (decode.draw, lambda: sdpa_kernel(SDPBackend.MATH), "sdpa", False),
    "draw + plain attn": (decode.draw, contextlib.nullcontext, "plain_one_token", False),
    "draw + 4-D mask": (decode.draw, contextlib.nullcontext, "sdpa", True),
    "draw + 4-D mask + packed Linears": (decode.draw, contextlib.nullcontext, "sdpa", True),
    "draw + 4-D mask + written-out step": (decode.draw, contextlib.nullcontext, "sdpa", True),
    "draw + 4-D mask + packed Linears + written-out step": (decode.draw, contextlib.nullcontext, "sdpa", True),
}


def packing_seconds(model, bf16):
    """Seconds to pack every Linear once (decode.packed_linears packs on entering, with nothing
    packed yet)."""
    decode.PACKED.clear()
    start = time.perf_counter()
    with autocast("cpu", bf16), decode.packed_linears(model):
        return time.perf_counter() - start


@torch.no_grad()
def decode_steps(model, tok, prompts, steps, bf16, variant, greedy=False):
    """Seconds per decode step over `steps` steps after one prefill, and the tokens drawn."""
    sampler, context, attention, mask4 = VARIANTS[variant]
    model.config._attn_implementation, loaded = attention, model.config._attn_implementation
    unique = list(dict.fromkeys(map(tuple, prompts)))
    row_of = torch.tensor([unique.index(tuple(p)) for p in prompts])
    ids, attn, pos = decode.left_padded(unique, tok.pad_token_id, "cpu")
    try:
        with autocast("cpu", bf16):
            cache = decode.turn_cache(model.config, ids.shape[1] + steps + 1)
            out = model(input_ids=ids, attention_mask=attn, position_ids=pos, past_key_values=cache,
                        logits_to_keep=1)
            out.past_key_values.batch_select_indices(row_of)
            logits, attn, pos = out.logits[row_of, -1], attn[row_of], pos[row_of, -1]
            torch.manual_seed(0)
            packing = decode.packed_linears(model) if "packed" in variant else contextlib.nullcontext(False)
            with packing as packs, decode.written_out_steps(model, packs) if "written" in variant else \
                    contextlib.nullcontext():
                seconds, tokens = timed_steps(model, cache, logits, attn, pos, steps, sampler, context, mask4, greedy)
    finally:
        model.config._attn_implementation = loaded
    return seconds, tokens


def timed_steps(model, cache, logits, attn, pos, steps, sampler, context, mask4, greedy):
    """decode_steps' timed loop: (seconds a step, tokens)."""
    tokens, start = [], time.perf_counter()
    for _ in range(steps):
        token = logits.float().argmax(-1) if greedy else sampler(decode.sampling_probs(logits, 1.0, 1.0))
        tokens.append(token.tolist())
        attn, pos = torch.cat([attn, attn.new_ones(len(token), 1)], 1), pos + 1
        with context():
            logits = model(input_ids=token[:, None], position_ids=pos[:, None], past_key_values=cache,
                           attention_mask=attn[:, None, None, :].bool() if mask4 else attn).logits[:, -1]
    return (time.perf_counter() - start) / steps, tokens


class AutocastStaticLayer(StaticLayer):
    """transformers' StaticLayer in the dtype decode.TurnLayer keeps (decode.cache_dtype)."""

    def update(self, keys, values, *args, **kwargs):
        dtype = decode.cache_dtype(keys)
        return super().update(keys.to(dtype), values.to(dtype), *args, **kwargs)


STATIC = {"draw + static cache": False, "draw + static cache + torch.compile": True}
COMPILED = {}  # the compiled forward, made once (its compile time noted beside it)


def static_forward(model, compiled):
    """The model's forward, or torch.compile of it with static shapes, compiled on its first call."""
    if not compiled:
        return model
    if "forward" not in COMPILED:
        COMPILED["forward"] = torch.compile(model, dynamic=False)
    return COMPILED["forward"]


@torch.no_grad()
def static_steps(model, tok, prompts, steps, bf16, variant, greedy=False):
    """decode_steps with shapes that never change: every row prefilled into static layers of the
    turn's size, each step one token per row against the whole cache, the mask's next column set
    to 1 in place. The first step of a compiled forward compiles it (timed apart, once)."""
    ids, attn, pos = decode.left_padded(prompts, tok.pad_token_id, "cpu")
    width = ids.shape[1] + steps + 1
    mask = torch.nn.functional.pad(attn, (0, width - ids.shape[1]))
    forward, tokens = static_forward(model, STATIC[variant]), []
    with autocast("cpu", bf16):
        cache = Cache(layers=[AutocastStaticLayer(max_cache_len=width) for _ in range(model.config.num_hidden_layers)])
        logits = model(input_ids=ids, attention_mask=mask, position_ids=pos, past_key_values=cache,
                       logits_to_keep=1).logits[:, -1]
        pos = pos[:, -1]
        torch.manual_seed(0)
        start = None
        for step in range(steps):
            token = logits.float().argmax(-1) if greedy else decode.draw(decode.sampling_probs(logits, 1.0, 1.0))
            tokens.append(token.tolist())
            mask[:, ids.shape[1] + step], pos = 1, pos + 1
            first = time.perf_counter()
            logits = forward(input_ids=token[:, None], position_ids=pos[:, None], attention_mask=mask,
                             past_key_values=cache).logits[:, -1]
            if start is None:  # the first step is left out of the time (the first ever compiles)
                if STATIC[variant]:
                    COMPILED.setdefault("seconds", time.perf_counter() - first)
                start = time.perf_counter()
        seconds = (time.perf_counter() - start) / (steps - 1)
    return seconds, tokens


def run_variant(model, tok, prompts, steps, bf16, variant, greedy=False):
    """(seconds a step, tokens) of one variant; (None, None) if it fails (no compiler, ...)."""
    if variant not in STATIC:
        return decode_steps(model, tok, prompts, steps, bf16, variant, greedy)
    try:
        return static_steps(model, tok, prompts, steps, bf16, variant, greedy)
    except Exception as e:  # noqa: BLE001 - a lever that cannot run here is a row, not a crash
        print(f"{variant}: failed ({type(e).__name__}: {str(e).splitlines()[0][:200]})")
        return None, None


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--fp32", action="store_true", help="autocast off (fp32) also where bf16 is native")
    p.add_argument("--steps", type=int, default=32)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--one-prompt", action="store_true", help="16 rows of one prompt: no padding")
    p.add_argument("--rows", type=int, default=16, choices=range(1, 17), metavar="1-16",
                   help="the first R rows only (1: one prompt, one row)")
    p.add_argument("--variants", nargs="+", choices=[*VARIANTS, *STATIC], help="these rows only (default: all)")
    args = p.parse_args()
    bf16 = bf16_ok("cpu") and not args.fp32
    dtype = torch.bfloat16 if bf16 else torch.float32
    model, tok = load_model(BUNDLED, "cpu")
    prompts = [ids for ids in bench.search_prompts(tok, 2)[1] for _ in range(8)]
    prompts = (prompts[:1] * 16 if args.one_prompt else prompts)[:args.rows]
    variants = [v for v in args.variants or [*VARIANTS, *STATIC] if bf16 or "plain attn" not in v]
    peak, bandwidth = bench.matmul_gflops("cpu", dtype), bench.bandwidth_gbs("cpu")
    context = max(map(len, prompts)) + 1 + args.steps / 2  # the mean keys of a timed step
    floor = bench.floor_seconds(*bench.decode_work(model, len(prompts), context, dtype), peak, bandwidth)
    greedy = {v: run_variant(model, tok, prompts, 32, bf16, v, greedy=True)[1] for v in variants}
    if any("packed" in v for v in variants):
        print(f"packed Linears: packing every weight takes {1e3 * packing_seconds(model, bf16):.0f} ms "
              "(once while the weights stay the same)", flush=True)
    if "seconds" in COMPILED:
        print(f"torch.compile: first call {COMPILED['seconds']:.0f} s (compiling)", flush=True)
    best = {v: float("inf") for v in variants}
    for r in range(args.rounds):
        times = {v: run_variant(model, tok, prompts, args.steps, bf16, v)[0] for v in variants}
        best = {v: min(best[v], times[v] or float("inf")) for v in variants}
        print(f"round {r + 1}: " + ", ".join(f"{v} {1e3 * s:.1f} ms" for v, s in times.items() if s), flush=True)
    name = bench.DTYPE_NAMES[dtype]
    print(f"\n{name}: {len(prompts)} row{'s' * (len(prompts) > 1)}, prompts of {min(map(len, prompts))}-{max(map(len, prompts))} tokens, "
          f"{args.steps} decode steps, best of {args.rounds} rounds; {name} matmul peak {peak:.0f} GFLOP/s, "
          f"copy bandwidth {bandwidth:.1f} GB/s, floor {1e3 * floor:.1f} ms a step\n")
    print(f"| lever ({name}) | ms a step | × floor | vs before | greedy tokens as before |\n|---|---|---|---|---|")
    first = variants[0]
    for v in variants:
        same = "yes" if greedy[v] == greedy[first] else "no"
        if best[v] == float("inf"):
            print(f"| {v} | failed | | | |")
            continue
        print(f"| {v} | {1e3 * best[v]:.1f} | {best[v] / floor:.2f}× | {best[first] / best[v]:.2f}× | {same} |")


if __name__ == "__main__":
    main()
