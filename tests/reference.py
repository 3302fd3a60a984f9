"""Plain-numpy reference implementations, one data set at a time, written for clarity not speed."""

from __future__ import annotations

import numpy as np

IMPURITIES = {
    "entropy": lambda q: -(np.where(q > 0, q * np.log2(np.where(q > 0, q, 1)), 0.0)
                           + np.where(q < 1, (1 - q) * np.log2(np.where(q < 1, 1 - q, 1)), 0.0)),
    "gini": lambda q: 4 * q * (1 - q),
    "kearns_mansour": lambda q: 2 * np.sqrt(q * (1 - q)),
    "error": lambda q: 2 * np.minimum(q, 1 - q),
}


#: Gain differences up to this are float64 noise on values equal in exact arithmetic.
EXACT = 1e-12


def node_gains(X, y, G, used, min_samples_leaf=1):
    """Gain of every feature at a node holding rows (X, y); -inf where inadmissible (float64)."""
    m, n = X.shape
    gains = np.full(n, -np.inf)
    mu = y.mean()
    for i in range(n):
        ones = X[:, i] == 1
        m1 = int(ones.sum())
        if used[i] or m1 < min_samples_leaf or m - m1 < min_samples_leaf:
            continue
        gains[i] = G(mu) - m1 / m * G(y[ones].mean()) - (m - m1) / m * G(y[~ones].mean())
    return gains


def id3(X, y, impurity, max_depth, min_samples_split=2, min_samples_leaf=1, min_gain=0.0,
        tie_tol=1e-6):
    """Recursive ID3 (000 Alg. 1) with lowest-index tie-breaking, into heap arrays.

    Returns dict of arrays feature, label, weight and a list ``margins``: at every split, the gap
    between the best gain and the best gain of any other feature (inf if only one admissible).

    The tie rule mirrors ``jaxtrees.GrowthRule`` in exact arithmetic: a feature is tied with the
    best gain b if its gain is >= b - tie_tol G(mu), G(mu) the node's impurity (or equal to b up
    to float64 noise, EXACT), and a node splits only if
    b >= min_gain - tie_tol max(1, |min_gain|).

    Added for the test suite:

    - ``gain``: float64 array, the best gain at split nodes, 0 elsewhere (like ``Tree.gain``);
    - ``mean``: float64 array, the mean label at existing nodes, 0 elsewhere (like ``Tree.mean``);
    - ``gaps``: at every node where gains were compared (a split or a min_gain stop), the array of
      ``best - g_i`` over admissible features i and, last, ``best - min_gain`` (see ``ambiguous``);
    - ``exact_ties``: at every such node, True if two features have gains equal in exact
      arithmetic (gap <= EXACT, float64 noise) at the best gain but different node statistics
      (count of x_i = 1, count of x_i = 1 and y = 1), e.g. a feature and its complement. Equal
      statistics give bit-identical float32 gains; different ones need the tie tolerance to absorb
      float32 rounding (see ``nontrivial_exact_ties``).
    """
    G = IMPURITIES[impurity]
    size = 2 ** (max_depth + 1) - 1
    feature = np.full(size, -1)
    label = np.zeros(size, int)
    weight = np.zeros(size)
    gain = np.zeros(size)
    mean = np.zeros(size)
    margins = []
    gaps = []
    exact_ties = []

    def rec(node, rows, used, depth):
        Xn, yn = X[rows], y[rows]
        m = len(yn)
        weight[node] = m
        label[node] = int(2 * yn.sum() > m)
        mean[node] = yn.mean()
        if depth == max_depth or yn.min() == yn.max() or m < min_samples_split:
            return
        g = node_gains(Xn, yn, G, used, min_samples_leaf)
        if not np.isfinite(g).any():
            return
        best = g.max()
        gaps.append(np.append(best - g[np.isfinite(g)], best - min_gain))
        top = np.flatnonzero(best - g <= EXACT)
        stats = {(int(Xn[:, i].sum()), int((Xn[:, i] * yn).sum())) for i in top}
        exact_ties.append(len(stats) > 1)
        if best < min_gain - tie_tol * max(1.0, abs(min_gain)):
            return
        # EXACT: gains equal in exact arithmetic tie even when tie_tol is 0.
        f = int(np.flatnonzero(g >= best - max(tie_tol * G(yn.mean()), EXACT))[0])
        others = np.delete(g, f)
        margins.append(best - others.max() if others.size and np.isfinite(others.max()) else np.inf)
        feature[node] = f
        gain[node] = best
        used2 = used.copy()
        used2[f] = True
        rec(2 * node + 1, rows[Xn[:, f] == 0], used2, depth + 1)
        rec(2 * node + 2, rows[Xn[:, f] == 1], used2, depth + 1)

    rec(0, np.arange(len(y)), np.zeros(X.shape[1], bool), 0)
    return {"feature": feature, "label": label, "weight": weight, "margins": margins,
            "gain": gain, "mean": mean, "gaps": gaps, "exact_ties": exact_ties}


def ambiguous(result, low=EXACT, high=1e-5):
    """True if some compared gain difference of an ``id3`` result lies in [low, high].

    Differences below ``low`` are exact ties (equal in exact arithmetic; float64 noise is ~1e-16),
    which the tie rule must resolve by the lowest index (see ``nontrivial_exact_ties``); above
    ``high`` they are far from the tie tolerance (at most 1e-6) compared with float32 rounding
    (~1e-7). In between, float32 and float64 may fall on different sides of the tie tolerance (or
    of the min_gain threshold), so the trees may legitimately differ.
    """
    return any(np.any((np.abs(g) >= low) & (np.abs(g) <= high)) for g in result["gaps"])


def nontrivial_exact_ties(result):
    """True if some split of an ``id3`` result has an exact tie between features with different
    statistics (see ``id3``'s ``exact_ties``)."""
    return any(result["exact_ties"])


def untied(result, margin=1e-4):
    """True if every split's best gain beats every other feature by more than ``margin``."""
    return all(mg > margin for mg in result["margins"])
