"""Credit you can measure: every advantage estimator against the true advantage.

    python tools/credit.py --env search                              # the bundled model
    python tools/credit.py --env planpath --model runs/at/checkpoint  # a trained run
    python tools/credit.py --from docs/runs/credit/*.json              # the results page's tables, no model

Both papers make one claim about credit: which sampled answer should be pushed up or down, and by
how much. The true advantage of an answer a at a state s (a prompt) is
    A*(s, a) = Q(s, a) - V(s)
under the policy's own sampling (its --temperature); Q is the expected return from a to the end of
the episode. Monte Carlo: every sampled answer is continued M times to the end (--continuations),
Q^ = the mean return. V^(s) is the mean of Q^ over the answers sampled at s where several share s
(search: the G first turns of a question; AT-GRPO: the K candidates of a group; the K first
answers of GRPO's trajectories), and the mean return of M fresh episodes from s where one answer
alone was given at s (a trajectory's later answer: the continuations of the answer before it).

Each estimator gives the advantage its training gives, on the samples its own rollout makes, at
the same budget (K or G samples per group):
  search, turn 1 (the query)  every search row of estimators.py (GRPO-OR, GRPO-MR, MT-GRPO, the
                              field's) on the same G episodes
  search, turn 2 (the answer) the same episodes' A_2; Q is the episode's own R^O, V the mean R^O
                              of the M answers sampled after the same tool result
  planpath, sokoban           GRPO and GiGPO on the same K trajectories per level
                              (atgrpo.episode_advantages, gigpo_advantages); AT-GRPO on the groups
                              of its own tree (atgrpo.tree_advantages)
The return: search R^T_1 + R^O ("return") and R^O alone ("outcome"); the games the sum of every
agent's rewards from the answer to the episode's end ("return", what trajectory GRPO normalises;
a team term the turn's earlier agents get once it is over counts at the answer that ends it)
and success alone ("success": 1 when the level ends solved).

The figures (Pearson and Spearman with A*, sign agreement, the noise ceiling, the call bias across
states; 95 % bootstrap intervals over states) are computed in tools/credit_figures.py, and shown
by tools/credit_report.py.
"""
import argparse
import collections
import dataclasses
import importlib.util
import json
import os
import platform
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the project root: python tools/credit.py

import numpy as np
import torch
from tqdm import tqdm

import atgrpo
import estimators
import field
import rewards
import tasks
import train
from critic import Critic
from machinery.cli import one_line
from machinery import precision
from policy import BUNDLED, chat_sampler, load_critic, pick_device, play_episodes, turn_generator
from tools import credit_gradient, output
from tools.credit_figures import BOOTSTRAP, ESTIMATORS, GAMES, TOOL, analyse, kind_of, update
from tools.credit_report import read_result, summary, tables

DEFAULT_STATES = {n: 4 if n in GAMES else 12 for n in tasks.TASKS}  # about 20 min each (search, the games)
DEFAULT_CONTINUATIONS = {n: 4 if n in GAMES else 8 for n in tasks.TASKS}
UNRECORDED = ("out", "resume", "overwrite", "report_to", "device")  # where a run writes, not what it measures


# ---------------------------------------------------------------- Monte Carlo: Q^ from continuations
def halves(values):
    """[mean of the first half, mean of the second half]: two independent estimates."""
    m = len(values) // 2
    return [float(np.mean(values[:m])), float(np.mean(values[m:]))]


def play_out(envs, pending, sampler):
    """Play every environment to its end, starting with the role roles[pending[i]]; return the
    rewards each earned on the way. Every role's prompts of a round are sampled together."""
    totals, pending = [0.0] * len(envs), list(pending)
    while any(not e.done for e in envs):
        for r, role in enumerate(envs[0].roles):
            now = [i for i, e in enumerate(envs) if not e.done and pending[i] == r]
            if now:
                for i, (_, _, text) in zip(now, sampler(role, [envs[i].messages(role) for i in now])):
                    totals[i] += envs[i].act(role, text) + shares(envs[i], role)
                    pending[i] = (r + 1) % len(envs[i].roles)
    return totals


