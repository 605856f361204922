"""Train LLM agents with turn-level credit: MT-GRPO on tool use (search, calc), AT-GRPO on two-role tasks
(games: Sokoban, Sudoku; planning: Plan-Path; a math team; a coding team).

    python train.py --algo mt                                 # search agent, CPU, bundled model
    python train.py --algo mt --model Qwen/Qwen2.5-0.5B       # the same on one CUDA GPU (bf16)
    python train.py --env sokoban --algo at                   # planner + executor (--policy per-role: two models)
    python train.py --env planpath --algo at                  # reach a goal cell, planner + executor
    python train.py --env code --algo at                      # a tester and a coder (also sudoku, math)
    python train.py --plain true ...                          # any of these as the code reads (slower)

One training step, in order (tasks.py: each --env is a tool-use task or a game):
  1. rollout     tool use: G two-turn episodes per question (policy.play_episodes);
                 games: AT-GRPO tree sampling, K candidates per (level, agent, turn)
  2. rewards     tool use: turn reward R^T and outcome reward R^O (the task's rubric, rewards.py);
                 games: each candidate scored on its own copy of the level (atgrpo.tree_step)
  3. advantages  tool use: the --algo row of estimators.py (MT / MR / OR, field.py's, critic.py's); atgrpo.tree_samples
  4. reference   log-probs of the reference (if --beta > 0) and old policy (if --num-iterations > 1)
  5. update      --num-iterations clipped policy-gradient steps (loss.policy_update; fast/ by default)
Metrics go to OUT/log.jsonl, rollouts to OUT/rollouts/, checkpoints to OUT/checkpoint. Skip
machinery/ (the run folder, precision) and fast/ (the same step, faster) on first reading.

Where the defaults depart from the papers (docs/reference-code.md has the sources):
  - the loss is one token mean over the step's trained tokens (TRL's dapo), not DeepSeekMath eq. 3's
    per-sequence mean (--loss-type seq);
  - mu = 1 (--num-iterations): the ratio is 1 and the clip inert (MT-GRPO's code trains with mu = 2);
    beta = 0: no KL, no reference model (as MT-GRPO's script);
  - search: every model turn starts with the prefill <reasoning> and the prompt holds one worked
    example (--prefill, --one-shot), neither in the paper; G = 8 (its 21), lr 1e-5 (its 1e-6);
  - games: atgrpo.py's first lines.
"""
import dataclasses
import json
import os
import random
import sys
import time

import numpy as np
import torch
from tqdm import tqdm

import atgrpo
import env_two_roles
import estimators
import evaluate_games
import field
import mtgrpo
import rewards
import tasks
from config import changed_flags, check_out, parse_args
from critic import Critic
from loss import fill_logprobs, policy_update
from sample import signal
from policy import chat_sampler, check_context, fast_path, load_critic, load_model, load_models, model_path, pick_device, play_episodes

from machinery import checkpoint, micro_batch, trackers  # the run folder, --resume, trackers
from machinery.cli import ignore_ctrl_c, in_chunks, table_cell
from machinery.precision import precision_line


# ---------------------------------------------------------------- tool use (MT-GRPO): search, calc
def load_task(args):
    """(data, training pool, test items): a tool-use task's data (search: the retriever) and its
    questions; a game: no data, level seeds below 10**9 to train on and from 10**9 on to test."""
    task = tasks.TASKS[args.env]
    try:
        if task.kind == "game":
            task.make_level(0, args)  # can such a level exist?
            return None, range(10 ** 9), [10 ** 9 + i for i in range(args.eval_n)]
        data, train_qs, test_qs = task.load(args)
    except (ImportError, OSError, ValueError) as e:  # missing package or file, malformed JSONL, ...
        raise SystemExit(f"Could not load the data: {e}")
    if len(train_qs) < args.batch_size:
        raise SystemExit(f"--batch-size {args.batch_size} is more than the {len(train_qs)} training {task.item}s")
    return data, train_qs, test_qs[:args.eval_n]


def make_envs(questions, data, args, repeat=1):
    """`repeat` episodes of each question, question by question: rows i*G .. i*G+G-1 are the
    group of question i."""
    return [tasks.TASKS[args.env].make_env(q, data, args) for q in questions for _ in range(repeat)]


