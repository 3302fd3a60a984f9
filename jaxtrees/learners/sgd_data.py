"""The examples of :mod:`jaxtrees.learners.sgd`: training batches, test sets and the test error.

Online mode draws a fresh batch x ~ prod_i Bernoulli(p_i) at every step; fixed mode draws m examples
once and shuffles them every epoch. The test error is exact over all 2^n inputs when n <= exact_max_n,
else the error on ``test_size`` fresh examples drawn once per training.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxtrees.core import bits, prng, sampling
from jaxtrees.learners.networks import encode

EVAL_CHUNK = 1024  # test inputs per forward pass when scoring (bounds memory under vmap)


def inputs(key, p, rows: int, precision_bits: int | None = None):
    """``bool[rows, n]``: rows i.i.d. x ~ prod_i Bernoulli(p_i), as :class:`TrainConfig` draws them.

    ``precision_bits=None``: ``uniform[rows, n] < p``; b: exact Bernoulli(quantize(p, b)) from
    bit-packed draws (b random words per 32 examples of a coordinate), unpacked.

    >>> x = inputs(jax.random.key(0), jnp.array([0.0, 0.5, 1.0]), 64, precision_bits=1)
    >>> x.shape, x[:, 0].any().item(), x[:, 2].all().item()
    ((64, 3), False, True)
    """
    if precision_bits is None:
        n = p.shape[-1]
        if jax.default_backend() != "cpu" or not prng.fusible(key) or rows * n >= prng.MAX_WORDS:
            return prng.uniform(key, (rows, n)) < p
        # The same words, drawn feature-major: XLA:CPU vectorizes a loop over the rows (the last
        # axis here) where a [rows, n] loop with n = 30 ran 4x slower per word; packed along the
        # rows (a reduction, so the draw is made once) and unpacked. Takes a third off a step of
        # scripts/bench_gd.py's workload on a CPU.
        index = jnp.arange(rows, dtype=jnp.uint32)[None, :] * np.uint32(n) + jnp.arange(n, dtype=jnp.uint32)[:, None]
        return bits.unpack(bits.pack(prng.uniform_at(key, index) < p[:, None]), rows).T
    packed = sampling.packed_bernoulli(key, p, rows, precision_bits=precision_bits)  # [n, ceil(rows / 32)]
    return bits.unpack(packed, rows).T


def _marginals(p, config):
    """The marginals the draws follow: p, or p on the 2^-b grid."""
    return p if config.precision_bits is None else sampling.quantize(p, config.precision_bits)


def _data(key, p, target, config):
    """(next_batch(data, t) -> (x, y, data), data0) for the configured mode."""
    b = config.batch_size
    if config.mode == "online":
        def next_batch(data, t):
            x = inputs(prng.fold_in(key, t), p, b, config.precision_bits)
            return x, target(x), data

        return next_batch, ()
    m = config.m
    k_sample, k_shuffle = prng.split(key)
    X = inputs(k_sample, p, m, config.precision_bits)
    Y = target(X)
    per_epoch = m // b
    if per_epoch == 1 and b == m:  # full-batch gradient descent: no shuffling needed
        return (lambda data, t: (X, Y, data)), ()

    def next_batch(perm, t):
        pos = t % per_epoch
        perm = jax.lax.cond(pos == 0, lambda: jax.random.permutation(jax.random.fold_in(k_shuffle, t // per_epoch), m),
                            lambda: perm)
        idx = jax.lax.dynamic_slice_in_dim(perm, pos * b, b)
        return X[idx], Y[idx], perm

    return next_batch, jnp.arange(m, dtype=jnp.int32)


def _test_set(key, p, target, config):
    """``(X, y, w)``: all 2^n inputs with their probabilities when n <= ``exact_max_n``, else
    ``test_size`` fresh examples of weight 1 / test_size."""
    n = p.shape[0]
    if n <= config.exact_max_n:
        X = jnp.asarray((np.arange(2**n)[:, None] >> np.arange(n)) & 1, bool)  # [2^n, n]
        q = _marginals(p, config)
        w = jnp.prod(jnp.where(X, q, 1.0 - q), axis=-1)
    else:
        X = inputs(key, p, config.test_size, config.precision_bits)
        w = jnp.full((config.test_size,), 1.0 / config.test_size, jnp.float32)
    return X, target(X), w


def _scorer(X, y, w, config):
    """``score(params) -> float32``: sum of ``w`` over the rows of ``X`` the network mislabels."""
    model = config.model
    rows, n = X.shape
    chunk = min(rows, EVAL_CHUNK)
    pad = -rows % chunk
    X = jnp.pad(X, ((0, pad), (0, 0))).reshape(-1, chunk, n)
    y = jnp.pad(y, (0, pad)).reshape(-1, chunk)
    w = jnp.pad(w, (0, pad)).reshape(-1, chunk)

    def score(params):
        def body(total, batch):
            xb, yb, wb = batch
            wrong = (model.apply(params, encode(xb, config.encoding, params[0].w.dtype)) > 0) != (yb == 1)
            return total + jnp.sum(jnp.where(wrong, wb, 0.0)), None

        total, _ = jax.lax.scan(body, jnp.zeros((), jnp.float32), (X, y, w))
        return total

    return score
