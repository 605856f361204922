"""The figures of a credit measurement (tools/credit.py, tools/credit_bias.py): the true advantage
A* from the Monte Carlo returns, each estimator's Pearson and Spearman correlation with it, sign
agreement and the noise ceiling, with bootstrap intervals over states; and across states, the
bonus of a tool call over an answer at equal A* (call_bias). Numbers in, numbers out: no model,
no file.

The figures, with 95 % bootstrap intervals over states (questions; for the games levels, which
hold every state of their episodes): Pearson and Spearman correlation with A*; sign agreement
where |A*| is above the noise (an advantage of 0 has no sign: it counts as a miss); the fraction
of answers whose advantage is 0. The noise ceiling: the M continuations split in two halves give
two independent A*; their correlation r is the split-half reliability, and no estimator, not even
the true A*, can correlate with the measured A* above sqrt(2r / (1 + r)) (Spearman-Brown).

Across states (call_bias, on a K = 3 measurement's records): the least-squares fit
adv = a + b A* + c [the turn calls] over the turns that could do either. c is in advantage units,
c / b in reward units. Its specifications (pooled, turn 2 alone, a turn dummy, question effects,
and at turn 2 the state's value V(s) as a covariate) and the split of c into the terms each
estimator adds (norm(R^O), norm(R^T_1), norm(R^T_2): the fit is linear in adv, so their c add up).
Every turn-2 state carries one scored action, so a baseline error that depends only on the state
enters c without biasing the policy gradient: the across-state c is not the gradient's bias.
"""
import numpy as np

import estimators
import rewards
import tasks
from tools.credit_gradient import cluster_weights, update_figures

GAMES = tasks.names("game")  # AT-GRPO's games: the same estimators, targets and subsets
TOOL = estimators.names("tool", trainable=False)  # the tool-use tasks' estimators (search's call bias: K = 3)
# per task (tasks.py), from its kind: every estimator of estimators.py's table, in its order; the
# AT-GRPO paper's two named by their rollout
ESTIMATORS = {n: estimators.names(t.kind, trainable=False) for n, t in tasks.TASKS.items()}
NAMES = {e.name: e.label + (f" ({e.scheme})" if e.paper == "AT-GRPO" else "") for e in estimators.TABLE}
TARGETS = {n: {"tool": ("return", "outcome"), "game": ("return", "success")}[t.kind] for n, t in tasks.TASKS.items()}
# the pre-registered comparisons: (estimator, baseline), Pearson difference with its interval
DIFFERENCES = {n: {"tool": (("mt", "or"), ("mr", "or"), ("mt", "mr"), ("mt_half", "mt")),
                   "game": (("at", "grpo"), ("gigpo", "grpo"), ("at", "gigpo"))}[t.kind] for n, t in tasks.TASKS.items()}
BOOTSTRAP = (10, 100_000)  # draws: 1000 take seconds; the upper bound keeps a typo from running for days
GAME_SUBSETS = {"all turns": lambda r: True, "turn 1": lambda r: r["turn"] == 1, "turns 2+": lambda r: r["turn"] >= 2}
KINDS = ("call", "answer", "neither", "last")
TERMS = ("norm(R^T_1)", "norm(R^T_2)", "norm(R^O)")  # what MT-GRPO adds up at K = 3 (alpha 1)


def kind_of(text, turn, K, tags=rewards.TAGS):
    """What a turn decided: "call" (call the tool again), "answer" (stop now), "neither", or "last"
    (turn K: the episode ends whatever it says); tags: the task's (rewards.Tags)."""
    return ("last" if turn >= K else "answer" if rewards.tag_content(text, tags.answer) is not None
            else "call" if f"<{tags.call}>" in text else "neither")


# ---------------------------------------------------------------- A* and the figures
def subsets(records, env):
    """{name: test of a record}: the answers each figure is given for. Tool use: turn by turn (turn
    K, the last, is the answer); the games: all turns, the first, the later ones."""
    if env in GAMES:
        return GAME_SUBSETS
    return {f"turn {k}": (lambda r, k=k: r["turn"] == k) for k in sorted({r["turn"] for r in records})}


def true_advantages(records, target):
    """(A*, A* of the first half, A* of the second half) per record (module docstring)."""
    shared = {}
    for i, r in enumerate(records):
        if "v" not in r:
            shared.setdefault(r["state"], []).append(i)
    a = np.zeros((2, len(records)))
    for h in (0, 1):
        means = {state: np.mean([records[j]["q"][target][h] for j in rows]) for state, rows in shared.items()}  # once a state
        for i, r in enumerate(records):
            a[h, i] = r["q"][target][h] - (r["v"][target][h] if "v" in r else means[r["state"]])
    return (a[0] + a[1]) / 2, a[0], a[1]


def pearson(x, y):
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(x) < 2 or x.std() == 0 or y.std() == 0:
        return float("nan")
    return float(np.mean((x - x.mean()) * (y - y.mean())) / (x.std() * y.std()))


