"""scikit-learn estimators over jaxtrees learners (``pip install "jaxtrees[sklearn]"``): :class:`DecisionTreeClassifier`
(greedy growth), :class:`LowDegreeClassifier` (LMN), :class:`FindMinClassifier` (FINDMIN, the consistent tree of least
rank), :class:`AdaBoostClassifier` (stumps, d-parities or CART-16) and :class:`RandomForestClassifier` (Breiman's).

Features are Boolean: a column enters as the bit ``x > threshold`` (default 0.5; ``fit`` on other values warns once,
:class:`BinarizationWarning`); labels are any two classes. The estimators pass scikit-learn's ``check_estimator``
(tests/test_sklearn_estimator.py), the two ensembles all but its sample-weight equivalence check. ``import jaxtrees``
does not import scikit-learn (``jaxtrees.DecisionTreeClassifier`` loads it on first use); without it, importing this
module raises ModuleNotFoundError naming the extra. The two ensembles live in :mod:`jaxtrees.sklearn_ensembles` and
the estimators' shared base in :mod:`jaxtrees.sklearn_base`; all of them are importable from here.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> X = rng.integers(0, 2, size=(500, 10))
>>> y = X[:, 3] ^ (X[:, 5] & X[:, 7])
>>> clf = DecisionTreeClassifier(impurity="gini", max_depth=3).fit(X, y)
>>> clf.score(X, y)
1.0
>>> sorted(np.flatnonzero(clf.features_used_).tolist())
[3, 5, 7]
>>> clf.predict_proba(X[:2]).round(2).tolist()
[[1.0, 0.0], [1.0, 0.0]]
"""

from __future__ import annotations

import functools

import jax
import numpy as np

# sklearn_base first: without scikit-learn, importing it raises the ModuleNotFoundError that names the extra
from jaxtrees.sklearn_base import BooleanClassifier
from sklearn.utils.validation import check_is_fitted

from jaxtrees.core import bits, checks, sampling
from jaxtrees.hypotheses import node_tree, polynomial
from jaxtrees.hypotheses import tree as tree_lib
from jaxtrees.learners.fourier import LowDegree
from jaxtrees.learners.greedy import grow
from jaxtrees.learners.growth import MAX_DEPTH, GrowthRule
from jaxtrees.learners.rank import MAX_CALLS, FindMin

# re-exported: public path (jaxtrees.sklearn.<name>, as before the split of issue 69)
from jaxtrees.sklearn_base import INSTALL, BinarizationWarning  # noqa: F401
from jaxtrees.sklearn_ensembles import (MAX_PARITY_DEGREE, WEAK_LEARNERS, AdaBoostClassifier,  # noqa: F401
                                        RandomForestClassifier)

_grow = jax.jit(grow)
_leaf = jax.jit(tree_lib.leaf)

#: Upper bound on the bytes of node bitsets at the deepest level when max_depth=None.
MAX_LEVEL_BYTES = 2**30
#: max_depth=None grows at most this many levels (the heap layout holds 2^(D+1) - 1 slots).
NONE_DEPTH = 16


