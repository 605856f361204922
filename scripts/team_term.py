"""How much the planner's team term changes its advantages: this project's form (--team-term own,
the team term of the copy its proposal was played on) against the paper's code's (shared, the
executor's team term of the turn), on the same episodes, at the Plan-Path seeds' settings
(docs/runs/planpath-seeds: `--env planpath` defaults, K = 4, 4 turns, alpha 1, group scaling).

    .venv/bin/python scripts/team_term.py --out docs/runs/team-term

Each episode is played once, in the own form; every answer also records its local reward
(the same answer on a copy with alpha 0), so the shared form's planner reward, local + alpha *
the executor's team term of that turn, is known for the same answers. Compared:
  - AT-GRPO (tree): every planner group (e, planner, t) has K candidates; under shared all K get
    the one team term of the chosen executor answer, so their advantages are those of the local
    rewards alone (atgrpo.tree_rollout). How many groups' advantages differ, by how much, and how
    often the greedy choice would differ.
  - GRPO over trajectories (--algo grpo): a trajectory's return sums its agents' rewards; the
    shared form swaps the planner's own team terms for the executor's. How many trajectory
    advantages differ, by how much, and how often their sign flips.
Two policies: the bundled base model at temperature 1 (where every seed's run starts) and moves
drawn uniformly (a policy with spread). Writes team_term.json and prints a table.
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

import atgrpo  # noqa: E402
import env_planpath  # noqa: E402
import env_two_roles  # noqa: E402
from config import parse_args  # noqa: E402
from mtgrpo import group_norm  # noqa: E402
from policy import chat_sampler, load_model, pick_device  # noqa: E402


class Recorded(env_planpath.PlanPathTask):
    """A Plan-Path task in the own form whose every act also records (role, local, team): the
    answer's local reward (played again on a copy with alpha 0) and its alpha * team term. The
    record is one list shared by the task and all its copies, in the order the answers were given."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.record = []

    def act(self, role, text):
        twin = self.copy()
        twin.alpha = 0.0
        local = env_planpath.PlanPathTask.act(twin, role, text)
        reward = super().act(role, text)
        self.record.append((role, local, reward - local))
        return reward


def tasks(seeds, args):
    return [Recorded(env_planpath.make_level(s, args), args.max_turns, args.team_alpha, True,
                     args.moves_per_turn, args.positions) for s in seeds]


def uniform(role, message_lists):
    """Moves drawn uniformly: one letter in answer tags."""
    return [([0], [0], f"<answer>{random.choice('UDLR')}</answer>") for _ in message_lists]


def tree_forms(seeds, args, sampler, K):
    """(own, shared) rewards of every planner group, in the tree played in the own form."""
    envs = tasks(seeds, args)
    groups, _ = atgrpo.tree_rollout(envs, list(range(len(seeds))), sampler, K)
    own, shared = [], []
    for e, env in enumerate(envs):
        mine = [g for g in groups if g.key[0] == e]  # planner t, executor t, planner t+1, ...
        acts = [env.record[i:i + K] for i in range(0, len(env.record), K)]
        for g, g_acts, x, x_acts in zip(mine[::2], acts[::2], mine[1::2], acts[1::2]):
            team = x_acts[x.chosen][2]  # the chosen executor answer's alpha * team
            own.append(g.rewards)
            shared.append([local + team for _, local, _ in g_acts])
    return own, shared


def trajectory_forms(seeds, args, sampler, K):
    """(own, shared) returns of K independent trajectories per level, played in the own form."""
    envs = tasks([s for s in seeds for _ in range(K)], args)
    atgrpo.parallel_rollout(envs, sampler)
    own, shared = [], []
    for env in envs:
        own.append(sum(local + team for _, local, team in env.record))
        turns = [env.record[i:i + 2] for i in range(0, len(env.record), 2)]  # (planner, executor) per turn
        shared.append(sum(p[1] + x[2] + x[1] + x[2] for p, x in turns))
    return torch.tensor(own).view(-1, K), torch.tensor(shared).view(-1, K)


def compare(own, shared, scale, tree):
    """Advantages of both forms, row by row (a row is one group); in a tree, how often the greedy
    choice differs too."""
    a = group_norm(torch.as_tensor(own, dtype=torch.float64), scale)
    b = group_norm(torch.as_tensor(shared, dtype=torch.float64), scale)
    differ = (a - b).abs().amax(1) > 1e-6
    chosen = [atgrpo.best_index(r) for r in torch.as_tensor(own).tolist()]
    chosen_b = [atgrpo.best_index(r) for r in torch.as_tensor(shared).tolist()]
    signal = (a.abs().amax(1) > 0) | (b.abs().amax(1) > 0)
    return dict(groups=len(a), with_signal=int(signal.sum()), advantages_differ=int(differ.sum()),
                mean_abs_difference=float((a - b).abs().mean()), max_abs_difference=float((a - b).abs().max()),
                sign_flips=int(((a * b) < 0).sum()), samples=a.numel(),
                greedy_choice_differs=sum(x != y for x, y in zip(chosen, chosen_b)) if tree else None)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=None, help="folder for team_term.json (default: print only)")
    p.add_argument("--levels", type=int, default=32, help="training levels (seeds 0..N-1)")
    p.add_argument("--model", default="smollm2-135m")
    ours = p.parse_args(argv)
    if ours.levels < 1:
        p.error(f"--levels must be at least 1, not {ours.levels}")
    args = parse_args(["--env", "planpath", "--model", ours.model])
    K, seeds = args.num_generations, list(range(ours.levels))
    device = pick_device(args.device)
    model, tok = load_model(args.model, device)
    sampler = chat_sampler({r: model for r in env_two_roles.ROLES}, tok, args, env_two_roles.STOP_STRINGS)
    rows, t0 = [], time.time()
    for name, policy in (("bundled base model, temperature 1", sampler), ("uniform random moves", uniform)):
        random.seed(0)
        torch.manual_seed(0)
        rows.append(dict(policy=name, algo="at (planner groups)", **compare(*tree_forms(seeds, args, policy, K),
                                                                          args.scale_rewards, True)))
        rows.append(dict(policy=name, algo="grpo (trajectories)", **compare(*trajectory_forms(seeds, args, policy, K),
                                                                          args.scale_rewards, False)))
    print(f"{len(seeds)} levels, K = {K}, {args.max_turns} turns, alpha {args.team_alpha}, "
          f"--scale-rewards {args.scale_rewards}; {time.time() - t0:.0f} s on {device}")
    print("| policy | grouping | groups | with signal | advantages differ | mean abs diff | sign flips | greedy choice differs |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['policy']} | {r['algo']} | {r['groups']} | {r['with_signal']} | {r['advantages_differ']} | "
              f"{r['mean_abs_difference']:.3f} | {r['sign_flips']} of {r['samples']} | "
              f"{'-' if r['greedy_choice_differs'] is None else r['greedy_choice_differs']} |")
    if ours.out:
        os.makedirs(ours.out, exist_ok=True)
        with open(os.path.join(ours.out, "team_term.json"), "w") as f:
            json.dump(dict(levels=len(seeds), K=K, max_turns=args.max_turns, alpha=args.team_alpha,
                           scale_rewards=args.scale_rewards, device=device, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