def tool_step(models, tok, questions, data, args, critic=None):
    """MT-GRPO (or another --algo of tool use) on G episodes per question: rollout, rewards, advantages."""
    G, task = args.num_generations, tasks.TASKS[args.env]
    envs = make_envs(questions, data, args, repeat=G)
    samples, n_generated = play_episodes(models["policy"], tok, envs, args, task.stop_strings)
    turn_r, outcome_r, log = rewards.score_episodes(envs, task.rubric)
    R_T, R_O = torch.tensor(turn_r).view(-1, G, args.max_calls), torch.tensor(outcome_r).view(-1, G)
    turns = torch.tensor([e.turns for e in envs]).view(-1, G)  # an episode may answer before turn K
    # --algo names a row of estimators.py: "mt" is MT-GRPO's A_k, mtgrpo.turn_advantages(R_T, R_O, "mt",
    # alpha) (Exercise 2); "or" and "mr" the same function's baselines. GiGPO's and IGPO's rows need more
    # than the rewards: field.inputs
    row = estimators.BY_NAME[args.algo]
    extra = field.inputs(row.needs, envs, samples, G, models["policy"], tok, args, fill_logprobs, task.rubric.tags.answer, critic)
    adv = row.fn(R_T, R_O, turns, args.alpha, args.scale_rewards, **extra).view(len(envs), -1)
    if critic:  # MT-PPO, PPO: V_old and the targets R_k for the critic's update (critic.py)
        critic.targets(samples, R_T, R_O, turns, extra["values"], row.fn)
        log["t_values"] = critic.t_values  # inside t_generate
    for i, s in enumerate(samples):  # every model token of turn k carries A_k
        s.adv, s.mask = mtgrpo.token_advantages(s.turn, adv[i].tolist())
        s.group_name, s.rewards = f"question {i // G + 1}: {envs[i].question}", turn_r[i] + [outcome_r[i]]
    return samples, n_generated, log


# ---------------------------------------------------------------- two-role tasks (AT-GRPO): tasks.names("game")

def role_models(models, args):
    """role -> model: a shared policy plays every role of the task."""
    return {r: models.get(r, models.get("policy")) for r in tasks.TASKS[args.env].roles}


def game_step(models, tok, seeds, args):
    """AT-GRPO tree sampling (the rewards, scored inside, choose the branch), then group advantages; or GRPO's trajectories."""
    sampler = chat_sampler(role_models(models, args), tok, args, tasks.TASKS[args.env].stop_strings)
    make_task = lambda seed: tasks.TASKS[args.env].make_tasks([seed], args)[0]  # noqa: E731
    samples, played, final = atgrpo.rollout_samples(make_task, seeds, sampler, args.num_generations,
                                                    args.algo, args.scale_rewards)
    return samples, sum(sum(s.mask) for s in samples), evaluate_games.episode_metrics(played, final)


# ---------------------------------------------------------------- reference and update
def update(models, ref, optimizers, samples, args):
    """Steps 4 and 5: reference / old log-probs, then each policy on its own samples (a shared
    policy on all of them). loss.py runs every row from its first token; without --plain the
    package `fast` steps with the same gradient with less work."""
    fast = fast_path(args)
    fill, step = (fast.update.fill_logprobs, fast.update.policy_update) if fast else (fill_logprobs, policy_update)
    t0 = time.time()
    if ref is not None:
        fill(ref, samples, "ref_logp", args.temperature, args.micro_batch_size, args.bf16)
    if args.num_iterations > 1:  # mu > 1: the old policy must be frozen before the first update
        for name, model in models.items():
            fill(model, routed(samples, name), "old_logp", args.temperature, args.micro_batch_size, args.bf16)
    log, t0 = {"t_reference": time.time() - t0}, time.time()
    for _ in range(args.num_iterations):
        for name, model in models.items():
            stats = step(model, optimizers[name], routed(samples, name), args)
            log.update({(k if name == "policy" else f"{k}_{name}"): v for k, v in stats.items()})
    token_adv = torch.tensor([a for s in samples for a, m in zip(s.adv, s.mask) if m])
    return {**log, "adv_mean": token_adv.mean().item(), "adv_std": token_adv.std().item(),
            **signal(samples), "t_update": time.time() - t0}


def routed(samples, name):
    """A per-role policy trains only on its role's samples."""
    return samples if name == "policy" else [s for s in samples if s.role == name]


# ---------------------------------------------------------------- the loop
def main(argv=None):
    args = parse_args(argv)  # every flag is checked, then the data and models are loaded,
    check_out(args)  # and only then is anything written to the run folder
    checkpoint.claim(args.out, make=False)  # a live run on that folder refuses here, before the model loads
    try:
        return train(args)
    except (KeyboardInterrupt, OSError) as e:  # Ctrl-C, or a write failed: disk full, read-only, file too large
        ignore_ctrl_c()  # a second Ctrl-C while it stops: the same one line
        checkpoint.still_ours(args.out)  # or the folder was replaced under the write: that, in one line
        then = (f"continue with python train.py --resume {args.out}" if os.path.exists(os.path.join(args.out, "checkpoint"))
                else "no checkpoint yet: start again with --overwrite")
        raise SystemExit(f"\nstopped (Ctrl-C). {then[0].upper() + then[1:]}" if isinstance(e, KeyboardInterrupt) else
                         f"could not write {e.filename or args.out}: {e.strerror or e}; make room or fix permissions, then {then}") from None


