"""Measure what a training step costs on this machine, every variant in one run so the ratios
hold even when absolute seconds drift:

    python bench.py                 # bundled model, the default run's shapes

- generation: one batched `generate` over real search prompts, fp32 vs bf16 autocast;
- update: forward + backward over the same number of sequences, fp32 vs bf16 autocast;
- the bf16 matmul peak of this CPU/GPU (2048 x 2048), to put the numbers in proportion.
"""
import argparse
import random
import resource
import time

import torch

import env_search
import questions as qa
from policy import (BUNDLED, Sample, autocast, first_trained, generate_turn, load_model, pad_batch,
                    token_logprobs)
from train import Args


def timed(fn, repeat=1):
    fn()  # warm-up
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - start) / repeat


def matmul_gflops(device, n=2048, repeat=10):
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    seconds = timed(lambda: a @ a, repeat)
    return 2 * n ** 3 / seconds / 1e9


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", default=BUNDLED)
    p.add_argument("--sequences", type=int, default=16, help="batch_size x num_generations of the default run")
    p.add_argument("--new-tokens", type=int, default=Args.max_completion_length)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = p.parse_args()
    model, tok = load_model(args.model, args.device)
    retriever = env_search.make_retriever()
    test = qa.split_by_article(qa.make_questions(env_search.load_wiki_corpus()))[1]
    envs = [env_search.SearchEnv(q["question"], q["answers"], retriever, one_shot=True)
            for q in random.Random(0).sample(test, args.sequences)]
    prompts = [tok(tok.apply_chat_template(e.messages, add_generation_prompt=True, tokenize=False),
                   add_special_tokens=False)["input_ids"] for e in envs]
    # update batch: prompt + a full-length turn, as long as a two-turn episode of the default run
    length = max(map(len, prompts)) + 2 * args.new_tokens + 200
    ids = [p + [tok.eos_token_id] * (length - len(p)) for p in prompts]
    samples = [Sample(ids=x, mask=[0] * len(p) + [1] * (length - len(p)), adv=[1.0] * length)
               for x, p in zip(ids, prompts)]

    def generate(bf16):
        torch.manual_seed(0)
        return generate_turn(model, tok, prompts, args.new_tokens, stop_strings=(), bf16=bf16)

    def update(bf16):
        for i in range(0, len(samples), Args.micro_batch_size):
            chunk = samples[i:i + Args.micro_batch_size]
            batch_ids, attn, mask, adv = pad_batch(chunk, args.device)
            with autocast(args.device, bf16):
                logp = token_logprobs(model, batch_ids, attn, 1.0, first_trained(chunk))
            (-(logp * adv[:, 1:] * mask[:, 1:]).sum() / mask.sum()).backward()
        model.zero_grad(set_to_none=True)

    print(f"{args.model} on {args.device}: {args.sequences} sequences, {args.new_tokens} new tokens, "
          f"update length {length} tokens")
    rows = {}
    for bf16 in (False, True):
        name = "bf16 autocast" if bf16 else "fp32"
        n_new = sum(map(len, generate(bf16)))
        g = timed(lambda: generate(bf16))
        u = timed(lambda: update(bf16))
        rows[name] = (g, n_new / g, u, args.sequences * length / u)
        print(f"{name:<14} generate {g:6.1f} s ({n_new / g:6.1f} tok/s)   "
              f"forward+backward {u:6.1f} s ({args.sequences * length / u:7.1f} tok/s)")
    fp, bf = rows["fp32"], rows["bf16 autocast"]
    print(f"bf16 / fp32 speed-up: generate {fp[0] / bf[0]:.2f}x, forward+backward {fp[2] / bf[2]:.2f}x")
    peak = matmul_gflops(args.device)
    params = sum(p.numel() for p in model.parameters())
    train_flops = 6 * params * args.sequences * length / bf[2] / 1e9
    print(f"bf16 matmul peak {peak:.0f} GFLOP/s; bf16 forward+backward reaches {train_flops:.0f} GFLOP/s "
          f"(6 x {params / 1e6:.0f}M params x tokens / s) = {100 * train_flops / peak:.0f}% of it")
    print(f"peak resident memory {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
