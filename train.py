"""Train a search agent with MT-GRPO (or the GRPO-OR / GRPO-MR baselines).

    python train.py --algo mt                                 # CPU, bundled SmolLM2-135M, offline
    python train.py --algo mt --model Qwen/Qwen2.5-0.5B       # one CUDA GPU, bf16 autocast

One step: sample `batch_size` questions, roll out `num_generations` (G) two-turn episodes per
question (all active episodes of a turn in one `generate` call), score them with rewards.py,
turn them into per-turn advantages with mtgrpo.py, and take `num_iterations` clipped
policy-gradient steps (policy.py). Metrics go to OUT/log.jsonl, checkpoints to OUT/checkpoint.
"""
import argparse
import dataclasses
import json
import os
import random
import shutil
import sys
import time
from dataclasses import dataclass

import numpy as np
import torch
from tqdm import tqdm

import env_search
import mtgrpo
import questions as qa
import rewards
from policy import (BUNDLED, Sample, autocast, bf16_ok, fill_logprobs, generate_turn,
                    load_model, pick_device, policy_update)


@dataclass
class Args:
    algo: str = "mt"  # advantage estimator: mt (MT-GRPO), mr (GRPO-MR), or (GRPO-OR)
    model: str = BUNDLED  # hub id, local folder, or the bundled offline model
    steps: int = 30  # training steps (rollout batches)
    batch_size: int = 2  # questions per step
    num_generations: int = 8  # G: rollouts per question, one group
    max_completion_length: int = 64  # new tokens per turn
    learning_rate: float = 1e-5  # AdamW learning rate after warmup
    warmup_steps: int = 3  # linear learning-rate warmup
    beta: float = 0.0  # weight of the k3 KL to the reference model (0: no reference loaded)
    epsilon: float = 0.2  # lower clip: ratio >= 1 - epsilon
    epsilon_high: float = 0.2  # upper clip: ratio <= 1 + epsilon_high
    num_iterations: int = 1  # mu: policy updates per rollout batch
    loss_type: str = "token"  # token: mean over all tokens of the batch; seq: mean of sequence means
    alpha: float = 1.0  # MT-GRPO turn discount in A_k = sum alpha^(l-k) norm(R^T_l) + ...
    max_grad_norm: float = 1.0  # gradient-norm clip
    micro_batch_size: int = 1  # sequences per forward/backward: sets peak memory (CPU: 1 is also fastest)
    temperature: float = 1.0  # sampling temperature (log-probs use the same)
    top_p: float = 1.0  # nucleus sampling
    one_shot: bool = True  # show one worked example as earlier chat turns (small models need it)
    prefill: str = "<reasoning>"  # text the environment puts at the start of every model turn
    top_k: int = 1  # documents per search
    max_words: int = 120  # words per document shown to the model
    retriever_url: str = ""  # Search-R1-style server instead of the in-memory BM25
    corpus: str = ""  # JSONL of {"title","text"} instead of the bundled Wikipedia summaries
    train_questions: str = ""  # JSONL of {"question","answers"} instead of generated questions
    test_questions: str = ""  # JSONL for evaluation (with train_questions)
    eval_every: int = 10  # greedy evaluation on the test split every N steps (0: never)
    eval_n: int = 64  # test questions per evaluation
    save_every: int = 6  # checkpoint every N steps (and at the end)
    seed: int = 0  # seeds question order, sampling and initialisation
    device: str = "auto"  # auto, cpu, cuda, cuda:1 ...
    bf16: bool = True  # bf16 autocast where the hardware supports it
    out: str = "runs/mt"  # run folder: args.json, log.jsonl, checkpoint/
    resume: str = ""  # run folder to continue from its last checkpoint


