"""jaxtrees: Monte Carlo studies of greedy decision-tree learning on product distributions.

One trial is a pure JAX function of a key: draw marginals p, a target f, a packed sample, grow a
tree level-wise, score it. Batch trials with ``jax.vmap`` and compile with ``jax.jit``:

>>> import jax, jaxtrees as jt
>>> rule = jt.GrowthRule(max_depth=4, impurity="entropy")
>>> def trial(key):
...     kp, kf, ks = jax.random.split(key, 3)
...     p = jt.smoothed(c=0.1).marginals(kp, 32)
...     f = jt.random_junta(kf, n=32, k=4)
...     tree = jt.grow(jt.draw(ks, p, f, m=512), rule)
...     return jt.sample_error(tree, jt.draw(jax.random.fold_in(ks, 1), p, f, m=4096))
>>> errors = jax.jit(jax.vmap(trial))(jax.random.split(jax.random.key(0), 64))
>>> errors.shape
(64,)

The facade re-exports core, hypotheses, fourier, targets, problems and learners; the
gradient-descent learner (``sgd``: optax), the data sets, the experiments (matplotlib) and the
scikit-learn estimators (``DecisionTreeClassifier`` and the others of :mod:`jaxtrees.sklearn`) load
on first use.
"""

import importlib

from jaxtrees import fourier, hypotheses, learners, problems, targets
from jaxtrees.core import bits, distributions, impurity, prng, sampling
from jaxtrees.core.censored import Censored
from jaxtrees.core.distributions import alpha_c, marginals, product, smoothed, uniform
from jaxtrees.core.impurity import Impurity
from jaxtrees.core.sampling import Data, draw, from_arrays, packed_bernoulli, prefix, quantize, with_weights
from jaxtrees.hypotheses import Ensemble, Forest, Hypothesis, NodeTree, Tree, sample_error
from jaxtrees.hypotheses.polynomial import Polynomial
from jaxtrees.hypotheses.tree import (depth, error_by_depth, exact_error, features_used, n_leaves, predict,
                                      predict_bits, truncate)
from jaxtrees.learners import (AdaBoost, Bagging, BestFirstTree, FindMin, GreedyTree, GrowthRule, KushilevitzMansour, Learner,
                               LowDegree, Parities, Path, PopulationTree, SparseRecovery, Stump, follow_path, grow,
                               find, grow_exact, random_forest)
from jaxtrees.problems import DataSet, Population, Queries, Synthetic, data_set, evaluate, fit_and_evaluate
from jaxtrees.targets import (Target, addressing, agnostic_addressing, code_distance, coded_addressing, decision_tree,
                              from_table, junta, nearby_junta, parity, random_code, random_decision_list,
                              random_function, random_junta, random_parity, random_rank_tree, random_tree, support_mask)

__version__ = "0.1.0"

#: Loaded on first access (PEP 562): ``import jaxtrees`` stays free of optax and matplotlib.
_LAZY = {
    "sgd": ("jaxtrees.learners.sgd", None), "SGD": ("jaxtrees.learners.sgd", "SGD"),
    "TrainConfig": ("jaxtrees.learners.sgd", "TrainConfig"), "mlp": ("jaxtrees.learners.sgd", "mlp"),
    "train": ("jaxtrees.learners.sgd", "train"), "train_many": ("jaxtrees.learners.sgd", "train_many"),
    "train_on": ("jaxtrees.learners.sgd", "train_on"),
    "datasets": ("jaxtrees.datasets", None), "experiments": ("jaxtrees.experiments", None),
    "runner": ("jaxtrees.experiments.run.runner", None),
    "studies": ("jaxtrees.experiments.studies", None), "summary": ("jaxtrees.experiments.report.summary", None),
    "Study": ("jaxtrees.experiments.study", "Study"), "Axis": ("jaxtrees.experiments.study", "Axis"),
    "Compile": ("jaxtrees.experiments.study", "Compile"), "Checks": ("jaxtrees.experiments.study", "Checks"),
    "run": ("jaxtrees.experiments.api", "run"), "figure": ("jaxtrees.experiments.report.figure_spec", "figure"),
    "trials": ("jaxtrees.experiments.study.trials", None),
    "trial_keys": ("jaxtrees.experiments.study.trials", "trial_keys"),
    "sample_sizes": ("jaxtrees.experiments.study.trials", "sample_sizes"),
    "learn_on_prefixes": ("jaxtrees.experiments.study.trials", "learn_on_prefixes"),
    "check_sample_grid": ("jaxtrees.experiments.study.trials", "check_sample_grid"),
    "exact_invariants": ("jaxtrees.experiments.study.trials", "exact_invariants"),
    "DecisionTreeClassifier": ("jaxtrees.sklearn", "DecisionTreeClassifier"),
    "LowDegreeClassifier": ("jaxtrees.sklearn", "LowDegreeClassifier"),
    "FindMinClassifier": ("jaxtrees.sklearn", "FindMinClassifier"),
    "AdaBoostClassifier": ("jaxtrees.sklearn", "AdaBoostClassifier"),
    "RandomForestClassifier": ("jaxtrees.sklearn", "RandomForestClassifier"),
}


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError(f"module 'jaxtrees' has no attribute {name!r}")
    module, attribute = _LAZY[name]
    value = importlib.import_module(module)
    value = value if attribute is None else getattr(value, attribute)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
