"""The infinite-sample ("population") setting: exact growth (:class:`PopulationTree`) and path mode.

Gains are computed on the true distribution (002 Sec. 2): the target's exact oracle ``f.means`` gives each node the
statistics the empirical engine would count (:func:`grow_exact`), and the shared growth loop does the rest. Path mode
(:func:`follow_path`) follows one input's root-to-leaf path without storing the tree, so depths far beyond a heap
(2^k for the addressing targets) are reachable.

>>> import jax, jaxtrees as jt
>>> key = jax.random.key(0)
>>> p = jt.smoothed(c=0.1).marginals(key, 12)
>>> f = jt.random_junta(key, n=12, k=3)
>>> t = jax.jit(grow_exact)(p, f, jt.GrowthRule(max_depth=3))
>>> float(jax.jit(jt.exact_error)(t, p, f))
0.0
>>> t2 = jax.jit(PopulationTree(jt.GrowthRule(max_depth=3)).fit)(key, jt.problems.Population(p, f))  # the learner
>>> bool(jax.numpy.all(t2.feature == t.feature))
True
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxtrees.core import checks
from jaxtrees.core import impurity as impurity_lib
from jaxtrees.hypotheses.tree import Restrictions, Tree, interleave
from jaxtrees.learners import growth
from jaxtrees.problems import Population


#: A node whose exact mean label is within this of 0 or 1 is pure (float32 sums of products
#: carry rounding errors of a few ulps).
PURITY_TOL = 1e-6


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class PopulationTree:
    """The learner: :func:`grow_exact` with a fixed rule, fitted on a
    :class:`~jaxtrees.problems.Population` (``access = "population"``); ``fit(key, population) -> Tree``."""

    rule: growth.GrowthRule
    access = "population"

    def fit(self, key, data: Population) -> Tree:
        p = checks.probabilities("p", data.p)
        return grow_exact(p, data.target, self.rule, key)


def grow_exact(p, target, rule: growth.GrowthRule, key=None) -> Tree:
    """Grow the tree an impurity-based learner builds with infinitely many examples from p.

    ``p: float32[n]``; ``target`` any target with a ``means`` oracle. Same rule and outputs as
    :func:`jaxtrees.grow` (``min_samples_*`` are ignored). Batch with ``jax.vmap``; compiled on
    first call for each rule, target type and shape.

    In the idealized setting of 002 Sec. 2 the purity gains are computed on the true distribution.
    A node is a restriction rho (which features are fixed, to which values); under a product
    distribution p its probability is prod_{j fixed} Pr[x_j = v_j], and the target's oracle
    ``f.means(p, fixed, values)`` gives mu = E[f | rho] and mu1[i] = E[f | rho, x_i := 1]. Then

        w = Pr[rho],  wy = w mu,  w1[i] = w p_i,  w1y[i] = w p_i mu1[i]   (0 for fixed i),

    are exactly the statistics the empirical engine counts, and the shared growth loop of
    :mod:`jaxtrees.learners.growth` does the rest. The tree's ``weight`` is then Pr[node], ``mean`` is
    E[f | node], and stop rules on sample counts do not apply.

    The exact error of any tree (grown from samples or not) is
    :func:`jaxtrees.hypotheses.tree.exact_error`.
    """
    growth.check_heap_depth(rule)
    checks.same_n("p", jnp.shape(p)[-1], target)
    return _grow_exact(jnp.asarray(p, jnp.float32), target, rule, growth.check_key(rule, key))


@functools.partial(jax.jit, static_argnames="rule")
def _grow_exact(p, target, rule: growth.GrowthRule, key) -> Tree:
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
            fixed=interleave(fixed, fixed),
            values=interleave(r.values & ~onehot, r.values | onehot),
            weight=interleave(jnp.where(split, r.weight * (1.0 - p_f), 0.0),
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


def follow_path(p, target, rule: growth.GrowthRule, x, key=None, *, impurity=None) -> Path:
    """Follow input ``x: bool[n]`` down the tree :func:`grow_exact` would build for ``rule``.

    At each node the rule picks the variable of largest exact gain under the current restriction
    (same gains, tie tolerance and stop rules as :func:`grow_exact`) and the path fixes it to x's
    value. With ``tie_break="random"`` each node breaks its ties with its own key,
    ``fold_in(fold_in(key, v_1), ...)`` over the values v_1, v_2, ... that lead to it, so every
    input reaching a node makes the same choice: paths of different x belong to one random tree
    (distributed as :func:`grow_exact`'s, not equal to it). ``rule.max_depth`` may exceed 24 (up
    to ``growth.MAX_PATH_DEPTH``): a path costs D oracle calls and O(D + n) memory. Draw
    x ~ p (``jax.random.bernoulli(key, p)``) for unbiased estimates; batch with ``jax.vmap``.
    ``impurity`` (a built-in's name, its index in :data:`jaxtrees.core.impurity.NAMES` (may be traced) or a
    :class:`~jaxtrees.core.impurity.Selected`)
    replaces ``rule.impurity``: one compiled program for every impurity.

    >>> import jax, jaxtrees as jt
    >>> f = jt.addressing(c=4, k=3)                    # n = 4 * 9 + 8 = 44
    >>> p = jt.uniform().marginals(jax.random.key(0), f.n)
    >>> x = jax.random.bernoulli(jax.random.key(1), p)
    >>> path = jax.jit(follow_path)(p, f, jt.GrowthRule(max_depth=40, impurity="gini", tie_tol=0.0), x)
    >>> int(path.first_query(jnp.arange(f.n) < f.n_address))   # all 8 memory bits come first
    8

    Path mode (:func:`follow_path`) follows the single root-to-leaf path of an input x without
    storing the tree, so depths far beyond a heap (2^k for the addressing targets) are reachable.
    For x ~ p, functions of the path are unbiased estimates of the tree's: E_x[min(mu_d, 1 - mu_d)]
    (mu_d the mean of x's node at depth d) is the error of the tree truncated at depth d.
    """
    key = growth.check_key(rule, key)
    if impurity is not None:
        impurity = impurity_lib.selected(impurity)  # a name is checked there
    p = jnp.asarray(p, jnp.float32)
    n = p.shape[-1]
    checks.same_n("p", n, target)
    x = jnp.asarray(x, bool)
    if x.shape != p.shape:
        raise ValueError(f"x must have the shape of p, {p.shape}, got {x.shape}")

    def step(state, _):
        fixed, values, node_key = state
        mu, mu1 = target.means(p, fixed, values)
        w1 = jnp.where(fixed, 0.0, p)[None]
        stats = growth.LevelStats(jnp.ones((1,)), mu[None], w1, w1 * mu1[None])
        feature, gain = growth.decide(stats, fixed[None], rule, node_key, min_count=False,
                                      purity_tol=PURITY_TOL, impurity=impurity)
        chosen = jnp.arange(n) == feature[0]
        if rule.random:
            node_key = jax.random.fold_in(node_key, jnp.any(chosen & x))
        return (fixed | chosen, jnp.where(chosen, x, values), node_key), (feature[0], gain[0], mu)

    (fixed, values, _), (feature, gain, mean) = jax.lax.scan(
        step, (jnp.zeros(n, bool), jnp.zeros(n, bool), key), None, length=rule.max_depth)
    last, _ = target.means(p, fixed, values)
    return Path(feature, gain, jnp.concatenate([mean, last[None]]))
