"""The Lasso by FISTA: the solver of :class:`~jaxtrees.learners.fourier.SparseRecovery`.

:func:`lasso` minimizes c^T G c / 2 - b^T c + sum_j penalty_j |c_j| from the Gram matrix G and the correlations b
alone, with adaptive (gradient) restart and a step from a power-iteration estimate of G's largest eigenvalue.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

#: Power iterations for the Gram matrix's largest eigenvalue (FISTA's step is 1 / (1.1 lambda_max)).
POWER_ITERATIONS = 100


class _Fista(NamedTuple):
    step: jax.Array
    c: jax.Array  # the iterate
    z: jax.Array  # the extrapolated point
    t: jax.Array  # the momentum sequence
    change: jax.Array  # max |c_new - c| of the last step


def lasso(gram, correlations, penalty, steps: int, tol: float):
    """argmin_c c^T G c / 2 - b^T c + sum_j penalty_j |c_j| by FISTA with gradient restart
    (O'Donoghue and Candes 2015), step 1 / L with L = max(1.1 lambda_max(G) estimated by power
    iteration, max_j G_jj); at most ``steps`` steps, until no coordinate moves more than ``tol``."""
    dot = functools.partial(jnp.matmul, precision=lax.Precision.HIGHEST)
    L = jnp.maximum(1.1 * _top_eigenvalue(gram, dot), jnp.max(jnp.diagonal(gram)))
    threshold = penalty / L

    def body(s: _Fista) -> _Fista:
        v = s.z - (dot(gram, s.z) - correlations) / L
        c = jnp.sign(v) * jnp.maximum(jnp.abs(v) - threshold, 0.0)
        restart = jnp.sum((s.z - c) * (c - s.c)) > 0  # the momentum points uphill: drop it
        t = jnp.where(restart, 1.0, (1.0 + jnp.sqrt(1.0 + 4.0 * s.t**2)) / 2.0)
        z = jnp.where(restart, c, c + (s.t - 1.0) / t * (c - s.c))
        return _Fista(s.step + 1, c, z, t, jnp.max(jnp.abs(c - s.c)))

    zeros = jnp.zeros_like(correlations)
    start = _Fista(jnp.int32(0), zeros, zeros, jnp.float32(1.0), jnp.float32(jnp.inf))
    return lax.while_loop(lambda s: (s.step < steps) & (s.change > tol), body, start).c


def _top_eigenvalue(gram, dot):
    """The Rayleigh quotient after ``POWER_ITERATIONS`` power steps from a fixed random start."""
    def step(_, v):
        w = dot(gram, v)
        return w / jnp.maximum(jnp.linalg.norm(w), 1e-30)

    v = jax.random.normal(jax.random.key(0), gram.shape[-1:], jnp.float32)
    v = lax.fori_loop(0, POWER_ITERATIONS, step, v / jnp.linalg.norm(v))
    return jnp.sum(v * dot(gram, v))
