"""Fast Walsh-Hadamard transforms of truth tables: uniform and p-biased, and their inverses.

Conventions (../DESIGN.md, "Fourier conventions"): a table over {0,1}^n is indexed by
x = sum_i x_i 2^i and a set S by the mask sum_{i in S} 2^i; a 0/1 label y is F = 1 - 2y
(:func:`signs`). Uniform: f^(S) = E_x[F(x) chi_S(x)], chi_S(x) = (-1)^(sum_{i in S} x_i).
p-biased: f^(S) = E_p[F(x) phi_S(x)], phi_S(x) = prod_{i in S} (x_i - p_i) / sigma_i,
sigma_i = sqrt(p_i (1 - p_i)); at p = 1/2, phi_i = -chi_i. Both are the same n 2^n butterfly,
one 2 x 2 map per coordinate (:func:`biased_matrices`); leading axes are a batch.

>>> import jax.numpy as jnp
>>> table = signs(jnp.array([0, 1, 1, 0]))          # x_0 XOR x_1 as +-1
>>> walsh_hadamard(table).tolist()                   # all weight on S = {0, 1} (mask 3)
[0.0, 0.0, 0.0, 1.0]
>>> inverse_walsh_hadamard(walsh_hadamard(table)).tolist()
[1.0, -1.0, -1.0, 1.0]
>>> [round(c, 4) for c in biased_transform(table, jnp.array([0.5, 0.5])).tolist()]
[0.0, 0.0, 0.0, 1.0]
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxtrees.core import checks

#: Largest n of a dense 2^n truth table built here (4 MiB of float32 per table at n = 20; a GPU
#: holds far more, so pass larger tables straight to the transforms).
MAX_TABLE_N = 24


def signs(labels):
    """0/1 labels -> real values F = 1 - 2y in {+1, -1} (float32); concrete labels must be 0 or 1."""
    if checks.is_concrete(labels):
        values = np.asarray(labels)
        if not np.all((values == 0) | (values == 1)):
            raise ValueError(f"labels must be 0 or 1 (a Boolean truth table), got values "
                             f"{np.unique(values[(values != 0) & (values != 1)])[:5].tolist()}")
    return 1.0 - 2.0 * jnp.asarray(labels).astype(jnp.float32)


def table_size(values) -> int:
    """n for a table ``[..., 2^n]``; ValueError unless the last axis is a power of two."""
    size = np.shape(values)[-1] if np.ndim(values) else 0
    n = int(size).bit_length() - 1
    if size < 1 or 2**n != size:
        raise ValueError(f"values must have a last axis of length 2^n (a truth table), got shape {np.shape(values)}")
    return n


def walsh_hadamard(values):
    """Uniform coefficients f^(S), S = 0 .. 2^n - 1, of tables ``values: float[..., 2^n]``."""
    return _uniform(jnp.asarray(values, jnp.float32), inverse=False)


def inverse_walsh_hadamard(coefficients):
    """Values F(x) = sum_S f^(S) chi_S(x) from uniform coefficients ``[..., 2^n]``."""
    return _uniform(jnp.asarray(coefficients, jnp.float32), inverse=True)


def biased_transform(values, p):
    """p-biased coefficients E_p[F phi_S] of tables ``values: float[..., 2^n]``; ``p: [..., n]`` in (0, 1)."""
    values = jnp.asarray(values, jnp.float32)
    return _biased(values, check_marginals(p, table_size(values)), inverse=False)


def inverse_biased_transform(coefficients, p):
    """Values F(x) = sum_S f^(S) phi_S(x) from p-biased coefficients ``[..., 2^n]``."""
    coefficients = jnp.asarray(coefficients, jnp.float32)
    return _biased(coefficients, check_marginals(p, table_size(coefficients)), inverse=True)


def biased_matrices(p, *, inverse: bool = False):
    """``float32[..., n, 2, 2]``: the per-coordinate maps of the p-biased transform (or its inverse).

    Forward: rows (coefficient without i, with i), columns (x_i = 0, x_i = 1):
    [[1 - p, p], [-sigma, sigma]]; inverse [[1, -p / sigma], [1, (1 - p) / sigma]].
    """
    p = jnp.asarray(p, jnp.float32)
    sigma = jnp.sqrt(p * (1.0 - p))
    if inverse:
        rows = (jnp.stack([jnp.ones_like(p), -p / sigma], -1), jnp.stack([jnp.ones_like(p), (1.0 - p) / sigma], -1))
    else:
        rows = (jnp.stack([1.0 - p, p], -1), jnp.stack([-sigma, sigma], -1))
    return jnp.stack(rows, -2)


# The butterfly: coordinate i maps the pair (F at x_i = 0, F at x_i = 1) by a 2 x 2 matrix,
# [[1/2, 1/2], [1/2, -1/2]] (uniform) or [[1 - p_i, p_i], [-sigma_i, sigma_i]] (p-biased); the
# inverses map coefficients back to values. The uniform transform takes RADIX_BITS coordinates per
# pass (one product with the +-1 matrix H_32), so a table makes n / 5 passes through memory
# instead of n (on a CPU, over cache-sized groups of tables).

#: Coordinates the uniform transform handles per pass (n = 20: 4 passes of a 32 x 32 product
#: instead of 20 butterflies).
RADIX_BITS = 5

#: On a CPU the uniform transform runs over groups of tables of at most this many values (8 MiB
#: of float32: two tables at n = 20), one group after another, so that a pass's operands stay in
#: cache and its buffers are reused; 64 tables at n = 20 take 0.26 s this way against 0.64 s as
#: one batch on a 2-core CPU (the whole batch's fresh 256 MiB buffers cost page faults per pass).
#: On a GPU or TPU the batch is one program.
CPU_GROUP_VALUES = 2**21


def hadamard_matrix(r: int) -> np.ndarray:
    """``float32[2^r, 2^r]``: H[a, b] = (-1)^popcount(a & b), the transform of r coordinates."""
    a = np.arange(2**r)
    parity = (np.bitwise_count(a[:, None] & a[None, :]) & 1).astype(np.int64)
    return (1 - 2 * parity).astype(np.float32)


@functools.partial(jax.jit, static_argnames="inverse")
def _uniform(values, inverse: bool):
    n = table_size(values)
    tables = values.reshape(-1, 2**n)
    count = tables.shape[0]
    scale = 1.0 if inverse else 0.5**n
    group = max(1, CPU_GROUP_VALUES >> n) if jax.default_backend() == "cpu" else count
    if group >= count:
        return _rotating_passes(tables, n, scale).reshape(values.shape)
    padded = -(-count // group) * group
    tables = jnp.pad(tables, ((0, padded - count), (0, 0))).reshape(-1, group, 2**n)
    out = jax.lax.map(lambda t: _rotating_passes(t, n, scale), tables)
    return out.reshape(padded, 2**n)[:count].reshape(values.shape)


def _rotating_passes(tables, n: int, scale: float):
    """scale * H_{2^n} of each row of ``tables: [P, 2^n]``, RADIX_BITS index bits per pass.

    A pass contracts the r lowest index bits with H_{2^r} and puts the result in front (one
    product H @ x^T, no transpose): after the passes the axes are (index bits in order, table),
    so one transpose at the end restores [P, 2^n].
    """
    x = tables
    low = 0
    while low < n:
        r = min(RADIX_BITS, n - low)
        x = jax.lax.dot_general(jnp.asarray(hadamard_matrix(r)), x.reshape(-1, 2**r), (((1,), (1,)), ((), ())),
                                precision=jax.lax.Precision.HIGHEST)  # +-1 sums: no bf16 / TF32 rounding on GPU
        low += r
    return x.reshape(2**n, tables.shape[0]).T * scale


@functools.partial(jax.jit, static_argnames="inverse")
def _biased(values, p, inverse: bool):
    n = table_size(values)
    m = biased_matrices(p, inverse=inverse)  # [..., n, 2, 2]
    batch = jnp.broadcast_shapes(values.shape[:-1], m.shape[:-3])
    values = jnp.broadcast_to(values, batch + values.shape[-1:])
    for i in range(n):
        v = values.reshape(batch + (2 ** (n - 1 - i), 2, 2**i))
        mi = m[..., i, :, :][..., None, :, :, None]  # [..., 1, 2 (out), 2 (in), 1]
        values = jnp.sum(mi * v[..., None, :, :], axis=-2).reshape(values.shape)
    return values


def check_marginals(p, n: int):
    """``p: [..., n]`` with every entry in the open interval (0, 1) (values checked when concrete);
    as float32. The p-biased basis needs sigma_i > 0."""
    if np.shape(p)[-1:] != (n,):
        raise ValueError(f"p must have a last axis of n = {n} marginals (one per coordinate), got shape {np.shape(p)}")
    if checks.is_concrete(p):
        checks.probabilities("p", np.reshape(np.asarray(p, np.float64), -1), low_open=True, high_open=True)
    return jnp.asarray(p, jnp.float32)
