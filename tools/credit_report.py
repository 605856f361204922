"""The report of tools/credit.py: its measurement as Markdown tables (what docs/results-credit.md
shows), the scatter plot (--png), and the checks of a saved result (--json, read back by --from).
"""
import json
import os

import numpy as np

import mtgrpo
import tasks
from machinery.records import finite, read_checked
from tools.credit_figures import (BOOTSTRAP, ESTIMATORS, GAMES, KINDS, NAMES, TARGETS, TOOL, call_bias, pearson,
                                  true_advantages)

# the summary's columns: the pre-registered differences of each subset (turn 2: MT-GRPO against
# GRPO-MR, the paper's case; MT-GRPO - GRPO-OR is 0 there by construction)
SUMMARY = {n: {"tool": {"turn 1": (("mt", "or"), ("mr", "or")), "turn 2": (("mt", "mr"),)},
               "game": {"turn 1": (("at", "grpo"), ("gigpo", "grpo")), "turns 2+": (("at", "grpo"), ("gigpo", "grpo"))}}[t.kind]
           for n, t in tasks.TASKS.items()}


# ---------------------------------------------------------------- tables and plot
def number(v):
    return "–" if v != v else f"{v:+.2f}" if v < 0 else f"{v:.2f}"


def with_interval(triple):
    v, lo, hi = triple
    return f"{number(v)} [{number(lo)}, {number(hi)}]"


def where(s):
    """What a measurement's settings say beyond the defaults: the levels (the games), K (tool use).
    A file made before they were recorded measured the defaults, except where its settings say."""
    if s["env"] not in GAMES:
        return f", K = {s['max_calls'] + 1} turns" if s.get("max_calls", 1) != 1 else ""
    return f", the {s['levels']} levels" if s.get("levels", "ours") != "ours" else ""


def tables(result):
    """The measurement as markdown tables (what docs/results-credit.md shows)."""
    env, s = result["settings"]["env"], result["settings"]
    items, tool = tasks.TASKS[env].item + "s", env not in GAMES
    lines = [f"{env}, model {s['model']}, {s['states']} {items}"
             f"{where(s)}, "
             f"{'G' if tool else 'K'} = {s['num_generations']}, M = {s['continuations']}, "
             f"{'bf16' if s['bf16'] else 'fp32'}, temperature {s['temperature']}, {s['bootstrap']} bootstrap draws"]
    if "machine" in result:
        m = result["machine"]
        lines[0] += f"; sampled in {m['seconds'] / 60:.1f} min on {m['cpu']}, {m['threads']} thread{'s' if m['threads'] != 1 else ''}, load {m['load_at_start']:.2f} at the start"
    for target, cells in result["figures"].items():
        for subset, cell in cells.items():
            lines += ["", f"**{target}, {subset}** ({cell['n']} answers; the bootstrap resamples {cell['states']} "
                          f"{items})", "",
                      "| estimator | Pearson | Spearman | sign agreement | zero advantage | split-half r | ceiling |",
                      "|---|---|---|---|---|---|---|"]
            for e in ESTIMATORS[env]:
                if e in cell:
                    n = cell["noise"][e]
                    lines.append(f"| {NAMES[e]} | " + " | ".join(with_interval(cell[e][k]) for k in ("pearson", "spearman", "sign"))
                                 + f" | {cell[e]['zero'][0]:.2f} | {number(n['split_half'])} | {number(n['ceiling'])} |")
            lines += [""] + [f"- Pearson {NAMES[d.split('-')[0]]} − {NAMES[d.split('-')[1]]}: {with_interval(v)}"
                             for d, v in cell["differences"].items()]
    if env in GAMES and any("anchor" in r for r in result.get("records", [])):
        lines += ["", anchor_line(result["records"])]
    if tool and len(result["figures"]["outcome"]) > 1:
        lines += [""] + both_turns(result["figures"], env)
    if tool and (bias := call_bias(result.get("records", []), s["bootstrap"])):
        lines += bias_table(bias, env)
    if "update" in result:
        lines += update_table(result["update"], env)
    return "\n".join(lines)