def ranks(x):
    """Ranks 1..n, ties given their mean rank."""
    x = np.asarray(x, float)
    order = np.argsort(x, kind="stable")
    new = np.r_[True, x[order][1:] != x[order][:-1]]  # where a run of equal values starts
    first = np.flatnonzero(new)
    mean_rank = first + (np.diff(np.r_[first, len(x)]) + 1) / 2  # ranks first+1 .. first+count
    r = np.empty(len(x))
    r[order] = mean_rank[np.cumsum(new) - 1]
    return r


def spearman(x, y):
    return pearson(ranks(x), ranks(y))


def figures(adv, a_star, noise):
    """Pearson, Spearman, sign agreement where |A*| > 2 noise, and the fraction of advantages 0."""
    adv, a_star = np.asarray(adv, float), np.asarray(a_star, float)
    clear = np.abs(a_star) > 2 * noise
    return {"pearson": pearson(adv, a_star), "spearman": spearman(adv, a_star),
            "sign": float(np.mean(np.sign(adv[clear]) == np.sign(a_star[clear]))) if clear.any() else float("nan"),
            "zero": float(np.mean(adv == 0))}


def noise_ceiling(a1, a2):
    """Split-half reliability r, the ceiling sqrt(2r / (1 + r)), and the noise: the std of the
    full estimate's error, std(A*_1 - A*_2) / 2 (each half has twice the full estimate's variance)."""
    r = pearson(a1, a2)
    ceiling = float(np.sqrt(2 * r / (1 + r))) if r > 0 else float("nan")
    return {"split_half": r, "ceiling": ceiling, "noise": float(np.std(np.asarray(a1) - np.asarray(a2)) / 2)}


def analyse(records, env, bootstrap=1000, seed=0, pairs=()):
    """{target: {subset: {"n", "states", noise ceiling, per estimator {figure: [value, low, high]},
    "differences": {"a-b": [value, low, high]}}}}: the Pearson differences are paired (the same
    resampled states for both), DIFFERENCES' and any `pairs` (estimator, baseline) asked for."""
    out = {}
    for target in TARGETS[env]:
        a_star, a1, a2 = true_advantages(records, target)
        out[target] = {}
        for subset, keep in subsets(records, env).items():
            rows = [i for i, r in enumerate(records) if keep(r)]
            if not rows:
                continue
            by_est = {e: [i for i in rows if e in records[i]["adv"]] for e in ESTIMATORS[env]}
            # the noise of each scheme's A*, from its own answers
            noise = {e: noise_ceiling(a1[ix], a2[ix]) for e, ix in by_est.items() if ix}

            def compute(cluster_weights):
                res = {}
                for e, ix in by_est.items():
                    if ix:
                        ix = np.repeat(ix, [cluster_weights[records[i]["cluster"]] for i in ix])
                        res[e] = figures([records[i]["adv"][e] for i in ix], a_star[ix], noise[e]["noise"])
                return res

            clusters = sorted({records[i]["cluster"] for i in rows})
            point = compute({c: 1 for c in clusters})
            rng, draws = np.random.default_rng(seed), []
            for _ in range(bootstrap):
                picked = rng.choice(clusters, len(clusters))
                draws.append(compute({c: int(np.sum(picked == c)) for c in clusters}))
            cell = {"n": len(rows), "states": len(clusters), "noise": noise}
            for e, fig in point.items():
                cell[e] = {k: [v, *interval([d[e][k] for d in draws])] for k, v in fig.items()}
            cell["differences"] = {f"{a}-{b}": [point[a]["pearson"] - point[b]["pearson"],
                                                *interval([d[a]["pearson"] - d[b]["pearson"] for d in draws])]
                                   for a, b in dict.fromkeys((*DIFFERENCES[env], *pairs)) if a in point and b in point}
            out[target][subset] = cell
    return out


def update(result, pairs=()):
    """The update's figures of a --gradient measurement (tools/credit_gradient.py): per target,
    each estimator's cosine with the A* gradient, on all its answers, from the kept Gram matrix."""
    records, env = result["records"], result["settings"]["env"]
    a_stars = {t: true_advantages(records, t) for t in TARGETS[env]}
    return update_figures(records, result["gram"], ESTIMATORS[env], tuple(dict.fromkeys((*DIFFERENCES[env], *pairs))), a_stars, interval,
                                          result["settings"]["bootstrap"])


def interval(values):
    """The 2.5 and 97.5 percentiles (NaN-free draws only)."""
    values = [v for v in values if v == v]
    return [float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))] if values else [float("nan")] * 2


# ---------------------------------------------------------------- across states: the bonus of a call
def least_squares(y, columns, w):
    """Coefficients of the weighted fit y = sum_j coef_j columns_j, or None where the weights leave
    the columns dependent (a bootstrap draw with no call or no answer: lstsq would return one of
    infinitely many fits, an arbitrary c)."""
    X = np.stack(columns, 1) * np.sqrt(w)[:, None]
    coef, _, rank, _ = np.linalg.lstsq(X, np.asarray(y, float) * np.sqrt(w), rcond=None)
    return coef if rank == X.shape[1] else None


