"""f_pi of 002 Sec. 6: an addressing function with most memory bits pinned, eps-close to a junta.

>>> import jax
>>> from jaxtrees.targets.addressing import addressing
>>> f = agnostic_addressing(jax.random.key(0), addressing(c=1, k=3), eps=0.5)
>>> int((~f.pinned).sum())                   # |A^free| = 2 free memory bits
2
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxtrees.core import checks
from jaxtrees.targets.addressing import Addressing


def agnostic_addressing(key, target: Addressing, eps: float) -> Addressing:
    """f_pi of 002 Sec. 6: ``target`` (f_{c,k} or f_{c,k,S}) with most memory bits fixed.

    The 2^k addresses are split uniformly at random into A^free, A^0 and A^1 with |A^0| = |A^1|
    and |A^free| the largest even number <= eps 2^(k-1) (it must be >= eps 2^(k-2), as in the
    paper); y_a is pinned to 0 on A^0 and to 1 on A^1 and stays a variable on A^free. f_pi is
    eps-close to the address junta :func:`nearby_junta` under every product distribution that
    satisfies Lemma 16's hypotheses. ``key`` may be traced (vmap over keys); ``eps`` is static.
    """
    _check_addressing(target)
    eps = checks.real("eps", eps, low=0.0, high=1.0)
    size = 2**target.k
    n_free = int(np.floor(eps * size / 2)) // 2 * 2
    if n_free < eps * size / 4 or n_free == 0:
        raise ValueError(f"eps = {eps} leaves no even |A^free| in [eps 2^(k-2), eps 2^(k-1)] = "
                         f"[{eps * size / 4:g}, {eps * size / 2:g}] for k = {target.k}; raise eps or k")
    rank = jnp.argsort(jax.random.permutation(key, size))  # a uniformly random ranking of addresses
    pinned = rank >= n_free
    return target._replace(pinned=pinned, pinned_value=rank >= n_free + (size - n_free) // 2)


def nearby_junta(target: Addressing) -> Addressing:
    """g(x) = 1[z(x) in A^1] of 002 Sec. 6: every memory bit pinned, free ones to 0.

    g depends on the addressing bits only (an A-junta). g <= f_pi pointwise, so
    Pr[f_pi != g] = E[f_pi] - E[g], exactly from the oracles.
    """
    _check_addressing(target)
    return target._replace(pinned=jnp.ones_like(target.pinned),
                           pinned_value=target.pinned & target.pinned_value)


def _check_addressing(target):
    if not isinstance(target, Addressing):
        raise ValueError(f"target must be an Addressing target (addressing / coded_addressing), got {type(target).__name__}")
