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
"""

from jaxtrees import (bits, distributions, gd, impurity, population, prng, runner, sampling, studies, summary,
                      targets, tree)
from jaxtrees.distributions import alpha_c, marginals, product, smoothed, uniform
from jaxtrees.estimator import DecisionTreeClassifier
from jaxtrees.growth import GrowthRule, grow
from jaxtrees.impurity import Impurity
from jaxtrees.population import Path, error_by_depth, exact_error, follow_path, grow_exact
from jaxtrees.gd import TrainConfig, mlp, train, train_many
from jaxtrees.runner import Study
from jaxtrees.sampling import Sample, draw, from_arrays, packed_bernoulli, prefix, quantize
from jaxtrees.targets import (
    addressing,
    agnostic_addressing,
    code_distance,
    coded_addressing,
    decision_tree,
    junta,
    nearby_junta,
    parity,
    random_junta,
    random_code,
    random_parity,
    random_tree,
    support_mask,
)
from jaxtrees.tree import (
    Tree,
    depth,
    features_used,
    n_leaves,
    predict,
    predict_bits,
    sample_error,
    truncate,
)

__version__ = "0.1.0"