def continue_each(starts, sampler, M, chunk, bar):
    """starts: (environment, index of the role that acts next, reward already earned). Each is
    copied M times and played to the end; returns, per start, {"return": halves, "success":
    halves}, the return counting the reward already earned."""
    copies = [(i, env.copy(), role) for i, (env, role, _) in enumerate(starts) if not env.done for _ in range(M)]
    bar.total = (bar.total or 0) + len(copies)
    bar.refresh()
    totals = {i: [] for i in range(len(starts))}
    for at in range(0, len(copies), chunk):
        part = copies[at:at + chunk]
        for (i, env, _), total in zip(part, play_out([e for _, e, _ in part], [r for _, _, r in part], sampler)):
            totals[i].append((starts[i][2] + total, float(env.solved)))
        bar.update(len(part))
    out = []
    for i, (env, _, earned) in enumerate(starts):
        runs = totals[i] or [(earned, float(env.solved))] * M  # a finished episode: its return is known
        out.append({"return": halves([r for r, _ in runs]), "success": halves([s for _, s in runs])})
    return out


def replayed(env, role, text, reward):
    """Play `text` on `env` as the rollout did; its own reward (the rollout's, less the team term
    added after the turn) must come out the same. Returns the environment and what the answer
    earned the team (the return counts every agent's rewards): its reward, and shares()."""
    got = env.act(role, text)
    if got != reward:
        raise RuntimeError(f"the environment gave {got} for an answer that earned {reward} in the rollout: "
                           "it is not deterministic, and continuations would start from another state")
    return env, got + shares(env, role)


def shares(env, role):
    """The team term the turn's earlier agents get when `role`'s answer ends the turn (team_share,
    atgrpo.tree_rollout): earned at that answer."""
    return env.team_share * (len(env.roles) - 1) if len(env.roles) > 1 and role == env.roles[-1] else 0.0


def next_role(env, role):
    return (env.roles.index(role) + 1) % len(env.roles)


# ---------------------------------------------------------------- the games: trees and trajectories
def tree_records(make_env, level_ids, sampler, K, M, scale, chunk, bar):
    """AT-GRPO: the tree's K candidates of every (level, agent, turn) group, each with its
    advantage and Q^ (V^: the mean of its group's Q^)."""
    groups, _ = atgrpo.tree_rollout([make_env(e) for e in level_ids], level_ids, sampler, K)
    node, starts, records = {e: make_env(e) for e in level_ids}, [], []
    for g, adv in zip(groups, atgrpo.tree_advantages(groups, scale)):
        e, role, turn = g.key
        played = [replayed(node[e].copy(), role, c[2], r - g.share) for c, r in zip(g.candidates, g.rewards)]
        branches = [b for b, _ in played]
        starts += [(b, next_role(b, role), earned) for b, earned in played]
        records += [{"scheme": "tree", "state": f"level {e} {role} turn {turn}", "cluster": level_ids.index(e),
                     "turn": turn, "role": role, "answer": c[2], "adv": {"at": a}, "_ids": (c[0], c[1])}
                    for c, a in zip(g.candidates, adv)]
        node[e] = branches[g.chosen]
    for record, q in zip(records, continue_each(starts, sampler, M, chunk, bar)):
        record["q"] = q
    return records