def train(args):
    device = pick_device(args.device)
    if fast := fast_path(args):  # on a CPU, the update's big blocks reused, not faulted in anew
        fast.heap.keep_freed_memory(device)
    print(f"{precision_line(device, args.bf16)}\nflags that differ from the defaults: {changed_flags(args)} (all: OUT/args.json)")
    data, pool, test = load_task(args)
    if args.eval_every and len(test) < args.eval_n:
        print(f"note: the test split has only {len(test)} items; each evaluation uses them all, not --eval-n {args.eval_n}", file=sys.stderr)
    rng, start, history, logged = random.Random(args.seed), 0, [], -1
    roles = tasks.TASKS[args.env].roles if args.policy == "per-role" else ("policy",)
    if args.resume:
        ckpt, models, tok, state = checkpoint.load_checkpoint(
            args.out, lambda folder: load_models(roles, folder, device, subfolders=True))
    else:
        (models, tok), ckpt = load_models(roles, args.model, device), None
    check_prompts(next(iter(models.values())), tok, data, pool, test, args)
    ref = load_model(args.model, device)[0].requires_grad_(False) if args.beta > 0 else None
    optimizers = {n: torch.optim.AdamW(m.parameters(), lr=args.learning_rate, weight_decay=0.0)
                  for n, m in models.items()}
    critic_at = os.path.join(ckpt, "critic") if ckpt else model_path(args.model)  # MT-PPO, PPO: critic.py
    critic = Critic(args, load_critic(critic_at, device, args.seed)) if estimators.trains_critic(args.algo) else None
    saved = ({**models, "critic": critic.model}, {**optimizers, "critic": critic.optimizer}) if critic else (models, optimizers)
    args.micro_batch_size = args.micro_batch_size or micro_batch.auto_micro_batch(models[roles[0]], device, args.max_completion_length)
    torch.manual_seed(args.seed)  # after loading: a first-time model conversion draws random numbers
    checkpoint.claim(args.out)  # the first write: this process is the run's only writer from here on
    check_out(args)  # again: a run may have finished in that folder while this one loaded
    checkpoint.save_args(dataclasses.asdict(args), args.out)
    if ckpt:
        start = checkpoint.restore(state, saved[1], rng)
        history, logged = checkpoint.truncate_log(os.path.join(args.out, "log.jsonl"), start)  # the whole run's lines, for the summary
        print(f"resumed from {ckpt} at step {start}")
    else:
        checkpoint.start_over(args.out)  # --overwrite: the earlier run's log, rollouts, checkpoints
    watch = trackers.Follow(args, dataclasses.asdict(args), history, logged)  # --report-to: fed what the log holds

    def write(line):  # the log first; the trackers follow it
        history.append(line)
        with open(checkpoint.inside(args.out, "log.jsonl"), "a") as f:  # stops if the folder was replaced
            f.write(json.dumps(line) + "\n")
        watch.send(line)

    bar = tqdm(initial=start, total=args.steps, unit="step")
    phase = lambda step, what: bar.set_description(f"{estimators.label(args.algo)} step {step}: {what}")  # noqa: E731

    def run_eval(step):
        phase(step, "evaluate")
        t0, episodes = time.time(), []  # the greedy episodes: OUT/rollouts/eval_step_N.jsonl, for the trackers
        metrics = evaluate_policy(models, tok, test, data, args, desc=f"evaluate step {step}", keep=episodes)
        checkpoint.save_greedy(episodes, metrics.get("exact_match_each", ""), args.out, step)
        return {**{"eval_" + k: v for k, v in metrics.items()}, "t_eval": time.time() - t0}

    if start == 0 and args.eval_every:
        write({"step": 0, **run_eval(0)})
    for step in range(start + 1, args.steps + 1):
        phase(step, "rollout")
        for param_group in (p for o in optimizers.values() for p in o.param_groups):  # linear warmup, then constant
            param_group["lr"] = args.learning_rate * min(1.0, step / max(1, args.warmup_steps))
        batch, t0 = rng.sample(pool, args.batch_size), time.time()
        if tasks.TASKS[args.env].kind == "tool":  # steps 1-3: rollout, rewards, advantages
            samples, n_generated, line = tool_step(models, tok, batch, data, args, critic)
        else:
            samples, n_generated, line = game_step(models, tok, batch, args)
        t_generate = time.time() - t0
        phase(step, "update")
        line = {"step": step, **line, **update(models, ref, optimizers, samples, args),  # steps 4-5
                "gen_tokens": n_generated, "tokens_per_s": n_generated / t_generate, "t_generate": t_generate}
        if critic:  # MT-PPO, PPO: the critic's own step, after the policy's
            phase(step, "critic")
            line.update(critic.update(samples))
        checkpoint.save_rollouts(samples, tok, os.path.join(args.out, "rollouts", f"step_{step}.jsonl"))
        if args.eval_every and (step % args.eval_every == 0 or step == args.steps):
            line.update(run_eval(step))
        write(line)
        bar.set_postfix({**{k: f"{line[k]:.2f}" for k in progress_metrics(args) if k in line},
                         "zero-adv groups": f"{line['zero_adv_groups']:.2f}"})
        if step % args.save_every == 0 or step == args.steps:
            phase(step, "save checkpoint")
            checkpoint.save_checkpoint(saved[0], tok, saved[1], step, rng, args.out)
        bar.update()
    bar.close(), watch.close()
    print_table(history, args)
    return history


