"""Complete decision trees as targets (000 Conjecture 3).

:func:`decision_tree` / :func:`random_tree`: a complete depth-d decision tree, internal node
variables in heap order, no variable repeated on a path.

>>> import jax
>>> f = random_tree(jax.random.key(0), n=8, d=3)
>>> f.feature.shape, f.leaf.shape, int(f.support_mask(8).sum()) <= 7
((7,), (8,), True)
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxtrees.core import checks, prng
from jaxtrees.hypotheses import tree as tree_lib
from jaxtrees.targets.base import indices_mask, leading_shape


class DecisionTree(NamedTuple):
    """A complete depth-d tree: ``feature: int32[2^d - 1]`` (heap order, children of node i at
    2i+1 for x = 0 and 2i+2 for x = 1) and leaf labels ``leaf: bool[2^d]`` (left to right)."""

    feature: jax.Array
    leaf: jax.Array

    @property
    def batch_shape(self) -> tuple:
        return leading_shape(self.leaf, 1)

    def support_mask(self, n: int):
        return indices_mask(self.feature, n)

    @property
    def depth(self) -> int:
        return tree_lib.heap_depth(self.feature.shape[-1] + self.leaf.shape[-1])

    def as_tree(self) -> tree_lib.Tree:
        """The same function as a :class:`jaxtrees.Tree` (for predict, predict_bits, ...)."""
        size = self.feature.shape[-1] + self.leaf.shape[-1]
        label = jnp.concatenate([jnp.zeros(self.feature.shape, jnp.int32), self.leaf.astype(jnp.int32)])
        return tree_lib.Tree(jnp.concatenate([self.feature, jnp.full(self.leaf.shape, -1, jnp.int32)]),
                             label, jnp.ones(size, jnp.float32), label.astype(jnp.float32), jnp.zeros(size, jnp.float32))

    def __call__(self, x):
        return tree_lib.predict(self.as_tree(), x)

    def bits(self, X):
        return tree_lib.predict_bits(self.as_tree(), X)

    def means(self, p, fixed, values):
        # Sum over leaves of label x Pr[path]; a path's probability is the product over its d
        # tests of Pr[x_j = b | restriction], and for mu1[i] the tests of x_i get Pr = [b = 1].
        d = self.depth
        leaves = np.arange(2**d)
        t = np.arange(d)
        node = (2**t - 1) + (leaves[:, None] >> (d - t))  # [2^d, d] heap index of the t-th test
        branch = jnp.asarray((leaves[:, None] >> (d - 1 - t)) & 1, bool)  # [2^d, d]
        var = self.feature[node]
        q1 = jnp.where(fixed[var], values[var].astype(p.dtype), p[var])
        q = jnp.where(branch, q1, 1.0 - q1)  # [2^d, d]
        label = self.leaf.astype(p.dtype)
        mu = jnp.sum(label * jnp.prod(q, axis=-1))
        pinned = jnp.where(var[None] == jnp.arange(p.shape[-1])[:, None, None], branch[None].astype(p.dtype), q[None])
        return mu, jnp.sum(label * jnp.prod(pinned, axis=-1), axis=-1)


def decision_tree(feature, leaf, n: int) -> DecisionTree:
    """The complete depth-d tree with internal variables ``feature`` (2^d - 1, heap order, each
    in [0, n), none repeated on a root-to-leaf path) and leaf labels ``leaf`` (2^d bits)."""
    n = checks.integer("n", n, low=1)
    feature = np.asarray(feature)
    leaf = np.asarray(leaf)
    d = checks.integer("depth = log2(len(leaf))", int(np.log2(max(leaf.size, 1))), low=0, high=n)
    if leaf.shape != (2**d,) or feature.shape != (2**d - 1,):
        raise ValueError(f"leaf must have 2^d entries and feature 2^d - 1, got {leaf.shape} and {feature.shape}")
    if feature.size and (feature.min() < 0 or feature.max() >= n):
        raise ValueError(f"feature entries must be in [0, {n - 1}], got {feature.tolist()}")
    if not np.isin(leaf, (0, 1)).all():
        raise ValueError("leaf must be binary (0/1 or bool)")
    for i in range(feature.size):  # no variable twice on a path
        ancestor = i
        while ancestor:
            ancestor = (ancestor - 1) // 2
            if feature[ancestor] == feature[i]:
                raise ValueError(f"feature {feature[i]} is repeated on the path to node {i}")
    return DecisionTree(jnp.asarray(feature, jnp.int32), jnp.asarray(leaf, bool))


def random_tree(key, n: int, d: int) -> DecisionTree:
    """A uniformly random complete depth-d tree: each internal node tests a uniformly random
    variable not tested by its ancestors; leaf labels are uniform random bits."""
    n = checks.integer("n", n, low=1)
    d = checks.integer("d", d, low=0, high=n)
    k_leaf, k_var = prng.split(key)
    used = jnp.zeros((1, n), bool)
    features = []
    for level in range(d):
        priority = jax.random.uniform(jax.random.fold_in(k_var, level), (2**level, n))
        f = jnp.argmax(jnp.where(used, -1.0, priority), axis=-1).astype(jnp.int32)
        features.append(f)
        used = jnp.repeat(used | (f[:, None] == jnp.arange(n)), 2, axis=0)
    feature = jnp.concatenate(features) if features else jnp.zeros((0,), jnp.int32)
    return DecisionTree(feature, jax.random.bernoulli(k_leaf, 0.5, (2**d,)))