def trajectory_records(make_env, level_ids, sampler, K, M, scale, chunk, bar):
    """GRPO and GiGPO (estimators.py's trajectory rows) on the same K trajectories per level: every
    answer with their advantages and its Q^. V^ of the state of a later answer comes free: the continuations of the answer before
    it start there (their return less that answer's reward); the K first answers share the start."""
    trajectories, _ = atgrpo.parallel_rollout([make_env(e) for e in level_ids for _ in range(K)], sampler)
    adv = {e.name: e.fn(trajectories, K, scale) for e in estimators.TABLE if e.scheme == "trajectories"}
    # GiGPO's anchor groups (atgrpo.gigpo_advantages): (level, prompt ids) -> answers given there
    anchor = collections.Counter((j // K, tuple(t.candidate[0])) for j, tr in enumerate(trajectories) for t in tr)
    after, records = [], []
    for j, trajectory in enumerate(trajectories):
        env = make_env(level_ids[j // K])
        for n, t in enumerate(trajectory):
            env, earned = replayed(env, t.role, t.candidate[2], t.reward - t.share)
            after.append((env.copy(), next_role(env, t.role), earned))
            records.append({"scheme": "trajectories", "state": f"level {level_ids[j // K]} " +
                            ("start" if n == 0 else f"trajectory {j % K} answer {n}"), "cluster": j // K,
                            "turn": t.turn, "role": t.role, "answer": t.candidate[2],
                            "adv": {e: a[j][n] for e, a in adv.items()},
                            "anchor": anchor[j // K, tuple(t.candidate[0])], "_ids": t.candidate[:2]})
    for i, q in enumerate(continue_each(after, sampler, M, chunk, bar)):
        records[i]["q"] = q
        if records[i]["state"].endswith("start"):
            continue
        earlier, reward = records[i - 1]["q"], after[i - 1][2]  # the answer before, in the same trajectory
        records[i]["v"] = {"return": [x - reward for x in earlier["return"]], "success": earlier["success"]}
    return records


def game_records(make_env, level_ids, sampler, K, M, scale, chunk=64, desc="continuations"):
    """Both rollout schemes on the same levels (module docstring), under one progress bar."""
    with tqdm(desc=desc, unit="episode", total=0) as bar:
        return (trajectory_records(make_env, level_ids, sampler, K, M, scale, chunk, bar)
                + tree_records(make_env, level_ids, sampler, K, M, scale, chunk, bar))


# ---------------------------------------------------------------- tool use: every turn
def tool_advantages(group, names, alpha=1.0, scale="group"):
    """{name: (G, K) advantages of the G episodes of one question} for the tool-use rows `names` of
    estimators.py, from a record's "group" (turn_rewards: G lists of K - 1 turn rewards; outcome;
    turns: the turns each played; and the rows' extra inputs, "states" and "info_gain"). mt is
    MT-GRPO at the run's --alpha, mt_half at alpha 0.5. For K = 2, MT-GRPO's A_2 = norm(R^O) is
    GRPO-OR's advantage by construction; GRPO-MR gives the answer the same norm(sum R^T + R^O) as
    the query."""
    R_T = torch.tensor(group["turn_rewards"], dtype=torch.float64)[None]
    R_O = torch.tensor(group["outcome"], dtype=torch.float64)[None]
    T = torch.tensor(group["turns"])[None]
    return {e: estimators.BY_NAME[e].fn(R_T, R_O, T, alpha, scale, **{n: torch.tensor(group[n])[None]
                                                                     for n in estimators.BY_NAME[e].needs})[0]
            for e in names}


def replay_prefix(prefixes, generate):
    """play_episodes' generate: call c gives back turn c of every prefix (one length for all: the
    replayed turns never end an episode), later calls sample."""
    calls = []

    def gen(prompts):
        calls.append(len(prompts))
        return [list(p[len(calls) - 1]) for p in prefixes] if len(calls) <= len(prefixes[0]) else generate(prompts)
    return gen






def tool_records(model, tok, questions, data, args, G, M, chunk, bar, critic=None):
    """Per question: G episodes (the estimators' samples) and, for each episode and each of its
    turns k that did not end it (turn 1 always), M continuations that replay turns 1..k and sample
    the rest. The tool result is deterministic (the retriever is), so they start at the state
    s_{k+1} that the episode reached: their mean return from turn k is Q^(s_k, a_k), and their mean
    return from turn k + 1 is V^(s_{k+1}), the baseline of the next turn's answer. The last turn's
    Q is the episode's own return from it, exactly (R^O: a last turn earns no turn reward). The rows
    with a critic (MT-PPO, PPO) are scored where `critic` is given: the checkpoint's own."""
    K = args.max_calls + 1
    task = tasks.TASKS[args.env]
    names = scorable(args.env, critic is not None)
    records, generate = [], turn_generator(model, tok, args, task.stop_strings)
    for qi, question in enumerate(questions):
        envs = train.make_envs([question], data, args, repeat=G)
        samples, _ = play_episodes(model, tok, envs, args, task.stop_strings, generate=generate)
        turn_r, outcome_r, _ = rewards.score_episodes(envs, task.rubric)
        extra = field.inputs({n for e in names for n in estimators.BY_NAME[e].needs}, envs, samples, G,
                             model, tok, args, train.fill_logprobs, task.rubric.tags.answer, critic)
        group = {"turn_rewards": turn_r, "outcome": outcome_r, "turns": [e.turns for e in envs]} | {
            n: v[0].tolist() for n, v in extra.items()}
        adv = tool_advantages(group, names, args.alpha, args.scale_rewards)
        turns = [[[x for x, t in zip(s.ids, s.turn) if t == k] for k in range(1, e.turns + 1)] for s, e in zip(samples, envs)]
        bar.update(G)
        runs = {}  # (episode, k) -> [(turn rewards, R^O)] of its continuations
        for k in range(1, K):
            rows = [i for i in range(G) if k == 1 or k < len(turns[i]) for _ in range(M)]
            if k > 1:  # the bar counted G (M + 1) episodes a question: later turns' continuations come on top
                bar.total = (bar.total or 0) + len(rows)
                bar.refresh()
            for at in range(0, len(rows), chunk):
                part = rows[at:at + chunk]
                conts = train.make_envs([question], data, args, repeat=len(part))
                play_episodes(model, tok, conts, args, task.stop_strings,
                              generate=replay_prefix([turns[i][:k] for i in part], generate))
                for i, t, o in zip(part, *rewards.score_episodes(conts, task.rubric)[:2]):
                    if t[:k] != turn_r[i][:k]:
                        raise RuntimeError("a replayed query earned another turn reward: the retriever is not deterministic")
                    runs.setdefault((i, k), []).append((t, o))
                bar.update(len(part))
        for i, s in enumerate(samples):
            for k, ids in enumerate(turns[i], 1):
                if k > 1 and not ids:  # a turn that generated nothing has no tokens to credit
                    continue
                record = turn_record(qi, i, k, K, args.prefill + tok.decode(ids, skip_special_tokens=True),
                                     {a: adv[a][i, k - 1].item() for a in adv}, runs, turn_r[i], outcome_r[i], task.rubric.tags)
                record["group"] = group | {"episode": i}
                record["_ids"] = (s.ids[:s.turn.index(k)] if ids else s.ids, ids)  # context, answer: for --gradient
                records.append(record)
    return records


def turn_record(qi, i, k, K, text, adv, runs, turn_r, outcome, tags):
    """The record of episode i's turn k: Q from the continuations after it (exact for the last
    turn), V from those after turn k - 1 (turn 1: the G first turns share the question's start)."""
    def togo(rows, k):  # halves of the return from turn k on, and of R^O
        return {"return": halves([sum(t[k - 1:]) + o for t, o in rows]), "outcome": halves([o for _, o in rows])}
    mine = runs.get((i, k)) or [(turn_r, outcome)] * 2  # the last turn: its own return, exactly
    record = {"scheme": "episodes", "state": f"question {qi}" if k == 1 else f"question {qi}, episode {i}, "
              + ("after the tool result" if k == 2 else f"turn {k}"), "cluster": qi, "turn": k, "role": "",
              "kind": kind_of(text, k, K, tags), "answer": text, "adv": adv, "q": togo(mine, k)}
    if k > 1:
        record["v"] = togo(runs[i, k - 1], k)
    return record


def rescore(result, names):
    """Each search record's advantages recomputed from its group's raw rewards ("group": R^T, R^O
    and the turns of the G episodes, kept since estimators.py's table, and the extra inputs of GiGPO's
    and IGPO's rows since those) for the estimators `names`, at the measurement's alpha and scale.
    A record without them keeps what it holds; returns the estimators that could not be scored (a
    file measured before raw rewards, or a row's inputs, were kept)."""
    settings = result["settings"]
    alpha, scale = settings.get("flags", {}).get("alpha", 1.0), settings.get("scale_rewards", "group")
    cache, missing = {}, set()
    for r in result["records"]:
        g = r.get("group", {})
        can = [e for e in names if g and all(n in g for n in estimators.BY_NAME[e].needs)]
        missing |= {e for e in names if e not in can and e not in r["adv"]}
        if not can:
            continue
        key = (r["cluster"], json.dumps(g["outcome"]), json.dumps(g["turn_rewards"]))  # the question's group, computed once
        if key not in cache:
            cache[key] = tool_advantages(g, can, alpha, scale)
        r["adv"] = {e: cache[key][e][g["episode"], r["turn"] - 1].item() if e in can else r["adv"][e]
                    for e in names if e in can or e in r["adv"]}
    return sorted(missing, key=TOOL.index)


def scored(result):
    """The estimators a re-scoring gives by default: every tool-use row, those with a critic only
    where the measurement kept the critic's values (a checkpoint with a critic)."""
    return scorable(result["settings"]["env"], all("values" in r.get("group", {}) for r in result["records"]))


def scorable(env, critic):
    """The estimators of `env`, those with a critic only where there are a critic's values."""
    return [e for e in ESTIMATORS[env] if critic or not estimators.trains_critic(e)]


def check_pairs(pairs, names, what):
    """Refuse, in one line, a --pair that names an estimator the measurement does not score."""
    for pair in pairs:
        if missing := [e for e in pair if e not in names]:
            critic = (" (a row with a critic needs a checkpoint with one: --algo mt_ppo or ppo)"
                      if any(map(estimators.trains_critic, missing)) else "")
            raise SystemExit(f"--pair {','.join(pair)}: {what} scores no {', '.join(missing)}{critic}; "
                             f"it scores {', '.join(names)}")


# ---------------------------------------------------------------- command line
def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=BUNDLED, help="checkpoint folder, hub id or the bundled model")
    p.add_argument("--env", choices=list(ESTIMATORS), help="default: the run's, else the first of tasks.py")
    p.add_argument("--states", type=int, help="test questions (default 12) or levels (default 4)")
    p.add_argument("--num-generations", type=int, help="G or K (default: the run's, else the task's)")
    p.add_argument("--continuations", type=int, help="M, even (two halves for the noise ceiling); default 8 (tool use) or 4 (the games)")
    p.add_argument("--chunk", type=int, default=64, help="episodes decoded together")
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap draws for the intervals")
    p.add_argument("--gradient", action="store_true",
                   help="also measure each estimator's update direction against the A* one (tools/credit_gradient.py; "
                        "minutes more: one backward pass per answer)")
    p.add_argument("--json", help="write the measurement (settings, records, figures) here")
    p.add_argument("--png", help="write the scatter plots here (needs matplotlib)")
    p.add_argument("--from", dest="sources", nargs="+", metavar="JSON",
                   help="--json files: print their tables again, then the differences side by side; no model")
    p.add_argument("--estimators", help="with --from, tool use: score these estimators of estimators.py (comma-separated; "
                   "default all, those with a critic where the file kept its values) from each record's raw rewards")
    p.add_argument("--pair", action="append", default=[], metavar="A,B",
                   help="also give the paired Pearson difference A - B with its interval (any two estimators; "
                        "repeat the flag for more), beside the pre-registered ones")
    ours, rest = p.parse_known_args(argv)
    if ours.continuations is not None and (ours.continuations < 2 or ours.continuations % 2) or ours.chunk < 1 \
            or not BOOTSTRAP[0] <= ours.bootstrap <= BOOTSTRAP[1]:
        p.error("--continuations must be even and at least 2, --chunk at least 1, "
                f"--bootstrap from {BOOTSTRAP[0]} to {BOOTSTRAP[1]}")
    if ours.states is not None and ours.states < 2:
        p.error("--states must be at least 2 (the intervals resample states)")
    if ours.num_generations is not None and ours.num_generations < 2:
        p.error("--num-generations must be at least 2: an advantage compares the samples of a group")
    if ours.sources and (len(ours.sources) > 1 and (ours.png or ours.json)):
        p.error("--png and --json take one --from file")
    if ours.estimators is not None and not ours.sources:
        p.error("--estimators re-scores saved measurements: give --from FILE (a new measurement scores them all)")
    if ours.estimators is not None and "" in ours.estimators.split(","):
        p.error(f"--estimators {ours.estimators!r} holds an empty name; give names such as mt,loo")
    if ours.estimators is not None and (bad := [e for e in ours.estimators.split(",") if e not in TOOL]):
        p.error(f"--estimators: {', '.join(bad)} is not a tool-use estimator; choose from {', '.join(TOOL)}")
    for pair in ours.pair:
        if len(pair.split(",")) != 2 or any(e not in estimators.BY_NAME for e in pair.split(",")):
            p.error(f"--pair {pair}: give two estimators of estimators.py, such as --pair mt_ppo,mt")
    if ours.sources and ours.gradient:
        p.error("--gradient measures with a model; --from reads what a --gradient measurement kept")
    if ours.sources:
        return ours, None
    from tools.evaluate import run_args
    ours.n = ours.states or 1  # the run's --env decides the defaults
    args = run_args(ours, rest + ([f"--num-generations={ours.num_generations}"] if ours.num_generations else []))
    if args.env not in ESTIMATORS:
        p.error(f"--env {args.env}: credit is measured on {', '.join(ESTIMATORS)}")
    args.eval_n = ours.n = ours.states or DEFAULT_STATES[args.env]
    ours.continuations = ours.continuations or DEFAULT_CONTINUATIONS[args.env]
    check_pairs([tuple(p.split(",")) for p in ours.pair], scorable(args.env, os.path.isdir(os.path.join(args.model, "critic"))),
                f"--model {args.model} --env {args.env}")  # MT-PPO, PPO: scored where the checkpoint has a critic
    return ours, args


def measure(ours, args):
    """Load the policy, sample, continue, and return the result (settings, records, figures)."""
    from tools.evaluate import evaluation_set, load_policy
    device = pick_device(args.device)
    models, tok = load_policy(args.model, args, device)
    data, items = evaluation_set(args, "test")
    train.check_prompts(next(iter(models.values())), tok, data, [], items, args)
    torch.manual_seed(args.seed)
    if ours.gradient and args.policy == "per-role":
        raise SystemExit("--gradient measures one policy's update; this checkpoint has one model per role")
    G, M, t0, load = args.num_generations, ours.continuations, time.time(), os.getloadavg()[0]
    critic_at = os.path.join(args.model, "critic")  # MT-PPO, PPO: scored where the checkpoint has a critic
    if args.env not in GAMES:
        critic = Critic(args, load_critic(critic_at, device, args.seed)) if os.path.isdir(critic_at) else None
        with tqdm(total=len(items) * G * (M + 1), desc="credit: episodes", unit="episode") as bar:
            records = tool_records(models["policy"], tok, items, data, args, G, M, ours.chunk, bar, critic)
    else:
        sampler = chat_sampler(train.role_models(models, args), tok, args, tasks.TASKS[args.env].stop_strings)
        make_env = lambda seed: tasks.TASKS[args.env].make_tasks([seed], args)[0]  # noqa: E731
        records = game_records(make_env, items, sampler, G, M, args.scale_rewards, ours.chunk, "credit: episodes")
    settings = {"env": args.env, "model": args.model, "states": len(items), "num_generations": G, "continuations": M,
                "bf16": bool(args.bf16 and precision.bf16_ok(device)), "temperature": args.temperature, "scale_rewards": args.scale_rewards,
                "bootstrap": ours.bootstrap, "seed": args.seed,
                **({"levels": args.levels} if args.env in GAMES else {"max_calls": args.max_calls}),
                "flags": {k: v for k, v in dataclasses.asdict(args).items() if k not in UNRECORDED}}  # every one that made it
    rows = [r.pop("_ids") for r in records]
    result = {"settings": settings, "records": records}
    if ours.gradient:
        gram = credit_gradient.answer_gram(models["policy"], rows, args.temperature, settings["bf16"])
        result["gram"] = [[float(f"{x:.7g}") for x in row] for row in gram]  # what --from reads back
    result["machine"] = {"cpu": cpu_name(), "precision": precision.precision_line(device, args.bf16),
                         "threads": torch.get_num_threads(), "load_at_start": load, "seconds": round(time.time() - t0, 1)}
    return result


def cpu_name():
    """The CPU's model name (Linux), else what platform knows."""
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), platform.machine())
    except OSError:
        return platform.processor() or platform.machine()


@one_line
def main(argv=None):
    ours, args = parse_args(sys.argv[1:] if argv is None else argv)
    for flag, path in (("--json", ours.json), ("--png", ours.png)):  # before the 20 minutes, not after them
        if path:
            output.check(path, flag)
        if path and any(output.same_file(path, source) for source in ours.sources or ()):
            raise SystemExit(f"{flag} {path} is a --from file: writing it would replace the measurement it reads; "
                             "give another file")
    if ours.json and ours.png and output.same_file(ours.json, ours.png):
        raise SystemExit(f"--json and --png both name {ours.json}: the picture would overwrite the measurement; "
                         "give two files")
    if ours.png and (why := picture_problem(ours.png)):
        raise SystemExit(why)
    results = [read_result(path) for path in ours.sources] if ours.sources else [measure(ours, args)]
    for path, result in zip(ours.sources or (), results):  # a flag the file would make pointless is refused, not ignored
        env = result["settings"]["env"]
        if ours.env and ours.env != env:
            raise SystemExit(f"--env {ours.env}: {path} measured --env {env}; drop --env (--from reads the file's own)")
        if ours.estimators and env in GAMES:
            raise SystemExit(f"--estimators re-scores tool-use measurements from their raw rewards; {path} measured "
                             f"--env {env}, whose estimators it holds already: drop --estimators")
    for path, result in zip(ours.sources or (), results):  # tool use: every estimator of the table, from the raw rewards
        if result["settings"]["env"] not in GAMES:
            names = ours.estimators.split(",") if ours.estimators else scored(result)
            if missing := rescore(result, names):
                print(f"{path}: measured before these estimators' inputs were kept: scored for the estimators "
                      f"it holds; not {', '.join(missing)}")
    pairs = [tuple(p.split(",")) for p in ours.pair]
    for path, result in zip(ours.sources or (), results):
        check_pairs(pairs, list(result["records"][0]["adv"]) if result["records"] else [], path)
    for result in results:
        result["figures"] = analyse(result["records"], result["settings"]["env"], result["settings"]["bootstrap"], pairs=pairs)
        if "gram" in result:
            result["update"] = update(result, pairs)
        print(tables(result) + "\n")
    if len(results) > 1:
        print(summary(results, [os.path.basename(p).removesuffix(".json") for p in ours.sources]))
    save(results[0], ours)
    return results[0]


def picture_problem(path):
    """Why no picture can be written to `path`: matplotlib is not installed, or the file's ending names
    no format it writes; None if it can. Asked before the measurement, not after it."""
    if not has_matplotlib():
        return "--png needs matplotlib: pip install -r requirements-plot.txt, or leave out --png"
    from matplotlib.backend_bases import FigureCanvasBase
    formats = FigureCanvasBase.get_supported_filetypes()
    ending = os.path.splitext(path)[1][1:].lower()
    if ending and ending not in formats:
        return f"--png {path}: matplotlib writes {', '.join(sorted(formats))}; end the file's name with one of these"
    return None


def has_matplotlib():
    return importlib.util.find_spec("matplotlib") is not None


def save(result, ours):
    """--json, then --png. A write that fails all the same (a disk that filled up during the
    measurement) loses nothing: the measurement is kept in a file of its own (or printed), and
    the one-line error says where."""
    text = json.dumps(result)
    kept = ours.sources[0] if ours.sources else None  # where the measurement is already
    flag, path = "--json", ours.json
    try:
        if ours.json:
            output.write_text(ours.json, text)
            print(f"wrote {ours.json}")
            kept = ours.json
        flag, path = "--png", ours.png
        if ours.png:
            from tools.credit_report import plot
            plot(result, ours.png)
    except OSError as e:
        kept = kept or output.keep(text, "credit", ".json")
        where = f"it is in {kept}" if kept else "it is printed above"
        raise SystemExit(f"could not write {path}: {e.strerror or e}; the measurement is not lost, {where} "
                         f"(python tools/credit.py --from {kept or 'FILE'} {flag} FILE writes it again)") from None


if __name__ == "__main__":
    main()
