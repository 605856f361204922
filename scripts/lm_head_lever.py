"""The update of a two-turn search step with the LM head over every position after the prompt, or
only where a row has a trained token (not over the tool results), timed in one run.

    .venv/bin/python scripts/lm_head_lever.py            # bf16 autocast where native, else fp32
    .venv/bin/python scripts/lm_head_lever.py --fp32

2 search prompts (tools/bench.py's) x G = 8 rows, each continued by a 64-token query turn
(trained), `--results` tokens of tool results (not trained) and a 64-token answer turn (trained);
random token ids, advantage 1. loss.policy_update_fast with learning rate 0 at micro-batch 2, each
variant once per round, best of `--rounds`; the two gradients are compared (relative L2 norm).
"""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import loss  # noqa: E402
from machinery.precision import bf16_ok  # noqa: E402
from policy import BUNDLED, load_model  # noqa: E402
from sample import Sample  # noqa: E402
from tools import bench  # noqa: E402
from train import Args  # noqa: E402


token_logprobs = loss.token_logprobs


def everywhere(model, ids, attn, temperature, prompt=None, trained=None):
    """token_logprobs as before this lever: the LM head over every position after the prompt."""
    return token_logprobs(model, ids, attn, temperature, prompt)


def update(model, samples, bf16, variant):
    """Seconds of one update and its gradient."""
    loss.token_logprobs = everywhere if variant == "everywhere" else token_logprobs
    model.zero_grad(set_to_none=True)
    grads = []

    class Keep(torch.optim.SGD):
        def step(self):
            grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))

    start = time.perf_counter()
    loss.policy_update_fast(model, Keep(model.parameters(), lr=0.0), samples,
                            Args(micro_batch_size=2, temperature=1.0, beta=0.0, device="cpu", bf16=bf16))
    seconds = time.perf_counter() - start
    loss.token_logprobs = token_logprobs
    return seconds, grads[0]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--fp32", action="store_true")
    p.add_argument("--results", type=int, default=160, help="tool-result tokens between the turns")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    bf16 = bf16_ok("cpu") and not args.fp32
    model, tok = load_model(BUNDLED, "cpu")
    g = torch.Generator().manual_seed(0)
    samples = []
    for prompt in bench.search_prompts(tok, 2)[1]:
        for _ in range(8):
            turn1, results, turn2 = (torch.randint(0, 40000, (n,), generator=g).tolist() for n in (64, args.results, 64))
            mask = [0] * len(prompt) + [1] * 64 + [0] * args.results + [1] * 64
            samples.append(Sample(ids=prompt + turn1 + results + turn2, mask=mask, adv=[float(m) for m in mask]))
    update(model, samples[:2], bf16, "trained")  # warm-up
    best, grads = {}, {}
    for r in range(args.rounds):
        times = {}
        for variant in ("everywhere", "trained"):
            times[variant], grads[variant] = update(model, samples, bf16, variant)
            best[variant] = min(best.get(variant, float("inf")), times[variant])
        print(f"round {r + 1}: " + ", ".join(f"{v} {s:.1f} s" for v, s in times.items()), flush=True)
    diff = ((grads["trained"] - grads["everywhere"]).norm() / grads["everywhere"].norm()).item()
    name = "bf16" if bf16 else "fp32"
    print(f"\n{name}: 16 rows of a {len(samples[0].ids) - 128 - args.results}-token prompt + 64 + {args.results} "
          f"(not trained) + 64 tokens; update at micro-batch 2, best of {args.rounds}\n")
    print(f"| LM head ({name}) | update (s) | speed |\n|---|---|---|")
    for v, label in (("everywhere", "every position after the prompt"), ("trained", "trained positions only")):
        print(f"| {label} | {best[v]:.1f} | {best['everywhere'] / best[v]:.2f}× |")
    print(f"\ngradients differ by {diff:.2e} (relative L2 norm)")


if __name__ == "__main__":
    main()
