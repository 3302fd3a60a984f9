"""Exact Fourier spectra as fixed-shape sparse pytrees, without enumerating {0,1}^n.

A :class:`Spectrum` is K entries (S, f^(S)): packed sets ``masks: uint32[K, W]`` and
``values: float32[K]``, zero entries being padding; its shape depends only on the function's kind
and size, so a batch of spectra is one Spectrum with a leading axis. Coefficients are of F = 1 - 2f,
uniform or p-biased (:mod:`~jaxtrees.fourier.transforms`). :func:`spectrum` builds one exactly for
trees (path by path), targets on a small support and small truth tables; the summaries read it,
and :func:`approximate` is the seed's (001) low-degree, sparse approximation of a tree.

>>> import jax.numpy as jnp
>>> from jaxtrees import targets
>>> f = targets.parity([1, 3], n=5)
>>> spec = spectrum(f, 5)
>>> float(l1(spec)), int(sparsity(spec)), int(degree(spec))
(1.0, 1, 2)
>>> influences(spec, 5).tolist()
[0.0, 1.0, 0.0, 1.0, 0.0]
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxtrees.core import bits, checks
from jaxtrees.fourier import transforms
from jaxtrees.hypotheses.polynomial import Spectrum  # noqa: F401 - defined with Polynomial, one layer down
from jaxtrees.hypotheses.tree import Tree

#: |f^(S)| at or below this counts as zero in :func:`sparsity` and :func:`degree` (float32
#: coefficients of Boolean functions carry rounding errors of a few ulps, far below it).
ZERO_TOL = 1e-6
#: Deepest tree expanded exactly: 4^D (mask, value) pairs before merging (1,048,576 at D = 10).
MAX_TREE_DEPTH = 10


# ------------------------------------------------------------------------------------- building


def spectrum(f, n: int, p=None) -> Spectrum:
    """The exact spectrum of a target or a tree ``f`` over n coordinates; uniform when ``p`` is
    None, else p-biased for marginals ``p: float32[n]`` in (0, 1).

    Trees (a :class:`Tree`, or a target with ``as_tree()``) are expanded path by path; targets
    with a static ``support`` (juntas, parities) are transformed on their support (|J| <= 20);
    any other target through its full truth table (n <= MAX_TABLE_N).
    """
    n = checks.integer("n", n, low=1)
    checks.same_n("n", n, f)  # a target or tree reading variable n or above: its spectrum would drop it
    if p is not None:
        p = transforms.check_marginals(p, n)
    if hasattr(f, "as_tree"):
        f = f.as_tree()
    if isinstance(f, Tree):
        if f.max_depth > MAX_TREE_DEPTH:
            raise ValueError(f"tree depth must be <= {MAX_TREE_DEPTH} for an exact spectrum (4^D terms), "
                             f"got max_depth = {f.max_depth}")
        return of_tree(f, n, p)
    if hasattr(f, "support"):
        k = f.support.shape[-1]
        if k > 20:
            raise ValueError(f"a target's support must have |J| <= 20 for an exact spectrum (2^|J| entries), got {k}")
        return _of_support(f, n, p)
    if n > transforms.MAX_TABLE_N:
        raise ValueError(f"n must be <= {transforms.MAX_TABLE_N} for a spectrum from the full truth table, got {n}")
    return _of_truth_table(f, n, p)


def from_table(values, p=None) -> Spectrum:
    """The spectrum of a dense table ``values: float[2^n]`` (real values F, e.g. :func:`~jaxtrees.fourier.transforms.signs`)."""
    n = transforms.table_size(values)
    everything = jnp.arange(n, dtype=jnp.int32)
    return Spectrum(_local_masks(everything, n), _transform(values, p, everything))


# Trees: every root-to-leaf path is prod over its tests of 1[x_i = b] = (1 + (-1)^b chi_i) / 2
# (uniform) or p_i^b (1 - p_i)^(1-b) +- sigma_i phi_i (p-biased); expanding the products gives
# <= 4^D (mask, value) pairs for depth D, merged by sorting (merge).
@functools.partial(jax.jit, static_argnames="n")
def of_tree(tree: Tree, n: int, p=None, leaf_values=None) -> Spectrum:
    """The spectrum of a heap-layout tree: F(x) = ``leaf_values`` at x's leaf (default
    1 - 2 label, the tree's +-1 function). K = 4^D entries for max depth D.

    Path l of the 2^D deepest slots meets levels t < D; a level that splits on a variable new to
    the path contributes a + c phi_i (a = 1/2, c = +-1/2 uniform; a = Pr[x_i = b],
    c = +-sigma_i p-biased), a repeated variable the constant 1[same branch], a level below the
    leaf 1/2 (the leaf's 2^(D - d) slots share its value).
    """
    if leaf_values is None:
        leaf_values = transforms.signs(tree.label)
    D = tree.max_depth
    words = bits.n_words(n)
    slot = np.arange(2**D)
    levels = np.arange(D)
    node = (2**levels - 1) + (slot[:, None] >> (D - levels))  # [2^D, D]
    branch = jnp.asarray((slot[:, None] >> (D - 1 - levels)) & 1, bool)
    var = tree.feature[node]
    split = jnp.cumprod(var >= 0, axis=-1).astype(bool)  # the path is still above its leaf
    depth = jnp.sum(split, axis=-1)
    leaf = (2**depth - 1) + (jnp.asarray(slot) >> (D - depth))
    earlier = split[:, None, :] & (var[:, None, :] == var[:, :, None]) & jnp.asarray(np.tri(D, D, -1, bool))  # [2^D, t, u]
    repeated = jnp.any(earlier, axis=-1)
    consistent = ~jnp.any(earlier & (branch[:, None, :] != branch[:, :, None]), axis=-1)
    new = split & ~repeated
    if p is None:
        a_new, c_new = jnp.full(var.shape, 0.5), jnp.where(branch, -0.5, 0.5)
    else:
        q = jnp.asarray(p, jnp.float32)[jnp.maximum(var, 0)]
        sigma = jnp.sqrt(q * (1.0 - q))
        a_new, c_new = jnp.where(branch, q, 1.0 - q), jnp.where(branch, sigma, -sigma)
    a = jnp.where(new, a_new, jnp.where(split, consistent.astype(jnp.float32), 0.5))
    c = jnp.where(new, c_new, 0.0)
    subsets = jnp.asarray((np.arange(2**D)[:, None] >> levels) & 1, bool)  # [2^D (T), D]
    factors = jnp.where(subsets[None], c[:, None, :], a[:, None, :])  # [2^D (l), 2^D (T), D]
    values = leaf_values[leaf][:, None] * jnp.prod(factors, axis=-1)
    onehot = jnp.where(new[..., None], _onehot_words(var, words), jnp.uint32(0))  # [2^D, D, W]
    masks = bits.reduce_or(jnp.where(subsets[None, :, :, None], onehot[:, None], jnp.uint32(0)), axis=-2)
    return merge(masks.reshape(-1, words), values.reshape(-1))


@functools.partial(jax.jit, static_argnames="n")
def _of_support(f, n: int, p=None) -> Spectrum:
    support = f.support
    x = jnp.any(bits.assignments(support.shape[-1])[:, :, None] & (support[:, None] == jnp.arange(n)), axis=1)
    return Spectrum(_local_masks(support, n), _transform(transforms.signs(f(x)), p, support))


def _of_truth_table(f, n: int, p=None) -> Spectrum:
    """Any callable target: F on all 2^n inputs (f need not be a pytree, so this is not jitted whole)."""
    everything = jnp.arange(n, dtype=jnp.int32)
    values = transforms.signs(f(bits.assignments(n)))
    return Spectrum(_local_masks(everything, n), _transform(values, p, everything))


def _transform(values, p, support):
    if p is None:
        return transforms.walsh_hadamard(values)
    return transforms.biased_transform(values, jnp.asarray(p, jnp.float32)[support])


def _onehot_words(var, words: int):
    """``uint32[..., W]``: the packed singleton {var} (all zero for var < 0)."""
    w = jnp.arange(words)
    bit = jnp.left_shift(jnp.uint32(1), (jnp.maximum(var, 0) % bits.WORD_BITS).astype(jnp.uint32))
    return jnp.where((w == var[..., None] // bits.WORD_BITS) & (var[..., None] >= 0), bit[..., None], jnp.uint32(0))


def _local_masks(support, n: int):
    """``uint32[2^k, W]``: entry s of a table over ``support`` (bit t of s is support[t]) as a global mask."""
    k = support.shape[-1]
    chosen = bits.assignments(k)  # [2^k, k]
    onehot = _onehot_words(support, bits.n_words(n))  # [k, W]
    return bits.reduce_or(jnp.where(chosen[:, :, None], onehot[None], jnp.uint32(0)), axis=-2)


def merge(masks, values) -> Spectrum:
    """Sum the values of equal masks: sort by mask, then one sorted segment sum. The result has
    the same K; each mask's total sits at its first entry, the other copies become zero."""
    K, W = masks.shape
    keys = [masks[:, w] for w in reversed(range(W))]
    order = lax.sort(keys + [jnp.arange(K, dtype=jnp.int32)], num_keys=W, is_stable=True)[-1]
    masks, values = masks[order], values[order]
    first = jnp.concatenate([jnp.ones((1,), bool), jnp.any(masks[1:] != masks[:-1], axis=-1)])
    segment = jnp.cumsum(first) - 1
    totals = jax.ops.segment_sum(values, segment, num_segments=K, indices_are_sorted=True)
    return Spectrum(masks, jnp.where(first, totals[segment], 0.0))


# ---------------------------------------------------------------------------------- summaries


def degrees(spec: Spectrum):
    """``int32[K]``: |S| of every entry."""
    return bits.count(spec.masks)


def members(spec: Spectrum, n: int):
    """``bool[K, n]``: i in S for every entry."""
    return bits.unpack(spec.masks, n)


def l1(spec: Spectrum):
    """L1(f) = sum_S |f^(S)|."""
    return jnp.sum(jnp.abs(spec.values), axis=-1)


def sparsity(spec: Spectrum, tol: float = ZERO_TOL):
    """L0(f) = |{S : |f^(S)| > tol}|."""
    return jnp.sum(jnp.abs(spec.values) > tol, axis=-1)


def degree(spec: Spectrum, tol: float = ZERO_TOL):
    """max |S| over |f^(S)| > tol (0 for a constant)."""
    return jnp.max(jnp.where(jnp.abs(spec.values) > tol, degrees(spec), 0), axis=-1)


def weight_by_degree(spec: Spectrum, n: int):
    """``float32[n + 1]``: W^j(f) = sum_{|S| = j} f^(S)^2 (sums to E[F^2] = 1 for Boolean f)."""
    return jnp.sum(jnp.where(degrees(spec)[..., None] == jnp.arange(n + 1), spec.values[..., None] ** 2, 0.0), axis=-2)


def influences(spec: Spectrum, n: int):
    """``float32[n]``: Inf_i(f) = sum_{S contains i} f^(S)^2. Uniform: Pr[f(x) != f(x xor e_i)];
    p-biased: 4 p_i (1 - p_i) Pr_p[f(x) != f(x xor e_i)] (O'Donnell Ch. 8)."""
    return jnp.sum(jnp.where(members(spec, n), spec.values[..., None] ** 2, 0.0), axis=-2)


def total_influence(spec: Spectrum):
    """I(f) = sum_S |S| f^(S)^2."""
    return jnp.sum(degrees(spec) * spec.values**2, axis=-1)


def noise_stability(spec: Spectrum, rho):
    """Stab_rho(f) = sum_S rho^|S| f^(S)^2."""
    return jnp.sum(jnp.asarray(rho, jnp.float32) ** degrees(spec) * spec.values**2, axis=-1)


def coefficient(spec: Spectrum, subset, n: int):
    """f^(S) for S given as indices (a list) or a mask ``bool[n]``."""
    mask = np.zeros(n, bool)
    mask[np.asarray(subset, int)] = True
    words = bits.pack(jnp.asarray(mask))
    return jnp.sum(jnp.where(jnp.all(spec.masks == words, axis=-1), spec.values, 0.0), axis=-1)


# -------------------------------------------------------------------------- low-degree, sparse


def truncate(spec: Spectrum, max_degree) -> Spectrum:
    """The part of degree <= ``max_degree``."""
    return spec._replace(values=jnp.where(degrees(spec) <= max_degree, spec.values, 0.0))


def threshold(spec: Spectrum, theta) -> Spectrum:
    """The coefficients with |f^(S)| >= theta."""
    return spec._replace(values=jnp.where(jnp.abs(spec.values) >= theta, spec.values, 0.0))


@jax.jit
def squared_distance(a: Spectrum, b: Spectrum):
    """E[(F - G)^2] = sum_S (f^(S) - g^(S))^2 (Parseval; both in the same basis)."""
    merged = merge(jnp.concatenate([a.masks, b.masks]), jnp.concatenate([a.values, -b.values]))
    return jnp.sum(merged.values**2)


class Approximation(NamedTuple):
    """The seed's construction for a tree with s leaves and eps (001, Theorem, steps 1-3)."""

    h: Spectrum  # the low-degree, sparse approximation
    max_degree: jax.Array  # d = ceil(log2(s / eps))
    theta: jax.Array  # eps / L1(f^{<= d}): h keeps the coefficients of degree <= d at least this large
    squared_error: jax.Array  # E[(F - h)^2], exactly; <= 2 eps
    terms: jax.Array  # nonzero coefficients of h; <= L1(f^{<= d})^2 / eps <= s^2 / eps


def approximate(spec: Spectrum, leaves, eps: float) -> Approximation:
    """h = sum over S with |S| <= d and |f^(S)| >= eps / L1(f^{<= d}) of f^(S) chi_S (uniform basis).

    Why E[(F - h)^2] <= 2 eps for a tree with s leaves: the high-degree weight W^{>d}(f) is at
    most E[(F - g)^2] for the tree g cut at depth d with each cut node valued by its mean (g has
    degree <= d), i.e. at most Pr[reach depth d] <= s 2^-d <= eps (step 1); L1(f^{<= d}) <= L1(f)
    <= s since each leaf's indicator has L1 = 1 (step 2); the dropped low-degree coefficients
    weigh at most theta * L1 = eps, and there are at most L1 / theta = L1^2 / eps kept (step 3).
    The two errors are orthogonal (disjoint degrees), so they add.
    """
    return _approximate(spec, leaves, checks.real("eps", eps, low=0.0, high=1.0, low_open=True))


@jax.jit
def _approximate(spec: Spectrum, leaves, eps) -> Approximation:
    d = jnp.ceil(jnp.log2(jnp.asarray(leaves, jnp.float32) / eps)).astype(jnp.int32)
    low = truncate(spec, d)
    theta = eps / jnp.maximum(l1(low), jnp.finfo(jnp.float32).tiny)
    h = threshold(low, theta)
    return Approximation(h, d, theta, squared_distance(spec, h), sparsity(h))