def bonus(adv, a_star, calls, w, extra=()):
    """(c, c / b) of the weighted fit adv = a + b A* + c calls (+ the extra columns); NaN for a
    singular draw, and c / b NaN where b <= 0 (the interval of c / b is conditional on b > 0)."""
    extra = [x for x in extra if np.any(w * x)]  # a question's effect where the draw left it out: no column
    coef = least_squares(adv, [np.ones_like(a_star), a_star, calls, *extra], w)
    if coef is None:
        return float("nan"), float("nan")
    b, c = coef[1], coef[2]
    return float(c), float(c / b) if b > 0 else float("nan")


def with_draws(fits):
    """[point, low, high] of c and of c / b, and how many bootstrap draws each interval left out."""
    draws = fits[1:]
    return {"bonus": [fits[0][0], *interval([f[0] for f in draws])],
            "bonus_in_return": [fits[0][1], *interval([f[1] for f in draws])],
            "singular_draws": sum(f[0] != f[0] for f in draws), "b_not_positive_draws": sum(
                f[0] == f[0] and f[1] != f[1] for f in draws)}


def terms(records, rows):
    """{term: per-row values}: the parts of MT-GRPO's A_k at K = 3 and alpha 1, from the
    estimators a record carries: A_1 = n1 + n2 + o, alpha 0.5's A_1 = n1 + n2 / 2 + o / 4, and
    A_2 = n2 + o (GRPO-OR's A = o = norm(R^O))."""
    out = {t: [] for t in TERMS}
    for i in rows:
        a, k = records[i]["adv"], records[i]["turn"]
        o = a["or"]
        n2 = 2 * ((a["mt"] - o) - (a["mt_half"] - o / 4)) if k == 1 else a["mt"] - o
        n1 = a["mt"] - o - n2 if k == 1 else 0.0
        for t, v in zip(TERMS, (n1, n2, o)):
            out[t].append(v)
    return {t: np.array(v) for t, v in out.items()}


def call_bias(records, bootstrap=1000, seed=0):
    """The across-state fit (module docstring) per target and estimator, with the count of draws
    each interval left out; on the return also its specifications and MT-GRPO's terms. None when the
    turns that could do either hold only one kind, or for a measurement of two turns (no turn 2
    could call)."""
    rows = [i for i, r in enumerate(records) if r.get("kind") in ("call", "answer")]
    if {records[i]["kind"] for i in rows} != {"call", "answer"}:
        return None
    calls = np.array([records[i]["kind"] == "call" for i in rows], float)
    turn = np.array([records[i]["turn"] for i in rows])
    clusters = sorted({records[i]["cluster"] for i in rows})
    of = np.array([clusters.index(records[i]["cluster"]) for i in rows])
    draws = [w[of].astype(float) for w in cluster_weights(len(clusters), bootstrap, seed)]
    out = {"calls": int(calls.sum()), "answers": int(len(rows) - calls.sum())}
    for target in ("return", "outcome"):
        a_star = true_advantages(records, target)[0][rows]
        out[target] = {"a_star_gap": [float(a_star[calls == 1].mean() - a_star[calls == 0].mean())]}
        for e in TOOL:
            if all(e in records[i]["adv"] for i in rows):
                adv = np.array([records[i]["adv"][e] for i in rows])
                out[target][e] = with_draws([bonus(adv, a_star, calls, w) for w in draws])
    a_star = true_advantages(records, "return")[0][rows]
    kept = [e for e in TOOL if all(e in records[i]["adv"] for i in rows)]  # an older file: fewer
    if len(set(turn)) > 1 and "mt_half" in kept:
        second = turn == 2
        value = np.array([np.mean(records[i]["v"]["return"]) if "v" in records[i] else 0.0 for i in rows])
        effects = [(of == q).astype(float) for q in range(1, len(clusters))]
        specs = {"pooled": (np.ones(len(rows), bool), ()), "turn 2 alone": (second, ()),
                 "a turn dummy": (np.ones(len(rows), bool), (second.astype(float),)),
                 "question effects": (np.ones(len(rows), bool), tuple(effects)),
                 "turn 2 alone, V(s) a covariate": (second, (value,))}
        out["specifications"] = {}
        for name, (keep, extra) in specs.items():
            cols = [x[keep] for x in extra]
            out["specifications"][name] = {e: with_draws([bonus(np.array([records[i]["adv"][e] for i in rows])[keep],
                                                               a_star[keep], calls[keep], w[keep], cols) for w in draws])
                                           for e in kept}
        out["mt_terms"] = {t: with_draws([bonus(v, a_star, calls, w) for w in draws]) for t, v in terms(records, rows).items()}
    return out
