"""The learner conformance checks: what every learner passes, the registry's and a user's.

:func:`check` runs them all on one learner (a registered name or a learner object) and raises one
:class:`ConformanceError` naming each failing check, as scikit-learn's ``check_estimator`` does; it
returns what each check verified when all pass. tests/test_learner_conformance.py runs each check on
every registered learner; a check is a function of :class:`Fits` (one learner's shared fits).

>>> list(CHECKS)[:3]
['protocol', 'vmap equals loop', 'same key same hypothesis']
"""

from __future__ import annotations

import functools
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from jaxtrees import targets
from jaxtrees.core import bits, distributions, sampling
from jaxtrees.hypotheses.base import Hypothesis, sample_error
from jaxtrees.learners.base import ACCESS, Learner, Size, entry, get
from jaxtrees.learners.growth_rule import WeightCountingWarning
from jaxtrees.problems import Population, Queries, Synthetic, data_for, evaluate

#: The conformance problems: n bits, M examples, batches of B data sets.
N, M, B = 8, 96, 4


class ConformanceError(AssertionError):
    """A learner failed conformance checks; ``failures`` maps each failing check's name to why."""

    def __init__(self, learner, failures: dict):
        self.failures = dict(failures)
        lines = [f"- {name}: {why}" for name, why in self.failures.items()]
        super().__init__(f"{learner!r} fails {len(failures)} of {len(CHECKS)} conformance checks "
                         f"({', '.join(failures)}):\n" + "\n".join(lines))


def problem(key, n: int = N) -> Synthetic:
    """The conformance problem: a random 3-junta under c = 0.2 smoothed marginals."""
    kp, kf = jax.random.split(key)
    return Synthetic(distributions.smoothed(c=0.2).marginals(kp, n), targets.random_junta(kf, n, 3))


class Fits:
    """One learner's fits that the checks share: ``fit`` (``jit(fit)``), ``fit_batch`` (``jit(vmap(fit))``),
    and :attr:`batch`, computed once. ``resized(n)`` is the learner for n input bits (the n = 1 cases)."""

    def __init__(self, learner, resized=None, made_by: str | None = None):
        self.learner, self.made_by = learner, made_by  # made_by: "the factory of 'name'" for a registered one
        self.resized = resized if resized is not None else (lambda n: learner)
        fit = getattr(learner, "fit", None) if isinstance(learner, Learner) else None
        self.fit = jax.jit(fit) if callable(fit) else None  # None: no learner, the protocol check fails
        self.fit_batch = jax.jit(jax.vmap(fit)) if callable(fit) else None

    @functools.cached_property
    def batch(self):
        """``(keys, data, batched, singles)``: B data sets of the conformance problem, their fits by
        ``fit_batch`` and one by one by ``fit``."""
        keys = jax.random.split(jax.random.key(0), B)
        data = jax.vmap(lambda k: data_for(self.learner, problem(k), jax.random.fold_in(k, 7), M))(keys)
        batched = jax.device_get(self.fit_batch(keys, data))
        singles = [jax.device_get(self.fit(keys[b], jax.tree.map(lambda a: a[b], data))) for b in range(B)]
        return keys, data, batched, singles


def prepare(learner) -> Fits:
    """:class:`Fits` of a learner object, or of a registered name (its n = 1 cases from ``get(name, Size(n=1))``)."""
    if isinstance(learner, str):
        name = learner
        return Fits(get(name), lambda n: get(name, Size(n=n)), f"the factory of {name!r}")
    return Fits(learner)


def assert_same(a, b, where: str) -> None:
    """Two hypotheses (pytrees) are equal: floats to 1e-5 (vmap may reassociate sums), the rest exactly."""
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        x, y = np.asarray(x), np.asarray(y)
        if np.issubdtype(x.dtype, np.floating):
            np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6, err_msg=where)
        else:
            np.testing.assert_array_equal(x, y, err_msg=where)


def assert_valid(h, n: int, m: int = M) -> None:
    """Predictions are bits, packed and plain agree, and an exact error is a probability."""
    if not isinstance(h, Hypothesis):
        raise AssertionError(f"fit returned a {type(h).__name__}, not a Hypothesis (exact, predict, predict_bits)")
    x = jax.random.bernoulli(jax.random.key(9), 0.5, (m, n))
    plain = np.asarray(h.predict(x))
    assert plain.shape == (m,) and set(np.unique(plain)) <= {0, 1}, f"predict gave {plain.dtype}{list(plain.shape)}"
    packed = np.asarray(bits.unpack(h.predict_bits(bits.pack(x.T)), m))
    np.testing.assert_array_equal(packed, plain == 1, err_msg="predict_bits disagrees with predict")
    if h.exact:
        error = float(h.exact_error(jnp.full((n,), 0.5), targets.parity([0], n)))
        assert 0.0 <= error <= 1.0 + 1e-6, f"exact_error {error} is no probability"


