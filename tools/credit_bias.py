"""Does an estimator favour "search again" over "answer now"? Measured across states and inside one.

    python tools/credit_bias.py --model runs/credit-mt3/checkpoint --json docs/runs/credit/within-state/search-mt3-k3-bf16.json
    python tools/credit_bias.py --from docs/runs/credit/within-state/search-mt3-k3-bf16.json   # the tables again, no model

With K > 2 turns (train.py --max-calls 2) a search episode decides at every turn before the last
whether to call the tool again or to answer. If an estimator gave a call more advantage than an
answer worth as much, its update would push the policy toward calling (verl RFC #7244 describes
such a bias where the number of normalised terms depends on where an episode stopped; mtgrpo.py
sums K - 1 turn terms for every episode, so that mechanism is absent here, and the RFC is the
motivation, not the explanation).

Across states (credit_figures.call_bias, on tools/credit.py's records of a K = 3 measurement, shown
in its report): the least-squares fit adv = a + b A* + c [the turn calls] over the turns that could
do either. Every turn-2 state carries one scored action, so the across-state c is not the
gradient's bias; hence this file's measurement, inside a state:

Inside a state (measure; this file's command): at each turn-2 state of the measured episodes (an
episode that made one call: its prompt, turn 1 and the tool result), continuations are sampled
until both a call and an answer begin one (at least --per-kind of each, at most --most in all; the
first --episodes such states of each question). Each
continuation is scored with each estimator's A_2, the rest of its group held as it is (the
episode's own row replaced by the continuation's rewards), and its return from turn 2 estimates
Q(s, call) or Q(s, answer). Per state, the gap E[adv | call] - E[adv | answer] is what the policy
gradient at s sees; Q^(s, call) - Q^(s, answer) is what it should see. Across the states that met
both kinds: the fit gap_adv = b gap_Q + c (c: the bonus of a call inside a state, in advantage
units), the mean gaps, and the same split into terms; 95 % intervals over questions.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the project root

import numpy as np
import torch
from tqdm import tqdm

import estimators
import mtgrpo
import rewards
import tasks
import train
from machinery.cli import one_line
from machinery.records import finite, read_checked
from policy import BUNDLED, pick_device, play_episodes, turn_generator
from tools import output
from machinery import precision
from tools.credit import cpu_name, replay_prefix
from tools.credit_figures import BOOTSTRAP, GAMES, KINDS, TOOL, NAMES, interval, kind_of, least_squares
from tools.credit_gradient import cluster_weights
from tools.credit_report import signed_cell

# inside a state, the rows that need the rewards alone: GiGPO's states and IGPO's information gain of a
# continuation are not computed (field.inputs)
INSIDE = estimators.names("tool", trainable=False, needing=())


# ---------------------------------------------------------------- inside a state
def a_2(turn_r, outcome_r, turns, i, t, o, played, alpha, scale):
    """Each estimator's A_2 (estimators.py's search rows that need the rewards alone: INSIDE) of row i with its rewards replaced by
    (t, o) and its turns by `played`, the group's other rows as they are; and MT-GRPO's terms
    norm(R^T_2) and norm(R^O) of that row."""
    turn_r, outcome_r, turns = [list(r) for r in turn_r], list(outcome_r), list(turns)
    turn_r[i], outcome_r[i], turns[i] = list(t), o, played
    R_T = torch.tensor(turn_r, dtype=torch.float64)[None]
    R_O = torch.tensor(outcome_r, dtype=torch.float64)[None]
    T = torch.tensor(turns)[None]
    adv = {e: estimators.BY_NAME[e].fn(R_T, R_O, T, alpha, scale)[0, i, 1].item() for e in INSIDE}
    norm = lambda x: mtgrpo.group_norm(x, scale)[0, i].item()  # noqa: E731
    return adv, {"norm(R^T_2)": norm(R_T[..., 1]), "norm(R^O)": norm(R_O)}


def state_records(model, tok, questions, data, args, G, per_kind, most, episodes, chunk, bar):
    """One record per turn-2 state (module docstring), the first `episodes` of each question: its
    continuations' kinds, returns from turn 2, each estimator's A_2 and MT-GRPO's two terms."""
    K, records, task = args.max_calls + 1, [], tasks.TASKS[args.env]
    generate = turn_generator(model, tok, args, task.stop_strings)
    for qi, question in enumerate(questions):
        envs = train.make_envs([question], data, args, repeat=G)
        samples, _ = play_episodes(model, tok, envs, args, task.stop_strings, generate=generate)
        turn_r, outcome_r, _ = rewards.score_episodes(envs, task.rubric)
        bar.update(G)
        states = 0
        for i, (s, e) in enumerate(zip(samples, envs)):
            first = [x for x, k in zip(s.ids, s.turn) if k == 1]
            if states == episodes or e.turns < 2 or kind_of(args.prefill + tok.decode(first, skip_special_tokens=True),
                                                            1, K, task.rubric.tags) != "call":
                continue
            states += 1
            conts = []
            while len(conts) < most and min(sum(c["kind"] == k for c in conts) for k in ("call", "answer")) < per_kind:
                n = min(chunk, most - len(conts))
                envs2 = train.make_envs([question], data, args, repeat=n)
                played, _ = play_episodes(model, tok, envs2, args, task.stop_strings,
                                          generate=replay_prefix([[first]] * n, generate))
                for p, e2, t, o in zip(played, envs2, *rewards.score_episodes(envs2, task.rubric)[:2]):
                    second = [x for x, k in zip(p.ids, p.turn) if k == 2]
                    adv, parts = a_2(turn_r, outcome_r, [e.turns for e in envs], i, t, o, e2.turns, args.alpha,
                                     args.scale_rewards)
                    conts.append({"kind": kind_of(args.prefill + tok.decode(second, skip_special_tokens=True), 2, K, task.rubric.tags),
                                  "return": sum(t[1:]) + o, "adv": adv, "terms": parts})
                bar.update(n)
            records.append({"cluster": qi, "state": f"question {qi}, episode {i}, after the tool result",
                            "continuations": conts})
    return records


