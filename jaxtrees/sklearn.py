"""scikit-learn estimators over jaxtrees learners (``pip install "jaxtrees[sklearn]"``): :class:`DecisionTreeClassifier`
(greedy growth), :class:`LowDegreeClassifier` (LMN), :class:`FindMinClassifier` (FINDMIN, the consistent tree of least
rank), :class:`AdaBoostClassifier` (stumps, d-parities or CART-16) and :class:`RandomForestClassifier` (Breiman's).

Features are Boolean: a column enters as the bit ``x > threshold`` (default 0.5; ``fit`` on other values warns once,
:class:`BinarizationWarning`); labels are any two classes. The estimators pass scikit-learn's ``check_estimator``
(tests/test_sklearn_estimator.py), the two ensembles all but its sample-weight equivalence check. ``import jaxtrees``
does not import scikit-learn (``jaxtrees.DecisionTreeClassifier`` loads it on first use); without it, importing this
module raises ModuleNotFoundError naming the extra.

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

import dataclasses
import functools
import warnings

import jax
import jax.numpy as jnp
import numpy as np

#: The pip extra that installs scikit-learn for this module (pyproject.toml's ``sklearn`` extra).
INSTALL = 'pip install "jaxtrees[sklearn]"'

try:
    from sklearn.base import BaseEstimator, ClassifierMixin
    from sklearn.exceptions import DataConversionWarning
    from sklearn.utils.multiclass import check_classification_targets
    from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data
except ModuleNotFoundError as e:  # the same exception, saying which extra installs it
    if e.name is None or e.name.split(".")[0] != "sklearn":
        raise
    raise ModuleNotFoundError(f"jaxtrees' scikit-learn estimators need scikit-learn, which is not installed: "
                              f"{INSTALL} (or pip install scikit-learn)", name="sklearn") from e

from jaxtrees.core import bits, checks, sampling
from jaxtrees.hypotheses import node_tree, polynomial
from jaxtrees.hypotheses import tree as tree_lib
from jaxtrees.hypotheses.ensemble import Forest
from jaxtrees.learners.bagging import random_forest
from jaxtrees.learners.best_first import CART16
from jaxtrees.learners.boosting import AdaBoost
from jaxtrees.learners.fourier import LowDegree
from jaxtrees.learners.greedy import GreedyTree, grow
from jaxtrees.learners.growth import EXACT_WEIGHT_RANGE, MAX_DEPTH, GrowthRule
from jaxtrees.learners.parities import Parities
from jaxtrees.learners.rank import MAX_CALLS, FindMin
from jaxtrees.learners.stumps import Stump

_grow = jax.jit(grow)
_leaf = jax.jit(tree_lib.leaf)

#: Upper bound on the bytes of node bitsets at the deepest level when max_depth=None.
MAX_LEVEL_BYTES = 2**30
#: max_depth=None grows at most this many levels (the heap layout holds 2^(D+1) - 1 slots).
NONE_DEPTH = 16
#: AdaBoostClassifier's weak learners (seed 004's three).
WEAK_LEARNERS = ("stumps", "parities", "cart16")
#: The largest parity degree AdaBoostClassifier searches (the seed's d <= 3; d = 3 costs ~ n^3 m per round).
MAX_PARITY_DEGREE = 3


class BinarizationWarning(DataConversionWarning):
    """``fit`` got features other than 0 and 1 and binarized them as x > ``threshold``."""


class _BooleanClassifier(ClassifierMixin, BaseEstimator):
    """What the estimators share: two classes, features binarized as bits x > ``self.threshold``."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags

    def _fit_data(self, X, y, sample_weight) -> sampling.Data:
        """Validate, set ``classes_``, and pack (bits, label = second class, weights)."""
        X, y = validate_data(self, X, y, dtype=np.float64)
        check_classification_targets(y)
        threshold = checks.real("threshold", self.threshold)
        _warn_unless_binary(X, threshold)
        classes, y_index = np.unique(y, return_inverse=True)
        if classes.size > 2:
            raise ValueError(f"Only binary classification is supported: y has {classes.size} classes "
                             f"({classes[:5].tolist()}...)")
        data = sampling.from_arrays(X > threshold, y_index == 1)
        self._exact_weights = False
        if sample_weight is not None:
            w = _check_sample_weight(sample_weight, X, dtype=np.float64)
            positive = w[w > 0]
            self._exact_weights = bool(positive.size and positive.max() > EXACT_WEIGHT_RANGE * positive.min())
            data = sampling.with_weights(data, w)
        self.classes_ = classes
        return data

    def _bits(self, X):
        """Fitted check, validation, and the bits of X."""
        check_is_fitted(self)
        return validate_data(self, X, dtype=np.float64, reset=False) > self.threshold

    def _key(self):
        """The learner's key from ``random_state`` (an int >= 0; None is seed 0)."""
        seed = 0 if self.random_state is None else checks.integer("random_state", self.random_state, low=0)
        return jax.random.key(seed)

    def _proba(self, q):
        """``[m, n_classes]`` from q = Pr[second class] (one column of ones when one class was seen)."""
        q = np.asarray(q, np.float64)
        return np.stack([1 - q, q], axis=1) if self.classes_.size == 2 else np.ones((q.shape[0], 1))

    def _classes(self, labels):
        """The classes of 0/1 labels (1: the second class; the only class when one was seen)."""
        return self.classes_[np.minimum(np.asarray(labels, int), self.classes_.size - 1)]


