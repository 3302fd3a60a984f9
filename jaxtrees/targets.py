"""Target functions f: {0,1}^n -> {0,1}.

A target is a pytree: its arrays (support, truth table) are leaves, its sizes (k) are their
static shapes, so a batch of targets is one target with a leading axis and ``jax.vmap`` applies.
Every target evaluates

- on plain arrays, ``f(x)`` for ``x: {0,1}[..., n]``, returning ``int32[...]``;
- on bit-packed samples, ``f.bits(X)`` for ``X: uint32[n, W]`` (see :mod:`jaxtrees.bits`),
  returning the packed labels ``uint32[W]``, with word-wide logic and no unpacking.

and every target has an exact conditional-mean oracle under a product distribution p,

    f.means(p, fixed, values) -> (mu, mu1),  mu = E[f(x) | x_j = v_j for fixed j],
                                             mu1[i] = E[f(x) | the same and x_i = 1],

for one restriction (``fixed: bool[n]``, ``values: bool[n]``), which is all that exact (population)
growth and exact scoring need (:mod:`jaxtrees.population`).

Targets:

- :func:`junta` / :func:`random_junta`: f(x) = T[a(x)] on a support J = (j_0, ..., j_{k-1}), with
  the truth-table index a(x) = sum_t x_{j_t} 2^t (x_{j_0} is the least significant bit).
- :func:`parity` / :func:`random_parity`: chi_J(x) = sum_{j in J} x_j mod 2 (000 Sec. 1.2).
- :func:`addressing` (f_{c,k}, 002 Sec. 4) and :func:`coded_addressing` (f_{c,k,S}, 002 Sec. 5):
  memory bits y_a after A addressing bits; the address bits are z_i = XOR_{j in S_i} x_j and
  f(x, y) = y_{z(x)}, with address a = sum_i z_i 2^i. :func:`random_code` and
  :func:`code_distance` build and check S. :func:`agnostic_addressing` pins most memory bits
  (f_pi, 002 Sec. 6), which makes f eps-close to the junta :func:`nearby_junta`.
- :func:`decision_tree` / :func:`random_tree`: a complete depth-d decision tree (the targets of
  000 Conjecture 3), internal node variables in heap order, no variable repeated on a path.

>>> import jax, jax.numpy as jnp
>>> f = parity([0, 2], n=4)
>>> f(jnp.array([[1, 0, 1, 1], [1, 1, 0, 0]])).tolist()
[0, 1]
>>> g = random_junta(jax.random.key(0), n=16, k=4)
>>> g.support.shape, g.table.shape
((4,), (16,))
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxtrees import _checks, bits
from jaxtrees import tree as tree_lib


class Junta(NamedTuple):
    """f(x) = table[sum_t x[support[t]] 2^t]."""

    support: jax.Array  # int32[k], distinct indices
    table: jax.Array  # bool[2^k]

    @property
    def k(self) -> int:
        return self.support.shape[-1]

    def __call__(self, x):
        x = jnp.asarray(x)
        index = jnp.sum(x[..., self.support].astype(jnp.int32) << jnp.arange(self.k), axis=-1)
        return self.table[index].astype(jnp.int32)

    def bits(self, X):
        table = jnp.where(self.table[:, None], bits.ALL_ONES, jnp.uint32(0)) * jnp.ones((1, X.shape[-1]), jnp.uint32)
        return _select(table, X[self.support])


    def means(self, p, fixed, values):
        # Pr[x_{j_t} = 1 | restriction], then sum over the 2^k assignments a of T[a] Pr[a].
        q1 = jnp.where(fixed[self.support], values[self.support].astype(p.dtype), p[self.support])
        a = _assignments(self.k)  # bool[2^k, k]
        factors = jnp.where(a, q1, 1.0 - q1)  # [2^k, k]
        table = self.table.astype(p.dtype)
        mu = jnp.sum(table * jnp.prod(factors, axis=-1))
        # mu1 for x_{j_t} = 1: factor t becomes 1[a_t = 1].
        eye = jnp.eye(self.k, dtype=bool)[:, None, :]  # [k, 1, k]
        pinned = jnp.where(eye, a[None].astype(p.dtype), factors[None])  # [k, 2^k, k]
        mu1_support = jnp.sum(table * jnp.prod(pinned, axis=-1), axis=-1)  # [k]
        return mu, _scatter_support(self.support, mu1_support, mu, p.shape[-1])


class Parity(NamedTuple):
    """chi_J(x) = sum_{j in support} x_j mod 2."""

    support: jax.Array  # int32[k], distinct indices

    @property
    def k(self) -> int:
        return self.support.shape[-1]

    def __call__(self, x):
        x = jnp.asarray(x)
        return (jnp.sum(x[..., self.support].astype(jnp.int32), axis=-1) % 2).astype(jnp.int32)

    def bits(self, X):
        return bits.reduce_xor(X[self.support], axis=0)

    def means(self, p, fixed, values):
        # E[(-1)^f] = prod_j E[(-1)^{x_j}] = prod_j (1 - 2 Pr[x_j = 1])  (002 Lemma 13).
        q1 = jnp.where(fixed[self.support], values[self.support].astype(p.dtype), p[self.support])
        s = 1.0 - 2.0 * q1
        mu = (1.0 - jnp.prod(s)) / 2.0
        others = jnp.prod(jnp.where(jnp.eye(self.k, dtype=bool), 1.0, s[None, :]), axis=-1)
        return mu, _scatter_support(self.support, (1.0 + others) / 2.0, mu, p.shape[-1])


class DecisionTree(NamedTuple):
    """A complete depth-d tree: ``feature: int32[2^d - 1]`` (heap order, children of node i at
    2i+1 for x = 0 and 2i+2 for x = 1) and leaf labels ``leaf: bool[2^d]`` (left to right)."""

    feature: jax.Array
    leaf: jax.Array

    @property
    def depth(self) -> int:
        return tree_lib.heap_depth(self.feature.shape[-1] + self.leaf.shape[-1])

    def as_tree(self) -> tree_lib.Tree:
        """The same function as a :class:`jaxtrees.Tree` (for predict, predict_bits, ...)."""
        size = self.feature.shape[-1] + self.leaf.shape[-1]
        label = jnp.concatenate([jnp.zeros(self.feature.shape, jnp.int32), self.leaf.astype(jnp.int32)])
        return tree_lib.Tree(jnp.concatenate([self.feature, jnp.full(self.leaf.shape, -1, jnp.int32)]),
                             label, jnp.ones(size, jnp.float32), label.astype(jnp.float32), jnp.zeros(size, jnp.float32))

    def __call__(self, x):
        return tree_lib.predict(self.as_tree(), x)

    def bits(self, X):
        return tree_lib.predict_bits(self.as_tree(), X)

    def means(self, p, fixed, values):
        # Sum over leaves of label x Pr[path]; a path's probability is the product over its d
        # tests of Pr[x_j = b | restriction], and for mu1[i] the tests of x_i get Pr = [b = 1].
        d = self.depth
        leaves = np.arange(2**d)
        t = np.arange(d)
        node = (2**t - 1) + (leaves[:, None] >> (d - t))  # [2^d, d] heap index of the t-th test
        branch = jnp.asarray((leaves[:, None] >> (d - 1 - t)) & 1, bool)  # [2^d, d]
        var = self.feature[node]
        q1 = jnp.where(fixed[var], values[var].astype(p.dtype), p[var])
        q = jnp.where(branch, q1, 1.0 - q1)  # [2^d, d]
        label = self.leaf.astype(p.dtype)
        mu = jnp.sum(label * jnp.prod(q, axis=-1))
        pinned = jnp.where(var[None] == jnp.arange(p.shape[-1])[:, None, None], branch[None].astype(p.dtype), q[None])
        return mu, jnp.sum(label * jnp.prod(pinned, axis=-1), axis=-1)


class Addressing(NamedTuple):
    """f(x) = y_{a(x)}: memory bit y_a = x[A + a], a(x) = sum_i z_i 2^i, z_i = XOR of x_j over j in S_i.

    ``code: bool[k, A]`` has row i the indicator of S_i over the A addressing bits; the 2^k
    memory bits are variables A .. A + 2^k - 1, so n = A + 2^k. Memory bits with ``pinned[a]``
    are constants ``pinned_value[a]`` (the restriction pi of 002 Sec. 6; the variable y_a is
    then irrelevant); f_{c,k} and f_{c,k,S} pin none.
    """

    code: jax.Array  # bool[k, A]
    pinned: jax.Array  # bool[2^k]
    pinned_value: jax.Array  # bool[2^k]

    @property
    def k(self) -> int:
        return self.code.shape[0]

    @property
    def n_address(self) -> int:
        return self.code.shape[1]

    @property
    def n(self) -> int:
        return self.n_address + 2**self.k

    def address(self, x):
        """``int32[...]``: a(x) for plain inputs."""
        z = (x[..., : self.n_address].astype(jnp.int32) @ self.code.T.astype(jnp.int32)) % 2
        return jnp.sum(z << jnp.arange(self.k), axis=-1)

    def __call__(self, x):
        x = jnp.asarray(x)
        memory = jnp.where(self.pinned, self.pinned_value, x[..., self.n_address:].astype(bool))
        return jnp.take_along_axis(memory, self.address(x)[..., None], axis=-1)[..., 0].astype(jnp.int32)

    def bits(self, X):
        A = self.n_address
        z = bits.reduce_xor(jnp.where(self.code[:, :, None], X[None, :A], jnp.uint32(0)), axis=1)  # [k, W]
        constant = jnp.where(self.pinned_value, bits.ALL_ONES, jnp.uint32(0))[:, None]
        return _select(jnp.where(self.pinned[:, None], constant, X[A:]), z)

    def address_distribution(self, s):
        """Pr[z(x) = a] for every a, given s_j = E[(-1)^{x_j}] = 1 - 2 Pr[x_j = 1] (002 Lemma 16):

            Pr[z = a] = 2^-k sum_{I subset [k]} (-1)^{|a & I|} chi_I,   chi_I = prod_{j in S_I} s_j,

        S_I the symmetric difference of the S_i, i in I. ``s: [A]`` -> ``[2^k]``.
        """
        return _walsh(jnp.prod(self._factors(s), axis=-1)) / 2**self.k

    def means(self, p, fixed, values):
        """The oracle in the Fourier basis of the address (002 Lemma 16), in O(2^k A) per call.

        With m_a = E[y_a | rho] and mhat_I = 2^-k sum_a (-1)^{|a & I|} m_a, mu = sum_I chi_I mhat_I
        is multilinear in s, so pinning addressing bit j to 1 (s_j := -1) gives
        mu1_j = mu - (1 + s_j) d mu / d s_j, with d mu / d s_j = sum_{I: j in S_I} mhat_I chi_I / s_j.
        For s_j = 0 (p_j = 1/2) the quotient is the product over S_I without j, nonzero only
        when j is the one zero factor of S_I. Pinning memory bit a to 1 adds Pr[z = a](1 - m_a).
        """
        A = self.n_address
        q = jnp.where(fixed, values.astype(p.dtype), p)
        memory = jnp.where(self.pinned, self.pinned_value.astype(p.dtype), q[A:])
        s = 1.0 - 2.0 * q[:A]
        zero = jnp.abs(s) < _TINY
        inside = self._in_sym_diff()  # [2^k, A]
        chi_nonzero = jnp.prod(jnp.where(inside, jnp.where(zero, 1.0, s), 1.0), axis=-1)  # [2^k]
        zeros = inside.astype(p.dtype) @ zero.astype(p.dtype)  # [2^k]: zero factors of chi_I
        chi = jnp.where(zeros == 0, chi_nonzero, 0.0)
        memory_hat = _walsh(memory) / 2**self.k
        mu = chi @ memory_hat
        weighted = inside.T.astype(p.dtype)  # [A, 2^k]
        from_nonzero = (weighted @ (memory_hat * chi)) / jnp.where(zero, 1.0, s)
        from_zero = weighted @ jnp.where(zeros == 1, memory_hat * chi_nonzero, 0.0)
        mu1_address = mu - (1.0 + s) * jnp.where(zero, from_zero, from_nonzero)
        prob = _walsh(chi) / 2**self.k
        mu1_memory = jnp.where(self.pinned, mu, mu + prob * (1.0 - memory))
        return mu, jnp.concatenate([mu1_address, mu1_memory])

    def _in_sym_diff(self):
        """``bool[2^k, A]``: j in S_I (row I)."""
        subsets = _assignments(self.k).astype(jnp.int32)
        return (subsets @ self.code.astype(jnp.int32)) % 2 == 1

    def _factors(self, s):
        return jnp.where(self._in_sym_diff(), s, 1.0)


Target = Junta | Parity | DecisionTree | Addressing


def support_mask(target: Target, n: int):
    """``bool[n]``: the coordinates in the target's support (juntas and parities)."""
    _check_has_support(target)
    return jnp.any(target.support[:, None] == jnp.arange(n), axis=0)


