"""Product distributions over {0,1}^n, given by their marginals ``p: float32[n]``, p_i = Pr[x_i = 1].

A family (:func:`uniform`, :func:`product`, :func:`alpha_c`, :func:`smoothed`) is a small pytree
whose hyperparameters are checked when it is built; ``family.marginals(key, n)`` draws one
distribution, :func:`marginals` (``batch=B``) or ``jax.vmap`` over keys a batch. References are
to 000 (Brutzkus-Daniely-Malach 2020) and 002 (Blanc-Lange-Qiao-Tan 2021).

>>> import jax
>>> fam = smoothed(c=0.1)                       # p_i ~ U[0.4, 0.6]
>>> p = marginals(fam, jax.random.key(0), n=8, batch=4)
>>> p.shape
(4, 8)
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxtrees.core import checks, prng


class Uniform(NamedTuple):
    """The uniform distribution (build with :func:`uniform`)."""

    def marginals(self, key, n: int):
        del key
        return jnp.full((_n(n),), 0.5, jnp.float32)


class Product(NamedTuple):
    """Fixed marginals ``p: float32[n]`` (build with :func:`product`)."""

    p: jax.Array

    def marginals(self, key, n: int):
        del key
        if self.p.shape != (_n(n),):
            raise ValueError(f"n must equal len(p) = {self.p.shape[0]} for a product distribution, got {n}")
        return jnp.asarray(self.p, jnp.float32)


class AlphaC(NamedTuple):
    """(alpha, c)-distributions (build with :func:`alpha_c`)."""

    alpha: float
    c: float

    def marginals(self, key, n: int):
        n = _n(n)
        k_sign, k_mag = prng.split(key)
        sign = jnp.where(jax.random.bernoulli(k_sign, 0.5, (n,)), 1.0, -1.0)
        u = jax.random.uniform(k_mag, (n,), jnp.float32)
        dist = self.c + u * (0.5 - self.alpha - self.c)  # |p - 1/2| in [c, 1/2 - alpha)
        return (0.5 + sign * dist).astype(jnp.float32)


class Smoothed(NamedTuple):
    """c-smoothened product distributions around ``p_hat`` (build with :func:`smoothed`)."""

    p_hat: jax.Array  # scalar or float32[n]
    c: float

    def marginals(self, key, n: int):
        _smoothing(self.p_hat, self.c)
        p_hat = jnp.broadcast_to(jnp.asarray(self.p_hat, jnp.float32), (_n(n),))
        delta = jax.random.uniform(key, (n,), jnp.float32, -1.0, 1.0) * self.c
        return p_hat + delta


Family = Uniform | Product | AlphaC | Smoothed


def _smoothing(p_hat, c) -> None:
    """A concrete ``c`` of :class:`Smoothed` in [0, 1/2], and within [0, 1] around a concrete ``p_hat``: every p_i in
    [0, 1] (a traced c is not checked; the class built directly, as :func:`smoothed` checks its arguments)."""
    if not checks.is_concrete(c) or np.ndim(c) != 0:
        return
    high = 0.5
    if checks.is_concrete(p_hat):
        p_hat = np.asarray(p_hat, np.float64)
        high = min(high, float(np.min(p_hat)), float(np.min(1.0 - p_hat)))
    checks.real("c", float(np.asarray(c)), low=0.0, high=max(high, 0.0))


def _n(n) -> int:
    """The number of variables a family's ``marginals`` draws: an int >= 1."""
    return checks.integer("n", n, low=1)


def uniform() -> Uniform:
    """The uniform distribution on {0,1}^n."""
    return Uniform()


def product(p) -> Product:
    """The product distribution with marginals ``p`` (each in [0, 1]). A traced ``p`` cannot be checked:
    out of range, its marginals come back all NaN (issue 58), never a plausible p."""
    p = checks.probabilities("p", p)
    if not checks.is_concrete(p):
        p = jnp.asarray(p, jnp.float32)
        p = jnp.where(jnp.all((p >= 0.0) & (p <= 1.0)), p, jnp.nan)
    return Product(jnp.asarray(p))


def alpha_c(alpha: float, c: float) -> AlphaC:
    """Random (alpha, c)-distributions (000 Sec. 1.2): |p_i - 1/2| > c, p_i in (alpha, 1 - alpha),
    drawn with p_i - 1/2 uniform on that set.

    Requires ``c`` in [0, 1/2) and ``alpha`` in [0, 1/2 - c).
    """
    c = checks.real("c", c, low=0.0, high=0.5, high_open=True)
    alpha = checks.real("alpha", alpha, low=0.0, high=0.5 - c, high_open=True)
    return AlphaC(alpha, c)


def smoothed(c: float, p_hat=0.5, delta: float = 0.0) -> Smoothed:
    """Random c-smoothened delta-balanced distributions (002 Def. 9; 000's "smoothened
    (alpha, c)-distribution" with alpha = delta): p_i = p_hat_i + Delta_i, Delta_i ~ U[-c, c] i.i.d.

    ``p_hat`` (a scalar or a vector of length n) must lie in (delta + c, 1 - delta - c), so every
    p_i lies in [delta, 1 - delta]. ``c`` = 0 gives the fixed product distribution p_hat.
    """
    delta = checks.real("delta", delta, low=0.0, high=0.5, high_open=True)
    c = checks.real("c", c, low=0.0, high=0.5 - delta, high_open=True)
    p_hat_arr = np.atleast_1d(np.asarray(p_hat, dtype=np.float64))
    checks.probabilities("p_hat", p_hat_arr, low=delta + c, high=1.0 - delta - c,
                          low_open=c > 0 or delta > 0, high_open=c > 0 or delta > 0)
    return Smoothed(jnp.asarray(p_hat, jnp.float32), c)


def marginals(family: Family, key, n: int, batch: int | None = None):
    """Draw ``float32[n]`` marginals, or ``float32[batch, n]`` from ``batch`` independent keys.

    The b-th row uses ``jax.random.split(key, batch)[b]``, so a batch equals a loop of single draws.
    """
    n = checks.integer("n", n, low=1)
    if batch is None:
        return family.marginals(key, n)
    batch = checks.integer("batch", batch, low=1)
    return jax.vmap(lambda k: family.marginals(k, n))(prng.split(key, batch))
