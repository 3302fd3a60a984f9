"""Decision trees as arrays in complete-heap layout, and what one can ask of them.

A tree of maximum depth D has N = 2^(D+1) - 1 slots: the root is 0, the children of node i are
2i+1 (the branch x_f = 0) and 2i+2 (x_f = 1), level l holds nodes 2^l - 1 .. 2^(l+1) - 2; a node
exists iff its ``weight > 0`` (fields: :class:`Tree`). A batch of trees is the same arrays with
a leading axis; every function here acts on one tree and is batched with ``jax.vmap``.

>>> import jax.numpy as jnp
>>> t = stump(feature=2, labels=(0, 1), max_depth=1)
>>> predict(t, jnp.array([[0, 0, 1], [1, 1, 0]])).tolist()
[1, 0]
>>> int(depth(t)), int(n_leaves(t))
(1, 2)
"""

from __future__ import annotations

import functools
import sys
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxtrees.core import bits, checks
from jaxtrees.hypotheses.base import TreeMethods, flag_nan_root, target_mean


class _Arrays(NamedTuple):
    feature: jax.Array
    label: jax.Array
    weight: jax.Array
    mean: jax.Array
    gain: jax.Array


class Tree(TreeMethods, _Arrays):
    """A heap-layout tree; a :class:`~jaxtrees.hypotheses.base.Hypothesis` with an exact error
    (its methods, shared with node-list trees, call this module's functions).

    Fields (a node exists iff ``weight > 0``; absent nodes are all zeros with ``feature = -1``):

    - ``feature: int32[N]``: the feature tested at the node, -1 at leaves and absent nodes;
    - ``label: int32[N]``: the majority label of the training data at the node, 1 iff strictly more
      than half are 1 (a tie at exactly 1/2 gives 0, as scikit-learn's argmax does); defined at
      internal nodes too, so any truncation of the tree is a tree;
    - ``weight: float32[N]``: examples reaching the node (or, for exact trees, its probability);
    - ``mean: float32[N]``: the mean label there;
    - ``gain: float32[N]``: the purity gain of the node's split, 0 where it does not split.
    """

    __slots__ = ()
    _layout = sys.modules[__name__]

    @property
    def max_depth(self) -> int:
        """D, fixed by the array shapes (the tree may stop earlier: see :func:`depth`)."""
        return heap_depth(self.feature.shape[-1])


def heap_size(max_depth: int) -> int:
    return 2 ** (max_depth + 1) - 1


def heap_depth(size: int) -> int:
    depth = int(np.log2(size + 1)) - 1
    if heap_size(depth) != size:
        raise ValueError(f"tree arrays must have 2^(D+1) - 1 slots, got {size}")
    return depth


def node_levels(max_depth: int) -> np.ndarray:
    """``int32[N]``: the level (depth) of every heap slot."""
    return np.concatenate([np.full(2**l, l, np.int32) for l in range(max_depth + 1)])


def stump(feature: int, labels=(0, 1), max_depth: int = 1) -> Tree:
    """A depth-1 tree x_feature ? labels[1] : labels[0], in arrays of the given max_depth."""
    size = heap_size(max_depth)
    f = np.full(size, -1, np.int32)
    f[0] = feature
    label = np.zeros(size, np.int32)
    label[1:3] = labels
    label[0] = int(sum(labels) == 2)  # majority, with the tie at 1/2 going to 0
    weight = np.zeros(size, np.float32)
    weight[:3] = (1.0, 0.5, 0.5)
    mean = np.zeros(size, np.float32)
    mean[1:3] = labels
    mean[0] = np.mean(labels)
    return Tree(jnp.asarray(f), jnp.asarray(label), jnp.asarray(weight), jnp.asarray(mean), jnp.zeros(size, jnp.float32))


def exists(tree: Tree):
    """``bool[N]``: which heap slots hold a node."""
    return tree.weight > 0


def is_leaf(tree: Tree):
    return exists(tree) & (tree.feature < 0)


def depth(tree: Tree):
    """Length of the longest root-to-leaf path (int32)."""
    levels = jnp.asarray(node_levels(tree.max_depth))
    return jnp.max(jnp.where(exists(tree), levels, 0))


def n_leaves(tree: Tree):
    return jnp.sum(is_leaf(tree).astype(jnp.int32))


def features_used(tree: Tree, n: int):
    """``bool[n]``: the features tested anywhere in the tree.

    ``n`` (a Python int >= 1) must exceed every feature the tree tests: ValueError naming n and the
    allowed range otherwise, as :func:`predict` and ``sample_error`` refuse such an n. Under ``jax.jit``
    with a traced tree the features are unknown when tracing and cannot be checked (as there): features
    >= n are then left out of the mask; compare ``jnp.max(tree.feature) < n`` to detect it.
    """
    n = checks.integer("n", n, low=1)
    if checks.is_concrete(tree.feature):
        top = int(np.max(np.asarray(tree.feature), initial=-1))
        if top >= n:
            raise ValueError(f"n must be in [{top + 1}, inf) for this tree: it tests feature {top}, which a "
                             f"mask of n = {n} features would drop")
    return jnp.any(tree.feature[:, None] == jnp.arange(n), axis=0)