def relevant(target: Target):
    """``bool[k]``: which support variables f actually depends on (all of them for a parity)."""
    _check_has_support(target)
    if isinstance(target, Parity):
        return jnp.ones(target.support.shape, bool)
    return _relevant_vars(target.table, target.k)


def junta(support, table, n: int) -> Junta:
    """The k-junta on ``support`` (k distinct indices in [0, n)) with truth table ``table`` (2^k bits)."""
    support = _check_support(support, n)
    table = np.asarray(table)
    if table.shape != (2 ** support.size,):
        raise ValueError(f"table must have 2^k = {2 ** support.size} entries for k = {support.size}, got shape {table.shape}")
    if not np.isin(table, (0, 1)).all():
        raise ValueError("table must be binary (0/1 or bool)")
    return Junta(jnp.asarray(support, jnp.int32), jnp.asarray(table, bool))


def parity(support, n: int) -> Parity:
    """The parity of the ``support`` coordinates (k distinct indices in [0, n))."""
    return Parity(jnp.asarray(_check_support(support, n), jnp.int32))


def random_junta(key, n: int, k: int, *, nondegenerate: bool = True) -> Junta:
    """A k-junta with a uniformly random support of size k and a uniformly random truth table.

    With ``nondegenerate=True`` the table is drawn uniformly among those that depend on all k
    variables (rejection sampling inside the compiled program), so the support is identifiable.
    A draw is degenerate with probability <= 1/2 (k = 1), so after ``MAX_REJECTIONS`` = 64 draws
    (probability <= 2^-64, or a key whose generator repeats itself) the parity table is used.
    """
    n, k = _check_n_k(n, k)
    k_support, k_table = jax.random.split(key)
    support = _random_support(k_support, n, k)

    def draw(key):
        return jax.random.bernoulli(key, 0.5, (2**k,))

    table = draw(k_table)
    if nondegenerate:
        def cond(state):
            return ~jnp.all(_relevant_vars(state[2], k)) & (state[0] < MAX_REJECTIONS)

        def body(state):
            tries, key, _ = state
            key, sub = jax.random.split(key)
            return tries + 1, key, draw(sub)

        _, _, table = jax.lax.while_loop(cond, body, (0, jax.random.fold_in(k_table, 1), table))
        parity_table = jnp.asarray(np.bitwise_count(np.arange(2**k)) % 2 == 1)
        table = jnp.where(jnp.all(_relevant_vars(table, k)), table, parity_table)
    return Junta(support, table)


