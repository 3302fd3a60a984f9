"""Decision trees as node lists: deep, sparse trees in C slots instead of a 2^(D+1) - 1 heap.

The heap layout (:mod:`~jaxtrees.hypotheses.tree`) stores every slot of a complete tree, right for
level-wise growth and impossible for a tree of 16 leaves grown best-first (depth up to 15) or a
decision list (depth up to n). A :class:`NodeTree` of capacity C keeps its nodes in creation
order: slot 0 is the root, every node's children come after it, ``size`` slots are used (fields:
:class:`NodeTree`). Per-node quantities that depend on the path (a node's examples, its
restriction) are D rounds of "take the parent's value and refine it" (:func:`top_down`).

>>> import jax.numpy as jnp
>>> from jaxtrees.hypotheses import tree
>>> t = from_heap(tree.stump(feature=2, labels=(0, 1)))
>>> t.feature.tolist(), t.left.tolist(), t.right.tolist(), int(t.size)
([2, -1, -1], [1, -1, -1], [2, -1, -1], 3)
>>> t.predict(jnp.array([[0, 0, 1], [1, 1, 0]])).tolist(), int(depth(t)), int(n_leaves(t))
([1, 0], 1, 2)
"""

from __future__ import annotations

import functools
import sys
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxtrees.core import bits
from jaxtrees.hypotheses import tree as heap
from jaxtrees.hypotheses.base import TreeMethods, target_mean


class _Arrays(NamedTuple):
    feature: jax.Array
    left: jax.Array
    right: jax.Array
    parent: jax.Array
    label: jax.Array
    weight: jax.Array
    mean: jax.Array
    size: jax.Array


class NodeTree(TreeMethods, _Arrays):
    """A node-list tree; a :class:`~jaxtrees.hypotheses.base.Hypothesis` with an exact error
    (its methods, shared with heap trees, call this module's functions).

    Fields (unused slots: ``feature = left = right = -1``, zeros elsewhere):

    - ``feature: int32[C]``: the feature tested at the node, -1 at leaves;
    - ``left, right: int32[C]``: the slots of the children x_f = 0 and x_f = 1 (-1 at leaves);
    - ``parent: int32[C]``: the slot of the parent (-1 at the root), so that every per-node quantity
      is a gather from the parent, never a scatter;
    - ``label: int32[C]``: the majority label of the training data at the node (1 iff strictly more
      than half the weight is labelled 1), defined at internal nodes too;
    - ``weight, mean: float32[C]``: the training weight reaching the node and its mean label;
    - ``size: int32``: the slots in use.
    """

    __slots__ = ()
    _layout = sys.modules[__name__]

    @property
    def capacity(self) -> int:
        """C, the number of slots (static)."""
        return self.feature.shape[-1]


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


def top_down(t: NodeTree, root, step):
    """Per-node values by top-down propagation: ``value[0] = root``, ``value[c] = step(value[parent
    c], parent c, c)`` for every node c (pytrees). Rounds of gathers until nothing changes: depth + 1
    rounds (the capacity's (C - 1) / 2 bounds them); no Python recursion, so a batch of trees is
    ``jax.vmap``."""
    parent = jnp.maximum(t.parent, 0)
    node = jnp.arange(t.capacity)
    at_root = lambda new, r: jnp.where((node == 0).reshape((-1,) + (1,) * jnp.ndim(r)), r, new)  # noqa: E731

    def round_(value):
        return jax.tree.map(at_root, step(jax.tree.map(lambda v: v[parent], value), parent, node), root)

    start = jax.tree.map(lambda r: jnp.broadcast_to(r, (t.capacity,) + jnp.shape(r)), root)
    return _fixed_point(round_, start, _max_depth(t.capacity) + 1)


def bottom_up(t: NodeTree, at_leaf, combine):
    """Per-node values by bottom-up propagation: ``at_leaf`` at leaves, ``combine(value[left c],
    value[right c])`` at every internal node c; rounds until nothing changes, as :func:`top_down`."""
    internal = t.feature >= 0
    left, right = jnp.maximum(t.left, 0), jnp.maximum(t.right, 0)
    start = jnp.broadcast_to(at_leaf, (t.capacity,))
    return _fixed_point(lambda v: jnp.where(internal, combine(v[left], v[right]), start), start,
                        _max_depth(t.capacity) + 1)


