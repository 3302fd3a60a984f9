"""Impurity functions G: [0, 1] -> [0, 1] and the purity gain they induce.

G is concave, symmetric about 1/2, with G(0) = G(1) = 0; the built-ins ``entropy`` (ID3, C4.5),
``gini`` (CART), ``kearns_mansour`` and ``error`` are normalized to G(1/2) = 1 (002 Sec. 2). The
purity gain of splitting a node on feature i (000 Alg. 1, 002 Def. 6) is
G(mu) - Pr[x_i = 1] G(mu_1) - Pr[x_i = 0] G(mu_0), with mu, mu_b the mean label in the node and
in its children (a child of probability 0 contributes 0): the per-node gain, not weighted by the
node's share of the data (:func:`gain`).

>>> import jax.numpy as jnp
>>> G = get("gini")
>>> float(G(jnp.float32(0.5)))
1.0
>>> round(float(gain(G, 0.5, 0.5, 1.0, 0.0)), 6)   # a perfect split of a balanced node
1.0
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxtrees.core import checks


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class Impurity:
    """A named impurity function; ``G(q)`` evaluates it elementwise on jnp arrays."""

    name: str
    fn: Callable = dataclasses.field(repr=False)
    #: Optional ``(mu, p1, mu1, mu0, p0) -> gain``: the same value as G(mu) - p1 G(mu1) - p0 G(mu0)
    #: in a form with less rounding (used by :func:`gain`).
    split_gain: Callable | None = dataclasses.field(default=None, repr=False)

    def __call__(self, q):
        return self.fn(q)


def _xlogx(q):
    """q log q with 0 log 0 = 0. (``jax.scipy.special.xlogy`` computes the same values on [0, 1]
    but ran 7x slower on XLA CPU, where it dominated the split decisions.)"""
    positive = q > 0
    return jnp.where(positive, q * jnp.log(jnp.where(positive, q, 1.0)), 0.0)


# The built-ins, each normalized to G(1/2) = 1.
# entropy (ID3, C4.5): G(q) = -q log2 q - (1-q) log2(1-q); equals scikit-learn's "entropy".
def _entropy(q):
    return -(_xlogx(q) + _xlogx(1.0 - q)) / np.log(2.0)


# gini (CART): G(q) = 4 q (1-q); scikit-learn's "gini" is 2 q (1-q), half of it, and 000 and the
# lecture notes write 1 - q^2 - (1-q)^2, also half. The argmax is the same; reported gains are ours.
def _gini(q):
    return 4.0 * q * (1.0 - q)


# kearns_mansour: G(q) = 2 sqrt(q (1-q)); its gain is evaluated in a closed form free of
# cancellation (_kearns_mansour_gain), so devices whose square roots round differently rank splits alike.
def _kearns_mansour(q):
    return 2.0 * jnp.sqrt(jnp.maximum(q * (1.0 - q), 0.0))


def _kearns_mansour_gain(mu, p1, mu1, mu0, p0):
    """G(mu) - p1 G(mu1) - p0 G(mu0) for G = 2 sqrt(q (1 - q)), mu = p1 mu1 + p0 mu0, as

        2 p1 p0 (mu1 - mu0)^2 / ((sqrt(mu1 (1 - mu0)) + sqrt(mu0 (1 - mu1)))^2 S),
        S = sqrt(mu (1 - mu)) + p1 sqrt(mu1 (1 - mu1)) + p0 sqrt(mu0 (1 - mu0))

    (with counts a = p1 mu1 p0 (1 - mu0), b = p0 mu0 p1 (1 - mu1): sqrt(PQ) - sqrt(p1 q1) - sqrt(p0 q0)
    = (sqrt(a) - sqrt(b))^2 / (sqrt(PQ) + sqrt(p1 q1) + sqrt(p0 q0)) and a - b = p1 p0 (mu1 - mu0)).
    Every term is positive: the relative error is a few ulps plus that of mu1 - mu0, where the
    difference of square roots loses ~ulp G(mu) / gain."""
    root = lambda q: jnp.sqrt(jnp.maximum(q * (1.0 - q), 0.0))  # noqa: E731
    cross = jnp.sqrt(mu1 * (1.0 - mu0)) + jnp.sqrt(mu0 * (1.0 - mu1))
    denominator = cross**2 * (root(mu) + p1 * root(mu1) + p0 * root(mu0))
    return jnp.where(denominator > 0, 2.0 * p1 * p0 * (mu1 - mu0) ** 2 / jnp.maximum(denominator, 1e-30), 0.0)


# error: G(q) = 2 min(q, 1-q), the misclassification rate; its gain is the drop in training error,
# what AdaBoost's stumps minimize (concave but not strictly: many gains are exactly 0).
def _error(q):
    return 2.0 * jnp.minimum(q, 1.0 - q)


ENTROPY = Impurity("entropy", _entropy)
GINI = Impurity("gini", _gini)
KEARNS_MANSOUR = Impurity("kearns_mansour", _kearns_mansour, _kearns_mansour_gain)
ERROR = Impurity("error", _error)
BUILTIN = {imp.name: imp for imp in (ENTROPY, GINI, KEARNS_MANSOUR, ERROR)}


def get(spec) -> Impurity:
    """Resolve ``"entropy" | "gini" | "kearns_mansour" | "error"``, an :class:`Impurity`, or a callable G.

    A user callable is checked on a grid of 101 points: G(0) = G(1) = 0 and G(q) = G(1-q) to
    1e-5, and concavity (discrete second derivative <= 0.05); failing any raises ValueError.
    """
    if isinstance(spec, Impurity):
        return spec
    if isinstance(spec, str):
        if spec not in BUILTIN:
            raise ValueError(f"impurity must be one of {sorted(BUILTIN)} or a callable, got {spec!r}")
        return BUILTIN[spec]
    if callable(spec):
        _check_user_impurity(spec)
        return Impurity(getattr(spec, "__name__", "custom"), spec)
    raise ValueError(f"impurity must be one of {sorted(BUILTIN)} or a callable, got {spec!r}")


#: The built-ins in a fixed order: a traced impurity is an index into it (:class:`Selected`).
NAMES = tuple(BUILTIN)


@jax.tree_util.register_pytree_node_class
class Selected:
    """The built-in impurity ``names[index]`` for a traced ``index``: one compiled program serves
    every impurity of ``names`` (default :data:`NAMES`). G and its gain go through ``lax.switch``
    (one branch per name, so list only those needed), which runs one branch where the index is the
    same for a whole vmapped group (and every branch, selected, where it is not)."""

    def __init__(self, index, names: tuple = NAMES):
        self.index, self.names = index, tuple(names)

    def tree_flatten(self):
        return (self.index,), self.names

    @classmethod
    def tree_unflatten(cls, names, children):
        return cls(children[0], names)

    @property
    def name(self) -> str:
        return "selected"

    def __call__(self, q):
        return jax.lax.switch(self.index, [BUILTIN[name].fn for name in self.names], q)


def selected(index, names: tuple = NAMES) -> Selected:
    """:class:`Selected` for ``index`` (an int32 index into ``names``, or a name), or ``index`` itself
    if it is one."""
    if isinstance(index, Selected):
        return index
    names = tuple(names)
    for name in names:
        checks.choice("impurity", name, NAMES)
    if isinstance(index, str):
        index = names.index(checks.choice("impurity", index, names))
    return Selected(jnp.asarray(index, jnp.int32), names)


def ratio(a, b):
    """The mean ``a / b`` of a node (a weighted count of 1-labels over its weight), 0 where b <= 0
    and exactly 1 where a == b. XLA divides float32 on an NVIDIA GPU with ``div.full`` (within 2
    ulps, not correctly rounded), which can put a pure node's mean at 1 - 2^-24; G(q) = 2 sqrt(q (1 - q))
    turns that ulp into 2^-11 (a Kearns-Mansour gain 2.5e-4 off, seen on an H100)."""
    return jnp.where(b > 0, jnp.where(a == b, 1.0, quotient(a, jnp.maximum(b, 1e-30))), 0.0)


def quotient(num, den):
    """``num / den``, rounded as the division rounds however the program batches it: XLA rewrites a
    division by a broadcast value (a node's weight over its features, a constant weight over a vmapped
    batch) as a product with the reciprocal, 1 ulp off, so ``jit(vmap(f))`` and a loop of ``jit(f)``
    differed; here the denominator takes the quotient's shape by an add XLA keeps (0 * x is not 0 for floats)."""
    return num / (den + 0.0 * num)


