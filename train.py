"""Train LLM agents with turn-level credit: MT-GRPO on Wikipedia search, AT-GRPO on Sokoban.

    python train.py --algo mt                                 # search agent, CPU, bundled model
    python train.py --algo mt --model Qwen/Qwen2.5-0.5B       # the same on one CUDA GPU (bf16)
    python train.py --env sokoban --algo at                   # planner + executor, shared policy
    python train.py --env sokoban --algo at --policy per-role # one model per role

Search step: sample `batch_size` questions, roll out `num_generations` (G) two-turn episodes per
question, score them with rewards.py, turn them into per-turn advantages with mtgrpo.py.
Sokoban step: `batch_size` levels played with atgrpo.py's tree sampling (K = num_generations).
Both then take `num_iterations` clipped policy-gradient steps (policy.py). Metrics go to
OUT/log.jsonl, checkpoints to OUT/checkpoint.
"""
import argparse
import dataclasses
import inspect
import json
import os
import random
import re
import shutil
import sys
import time
from dataclasses import dataclass

import numpy as np
import torch
from tqdm import tqdm

import atgrpo
import env_search
import mtgrpo
import questions as qa
import rewards
import show
from policy import (BUNDLED, bf16_ok, chat_sampler, fill_logprobs, load_model, pick_device,
                    play_episodes, policy_update)


@dataclass
class Args:
    env: str = "search"  # search (MT-GRPO paper) or sokoban (AT-GRPO paper)
    algo: str = "auto"  # search: mt | mr | or (GRPO-OR);  sokoban: at | grpo;  auto: mt / at
    policy: str = "shared"  # sokoban: shared (one model) or per-role (one model per role)
    model: str = BUNDLED  # hub id, local folder, or the bundled offline model
    steps: int = 30  # training steps (rollout batches)
    batch_size: int = 2  # questions (or levels) per step
    num_generations: int = 8  # G (search) or K (sokoban): samples per group
    max_completion_length: int = 64  # new tokens per turn
    learning_rate: float = 1e-5  # AdamW learning rate after warmup
    warmup_steps: int = 3  # linear learning-rate warmup
    beta: float = 0.0  # weight of the k3 KL to the reference model (0: no reference loaded)
    epsilon: float = 0.2  # lower clip: ratio >= 1 - epsilon
    epsilon_high: float = 0.2  # upper clip: ratio <= 1 + epsilon_high
    num_iterations: int = 1  # mu: policy updates per rollout batch
    scale_rewards: str = "group"  # divide advantages by the group std (the papers), the std of the whole step (batch), or not (none)
    loss_type: str = "token"  # token: mean over all tokens of the batch; seq: mean of sequence means
    alpha: float = 1.0  # MT-GRPO turn discount in A_k = sum alpha^(l-k) norm(R^T_l) + ...
    max_grad_norm: float = 1.0  # gradient-norm clip
    micro_batch_size: int = 1  # sequences per forward/backward: sets peak memory (search on CPU: 1 is fastest; sokoban: K, a group's prompt then runs once)
    temperature: float = 1.0  # sampling temperature (log-probs use the same)
    top_p: float = 1.0  # nucleus sampling
    prefill: str = "auto"  # text the environment puts at the start of every model turn; auto: <reasoning> / <answer>
    one_shot: bool = True  # search: show one worked example as earlier chat turns (small models need it)
    top_k: int = 1  # search: documents per search
    max_words: int = 120  # search: words per document shown to the model
    retriever_url: str = ""  # search: Search-R1-style server instead of the in-memory BM25
    corpus: str = ""  # search: JSONL of {"title","text"} instead of the bundled Wikipedia summaries
    train_questions: str = ""  # search: JSONL of {"question","answers"} instead of generated questions
    test_questions: str = ""  # search: JSONL for evaluation (with train_questions)
    size: int = 5  # sokoban: room size including the wall border
    boxes: int = 1  # sokoban: boxes per level
    reverse_steps: int = 4  # sokoban: difficulty, moves of reverse play from the solved state
    max_turns: int = 2  # sokoban: turns per episode
    team_alpha: float = 1.0  # sokoban: agent reward = local + team_alpha * team reward
    single_agent: bool = False  # sokoban: the executor alone (no planner), a baseline
    eval_every: int = 10  # greedy evaluation on the test split every N steps (0: never)
    eval_n: int = 64  # test questions (or levels) per evaluation
    save_every: int = 6  # checkpoint every N steps (and at the end)
    seed: int = 0  # seeds question order, sampling and initialisation
    device: str = "auto"  # auto, cpu, cuda, cuda:1 ...
    bf16: bool = True  # bf16 autocast where the hardware supports it
    out: str = "runs/mt"  # run folder: args.json, log.jsonl, checkpoint/
    resume: str = ""  # run folder to continue from its last checkpoint