class DecisionTreeClassifier(_BooleanClassifier):
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


class LowDegreeClassifier(_BooleanClassifier):
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


class FindMinClassifier(_BooleanClassifier):
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


class AdaBoostClassifier(_BooleanClassifier):
    """AdaBoost (seed 004, Algorithm 1) on Boolean features, :class:`jaxtrees.learners.AdaBoost`:
    H(x) = second class iff sum_t alpha_t (2 h_t(x) - 1) > 0.

    Parameters: ``weak_learner`` (``"stumps"``: the stump of least weighted error;
    ``"parities"``: the character chi_S with |S| <= ``degree`` or its negation of largest weighted
    correlation, by exhaustive search, :class:`jaxtrees.learners.Parities`; ``"cart16"``: Gini
    trees grown best-first to 16 leaves, :data:`jaxtrees.learners.CART16`), ``n_estimators``
    (the rounds T >= 1), ``degree`` (in [1, 3], read by ``"parities"``; at most n_features is
    used: ``degree_``), ``random_state`` (an int >= 0 or None: seed 0; it seeds the rounds' keys,
    which none of the three weak learners reads: they are deterministic), ``threshold``
    (bit = x > threshold). ``fit`` takes ``sample_weight``: D_1 proportional to it. A round whose
    h_t labels every training example correctly ends boosting (later rounds get alpha = 0).

    After ``fit``: ``ensemble_`` (a :class:`jaxtrees.hypotheses.ensemble.Ensemble` of numpy
    arrays, its ``rounds`` AdaBoost's record), ``alphas_`` (alpha_t), ``gammas_`` (the edges
    gamma_t = 1 - 2 eps_t), ``train_errors_`` (the weighted training error of H after t rounds),
    ``bounds_`` (prod_{s <= t} 2 sqrt(eps_s (1 - eps_s)), a bound on it), ``classes_``,
    ``n_features_in_``, ``degree_``.

    ``decision_function`` is the normalized vote sum_t alpha_t (2 h_t(x) - 1) / sum_t |alpha_t| in
    [-1, 1] (0 when every alpha_t is 0), and ``predict_proba`` gives the second class
    (1 + decision) / 2, the alpha-weighted fraction of the votes for it: a ranking score, not a
    calibrated probability.

    >>> rng = np.random.default_rng(0)
    >>> X = rng.integers(0, 2, size=(400, 6))
    >>> y = X[:, 1] ^ X[:, 4]                          # XOR: no stump helps, one 2-parity is y
    >>> clf = AdaBoostClassifier(weak_learner="parities", n_estimators=3, degree=2).fit(X, y)
    >>> clf.score(X, y), clf.alphas_.tolist()        # a perfect first round ends boosting
    (1.0, [1.0, 0.0, 0.0])
    >>> AdaBoostClassifier(weak_learner="stumps", n_estimators=3).fit(X, y).score(X, y) < 0.7
    True

    Passes ``check_estimator`` but ``check_sample_weight_equivalence_on_dense_data`` (float32 rounding).
    """

    def __init__(self, weak_learner="stumps", n_estimators=50, degree=2, random_state=None, threshold=0.5):
        self.weak_learner = weak_learner
        self.n_estimators = n_estimators
        self.degree = degree
        self.random_state = random_state
        self.threshold = threshold

    def fit(self, X, y, sample_weight=None):
        data = self._fit_data(X, y, sample_weight)
        checks.choice("weak_learner", self.weak_learner, WEAK_LEARNERS)
        rounds = checks.integer("n_estimators", self.n_estimators, low=1)
        self.degree_ = min(checks.integer("degree", self.degree, low=1, high=MAX_PARITY_DEGREE), self.n_features_in_)
        weak = {"stumps": Stump(impurity="error"), "parities": Parities(degree=self.degree_), "cart16": CART16}
        H = jax.device_get(AdaBoost(weak[self.weak_learner], rounds=rounds).fit(self._key(), data))
        self.ensemble_ = H
        self.alphas_, self.gammas_ = H.weights, H.rounds.gamma
        self.train_errors_, self.bounds_ = H.rounds.train_error, H.rounds.bound
        return self

    def decision_function(self, X):
        """The normalized vote in [-1, 1]: positive where the second class is predicted."""
        x = self._bits(X)
        margin = np.asarray(_margin(self.ensemble_, x), np.float64)
        total = np.sum(np.abs(self.alphas_), dtype=np.float64)  # |margin| <= total but for float32 rounding
        return np.clip(margin / total, -1.0, 1.0) if total > 0 else np.zeros_like(margin)

    def predict_proba(self, X):
        """``[m, n_classes]``: the alpha-weighted fraction of the votes for each class."""
        return self._proba((1 + self.decision_function(X)) / 2)

    def predict(self, X):
        return self._classes(self.decision_function(X) > 0)