def held(records):
    """The estimators every continuation holds (a file measured with an older table holds fewer)."""
    return [e for e in TOOL if all(e in c["adv"] for r in records for c in r["continuations"])]


def state_gaps(records):
    """Per state with both kinds: the gaps call - answer of Q^ and of each estimator's mean A_2 and
    MT-GRPO's terms; and the counts."""
    gaps = []
    for r in records:
        kinds = {k: [c for c in r["continuations"] if c["kind"] == k] for k in ("call", "answer")}
        if not all(kinds.values()):
            continue
        mean = lambda f, k: float(np.mean([f(c) for c in kinds[k]]))  # noqa: E731
        gap = lambda f: mean(f, "call") - mean(f, "answer")  # noqa: E731
        gaps.append({"cluster": r["cluster"], "q": gap(lambda c: c["return"]),
                     "adv": {e: gap(lambda c, e=e: c["adv"][e]) for e in held(records)},
                     "terms": {t: gap(lambda c, t=t: c["terms"][t]) for t in ("norm(R^T_2)", "norm(R^O)")}})
    return gaps


def inside(records, bootstrap=1000, seed=0):
    """The within-state figures (module docstring), 95 % intervals over questions."""
    gaps = state_gaps(records)
    out = {"states": len(records), "with_both_kinds": len(gaps),
           "continuations": {k: sum(c["kind"] == k for r in records for c in r["continuations"])
                             for k in ("call", "answer", "neither")}}
    if len(gaps) < 3:
        return out
    clusters = sorted({g["cluster"] for g in gaps})
    of = np.array([clusters.index(g["cluster"]) for g in gaps])
    draws = [w[of].astype(float) for w in cluster_weights(len(clusters), bootstrap, seed)]
    q = np.array([g["q"] for g in gaps])
    columns = {**{e: np.array([g["adv"][e] for g in gaps]) for e in held(records)},
               **{t: np.array([g["terms"][t] for g in gaps]) for t in ("norm(R^T_2)", "norm(R^O)")}}

    def fit(y, w):
        coef = least_squares(y, [np.ones_like(q), q], w)
        return (float("nan"),) * 3 if coef is None or w.sum() == 0 else (
            float(coef[0]), float(coef[1]), float(np.average(y, weights=w)))
    out["q_gap"] = [float(q.mean()), *interval([np.average(q, weights=w) for w in draws[1:] if w.sum()])]
    for name, y in columns.items():
        fits = [fit(y, w) for w in draws]
        out[name] = {k: [fits[0][j], *interval([f[j] for f in fits[1:]])]
                     for j, k in enumerate(("bonus", "slope", "mean_gap"))}
    return out


