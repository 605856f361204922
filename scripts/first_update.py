"""How far one update moves the policy: KL, clip fraction and gradient norm of the lesson's update
(notebooks/lesson.ipynb, section 4: one search group of G = 8, mu = 2, beta = 0.04) at each learning
rate a reader meets, on the bundled model.

    .venv/bin/python scripts/first_update.py --out docs/runs/first-update

Settings, each from the same weights and the same episodes:
  - "1e-5, no warm-up": AdamW at 1e-5 from its first step;
  - "CPU default": train.py's defaults, 1e-5 with 3 warm-up steps, so step 1 runs at 1e-5 / 3;
  - "card": the README's GPU command, 1e-6 with 20 warm-up steps, so step 1 runs at 1e-6 / 20.
For each: the second mu-step's KL to the reference (k3, nats per trained token), its clip fraction
and gradient norm (train.update's log), and how far AdamW's first step moved the weights: at its
first step Adam divides the gradient by its own magnitude (m / sqrt(v) = g / |g|), so every weight
with a gradient moves by the learning rate whatever the gradient's size; the median |dw| / lr shows it.
In bf16 autocast a weight that sits exactly on a bf16 rounding midpoint (a tie) rounds to its upper
or lower neighbour as soon as it moves at all, in the direction it moved: the share of such weights
(`on_bf16_midpoint`) says how much bf16 can enlarge a small step. --fp32 runs without autocast.
Writes first_update.json (first_update_fp32.json with --fp32) and prints a table. The update runs
the default (fast) path, whose gradient is the plain update's (tests/test_loss.py).
"""
import argparse
import json
import os
import random
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import torch  # noqa: E402

import env_search  # noqa: E402
import mtgrpo  # noqa: E402
import rewards  # noqa: E402
import train  # noqa: E402
from config import parse_args  # noqa: E402
from policy import load_model, pick_device, play_episodes  # noqa: E402

SETTINGS = [("1e-5, no warm-up", 1e-5, 1), ("CPU default: 1e-5, 3 warm-up steps", 1e-5, 3),
            ("card: 1e-6, 20 warm-up steps", 1e-6, 20)]


def group(model, tok, args):
    """The lesson's group: the first training question whose G episodes differ in both rewards, with
    MT-GRPO's token advantages."""
    retriever, questions, _ = train.load_task(args)
    G = args.num_generations
    for question in questions[:8]:
        envs = train.make_envs([question], retriever, args, repeat=G)
        samples, _ = play_episodes(model, tok, envs, args, env_search.STOP_STRINGS)
        turn_r, outcome_r, _ = rewards.score_episodes(envs)
        if len({r[0] for r in turn_r}) > 1 and len(set(outcome_r)) > 1:
            break
    adv = mtgrpo.turn_advantages(torch.tensor(turn_r).view(1, G, 1), torch.tensor(outcome_r).view(1, G), "mt")[0]
    for i, s in enumerate(samples):
        s.adv, s.mask = mtgrpo.token_advantages(s.turn, adv[i].tolist())
    return question["question"], samples


def first_step_moves(model, optimizer, lr):
    """Wrap optimizer.step: after its first call, the median and 99th percentile of |dw| / lr over
    the weights that moved."""
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    real, seen = optimizer.step, {}

    def step(*a, **k):
        out = real(*a, **k)
        if not seen:
            moved = torch.cat([(p.detach() - before[n]).abs().flatten() for n, p in model.named_parameters()])
            moved = moved[moved > 0] / lr
            pick = torch.randint(len(moved), (1_000_000,), generator=torch.Generator().manual_seed(0))
            q = torch.quantile(moved[pick].float(), torch.tensor([0.5, 0.99]))
            seen.update(median_dw_over_lr=q[0].item(), p99_dw_over_lr=q[1].item(), weights_moved=len(moved))
        return out
    optimizer.step = step
    return seen


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=None, help="folder for first_update.json (default: print only)")
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--fp32", action="store_true", help="no bf16 autocast (as on a CPU without native bf16)")
    ours = p.parse_args(argv)
    random.seed(0)
    torch.manual_seed(0)
    args = parse_args(["--algo", "mt", "--model", ours.model, "--micro-batch-size", "2", "--bf16", str(not ours.fp32)])
    device = pick_device(args.device)
    model, tok = load_model(args.model, device)
    question, samples = group(model, tok, args)
    low = torch.cat([p.detach().flatten().view(torch.int32) & 0xFFFF for p in model.parameters()])
    midpoint = (low == 0x8000).float().mean().item()  # fp32 weights exactly halfway between two bf16 values
    start = {k: v.clone() for k, v in model.state_dict().items()}
    ref = load_model(args.model, device)[0].requires_grad_(False)
    args.num_iterations, args.beta = 2, 0.04
    rows, t0 = [], time.time()
    for name, lr, warmup in SETTINGS:
        model.load_state_dict(start)
        for s in samples:
            s.old_logp = s.ref_logp = None
        step_lr = lr * min(1.0, 1 / warmup)  # train.py's linear warm-up at step 1
        optimizer = torch.optim.AdamW(model.parameters(), lr=step_lr, weight_decay=0.0)
        moves = first_step_moves(model, optimizer, step_lr)
        stats = train.update({"policy": model}, ref, {"policy": optimizer}, samples, args)
        rows.append(dict(setting=name, lr=lr, warmup_steps=warmup, step_lr=step_lr, kl=stats["kl"],
                         clip_fraction=stats["clip_fraction"], grad_norm=stats["grad_norm"], **moves))
    print(f"bf16 autocast: {args.bf16}; weights on a bf16 rounding midpoint: {midpoint:.2%}")
    print(f"question: {question}; {len(samples)} episodes, "
          f"{sum(sum(s.mask) for s in samples)} trained tokens; mu = 2, beta = 0.04; {time.time() - t0:.0f} s")
    print("| setting | lr at step 1 | KL (nats/token) | clip fraction | gradient norm | median abs(dw) / lr |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['setting']} | {r['step_lr']:.2g} | {r['kl']:.4f} | {r['clip_fraction']:.3f} | "
              f"{r['grad_norm']:.1f} | {r['median_dw_over_lr']:.2f} |")
    if ours.out:
        os.makedirs(ours.out, exist_ok=True)
        with open(os.path.join(ours.out, "first_update_fp32.json" if ours.fp32 else "first_update.json"), "w") as f:
            json.dump(dict(question=question, device=device, bf16=args.bf16, on_bf16_midpoint=midpoint, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
