"""The target protocol: what every target function f: {0,1}^n -> {0,1} provides.

A target is a pytree: its arrays (support, truth table, code) are leaves and its sizes (k) are
their static shapes, so a batch of targets is one target with a leading axis and ``jax.vmap``
applies. Every target family (one module each: :mod:`~jaxtrees.targets.juntas`,
:mod:`~jaxtrees.targets.trees`, :mod:`~jaxtrees.targets.addressing`,
:mod:`~jaxtrees.targets.agnostic`) implements :class:`Target`; nothing in the package asks a
target for its type. A new family is a class with these five members.

>>> import jax.numpy as jnp
>>> from jaxtrees.targets import parity
>>> f = parity([0, 2], n=4)
>>> isinstance(f, Target), f.batch_shape, f.support_mask(4).tolist()
(True, (), [True, False, True, False])
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import jax
import jax.numpy as jnp

from jaxtrees.core import checks
from jaxtrees.core.bits import assignments  # noqa: F401 - re-exported: it lived here (experiments.studies.rank)


@runtime_checkable
class Target(Protocol):
    """f: {0,1}^n -> {0,1}, evaluated three ways, with its support and its batch shape.

    - ``f(x)``: plain inputs ``x: {0,1}[..., n]`` -> ``int32[...]``;
    - ``f.bits(X)``: bit-packed inputs ``X: uint32[n, W]`` (:mod:`jaxtrees.core.bits`) -> packed
      labels ``uint32[W]``, with word-wide logic and no unpacking;
    - ``f.means(p, fixed, values) -> (mu, mu1)``: the exact oracle under a product distribution
      ``p: float32[n]`` for one restriction (``fixed, values: bool[n]``),
      mu = E[f(x) | x_j = v_j for fixed j] and mu1[i] = E[f(x) | the same and x_i = 1]; all that
      exact (population) growth and exact scoring need; optionally ``f.mean(p, fixed, values) -> mu``
      alone, a cheaper oracle for exact scoring (:func:`~jaxtrees.hypotheses.base.target_mean`);
    - ``f.support_mask(n)``: ``bool[n]``, the variables f may depend on (a superset of the
      relevant ones; for juntas and parities exactly the support J);
    - ``f.batch_shape``: the leading batch axes of its leaves (``()`` for one target).
    """

    def __call__(self, x): ...

    def bits(self, X): ...

    def means(self, p, fixed, values): ...

    def support_mask(self, n: int): ...

    @property
    def batch_shape(self) -> tuple: ...


def support_mask(target: Target, n: int):
    """``bool[n]``: the coordinates the target may depend on (``target.support_mask(n)``); ``n`` (an int >= 1)
    must cover every variable the target reads (checked when they are concrete)."""
    n = checks.integer("n", n, low=1)
    checks.same_n("n", n, target)
    return target.support_mask(n)


def label_covariance(target: Target, p):
    """``float32[n]``: I(D, i) = E[f(x) x_i] - E[f(x)] E[x_i] = p_i (E[f | x_i = 1] - E[f]) under
    the product distribution ``p``, exactly (``target.means``; 000 Sec. 2.1).

    The degree-1 signal that ID3's gain tracks (000 Lemma 6: gain >= beta I^2 / 2) and that a
    network's first gradient steps see: zero off the support; for a k-parity under marginals
    with |p_j - 1/2| >= c on J and p_j in (alpha, 1 - alpha), |I(D, j)| > alpha^2 (2c)^(k-1)
    (000 Lemma 9), and exactly 0 for every j under the uniform distribution when k >= 2.

    >>> import jax.numpy as jnp
    >>> from jaxtrees.targets import parity
    >>> p = jnp.array([0.7, 0.5, 0.4])
    >>> [round(v, 4) for v in label_covariance(parity([0, 2], n=3), p).tolist()]  # 0.7 * 0.3 * 0.2, 0, -0.4 * 0.6 * 0.4
    [0.042, 0.0, -0.096]
    """
    n = jnp.shape(p)[-1]
    checks.same_n("p", n, target)
    unrestricted = jnp.zeros((n,), bool)
    mu, mu1 = target.means(jnp.asarray(p, jnp.float32), unrestricted, unrestricted)
    return p * (mu1 - mu)


def indices_mask(indices, n: int):
    """``bool[n]``: True at the given indices (no scatter: a one-hot sum)."""
    return jnp.any(indices[:, None] == jnp.arange(n), axis=0)


def select(memory, selectors):
    """Word-parallel multiplexer: ``memory[a]`` per example with a = sum_t selectors[t] 2^t.

    Shannon expansion, one selector at a time: v = (~s & v_{s=0}) | (s & v_{s=1}).
    ``memory: uint32[2^t, W]``, ``selectors: uint32[t, W]``.
    """
    v = memory
    for t in range(selectors.shape[0]):
        v = v.reshape(-1, 2, v.shape[-1])
        v = (v[:, 0] & ~selectors[t]) | (v[:, 1] & selectors[t])
    return v[0]


def scatter_support(support, values_on_support, default, n):
    """``[n]`` equal to ``default`` off the support and ``values_on_support`` on it (no scatter)."""
    onehot = support[:, None] == jnp.arange(n)  # [k, n]
    return default + jnp.sum(jnp.where(onehot, (values_on_support - default)[:, None], 0.0), axis=0)


def leading_shape(array: jax.Array, core_ndim: int) -> tuple:
    """The batch axes of a leaf whose unbatched form has ``core_ndim`` axes."""
    return tuple(array.shape[: array.ndim - core_ndim])
