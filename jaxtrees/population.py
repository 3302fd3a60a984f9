"""The infinite-sample ("population") setting: exact growth and exact scoring.

In the idealized setting of 002 Sec. 2 the purity gains are computed on the true distribution.
A node is a restriction rho (which features are fixed, to which values); under a product
distribution p its probability is prod_{j fixed} Pr[x_j = v_j], and the target's oracle
``f.means(p, fixed, values)`` gives mu = E[f | rho] and mu1[i] = E[f | rho, x_i := 1]. Then

    w = Pr[rho],  wy = w mu,  w1[i] = w p_i,  w1y[i] = w p_i mu1[i]   (0 for fixed i),

are exactly the statistics the empirical engine counts, and the shared growth loop of
:mod:`jaxtrees.growth` does the rest. The tree's ``weight`` is then Pr[node], ``mean`` is
E[f | node], and stop rules on sample counts do not apply.

The exact error of any tree (grown from samples or not) is

    err(T) = sum over leaves v of Pr[v] |label(v) - E[f | v]|,

and :func:`error_by_depth` gives it for the tree truncated at every depth 0..D.

Path mode (:func:`follow_path`) follows the single root-to-leaf path of an input x without
storing the tree, so depths far beyond a heap (2^k for the addressing targets) are reachable.
For x ~ p, functions of the path are unbiased estimates of the tree's: E_x[min(mu_d, 1 - mu_d)]
(mu_d the mean of x's node at depth d) is the error of the tree truncated at depth d.

>>> import jax, jaxtrees as jt
>>> key = jax.random.key(0)
>>> p = jt.smoothed(c=0.1).marginals(key, 12)
>>> f = jt.random_junta(key, n=12, k=3)
>>> t = jax.jit(grow_exact)(p, f, jt.GrowthRule(max_depth=3))
>>> float(jax.jit(exact_error)(t, p, f))
0.0
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxtrees import growth
from jaxtrees.tree import Tree, node_levels


#: A node whose exact mean label is within this of 0 or 1 is pure (float32 sums of products
#: carry rounding errors of a few ulps).
PURITY_TOL = 1e-6


class Restrictions(NamedTuple):
    """The restrictions of the L nodes of one level: ``fixed, values: bool[L, n]``, ``weight: [L]``."""

    fixed: jax.Array
    values: jax.Array
    weight: jax.Array


def grow_exact(p, target, rule: growth.GrowthRule, key=None) -> Tree:
    """Grow the tree an impurity-based learner builds with infinitely many examples from p.

    ``p: float32[n]``; ``target`` any target with a ``means`` oracle. Same rule and outputs as
    :func:`jaxtrees.grow` (``min_samples_*`` are ignored). Batch with ``jax.vmap``.
    """
    key = growth.check_key(rule, key)
    growth.check_heap_depth(rule)
    p = jnp.asarray(p, jnp.float32)
    n = p.shape[-1]
    means = jax.vmap(target.means, in_axes=(None, 0, 0))

    def stats(r: Restrictions, with_features: bool):
        mu, mu1 = means(p, r.fixed, r.values)
        w = r.weight
        if not with_features:
            return growth.LevelStats(w, w * mu, None, None)
        w1 = jnp.where(r.fixed, 0.0, w[:, None] * p)
        return growth.LevelStats(w, w * mu, w1, w1 * mu1)

    def children(r: Restrictions, level_stats, feature, split, with_features):
        onehot = (feature[:, None] == jnp.arange(n)) & split[:, None]
        p_f = jnp.sum(jnp.where(onehot, p, 0.0), axis=-1)
        fixed = r.fixed | onehot
        child = Restrictions(
            fixed=growth.interleave(fixed, fixed),
            values=growth.interleave(r.values & ~onehot, r.values | onehot),
            weight=growth.interleave(jnp.where(split, r.weight * (1.0 - p_f), 0.0),
                                      jnp.where(split, r.weight * p_f, 0.0)),
        )
        return child, stats(child, with_features)

    root = Restrictions(jnp.zeros((1, n), bool), jnp.zeros((1, n), bool), jnp.ones((1,), jnp.float32))
    return growth.grow_levels(stats(root, True), root, children, rule, key, min_count=False,
                              purity_tol=PURITY_TOL)


class Path(NamedTuple):
    """One root-to-leaf path of the population tree (:func:`follow_path`); D = ``rule.max_depth``.

    ``feature: int32[D]``: the variable queried at depth d, -1 from the leaf on;
    ``gain: float32[D]``: its exact purity gain (0 from the leaf on);
    ``mean: float32[D+1]``: E[f | the node at depth d], the leaf's from the leaf on.
    """

    feature: jax.Array
    gain: jax.Array
    mean: jax.Array

    @property
    def error(self):
        """``float32[D+1]``: min(mu_d, 1 - mu_d), this path's error term of the tree truncated at
        depth d (its node labelled by majority); averaged over x ~ p, the exact truncated error."""
        return jnp.minimum(self.mean, 1.0 - self.mean)

    @property
    def depth(self):
        """Depth of the path's leaf."""
        return jnp.sum(self.feature >= 0, axis=-1)

    def first_query(self, mask):
        """Depth of the first query of a variable in ``mask: bool[n]``, or -1 if none is queried."""
        hit = mask[jnp.maximum(self.feature, 0)] & (self.feature >= 0)
        return jnp.where(jnp.any(hit, axis=-1), jnp.argmax(hit, axis=-1), -1).astype(jnp.int32)