def protocol(fits: Fits) -> None:
    """A :class:`~jaxtrees.learners.base.Learner`: ``access`` in ACCESS, a ``fit``, hashable (static under jit)."""
    learner = fits.learner
    if fits.fit is None:
        got = f"{fits.made_by} returned" if fits.made_by else "got"
        raise AssertionError(f"{got} {learner!r} ({type(learner).__name__}), not a learner: a learner provides "
                             f"`access` (one of {ACCESS}) and a method `fit(key, data)` returning a hypothesis")
    assert learner.access in ACCESS, f"access must be one of {ACCESS}, got {learner.access!r}"
    assert hash(learner) == hash(learner) and learner == learner, "the learner must be hashable and equal to itself"


def vmap_equals_loop(fits: Fits) -> None:
    """``jax.vmap(fit)`` over a batch equals a loop of single fits."""
    _, _, batched, singles = fits.batch
    for b, single in enumerate(singles):
        assert_same(jax.tree.map(lambda a: a[b], batched), single, f"batch member {b} vs its single fit")


def same_key_same_hypothesis(fits: Fits) -> None:
    """Fitting the batch again with the same keys gives the same hypotheses."""
    keys, data, batched, _ = fits.batch
    assert_same(jax.device_get(fits.fit_batch(keys, data)), batched, "refit with the same keys")


