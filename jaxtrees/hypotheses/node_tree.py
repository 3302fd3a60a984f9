"""Decision trees as node lists: deep, sparse trees in C slots instead of a 2^(D+1) - 1 heap.

The heap layout (:mod:`~jaxtrees.hypotheses.tree`) stores every slot of a complete tree, which is
right for level-wise growth and impossible for a tree of 16 leaves grown best-first (depth up to
15) or a decision list (depth up to n). A :class:`NodeTree` of capacity C keeps its nodes in
creation order: slot 0 is the root, every node's children come after it, ``size`` slots are used.

Fields (unused slots: ``feature = left = right = -1``, zeros elsewhere):

- ``feature: int32[C]``: the feature tested at the node, -1 at leaves;
- ``left, right: int32[C]``: the slots of the children x_f = 0 and x_f = 1 (-1 at leaves);
- ``parent: int32[C]``: the slot of the parent (-1 at the root), so that every per-node quantity
  is a gather from the parent, never a scatter;
- ``label: int32[C]``: the majority label of the training data at the node (1 iff strictly more
  than half the weight is labelled 1), defined at internal nodes too;
- ``weight, mean: float32[C]``: the training weight reaching the node and its mean label;
- ``size: int32``: the slots in use.

Quantities that depend on the path to a node (its bitset of examples, its restriction) are
computed for all nodes at once by D rounds of "take the parent's value and refine it", D the
capacity bound on the depth; no Python recursion, and a batch of trees is ``jax.vmap``.

>>> import jax.numpy as jnp
>>> from jaxtrees.hypotheses import tree
>>> t = from_heap(tree.stump(feature=2, labels=(0, 1)))
>>> t.feature.tolist(), t.left.tolist(), t.right.tolist(), int(t.size)
([2, -1, -1], [1, -1, -1], [2, -1, -1], 3)
>>> t.predict(jnp.array([[0, 0, 1], [1, 1, 0]])).tolist(), int(depth(t)), int(n_leaves(t))
([1, 0], 1, 2)
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxtrees.core import bits
from jaxtrees.hypotheses import tree as heap


class NodeTree(NamedTuple):
    """A node-list tree; a :class:`~jaxtrees.hypotheses.base.Hypothesis` with an exact error."""

    feature: jax.Array
    left: jax.Array
    right: jax.Array
    parent: jax.Array
    label: jax.Array
    weight: jax.Array
    mean: jax.Array
    size: jax.Array

    #: The error under a product distribution and a target is computed exactly (:func:`exact_error`).
    exact = True

    @property
    def capacity(self) -> int:
        """C, the number of slots (static)."""
        return self.feature.shape[-1]

    def predict(self, x):
        return predict(self, x)

    def predict_bits(self, X):
        return predict_bits(self, X)

    def probability(self, x):
        """``float32[...]``: the mean training label of the leaf each plain input reaches (an
        estimate of Pr[y = 1 | x]; what random forests average)."""
        return self.mean[leaf(self, x)]

    def exact_error(self, p, target):
        return exact_error(self, p, target)


def empty(capacity: int) -> NodeTree:
    """A tree of ``capacity`` slots holding a single leaf (label 0, weight 0) at the root."""
    minus = jnp.full((capacity,), -1, jnp.int32)
    zeros = jnp.zeros((capacity,), jnp.float32)
    return NodeTree(minus, minus, minus, minus, jnp.zeros((capacity,), jnp.int32), zeros, zeros, jnp.int32(1))


def in_use(t: NodeTree):
    """``bool[C]``: the slots that hold a node."""
    return jnp.arange(t.capacity) < t.size


def is_leaf(t: NodeTree):
    return in_use(t) & (t.feature < 0)


def n_leaves(t: NodeTree):
    return jnp.sum(is_leaf(t).astype(jnp.int32))


def _max_depth(capacity: int) -> int:
    """The deepest a binary tree of ``capacity`` slots can be (every split adds two slots)."""
    return (capacity - 1) // 2


def _down(t: NodeTree, root, step):
    """Per-node values by top-down propagation: ``value[0] = root``, ``value[c] = step(value[parent
    c], parent c, c)`` for every node c (pytrees), after D = (C - 1) / 2 rounds of gathers (D
    bounds the depth)."""
    parent = jnp.maximum(t.parent, 0)
    node = jnp.arange(t.capacity)
    at_root = lambda new, r: jnp.where((node == 0).reshape((-1,) + (1,) * jnp.ndim(r)), r, new)  # noqa: E731

    def round_(_, value):
        return jax.tree.map(at_root, step(jax.tree.map(lambda v: v[parent], value), parent, node), root)

    start = jax.tree.map(lambda r: jnp.broadcast_to(r, (t.capacity,) + jnp.shape(r)), root)
    return jax.lax.fori_loop(0, _max_depth(t.capacity), round_, start)


def node_depths(t: NodeTree):
    """``int32[C]``: the depth of every node (0 at the root)."""
    return _down(t, jnp.int32(0), lambda d, parent, node: d + 1)


def depth(t: NodeTree):
    """Length of the longest root-to-leaf path (int32)."""
    return jnp.max(jnp.where(in_use(t), node_depths(t), 0))


def _branch(t: NodeTree, parent, node):
    """``(feature, bit)`` of the test on the edge into each node: its parent's feature, and 1 if the
    node is the parent's x_f = 1 child."""
    return t.feature[parent], t.right[parent] == node


