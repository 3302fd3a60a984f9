"""Targets of bounded Ehrenfeucht-Haussler rank (003): decision lists and random rank-r trees.

A :class:`NodeTreeTarget` is any node-list tree (:class:`~jaxtrees.hypotheses.node_tree.NodeTree`)
used as a target: deep and sparse trees whose complete heap would not fit.
:func:`random_rank_tree` draws a reduced tree of rank exactly r made of spines of L tests (its
generator is described there); a decision list of L tests is the case r = 1
(:func:`random_decision_list`).

>>> import jax
>>> from jaxtrees.hypotheses import node_tree
>>> f = random_rank_tree(jax.random.key(0), n=8, r=2, length=2)
>>> int(node_tree.rank(f.tree)), int(node_tree.n_leaves(f.tree)), int(node_tree.depth(f.tree))
(2, 9, 4)
>>> f(jax.numpy.zeros((2, 8), int)).shape
(2,)
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxtrees.core import checks, prng
from jaxtrees.hypotheses import node_tree
from jaxtrees.hypotheses.node_tree import NodeTree
from jaxtrees.targets.base import leading_shape


class NodeTreeTarget(NamedTuple):
    """A node-list tree as a target: f(x) is the label of the leaf x reaches. Its oracle multiplies the
    tests of a path, so the tree must not test a variable twice on a path (``node_tree.reduce`` makes it so)."""

    tree: NodeTree

    @property
    def batch_shape(self) -> tuple:
        return leading_shape(self.tree.feature, 1)

    def support_mask(self, n: int):
        return jnp.any((self.tree.feature[:, None] == jnp.arange(n)) & node_tree.in_use(self.tree)[:, None], axis=0)

    def __call__(self, x):
        return node_tree.predict(self.tree, x)

    def bits(self, X):
        return node_tree.predict_bits(self.tree, X)

    def means(self, p, fixed, values):
        return node_tree.means(self.tree, p, fixed, values)

    def mean(self, p, fixed, values):
        return node_tree.mean(self.tree, p, fixed, values)


class _Template(NamedTuple):
    """The shape of T(r) with spine length L, in creation order (parents before children)."""

    left: np.ndarray
    right: np.ndarray
    parent: np.ndarray
    spine: np.ndarray  # bool: a spine test whose sides are (T(r - 1), the rest of the spine)
    opposite: np.ndarray  # for the right leaf under the last test of a T(1): its sibling; else -1


@functools.lru_cache(maxsize=256)
def _template(r: int, length: int) -> _Template:
    left, right, parent, spine = [], [], [], []

    def new(p):
        for a, v in ((left, -1), (right, -1), (parent, p), (spine, False)):
            a.append(v)
        return len(left) - 1

    def build(rank, at):  # fills slot `at` with T(rank)
        if rank == 0:
            return
        tests = [at] + [new(None) for _ in range(length - 1)]
        for j, node in enumerate(tests):
            parent[node] = parent[node] if j == 0 else tests[j - 1]
            hang = new(node)
            build(rank - 1, hang)
            other = tests[j + 1] if j + 1 < length else new(node)
            if j + 1 == length:
                build(rank - 1, other)
            left[node], right[node], spine[node] = hang, other, j + 1 < length

    build(r, new(-1))
    left, right, parent = (np.asarray(a, np.int32) for a in (left, right, parent))
    opposite = np.full(len(left), -1, np.int32)
    last = np.flatnonzero((left >= 0) & (left[np.maximum(left, 0)] < 0) & (left[np.maximum(right, 0)] < 0))
    opposite[right[last]] = left[last]
    return _Template(left, right, parent, np.asarray(spine), opposite)


def random_rank_tree(key, n: int, r, length: int = 2, *, r_max: int | None = None) -> NodeTreeTarget:
    """A random tree of rank exactly r: spines of ``length`` = L tests, depth r L <= n,
    (L + 1)^r leaves. Jit- and vmap-able over ``key`` (n, r, length static).

    With ``r_max`` (static), r may be traced (1 <= r <= r_max, r_max L <= n): the tree drawn for
    r, node for node the same as ``random_rank_tree(key, n, r, length)``, in the capacity of the
    rank-r_max tree (the slots past its size unused).

    The generator: T(0) is a leaf with a uniform random label; T(r) is a *spine* of L tests
    x_{v_1}, ..., x_{v_L}; at spine test j < L one side (uniformly at random) is a fresh T(r - 1)
    and the other continues the spine; the last test has a fresh T(r - 1) on both sides. Every
    test's variable is uniform among those not tested above it (the tree is reduced). The two
    leaves under the last test of every T(1) get different labels, so every T(1) has rank 1 and
    T(r) has rank exactly r (a spine test joins ranks r - 1 and r; the last joins r - 1 and r - 1).
    The function may still have a smaller tree of lower rank.
    """
    if r_max is not None:
        return _padded_rank_tree(key, n, r, length, r_max)
    n = checks.integer("n", n, low=1)
    r = checks.integer("r", r, low=0, high=n)
    length = checks.integer("length", length, low=1, high=max(n // max(r, 1), 1))
    if r * length > n:
        raise ValueError(f"length must be in [1, n // r] = [1, {n // r}]: the tree has depth r * length <= n")
    t = _template(r, length)
    C = t.left.size
    k_var, k_side, k_label = prng.split(key, 3)
    internal = jnp.asarray(t.left >= 0)
    swap = jnp.asarray(t.spine) & jax.random.bernoulli(k_side, 0.5, (C,))
    left = jnp.where(swap, jnp.asarray(t.right), jnp.asarray(t.left))
    right = jnp.where(swap, jnp.asarray(t.left), jnp.asarray(t.right))
    label = jax.random.bernoulli(k_label, 0.5, (C,)).astype(jnp.int32)
    opposite = jnp.asarray(t.opposite)
    label = jnp.where(opposite >= 0, 1 - label[jnp.maximum(opposite, 0)], label)
    label = jnp.where(internal, 0, label)
    shape = NodeTree(jnp.where(internal, 0, -1), left, right, jnp.asarray(t.parent), label,
                     jnp.ones((C,), jnp.float32), label.astype(jnp.float32), jnp.int32(C))
    priority = jax.random.uniform(k_var, (C, n))

    def choose(used, node):  # each test: the unused variable of largest priority
        return jnp.argmax(jnp.where(used, -1.0, priority[node]), axis=-1).astype(jnp.int32)

    def step(used, parent, node):
        return used | (choose(used, parent)[:, None] == jnp.arange(n))

    used = node_tree.top_down(shape, jnp.zeros((n,), bool), step)
    feature = jnp.where(internal, choose(used, jnp.arange(C)), -1)
    return NodeTreeTarget(shape._replace(feature=feature))


def _padded_rank_tree(key, n: int, r, length: int, r_max: int) -> NodeTreeTarget:
    """:func:`random_rank_tree` for a traced r: one branch per rank 1..r_max, each padded to the
    rank-r_max tree's capacity (unused slots: feature = left = right = -1, zeros elsewhere)."""
    r_max = checks.integer("r_max", r_max, low=1, high=n)
    if checks.is_concrete(r):
        checks.integer("r", int(r), low=1, high=r_max)
    capacity = _template(r_max, length).left.size

    def drawn(rank):
        t = random_rank_tree(key, n, rank, length).tree
        pad = capacity - t.feature.shape[-1]
        fill = {"feature": -1, "left": -1, "right": -1}
        return t._replace(**{name: jnp.pad(getattr(t, name), (0, pad), constant_values=fill.get(name, 0))
                             for name in NodeTree._fields if name != "size"})

    branches = [functools.partial(drawn, rank) for rank in range(1, r_max + 1)]
    return NodeTreeTarget(jax.lax.switch(jnp.asarray(r, jnp.int32) - 1, branches))  # (switch clamps the index)


def random_decision_list(key, n: int, length: int) -> NodeTreeTarget:
    """A random decision list of ``length`` tests (rank 1): "if x_{v_1} = b_1 then a_1, else if
    x_{v_2} = b_2 then a_2, ..., else a_L or its negation", distinct uniform variables, uniform
    bits b_j and labels a_j; :func:`random_rank_tree` with r = 1."""
    return random_rank_tree(key, n, 1, length)
