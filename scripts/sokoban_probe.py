"""Can the bundled 135M model learn to read the Sokoban board at all? A supervised probe.

Under the solver team reward every AT-GRPO group of K answers to one board learns which moves
shorten the optimal solution. This probe hands the model that answer directly: cross-entropy
on an optimal move (`M</answer>` after the prefilled `<answer>`) for the prompts of both roles along optimal play of
training levels (the planner's proposal shown to the executor is optimal half of the time and
a random move otherwise, so copying it is not enough). It logs, on boards of the test levels,
how often the greedy move is optimal, beside the best single move's rate (a board-blind
policy's best), then saves the model for the project's own evaluation:

    .venv/bin/python scripts/sokoban_probe.py --out runs/probe
    .venv/bin/python tools/evaluate.py --env sokoban --model runs/probe/checkpoint

If supervision with many labelled boards cannot beat the constants, reinforcement from the same
signal, with fewer and noisier samples, has little chance with this model.
"""
import argparse
import json
import os
import random
import sys
import time
from collections import Counter

import torch
from tqdm import tqdm

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import env_sokoban  # noqa: E402
import sokoban  # noqa: E402
import train  # noqa: E402
from machinery.precision import autocast  # noqa: E402
from generation import left_padded  # noqa: E402
from policy import BUNDLED, load_model, prompt_ids  # noqa: E402

TEST_SEED = 10 ** 9  # the test levels' first seed, as train.py's evaluation


def optimal_moves(state):
    """The moves after which the optimal solution is one move shorter."""
    left = sokoban.moves_left(state)
    return [m for m in "UDLR" if sokoban.moves_left(sokoban.move(state, m)) == left - 1]


def examples(seeds, args, tok, rng):
    """(prompt ids, optimal moves, turn) for both roles at every turn of optimal play of each level."""
    out = []
    for task in env_sokoban.make_tasks(seeds, args):
        while not task.done:
            best = optimal_moves(task.state)
            out.append((prompt_ids(tok, task.messages("planner"), args.prefill), best, task.turn))
            task.act("planner", f"<answer>{rng.choice(best if rng.random() < 0.5 else 'UDLR')}</answer>")
            out.append((prompt_ids(tok, task.messages("executor"), args.prefill), best, task.turn))
            task.act("executor", f"<answer>{rng.choice(best)}</answer>")
    return out


def blind_accuracy(data):
    """The best accuracy without the board: one move for every turn number (which the prompt
    shows), chosen on the data itself, so an upper bound for a board-blind policy."""
    turns = {t for _, _, t in data}
    return sum(max(sum(m in best for _, best, t in data if t == turn) for m in "UDLR") for turn in turns) / len(data)


def target_loss(model, rows, pad_id):
    """Mean cross-entropy of the answer tokens. Rows are left-padded so that every answer ends
    the row and only the last positions' logits are computed (logits_to_keep)."""
    ids, attn, _ = left_padded([prompt + target for prompt, target in rows], pad_id, "cpu")
    n = max(len(target) for _, target in rows)
    labels = torch.full((len(rows), n), -100)
    for i, (_, target) in enumerate(rows):
        labels[i, n - len(target):] = torch.tensor(target)
    logits = model(input_ids=ids, attention_mask=attn, logits_to_keep=n + 1).logits[:, :-1]
    return torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), labels.flatten(), ignore_index=-100)


def accuracy(model, tok, data, bf16):
    """How often the greedy first token of the answer is an optimal move, and how often each
    token was the greedy one (one token every time: the policy ignores the board and turn)."""
    hits, chosen = 0, Counter()
    with torch.no_grad(), autocast("cpu", bf16):
        for ids, best, _ in data:
            move = tok.decode(int(model(torch.tensor([ids])).logits[0, -1].argmax())).strip()
            hits, chosen[move] = hits + (move in best), chosen[move] + 1
    return hits / len(data), dict(chosen.most_common())


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", required=True, help="run folder: args.json, log.jsonl, checkpoint/")
    p.add_argument("--model", default=BUNDLED, help="start from this model (a probe's checkpoint to go on)")
    p.add_argument("--levels", type=int, default=256, help="training levels (both roles, every turn)")
    p.add_argument("--first-level", type=int, default=0, help="seed of the first training level")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--learning-rate", type=float, default=5e-5)
    p.add_argument("--test-levels", type=int, default=32, help="test levels whose boards measure accuracy")
    p.add_argument("--eval-every", type=int, default=32, help="optimizer steps between accuracy checks")
    p.add_argument("--seed", type=int, default=0)
    ours = p.parse_args(argv)
    if os.path.exists(os.path.join(ours.out, "log.jsonl")):
        raise SystemExit(f"{ours.out} already has a log.jsonl: give a new --out")
    args = train.parse_args(["--env", "sokoban"])  # the default task: levels, turns, prompts
    rng = random.Random(ours.seed)
    torch.manual_seed(ours.seed)
    model, tok = load_model(ours.model, "cpu")
    data = examples(range(ours.first_level, ours.first_level + ours.levels), args, tok, rng)
    test = examples(range(TEST_SEED, TEST_SEED + ours.test_levels), args, tok, rng)
    constant = max(sum(m in best for _, best, _ in test) / len(test) for m in "UDLR")
    blind = blind_accuracy(test)
    os.makedirs(ours.out, exist_ok=True)
    json.dump({**vars(ours), "train_examples": len(data), "test_examples": len(test), "best_single_move_accuracy":
               constant, "best_move_per_turn_accuracy": blind}, open(os.path.join(ours.out, "args.json"), "w"), indent=1)
    log = open(os.path.join(ours.out, "log.jsonl"), "w")
    optimizer = torch.optim.AdamW(model.parameters(), lr=ours.learning_rate, weight_decay=0.0)
    step, start = 0, time.time()

    def record(loss):
        hits, chosen = accuracy(model, tok, test, args.bf16)
        entry = {"step": step, "examples": step * ours.batch_size, "loss": loss, "test_accuracy": hits,
                 "greedy_moves": chosen, "best_single_move_accuracy": constant,
                 "best_move_per_turn_accuracy": blind, "minutes": round((time.time() - start) / 60, 1)}
        log.write(json.dumps(entry) + "\n")
        log.flush()
        tqdm.write(json.dumps(entry))

    record(None)
    for _ in range(ours.epochs):
        rng.shuffle(data)
        bar = tqdm(range(0, len(data) - ours.batch_size + 1, ours.batch_size), desc="probe", unit="step")
        for i in bar:
            chunk = data[i:i + ours.batch_size]
            rows = [(ids, tok(f"{rng.choice(best)}</answer>", add_special_tokens=False)["input_ids"])
                    for ids, best, _ in chunk]
            with autocast("cpu", args.bf16):
                loss = target_loss(model, rows, tok.pad_token_id)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            step += 1
            bar.set_postfix(loss=f"{loss.item():.3f}")
            if step % ours.eval_every == 0:
                record(round(loss.item(), 4))
    if step % ours.eval_every:
        record(round(loss.item(), 4))
    model.save_pretrained(os.path.join(ours.out, "checkpoint"))
    tok.save_pretrained(os.path.join(ours.out, "checkpoint"))
    print(f"saved {ours.out}/checkpoint: evaluate with\n  python tools/evaluate.py --env sokoban --model {ours.out}/checkpoint")


if __name__ == "__main__":
    main()
