"""Learners: one protocol (:mod:`~jaxtrees.learners.base`), one module per family, one registry.

The README's learner table lists each registered name and its class (docs/api.md, each module).
The registry sizes a learner for a problem (``learners.get(name, Size(n=..., k=...))``; defaults: the
conformance suite's small problems; the compare study asks for its cells'); that suite runs them all:

>>> names()[:3]
['adaboost-cart', 'adaboost-parities-2', 'adaboost-stumps']

Each registered learner is described (:func:`info`, :func:`describe`: a table for ``jaxtrees list --learners``): its
access, the :class:`Size` fields its factory reads (tests/test_learner_registry.py checks them), its cost, what it is:

>>> about = info("km")
>>> about["access"], about["reads"]
('query', ('k', 'm', 'n', 'theta'))

A user's learner is first class: ``register(name, factory, about=..., cost=...)`` from a study file, :func:`info` and
:func:`describe` show it, and :func:`check` (:mod:`~jaxtrees.learners.conformance`) runs the conformance suite on it.
"""

import warnings

from jaxtrees.core.impurity import BUILTIN as _IMPURITIES
from jaxtrees.learners.base import (ACCESS, Learner, Size, SizingWarning, check_data, coefficient_floor, entry,
                                    fields_read, get, names, register, unregister, warn_sizing)
from jaxtrees.learners.conformance import ConformanceError, check
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


def _depth(name: str, s: Size) -> int:
    """``s.depth``, warning where it is 0 (one leaf: a constant)."""
    if s.depth == 0:
        warn_sizing(name, "depth", s.depth, "grows no split: the tree is one leaf, a constant hypothesis")
    return s.depth


def _coefficient(name: str, field: str, s: Size) -> float:
    """``s.theta`` or ``s.l1``, warning where it is above :func:`coefficient_floor` (k): it may keep no coefficient."""
    value, floor = getattr(s, field), coefficient_floor(s.k)
    if value > floor:
        warn_sizing(name, field, value, f"is above 2^(-k/2) = {floor:.3g} for k = {s.k}: a k-junta may have no "
                    "Fourier coefficient that large (majority of 5: none above 0.375; a bent function: all "
                    "2^(-k/2)), and the learner then keeps none but the constant, a constant hypothesis")
    return value


def _max_rank(name: str, s: Size) -> int:
    """``s.max_rank``, warning where it is below k (a k-junta or depth-k tree may need rank k)."""
    if s.max_rank < s.k:
        warn_sizing(name, "max_rank", s.max_rank, f"is below k = {s.k}: a target of size k (a k-junta, a depth-k "
                    "tree) may have no consistent tree of rank <= max_rank, and FINDMIN then keeps the majority leaf")
    return s.max_rank


# Each factory sizes its learner from a Size: the degree, rank or depth from (n, k, depth), rounds and
# members from rounds; degrees never above n (the conformance data include n = 1). A sizing that may leave
# a learner nothing warns (_depth, _coefficient, _max_rank).
for _name in _IMPURITIES:
    register(f"id3-{_name}", lambda s, name=_name: GreedyTree(GrowthRule(max_depth=_depth(f"id3-{name}", s),
                                                                         impurity=name)))
register("id3-random-ties", lambda s: GreedyTree(GrowthRule(max_depth=_depth("id3-random-ties", s), impurity="gini",
                                                            tie_break="random")))
register("population-entropy", lambda s: PopulationTree(GrowthRule(max_depth=_depth("population-entropy", s))))
register("stump-error", lambda s: Stump(impurity="error"))
register("stump-gini", lambda s: Stump(impurity="gini"))
register("best-first-gini", lambda s: BestFirstTree(GrowthRule(max_depth=min(s.n, 15), impurity="gini"),
                                                    max_leaves=2 ** _depth("best-first-gini", s)))