def _fixed_point(round_, start, max_rounds: int):
    """``round_`` applied until its value stops changing (at most ``max_rounds`` times)."""
    def cond(c):
        i, value, changed = c
        return changed & (i < max_rounds)

    def body(c):
        i, value, _ = c
        new = round_(value)
        changed = jnp.any(jnp.stack([jnp.any(a != b) for a, b in zip(jax.tree.leaves(new), jax.tree.leaves(value))]))
        return i + 1, new, changed

    return jax.lax.while_loop(cond, body, (jnp.int32(0), start, jnp.asarray(True)))[1]


def node_depths(t: NodeTree):
    """``int32[C]``: the depth of every node (0 at the root)."""
    return top_down(t, jnp.int32(0), lambda d, parent, node: d + 1)


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

    def down(node):
        f = t.feature[node]
        bit = jnp.take_along_axis(x, jnp.maximum(f, 0)[..., None], axis=-1)[..., 0]
        return jnp.where(f >= 0, jnp.where(bit == 1, t.right[node], t.left[node]), node)

    return jax.lax.while_loop(lambda node: jnp.any(t.feature[node] >= 0), down, jnp.zeros(x.shape[:-1], jnp.int32))


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

    return top_down(t, jnp.full((X.shape[-1],), bits.ALL_ONES, jnp.uint32), step)


@jax.jit
def predict_bits(t: NodeTree, X):
    """Packed labels ``uint32[W]`` for packed inputs ``X: uint32[n, W]``: the OR of the example
    bitsets of the leaves labelled 1."""
    positive = is_leaf(t) & (t.label == 1)
    return bits.reduce_or(jnp.where(positive[:, None], node_masks(t, X), jnp.uint32(0)), axis=0)


def node_restrictions(t: NodeTree, p) -> heap.Restrictions:
    """The restriction ``fixed, values: bool[C, n]`` of every node and its probability under p (0 for a
    node whose path tests a variable again with the other value: a hand-built tree may)."""
    p = jnp.asarray(p, jnp.float32)
    n = p.shape[-1]

    def step(r, parent, node):
        fixed, values, dead = r
        f, bit = _branch(t, parent, node)
        onehot = f[:, None] == jnp.arange(n)
        clash = jnp.any(onehot & fixed & (values != bit[:, None]), axis=-1)
        return fixed | onehot, jnp.where(onehot, bit[:, None], values), dead | clash

    none = jnp.zeros((n,), bool)
    fixed, values, dead = top_down(t, (none, none, jnp.asarray(False)), step)
    prob = jnp.where(dead, 0.0, jnp.prod(jnp.where(fixed, jnp.where(values, p, 1.0 - p), 1.0), axis=-1))
    return heap.Restrictions(fixed, values, prob)


def means(t: NodeTree, p, fixed, values):
    """The tree as a target's exact oracle (:class:`~jaxtrees.targets.base.Target`): mu = E[t(x) | x_j
    = v_j for fixed j] and mu1[i] = E[t(x) | the same and x_i = 1] under the product distribution p,
    from the probability of every root-to-leaf path (a test of a fixed x_j passes with probability 0
    or 1; for mu1[i] a test of x_i too)."""
    n = p.shape[-1]
    q1 = jnp.where(fixed, values.astype(p.dtype), p)  # Pr[x_j = 1 | restriction]
    pin = jnp.arange(n + 1)[:, None] == jnp.arange(n)  # row i < n pins x_i = 1; row n pins nothing

    def step(prob, parent, node):
        f, bit = _branch(t, parent, node)
        q = jnp.where(pin[:, jnp.maximum(f, 0)].T, 1.0, q1[jnp.maximum(f, 0)][:, None])  # [C, n + 1]
        return prob * jnp.where(bit[:, None], q, 1.0 - q)

    prob = top_down(t, jnp.ones((n + 1,), p.dtype), step)
    at_leaf = jnp.where(is_leaf(t) & (t.label == 1), 1.0, 0.0).astype(p.dtype)
    total = jnp.sum(at_leaf[:, None] * prob, axis=0)
    return total[n], total[:n]