def rank(tree: Tree):
    """Ehrenfeucht-Haussler rank (003) of a heap tree (int32): 0 at a leaf; max(r0, r1) at a node
    whose subtrees have ranks r0 != r1, r0 + 1 if they are equal. Level by level from the bottom.

    >>> int(rank(stump(feature=0, max_depth=3)))
    1
    """
    split = reached(tree) & (tree.feature >= 0)
    below = jnp.zeros(2 ** (tree.max_depth + 1), jnp.int32)  # below the deepest level: leaves
    for level in range(tree.max_depth, -1, -1):
        r0, r1 = below[0::2], below[1::2]
        below = jnp.where(split[2**level - 1: 2 ** (level + 1) - 1], jnp.where(r0 == r1, r0 + 1, jnp.maximum(r0, r1)), 0)
    return below[0]


def truncate(tree: Tree, depth_limit: int) -> Tree:
    """The tree cut at ``depth_limit`` (an int >= 0; may be traced): nodes at that depth become leaves with
    their majority label."""
    if checks.is_concrete(depth_limit):
        checks.integer("depth_limit", depth_limit if isinstance(depth_limit, int) else int(np.asarray(depth_limit)),
                       low=0)
    levels = jnp.asarray(node_levels(tree.max_depth))
    keep = levels <= depth_limit
    return Tree(
        feature=jnp.where(levels < depth_limit, tree.feature, -1),
        label=jnp.where(keep, tree.label, 0),
        weight=jnp.where(keep, tree.weight, 0.0),
        mean=jnp.where(keep, tree.mean, 0.0),
        gain=jnp.where(levels < depth_limit, tree.gain, 0.0),
    )


@jax.jit
def leaf(tree: Tree, x):
    """The heap slot ``int32[...]`` of the leaf each plain input ``x: {0,1}[..., n]`` reaches."""
    x = jnp.asarray(x).astype(jnp.int32)
    node = jnp.zeros(x.shape[:-1], jnp.int32)
    for _ in range(tree.max_depth):
        f = tree.feature[node]
        bit = jnp.take_along_axis(x, jnp.maximum(f, 0)[..., None], axis=-1)[..., 0]
        node = jnp.where(f >= 0, 2 * node + 1 + bit, node)
    return node


def predict(tree: Tree, x):
    """Labels ``int32[...]`` for plain inputs ``x: {0,1}[..., n]``: the labels of their leaves. ``n`` must exceed
    every feature the tree tests (checked when both are concrete)."""
    if checks.is_concrete(tree.feature):
        top = int(np.max(np.asarray(tree.feature), initial=-1))
        if np.ndim(x) < 1 or np.shape(x)[-1] <= top:
            raise ValueError(f"x must hold n > {top} features on its last axis (the tree tests feature {top}), "
                             f"got shape {np.shape(x)}")
    return _predict(tree, x)


@jax.jit
def _predict(tree: Tree, x):
    return tree.label[leaf(tree, x)]


@jax.jit
def predict_bits(tree: Tree, X):
    """Packed labels ``uint32[W]`` for packed inputs ``X: uint32[n, W]``.

    Level by level, each node's bitset of examples is split by its feature's bitset; leaves OR
    their label into the output. Word-parallel, no per-example indexing.
    """
    words = X.shape[-1]
    masks = jnp.full((1, words), bits.ALL_ONES, jnp.uint32)
    out = jnp.zeros((words,), jnp.uint32)
    for level in range(tree.max_depth + 1):
        lo, hi = 2**level - 1, 2 ** (level + 1) - 1
        f, label = tree.feature[lo:hi], tree.label[lo:hi]
        leaf = (f < 0)[:, None]
        out = out | bits.reduce_or(jnp.where(leaf & (label[:, None] == 1), masks, jnp.uint32(0)), axis=0)
        if level == tree.max_depth:
            break
        right = jnp.where(leaf, jnp.uint32(0), masks & X[jnp.maximum(f, 0)])
        left = jnp.where(leaf, jnp.uint32(0), masks & ~right)
        masks = interleave(left, right)
    return out


def interleave(left, right):
    """The children of node j of a level at 2j (left) and 2j+1 (right) of the next level."""
    return jnp.stack([left, right], axis=1).reshape((-1,) + left.shape[1:])


# ------------------------------------------------------------------ exact scoring under a product distribution


class Restrictions(NamedTuple):
    """The restrictions of the L nodes of one level: ``fixed, values: bool[L, n]``, ``weight: [L]``."""

    fixed: jax.Array
    values: jax.Array
    weight: jax.Array