# ---------------------------------------------------------------- the tables


def inside_table(figures):
    """The within-state figures as a table."""
    c = figures["continuations"]
    lines = ["", f"**inside a state: the gap call − answer at turn 2** ({figures['states']} states, "
                 f"{figures['with_both_kinds']} with both kinds; continuations: {c['call']} calls, {c['answer']} "
                 f"answers, {c['neither']} neither; 95 % intervals over questions)", ""]
    if "q_gap" not in figures:
        return lines + ["Fewer than 3 states met both kinds: nothing to fit."]
    lines += [f"Q^(s, call) − Q^(s, answer), mean over states: {signed_cell(figures['q_gap'])}", "",
              "| advantage | mean gap | fit gap = b gap_Q + c: c | b |", "|---|---|---|---|"]
    for name in [e for e in TOOL if e in figures] + ["norm(R^T_2)", "norm(R^O)"]:
        f = figures[name]
        label = NAMES.get(name, f"MT-GRPO's term {name}")
        lines.append(f"| {label} | {signed_cell(f['mean_gap'])} | {signed_cell(f['bonus'])} | {signed_cell(f['slope'])} |")
    return lines


# ---------------------------------------------------------------- command line
def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=BUNDLED, help="a checkpoint of a run with --max-calls 2 or more")
    p.add_argument("--states", type=int, default=12, help="test questions")
    p.add_argument("--num-generations", type=int, help="G (default: the run's)")
    p.add_argument("--per-kind", type=int, default=4, help="continuations of each kind wanted at a state")
    p.add_argument("--most", type=int, default=24, help="continuations at most at a state")
    p.add_argument("--episodes", type=int, default=4, help="turn-2 states per question at most (its first episodes that called)")
    p.add_argument("--chunk", type=int, default=16, help="continuations decoded together")
    p.add_argument("--bootstrap", type=int, default=1000)
    p.add_argument("--json", help="write the measurement here")
    p.add_argument("--from", dest="source", metavar="JSON", help="a --json file: its tables again, no model")
    ours, rest = p.parse_known_args(argv)
    if ours.per_kind < 1 or ours.most < 2 * ours.per_kind or ours.chunk < 1 or ours.states < 2 or ours.episodes < 1 \
            or not 10 <= ours.bootstrap <= 100_000:
        p.error("--per-kind at least 1, --most at least twice it, --chunk and --episodes at least 1, --states at "
                "least 2, --bootstrap from 10 to 100,000")
    if ours.source:
        return ours, None
    from tools.evaluate import run_args
    ours.n, ours.env = ours.states, None  # the run's task
    args = run_args(ours, rest + ([f"--num-generations={ours.num_generations}"] if ours.num_generations else []))
    if args.env in GAMES or args.max_calls < 2:
        p.error(f"{ours.model}: a tool-use run with --max-calls 2 or more is needed (this one: --env {args.env}, "
                f"--max-calls {args.max_calls}): with two turns no turn can both call and answer")
    return ours, args


