"""The Kushilevitz-Mansour (Goldreich-Levin) algorithm: the heavy Fourier coefficients of f from
membership queries, as a level-wise, fixed-width frontier.

Seed 001 ("KM algorithm"): for a prefix alpha in {0,1}^j, the bucket
f_alpha(x) = sum_{S : S cap [j] = alpha} f^(S) chi_{S \\ [j]}(x) collects the coefficients whose
first j coordinates are alpha (F = 1 - 2f, uniform basis chi_S(x) = (-1)^{sum_{i in S} x_i}). Its
weight is computable from queries: with u = (y, x) and v = (z, x) sharing the last n - j
coordinates,

    E[f_alpha^2] = sum_{S : S cap [j] = alpha} f^(S)^2 = E_{x, y, z}[F(u) F(v) chi_alpha(y XOR z)].

Coef(alpha) splits alpha into alpha0, alpha1 while E[f_alpha^2] >= theta^2. Here the recursion runs
level by level as one static-shape program: at level j every prefix of the frontier (at most
``width`` of them) has two children, whose weights are estimated from the SAME ``samples``
triples (x, y, z) (2 samples queries per level, whatever the width); children with estimated
weight >= theta^2 / 2 survive, the ``width`` heaviest of them form the next frontier. After
level n the survivors are single sets S; their coefficients are estimated from ``samples``
further queries at uniform x, and the hypothesis is
:class:`~jaxtrees.hypotheses.polynomial.Polynomial`'s sign of sum_S f~(S) chi_S.

Guarantee: each estimate is a mean of +-1 terms, so by Hoeffding it is within t = theta^2 / 4 of
its expectation except with probability 2 exp(-samples t^2 / 2). If all 2 n width bucket estimates
are, every bucket with weight >= theta^2 (in particular every S with |f^(S)| >= theta) survives,
and every survivor has weight >= theta^2 / 4, so by Parseval at most 4 / theta^2 survive a level:
``width = floor(4 / theta^2)`` never overflows, and
``samples = ceil(32 ln(4 n width / delta) / theta^4)`` finds every such S with probability
>= 1 - delta, with ``(2 n + 1) samples`` queries (:meth:`KushilevitzMansour.queries`).

>>> import jax
>>> from jaxtrees import problems, targets
>>> f = targets.parity([1, 6], n=8)                   # a uniform 2-parity: ID3 sees no gain
>>> oracle = problems.Queries(f, n=8)
>>> km = KushilevitzMansour(theta=0.5, budget=17 * 64)
>>> h = jax.jit(km.fit)(jax.random.key(0), oracle)
>>> km.queries(8), h.sets[0].tolist()[:2], float(h.values[0])
(1088, [1, 6], 1.0)
"""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
from jax import lax

from jaxtrees.core import bits, checks
from jaxtrees.hypotheses.polynomial import Polynomial
from jaxtrees.problems import Queries


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class KushilevitzMansour:
    """KM: ``fit(key, queries) -> Polynomial`` over the sets found heavy (``access = "query"``).

    - ``theta``: find every S with |f^(S)| >= theta, in (0, 1);
    - ``delta``: failure probability the default budget is sized for, in (0, 1);
    - ``budget``: membership queries in all; None: the Hoeffding budget for theta and delta
      (module docstring); else ``samples = budget // (2 n + 1)`` triples per level, >= 1;
    - ``width``: most prefixes kept per level; None: floor(4 / theta^2), which cannot overflow when
      the estimates are accurate.

    The polynomial has ``width`` rows (sets as index lists of length n, padded with n); rows of
    prefixes that did not survive carry the coefficient 0.
    """

    theta: float = 0.3
    delta: float = 0.1
    budget: int | None = None
    width: int | None = None
    access = "query"

    def __post_init__(self):
        checks.real("theta", self.theta, low=0.0, high=1.0, low_open=True, high_open=True)
        checks.real("delta", self.delta, low=0.0, high=1.0, low_open=True, high_open=True)
        if self.budget is not None:
            checks.integer("budget", self.budget, low=3)  # n = 1 needs 2 n + 1 = 3
        if self.width is not None:
            checks.integer("width", self.width, low=1)

    @property
    def frontier(self) -> int:
        """Prefixes kept per level."""
        return self.width if self.width is not None else max(1, math.floor(4.0 / self.theta**2))

    def samples(self, n: int) -> int:
        """Query triples per level (and queries for the final coefficients) at n coordinates."""
        n = checks.integer("n", n, low=1)
        if self.budget is None:
            estimates = 2 * n * self.frontier
            return math.ceil(32.0 * math.log(2.0 * estimates / self.delta) / self.theta**4)
        samples = self.budget // (2 * n + 1)
        if samples < 1:
            raise ValueError(f"budget must be >= 2 n + 1 = {2 * n + 1} to reach depth n = {n} (two queries per "
                             f"level and one for the coefficients), got {self.budget}")
        return samples

    def queries(self, n: int) -> int:
        """Membership queries one fit makes at n coordinates: (2 n + 1) samples."""
        return (2 * n + 1) * self.samples(n)

    def fit(self, key, queries: Queries) -> Polynomial:
        if not isinstance(queries, Queries):
            raise ValueError(f"KushilevitzMansour fits membership queries (problems.Queries; a problem's "
                             f"queries()), got {type(queries).__name__}")
        return _fit(key, queries, self, self.samples(queries.n))


@functools.partial(jax.jit, static_argnames=("learner", "samples"))
def _fit(key, queries: Queries, learner: KushilevitzMansour, samples: int) -> Polynomial:
    n, width, words = queries.n, learner.frontier, bits.n_words(queries.n)
    level_keys = jax.random.split(key, n + 1)
    cut = learner.theta**2 / 2

    def signs(masks, points):  # (-1)^{|S cap x|}: float32[K, samples] for packed masks [K, w], points [samples, w]
        odd = bits.count(masks[:, None, :] & points[None, :, :]) & 1
        return 1.0 - 2.0 * odd.astype(jnp.float32)

    def F(points):  # +-1 answers to the queries at packed points uint32[samples, words]
        return 1.0 - 2.0 * queries(bits.unpack(points, n)).astype(jnp.float32)

    def level(j, frontier):  # prefixes of length j -> their children of length j + 1, filtered
        masks, alive = frontier
        x, y, z = jax.random.bits(level_keys[j], (3, samples, words), jnp.uint32)
        head = bits.prefix_mask(words, j + 1)
        u, v = (y & head) | (x & ~head), (z & head) | (x & ~head)
        children = jnp.concatenate([masks, masks | bits.prefix_mask(words, j + 1) & ~bits.prefix_mask(words, j)])
        weight = jnp.matmul(signs(children, y ^ z), F(u) * F(v), precision=lax.Precision.HIGHEST) / samples
        keep = jnp.concatenate([alive, alive]) & (weight >= cut)
        _, top = lax.top_k(jnp.where(keep, weight, -jnp.inf), width)
        return children[top], keep[top]

    start = (jnp.zeros((width, words), jnp.uint32), jnp.arange(width) == 0)  # the empty prefix
    masks, alive = lax.fori_loop(0, n, level, start)
    x = jax.random.bits(level_keys[n], (samples, words), jnp.uint32)
    values = jnp.where(alive, jnp.matmul(signs(masks, x), F(x), precision=lax.Precision.HIGHEST) / samples, 0.0)
    member = bits.unpack(masks, n)  # bool[width, n]
    sets = jnp.sort(jnp.where(member, jnp.arange(n, dtype=jnp.int32), n), axis=-1)
    return Polynomial(sets, values)
