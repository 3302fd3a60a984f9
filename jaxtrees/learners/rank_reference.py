"""Ehrenfeucht-Haussler's FIND(S, r) and FINDMIN(S) in plain numpy, recursive, exactly as 003 states them.

One sample at a time, written for clarity, not speed: the reference that the batched learner
(:mod:`~jaxtrees.learners.rank`) must equal node for node, and the baseline its benchmark runs.
Trees are nested tuples: a leaf is ``0`` or ``1``, a node ``(v, Q0, Q1)``.
"""

from __future__ import annotations

import numpy as np


class Counter:
    """Counts FIND's invocations (the recursive calls of Lemma 3, the outermost included)."""

    def __init__(self):
        self.calls = 0


def find(X, y, r: int, counter: Counter | None = None):
    """A tree of rank <= r consistent with the rows ``X: {0,1}[m, n]``, labels ``y: {0,1}[m]``, or None.

    FIND(S, r), S a nonempty sample (:func:`_find`):

    1. all examples positive: return the leaf 1; all negative: the leaf 0;
    2. r = 0: return none;
    3. for each informative variable v (both values occur in S), in index order:
       Q0 = FIND(S_0^v, r - 1), Q1 = FIND(S_1^v, r - 1) (both calls are made);
       both succeed: return the node v(Q0, Q1); exactly one fails: re-execute it with rank bound r
       and return v(Q0, Q1) if it now succeeds, else none;
    4. return none.

    >>> import numpy as np
    >>> X = np.array([[0, 0], [0, 1], [1, 0], [1, 1]])
    >>> find(X, np.array([0, 1, 1, 1]), 1)          # x_0 OR x_1 has rank 1
    (0, (1, 0, 1), 1)
    >>> find(X, np.array([0, 1, 1, 0]), 1) is None  # XOR needs rank 2
    True
    """
    X, y = np.asarray(X, bool), np.asarray(y, bool)
    if X.ndim != 2 or y.shape != (X.shape[0],) or X.shape[0] < 1:
        raise ValueError(f"X must be {{0,1}}[m, n] with m >= 1 and y {{0,1}}[m], got {X.shape} and {y.shape}")
    if r < 0:
        raise ValueError(f"r must be >= 0, got {r}")
    return _find(X, y, r, counter if counter is not None else Counter())


def _find(X, y, r, counter):
    """FIND(S, r) as :func:`find` states it, on a checked sample; counts its invocations."""
    counter.calls += 1
    if y.all():
        return 1
    if not y.any():
        return 0
    if r == 0:
        return None
    ones = X.sum(axis=0)
    for v in np.flatnonzero((ones > 0) & (ones < X.shape[0])):
        sides = [X[:, v] == 0, X[:, v] == 1]
        q = [_find(X[s], y[s], r - 1, counter) for s in sides]
        if q[0] is not None and q[1] is not None:
            return (int(v), q[0], q[1])
        if (q[0] is None) != (q[1] is None):
            failed = 0 if q[0] is None else 1
            q[failed] = _find(X[sides[failed]], y[sides[failed]], r, counter)
            return None if q[failed] is None else (int(v), q[0], q[1])
    return None


def findmin(X, y, max_rank: int | None = None, counter: Counter | None = None):
    """``(tree, r)``: FIND(S, r) for r = 0, 1, ... up to ``max_rank`` (default n); ``(None, None)``
    if none succeeds (only a sample with one x labelled both ways has no consistent tree).

    FINDMIN(S) calls FIND(S, r) for r = 0, 1, 2, ... until it returns a tree.

    >>> import numpy as np
    >>> X = np.array([[0, 0], [0, 1], [1, 0], [1, 1]])
    >>> findmin(X, np.array([0, 1, 1, 0]))
    ((0, (1, 0, 1), (1, 1, 0)), 2)
    """
    X = np.asarray(X, bool)
    counter = counter if counter is not None else Counter()
    for r in range(X.shape[1] + 1 if max_rank is None else max_rank + 1):
        tree = find(X, y, r, counter)
        if tree is not None:
            return tree, r
    return None, None


def rank(tree) -> int:
    """Ehrenfeucht-Haussler rank of a nested-tuple tree: 0 at a leaf; max(r0, r1) if r0 != r1, else r0 + 1."""
    if not isinstance(tree, tuple):
        return 0
    r0, r1 = rank(tree[1]), rank(tree[2])
    return max(r0, r1) if r0 != r1 else r0 + 1


def sample_rank(X, y) -> int | None:
    """r(S), the least rank of any tree consistent with S, by dynamic programming over informative
    root variables (r(S) = 0 if S is pure, else min over v of the rank rule on r(S_0^v), r(S_1^v));
    independent of FIND, for tests on tiny samples. None if no tree is consistent."""
    X, y = np.asarray(X, bool), np.asarray(y, bool)
    if y.all() or not y.any():
        return 0
    best = None
    ones = X.sum(axis=0)
    for v in np.flatnonzero((ones > 0) & (ones < X.shape[0])):
        r0, r1 = (sample_rank(X[X[:, v] == b], y[X[:, v] == b]) for b in (0, 1))
        if r0 is None or r1 is None:
            continue
        r = max(r0, r1) if r0 != r1 else r0 + 1
        best = r if best is None else min(best, r)
    return best


def predict(tree, X):
    """Labels of the rows ``X`` under a nested-tuple tree."""
    X = np.asarray(X, bool)
    out = np.empty(X.shape[0], int)
    for i, x in enumerate(X):
        t = tree
        while isinstance(t, tuple):
            t = t[2] if x[t[0]] else t[1]
        out[i] = t
    return out
