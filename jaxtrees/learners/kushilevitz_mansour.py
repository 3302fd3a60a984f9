"""The Kushilevitz-Mansour (Goldreich-Levin) algorithm: the heavy Fourier coefficients of f from
membership queries, as a level-wise, fixed-width frontier.

Seed 001's bucket recursion splits a prefix of the coordinates while the Fourier weight below it, estimated from
queries, is large. Here it runs level by level as one static-shape program: the at most ``width`` prefixes of a level
are estimated from the same query triples, and the survivors' coefficients give the sign hypothesis. A Hoeffding
budget for theta and delta, or a given one, sets the queries (:class:`KushilevitzMansour` derives it).

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

from jaxtrees.core import bits, checks, prng
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

    def chunk(self) -> int:
        """Query triples weighed together: :data:`CHUNK`, fewer for a frontier so wide that
        2 x width x CHUNK estimates would pass :data:`CHUNK_BYTES` (memory is bounded by the
        frontier, not by the budget)."""
        return max(1, min(CHUNK, CHUNK_BYTES // (8 * 2 * self.frontier)))

    def working_set(self, n: int) -> int:
        """Bytes one fit holds at n coordinates: the frontier and its children (packed sets, scores)
        and the estimates of one chunk of triples."""
        words, width = bits.n_words(n), self.frontier
        return 2 * width * (4 * words + 12) + 2 * width * self.chunk() * 8 + 3 * self.chunk() * (4 * words + n)

    def fit(self, key, queries: Queries) -> Polynomial:
        return self.fit_triples(key, queries, None)

    def fit_triples(self, key, queries: Queries, samples) -> Polynomial:
        """The fit on the first ``samples`` of this learner's triples per level (None: all of them;
        else an int, possibly traced, in [1, self.samples(n)]): the same polynomial as
        ``KushilevitzMansour(theta, delta, budget=(2 n + 1) samples, width).fit`` (its triples are the
        first ones of every longer budget's), compiled once for every value of ``samples``."""
        if not isinstance(queries, Queries):
            raise ValueError(f"KushilevitzMansour fits membership queries (problems.Queries; a problem's "
                             f"queries()), got {type(queries).__name__}")
        capacity = self.samples(queries.n)
        if capacity > MAX_SAMPLES:
            raise ValueError(f"budget must give at most {MAX_SAMPLES} query triples per level, got {capacity} at "
                             f"n = {queries.n} (theta = {self.theta:g}, delta = {self.delta:g}, budget = "
                             f"{self.budget}): {self.queries(queries.n):.3g} queries; raise theta or set budget")
        need = self.working_set(queries.n)
        if need > MAX_WORKING_SET:
            raise ValueError(f"theta = {self.theta:g} keeps a frontier of width = {self.frontier} prefixes, whose "
                             f"estimates need {need / 2**30:.1f} GiB per fit (at most {MAX_WORKING_SET / 2**30:g} "
                             f"GiB); raise theta or set a smaller width")
        if samples is None:
            samples = capacity
        elif checks.is_concrete(samples):
            checks.integer("samples", int(samples), low=1, high=capacity)
        return _fit(key, queries, self, jnp.asarray(samples, jnp.int32))


#: Query triples weighed together (:meth:`KushilevitzMansour.chunk`): a level's estimates stream
#: over the budget in chunks, so memory does not grow with it.
CHUNK = 256
#: Bytes of one chunk's estimates (2 width x chunk float32 signs and counts) before the chunk shrinks.
CHUNK_BYTES = 2**26
#: Query triples per level that a fit may make (its count is an int32).
MAX_SAMPLES = 2**31 - 1
#: Bytes one fit may hold (:meth:`KushilevitzMansour.working_set`).
MAX_WORKING_SET = 2**32


@functools.partial(jax.jit, static_argnames="learner")
def _fit(key, queries: Queries, learner: KushilevitzMansour, samples) -> Polynomial:
    """KM with the first ``samples`` (traced) triples per level. Triple t of level j
    is row t mod B of chunk t // B, drawn from ``fold_in(level_key[j], t // B)`` (B = learner.chunk()),
    so a longer budget extends a shorter one's triples."""
    n, width, words, chunk = queries.n, learner.frontier, bits.n_words(queries.n), learner.chunk()
    level_keys = prng.split(key, n + 1)
    cut = learner.theta**2 / 2
    chunks = (samples + chunk - 1) // chunk
    scale = 1.0 / samples.astype(jnp.float32)

    def signs(masks, points):  # (-1)^{|S cap x|}: float32[K, chunk] for packed masks [K, w], points [chunk, w]
        odd = bits.count(masks[:, None, :] & points[None, :, :]) & 1
        return 1.0 - 2.0 * odd.astype(jnp.float32)

    def F(points):  # +-1 answers to the queries at packed points uint32[chunk, words]
        return 1.0 - 2.0 * queries(bits.unpack(points, n)).astype(jnp.float32)

    def stream(level_key, masks, draw, weigh):
        """The mean over the first ``samples`` draws (``weigh(points) -> (chi points, answers)``) of
        signs(masks, chi points) times the answers, one chunk at a time."""
        def body(c, total):
            points = jax.random.bits(jax.random.fold_in(level_key, c), draw, jnp.uint32)
            chi, answer = weigh(points)
            answer = jnp.where(c * chunk + jnp.arange(chunk) < samples, answer, 0.0)
            return total + jnp.matmul(signs(masks, chi), answer, precision=lax.Precision.HIGHEST)
        return lax.fori_loop(0, chunks, body, jnp.zeros(masks.shape[0], jnp.float32)) * scale

    def level(j, frontier):  # prefixes of length j -> their children of length j + 1, filtered
        masks, alive = frontier
        head = bits.prefix_mask(words, j + 1)

        def weigh(points):
            x, y, z = points
            u, v = (y & head) | (x & ~head), (z & head) | (x & ~head)
            return y ^ z, F(u) * F(v)

        children = jnp.concatenate([masks, masks | bits.prefix_mask(words, j + 1) & ~bits.prefix_mask(words, j)])
        weight = stream(level_keys[j], children, (3, chunk, words), weigh)
        keep = jnp.concatenate([alive, alive]) & (weight >= cut)
        _, top = lax.top_k(jnp.where(keep, weight, -jnp.inf), width)
        return children[top], keep[top]

    start = (jnp.zeros((width, words), jnp.uint32), jnp.arange(width) == 0)  # the empty prefix
    masks, alive = lax.fori_loop(0, n, level, start)
    values = jnp.where(alive, stream(level_keys[n], masks, (chunk, words), lambda x: (x, F(x))), 0.0)
    member = bits.unpack(masks, n)  # bool[width, n]
    sets = jnp.sort(jnp.where(member, jnp.arange(n, dtype=jnp.int32), n), axis=-1)
    return Polynomial(sets, values)