def chunk_invariance(fits: Fits) -> None:
    """The batch fitted in chunks of 2 equals one batch."""
    keys, data, batched, _ = fits.batch
    halves = [jax.device_get(fits.fit_batch(keys[s], jax.tree.map(lambda a: a[s], data)))
              for s in (slice(0, B // 2), slice(B // 2, B))]
    assert_same(jax.tree.map(lambda *parts: np.concatenate(parts), *halves), batched, "chunks of 2")


def valid_hypothesis(fits: Fits) -> None:
    """The hypothesis predicts packed and plain inputs alike, and an exact error lies in [0, 1] and
    matches its error on a large test sample."""
    keys, _, _, singles = fits.batch
    h = singles[0]
    assert_valid(h, N)
    if h.exact:
        prob = problem(keys[0])
        exact = float(evaluate(h, prob).error)
        sampled = float(sample_error(h, prob.test(jax.random.key(5), M, size=50_000)))  # sd <= 0.0023
        assert abs(exact - sampled) < 0.01, f"exact error {exact} vs {sampled} on 50,000 test points"


def degenerate_cases(learner) -> dict:
    """The degenerate cases, ``{name: (data, n)}``. Those over n = N bits have the shapes of the batch's
    members (M examples, a 3-junta target), so they share ``Fits.fit``'s compiled program."""
    key = jax.random.key(1)
    if learner.access == "population":
        f = targets.random_junta(key, N, 3)
        p_edges = jnp.asarray(np.r_[np.zeros(N // 2), np.ones(N // 2)], jnp.float32)
        constant = targets.junta([0, 1, 2], np.zeros(8, int), N)
        return {"p at 0 and 1": (Population(p_edges, f), N),
                "constant target": (Population(jnp.full((N,), 0.5), constant), N),
                "n = 1": (Population(jnp.full((1,), 0.3), targets.parity([0], 1)), 1)}
    if learner.access == "query":
        return {"constant target": (Queries(targets.junta([0, 1, 2], np.ones(8, int), N), N), N),
                "n = 1": (Queries(targets.parity([0], 1), 1), 1)}
    rng = np.random.default_rng(0)
    X, y = rng.integers(0, 2, (M, N)), rng.integers(0, 2, M)
    one = np.arange(M) == 0  # m = 1: the first example, in M slots (the rest zero and not valid)
    return {"m = 1": (sampling.prefix(sampling.from_arrays(X * one[:, None], y * one), 1), N),
            "all labels equal": (sampling.from_arrays(X, np.ones(M, int)), N),
            "all weight on one example": (sampling.with_weights(sampling.from_arrays(X, y),
                                                                np.eye(M)[7].astype(np.float32)), N),
            "n = 1": (sampling.from_arrays(X[:, :1], y), 1)}


def degenerate_data(fits: Fits) -> None:
    """Degenerate data gives a valid hypothesis: m = 1, all labels equal (then fitted exactly where the
    hypothesis has an exact error), all weight on one example, n = 1; a population learner: marginals at
    0 and 1, a constant target, n = 1; a query learner: a constant target, n = 1."""
    learner = fits.learner
    for case, (data, n) in degenerate_cases(learner).items():
        fit = fits.fit if n == N else jax.jit(fits.resized(n).fit)
        try:
            h = fit(jax.random.key(2), data)
            assert_valid(h, n)
        except Exception as error:
            raise AssertionError(f"{case}: {type(error).__name__}: {error}") from error
        if h.exact and learner.access == "sample" and case == "all labels equal":
            assert int(bits.count(h.predict_bits(data.X) & data.valid)) == M, f"{case}: not every label predicted"


def bad_input_cases(learner) -> list:
    """``[(what, data, pattern)]``: bad input of the learner's access and the pattern its ValueError must match."""
    if learner.access == "population":
        f = targets.parity([0], N)
        return [(f"p = {p.ravel()[0]} {list(p.shape)}", Population(p, f), match) for p, match in
                ((jnp.full((N,), 1.5), r"p\["), (jnp.full((N,), jnp.nan), r"p\["), (jnp.full((2, N), 0.5), "p"))]
    good = sampling.from_arrays(np.eye(N, dtype=int)[:5], [0, 1, 0, 1, 1])
    if learner.access == "query":  # queries of the wrong kind (a Queries with n < 1 cannot be built)
        return [("a Data set instead of membership queries", good, "membership queries")]
    return [
        ("data.X of one dimension", good._replace(X=good.X[0]), "data.X"),
        ("data.y of 3 words", good._replace(y=jnp.zeros((3,), jnp.uint32)), "data.y"),
        ("no valid example", good._replace(valid=jnp.zeros_like(good.valid), y=jnp.zeros_like(good.y)), "m >= 1"),
        ("a negative weight", good._replace(weight=jnp.asarray(np.r_[1.0, -1.0, np.zeros(30)], jnp.float32)),
         r"data.weight\[1\]"),
        ("a NaN weight", good._replace(weight=jnp.asarray(np.r_[1.0, 1.0, np.nan, np.zeros(29)], jnp.float32)),
         r"data.weight\[2\]"),
        ("5 weights for 32 slots", good._replace(weight=jnp.ones((5,), jnp.float32)), "data.weight must have"),
    ]


def bad_input(fits: Fits) -> None:
    """Bad input (wrong shapes, negative or NaN weights, m = 0, marginals outside [0, 1], the wrong access)
    raises a ValueError naming the parameter (``check_data`` does it for sample learners)."""
    for what, data, pattern in bad_input_cases(fits.learner):
        try:
            fits.learner.fit(jax.random.key(0), data)
        except ValueError as error:
            if not re.search(pattern, str(error)):
                raise AssertionError(f"fit on {what}: the ValueError does not name {pattern!r}: {error}") from error
        except Exception as error:
            raise AssertionError(f"fit on {what} raised {type(error).__name__} ({error}), not a ValueError "
                                 f"naming {pattern!r}") from error
        else:
            raise AssertionError(f"fit on {what} raised nothing; it must raise a ValueError naming {pattern!r} "
                                 "(check the data: learners.check_data)")


#: Every check, by name, in the order :func:`check` runs them.
CHECKS = {"protocol": protocol, "vmap equals loop": vmap_equals_loop, "same key same hypothesis": same_key_same_hypothesis,
          "chunk invariance": chunk_invariance, "valid hypothesis": valid_hypothesis, "degenerate data": degenerate_data,
          "bad input": bad_input}


def check(learner, *, resized=None) -> dict:
    """Run every conformance check on ``learner`` (a learner object or a registered name); raise one
    :class:`ConformanceError` naming each failing check, else return ``{check: what it verified}``.

    ``resized(n)``: the learner for n input bits, for the n = 1 cases (default: a name's factory at
    ``Size(n=1)``, a learner object itself).
    """
    if isinstance(learner, str):
        entry(learner)  # an unknown name: the ValueError naming the registered ones
    try:
        fits = prepare(learner)
    except Exception as error:  # a registered name whose factory raises: the protocol check fails
        if not isinstance(learner, str):
            raise
        raise ConformanceError(learner, {"protocol": f"the factory of {learner!r}, called with learners.Size(), "
                                                     f"raised {type(error).__name__}: {error}"}) from error
    if resized is not None:
        fits.resized = resized
    failures = {}
    with warnings.catch_warnings():  # the checks' own weighted data: not the user's to act on
        warnings.simplefilter("ignore", WeightCountingWarning)
        for name, run in CHECKS.items():
            try:
                run(fits)
            except Exception as error:  # a crash is a failing check too
                failures[name] = f"{type(error).__name__}: {error}".strip()
                if name == "protocol":
                    break
    if failures:
        raise ConformanceError(fits.learner if fits.fit is not None else learner, failures)
    return {name: " ".join(run.__doc__.split("\n\n")[0].split()) for name, run in CHECKS.items()}