#: Rejection draws of :func:`random_junta` before it falls back to the parity table.
MAX_REJECTIONS = 64


def random_parity(key, n: int, k: int) -> Parity:
    """A k-parity on a uniformly random support of size k."""
    n, k = _check_n_k(n, k)
    return Parity(_random_support(key, n, k))


def decision_tree(feature, leaf, n: int) -> DecisionTree:
    """The complete depth-d tree with internal variables ``feature`` (2^d - 1, heap order, each
    in [0, n), none repeated on a root-to-leaf path) and leaf labels ``leaf`` (2^d bits)."""
    n = _checks.integer("n", n, low=1)
    feature = np.asarray(feature)
    leaf = np.asarray(leaf)
    d = _checks.integer("depth = log2(len(leaf))", int(np.log2(max(leaf.size, 1))), low=0, high=n)
    if leaf.shape != (2**d,) or feature.shape != (2**d - 1,):
        raise ValueError(f"leaf must have 2^d entries and feature 2^d - 1, got {leaf.shape} and {feature.shape}")
    if feature.size and (feature.min() < 0 or feature.max() >= n):
        raise ValueError(f"feature entries must be in [0, {n - 1}], got {feature.tolist()}")
    if not np.isin(leaf, (0, 1)).all():
        raise ValueError("leaf must be binary (0/1 or bool)")
    for i in range(feature.size):  # no variable twice on a path
        ancestor = i
        while ancestor:
            ancestor = (ancestor - 1) // 2
            if feature[ancestor] == feature[i]:
                raise ValueError(f"feature {feature[i]} is repeated on the path to node {i}")
    return DecisionTree(jnp.asarray(feature, jnp.int32), jnp.asarray(leaf, bool))