def node_restrictions(tree: Tree, p) -> Restrictions:
    """The restriction of every heap slot and its probability Pr[node] under p.

    ``fixed, values: bool[N, n]``, ``weight: float32[N]``; slots that are not nodes of the tree
    get the restriction of the path to them (see :func:`reached`). Where a path tests a variable again
    (a hand-built tree may), the child that contradicts the first test is unreachable: probability 0.
    """
    p = jnp.asarray(p, jnp.float32)
    n = p.shape[-1]
    fixed = [jnp.zeros((1, n), bool)]
    values = [jnp.zeros((1, n), bool)]
    dead = [jnp.zeros((1,), bool)]
    for level in range(tree.max_depth):
        lo, hi = 2**level - 1, 2 ** (level + 1) - 1
        onehot = tree.feature[lo:hi, None] == jnp.arange(n)
        again, was = onehot & fixed[-1], values[-1]  # a variable the path fixed already, and its value
        f = fixed[-1] | onehot
        fixed.append(interleave(f, f))
        values.append(interleave(was & ~onehot, was | onehot))
        dead.append(interleave(dead[-1] | jnp.any(again & was, axis=-1), dead[-1] | jnp.any(again & ~was, axis=-1)))
    fixed, values, dead = jnp.concatenate(fixed), jnp.concatenate(values), jnp.concatenate(dead)
    prob = jnp.where(dead, 0.0, jnp.prod(jnp.where(fixed, jnp.where(values, p, 1.0 - p), 1.0), axis=-1))
    return Restrictions(fixed, values, prob)


def node_errors(tree: Tree, p, target):
    """``float32[N]``: Pr[v] |label(v) - E[f | v]| for every node v of the tree (0 elsewhere)."""
    r = node_restrictions(tree, p)
    oracle = jax.vmap(functools.partial(target_mean, target), in_axes=(None, 0, 0))
    mu = oracle(jnp.asarray(p, jnp.float32), r.fixed, r.values)
    return jnp.where(reached(tree), r.weight * jnp.abs(tree.label - mu), 0.0)


def exact_error(tree: Tree, p, target):
    """Pr_{x ~ p}[tree(x) != f(x)], exactly (float32); NaN for a tree grown on flagged data (root weight NaN) or a
    traced ``p`` outside [0, 1]."""
    return flag_nan_root(tree, _exact_error(tree, checked_marginals(tree.feature, p, target), target))


@jax.jit
def _exact_error(tree: Tree, p, target):
    leaf = reached(tree) & (tree.feature < 0)
    return _unless_bad(p, jnp.sum(jnp.where(leaf, node_errors(tree, p, target), 0.0)))


def _unless_bad(p, value):
    """``value``, NaN where a (traced) marginal of ``p`` is outside [0, 1] or NaN: never a plausible error."""
    return jnp.where(jnp.all((p >= 0) & (p <= 1), axis=-1, keepdims=jnp.ndim(value) > 0), value, jnp.nan)


def error_by_depth(tree: Tree, p, target):
    """``float32[D+1]``: the exact error of the tree truncated at depth d, for d = 0..D.

    Truncating at d turns the nodes at depth d into leaves labelled by their majority label.
    """
    return _error_by_depth(tree, checked_marginals(tree.feature, p, target), target)


@jax.jit
def _error_by_depth(tree: Tree, p, target):
    errors = node_errors(tree, p, target)
    levels = jnp.asarray(node_levels(tree.max_depth))
    node = reached(tree)
    leaf = node & (tree.feature < 0)
    d = jnp.arange(tree.max_depth + 1)[:, None]
    counted = node & ((levels == d) | (leaf & (levels < d)))
    return _unless_bad(p, jnp.sum(jnp.where(counted, errors, 0.0), axis=-1))


def checked_marginals(feature, p, target=None):
    """``p`` checked (when concrete): a 1-d array of probabilities in [0, 1], one per feature that a
    tree testing ``feature`` may test, and (given ``target``) of the target's n
    (:func:`~jaxtrees.core.checks.same_n`)."""
    p = checks.probabilities("p", p)
    if target is not None:
        checks.same_n("p", jnp.shape(p)[-1], target)
    if checks.is_concrete((p, feature)):
        used = int(np.max(np.asarray(feature), initial=-1))
        if used >= np.shape(p)[-1]:
            raise ValueError(f"p must have one marginal per feature: the tree tests feature {used}, "
                             f"p has length {np.shape(p)[-1]}")
    return p


def reached(tree: Tree):
    """``bool[N]``: slots that are nodes of the tree: the root and the children of split nodes.

    Unlike ``weight > 0`` this holds for any tree, e.g. one built by hand.
    """
    return jnp.concatenate([jnp.ones((1,), bool), jnp.repeat(tree.feature >= 0, 2)[: tree.feature.shape[-1] - 1]])
