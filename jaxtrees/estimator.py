"""A scikit-learn-style estimator over the engine, for one binary data set.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> X = rng.integers(0, 2, size=(500, 10))
>>> y = X[:, 3] ^ (X[:, 5] & X[:, 7])
>>> clf = DecisionTreeClassifier(impurity="gini", max_depth=3).fit(X, y)
>>> clf.score(X, y)
1.0
>>> sorted(np.flatnonzero(clf.features_used_).tolist())
[3, 5, 7]
"""

from __future__ import annotations

import inspect

import jax
import numpy as np

from jaxtrees.core import bits, sampling
from jaxtrees.hypotheses import tree as tree_lib
from jaxtrees.learners.greedy import grow
from jaxtrees.learners.growth import MAX_DEPTH, GrowthRule

_grow = jax.jit(grow)
_predict = jax.jit(tree_lib.predict)

#: Upper bound on the bytes of node bitsets at the deepest level when max_depth=None.
MAX_LEVEL_BYTES = 2**30


class DecisionTreeClassifier:
    """Top-down impurity-based decision tree on binary features (ID3 / C4.5 / CART).

    Parameters mirror :class:`jaxtrees.GrowthRule`; ``random_state`` (an int) seeds the random
    tie-break. ``max_depth=None`` grows to at most n_features levels (features are not reused),
    and raises ValueError when that many levels would not fit in memory.

    After ``fit``: ``tree_`` (a :class:`jaxtrees.Tree` of numpy arrays, heap layout),
    ``classes_``, ``n_features_in_``, ``depth_``, ``n_leaves_``, ``features_used_``.
    """

    def __init__(self, impurity="entropy", max_depth=None, tie_break="lowest", random_state=None,
                 min_samples_split=2, min_samples_leaf=1, min_gain=0.0):
        self.impurity = impurity
        self.max_depth = max_depth
        self.tie_break = tie_break
        self.random_state = random_state
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.min_gain = min_gain

    def get_params(self, deep=True):
        del deep
        return {name: getattr(self, name) for name in inspect.signature(type(self).__init__).parameters if name != "self"}

    def set_params(self, **params):
        valid = self.get_params()
        for name, value in params.items():
            if name not in valid:
                raise ValueError(f"unknown parameter {name!r}; parameters are {sorted(valid)}")
            setattr(self, name, value)
        return self

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    def fit(self, X, y):
        X = np.asarray(X)
        y = np.asarray(y)
        if y.ndim != 1:
            raise ValueError(f"y must be 1-d, got shape {y.shape}")
        classes = np.unique(y)
        if classes.size > 2:
            raise ValueError(f"y must have at most 2 classes, got {classes.size}: {classes[:5].tolist()}...")
        y01 = (y == classes[-1]) if classes.size == 2 else np.zeros(y.shape, bool)
        sample = sampling.from_arrays(X, y01)
        depth = self.max_depth if self.max_depth is not None else self._default_depth(*X.shape)
        rule = GrowthRule(max_depth=depth, impurity=self.impurity, tie_break=self.tie_break,
                          min_samples_split=self.min_samples_split,
                          min_samples_leaf=self.min_samples_leaf, min_gain=self.min_gain)
        seed = 0 if self.random_state is None else self.random_state
        tree = _grow(sample, rule, jax.random.key(seed))
        self.tree_ = tree_lib.Tree(*(np.asarray(a) for a in tree))
        self.classes_ = classes
        self.n_features_in_ = X.shape[1]
        return self

    @property
    def depth_(self) -> int:
        return int(tree_lib.depth(self.tree_))

    @property
    def n_leaves_(self) -> int:
        return int(tree_lib.n_leaves(self.tree_))

    @property
    def features_used_(self) -> np.ndarray:
        return np.asarray(tree_lib.features_used(self.tree_, self.n_features_in_))

    def predict(self, X):
        if not hasattr(self, "tree_"):
            raise ValueError("this DecisionTreeClassifier is not fitted yet; call fit(X, y) first")
        X = np.asarray(X)
        if X.ndim != 2 or X.shape[1] != self.n_features_in_:
            raise ValueError(f"X must have shape (m, {self.n_features_in_}), got {X.shape}")
        if not np.isin(X, (0, 1)).all():
            raise ValueError("X must be binary: every entry 0 or 1 (bool or numeric)")
        labels = np.asarray(_predict(self.tree_, X.astype(np.int32)))
        return self.classes_[np.minimum(labels, self.classes_.size - 1)]

    def score(self, X, y):
        """Accuracy on (X, y)."""
        return float(np.mean(self.predict(X) == np.asarray(y)))

    @staticmethod
    def _default_depth(m, n):
        def fits(depth):  # node bitsets (and their label-masked copies) at the deepest counted level
            return depth <= MAX_DEPTH and 2 ** max(depth - 1, 0) * bits.n_words(m) * 8 <= MAX_LEVEL_BYTES

        if not fits(n):
            deepest = max(d for d in range(n + 1) if fits(d))
            raise ValueError(f"max_depth=None resolves to n_features = {n}, too deep for {m} examples; "
                             f"pass max_depth in [0, {deepest}]")
        return n