#: Child means this close to the parent's count as unchanged: the split's gain is exactly 0.
UNCHANGED_TOL = 2.0**-20


def gain(G: Impurity, mu, p1, mu1, mu0, p0=None, *, relative: bool = False):
    """Purity gain G(mu) - p1 G(mu1) - p0 G(mu0), elementwise (p0 = 1 - p1 by default).

    Evaluated as p1 (G(mu) - G(mu1)) + p0 (G(mu) - G(mu0)) (or by ``G.split_gain``, where the
    impurity has a form with less rounding), and set to exactly 0 when either
    child's mean is within ``UNCHANGED_TOL`` = 2^-20 of the parent's (since mu = p1 mu1 + p0 mu0,
    then both are; means recovered from float32 weights are a few ulps off, and the gain such a
    split could have, O(2^-40), is below float32 resolution anyway). So a split that changes nothing,
    e.g. on an irrelevant variable in exact growth, has gain exactly 0 however the compiler fuses
    or contracts the arithmetic, and swapping the children (a feature
    and its complement) gives a bitwise-equal gain when p0 and p1 are passed as computed from
    the two children's weights. Means are clipped to [0, 1] first: exact means summed in
    float32 can overshoot by an ulp.

    ``relative=True`` (weighted growth's minority-label means, each summed directly: issue 58) makes the
    tolerance relative, 2^-20 min(mu, 1 - mu): a node of mean 1e-9 (one heavy example among light ones)
    still has gains, where the absolute tolerance zeroes them all.
    """
    p0 = 1.0 - p1 if p0 is None else p0
    if isinstance(G, Selected):
        branches = [lambda *a, G=BUILTIN[name]: gain(G, *a, relative=relative) for name in G.names]
        return jax.lax.switch(G.index, branches, mu, p1, mu1, mu0, p0)
    mu, mu1, mu0 = (jnp.clip(q, 0.0, 1.0) for q in (mu, mu1, mu0))
    tol = UNCHANGED_TOL * jnp.minimum(mu, 1.0 - mu) if relative else UNCHANGED_TOL
    unchanged = (jnp.abs(mu1 - mu) <= tol) | (jnp.abs(mu0 - mu) <= tol)
    if G.split_gain is not None:
        return jnp.where(unchanged, 0.0, G.split_gain(mu, p1, mu1, mu0, p0))
    g = G(mu)
    return jnp.where(unchanged, 0.0, p1 * (g - G(mu1)) + p0 * (g - G(mu0)))