class DecisionTreeClassifier(BooleanClassifier):
    """Top-down impurity-based decision tree on Boolean features (ID3 / C4.5 / CART).

    Parameters mirror :class:`jaxtrees.GrowthRule`; ``random_state`` (an int) seeds the random
    tie-break; ``threshold`` binarizes features (bit = x > threshold). ``max_depth=None`` grows
    until the leaves are pure or a stop rule holds, to at most min(n_features, m - 1, NONE_DEPTH)
    levels (features are not reused on a path, m examples need at most m - 1 splits on a path;
    the heap layout holds 2^(D+1) - 1 slots), and raises ValueError when that many levels would
    not fit in memory. ``fit`` takes ``sample_weight`` (weighted counts; any uniform scale gives the same
    tree, and weights spanning more than EXACT_WEIGHT_RANGE = 2^12 are counted exactly, by label and side).

    After ``fit``: ``tree_`` (a :class:`jaxtrees.Tree` of numpy arrays, heap layout),
    ``classes_``, ``n_features_in_``, ``depth_``, ``n_leaves_``, ``features_used_``.
    """

    def __init__(self, impurity="entropy", max_depth=None, tie_break="lowest", random_state=None,
                 min_samples_split=2, min_samples_leaf=1, min_gain=0.0, threshold=0.5):
        self.impurity = impurity
        self.max_depth = max_depth
        self.tie_break = tie_break
        self.random_state = random_state
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.min_gain = min_gain
        self.threshold = threshold

    def fit(self, X, y, sample_weight=None):
        data = self._fit_data(X, y, sample_weight)
        depth = self.max_depth if self.max_depth is not None else _default_depth(int(bits.count(data.valid)), self.n_features_in_)
        rule = GrowthRule(max_depth=depth, impurity=self.impurity, tie_break=self.tie_break,
                          min_samples_split=self.min_samples_split, min_samples_leaf=self.min_samples_leaf,
                          min_gain=self.min_gain, exact_weights=self._exact_weights)
        self.tree_ = tree_lib.Tree(*(np.asarray(a) for a in _grow(data, rule, self._key())))
        return self

    @property
    def depth_(self) -> int:
        check_is_fitted(self)
        return int(tree_lib.depth(self.tree_))

    @property
    def n_leaves_(self) -> int:
        check_is_fitted(self)
        return int(tree_lib.n_leaves(self.tree_))

    @property
    def features_used_(self) -> np.ndarray:
        check_is_fitted(self)
        return np.asarray(tree_lib.features_used(self.tree_, self.n_features_in_))

    def predict_proba(self, X):
        """``[m, n_classes]``: the (weighted) class frequencies of the leaf each row reaches."""
        x = self._bits(X)
        return self._proba(self.tree_.mean[np.asarray(_leaf(self.tree_, x))])

    def predict(self, X):
        """The class of each row's leaf (its majority label; ties as the tree's labels)."""
        x = self._bits(X)
        return self._classes(self.tree_.label[np.asarray(_leaf(self.tree_, x))])


class LowDegreeClassifier(BooleanClassifier):
    """The LMN low-degree algorithm on Boolean features: h(x) = second class iff
    sum_{|S| <= degree} c_S phi_S(x) < 0, c_S the (weighted) sample means of F phi_S, F = 1 - 2y
    (:class:`jaxtrees.LowDegree`).

    Parameters: ``degree`` (>= 1; at most n_features is used: ``degree_``), ``coef_threshold``
    (keep |c_S| >= it, in [0, 1)), ``max_terms`` (keep the T largest; None: all; at most the
    number of sets is used), ``basis`` (``"uniform"`` or ``"biased"``: the p-biased basis of the
    sample's marginals), ``threshold`` (features enter as bits x > threshold). ``fit`` takes
    ``sample_weight``.

    After ``fit``: ``sets_`` (``int32[K, degree_]``, each S as indices padded with n_features),
    ``coef_`` (``[K]``), ``marginals_`` (the biased basis' p, else None), ``classes_``,
    ``n_features_in_``, ``degree_``.

    >>> rng = np.random.default_rng(0)
    >>> X = rng.integers(0, 2, size=(400, 8))
    >>> y = X[:, 2] ^ X[:, 6]                          # a parity: no single feature helps
    >>> clf = LowDegreeClassifier(degree=2, max_terms=3).fit(X, y)
    >>> clf.score(X, y), clf.sets_[0].tolist()
    (1.0, [2, 6])
    """

    def __init__(self, degree=2, coef_threshold=0.0, max_terms=None, basis="uniform", threshold=0.5):
        self.degree = degree
        self.coef_threshold = coef_threshold
        self.max_terms = max_terms
        self.basis = basis
        self.threshold = threshold

    def fit(self, X, y, sample_weight=None):
        data = self._fit_data(X, y, sample_weight)
        n = self.n_features_in_
        self.degree_ = min(checks.integer("degree", self.degree, low=1), n)
        max_terms = self.max_terms
        if max_terms is not None:
            max_terms = min(checks.integer("max_terms", max_terms, low=1), polynomial.n_subsets(n, self.degree_))
        checks.real("coef_threshold", self.coef_threshold, low=0.0, high=1.0, high_open=True)  # LowDegree's threshold
        learner = LowDegree(degree=self.degree_, threshold=self.coef_threshold, max_terms=max_terms, basis=self.basis)
        h = jax.device_get(jax.jit(learner.fit)(jax.random.key(0), data))
        self.sets_, self.coef_, self.marginals_ = h.sets, h.values, h.p
        return self

    def decision_function(self, X):
        """-P(x): positive where the second class is predicted (P < 0)."""
        x = self._bits(X)
        return -np.asarray(_evaluate(polynomial.Polynomial(self.sets_, self.coef_, self.marginals_), x))

    def predict(self, X):
        return self._classes(self.decision_function(X) > 0)