@jax.jit
def leaf(t: NodeTree, x):
    """The slot ``int32[...]`` of the leaf each plain input ``x: {0,1}[..., n]`` reaches."""
    x = jnp.asarray(x).astype(jnp.int32)
    node = jnp.zeros(x.shape[:-1], jnp.int32)
    for _ in range(_max_depth(t.capacity)):
        f = t.feature[node]
        bit = jnp.take_along_axis(x, jnp.maximum(f, 0)[..., None], axis=-1)[..., 0]
        node = jnp.where(f >= 0, jnp.where(bit == 1, t.right[node], t.left[node]), node)
    return node


@jax.jit
def predict(t: NodeTree, x):
    """Labels ``int32[...]`` for plain inputs ``x: {0,1}[..., n]``."""
    return t.label[leaf(t, x)]


@jax.jit
def node_masks(t: NodeTree, X):
    """``uint32[C, W]``: the bitset of the packed examples ``X: uint32[n, W]`` reaching each node."""
    def step(mask, parent, node):
        f, bit = _branch(t, parent, node)
        row = X[jnp.maximum(f, 0)]
        return mask & jnp.where(bit[:, None], row, ~row)

    return _down(t, jnp.full((X.shape[-1],), bits.ALL_ONES, jnp.uint32), step)


@jax.jit
def predict_bits(t: NodeTree, X):
    """Packed labels ``uint32[W]`` for packed inputs ``X: uint32[n, W]``: the OR of the example
    bitsets of the leaves labelled 1."""
    positive = is_leaf(t) & (t.label == 1)
    return bits.reduce_or(jnp.where(positive[:, None], node_masks(t, X), jnp.uint32(0)), axis=0)


def node_restrictions(t: NodeTree, p) -> heap.Restrictions:
    """The restriction ``fixed, values: bool[C, n]`` of every node and its probability under p."""
    p = jnp.asarray(p, jnp.float32)
    n = p.shape[-1]

    def step(r, parent, node):
        fixed, values = r
        f, bit = _branch(t, parent, node)
        onehot = f[:, None] == jnp.arange(n)
        return fixed | onehot, jnp.where(onehot, bit[:, None], values)

    none = jnp.zeros((n,), bool)
    fixed, values = _down(t, (none, none), step)
    prob = jnp.prod(jnp.where(fixed, jnp.where(values, p, 1.0 - p), 1.0), axis=-1)
    return heap.Restrictions(fixed, values, prob)


def exact_error(t: NodeTree, p, target):
    """Pr_{x ~ p}[t(x) != f(x)], exactly (float32), from the target's oracle at every leaf."""
    p = heap.checked_marginals(t.feature, p)
    return _exact_error(t, p, target)


@jax.jit
def _exact_error(t: NodeTree, p, target):
    r = node_restrictions(t, p)
    mu, _ = jax.vmap(target.means, in_axes=(None, 0, 0))(p, r.fixed, r.values)
    return jnp.sum(jnp.where(is_leaf(t), r.weight * jnp.abs(t.label - mu), 0.0))


def from_heap(t: heap.Tree) -> NodeTree:
    """The same tree in node-list layout (slots in breadth-first order), capacity 2^(D+1) - 1.

    Host-side (numpy) on one concrete tree; for a batch, map over it.
    """
    feature = np.asarray(t.feature)
    reached = np.asarray(heap.reached(t))
    order = np.flatnonzero(reached)  # heap slots in breadth-first order
    slot = np.full(feature.shape[-1], -1, np.int64)
    slot[order] = np.arange(len(order))
    out = {name: np.full(feature.shape[-1], -1, np.int32) for name in ("feature", "left", "right", "parent")}
    for new, old in enumerate(order):
        if feature[old] >= 0:
            out["feature"][new] = feature[old]
            out["left"][new], out["right"][new] = slot[2 * old + 1], slot[2 * old + 2]
            out["parent"][slot[2 * old + 1]] = out["parent"][slot[2 * old + 2]] = new

    def moved(a, dtype):
        b = np.zeros(feature.shape[-1], dtype)
        b[: len(order)] = np.asarray(a)[order]
        return jnp.asarray(b)

    return NodeTree(*(jnp.asarray(out[k]) for k in ("feature", "left", "right", "parent")),
                    moved(t.label, np.int32), moved(t.weight, np.float32), moved(t.mean, np.float32),
                    jnp.int32(len(order)))