def bias_table(bias, env):
    """call_bias as a table: the bonus of a call over an answer at equal A*, across states
    (tools/credit_bias.py)."""
    lines = []
    for target in ("return", "outcome"):
        cell = bias[target]
        lines += ["", f"**{env}, A* of {target}: the bonus of a tool call over answering now, at equal A*, across "
                      f"states** ({bias['calls']} calls, {bias['answers']} answers, turns before the last; calls' mean "
                      f"A* − answers': {number(cell['a_star_gap'][0])}; 95 % interval; c / b where b > 0)", "",
                  "| estimator | bonus c, advantage units | c / b, return units | draws left out: singular / b ≤ 0 |",
                  "|---|---|---|---|"]
        lines += [f"| {NAMES[e]} | {with_interval(cell[e]['bonus'])} | {with_interval(cell[e]['bonus_in_return'])} "
                  f"| {cell[e]['singular_draws']} / {cell[e]['b_not_positive_draws']} |"
                  for e in TOOL if e in cell]
    return lines + (across_table(bias) if "specifications" in bias else [])


def across_table(bias):
    """The across-state fit's specifications and MT-GRPO's terms, on the return."""
    shown = [e for e in TOOL if all(e in row for row in bias.get("specifications", {}).values())]
    lines = ["", f"**across states, A* of the return: c of each specification** ({bias['calls']} calls, "
                 f"{bias['answers']} answers; 95 % interval; singular draws left out)", "",
             "| specification | " + " | ".join(NAMES[e] for e in shown) + " |", "|---|" + "---|" * len(shown)]
    for name, row in bias.get("specifications", {}).items():
        lines.append(f"| {name} | " + " | ".join(signed_cell(row[e]["bonus"]) for e in shown) + " |")
    if "mt_terms" in bias:
        lines += ["", "MT-GRPO's c, term by term (they add up to its c): " + ", ".join(
            f"{t} {signed_cell(v['bonus'])}" for t, v in bias["mt_terms"].items())]
    return lines


def signed(x):
    return "–" if x is None or x != x else f"{x:+.2f}"


def signed_cell(v):
    """[point, low, high] as "+0.12 [−0.03, +0.25]" (the call-bias tables)."""
    return f"{signed(v[0])} [{signed(v[1])}, {signed(v[2])}]"


def update_table(figures, env):
    """Each estimator's update against the A* update: cosine and, on the same answers, Pearson."""
    lines = []
    for target, cell in figures.items():
        lines += ["", f"**the update, A* of {target}: cosine of each estimator's policy gradient with the gradient "
                      "A* gives** (all its answers, every turn; 95 % interval)", "",
                  "| estimator | answers | cosine | Pearson, the same answers | split-half r | ceiling |", "|---|---|---|---|---|---|"]
        lines += [f"| {NAMES[e]} | {cell[e]['n']} | {with_interval(cell[e]['cosine'])} | {with_interval(cell[e]['pearson'])} "
                  f"| {number(cell[e]['split_half'])} | {number(cell[e]['ceiling'])} |" for e in ESTIMATORS[env] if e in cell]
        lines += [""] + [f"- cosine {NAMES[d.split('-')[0]]} − {NAMES[d.split('-')[1]]}: {with_interval(v)}"
                         for d, v in cell["differences"].items()]
    return lines


def anchor_line(records):
    """How often GiGPO had a group at a later turn: trajectory answers of turn 2 or later whose
    state (the prompt) another answer of the same level also met."""
    later = [r for r in records if r["scheme"] == "trajectories" and r["turn"] >= 2 and "anchor" in r]
    shared = sum(r["anchor"] >= 2 for r in later)
    return (f"GiGPO's anchor groups: {shared} of {len(later)} later answers (turns 2+) share their state with "
            "another answer of their level; the rest get a step advantage of 0")