def measure(ours, args):
    from tools.evaluate import evaluation_set, load_policy
    device = pick_device(args.device)
    models, tok = load_policy(args.model, args, device)
    data, items = evaluation_set(args, "test")
    torch.manual_seed(args.seed)
    t0, load = time.time(), os.getloadavg()[0]
    with tqdm(desc="credit_bias: episodes", unit="episode") as bar:
        records = state_records(models["policy"], tok, items[:ours.states], data, args, args.num_generations,
                                ours.per_kind, ours.most, ours.episodes, ours.chunk, bar)
    return {"settings": {"model": args.model, "states": ours.states, "num_generations": args.num_generations,
                         "max_calls": args.max_calls, "alpha": args.alpha, "scale_rewards": args.scale_rewards,
                         "per_kind": ours.per_kind, "most": ours.most, "episodes": ours.episodes,
                         "bootstrap": ours.bootstrap, "seed": args.seed,
                         "temperature": args.temperature, "bf16": bool(args.bf16 and precision.bf16_ok(device))},
            "records": records,
            "machine": {"cpu": cpu_name(), "threads": torch.get_num_threads(), "load_at_start": load,
                        "seconds": round(time.time() - t0, 1)}}


def read_state_result(path):
    """A --json file of this tool, read as data (as credit_report.read_result reads credit.py's):
    the first problem stops with one line naming the file, the record and the key."""
    return read_checked(path, {"settings": dict, "records": list}, state_result_problem, "tools/credit_bias.py")


def state_result_problem(result):
    """What is wrong with a read --json object, or None: the bootstrap, then record by record,
    continuation by continuation: its kind, a finite return, finite advantages of this table's
    estimators, and MT-GRPO's two terms."""
    draws = result["settings"].get("bootstrap")
    if not (isinstance(draws, int) and not isinstance(draws, bool) and BOOTSTRAP[0] <= draws <= BOOTSTRAP[1]):
        return f"settings: 'bootstrap' must be a whole number from {BOOTSTRAP[0]} to {BOOTSTRAP[1]}, got {json.dumps(draws)[:40]}"
    for i, r in enumerate(result["records"]):
        where = f"record {i}"
        if not (isinstance(r, dict) and isinstance(r.get("cluster"), int) and not isinstance(r["cluster"], bool)
                and r["cluster"] >= 0 and isinstance(r.get("continuations"), list)):
            return f"{where} must be an object with a cluster (a whole number) and a list of continuations"
        for j, c in enumerate(r["continuations"]):
            at = f"{where}, continuation {j}"
            if not isinstance(c, dict):  # a list or a number: nothing to .get from
                return f"{at} must be an object, got {json.dumps(c)[:40]}"
            adv, terms = c.get("adv"), c.get("terms")
            if c.get("kind") not in KINDS:
                return f"{at}: 'kind' must be {' or '.join(KINDS)}"
            if not finite(c.get("return")):
                return f"{at}: 'return' must be a finite number, got {json.dumps(c.get('return'))[:40]}"
            if not (isinstance(adv, dict) and adv and set(adv) <= set(TOOL)
                    and all(map(finite, adv.values()))):  # an older table's file holds fewer
                return f"{at}: 'adv' must be finite numbers keyed by {', '.join(TOOL)}, got {json.dumps(adv)[:40]}"
            if not (isinstance(terms, dict) and set(terms) == {"norm(R^T_2)", "norm(R^O)"} and all(map(finite, terms.values()))):
                return f"{at}: 'terms' must be finite numbers keyed by norm(R^T_2) and norm(R^O), got {json.dumps(terms)[:40]}"
    return None


@one_line
def main(argv=None):
    ours, args = parse_args(sys.argv[1:] if argv is None else argv)
    if ours.json:
        output.check(ours.json, "--json")
        if ours.source and output.same_file(ours.json, ours.source):
            raise SystemExit(f"--json {ours.json} is the --from file: writing it would replace the measurement it "
                             "reads; give another file")
    result = read_state_result(ours.source) if ours.source else measure(ours, args)
    result["figures"] = inside(result["records"], result["settings"]["bootstrap"])
    print("\n".join(inside_table(result["figures"])))
    if ours.json:
        output.write_text(ours.json, json.dumps(result, indent=1) + "\n")
        print(f"wrote {ours.json}")
    return result


if __name__ == "__main__":
    main()
