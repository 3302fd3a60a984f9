"""Learners: one protocol (:mod:`~jaxtrees.learners.base`), one module per family, one registry.

The README's learner table lists each registered name and its class (docs/api.md, each module).
The registry sizes a learner for a problem (``learners.get(name, Size(n=..., k=...))``; defaults: the
conformance suite's small problems; the compare study asks for its cells'); that suite runs them all:

>>> names()[:3]
['adaboost-cart', 'adaboost-parities-2', 'adaboost-stumps']
"""

from jaxtrees.core.impurity import BUILTIN as _IMPURITIES
from jaxtrees.learners.base import ACCESS, Learner, Size, check_data, get, names, register
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


def _sgd(s: Size):
    import optax

    from jaxtrees.learners import sgd

    config = sgd.TrainConfig(sgd.mlp(s.width), loss="hinge", optimizer=optax.sgd, steps=s.steps, batch_size=32,
                             eval_every=s.steps, mode="fixed", m=s.m, exact_max_n=0, test_size=32)
    return sgd.SGD(config, (("learning_rate", s.lr),))


def _terms(s: Size) -> int:
    """At most 4^k coefficients (a depth-k tree has at most 4^k), and no more than there are sets."""
    from jaxtrees.hypotheses.polynomial import n_subsets

    return min(4**s.k, n_subsets(s.n, s.k))


# Each factory sizes its learner from a Size: the degree, rank or depth from (n, k, depth), rounds and
# members from rounds; degrees never above n (the conformance data include n = 1).
for _name in _IMPURITIES:
    register(f"id3-{_name}", lambda s, name=_name: GreedyTree(GrowthRule(max_depth=s.depth, impurity=name)))
register("id3-random-ties", lambda s: GreedyTree(GrowthRule(max_depth=s.depth, impurity="gini", tie_break="random")))
register("population-entropy", lambda s: PopulationTree(GrowthRule(max_depth=s.depth)))
register("stump-error", lambda s: Stump(impurity="error"))
register("stump-gini", lambda s: Stump(impurity="gini"))
register("best-first-gini", lambda s: BestFirstTree(GrowthRule(max_depth=min(s.n, 15), impurity="gini"),
                                                    max_leaves=2**s.depth))
register("adaboost-stumps", lambda s: AdaBoost(Stump(impurity="error"), rounds=s.rounds))
register("adaboost-parities-2", lambda s: AdaBoost(Parities(degree=min(2, s.n)), rounds=s.rounds))  # seed 004's
register("adaboost-cart", lambda s: AdaBoost(CART16, rounds=max(1, s.rounds // 4)))
register("parities-k", lambda s: Parities(degree=min(s.k, 3, s.n)))
register("random-forest", lambda s: random_forest(members=s.rounds, max_depth=s.depth))
register("bagging-majority", lambda s: Bagging(GreedyTree(GrowthRule(max_depth=s.depth)), members=s.rounds,
                                               vote="majority"))
register("lmn-k", lambda s: LowDegree(degree=min(s.k, s.n), threshold=s.theta))
register("lmn-k-biased", lambda s: LowDegree(degree=min(s.k, s.n), threshold=s.theta, basis="biased",
                                             max_terms=_terms(s)))
register("sparse-k", lambda s: SparseRecovery(degree=min(s.k, s.n), l1=s.l1, basis="biased", max_terms=_terms(s)))
register("km", lambda s: KushilevitzMansour(theta=s.theta, budget=(2 * s.n + 1) * s.m,
                                            width=min(4**s.k, KushilevitzMansour(s.theta).frontier)))
register("find-k", lambda s: find(s.k, max_calls=s.max_calls))
register("findmin", lambda s: FindMin(max_rank=s.max_rank, max_calls=s.max_calls))
register("sgd", _sgd)

__all__ = ["ACCESS", "AdaBoost", "Bagging", "BestFirstTree", "CART16", "FindMin", "GreedyTree", "GrowthRule",
           "KushilevitzMansour", "Learner", "LowDegree", "MAX_DEPTH", "MAX_PATH_DEPTH", "Parities", "Path",
           "PopulationTree", "Size", "SparseRecovery", "Stump", "check_data", "find", "follow_path", "get", "grow", "grow_exact",
           "names", "random_forest", "register"]