ALGOS = {"search": ("mt", "mr", "or"), "sokoban": ("at", "grpo")}
DOCS = dict(re.findall(r"^    (\w+): .*?  # (.*)$", inspect.getsource(Args), re.M))


def parse_args(argv=None):
    """Flags from the dataclass (dashes for underscores). With --resume, the saved args are the
    defaults and only flags given explicitly override them."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    for f in dataclasses.fields(Args):
        kind = (lambda s: s.lower() in ("1", "true", "yes")) if f.type is bool else f.type
        p.add_argument("--" + f.name.replace("_", "-"), type=kind, default=argparse.SUPPRESS,
                       help=f"{DOCS[f.name]} (default: {f.default!r})")
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
    if args.env not in ALGOS:
        p.error(f"--env must be search or sokoban, not {args.env!r}")
    args.algo = ALGOS[args.env][0] if args.algo == "auto" else args.algo
    if args.algo not in ALGOS[args.env]:
        p.error(f"--algo must be one of {', '.join(ALGOS[args.env])} with --env {args.env}, not {args.algo!r}")
    if args.prefill == "auto":
        args.prefill = "<reasoning>" if args.env == "search" else "<answer>"
    if args.policy not in ("shared", "per-role") or (args.policy == "per-role" and (
            args.env != "sokoban" or args.single_agent)):
        p.error("--policy is shared, or per-role with --env sokoban and two roles (no --single-agent)")
    if args.scale_rewards not in mtgrpo.SCALES:
        p.error(f"--scale-rewards must be one of {', '.join(mtgrpo.SCALES)}, not {args.scale_rewards!r}")
    if args.loss_type not in ("token", "seq"):
        p.error(f"--loss-type must be token or seq, not {args.loss_type!r}")
    return args


# ---------------------------------------------------------------- search (MT-GRPO)
def load_search_data(args):
    """The retriever, and (train, test) questions: the user's JSONL files, or the questions
    generated from the bundled Wikipedia summaries (fixed data seed 0, split by article)."""
    retriever = env_search.make_retriever(args.retriever_url or None, args.corpus or None, args.max_words)
    if args.train_questions or args.test_questions:
        if not (args.train_questions and args.test_questions):
            raise SystemExit("give both --train-questions and --test-questions (JSONL of question, answers)")
        return retriever, qa.load_qa_jsonl(args.train_questions), qa.load_qa_jsonl(args.test_questions)
    docs = env_search.load_corpus_jsonl(args.corpus) if args.corpus else env_search.load_wiki_corpus()
    return (retriever, *qa.split_by_article(qa.make_questions(docs)))


def make_envs(questions, retriever, args, repeat=1):
    return [env_search.SearchEnv(q["question"], q["answers"], retriever, k=args.top_k,
                                 max_words=args.max_words, one_shot=args.one_shot)
            for q in questions for _ in range(repeat)]


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


def search_rollout(models, tok, questions, retriever, args):
    """G two-turn episodes per question; samples carry the MT-GRPO (or OR / MR) advantages."""
    G, model = args.num_generations, models["policy"]
    envs = make_envs(questions, retriever, args, repeat=G)
    samples, n_generated = play_episodes(model, tok, envs, args, env_search.STOP_STRINGS)
    turn_r, outcome_r, log = score(envs)
    adv = mtgrpo.turn_advantages(torch.tensor(turn_r).view(-1, G, 1),
                                 torch.tensor(outcome_r).view(-1, G), args.algo, args.alpha,
                                 args.scale_rewards)
    for i, (s, a) in enumerate(zip(samples, adv.view(len(envs), -1))):
        s.adv = mtgrpo.token_advantages(s.turn, a.tolist())
        s.group, s.rewards = f"question {i // G + 1}: {envs[i].question}", turn_r[i] + [outcome_r[i]]
    return samples, n_generated, log


def search_eval(models, tok, questions, retriever, args, greedy=True):
    envs = make_envs(questions, retriever, args)
    play_episodes(models["policy"], tok, envs, args, env_search.STOP_STRINGS, greedy)
    return score(envs)[2]


# ---------------------------------------------------------------- sokoban (AT-GRPO)
def role_models(models):
    """role -> model: the shared policy plays every role."""
    return {r: models.get(r, models.get("policy")) for r in atgrpo.env_sokoban.ROLES}


def sokoban_rollout(models, tok, seeds, _, args):
    sample = chat_sampler(role_models(models), tok, args, atgrpo.env_sokoban.STOP_STRINGS)
    samples, groups, final = atgrpo.rollout_samples(seeds, sample, args)
    n_generated = sum(sum(s.mask) for s in samples)
    return samples, n_generated, atgrpo.episode_metrics(groups, final)


def sokoban_eval(models, tok, seeds, _, args, greedy=True):
    sample = chat_sampler(role_models(models), tok, args, atgrpo.env_sokoban.STOP_STRINGS, greedy)
    return atgrpo.evaluate(sample, seeds, args)


# ---------------------------------------------------------------- one training step
def train_step(rollout, models, tok, ref, optimizers, batch, data, args):
    """Roll out, then update each policy on its own samples (a shared policy on all of them).
    Returns the log line and the samples."""
    t0 = time.time()
    samples, n_generated, log = rollout(models, tok, batch, data, args)
    t_gen, t0 = time.time() - t0, time.time()
    if args.num_iterations > 1:  # mu > 1: the old policy must be frozen before the first update
        for name, model in models.items():
            fill_logprobs(model, routed(samples, name), "old_logp", args.temperature, args.micro_batch_size, args.bf16)
    if ref is not None:
        fill_logprobs(ref, samples, "ref_logp", args.temperature, args.micro_batch_size, args.bf16)
    t_ref, t0 = time.time() - t0, time.time()
    for _ in range(args.num_iterations):
        for name, model in models.items():
            stats = policy_update(model, optimizers[name], routed(samples, name), args)
            log.update({(k if name == "policy" else f"{k}_{name}"): v for k, v in stats.items()})
    token_adv = torch.tensor([a for s in samples for a, m in zip(s.adv, s.mask) if m])
    log.update(adv_mean=token_adv.mean().item(), adv_std=token_adv.std().item(),
               gen_tokens=n_generated, tokens_per_s=n_generated / t_gen,
               t_generate=t_gen, t_reference=t_ref, t_update=time.time() - t0)
    return log, samples


def routed(samples, name):
    """A per-role policy trains only on its role's samples."""
    return samples if name == "policy" else [s for s in samples if s.role == name]


