"""From credit to the update: how close each estimator's policy gradient comes to the gradient the
true advantages give, on the same samples (tools/credit.py --gradient).

An update is one direction in weight space. At the rollout's policy (ratio 1, beta 0) the
token-mean loss of loss.py has the gradient

    g(A) = -(1/|T|) sum_i A_i h_i,    h_i = grad sum_{t in answer i} log pi(y_t | context)

where answer i is one record of tools/credit.py (a turn of an episode, a candidate of a group)
with its advantage A_i. The estimator's update is g(A_e); the one its credit should give is
g(A*), the same loss with the true advantages. Their cosine depends on the h_i only through the
Gram matrix H_ij = h_i . h_j:

    cos(g(A_e), g(A*)) = A_e^T H A* / sqrt(A_e^T H A_e  A*^T H A*)

so H (answers x answers) is what a measurement keeps, and the bootstrap over states, the
split-half ceiling and any other advantages need no model. The h_i of a 135M model are 135M
numbers each; H is computed from a count sketch (a fixed random projection, below) of 2^20
numbers per answer, which keeps inner products to about 1/1000 of |h_i||h_j|, and is exact (no
projection) when the model has fewer parameters than that.

The ceiling: the A* of each half of the continuations gives its own gradient; their cosine r is
the split-half reliability of g(A*), and no advantage, not even the true one, comes closer to the
measured g(A*) than sqrt(2r / (1 + r)) (Spearman-Brown: the noise of a gradient from two halves is
half that of one, and is nearly orthogonal to everything in this many dimensions).
"""
import numpy as np
import torch
from tqdm import tqdm

from loss import token_logprobs
from machinery.precision import autocast

SKETCH_DIM = 2 ** 20


class CountSketch:
    """A fixed random projection R^P -> R^dim that keeps inner products on average: coordinate j
    of the parameters is added, with a random sign s_j, to a random bucket b_j (Charikar, Chen and
    Farach-Colton 2002). The identity when P <= dim."""

    def __init__(self, n_params, dim=SKETCH_DIM, seed=0):
        self.exact = n_params <= dim
        if not self.exact:
            g = torch.Generator().manual_seed(seed)
            self.bucket = torch.randint(dim, (n_params,), generator=g)
            self.sign = (torch.randint(2, (n_params,), generator=g, dtype=torch.int8) * 2 - 1)
            self.dim = dim

    def __call__(self, flat):
        if self.exact:
            return flat.double()
        return torch.zeros(self.dim, dtype=torch.float64).index_add_(0, self.bucket, (flat * self.sign).double())


def answer_gram(model, rows, temperature, bf16=True, dim=SKETCH_DIM, desc="credit: gradients"):
    """H (answers x answers) for rows [(context ids, answer ids)]: h_i is the gradient of the sum
    of the answer's token log-probs given its context (token_logprobs, as the loss computes them)."""
    params = [p for p in model.parameters() if p.requires_grad]
    sketch = CountSketch(sum(p.numel() for p in params), dim)
    device = str(params[0].device)
    sketches = []
    for context, answer in tqdm(rows, desc=desc, unit="answer"):
        model.zero_grad(set_to_none=True)
        if answer:
            ids = torch.tensor([list(context) + list(answer)], device=device)
            with autocast(device, bf16):
                logp = token_logprobs(model, ids, torch.ones_like(ids), temperature)
            logp[0, len(context) - 1:].sum().backward()  # position t - 1 predicts token t
        flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1).float().cpu() for p in params])
        sketches.append(sketch(flat))
    model.zero_grad(set_to_none=True)
    S = torch.stack(sketches)
    return (S @ S.T).numpy()


def cosine(H, a, b):
    """cos(sum_i a_i h_i, sum_i b_i h_i) from the Gram matrix H; NaN where a gradient is 0."""
    ab, aa, bb = a @ H @ b, a @ H @ a, b @ H @ b
    return float(ab / np.sqrt(aa * bb)) if aa > 0 and bb > 0 else float("nan")


def weighted_pearson(x, y, w):
    """Pearson's r of x and y, each row counted w times (a bootstrap draw)."""
    w = w / w.sum()
    dx, dy = x - w @ x, y - w @ y
    sx, sy = np.sqrt(w @ dx ** 2), np.sqrt(w @ dy ** 2)
    return float(w @ (dx * dy) / (sx * sy)) if sx > 0 and sy > 0 else float("nan")


def cluster_weights(n, bootstrap, seed=0):
    """The weight of each of n clusters in the point estimate (all 1) and in each bootstrap draw
    (how often the draw picked it)."""
    rng = np.random.default_rng(seed)
    return [np.ones(n)] + [np.bincount(rng.choice(n, n), minlength=n) for _ in range(bootstrap)]


def update_figures(records, gram, estimators, pairs, a_stars, interval, bootstrap=1000, seed=0):
    """{target: {estimator: {"cosine", "pearson": [value, low, high], "split_half", "ceiling",
    "n"}, "differences": {"a-b": cosine difference [value, low, high]}}}. a_stars: {target: (A*,
    A* of half 1, A* of half 2)}; each estimator on the records that carry its advantage (all
    their turns: one update), the bootstrap resampling states (clusters) for all at once."""
    gram, out = np.asarray(gram, float), {}
    clusters = sorted({r["cluster"] for r in records})
    draws = cluster_weights(len(clusters), bootstrap, seed)
    position = {c: j for j, c in enumerate(clusters)}
    for target, (a_star, a1, a2) in a_stars.items():
        cell, per_draw = {}, {}
        for e in estimators:
            ix = [i for i, r in enumerate(records) if e in r["adv"]]
            if not ix:
                continue
            H, adv = gram[np.ix_(ix, ix)], np.array([records[i]["adv"][e] for i in ix])
            of = np.array([position[records[i]["cluster"]] for i in ix])
            figs = [(cosine(H, w[of] * adv, w[of] * a_star[ix]), weighted_pearson(adv, a_star[ix], w[of].astype(float)))
                    for w in draws]
            per_draw[e] = [c for c, _ in figs]
            r = cosine(H, a1[ix], a2[ix])
            cell[e] = {"n": len(ix), "cosine": [figs[0][0], *interval(per_draw[e][1:])],
                       "pearson": [figs[0][1], *interval([p for _, p in figs[1:]])],
                       "split_half": r, "ceiling": float(np.sqrt(2 * r / (1 + r))) if r > 0 else float("nan")}
        cell["differences"] = {f"{a}-{b}": [per_draw[a][0] - per_draw[b][0],
                                            *interval([x - y for x, y in zip(per_draw[a][1:], per_draw[b][1:])])]
                               for a, b in pairs if a in per_draw and b in per_draw}
        out[target] = cell
    return out