register("adaboost-stumps", lambda s: AdaBoost(Stump(impurity="error"), rounds=s.rounds))
register("adaboost-parities-2", lambda s: AdaBoost(Parities(degree=min(2, s.n)), rounds=s.rounds))  # seed 004's
register("adaboost-cart", lambda s: AdaBoost(CART16, rounds=max(1, s.rounds // 4)))
register("parities-k", lambda s: Parities(degree=min(s.k, 3, s.n)))
register("random-forest", lambda s: random_forest(members=s.rounds, max_depth=_depth("random-forest", s)))
register("bagging-majority", lambda s: Bagging(GreedyTree(GrowthRule(max_depth=_depth("bagging-majority", s))),
                                               members=s.rounds, vote="majority"))
register("lmn-k", lambda s: LowDegree(degree=min(s.k, s.n), threshold=_coefficient("lmn-k", "theta", s)))
register("lmn-k-biased", lambda s: LowDegree(degree=min(s.k, s.n), threshold=_coefficient("lmn-k-biased", "theta", s),
                                             basis="biased", max_terms=_terms(s)))
register("sparse-k", lambda s: SparseRecovery(degree=min(s.k, s.n), l1=_coefficient("sparse-k", "l1", s),
                                              basis="biased", max_terms=_terms(s)))
register("km", lambda s: KushilevitzMansour(theta=_coefficient("km", "theta", s), budget=(2 * s.n + 1) * s.m,
                                            width=min(4**s.k, KushilevitzMansour(s.theta).frontier)))
register("find-k", lambda s: find(s.k, max_calls=s.max_calls))
register("findmin", lambda s: FindMin(max_rank=_max_rank("findmin", s), max_calls=s.max_calls))
register("sgd", _sgd)


#: What the costs count in.
_UNITS = "n bits, m examples (m / 32 words), K = sum_{j <= k} C(n, j) sets of degree <= k"
_TREE = "2^depth n m / 32 word ops (popcount)"

#: Per built-in learner: (access, the Size fields its factory reads, its cost per fit, what it is), one line each.
ABOUT = {
    "id3-entropy": ("sample", ("depth",), _TREE, "GreedyTree: ID3, entropy gains, level-wise to depth"),
    "id3-gini": ("sample", ("depth",), _TREE, "GreedyTree: CART's Gini gains"),
    "id3-kearns_mansour": ("sample", ("depth",), _TREE, "GreedyTree: Kearns-Mansour's 2 sqrt(q (1 - q)) gains"),
    "id3-error": ("sample", ("depth",), _TREE, "GreedyTree: training-error gains"),
    "id3-random-ties": ("sample", ("depth",), _TREE, "GreedyTree: Gini, a uniformly random feature among ties"),
    "population-entropy": ("population", ("depth",), "2^depth exact means f.means; no sample",
                           "PopulationTree: greedy growth on exact gains"),
    "stump-error": ("sample", (), "2 n m / 32 word ops (popcount)", "Stump: the split of least weighted error"),
    "stump-gini": ("sample", (), "2 n m / 32 word ops (popcount)", "Stump: the split of largest Gini gain"),
    "best-first-gini": ("sample", ("depth", "n"), "2^depth splits of 2 n m / 32 word ops",
                        "BestFirstTree: Gini, the largest-gain leaf first, 2^depth leaves"),
    "adaboost-stumps": ("sample", ("rounds",), "rounds n m multiply-adds", "AdaBoost over error stumps"),
    "adaboost-parities-2": ("sample", ("n", "rounds"), "rounds (n + 1)^2 m multiply-adds",
                            "AdaBoost over parities of degree <= 2 (seed 004)"),
    "adaboost-cart": ("sample", ("rounds",), "~4 rounds n m multiply-adds",
                      "AdaBoost over 16-leaf Gini trees, rounds / 4 rounds"),
    "parities-k": ("sample", ("k", "n"), "~d C(n, d) m multiply-adds, d = min(k, 3)",
                   "Parities: the chi_S, |S| <= min(k, 3), of largest correlation"),
    "random-forest": ("sample", ("depth", "rounds"), "rounds 2^depth n m / 32 word ops",
                      "Bagging: a random forest, sqrt(n) features per node"),
    "bagging-majority": ("sample", ("depth", "rounds"), "rounds 2^depth n m / 32 word ops",
                         "Bagging: ID3 trees on bootstrap samples, majority vote"),
    "lmn-k": ("sample", ("k", "n", "theta"), "K m / 32 word ops (XOR + popcount)",
              "LowDegree (LMN): the coefficients of degree <= k above theta"),
    "lmn-k-biased": ("sample", ("k", "n", "theta"), "K m multiply-adds", "LowDegree (LMN), p-biased, <= 4^k terms"),
    "sparse-k": ("sample", ("k", "l1", "n"), "(m + steps) K^2; ~0.1 s on CPU at K = 299",
                 "SparseRecovery: the Lasso on degree <= k, p-biased"),
    "km": ("query", ("k", "m", "n", "theta"), "queries: (2 n + 1) m membership queries",
           "KushilevitzMansour: heavy coefficients from queries"),
    "find-k": ("sample", ("k", "max_calls"), "O(m (n + 1)^(2 k)), <= max_calls calls",
               "FIND: a consistent tree of rank <= k"),
    "findmin": ("sample", ("k", "max_calls", "max_rank"), "O(m (n + 1)^(2 rank)), <= max_calls calls",
                "FINDMIN: the consistent tree of least rank"),
    "sgd": ("sample", ("lr", "m", "steps", "width"), "steps 32 width (n + 1) multiply-adds",
            "SGD: an MLP, hinge loss, SGD on the m examples"),
}


#: What :func:`info` shows for a user learner's cost or description that :func:`register` was not told.
USER = "(user learner)"


def info(name: str) -> dict:
    """What the registered learner ``name`` is: ``{"name", "access", "reads", "cost", "what"}`` (``reads``: the
    :class:`Size` fields its factory reads, sorted). A user's learner: its access from the learner its factory
    makes at the default Size, the fields that factory reads (recorded), ``register``'s ``cost`` and ``about``."""
    if name in ABOUT:
        access, reads, cost, what = ABOUT[name]
        return {"name": name, "access": access, "reads": tuple(sorted(reads)), "cost": cost, "what": what}
    registered = entry(name)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SizingWarning)
            reads, learner = fields_read(registered.factory)
        access = str(getattr(learner, "access", "(no access)"))
    except Exception as error:  # a description must not fail on a user's factory
        reads, access = (), f"(factory(Size()) raised {type(error).__name__})"
    return {"name": name, "access": access, "reads": reads, "cost": registered.cost or USER,
            "what": registered.about or USER}


def describe() -> str:
    """Every registered learner as an aligned text table: name, access, Size fields read, cost, what."""
    header = ("name", "access", "Size fields read", "cost per fit", "what")
    rows = [(d["name"], d["access"], ", ".join(d["reads"]) or "-", d["cost"], d["what"])
            for d in map(info, names())]
    widths = [max(len(row[i]) for row in [header] + rows) for i in range(len(header) - 1)]
    lines = ["  ".join([c.ljust(w) for c, w in zip(row, widths)] + [row[-1]]) for row in [header] + rows]
    return "\n".join(lines + ["(costs: " + _UNITS + ")"])


__all__ = ["ABOUT", "ACCESS", "AdaBoost", "Bagging", "BestFirstTree", "CART16", "ConformanceError", "FindMin",
           "GreedyTree", "GrowthRule", "KushilevitzMansour", "Learner", "LowDegree", "MAX_DEPTH", "MAX_PATH_DEPTH",
           "Parities", "Path", "PopulationTree", "Size", "SizingWarning", "SparseRecovery", "Stump", "USER", "check",
           "check_data", "coefficient_floor", "describe", "entry", "fields_read", "find", "follow_path", "get", "grow",
           "grow_exact", "info", "names", "random_forest", "register", "unregister", "warn_sizing"]