def mean(t: NodeTree, p, fixed, values):
    """mu of :func:`means` alone (the oracle's :func:`~jaxtrees.hypotheses.base.target_mean`): one path
    probability per node instead of n + 1."""
    q1 = jnp.where(fixed, values.astype(p.dtype), p)  # Pr[x_j = 1 | restriction]

    def step(prob, parent, node):
        f, bit = _branch(t, parent, node)
        q = q1[jnp.maximum(f, 0)]
        return prob * jnp.where(bit, q, 1.0 - q)

    prob = top_down(t, jnp.ones((), p.dtype), step)
    return jnp.sum(jnp.where(is_leaf(t) & (t.label == 1), prob, 0.0).astype(p.dtype))


#: Slots whose oracle means one step of :func:`_exact_error`'s loop computes: the loop covers the slots
#: in use, so a tree of C slots but few nodes (FINDMIN's capacity bounds the worst case) costs its size.
EXACT_CHUNK = 64


def exact_error(t: NodeTree, p, target):
    """Pr_{x ~ p}[t(x) != f(x)], exactly (float32), from the target's oracle at every leaf."""
    p = heap.checked_marginals(t.feature, p, target)
    return _exact_error(t, p, target)


@jax.jit
def _exact_error(t: NodeTree, p, target):
    r = node_restrictions(t, p)
    C = t.capacity
    K = min(C, EXACT_CHUNK)
    padded = -(-C // K) * K
    fixed, values = (jnp.pad(a, ((0, padded - C), (0, 0))) for a in (r.fixed, r.values))
    oracle = jax.vmap(functools.partial(target_mean, target), in_axes=(None, 0, 0))

    def chunk(i, mu):
        at = i * K
        part = oracle(p, *(jax.lax.dynamic_slice_in_dim(a, at, K) for a in (fixed, values)))
        return jax.lax.dynamic_update_slice_in_dim(mu, part, at, 0)

    mu = jax.lax.fori_loop(0, (t.size + K - 1) // K, chunk, jnp.zeros((padded,), p.dtype))[:C]
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


def _rank_rule(r0, r1):
    """The rank of a node whose subtrees have ranks r0, r1: max(r0, r1) if they differ, else r0 + 1."""
    return jnp.where(r0 == r1, r0 + 1, jnp.maximum(r0, r1))


def rank(t: NodeTree):
    """Ehrenfeucht-Haussler rank (003): 0 for a leaf; for a node with subtrees of ranks r0, r1,
    max(r0, r1) if r0 != r1 and r0 + 1 if r0 = r1 (int32). A complete depth-d tree has rank d, a
    decision list rank 1; by Lemma 1 a reduced tree of rank r has between 2^(r+1) - 1 and
    2 sum_{i<=r} C(n, i) - 1 nodes.

    >>> from jaxtrees.hypotheses import tree
    >>> int(rank(from_heap(tree.stump(feature=0))))
    1
    """
    return bottom_up(t, jnp.int32(0), _rank_rule)[0]


@functools.partial(jax.jit, static_argnames="n")
def reduce(t: NodeTree, n: int) -> NodeTree:
    """The same function as a reduced tree (003) over n variables: a test of a variable already tested on the path
    to it is removed (the subtree on the side the earlier test fixed takes its place), and the
    nodes left are renumbered in slot order (root first). Capacity, labels, weights kept.

    >>> import jax.numpy as jnp
    >>> t = NodeTree(*(jnp.array(a, jnp.int32) for a in ([0, 0, -1, -1, -1], [1, 3, -1, -1, -1],
    ...     [2, 4, -1, -1, -1], [-1, 0, 0, 1, 1], [0, 0, 1, 0, 1])), jnp.ones(5), jnp.zeros(5), jnp.int32(5))
    >>> r = reduce(t, n=1)                # x_0 tested twice on the path root -> slot 1
    >>> r.feature[: int(r.size)].tolist(), r.left[0].tolist(), r.right[0].tolist(), r.label[: int(r.size)].tolist()
    ([0, -1, -1], 2, 1, [0, 1, 0])
    """
    internal = in_use(t) & (t.feature >= 0)
    r = node_restrictions(t, jnp.full((n,), 0.5))
    f = jnp.maximum(t.feature, 0)
    tested = jnp.take_along_axis(r.fixed, f[:, None], axis=1)[:, 0]
    value = jnp.take_along_axis(r.values, f[:, None], axis=1)[:, 0]
    redundant = internal & tested
    skip_to = jnp.where(value, t.right, t.left)
    # Follow chains of redundant tests to the first node that stays.
    resolve = _fixed_point(lambda c: jnp.where(redundant[jnp.maximum(c, 0)] & (c >= 0), skip_to[jnp.maximum(c, 0)], c),
                           jnp.stack([t.left, t.right]), _max_depth(t.capacity) + 1)
    keep = internal & ~redundant
    left, right = jnp.where(keep, resolve[0], -1), jnp.where(keep, resolve[1], -1)
    parent = jnp.full((t.capacity,), -1, jnp.int32)
    for child in (left, right):
        parent = parent.at[jnp.where(keep, child, t.capacity)].set(jnp.arange(t.capacity, dtype=jnp.int32), mode="drop")
    linked = t._replace(left=left, right=right, parent=parent)
    reach = top_down(linked, jnp.asarray(True), lambda r_, p, c: r_ & (parent[c] >= 0)) & in_use(t)
    # Renumber: the reached nodes, in slot order, first.
    new_index = jnp.cumsum(reach.astype(jnp.int32)) - 1
    order = jnp.argsort(~reach, stable=True)
    size = jnp.sum(reach.astype(jnp.int32))
    used = jnp.arange(t.capacity) < size
    move = lambda a, fill: jnp.where(used, a[order], fill)  # noqa: E731
    renumber = lambda c: jnp.where(c >= 0, new_index[jnp.maximum(c, 0)], -1)  # noqa: E731
    return NodeTree(move(jnp.where(keep, t.feature, -1), -1), move(renumber(left), -1), move(renumber(right), -1),
                    move(renumber(parent), -1), move(t.label, 0), move(t.weight, 0.0), move(t.mean, 0.0), size)


def to_heap(t: NodeTree) -> heap.Tree:
    """The same tree in the complete-heap layout (host-side, one concrete tree; depth <= 24).

    Nodes without training weight get weight 1, since the heap marks its nodes by weight > 0.
    """
    feature, left, right = (np.asarray(a) for a in (t.feature, t.left, t.right))
    d = int(depth(t))
    if d > 24:
        raise ValueError(f"a heap tree holds depth <= 24; this tree has depth {d}")
    size = heap.heap_size(max(d, 0))
    out = {"feature": np.full(size, -1, np.int32), "label": np.zeros(size, np.int32),
           "weight": np.zeros(size, np.float32), "mean": np.zeros(size, np.float32)}
    stack = [(0, 0)]
    while stack:
        node, slot = stack.pop()
        out["feature"][slot] = feature[node]
        out["label"][slot] = int(t.label[node])
        out["weight"][slot] = max(float(t.weight[node]), 0.0) or 1.0
        out["mean"][slot] = float(t.mean[node])
        if feature[node] >= 0:
            stack += [(int(left[node]), 2 * slot + 1), (int(right[node]), 2 * slot + 2)]
    return heap.Tree(*(jnp.asarray(out[k]) for k in ("feature", "label", "weight", "mean")),
                     jnp.zeros(size, jnp.float32))


def to_sklearn(t: NodeTree) -> dict:
    """scikit-learn's ``tree_`` arrays for the nodes in use (host-side numpy): ``children_left``,
    ``children_right`` (-1 at leaves), ``feature`` and ``threshold`` (-2 at leaves; x_f <= 0.5 goes
    left, i.e. x_f = 0), ``value`` (``[nodes, 1, 2]``: the weight of labels 0 and 1),
    ``n_node_samples`` (the weight), ``max_depth``."""
    size = int(t.size)
    feature = np.asarray(t.feature)[:size]
    internal = feature >= 0
    weight, mean = np.asarray(t.weight, np.float64)[:size], np.asarray(t.mean, np.float64)[:size]
    return {"children_left": np.where(internal, np.asarray(t.left)[:size], -1),
            "children_right": np.where(internal, np.asarray(t.right)[:size], -1),
            "feature": np.where(internal, feature, -2),
            "threshold": np.where(internal, 0.5, -2.0),
            "value": np.stack([weight * (1 - mean), weight * mean], axis=-1)[:, None, :],
            "n_node_samples": weight, "max_depth": int(depth(t))}