def random_tree(key, n: int, d: int) -> DecisionTree:
    """A uniformly random complete depth-d tree: each internal node tests a uniformly random
    variable not tested by its ancestors; leaf labels are uniform random bits."""
    n = _checks.integer("n", n, low=1)
    d = _checks.integer("d", d, low=0, high=n)
    k_leaf, k_var = jax.random.split(key)
    used = jnp.zeros((1, n), bool)
    features = []
    for level in range(d):
        priority = jax.random.uniform(jax.random.fold_in(k_var, level), (2**level, n))
        f = jnp.argmax(jnp.where(used, -1.0, priority), axis=-1).astype(jnp.int32)
        features.append(f)
        used = jnp.repeat(used | (f[:, None] == jnp.arange(n)), 2, axis=0)
    feature = jnp.concatenate(features) if features else jnp.zeros((0,), jnp.int32)
    return DecisionTree(feature, jax.random.bernoulli(k_leaf, 0.5, (2**d,)))


def addressing(c: int, k: int) -> Addressing:
    """f_{c,k} of 002 Sec. 4: k disjoint groups of ck addressing bits (A = c k^2), 2^k memory bits;
    group i is bits i ck .. (i+1) ck - 1 and z_i its parity."""
    c = _checks.integer("c", c, low=1)
    k = _checks.integer("k", k, low=1, high=16)
    return _addressing(np.kron(np.eye(k, dtype=bool), np.ones((1, c * k), bool)))