# ================================================================ support: skip on first reading
# evaluation, the context check, the summary table
def evaluate_policy(models, tok, items, data, args, greedy=True, chunk=None, desc="evaluate", keep=None):
    """Mean metrics of one episode per test question (or level), greedy by default, `chunk` at a time (default:
    a training step's episodes); tool use also gives exact_match_each, 0/1 per question, and its episodes in `keep`."""
    chunk, task = chunk or args.batch_size * args.num_generations, tasks.TASKS[args.env]
    if task.kind == "game":
        sampler = chat_sampler(role_models(models, args), tok, args, task.stop_strings, greedy)
        return evaluate_games.evaluate(sampler, items, args, task, lambda levels: in_chunks(levels, chunk, desc, "level"))
    envs = []
    for part in in_chunks(items, chunk, desc, "question"):
        envs += make_envs(part, data, args)
        play_episodes(models["policy"], tok, envs[-len(part):], args, task.stop_strings, greedy)
    each = "".join(str(int(rewards.exact_match_reward(e.completion, e.answers, task.rubric.tags) > 0)) for e in envs)
    if keep is not None:  # the episodes themselves, for the caller
        keep.extend(envs)
    return {**rewards.score_episodes(envs, task.rubric)[2], "exact_match_each": each}  # per question, for tools/compare.py's intervals


def check_prompts(model, tok, data, pool, test, args):
    """The longest prompt and its new tokens must fit the context: tool use, the longest question with its
    max_calls + 1 turns; the games, the longest prompt a role sees on the test and a few training levels."""
    task = tasks.TASKS[args.env]
    items = [*pool[:8], *test] if task.kind == "game" else [*pool, *test]
    if task.kind == "tool":
        longest = max(items, key=lambda q: len(q["question"]))
        return check_context(model, tok, make_envs([longest], data, args)[0].messages, (args.max_calls + 1) * args.max_completion_length)
    check_context(model, tok, env_two_roles.longest_messages(task.make_tasks(items, args)),
                  args.max_completion_length, f"{task.shorter or 'use smaller levels'}, or lower --max-completion-length")


def progress_metrics(args):
    """The metrics the progress bar shows: the task's own (task.Task.progress), else its table's first three."""
    task = tasks.TASKS[args.env]
    return task.progress or [k for k, _ in task.table[:3]]


def print_table(history, args):
    """First and last evaluation side by side, and the mean of the training metrics."""
    evals, train = [h for h in history if "t_eval" in h], [h for h in history if "t_update" in h]
    if evals:  # a rate with its 95 % interval (Wilson's) over the n test items: at n = 8 one answer is 0.125
        n = len(evals[-1].get("eval_exact_match_each", "")) or args.eval_n
        print(f"\n{f'greedy eval ({n} items, 95 % CI)':<34}" + "".join(f"{'step ' + str(e['step']):<22}" for e in (evals[0], evals[-1])))
        for k, label in tasks.TASKS[args.env].table:
            print(f"{label:<34}" + "".join(f"{table_cell(label, e.get('eval_' + k, float('nan')), n):<22}" for e in (evals[0], evals[-1])))
    if train:
        print(f"\ntraining mean over {len(train)} steps (sampled): " + ", ".join(
            f"{label} {np.mean([h[k] for h in train]):.3f}"
            for k, label in (*tasks.TASKS[args.env].table, ("tokens_per_s", "tokens/s")) if k in train[0]))


if __name__ == "__main__":
    main(sys.argv[1:])
