"""One step of the card's command on a Qwen2.5-0.5B-shaped model, offline, on this machine.

    .venv/bin/python scripts/qwen_shaped_smoke.py                 # CPU: G = 4, 32 tokens a turn
    .venv/bin/python scripts/qwen_shaped_smoke.py --beta 0.04     # with a reference model
    .venv/bin/python scripts/qwen_shaped_smoke.py --size 1.5B     # Qwen2.5-1.5B's shape

No hub weights: the model is Qwen2.5-0.5B's published shape (24 layers, hidden 896, 14 query and
2 key/value heads, 151,936 tied embedding rows; 494 M parameters) with random weights, and the
tokenizer is the test suite's Qwen2.5-style one (tests/qwen_style.py). The step is the card's
command (`train.py --algo mt --model Qwen/Qwen2.5-0.5B` with the README's GPU settings) at a size
a CPU can take: one question, G = 4, 32 new tokens a turn. Prints the wall time of the step, the
peak resident memory of the process, and the size of the checkpoint it wrote (weights and
optimizer state), then deletes the model folder and the run (each several GB). The peak
memory is the whole process's: building the model included.
"""
import argparse
import os
import resource
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]
import qwen_style  # noqa: E402
import train  # noqa: E402
from policy import bundled_model_dir  # noqa: E402

# published shapes (config.json of Qwen/Qwen2.5-0.5B and Qwen/Qwen2.5-1.5B)
SHAPES = {"0.5B": dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                       num_key_value_heads=2),
          "1.5B": dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
                       num_key_value_heads=2)}
CARD = ["--algo", "mt", "--learning-rate", "1e-6", "--warmup-steps", "20", "--num-iterations", "2",
        "--max-grad-norm", "0.1", "--temperature", "0.9"]


def folder_gb(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files) / 1e9


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--size", choices=SHAPES, default="0.5B")
    p.add_argument("--beta", default="0", help="k3 KL weight (above 0 loads a reference model)")
    p.add_argument("--num-generations", default="4")
    p.add_argument("--max-completion-length", default="32")
    p.add_argument("--work", default=None, help="folder for the model and the run (default: a temporary one)")
    args = p.parse_args()
    work = tempfile.mkdtemp(prefix="qwen-smoke-", dir=args.work)
    try:
        t0 = time.time()
        model, _ = qwen_style.save_model(os.path.join(work, "model"), "base", bundled_model_dir(),
                                         max_position_embeddings=32768, **SHAPES[args.size])
        n = sum(p.numel() for p in model.parameters())
        del model
        print(f"Qwen2.5-{args.size}-shaped random model: {n / 1e6:.0f} M parameters, built in {time.time() - t0:.0f} s")
        run = os.path.join(work, "run")
        t0 = time.time()
        line = train.main(["--model", os.path.join(work, "model"), *CARD, "--steps", "1", "--batch-size", "1",
                    "--num-generations", args.num_generations, "--max-completion-length", args.max_completion_length,
                    "--beta", args.beta, "--eval-every", "0", "--out", run])[-1]
        seconds = time.time() - t0
        ckpt = os.path.join(run, "checkpoint")
        weights = folder_gb(ckpt) - os.path.getsize(os.path.join(ckpt, "trainer_state.pt")) / 1e9
        print(f"\nrollout {line['t_generate']:.0f} s ({line['gen_tokens']} tokens), reference and old "
              f"log-probs {line['t_reference']:.0f} s, update {line['t_update']:.0f} s")
        print(f"one step (load, rollout, update, save): {seconds:.0f} s; peak resident memory "
              f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.1f} GB; checkpoint "
              f"{folder_gb(ckpt):.2f} GB ({weights:.2f} GB weights and tokenizer, "
              f"{folder_gb(ckpt) - weights:.2f} GB optimizer state)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