def follow_path(p, target, rule: growth.GrowthRule, x, key=None) -> Path:
    """Follow input ``x: bool[n]`` down the tree :func:`grow_exact` would build for ``rule``.

    At each node the rule picks the variable of largest exact gain under the current restriction
    (same gains, tie tolerance and stop rules as :func:`grow_exact`) and the path fixes it to x's
    value. With ``tie_break="random"`` each node breaks its ties with its own key,
    ``fold_in(fold_in(key, v_1), ...)`` over the values v_1, v_2, ... that lead to it, so every
    input reaching a node makes the same choice: paths of different x belong to one random tree
    (distributed as :func:`grow_exact`'s, not equal to it). ``rule.max_depth`` may exceed 24 (up
    to ``growth.MAX_PATH_DEPTH``): a path costs D oracle calls and O(D + n) memory. Draw
    x ~ p (``jax.random.bernoulli(key, p)``) for unbiased estimates; batch with ``jax.vmap``.

    >>> import jax, jaxtrees as jt
    >>> f = jt.addressing(c=4, k=3)                    # n = 4 * 9 + 8 = 44
    >>> p = jt.uniform().marginals(jax.random.key(0), f.n)
    >>> x = jax.random.bernoulli(jax.random.key(1), p)
    >>> path = jax.jit(follow_path)(p, f, jt.GrowthRule(max_depth=40, impurity="gini", tie_tol=0.0), x)
    >>> int(path.first_query(jnp.arange(f.n) < f.n_address))   # all 8 memory bits come first
    8
    """
    key = growth.check_key(rule, key)
    p = jnp.asarray(p, jnp.float32)
    n = p.shape[-1]
    x = jnp.asarray(x, bool)
    if x.shape != p.shape:
        raise ValueError(f"x must have the shape of p, {p.shape}, got {x.shape}")

    def step(state, _):
        fixed, values, node_key = state
        mu, mu1 = target.means(p, fixed, values)
        w1 = jnp.where(fixed, 0.0, p)[None]
        stats = growth.LevelStats(jnp.ones((1,)), mu[None], w1, w1 * mu1[None])
        feature, gain = growth.decide(stats, fixed[None], rule, node_key, min_count=False,
                                      purity_tol=PURITY_TOL)
        chosen = jnp.arange(n) == feature[0]
        if rule.tie_break == "random":
            node_key = jax.random.fold_in(node_key, jnp.any(chosen & x))
        return (fixed | chosen, jnp.where(chosen, x, values), node_key), (feature[0], gain[0], mu)

    (fixed, values, _), (feature, gain, mean) = jax.lax.scan(
        step, (jnp.zeros(n, bool), jnp.zeros(n, bool), key), None, length=rule.max_depth)
    last, _ = target.means(p, fixed, values)
    return Path(feature, gain, jnp.concatenate([mean, last[None]]))


def node_restrictions(tree: Tree, p) -> Restrictions:
    """The restriction of every heap slot and its probability Pr[node] under p.

    ``fixed, values: bool[N, n]``, ``weight: float32[N]``; slots that are not nodes of the tree
    get the restriction of the path to them (see :func:`reached`).
    """
    p = jnp.asarray(p, jnp.float32)
    n = p.shape[-1]
    fixed = [jnp.zeros((1, n), bool)]
    values = [jnp.zeros((1, n), bool)]
    for level in range(tree.max_depth):
        lo, hi = 2**level - 1, 2 ** (level + 1) - 1
        onehot = tree.feature[lo:hi, None] == jnp.arange(n)
        f = fixed[-1] | onehot
        fixed.append(growth.interleave(f, f))
        values.append(growth.interleave(values[-1] & ~onehot, values[-1] | onehot))
    fixed, values = jnp.concatenate(fixed), jnp.concatenate(values)
    prob = jnp.prod(jnp.where(fixed, jnp.where(values, p, 1.0 - p), 1.0), axis=-1)
    return Restrictions(fixed, values, prob)


def node_errors(tree: Tree, p, target):
    """``float32[N]``: Pr[v] |label(v) - E[f | v]| for every node v of the tree (0 elsewhere)."""
    r = node_restrictions(tree, p)
    mu, _ = jax.vmap(target.means, in_axes=(None, 0, 0))(jnp.asarray(p, jnp.float32), r.fixed, r.values)
    return jnp.where(reached(tree), r.weight * jnp.abs(tree.label - mu), 0.0)


def exact_error(tree: Tree, p, target):
    """Pr_{x ~ p}[tree(x) != f(x)], exactly (float32)."""
    leaf = reached(tree) & (tree.feature < 0)
    return jnp.sum(jnp.where(leaf, node_errors(tree, p, target), 0.0))


def error_by_depth(tree: Tree, p, target):
    """``float32[D+1]``: the exact error of the tree truncated at depth d, for d = 0..D.

    Truncating at d turns the nodes at depth d into leaves labelled by their majority label.
    """
    errors = node_errors(tree, p, target)
    levels = jnp.asarray(node_levels(tree.max_depth))
    node = reached(tree)
    leaf = node & (tree.feature < 0)
    d = jnp.arange(tree.max_depth + 1)[:, None]
    counted = node & ((levels == d) | (leaf & (levels < d)))
    return jnp.sum(jnp.where(counted, errors, 0.0), axis=-1)


def reached(tree: Tree):
    """``bool[N]``: slots that are nodes of the tree: the root and the children of split nodes.

    Unlike ``weight > 0`` this holds for any tree, e.g. one built by hand.
    """
    return jnp.concatenate([jnp.ones((1,), bool), jnp.repeat(tree.feature >= 0, 2)[: tree.feature.shape[-1] - 1]])