def both_turns(figures, env):
    """A tool-use task: each estimator's Pearson with A* turn by turn, in one table. With two turns the
    answer's return is R^O alone, so turn 2 has one column; with more, every turn has both."""
    turns = list(figures["outcome"])
    if turns == ["turn 1", "turn 2"]:
        cols = [("return", "turn 1", "turn 1, A* of R^T_1 + R^O"), ("outcome", "turn 1", "turn 1, A* of R^O"),
                ("outcome", "turn 2", "turn 2 (the answer), A* of R^O")]
    else:
        cols = [(t, sub, f"{sub}, A* of {'the return' if t == 'return' else 'R^O'}") for sub in turns for t in TARGETS[env]]
    present = [e for e in ESTIMATORS[env] if all(e in figures[t][sub] for t, sub, _ in cols)]
    lines = [f"**{env}, {'both turns' if len(turns) == 2 else 'every turn'}: Pearson with A*** (95 % interval)", "",
             "| estimator | " + " | ".join(c for _, _, c in cols) + " |", "|---|" + "---|" * len(cols)]
    for e in present:
        lines.append(f"| {NAMES[e]} | " + " | ".join(with_interval(figures[t][sub][e]["pearson"]) for t, sub, _ in cols) + " |")
    ceiling = lambda noise: next(iter(noise.values()))["ceiling"]  # noqa: E731 (one per scheme: tool use has one)
    lines.append("| ceiling | " + " | ".join(number(ceiling(figures[t][sub]["noise"])) for t, sub, _ in cols) + " |")
    if turns != ["turn 1", "turn 2"] or "mt-mr" not in figures["outcome"]["turn 2"]["differences"]:
        return lines
    mt_mr = figures["outcome"]["turn 2"]["differences"]["mt-mr"]
    return lines + ["", f"- turn 2, Pearson MT-GRPO − GRPO-MR: {with_interval(mt_mr)} (MT-GRPO's A_2 = norm(R^O) is "
                        "GRPO-OR's by construction)"]