# ---------------------------------------------------------------- checkpoints
def save_checkpoint(models, tok, optimizers, step, rng, out):
    """Write OUT/checkpoint atomically: a crash while saving leaves the previous one whole.
    One Hugging Face folder for a shared policy; one subfolder per role otherwise."""
    final, tmp, old = (os.path.join(out, n) for n in ("checkpoint", "checkpoint.tmp", "checkpoint.old"))
    shutil.rmtree(tmp, ignore_errors=True)
    for name, model in models.items():
        folder = tmp if name == "policy" else os.path.join(tmp, name)
        model.save_pretrained(folder)
        tok.save_pretrained(folder)
    torch.save({"step": step, "optimizers": {n: o.state_dict() for n, o in optimizers.items()},
                "torch_rng": torch.get_rng_state(), "data_rng": rng.getstate()},
               os.path.join(tmp, "trainer_state.pt"))
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
def setup(args):
    """(rollout, evaluate, data, train pool, test set, sample a batch from the pool)."""
    if args.env == "sokoban":  # seeds: test levels from 10**9 on, training levels below
        test = [10 ** 9 + i for i in range(args.eval_n)]
        return sokoban_rollout, sokoban_eval, None, range(10 ** 9), test
    try:
        retriever, train_qs, test_qs = load_search_data(args)
    except (ImportError, OSError, ValueError) as e:  # missing package or file, malformed JSONL
        raise SystemExit(f"Could not load the data: {e}")
    return search_rollout, search_eval, retriever, train_qs, test_qs[:args.eval_n]