class FindMinClassifier(BooleanClassifier):
    """Ehrenfeucht-Haussler's FINDMIN on Boolean features: the decision tree of least rank that is
    consistent with the training data (seed 003, Theorem 1), :class:`jaxtrees.learners.FindMin`.

    Rows with the same bits and both labels have no consistent tree, so each distinct row of the
    binarized data takes its (weighted) majority class first (ties: the first class); rows of
    weight 0 are left out. Parameters: ``max_rank`` (None: n_features; ranks above it are not
    tried), ``max_calls`` (FIND's invocations allowed), ``threshold`` (bit = x > threshold). When
    no tree of rank <= max_rank is found within ``max_calls``, the tree is a single leaf of the
    majority class and ``found_`` is False.

    After ``fit``: ``tree_`` (a :class:`jaxtrees.NodeTree` of numpy arrays), ``rank_`` (the rank
    r(S) found, -1 if none), ``found_``, ``calls_`` (FIND's invocations), ``classes_``,
    ``n_features_in_``.

    >>> rng = np.random.default_rng(1)
    >>> X = rng.integers(0, 2, size=(200, 6))
    >>> y = X[:, 0] | (X[:, 2] & X[:, 4])       # a rank-1 function (a decision list)
    >>> clf = FindMinClassifier().fit(X, y)
    >>> clf.rank_, clf.score(X, y)
    (1, 1.0)
    """

    def __init__(self, max_rank=None, max_calls=MAX_CALLS, threshold=0.5):
        self.max_rank = max_rank
        self.max_calls = max_calls
        self.threshold = threshold

    def fit(self, X, y, sample_weight=None):
        data = self._fit_data(X, y, sample_weight)
        n = self.n_features_in_
        max_rank = n if self.max_rank is None else checks.integer("max_rank", self.max_rank, low=0)
        max_calls = checks.integer("max_calls", self.max_calls, low=1, high=2**31 - 1)
        m = int(bits.count(data.valid))
        x, second = np.asarray(bits.unpack(data.X, m)).T, np.asarray(bits.unpack(data.y, m))
        w = np.ones(m) if data.weight is None else np.asarray(data.weight, np.float64)[:m]
        keep = w > 0
        rows, inverse = np.unique(x[keep], axis=0, return_inverse=True)
        votes = np.bincount(inverse.ravel(), weights=np.where(second[keep], 1.0, -1.0) * w[keep], minlength=len(rows))
        table = sampling.from_arrays(rows, votes > 0)
        search = jax.device_get(_findmin(FindMin(max_rank=min(max_rank, n), max_calls=max_calls), table))
        self.tree_ = jax.tree.map(np.asarray, search.tree)
        self.rank_, self.found_, self.calls_ = int(search.rank), bool(search.found), int(search.calls)
        if not self.found_:  # the majority class of the (weighted) data
            leaf = np.asarray(self.tree_.label).copy()
            leaf[0] = int(np.sum(w * second) > np.sum(w * ~second))
            self.tree_ = self.tree_._replace(label=leaf)
        return self

    def predict_proba(self, X):
        """``[m, n_classes]``: 0 / 1 by the consistent tree (its leaves are pure on the distinct rows)."""
        return self._proba(self._labels(X))

    def predict(self, X):
        return self._classes(self._labels(X))

    def _labels(self, X):
        x = self._bits(X)
        return np.asarray(_node_predict(self.tree_, x))


@functools.partial(jax.jit, static_argnums=0)
def _findmin(learner, data):
    return learner.search(data)


_node_predict = jax.jit(node_tree.predict)


@jax.jit
def _evaluate(h, x):
    return h.evaluate(x)


def _default_depth(m, n):
    def fits(depth):  # node bitsets (and their label-masked copies) at the deepest counted level
        return depth <= MAX_DEPTH and 2 ** max(depth - 1, 0) * bits.n_words(m) * 8 <= MAX_LEVEL_BYTES

    depth = min(n, max(m - 1, 0), NONE_DEPTH)
    if not fits(depth):
        deepest = max(d for d in range(depth + 1) if fits(d))
        raise ValueError(f"max_depth=None resolves to {depth} levels, too deep for {m} examples; "
                         f"pass max_depth in [0, {deepest}]")
    return depth