def summary(results, names=None):
    """The pre-registered differences of every measurement, one row each (Pearson, 95 % interval),
    named by its file where names are given."""
    names, lines = names or [""] * len(results), []
    for env in ESTIMATORS:
        mine = [(r, name) for r, name in zip(results, names) if r["settings"]["env"] == env]
        if not mine:
            continue
        cols = [(t, sub, d) for t in TARGETS[env] for sub in SUMMARY[env] for d in SUMMARY[env][sub]]
        label = lambda d: " − ".join(NAMES[x].split(" (")[0] for x in d)  # noqa: E731
        lines += [f"**{env}: Pearson differences**", "",
                  "| measurement | model | precision | " + " | ".join(f"{label(d)}, {t}, {sub}" for t, sub, d in cols) + " |",
                  "|---|---|---|" + "---|" * len(cols)]
        for r, name in mine:
            cells = [with_interval(r["figures"][t][sub]["differences"]["-".join(d)]) if sub in r["figures"][t] else "–"
                     for t, sub, d in cols]
            lines.append(f"| {name} | {r['settings']['model']}{where(r['settings'])} | {'bf16' if r['settings']['bf16'] else 'fp32'} | "
                         + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def plot(result, path):
    """One scatter panel per estimator: its advantage against A* (the return)."""
    import matplotlib  # there: main checked before the measurement
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    env, records = result["settings"]["env"], result["records"]
    a_star = true_advantages(records, "return")[0]
    shown = [e for e in ESTIMATORS[env] if any(e in r["adv"] for r in records)]  # every estimator the file holds
    cols = min(4, len(shown))
    fig, axes = plt.subplots(-(-len(shown) // cols), cols, figsize=(3 * cols + 0.5, 3.6 * -(-len(shown) // cols)),
                             sharex=True, squeeze=False)
    axes = axes.flatten()
    for ax in axes[len(shown):]:
        ax.set_visible(False)
    for ax, e in zip(axes, shown):
        ix = [i for i, r in enumerate(records) if e in r["adv"]]
        later = np.array([records[i]["turn"] >= 2 for i in ix])
        x, y = a_star[ix], np.array([records[i]["adv"][e] for i in ix])
        ax.scatter(x[~later], y[~later], s=9, alpha=0.5, label="turn 1")
        if later.any():
            ax.scatter(x[later], y[later], s=9, alpha=0.5, label="turns 2+")
            ax.legend(fontsize=8)
        ax.axhline(0, color="grey", lw=0.5)
        ax.axvline(0, color="grey", lw=0.5)
        ax.set_title(f"{NAMES[e]}: r = {number(pearson(y, x))}")
        ax.set_xlabel("true advantage A* (return)")
    axes[0].set_ylabel("the estimator's advantage")
    fig.suptitle(f"{env}: model {result['settings']['model']}, {'bf16' if result['settings']['bf16'] else 'fp32'}")
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)  # missing folders are made, as for --json
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


# ---------------------------------------------------------------- a saved result, read as data
def read_result(path):
    """A --json file, read as data: its settings and every record checked for what the tables and
    figures read (types, ranges, finite numbers); the first problem stops with one line naming
    the file, the record and the key."""
    return read_checked(path, {"settings": dict, "records": list}, result_problem, "tools/credit.py")


def whole(low, high=float("inf")):
    return lambda x: isinstance(x, int) and not isinstance(x, bool) and low <= x <= high


# what the tables and figures read, and what each must be; bootstrap bounded: 10**9 draws would run for days
SETTINGS = {"env": (lambda x: x in ESTIMATORS, " or ".join(ESTIMATORS)), "model": (lambda x: isinstance(x, str), "text"),
            "states": (whole(2), "a whole number, at least 2"), "num_generations": (whole(2), "a whole number, at least 2"),
            "continuations": (lambda x: whole(2)(x) and x % 2 == 0, "an even whole number, at least 2"),
            "bf16": (lambda x: isinstance(x, bool), "true or false"),
            "temperature": (lambda x: finite(x) and x >= 0, "a number, at least 0"),
            "bootstrap": (whole(*BOOTSTRAP), f"a whole number from {BOOTSTRAP[0]} to {BOOTSTRAP[1]}")}
OPTIONAL = {"levels": (lambda x: x in ("ours", "public"), "ours or public"), "max_calls": (whole(1), "a whole number, at least 1"),
            "flags": (lambda x: isinstance(x, dict) and ("alpha" not in x or finite(x["alpha"]) and x["alpha"] >= 0),
                      "an object whose alpha is a finite number, at least 0"),
            "scale_rewards": (lambda x: x in mtgrpo.SCALES, " or ".join(mtgrpo.SCALES))}  # what credit.rescore reads
MACHINE = {"cpu": (lambda x: isinstance(x, str), "text"), "threads": (whole(1), "a whole number, at least 1"),
           "load_at_start": (finite, "a number"), "seconds": (finite, "a number")}


def fields_problem(where, values, checks):
    """What is wrong with the dict `values` under checks {key: (test, what it must be)}, or None."""
    for key, (ok, what) in checks.items():
        if key not in values:
            return f"{where} lacks '{key}'"
        if not ok(values[key]):
            return f"{where}: '{key}' must be {what}, got {json.dumps(values[key])[:40]}"
    return None


def result_problem(result):
    """What is wrong with a read --json object, or None: settings, machine, then record by record."""
    if not isinstance(result.get("machine", {}), dict):
        return "'machine' must be an object"
    optional = {k: v for k, v in OPTIONAL.items() if k in result["settings"]}  # recorded since 2026-11-27
    why = (fields_problem("settings", result["settings"], {**SETTINGS, **optional})
           or ("machine" in result and fields_problem("machine", result["machine"], MACHINE))
           or (not result["records"] and "no records"))
    if why:
        return why
    env, n = result["settings"]["env"], len(result["records"])
    if "gram" in result and not (isinstance(result["gram"], list) and len(result["gram"]) == n and all(
            isinstance(row, list) and len(row) == n and all(map(finite, row)) for row in result["gram"])):
        return f"'gram' must be {n} lists of {n} finite numbers (one row and column per record)"
    if "gram" in result and (why := gram_problem(np.array(result["gram"], float))):
        return why
    return next(filter(None, (record_problem(r, env, f"record {i}") for i, r in enumerate(result["records"]))), None)


def gram_problem(gram, tol=1e-5):
    """What is wrong with a Gram matrix of gradients (inner products: symmetric, no negative
    eigenvalue) beyond the rounding of its 7 kept digits, or None. An edited one gave other
    cosines, and NaN printed as "–", the same as "undefined"."""
    scale = max(np.abs(gram).max(), 1e-300)
    if np.abs(gram - gram.T).max() > tol * scale:
        return "'gram' must be symmetric (a matrix of inner products): it is not, beyond rounding"
    if np.linalg.eigvalsh(gram).min() < -tol * scale * len(gram):
        return "'gram' must have no negative eigenvalue (a matrix of inner products): it has one, beyond rounding"
    return None


def group_ok(g, turn):
    """A tool-use record's "group" (credit.rescore): the shapes agree and every number is finite;
    the rows' extra inputs (estimators.Estimator.needs) where kept: G lists of K - 1 ("info_gain")
    or K numbers each."""
    def rows(key, width, ok):
        return key not in g or len(g[key]) == G and all(isinstance(t, list) and len(t) == width and all(map(ok, t))
                                                        for t in g[key])
    try:
        G, K = len(g["outcome"]), len(g["turn_rewards"][0]) + 1
        return (set(g) - {"states", "info_gain", "values", "tokens"} == {"turn_rewards", "outcome", "turns", "episode"}
                and G >= 1 and rows("turn_rewards", K - 1, finite) and rows("info_gain", K - 1, finite)
                and rows("states", K, whole(-1)) and rows("values", K, finite) and rows("tokens", K, whole(0))
                and all(map(finite, g["outcome"])) and len(g["turns"]) == G
                and all(whole(1)(t) and t <= K for t in g["turns"]) and whole(0)(g["episode"]) and g["episode"] < G
                and isinstance(turn, int) and turn <= g["turns"][g["episode"]])
    except (TypeError, KeyError, IndexError):
        return False


def record_problem(r, env, where):
    """What is wrong with one record, or None: its state, cluster and turn, each estimator's
    advantage, and the two halves of Q (and of V, where it has its own) for each target."""
    if not isinstance(r, dict):
        return f"{where} must be an object"
    targets = f"two finite numbers for each of {' and '.join(TARGETS[env])}"
    checks = {"state": (lambda x: isinstance(x, str), "text"), "cluster": (whole(0), "a whole number, at least 0"),
              "turn": (whole(1), "a whole number, at least 1"),
              "adv": (lambda x: isinstance(x, dict) and bool(x) and set(x) <= set(ESTIMATORS[env])
                      and all(map(finite, x.values())), f"finite numbers keyed by {', '.join(ESTIMATORS[env])}"),
              "q": (halves_ok(env), targets)}
    optional = {"v": (halves_ok(env), targets), "anchor": (whole(1), "a whole number, at least 1"),
                "kind": (lambda x: x in KINDS, " or ".join(KINDS)),
                "group": (lambda g: group_ok(g, r.get("turn")), "the group's raw rewards: turn_rewards (G lists of "
                          "K - 1 finite numbers), outcome (G), turns (G whole numbers 1..K), episode (0..G-1) that "
                          "played this record's turn; if there, info_gain as turn_rewards and states (G lists of K "
                          "whole numbers, -1 or more)")}
    return fields_problem(where, r, checks | {k: test for k, test in optional.items() if k in r})


def halves_ok(env):
    """The test of a Q or V: {target: [first half, second half]} for every target of env."""
    return lambda x: isinstance(x, dict) and all(isinstance(x.get(t), list) and len(x[t]) == 2 and all(map(finite, x[t]))
                                                 for t in TARGETS[env])