def main(argv=None):
    args = parse_args(argv)
    device = pick_device(args.device)
    os.makedirs(args.out, exist_ok=True)
    print(json.dumps(dataclasses.asdict(args), indent=1))
    print(f"device {device}, bf16 autocast {args.bf16 and bf16_ok(device)}")
    json.dump(dataclasses.asdict(args), open(os.path.join(args.out, "args.json"), "w"), indent=1)
    torch.manual_seed(args.seed)
    rollout, evaluate, data, pool, test = setup(args)
    rng, start = random.Random(args.seed), 0
    ckpt = checkpoint_dir(args.out) if args.resume else None
    names = atgrpo.env_sokoban.ROLES if args.policy == "per-role" else ("policy",)
    models = {}
    for name in names:
        path = ckpt if name == "policy" else ckpt and os.path.join(ckpt, name)
        models[name], tok = load_model(path or args.model, device)
    ref = load_model(args.model, device)[0].requires_grad_(False) if args.beta > 0 else None
    optimizers = {n: torch.optim.AdamW(m.parameters(), lr=args.learning_rate, weight_decay=0.0)
                  for n, m in models.items()}
    log_path = os.path.join(args.out, "log.jsonl")
    if ckpt:
        state = torch.load(os.path.join(ckpt, "trainer_state.pt"), weights_only=False)
        for n, o in optimizers.items():
            o.load_state_dict(state["optimizers"][n])
        torch.set_rng_state(state["torch_rng"])
        rng.setstate(state["data_rng"])
        start = state["step"]
        truncate_log(log_path, start)
        print(f"resumed from {ckpt} at step {start}")
    elif os.path.exists(log_path):
        os.remove(log_path)
    history = []

    def write(line):
        history.append(line)
        with open(log_path, "a") as f:
            f.write(json.dumps(line) + "\n")

    def run_eval():
        t0 = time.time()
        return {**{"eval_" + k: v for k, v in evaluate(models, tok, test, data, args).items()},
                "t_eval": time.time() - t0}

    if start == 0 and args.eval_every:
        write({"step": 0, **run_eval()})
    bar = tqdm(range(start + 1, args.steps + 1), initial=start, total=args.steps, desc=f"{args.algo}-grpo")
    for step in bar:
        for o in optimizers.values():  # linear warmup, then constant
            for g in o.param_groups:
                g["lr"] = args.learning_rate * min(1.0, step / max(1, args.warmup_steps))
        batch = rng.sample(pool, args.batch_size)
        stats, samples = train_step(rollout, models, tok, ref, optimizers, batch, data, args)
        show.save_rollouts(samples, tok, os.path.join(args.out, "rollouts", f"step_{step}.jsonl"))
        line = {"step": step, **stats}
        if args.eval_every and (step % args.eval_every == 0 or step == args.steps):
            line.update(run_eval())
        write(line)
        bar.set_postfix({k: f"{line[k]:.2f}" for k in postfix_keys(args) if k in line})
        if step % args.save_every == 0 or step == args.steps:
            save_checkpoint(models, tok, optimizers, step, rng, args.out)
    print_table(history, args)
    return history


def postfix_keys(args):
    if args.env == "search":
        return ["reward", "tool_execution_rate", "exact_match", "kl"]
    return ["success", "reward_planner", "reward_executor", "kl"]


def print_table(history, args):
    """First and last evaluation side by side, and the mean of the training metrics."""
    keys = (["reward", "tool_execution_rate", "answer_in_results", "exact_match", "xml_format"]
            if args.env == "search" else ["success", "box_distance", "reward_planner", "reward_executor"])
    evals = [h for h in history if any(k.startswith("eval_") for k in h)]
    if evals:
        print(f"\n{'greedy eval on test':<24}" + "".join(f"step {e['step']:<7}" for e in (evals[0], evals[-1])))
        for k in keys:
            print(f"{k:<24}" + "".join(f"{e.get('eval_' + k, float('nan')):<12.3f}" for e in (evals[0], evals[-1])))
    train = [h for h in history if "t_update" in h]
    if train:
        print(f"\ntraining mean over {len(train)} steps: " + ", ".join(
            f"{k} {np.mean([h[k] for h in train]):.3f}" for k in keys + ["tokens_per_s"] if k in train[0]))


if __name__ == "__main__":
    main(sys.argv[1:])