class RandomForestClassifier(_BooleanClassifier):
    """Breiman's random forest on Boolean features, :func:`jaxtrees.learners.random_forest`:
    ``n_estimators`` trees (``impurity``, depth <= ``max_depth``), each grown on a bootstrap
    sample choosing every split among ``max_features`` random features (``"sqrt"``, ``"log2"``,
    an int >= 1, or None: all), as scikit-learn's ``RandomForestClassifier``.

    ``predict_proba`` is the forest's vote: the mean over the trees of the training frequency of
    the second class in the leaf x reaches (scikit-learn's rule), and ``predict`` the second class
    where it is > 1/2. ``random_state`` (an int >= 0, or None: seed 0) seeds the bootstraps and the
    feature draws; ``threshold`` binarizes features (bit = x > threshold). ``fit`` takes
    ``sample_weight``: each tree counts example i with weight (times drawn) x sample_weight[i], as
    scikit-learn does; integer weights are therefore not the same as repeated rows (the bootstrap
    draws from the distinct rows).

    After ``fit``: ``forest_`` (a :class:`jaxtrees.hypotheses.ensemble.Forest` of numpy arrays,
    its trees in heap layout with a leading axis of ``n_estimators``), ``oob_error_`` (the
    out-of-bag error; NaN when every example was drawn by every tree), ``classes_``,
    ``n_features_in_``.

    >>> rng = np.random.default_rng(0)
    >>> X = rng.integers(0, 2, size=(800, 12))
    >>> y = (X[:, 0] & X[:, 3]) | X[:, 7]                 # a 3-junta
    >>> clf = RandomForestClassifier(n_estimators=20, max_depth=6, random_state=0).fit(X[:400], y[:400])
    >>> clf.score(X[400:], y[400:]), clf.forest_.members.feature.shape
    (1.0, (20, 127))

    Passes ``check_estimator`` but ``check_sample_weight_equivalence_on_dense_data`` (the bootstrap draws rows, so
    repeated rows are not one weighted row).
    """

    def __init__(self, n_estimators=100, max_depth=10, max_features="sqrt", impurity="gini", random_state=None,
                 threshold=0.5):
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.max_features = max_features
        self.impurity = impurity
        self.random_state = random_state
        self.threshold = threshold

    def fit(self, X, y, sample_weight=None):
        data = self._fit_data(X, y, sample_weight)
        members = checks.integer("n_estimators", self.n_estimators, low=1)
        learner = random_forest(members=members, max_depth=self.max_depth, max_features=self.max_features,
                                impurity=self.impurity)
        if self._exact_weights:
            learner = dataclasses.replace(learner, base=GreedyTree(dataclasses.replace(learner.base.rule,
                                                                                      exact_weights=True)))
        self.forest_ = jax.device_get(learner.fit(self._key(), data))
        self.oob_error_ = float(self.forest_.oob.error)
        return self

    def predict_proba(self, X):
        """``[m, n_classes]``: the trees' mean leaf frequencies."""
        return self._proba(self._vote(X))

    def predict(self, X):
        return self._classes(self._vote(X) > 0.5)

    def _vote(self, X):
        x = self._bits(X)
        return np.asarray(_forest_probability(self.forest_, x))


@functools.partial(jax.jit, static_argnums=0)
def _findmin(learner, data):
    return learner.search(data)


_node_predict = jax.jit(node_tree.predict)


@jax.jit
def _evaluate(h, x):
    return h.evaluate(x)


@jax.jit
def _margin(H, x):
    """sum_t alpha_t (2 h_t(x) - 1), summed as :meth:`Ensemble.predict` sums it."""
    return jnp.sum(H.votes(x), axis=-1)


_forest_probability = jax.jit(Forest.probability)


def _warn_unless_binary(X, threshold):
    """One :class:`BinarizationWarning` (pointing at the caller of ``fit``) when X holds a value other than 0 and 1."""
    other = (X != 0) & (X != 1)
    if other.any():
        example = X[other].flat[0]
        warnings.warn(f"X has values other than 0 and 1 ({int(other.sum())} of {X.size}, e.g. {example:g}): each "
                      f"feature enters as the bit x > threshold={threshold:g}; binarize X yourself or pass threshold "
                      f"to choose the cut (warnings.filterwarnings('ignore', category=jaxtrees.sklearn."
                      f"BinarizationWarning) silences this)", BinarizationWarning, stacklevel=4)


def _default_depth(m, n):
    def fits(depth):  # node bitsets (and their label-masked copies) at the deepest counted level
        return depth <= MAX_DEPTH and 2 ** max(depth - 1, 0) * bits.n_words(m) * 8 <= MAX_LEVEL_BYTES

    depth = min(n, max(m - 1, 0), NONE_DEPTH)
    if not fits(depth):
        deepest = max(d for d in range(depth + 1) if fits(d))
        raise ValueError(f"max_depth=None resolves to {depth} levels, too deep for {m} examples; "
                         f"pass max_depth in [0, {deepest}]")
    return depth