def coded_addressing(code) -> Addressing:
    """f_{c,k,S} of 002 Sec. 5 for the sets S_i given as the rows of ``code: {0,1}[k, A]``."""
    code = np.asarray(code)
    if code.ndim != 2 or code.shape[0] < 1 or code.shape[1] < 1:
        raise ValueError(f"code must be a 2-d 0/1 array of shape (k, A), got shape {code.shape}")
    _checks.integer("k = code.shape[0]", code.shape[0], low=1, high=16)
    if not np.isin(code, (0, 1)).all():
        raise ValueError("code must be binary (0/1 or bool)")
    return _addressing(code)


def agnostic_addressing(key, target: Addressing, eps: float) -> Addressing:
    """f_pi of 002 Sec. 6: ``target`` (f_{c,k} or f_{c,k,S}) with most memory bits fixed.

    The 2^k addresses are split uniformly at random into A^free, A^0 and A^1 with |A^0| = |A^1|
    and |A^free| the largest even number <= eps 2^(k-1) (it must be >= eps 2^(k-2), as in the
    paper); y_a is pinned to 0 on A^0 and to 1 on A^1 and stays a variable on A^free. f_pi is
    eps-close to the address junta :func:`nearby_junta` under every product distribution that
    satisfies Lemma 16's hypotheses. ``key`` may be traced (vmap over keys); ``eps`` is static.
    """
    _check_addressing(target)
    eps = _checks.real("eps", eps, low=0.0, high=1.0)
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


def code_distance(code) -> int:
    """min over non-empty I of |symmetric difference of S_i, i in I| (002 Sec. 5), by enumeration."""
    code = np.asarray(code, np.int64)
    k = code.shape[0]
    subsets = (np.arange(1, 2**k)[:, None] >> np.arange(k)) & 1
    return int(((subsets @ code) % 2).sum(axis=1).min())


