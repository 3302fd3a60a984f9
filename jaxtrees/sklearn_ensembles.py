"""scikit-learn estimators over jaxtrees' ensembles: :class:`AdaBoostClassifier` and :class:`RandomForestClassifier`.

They share :class:`~jaxtrees.sklearn_base.BooleanClassifier` with the single-model estimators of
:mod:`jaxtrees.sklearn`, which re-exports them (``jaxtrees.AdaBoostClassifier`` and ``jaxtrees.RandomForestClassifier``
load them on first use).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from jaxtrees.core import checks
from jaxtrees.hypotheses.ensemble import Forest
from jaxtrees.learners.bagging import random_forest
from jaxtrees.learners.best_first import CART16
from jaxtrees.learners.boosting import AdaBoost
from jaxtrees.learners.greedy import GreedyTree
from jaxtrees.learners.parities import Parities
from jaxtrees.learners.stumps import Stump
from jaxtrees.sklearn_base import BooleanClassifier

#: AdaBoostClassifier's weak learners (seed 004's three).
WEAK_LEARNERS = ("stumps", "parities", "cart16")
#: The largest parity degree AdaBoostClassifier searches (the seed's d <= 3; d = 3 costs ~ n^3 m per round).
MAX_PARITY_DEGREE = 3


class AdaBoostClassifier(BooleanClassifier):
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


class RandomForestClassifier(BooleanClassifier):
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


@jax.jit
def _margin(H, x):
    """sum_t alpha_t (2 h_t(x) - 1), summed as :meth:`Ensemble.predict` sums it."""
    return jnp.sum(H.votes(x), axis=-1)


_forest_probability = jax.jit(Forest.probability)