def _check_user_impurity(fn, tol=1e-5, curvature_tol=0.05):
    q = np.linspace(0.0, 1.0, 101, dtype=np.float32)
    try:
        g = np.asarray(fn(jnp.asarray(q)), dtype=np.float64)
    except Exception as e:  # noqa: BLE001 - report any failure as a bad parameter
        raise ValueError(f"impurity callable failed on a float32 array in [0, 1]: {e}") from e
    if g.shape != q.shape or not np.isfinite(g).all():
        raise ValueError("impurity callable must map float32[N] in [0, 1] to finite float32[N]")
    if abs(g[0]) > tol or abs(g[-1]) > tol:
        raise ValueError(f"impurity must satisfy G(0) = G(1) = 0, got G(0) = {g[0]:.3g}, G(1) = {g[-1]:.3g}")
    if np.max(np.abs(g - g[::-1])) > tol:
        raise ValueError("impurity must be symmetric: G(q) = G(1 - q) on [0, 1]")
    # Concavity: the discrete second derivative on a grid of step h = 0.01 must be <= 0, up to
    # curvature_tol (float32 rounding of G, ~1e-7, gives second differences ~4e-7 / h^2 = 4e-3).
    h = float(q[1] - q[0])
    if np.max(g[:-2] - 2 * g[1:-1] + g[2:]) / h**2 > curvature_tol:
        raise ValueError("impurity must be concave on [0, 1]")
