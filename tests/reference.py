"""Plain-numpy reference implementations, one data set at a time, written for clarity not speed."""

from __future__ import annotations

import numpy as np

IMPURITIES = {
    "entropy": lambda q: -(np.where(q > 0, q * np.log2(np.where(q > 0, q, 1)), 0.0)
                           + np.where(q < 1, (1 - q) * np.log2(np.where(q < 1, 1 - q, 1)), 0.0)),
    "gini": lambda q: 4 * q * (1 - q),
    "kearns_mansour": lambda q: 2 * np.sqrt(q * (1 - q)),
}


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

    Added for the test suite (the above is unchanged):

    - ``gain``: float64 array, the best gain at split nodes, 0 elsewhere (like ``Tree.gain``);
    - ``mean``: float64 array, the mean label at existing nodes, 0 elsewhere (like ``Tree.mean``);
    - ``gaps``: at every node where gains were compared (a split or a min_gain stop), the array of
      ``best - g_i`` over admissible features i and, last, ``best - min_gain``. An entry near 0 is
      a tie (or a min_gain boundary case) that float32 may resolve differently only if it lies
      close to ``tie_tol``; see ``ambiguous``.
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
        if best < min_gain - tie_tol:
            return
        f = int(np.flatnonzero(g >= best - tie_tol)[0])
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
            "gain": gain, "mean": mean, "gaps": gaps}


def ambiguous(result, low=1e-8, high=1e-5):
    """True if some compared gain difference of an ``id3`` result lies in [low, high].

    Differences below ``low`` are exact ties (equal in exact arithmetic; float64 noise is ~1e-16)
    that both implementations resolve by the lowest index; above ``high`` they are far from the
    tie tolerance (1e-6) compared with float32 rounding (~1e-7). In between, float32 and float64
    may fall on different sides of ``tie_tol`` (or of ``min_gain - tie_tol``).
    """
    return any(np.any((np.abs(g) >= low) & (np.abs(g) <= high)) for g in result["gaps"])


def untied(result, margin=1e-4):
    """True if every split's best gain beats every other feature by more than ``margin``."""
    return all(mg > margin for mg in result["margins"])