def parse_args(argv=None):
    """Flags from the dataclass (dashes for underscores). With --resume, the saved args are the
    defaults and only flags given explicitly override them."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    for f in dataclasses.fields(Args):
        kind = (lambda s: s.lower() in ("1", "true", "yes")) if f.type is bool else f.type
        p.add_argument("--" + f.name.replace("_", "-"), type=kind, default=argparse.SUPPRESS,
                       help=f"(default: {f.default!r})")
    given = vars(p.parse_args(argv))
    saved = {}
    if given.get("resume"):
        path = os.path.join(given["resume"], "args.json")
        if not os.path.exists(path):
            p.error(f"--resume {given['resume']}: no args.json there; give the run folder (--out) of an earlier run")
        saved = json.load(open(path))
    args = Args(**{**saved, **given})
    if args.resume:
        args.out = args.resume
    if args.algo not in ("mt", "mr", "or"):
        p.error(f"--algo must be mt, mr or or, not {args.algo!r}")
    if args.loss_type not in ("token", "seq"):
        p.error(f"--loss-type must be token or seq, not {args.loss_type!r}")
    return args


# ---------------------------------------------------------------- rollouts
def env_suffix_ids(tok, observation, last_token):
    """Token ids that close the model's turn, show `observation` as a user message and open
    the next assistant turn, as the chat template writes them (tokenised once, mask 0)."""
    probe = [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "\x00"}]
    text = tok.apply_chat_template(probe + [{"role": "user", "content": observation}],
                                   tokenize=False, add_generation_prompt=True)
    suffix = text[text.index("\x00") + 1:]
    end = tok.decode([last_token])
    if last_token == tok.eos_token_id and suffix.startswith(end):
        suffix = suffix[len(end):]  # the model already closed its turn itself
    return tok(suffix, add_special_tokens=False)["input_ids"]


def rollout(model, tok, envs, args, greedy=False):
    """Play every episode to the end; returns one Sample per env (advantages filled later) and
    `turn_of`: for each token the 0-based turn that generated it, -1 for prompt/environment."""
    prefill = tok(args.prefill, add_special_tokens=False)["input_ids"] if args.prefill else []
    ids, turn_of = [], []
    for env in envs:
        prompt = tok.apply_chat_template(env.messages, add_generation_prompt=True, tokenize=False)
        ids.append(tok(prompt, add_special_tokens=False)["input_ids"] + prefill)
        turn_of.append([-1] * len(ids[-1]))
    active, turn, n_generated = list(range(len(envs))), 0, 0
    while active:
        new = generate_turn(model, tok, [ids[i] for i in active], args.max_completion_length,
                            args.temperature, args.top_p, env_search.STOP_STRINGS, greedy, args.bf16)
        still = []
        for i, n in zip(active, new):
            ids[i] += n
            turn_of[i] += [turn] * len(n)
            n_generated += len(n)
            obs = envs[i].step(args.prefill + tok.decode(n, skip_special_tokens=True))
            if obs is not None:
                extra = env_suffix_ids(tok, obs, n[-1] if n else -1) + prefill
                ids[i] += extra
                turn_of[i] += [-1] * len(extra)
                still.append(i)
        active, turn = still, turn + 1
    samples = [Sample(ids=x, mask=[int(t >= 0) for t in tt], adv=[]) for x, tt in zip(ids, turn_of)]
    return samples, turn_of, n_generated


def score(envs):
    """Turn rewards (n, 1), outcome rewards (n,) and the mean of every reward component."""
    comps = [rewards.reward_components(e.completion, e.answers) for e in envs]
    turn = [[rewards.turn_reward(e.completion, e.answers)] for e in envs]
    outcome = [rewards.outcome_reward(e.completion, e.answers) for e in envs]
    means = {k: float(np.mean([c[k] for c in comps])) for k in comps[0]}
    means["tool_execution_rate"] = means["tool_execution"] / 0.2
    means.update(turn_reward=float(np.mean(turn)), outcome_reward=float(np.mean(outcome)))
    means["reward"] = means["turn_reward"] + means["outcome_reward"]
    return turn, outcome, means


def make_envs(questions, retriever, args, repeat=1):
    return [env_search.SearchEnv(q["question"], q["answers"], retriever, k=args.top_k,
                                 max_words=args.max_words, one_shot=args.one_shot)
            for q in questions for _ in range(repeat)]


def evaluate(model, tok, questions, retriever, args):
    """Greedy rollouts on test questions; metrics with an eval_ prefix."""
    t0 = time.time()
    envs = make_envs(questions, retriever, args)
    rollout(model, tok, envs, args, greedy=True)
    return {**{"eval_" + k: v for k, v in score(envs)[2].items()}, "t_eval": time.time() - t0}


# ---------------------------------------------------------------- one training step
def train_step(model, tok, ref, optimizer, questions, retriever, args):
    G = args.num_generations
    envs = make_envs(questions, retriever, args, repeat=G)
    t0 = time.time()
    samples, turn_of, n_generated = rollout(model, tok, envs, args)
    t_gen = time.time() - t0
    turn_r, outcome_r, log = score(envs)
    adv = mtgrpo.turn_advantages(torch.tensor(turn_r).view(-1, G, 1),
                                 torch.tensor(outcome_r).view(-1, G), args.algo, args.alpha)
    for s, t, a in zip(samples, turn_of, adv.view(len(envs), -1)):
        s.adv = mtgrpo.token_advantages(t, a.tolist())
    t0 = time.time()
    if args.num_iterations > 1:  # mu > 1: the old policy must be frozen before the first update
        fill_logprobs(model, samples, "old_logp", args.temperature, args.micro_batch_size, args.bf16)
    if ref is not None:
        fill_logprobs(ref, samples, "ref_logp", args.temperature, args.micro_batch_size, args.bf16)
    t_ref = time.time() - t0
    t0 = time.time()
    for _ in range(args.num_iterations):
        stats = policy_update(model, optimizer, samples, args)
    t_upd = time.time() - t0
    token_adv = torch.tensor([a for s in samples for a, m in zip(s.adv, s.mask) if m])
    log.update(stats, adv_mean=token_adv.mean().item(), adv_std=token_adv.std().item(),
               gen_tokens=n_generated, tokens_per_s=n_generated / t_gen,
               t_generate=t_gen, t_reference=t_ref, t_update=t_upd)
    return log


# ---------------------------------------------------------------- checkpoints
def save_checkpoint(model, tok, optimizer, step, q_rng, out):
    """Write OUT/checkpoint atomically: a crash while saving leaves the previous one whole."""
    final, tmp, old = (os.path.join(out, n) for n in ("checkpoint", "checkpoint.tmp", "checkpoint.old"))
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    torch.save({"step": step, "optimizer": optimizer.state_dict(), "torch_rng": torch.get_rng_state(),
                "question_rng": q_rng.getstate()}, os.path.join(tmp, "trainer_state.pt"))
    if os.path.exists(final):
        os.replace(final, old)
    os.replace(tmp, final)
    shutil.rmtree(old, ignore_errors=True)


def checkpoint_dir(out):
    for name in ("checkpoint", "checkpoint.old"):  # .old: a crash between the two renames
        if os.path.exists(os.path.join(out, name, "trainer_state.pt")):
            return os.path.join(out, name)
    raise SystemExit(f"--resume {out}: no checkpoint in that folder yet (first save is at step --save-every)")


def truncate_log(path, step):
    """Drop log lines written after the checkpoint we resume from."""
    lines = [l for l in open(path) if json.loads(l)["step"] <= step] if os.path.exists(path) else []
    with open(path, "w") as f:
        f.writelines(lines)


# ---------------------------------------------------------------- main
def load_data(args):
    """The retriever, and (train, test) questions: the user's JSONL files, or the questions
    generated from the bundled Wikipedia summaries (fixed data seed 0, split by article)."""
    retriever = env_search.make_retriever(args.retriever_url or None, args.corpus or None, args.max_words)
    if args.train_questions or args.test_questions:
        if not (args.train_questions and args.test_questions):
            raise SystemExit("give both --train-questions and --test-questions (JSONL of question, answers)")
        return retriever, qa.load_qa_jsonl(args.train_questions), qa.load_qa_jsonl(args.test_questions)
    docs = env_search.load_corpus_jsonl(args.corpus) if args.corpus else env_search.load_wiki_corpus()
    return (retriever, *qa.split_by_article(qa.make_questions(docs)))


def main(argv=None):
    args = parse_args(argv)
    device = pick_device(args.device)
    os.makedirs(args.out, exist_ok=True)
    print(json.dumps(dataclasses.asdict(args), indent=1))
    print(f"device {device}, bf16 autocast {args.bf16 and bf16_ok(device)}")
    json.dump(dataclasses.asdict(args), open(os.path.join(args.out, "args.json"), "w"), indent=1)
    torch.manual_seed(args.seed)
    try:
        retriever, train_qs, test_qs = load_data(args)
    except (ImportError, OSError, ValueError) as e:  # missing package or file, malformed JSONL
        raise SystemExit(f"Could not load the data: {e}")
    q_rng, start = random.Random(args.seed), 0
    ckpt = checkpoint_dir(args.out) if args.resume else None
    model, tok = load_model(ckpt or args.model, device)
    ref = load_model(args.model, device)[0].requires_grad_(False) if args.beta > 0 else None
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate, weight_decay=0.0)
    log_path = os.path.join(args.out, "log.jsonl")
    if ckpt:
        state = torch.load(os.path.join(ckpt, "trainer_state.pt"), weights_only=False)
        optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["torch_rng"])
        q_rng.setstate(state["question_rng"])
        start = state["step"]
        truncate_log(log_path, start)
        print(f"resumed from {ckpt} at step {start}")
    elif os.path.exists(log_path):
        os.remove(log_path)
    eval_qs = test_qs[:args.eval_n]
    history = []

    def write(line):
        history.append(line)
        with open(log_path, "a") as f:
            f.write(json.dumps(line) + "\n")

    if start == 0 and args.eval_every:
        write({"step": 0, **evaluate(model, tok, eval_qs, retriever, args)})
    bar = tqdm(range(start + 1, args.steps + 1), initial=start, total=args.steps, desc=f"{args.algo}-grpo")
    for step in bar:
        for g in optimizer.param_groups:  # linear warmup, then constant
            g["lr"] = args.learning_rate * min(1.0, step / max(1, args.warmup_steps))
        line = {"step": step, **train_step(model, tok, ref, optimizer, q_rng.sample(train_qs, args.batch_size),
                                           retriever, args)}
        if args.eval_every and (step % args.eval_every == 0 or step == args.steps):
            line.update(evaluate(model, tok, eval_qs, retriever, args))
        write(line)
        bar.set_postfix(reward=f"{line['reward']:.2f}", tool=f"{line['tool_execution_rate']:.2f}",
                        em=f"{line['exact_match']:.2f}", kl=f"{line['kl']:.3f}")
        if step % args.save_every == 0 or step == args.steps:
            save_checkpoint(model, tok, optimizer, step, q_rng, args.out)
    print_table(history)
    return history


def print_table(history):
    """First and last evaluation side by side, and the mean of the training metrics."""
    evals = [h for h in history if "eval_reward" in h]
    keys = ["reward", "tool_execution_rate", "answer_in_results", "exact_match", "xml_format"]
    if len(evals) >= 1:
        print(f"\n{'greedy eval on test':<24}" + "".join(f"step {e['step']:<7}" for e in (evals[0], evals[-1])))
        for k in keys:
            print(f"{k:<24}" + "".join(f"{e['eval_' + k]:<12.3f}" for e in (evals[0], evals[-1])))
    train = [h for h in history if "loss" in h]
    if train:
        print(f"\ntraining mean over {len(train)} steps: " + ", ".join(
            f"{k} {np.mean([h[k] for h in train]):.3f}" for k in keys + ["kl", "tokens_per_s"]))


if __name__ == "__main__":
    main(sys.argv[1:])
