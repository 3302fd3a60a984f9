"""Best-first trees: grow the leaf of largest weighted gain until the tree has ``max_leaves`` leaves.

Seed 004's third weak learner, "CART trees pruned to 16 nodes", read as Gini trees grown best-first to at most 16
leaves (scikit-learn's ``max_leaf_nodes=16``): :data:`CART16`. Each step splits the leaf of largest weighted gain, found
by the same counting and split rule as level-wise growth, and counts only its two children; the tree is a
:class:`~jaxtrees.hypotheses.node_tree.NodeTree`, so its depth is free (:class:`BestFirstTree`).

>>> import jax, jax.numpy as jnp
>>> from jaxtrees.core import sampling
>>> X = jnp.array([[0, 0, 1], [0, 1, 1], [1, 0, 0], [1, 1, 0], [1, 1, 1]] * 4)
>>> y = jnp.array([0, 1, 1, 0, 0] * 4)                      # x_0 XOR x_1 but (1, 1, 1) -> 0
>>> t = jax.jit(BestFirstTree(GrowthRule(max_depth=8, impurity="gini"), max_leaves=3).fit)(jax.random.key(0),
...     sampling.from_arrays(X, y))
>>> int(t.size), t.feature[:3].tolist()           # root on x_0, then its x_0 = 1 child (slot 2) on x_1
(5, [0, -1, 1])
>>> from jaxtrees.hypotheses.node_tree import n_leaves
>>> int(n_leaves(t)), t.predict(X[:5]).tolist()
(3, [0, 0, 1, 0, 0])
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp

from jaxtrees.core import checks, impurity
from jaxtrees.core.sampling import Data
from jaxtrees.hypotheses.node_tree import NodeTree
from jaxtrees.learners.base import check_data
from jaxtrees.learners.greedy import counting, dense, node_stats
from jaxtrees.learners.growth import GrowthRule, check_key, decide, resolve_weights

#: The most leaves a best-first tree may have (its slots, 2 max_leaves - 1, are scanned at every step).
MAX_LEAVES = 4096


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class BestFirstTree:
    """The learner: ``fit(key, data) -> NodeTree`` with at most ``max_leaves`` leaves, split by
    ``rule`` (impurity, tie-break, stop rules; ``rule.max_depth`` bounds the depth). The key is read
    only by random tie-breaks and feature bagging (``rule.random``).

    Seed 004's third weak learner is "CART trees pruned to 16 nodes". Our reading: Gini trees grown
    best-first to at most 16 leaves, which is scikit-learn's ``DecisionTreeClassifier(criterion=
    "gini", max_leaf_nodes=16)`` and the usual "J-node trees" of boosting (a tree of 16 leaves has
    15 tests; one of 16 nodes in all cannot be binary). :data:`CART16` is that learner.

    Every leaf of the current tree knows its best split (feature f, gain g, from the same counting
    and the same split rule as level-wise growth, :mod:`~jaxtrees.learners.greedy` and
    :func:`~jaxtrees.learners.growth.decide`); each of the ``max_leaves - 1`` steps splits the leaf
    of largest w g (w its weight: scikit-learn's weighted impurity decrease up to the constant
    1 / total weight; ties to the lowest slot), and counts only its two children. A leaf that
    cannot split (pure, too few examples, no admissible feature, at ``rule.max_depth``) stays a
    leaf; growth stops early when no leaf can split. The tree is a
    :class:`~jaxtrees.hypotheses.node_tree.NodeTree` of ``2 max_leaves - 1`` slots, so its depth is
    free up to ``max_leaves - 1``.
    """

    rule: GrowthRule
    max_leaves: int = 16
    access = "sample"

    def __post_init__(self):
        checks.integer("max_leaves", self.max_leaves, low=1, high=MAX_LEAVES)

    def fit(self, key, data: Data) -> NodeTree:
        """The tree on ``data``; float weights spanning more than 2^12 are counted exactly unless
        ``rule.exact_weights`` says otherwise (:func:`~jaxtrees.learners.growth.resolve_weights`)."""
        check_data(data)
        learner = dataclasses.replace(self, rule=resolve_weights(self.rule, data.weight))
        return _grow(data, learner, check_key(self.rule, key))

    def reweighted(self, data: Data):
        """``fit(key, weight) -> NodeTree`` on ``data`` under many weightings (:func:`~jaxtrees.learners.base.reweighted`),
        the unpacked features computed once."""
        check_data(data)
        shared = dense(data)
        return lambda key, weight: _grow(data._replace(weight=weight), self, check_key(self.rule, key), shared)


#: Seed 004's CART-16: Gini, best-first, at most 16 leaves, any depth.
CART16 = BestFirstTree(GrowthRule(max_depth=15, impurity="gini"), max_leaves=16)


@functools.partial(jax.jit, static_argnames="learner")
def _grow(data: Data, learner: BestFirstTree, key, shared=None) -> NodeTree:
    rule = learner.rule
    slots = 2 * learner.max_leaves - 1
    X = data.X
    n = X.shape[-2]
    mask, count, totals, unit = counting(data, shared, exact=rule.exact_weights)
    slot = jnp.arange(slots)

    def split_rule(masks, depth, key):
        """(w, wy, feature, gain, label) of the nodes with example bitsets ``masks`` at ``depth``."""
        stats = node_stats(count, totals, masks)
        w, wy = stats.w, stats.wy
        feature, gain = decide(stats, jnp.zeros((masks.shape[0], n), bool), rule, key, min_count=True,
                               purity_tol=0.0)
        shallow = depth < rule.max_depth
        return (w.astype(jnp.float32), wy.astype(jnp.float32), jnp.where(shallow, feature, -1),
                jnp.where(shallow, gain, 0.0), stats.label)

    def put(array, rows, at):
        """``array`` with ``rows[j]`` written into slot ``at + j`` (one-hot selects, no scatter)."""
        for j in range(rows.shape[0]):
            hit = (slot == at + j).reshape((-1,) + (1,) * (array.ndim - 1))
            array = jnp.where(hit, rows[j], array)
        return array

    w, wy, feature, gain, label = split_rule(mask[None], jnp.zeros(1, jnp.int32), jax.random.fold_in(key, 0))
    zeros_f, minus = jnp.zeros(slots, jnp.float32), jnp.full(slots, -1, jnp.int32)
    state = dict(masks=put(jnp.zeros((slots,) + mask.shape, mask.dtype), mask[None], 0),
                 w=put(zeros_f, w, 0), wy=put(zeros_f, wy, 0), label=put(jnp.zeros(slots, jnp.int32), label, 0), candidate=put(minus, feature, 0),
                 gain=put(zeros_f, gain, 0), depth=jnp.zeros(slots, jnp.int32), feature=minus, left=minus,
                 right=minus, parent=minus, size=jnp.int32(1))

    def step(i, s):
        priority = jnp.where(s["candidate"] >= 0, s["w"] * s["gain"], -jnp.inf)
        c = jnp.argmax(priority)
        go = priority[c] > -jnp.inf
        f = jnp.maximum(s["candidate"][c], 0)
        children = jnp.stack([s["masks"][c] & ~X[f], s["masks"][c] & X[f]])
        depth = s["depth"][c] + 1
        w, wy, feature, gain, label = split_rule(children, jnp.stack([depth, depth]), jax.random.fold_in(key, i + 1))
        at = s["size"]
        new = dict(masks=put(s["masks"], children, at), w=put(s["w"], w, at), wy=put(s["wy"], wy, at), label=put(s["label"], label, at),
                   candidate=put(put(s["candidate"], feature, at), jnp.int32(-1)[None], c),
                   gain=put(s["gain"], gain, at), depth=put(s["depth"], jnp.stack([depth, depth]), at),
                   feature=put(s["feature"], f[None], c), left=put(s["left"], at[None], c),
                   right=put(s["right"], (at + 1)[None], c), parent=put(s["parent"], jnp.stack([c, c]), at),
                   size=at + 2)
        return jax.tree.map(lambda a, b: jnp.where(go, a, b), new, s)

    s = jax.lax.fori_loop(0, learner.max_leaves - 1, step, state)
    used = slot < s["size"]
    mean = impurity.ratio(s["wy"], s["w"])
    weight = s["w"] if unit is None else s["w"] * unit
    return NodeTree(s["feature"], s["left"], s["right"], s["parent"], jnp.where(used, s["label"], 0),
                    jnp.where(used, weight, 0.0), jnp.where(used, mean, 0.0), s["size"])
