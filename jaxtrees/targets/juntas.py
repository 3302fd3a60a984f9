"""Juntas and parities, targets that depend on a small support J of the n coordinates: their constructors.

- :func:`junta` / :func:`random_junta`: f(x) = T[a(x)] on a support J = (j_0, ..., j_{k-1}), with
  the truth-table index a(x) = sum_t x_{j_t} 2^t (x_{j_0} is the least significant bit).
- :func:`from_table` (support and table may be traced, also :func:`junta`'s) and :func:`random_function` (a Python
  function of k bits, e.g. majority, on a random support; :func:`truth_table`).
- :func:`parity` / :func:`random_parity`: chi_J(x) = sum_{j in J} x_j mod 2 (000 Sec. 1.2).
- :class:`MaskParity` / :func:`random_subset`: the parity of J given as a mask ``bool[n]``, so
  that |J| may be a traced value (one compiled program for every k).
- ``random_junta(key, n, k, k_max=K)``: k traced, arrays padded to K (one program for every k <= K).

>>> import jax, jax.numpy as jnp
>>> f = parity([0, 2], n=4)
>>> f(jnp.array([[1, 0, 1, 1], [1, 1, 0, 0]])).tolist()
[0, 1]
>>> g = random_junta(jax.random.key(0), n=16, k=4)
>>> g.support.shape, g.table.shape
((4,), (16,))
>>> h = MaskParity(random_subset(jax.random.key(1), 10, 3))
>>> int(h.support_mask(10).sum())
3
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxtrees.core import checks, prng
from jaxtrees.targets.junta_types import Junta, Parity, parity_table, relevant_vars

# re-exported: public path (jaxtrees.targets.juntas.<name>, as before the split of issue 69)
from jaxtrees.targets.junta_types import MaskParity, OnSupport  # noqa: F401


def random_subset(key, n: int, k):
    """``bool[n]``: a uniformly random subset of size ``k`` (k may be traced): the k smallest of
    n i.i.d. uniforms. A concrete k outside [0, n] is refused; a traced one is clipped to it (a mask has no NaN:
    callers that trace k check it, as :func:`random_junta` does)."""
    if checks.is_concrete(k):
        checks.integer("k", np.asarray(k).item() if np.ndim(k) == 0 else k, low=0, high=n)
    u = jax.random.uniform(key, (n,))
    return jnp.argsort(jnp.argsort(u)) < k


def junta(support, table, n: int) -> Junta:
    """The k-junta on ``support`` (k distinct indices in [0, n)) with truth table ``table`` (2^k bits, row a for
    x[support[t]] = (a >> t) & 1): :func:`from_table` with the indices checked against ``n`` (a Python int). Under
    ``jax.jit`` support and table may be traced; their values are then not checked."""
    return from_table(support, table, n=checks.integer("n", n, low=1))


def from_table(support, table, *, n: int | None = None) -> Junta:
    """The junta f(x) = table[sum_t x[support[t]] 2^t] (x[support[0]] the least significant bit), traced-safe.

    ``support``: k distinct indices (int[k]); ``table``: 2^k values (bool or 0/1), row a the value of f where
    x[support[t]] = (a >> t) & 1 for every t. Either may be traced (under ``jax.jit`` / ``jax.vmap``): shapes are
    checked always, values (0/1; indices distinct, >= 0 and, given ``n``, < n) where concrete; a traced table's
    nonzero entries count as 1.

    >>> f = from_table([3, 1], [0, 0, 0, 1])                         # x_3 AND x_1
    >>> f(jnp.array([[0, 1, 0, 1], [0, 1, 0, 0]])).tolist()
    [1, 0]
    >>> g = jax.jit(from_table)(jnp.array([3, 1]), jnp.array([0, 1, 1, 0]))   # traced: x_3 XOR x_1
    >>> g(jnp.array([[0, 1, 0, 1], [0, 1, 0, 0]])).tolist()
    [0, 1]
    """
    support = _support(support, n)
    return Junta(support, _table(table, support.shape[0]))


def truth_table(fn, k: int) -> jax.Array:
    """``bool[2^k]``: ``fn`` on every point of {0,1}^k, the table of :func:`from_table`.

    ``fn`` is called once, on ``int32[2^k, k]`` (a numpy array; row a holds a's bits, least significant first:
    column t is x[support[t]]), and returns 2^k values, bool or 0/1, e.g. ``lambda bits: bits.sum(-1) >= 3``
    (numpy or jax.numpy; evaluated at trace time, also under ``jax.jit``). A function of one vector ``int32[k]``:
    pass ``jax.vmap(g)``.

    >>> truth_table(lambda bits: bits[:, 0] & ~bits[:, 1], 2).tolist()     # x_0 AND NOT x_1
    [False, True, False, False]
    """
    k = checks.integer("k", k, low=1, high=MAX_TABLE_K)
    if not callable(fn):
        raise ValueError(f"fn must be a callable of an int32[2^k, k] array of bits, got {type(fn).__name__}")
    points = ((np.arange(2**k)[:, None] >> np.arange(k)) & 1).astype(np.int32)
    with jax.ensure_compile_time_eval():
        values = fn(points)
    if np.shape(values) != (2**k,):
        raise ValueError(f"fn must return one value per row of its int32[2^k, k] = int32[{2**k}, {k}] argument, "
                         f"shape ({2**k},), got shape {np.shape(values)} (a function of one vector: jax.vmap it)")
    if checks.is_concrete(values) and not np.isin(np.asarray(values), (0, 1)).all():
        raise ValueError(f"fn must return bool or 0/1 values, got {np.unique(np.asarray(values))[:8].tolist()}")
    return jnp.asarray(values).astype(bool)


def random_function(key, n: int, fn, k: int) -> Junta:
    """The junta of ``fn`` (k bits -> bool, :func:`truth_table`) on a uniformly random support of k of the n bits.

    The support, sorted, is the one ``random_junta(key, n, k)`` draws; ``key`` may be traced, ``n`` and ``k`` are
    Python ints. Majority of 5 on 16 bits:

    >>> f = random_function(jax.random.key(0), n=16, fn=lambda bits: bits.sum(-1) >= 3, k=5)
    >>> f.support.shape, int(f.table.sum())
    ((5,), 16)
    """
    n = checks.integer("n", n, low=1)
    k = checks.integer("k", k, low=1, high=min(n, MAX_TABLE_K))
    table = truth_table(fn, k)
    k_support, _ = prng.split(key)
    return Junta(_random_support(k_support, n, k), table)


def parity(support, n: int) -> Parity:
    """The parity of the ``support`` coordinates (k distinct indices in [0, n); may be traced, then unchecked)."""
    return Parity(_support(support, checks.integer("n", n, low=1)))


#: Largest k of a random truth table (2^k entries, times k to check that all k variables matter).
MAX_TABLE_K = 20


def random_junta(key, n: int, k, *, nondegenerate: bool = True, k_max: int | None = None) -> Junta:
    """A k-junta with a uniformly random support of size k and a uniformly random truth table.

    With ``nondegenerate=True`` the table is drawn uniformly among those that depend on all k
    variables (rejection sampling inside the compiled program), so the support is identifiable.
    A draw is degenerate with probability <= 1/2 (k = 1), so after ``MAX_REJECTIONS`` = 64 draws
    (probability <= 2^-64, or a key whose generator repeats itself) the parity table is used.

    With ``k_max`` (a static bound), ``k`` may be traced (1 <= k <= k_max): the junta is padded to
    ``k_max`` (:class:`Junta` with ``size = k``) and is the same function, with the same support and
    table, as ``random_junta(key, n, k)`` (the draws of the shorter arrays are prefixes of the longer).
    A traced k outside [1, k_max] cannot raise; the junta keeps ``size = k`` and is flagged
    (:meth:`Junta.in_range` False): NaN exact means (so ``exact_error`` is NaN), an empty support mask,
    and ``draw`` gives no valid examples (m = 0), so a tree grown on them has NaN float fields and NaN
    errors on any data (issue 64 item 8), never a plausible k_max-junta. Its labels (``f(x)``, ``f.bits``)
    are integers, which cannot be NaN: read ``in_range()`` before trusting them.
    """
    if k_max is not None:
        return _random_padded_junta(key, checks.integer("n", n, low=1), k,
                                    checks.integer("k_max", k_max, low=1, high=min(n, MAX_TABLE_K)), nondegenerate)
    n = checks.integer("n", n, low=1)
    if checks.integer("k", k) > MAX_TABLE_K:  # before the range check: say why k is bounded
        raise ValueError(f"k must be in [1, {min(n, MAX_TABLE_K)}]: a k-junta's truth table has 2^k entries "
                         f"(2^{k} would need {2**k / 2**30:.3g} GiB per target); got k = {k}. For parities "
                         f"of any k use random_parity")
    n, k = _check_n_k(n, k)
    k_support, k_table = prng.split(key)
    support = _random_support(k_support, n, k)

    def draw(key):
        return jax.random.bernoulli(key, 0.5, (2**k,))

    table = draw(k_table)
    if nondegenerate:
        def cond(state):
            return ~jnp.all(relevant_vars(state[2], k)) & (state[0] < MAX_REJECTIONS)

        def body(state):
            tries, key, _ = state
            key, sub = prng.split(key)
            return tries + 1, key, draw(sub)

        _, _, table = jax.lax.while_loop(cond, body, (0, jax.random.fold_in(k_table, 1), table))
        fallback = parity_table(k)
        table = jnp.where(jnp.all(relevant_vars(table, k)), table, fallback)
    return Junta(support, table)


#: Rejection draws of :func:`random_junta` before it falls back to the parity table.
MAX_REJECTIONS = 64


def _random_padded_junta(key, n: int, k, k_max: int, nondegenerate: bool) -> Junta:
    """:func:`random_junta` with k traced, padded to ``k_max``: slots t >= k hold further random
    distinct indices, and the table T'[a] = T[a mod 2^k] ignores them. Every draw is made at the
    size k_max, whose first entries are the draws at size k (threefry's bits and the
    without-replacement choice are prefix-consistent), so the junta equals the unpadded one."""
    if checks.is_concrete(k):
        checks.integer("k", int(k), low=1, high=k_max)
    k = jnp.asarray(k, jnp.int32)
    k_support, k_table = prng.split(key)
    support, real, index = _padded_support(k_support, n, k, k_max)

    def draw(key):
        return jax.random.bernoulli(key, 0.5, (2**k_max,))[index]

    def degenerate(table):
        return ~jnp.all(relevant_vars(table, k_max) | ~real)

    table = draw(k_table)
    if nondegenerate:
        def cond(state):
            return degenerate(state[2]) & (state[0] < MAX_REJECTIONS)

        def body(state):
            tries, key, _ = state
            key, sub = prng.split(key)
            return tries + 1, key, draw(sub)

        _, _, table = jax.lax.while_loop(cond, body, (0, jax.random.fold_in(k_table, 1), table))
        fallback = parity_table(k_max)[index]
        table = jnp.where(degenerate(table), fallback, table)
    return Junta(support, table, k)


def _padded_support(key, n: int, k, k_max: int):
    """``(support, real, index)`` of a junta padded to ``k_max``: k_max distinct indices whose first k
    (``real``), sorted, are ``_random_support(key, n, k)``, and ``index[a] = a mod 2^k``, which maps a
    padded table's rows to the unpadded table's."""
    drawn = jax.random.choice(key, n, (k_max,), replace=False)
    real = jnp.arange(k_max) < k
    ordered = jnp.sort(jnp.where(real, drawn, n + drawn))  # the real support sorted, then the padding
    support = jnp.where(ordered >= n, ordered - n, ordered).astype(jnp.int32)
    return support, real, jnp.arange(2**k_max) & ((1 << k) - 1)


def random_parity(key, n: int, k, *, k_max: int | None = None) -> Parity | Junta:
    """A k-parity on a uniformly random support of size k.

    With ``k_max`` (static), k may be traced (1 <= k <= k_max; outside it the junta is flagged, as
    :func:`random_junta`'s): the parity as a :class:`Junta`
    padded to ``k_max`` (see :func:`random_junta`), the same function on the same support as
    ``as_junta(random_parity(key, n, k))`` (the without-replacement choice is prefix-consistent)."""
    if k_max is None:
        n, k = _check_n_k(n, k)
        return Parity(_random_support(key, n, k))
    n = checks.integer("n", n, low=1)
    k_max = checks.integer("k_max", k_max, low=1, high=min(n, MAX_TABLE_K))
    if checks.is_concrete(k):
        checks.integer("k", int(k), low=1, high=k_max)
    k = jnp.asarray(k, jnp.int32)
    support, _, index = _padded_support(key, n, k, k_max)
    return Junta(support, parity_table(k_max)[index], k)


def as_junta(f: Junta | Parity) -> Junta:
    """``f`` as a :class:`Junta` (a parity: its support with the parity table), the same function:
    targets of both kinds then share one pytree structure (one program for both families)."""
    if isinstance(f, Junta):
        return f
    if not isinstance(f, Parity):
        raise ValueError(f"as_junta takes a Junta or a Parity, got {type(f).__name__}")
    return Junta(f.support, parity_table(f.k))


def _random_support(key, n, k):
    return jnp.sort(jax.random.choice(key, n, (k,), replace=False)).astype(jnp.int32)


def _check_n_k(n, k):
    n = checks.integer("n", n, low=1)
    k = checks.integer("k", k, low=1, high=n)
    return n, k


def _support(support, n: int | None):
    """``int32[k]``: the support checked (shape and dtype always; values, where concrete: >= 0, < n, distinct)."""
    if checks.is_concrete(support):
        return jnp.asarray(_check_support(support, n), jnp.int32)
    if support.ndim != 1 or not jnp.issubdtype(support.dtype, jnp.integer):
        raise ValueError(f"support must be a 1-d array of integer indices, got {support.dtype}{list(support.shape)}")
    checks.integer("k = len(support)", support.shape[0], low=1, high=n)
    return support.astype(jnp.int32)


def _table(table, k: int):
    """``bool[2^k]``: the truth table checked (its shape always, its values 0/1 where concrete)."""
    if np.shape(table) != (2**k,):
        raise ValueError(f"table must have 2^k = {2**k} entries for k = {k} = len(support), "
                         f"got shape {np.shape(table)}")
    if checks.is_concrete(table):
        if not np.isin(np.asarray(table), (0, 1)).all():
            raise ValueError("table must be binary (0/1 or bool)")
        return jnp.asarray(np.asarray(table), bool)
    return table.astype(bool)


def _check_support(support, n: int | None):
    """The concrete support as ``int32[k]`` numpy: indices 1-d, >= 0, < n (given n), distinct."""
    s = np.asarray(support)
    if s.ndim != 1 or (s.size and not np.issubdtype(s.dtype, np.integer)):
        raise ValueError(f"support must be a 1-d array of integer indices, got {support!r}")
    checks.integer("k = len(support)", s.size, low=1, high=n)
    if s.min() < 0 or (n is not None and s.max() >= n):
        allowed = "[0, inf)" if n is None else f"[0, {n - 1}] for n = {n}"
        raise ValueError(f"support indices must be in {allowed}, got {s.tolist()}")
    if np.unique(s).size != s.size:
        raise ValueError(f"support indices must be distinct, got {s.tolist()}")
    return s.astype(np.int32)