def random_code(seed: int, k: int, length: int, min_distance: int = 0, tries: int = 1000) -> np.ndarray:
    """A random binary linear code: k uniformly random subsets of [length] (rows of a generator
    matrix), redrawn until ``code_distance >= min_distance``; raises ValueError after ``tries``."""
    k = _checks.integer("k", k, low=1, high=16)
    length = _checks.integer("length", length, low=1)
    min_distance = _checks.integer("min_distance", min_distance, low=0, high=length)
    rng = np.random.default_rng(seed)
    for _ in range(tries):
        code = rng.random((k, length)) < 0.5
        if code_distance(code) >= min_distance:
            return code
    raise ValueError(f"no random code with k = {k}, length = {length} reached min_distance = {min_distance} "
                     f"in {tries} tries; lower min_distance or raise length")


def _select(memory, selectors):
    """Word-parallel multiplexer: ``memory[a]`` per example with a = sum_t selectors[t] 2^t.

    Shannon expansion, one selector at a time: v = (~s & v_{s=0}) | (s & v_{s=1}).
    ``memory: uint32[2^t, W]``, ``selectors: uint32[t, W]``.
    """
    v = memory
    for t in range(selectors.shape[0]):
        v = v.reshape(-1, 2, v.shape[-1])
        v = (v[:, 0] & ~selectors[t]) | (v[:, 1] & selectors[t])
    return v[0]


def _walsh(v):
    """Walsh-Hadamard transform over the last axis (length 2^k): out[I] = sum_a (-1)^{|a & I|} v[a].

    k butterfly passes, O(k 2^k).
    """
    size = v.shape[-1]
    step = 1
    while step < size:
        pairs = v.reshape(v.shape[:-1] + (-1, 2, step))
        even, odd = pairs[..., 0, :], pairs[..., 1, :]
        v = jnp.stack([even + odd, even - odd], axis=-2).reshape(v.shape)
        step *= 2
    return v


#: |s_j| below this counts as s_j = 0 in the addressing oracle (an error of at most this in mu).
_TINY = 1e-20


def _addressing(code):
    k = code.shape[0]
    return Addressing(jnp.asarray(code, bool), jnp.zeros((2**k,), bool), jnp.zeros((2**k,), bool))


def _check_addressing(target):
    if not isinstance(target, Addressing):
        raise ValueError(f"target must be an Addressing target (addressing / coded_addressing), got {type(target).__name__}")


def _assignments(k):
    """``bool[2^k, k]``: row a holds the bits of a, least significant first."""
    return jnp.asarray((np.arange(2**k)[:, None] >> np.arange(k)) & 1, bool)


def _scatter_support(support, values_on_support, default, n):
    """``[n]`` equal to ``default`` off the support and ``values_on_support`` on it (no scatter)."""
    onehot = support[:, None] == jnp.arange(n)  # [k, n]
    return default + jnp.sum(jnp.where(onehot, (values_on_support - default)[:, None], 0.0), axis=0)


def _random_support(key, n, k):
    return jnp.sort(jax.random.choice(key, n, (k,), replace=False)).astype(jnp.int32)


def _relevant_vars(table, k):
    out = []
    for t in range(k):
        halves = table.reshape(2 ** (k - 1 - t), 2, 2**t)
        out.append(jnp.any(halves[:, 0] != halves[:, 1]))
    return jnp.stack(out) if out else jnp.zeros((0,), bool)


def _check_has_support(target):
    if not isinstance(target, (Junta, Parity)):
        raise ValueError(f"target must be a Junta or Parity (a target with a support), got {type(target).__name__}")


def _check_n_k(n, k):
    n = _checks.integer("n", n, low=1)
    k = _checks.integer("k", k, low=1, high=n)
    return n, k


def _check_support(support, n):
    n = _checks.integer("n", n, low=1)
    s = np.asarray(support)
    if s.ndim != 1 or (s.size and not np.issubdtype(s.dtype, np.integer)):
        raise ValueError(f"support must be a 1-d array of integer indices, got {support!r}")
    _checks.integer("k = len(support)", s.size, low=1, high=n)
    if s.min() < 0 or s.max() >= n:
        raise ValueError(f"support indices must be in [0, {n - 1}] for n = {n}, got {s.tolist()}")
    if np.unique(s).size != s.size:
        raise ValueError(f"support indices must be distinct, got {s.tolist()}")
    return s.astype(np.int32)
