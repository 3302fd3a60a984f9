"""Built-in impurities and the purity gain."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import entropy as scipy_entropy

import helpers
import jaxtrees as jt
from jaxtrees.core import impurity
from reference import IMPURITIES, id3

NAMES = ("entropy", "gini", "kearns_mansour")
GRID = np.linspace(0.0, 1.0, 2001, dtype=np.float32)


_G = {name: jax.jit(impurity.get(name)) for name in NAMES}  # one compile each, not per eager op


def G(name, q):
    return np.asarray(_G[name](jnp.asarray(q, jnp.float32)), np.float64)


@pytest.mark.parametrize("name", NAMES)
def test_endpoints_and_peak(name):
    np.testing.assert_allclose(G(name, [0.0, 0.5, 1.0]), [0.0, 1.0, 0.0], rtol=0, atol=1e-6)
    g = G(name, GRID)
    assert np.all(np.isfinite(g)) and g.min() >= 0 and g.max() <= 1 + 1e-6
    assert np.argmax(g) == 1000  # the peak is at 1/2


@pytest.mark.parametrize("name", NAMES)
def test_symmetric(name):
    q = GRID.astype(np.float64)
    np.testing.assert_allclose(G(name, q), G(name, (1 - q).astype(np.float32)), rtol=0, atol=2e-6)


@pytest.mark.parametrize("name", NAMES)
def test_concave(name):
    """Second differences G(q-h) - 2G(q) + G(q+h) are <= 0 (float32 noise: 2e-6), and the scaled
    ones approximate G'' < 0: at most -7.9 for gini (G'' = -8), below -2.8 (~ -8/ln 4 at 1/2)
    for entropy, below -3.9 (-4 at 1/2) for Kearns-Mansour."""
    g = G(name, GRID)
    d2 = g[:-2] - 2 * g[1:-1] + g[2:]
    assert d2.max() <= 2e-6
    # Away from float32 noise, with a coarser step the curvature is clearly negative.
    coarse = G(name, np.linspace(0.0, 1.0, 101, dtype=np.float32))
    curv = (coarse[:-2] - 2 * coarse[1:-1] + coarse[2:]) / 0.01**2
    bound = {"gini": -7.9, "entropy": -2.8, "kearns_mansour": -3.9}[name]
    assert curv.max() < bound, curv.max()


def test_entropy_matches_scipy_and_sklearn_formula():
    q = GRID.astype(np.float64)
    expected = np.array([scipy_entropy([p, 1 - p], base=2) for p in q])
    np.testing.assert_allclose(G("entropy", GRID), expected, rtol=0, atol=2e-6)
    # sklearn's criterion: -sum_k p_k log2 p_k (natural log / log 2), the same function.
    with np.errstate(divide="ignore", invalid="ignore"):
        sk = -np.nansum(np.stack([q * np.log(q), (1 - q) * np.log(1 - q)]), axis=0) / np.log(2)
    np.testing.assert_allclose(G("entropy", GRID), sk, rtol=0, atol=2e-6)


def test_gini_is_twice_sklearn_gini():
    q = GRID.astype(np.float64)
    np.testing.assert_allclose(G("gini", GRID), 2 * (1 - q**2 - (1 - q) ** 2), rtol=0, atol=1e-6)


def test_kearns_mansour_formula():
    q = GRID.astype(np.float64)
    np.testing.assert_allclose(G("kearns_mansour", GRID), 2 * np.sqrt(q * (1 - q)), rtol=0, atol=2e-6)


def test_kearns_mansour_gain_is_the_gain_without_cancellation():
    """From counts, as growth computes it: the closed form equals G(mu) - p1 G(mu1) - p0 G(mu0)
    (float64) to float32 accuracy, also for splits that barely move the mean, where the float32
    difference of square roots loses most digits (so devices that round sqrt differently would
    rank such splits differently)."""
    rng = np.random.default_rng(0)
    w = 1_000_000
    w1 = rng.integers(1_000, w - 1_000, 4000)
    w0 = w - w1
    w0y = np.round(w0 * rng.uniform(0.05, 0.95, 4000))  # means away from 0 and 1, where 1 - mu in
    far = np.round(w1 * rng.uniform(0.05, 0.95, 4000))  # float32 loses digits whichever form is used
    near = np.clip(np.round(w1 * w0y / w0) + rng.integers(-1_000, 1_001, 4000), 0, w1)  # |mu1 - mu0| <~ 1e-3
    km = IMPURITIES["kearns_mansour"]
    engine = jax.jit(lambda *a: impurity.gain(impurity.KEARNS_MANSOUR, *a))
    naive = jax.jit(lambda mu, p1, mu1, mu0, p0: p1 * (impurity.KEARNS_MANSOUR(mu) - impurity.KEARNS_MANSOUR(mu1))
                    + p0 * (impurity.KEARNS_MANSOUR(mu) - impurity.KEARNS_MANSOUR(mu0)))
    eps = 2.0**-24
    for w1y in (far, near):
        wy = w1y + w0y
        truth = km(wy / w) - w1 / w * km(w1y / w1) - w0 / w * km(w0y / w0)
        args = [jnp.asarray(a, jnp.float32) for a in (wy / w, w1 / w, w1y / w1, w0y / w0, w0 / w)]
        shift = np.minimum(np.abs(w1y / w1 - wy / w), np.abs(w0y / w0 - wy / w))
        moved = shift > 2 * impurity.UNCHANGED_TOL  # the others are exactly 0 by design
        gap = np.abs(w1y / w1 - w0y / w0)[moved]
        closed = np.abs(np.asarray(engine(*args), np.float64) - truth)[moved] / truth[moved]
        direct = np.abs(np.asarray(naive(*args), np.float64) - truth)[moved] / truth[moved]
        # The closed form: a few ulps, plus (mu1 - mu0)^2's share of the means' rounding, 4 eps / gap.
        assert np.all(closed <= 16 * eps + 4 * eps / gap)
        if w1y is near:
            assert np.median(direct) > 30 * np.median(closed)  # what the closed form avoids


@pytest.mark.parametrize("name", NAMES)
def test_reference_impurities_match(name):
    q = GRID.astype(np.float64)
    np.testing.assert_allclose(G(name, GRID), IMPURITIES[name](q), rtol=0, atol=2e-6)


@pytest.mark.parametrize("name", NAMES)
def test_gain_perfect_split_of_balanced_node_is_one(name):
    g = impurity.gain(impurity.get(name), jnp.float32(0.5), jnp.float32(0.5), jnp.float32(1.0), jnp.float32(0.0))
    assert abs(float(g) - 1.0) < 1e-6
    # and a useless split (children as mixed as the parent) gains 0.
    g0 = impurity.gain(impurity.get(name), jnp.float32(0.3), jnp.float32(0.4), jnp.float32(0.3), jnp.float32(0.3))
    assert abs(float(g0)) < 1e-6


@pytest.mark.parametrize("name", NAMES)
def test_gain_nonnegative_and_formula(name):
    """gain = G(mu) - p1 G(mu1) - (1-p1) G(mu0) >= 0 when mu = p1 mu1 + (1-p1) mu0 (concavity)."""
    rng = np.random.default_rng(3)
    p1, mu1, mu0 = rng.random((3, 5000))
    mu = p1 * mu1 + (1 - p1) * mu0
    gain = jax.jit(lambda *a: impurity.gain(impurity.get(name), *a))
    g = np.asarray(gain(*(jnp.asarray(a, jnp.float32) for a in (mu, p1, mu1, mu0))))
    assert g.min() >= -2e-6
    Gr = IMPURITIES[name]
    np.testing.assert_allclose(g, Gr(mu) - p1 * Gr(mu1) - (1 - p1) * Gr(mu0), rtol=0, atol=5e-6)


def test_get_resolves_names_instances_and_callables():
    for name in NAMES:
        imp = impurity.get(name)
        assert isinstance(imp, jt.Impurity) and imp.name == name
        assert impurity.get(imp) is imp
    def half_gini(q):
        return 2 * q * (1 - q)
    custom = impurity.get(half_gini)
    assert custom.name == "half_gini"
    assert float(custom(jnp.float32(0.5))) == 0.5


def test_user_callable_equivalent_to_gini_grows_the_same_trees():
    """A scaled gini (same argmax) grows the gini trees; only the gains scale (by 1/2)."""
    data = helpers.datasets(np.random.default_rng(4), 5, 1, helpers.BATCH)

    def half_gini(q):
        return 2 * q * (1 - q)

    trees = helpers.grow_many(data, jt.GrowthRule(max_depth=3, impurity=half_gini))
    for (X, y), t in zip(data, trees):
        ref = id3(X, y, "gini", 3)
        if any(1e-8 <= abs(v) <= 2e-5 for g in ref["gaps"] for v in g):
            continue  # float32 may break near-ties differently at half the scale
        np.testing.assert_array_equal(t.feature, ref["feature"])
        np.testing.assert_array_equal(t.weight, ref["weight"])
        np.testing.assert_array_equal(t.label, ref["label"])
        np.testing.assert_allclose(t.gain, ref["gain"] / 2, rtol=0, atol=1e-5)


def test_ratio_is_exactly_one_for_a_pure_node_and_zero_for_an_empty_one():
    """A pure node's mean is exactly 1 whatever the division rounds to; the Kearns-Mansour gain
    of a perfect split is 2 sqrt(p1 p0) there, and 2.4e-4 lower from a mean 1 ulp below 1."""
    a = jnp.asarray([31.0, 0.0, 3.0, 0.0], jnp.float32)
    b = jnp.asarray([31.0, 5.0, 0.0, 0.0], jnp.float32)
    np.testing.assert_array_equal(np.asarray(impurity.ratio(a, b)), [1.0, 0.0, 0.0, 0.0])
    km = impurity.get("kearns_mansour")
    p1, p0 = np.float32(31 / 64), np.float32(33 / 64)
    perfect = float(impurity.gain(km, p1, p1, impurity.ratio(a[0], b[0]), 0.0, p0))
    assert perfect == pytest.approx(2 * np.sqrt(31 * 33) / 64, rel=1e-6)
    below = float(impurity.gain(km, p1, p1, np.nextafter(np.float32(1), np.float32(0)), 0.0, p0))
    assert perfect - below == pytest.approx(2.36e-4, rel=0.02)
