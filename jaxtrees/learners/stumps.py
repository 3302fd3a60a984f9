"""Decision stumps: the best single split of a (weighted) data set, AdaBoost's weak learner.

A stump is a depth-1 :class:`~jaxtrees.hypotheses.tree.Tree` (so it predicts on packed bits and
has an exact error like any tree), grown by the weighted counting of
:mod:`jaxtrees.learners.greedy` with any impurity. ``impurity="error"`` (G(q) = 2 min(q, 1 - q))
picks the split of least weighted training error, as AdaBoost's stumps do; entropy and Gini
pick by purity gain.

>>> import jax, jax.numpy as jnp
>>> from jaxtrees.core import sampling
>>> X = jnp.array([[0, 1], [1, 1], [1, 0], [0, 0]])
>>> data = sampling.with_weights(sampling.from_arrays(X, [0, 1, 1, 0]), [1.0, 1.0, 1.0, 5.0])
>>> h = Stump(impurity="error").fit(jax.random.key(0), data)
>>> int(h.feature[0]), h.predict(X).tolist()
(0, [0, 1, 1, 0])
"""

from __future__ import annotations

import dataclasses

import jax

from jaxtrees.core.sampling import Data
from jaxtrees.hypotheses.tree import Tree
from jaxtrees.learners.base import check_data
from jaxtrees.learners.greedy import grow, reweighted_growth
from jaxtrees.learners.growth import GrowthRule


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class Stump:
    """The learner: ``fit(key, data) -> Tree`` of depth <= 1 (a leaf if no split gains).

    ``impurity`` as in :class:`~jaxtrees.learners.growth.GrowthRule` (plus ``"error"``);
    ``tie_break`` ``"lowest"`` or ``"random"`` (from the fit key).
    """

    impurity: object = "error"
    tie_break: str = "lowest"
    access = "sample"

    def __post_init__(self):
        self.rule  # validate the fields now, not at the first fit

    @property
    def rule(self) -> GrowthRule:
        return GrowthRule(max_depth=1, impurity=self.impurity, tie_break=self.tie_break)

    def fit(self, key, data: Data) -> Tree:
        check_data(data)
        return grow(data, self.rule, key)

    def reweighted(self, data: Data):
        """``fit(key, weight) -> Tree`` on ``data`` under many weightings (:func:`~jaxtrees.learners.base.reweighted`)."""
        return reweighted_growth(data, self.rule)
