"""Learners: one protocol (:mod:`~jaxtrees.learners.base`), one module per family, one registry.

- :mod:`~jaxtrees.learners.growth`: :class:`GrowthRule` and the level-wise loop every tree learner shares;
- :mod:`~jaxtrees.learners.greedy`: :class:`GreedyTree` (ID3 / C4.5 / CART from a sample, weighted or not);
- :mod:`~jaxtrees.learners.population`: :class:`PopulationTree` (exact growth), path mode;
- :mod:`~jaxtrees.learners.best_first`: :class:`BestFirstTree` (grown leaf by leaf to ``max_leaves``;
  ``CART16``, seed 004's CART-16);
- :mod:`~jaxtrees.learners.stumps`: :class:`Stump` (weighted single splits);
- :mod:`~jaxtrees.learners.boosting`: :class:`AdaBoost` (Algorithm 1 over any weighted weak learner);
- :mod:`~jaxtrees.learners.parities`: :class:`Parities` (seed 004's d-parities by exact search);
- :mod:`~jaxtrees.learners.bagging`: :class:`Bagging`, :func:`random_forest` (bootstrap, feature bagging);
- :mod:`~jaxtrees.learners.fourier`: :class:`LowDegree` (LMN: low-degree Fourier coefficients),
  :class:`SparseRecovery` (the Lasso over low-degree characters);
- :mod:`~jaxtrees.learners.kushilevitz_mansour`: :class:`KushilevitzMansour` (heavy coefficients
  from membership queries);
- :mod:`~jaxtrees.learners.rank`: :class:`FindMin` and :func:`find` (Ehrenfeucht-Haussler's FINDMIN and
  FIND(S, r): consistent trees of least / bounded rank; a numpy reference in
  :mod:`~jaxtrees.learners.rank_reference`);
- :mod:`~jaxtrees.learners.sgd`: ``SGD`` (small networks trained by optax; loaded on first use).

The registry names a small configuration of each (``learners.names()``, ``learners.get(name)``);
the conformance suite runs every registered learner.

>>> names()[:3]
['adaboost-cart', 'adaboost-parities', 'adaboost-stumps']
"""

from jaxtrees.core.impurity import BUILTIN as _IMPURITIES
from jaxtrees.learners.base import ACCESS, Learner, check_data, get, names, register
from jaxtrees.learners.best_first import CART16, BestFirstTree
from jaxtrees.learners.boosting import AdaBoost
from jaxtrees.learners.rank import FindMin, find
from jaxtrees.learners.fourier import LowDegree, SparseRecovery
from jaxtrees.learners.greedy import GreedyTree, grow
from jaxtrees.learners.growth import MAX_DEPTH, MAX_PATH_DEPTH, GrowthRule
from jaxtrees.learners.kushilevitz_mansour import KushilevitzMansour
from jaxtrees.learners.parities import Parities
from jaxtrees.learners.bagging import Bagging, random_forest
from jaxtrees.learners.population import Path, PopulationTree, follow_path, grow_exact
from jaxtrees.learners.stumps import Stump


def _sgd():
    import optax

    from jaxtrees.learners import sgd

    config = sgd.TrainConfig(sgd.mlp(16), loss="hinge", optimizer=optax.sgd, steps=40, batch_size=16,
                             eval_every=20, exact_max_n=8, test_size=256)
    return sgd.SGD(config, (("learning_rate", 0.1),))


for _name in _IMPURITIES:
    register(f"id3-{_name}", lambda name=_name: GreedyTree(GrowthRule(max_depth=3, impurity=name)))
register("id3-random-ties", lambda: GreedyTree(GrowthRule(max_depth=3, impurity="gini", tie_break="random")))
register("population-entropy", lambda: PopulationTree(GrowthRule(max_depth=3, impurity="entropy")))
register("stump-error", lambda: Stump(impurity="error"))
register("stump-gini", lambda: Stump(impurity="gini"))
register("adaboost-stumps", lambda: AdaBoost(Stump(impurity="error"), rounds=8))
register("adaboost-parities", lambda: AdaBoost(Parities(degree=1), rounds=8))  # seed 004's d-parities
register("parities-1", lambda: Parities(degree=1))  # degree 1: the conformance data include n = 1
register("random-forest", lambda: random_forest(members=8, max_depth=3))
register("bagging-majority", lambda: Bagging(GreedyTree(GrowthRule(max_depth=2)), members=5, vote="majority",
                                             features_per_member=1))
register("best-first-gini", lambda: BestFirstTree(GrowthRule(max_depth=8, impurity="gini"), max_leaves=5))
register("adaboost-cart", lambda: AdaBoost(BestFirstTree(GrowthRule(max_depth=8, impurity="gini"), max_leaves=4), rounds=4))
register("sgd", _sgd)
register("lmn-1", lambda: LowDegree(degree=1))  # degree 1: the conformance data include n = 1
register("lmn-1-biased", lambda: LowDegree(degree=1, basis="biased", max_terms=2))
register("sparse-1", lambda: SparseRecovery(degree=1))
register("km", lambda: KushilevitzMansour(theta=0.5, budget=4096))
register("find-2", lambda: find(2))
register("findmin-3", lambda: FindMin(max_rank=3))

__all__ = ["ACCESS", "AdaBoost", "Bagging", "BestFirstTree", "CART16", "FindMin", "GreedyTree", "GrowthRule",
           "KushilevitzMansour", "Learner", "LowDegree", "MAX_DEPTH", "MAX_PATH_DEPTH", "Parities", "Path",
           "PopulationTree", "SparseRecovery", "Stump", "check_data", "find", "follow_path", "get", "grow", "grow_exact",
           "names", "random_forest", "register"]
