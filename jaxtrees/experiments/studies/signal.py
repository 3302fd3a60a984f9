"""The exact signal of a junta under a product distribution (000 Thm 7): what the learning and smoothed-base trials
record beside their success.

:func:`restriction_signal` gives a trial's ``eps_star`` and ``p_min``; :data:`SIGNAL_COLUMNS` says what they mean.
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np

from jaxtrees import targets

def restriction_signal(f, p):
    """``(eps_star, p_min)`` of a junta (or parity) ``f`` under the product distribution ``p``, exactly (000 Thm 7):
    eps_star is the smallest, over the restrictions w of the support (3^K of them, K its slots) with f_w not
    constant, of the largest |I(D_w, i)| = p_i |E[f | w, x_i = 1] - E[f | w]| over the support's free i; p_min =
    prod_{j in J} min(p_j, 1 - p_j), the smallest mass of a full restriction of the support (Theorem 7's
    alpha^k). Whether f_w is constant is read from the truth table (exact); +inf for a constant f. Padding slots
    (a junta padded to k_max) change neither."""
    f = targets.as_junta(f)
    K, n = f.support.shape[0], p.shape[-1]
    digits = np.array(list(itertools.product(range(3), repeat=K)), np.int64).reshape(-1, K)  # 2: free
    fixed_slots, value_slots = digits < 2, digits == 1
    assignment = (np.arange(2**K)[:, None] >> np.arange(K)) & 1  # [2^K, K]: row a's bits
    consistent = np.all(~fixed_slots[:, None, :] | (assignment[None] == value_slots[:, None, :]), axis=-1)
    ones = jnp.asarray(consistent, jnp.int32) @ f.table.astype(jnp.int32)
    nonconstant = (ones > 0) & (ones < jnp.asarray(consistent.sum(axis=1), jnp.int32))
    onehot = (f.support[:, None] == jnp.arange(n)).astype(jnp.int32)  # [K, n]
    fixed = (jnp.asarray(fixed_slots, jnp.int32) @ onehot) > 0
    values = (jnp.asarray(value_slots, jnp.int32) @ onehot) > 0
    mu, mu1 = jax.vmap(lambda a, b: f.means(p, a, b))(fixed, values)
    free = (jnp.sum(onehot, axis=0) > 0)[None] & ~fixed
    best = jnp.max(jnp.where(free, jnp.abs(p * (mu1 - mu[:, None])), 0.0), axis=1)
    eps_star = jnp.min(jnp.where(nonconstant, best, jnp.inf))
    p_min = jnp.prod(jnp.where(f.support_mask(n), jnp.minimum(p, 1 - p), 1.0))
    return eps_star, p_min


#: The signal columns the parity and juntas studies add (000 Thm 7, Lemmas 9 and 11).
SIGNAL_COLUMNS = {
    "eps_star": "min over restrictions w of the support with f_w not constant of max_i |I(D_w, i)| (exact; 000 Thm 7's "
                "eps)",
    "p_min": "prod_{j in J} min(p_j, 1 - p_j): the smallest mass of a full restriction of the support (Thm 7's "
             "alpha^k)",
}
