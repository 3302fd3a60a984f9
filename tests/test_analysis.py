"""The censored (Tobit) scaling fit of jaxtrees.experiments.report.fits against known exponents, and the statistics
of report.steps and report.thresholds."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxtrees.experiments.report import fits, steps, thresholds
from jaxtrees.experiments.table import Table

NS = np.log([8.0, 16, 32, 64, 128])


def _synthetic(slope, intercept, sigma, budget, per_cell=48, seed=0):
    """Log steps ~ N(slope log n + intercept, sigma^2), right-censored at log(budget)."""
    rng = np.random.default_rng(seed)
    x = np.repeat(NS, per_cell)
    y = slope * x + intercept + sigma * rng.standard_normal(x.size)
    cap = np.log(budget)
    return x, np.minimum(y, cap), y >= cap


@pytest.mark.parametrize("slope,budget", [(1.5, 3000.0), (3.0, 2e5), (0.5, 1e9)])
def test_tobit_recovers_a_known_exponent_under_censoring(slope, budget):
    x, y, censored = _synthetic(slope, 2.0, 0.6, budget)
    fit = fits.censored_fit(x, y, censored)
    assert fit.converged and abs(fit.slope - slope) < 0.15 and abs(fit.sigma - 0.6) < 0.1
    if censored.mean() > 0.2:  # least squares on the uncensored trials is biased low; the Tobit fit is not
        naive = np.polyfit(x[~censored], y[~censored], 1)[0]
        assert naive < slope - 0.2


def test_bootstrap_interval_covers_the_true_exponent_at_its_level():
    """Over 20 synthetic studies with ~30% of the trials censored, the 95% interval covers the true
    exponent in at least 16 (Binomial(20, 0.95) <= 15 has probability 0.3%) and is ~0.3 wide."""
    covered, widths = 0, []
    for seed in range(20):
        x, y, censored = _synthetic(2.0, 1.0, 0.6, 2000.0, per_cell=32, seed=seed)
        out = fits.bootstrap_fit(x, y, censored, replicates=100, seed=seed)
        assert out.replicates >= 98
        covered += out.low < 2.0 < out.high
        widths.append(out.high - out.low)
    assert covered >= 16 and 0.1 < np.median(widths) < 0.6


def test_without_censoring_the_fit_is_least_squares():
    x, y, censored = _synthetic(2.0, 1.0, 0.4, 1e12)
    assert not censored.any()
    fit = fits.censored_fit(x, y, censored)
    a, b = np.polyfit(x, y, 1)
    assert fit.converged
    np.testing.assert_allclose([fit.slope, fit.intercept], [a, b], rtol=1e-3, atol=1e-3)
    residual = y - a * x - b
    np.testing.assert_allclose(fit.sigma, np.sqrt(np.mean(residual**2)), rtol=1e-3)  # the MLE's sigma


def test_weights_equal_repeated_trials():
    x, y, censored = _synthetic(2.0, 1.0, 0.5, 2000.0, per_cell=10, seed=3)
    w = np.arange(x.size) % 3
    repeated = np.repeat(np.arange(x.size), w)
    a = fits.censored_fit(x, y, censored, weights=w)
    b = fits.censored_fit(x[repeated], y[repeated], censored[repeated])
    np.testing.assert_allclose([a.slope, a.intercept, a.sigma], [b.slope, b.intercept, b.sigma], rtol=1e-4, atol=1e-3)


def test_unidentified_fits_say_so():
    x = np.repeat(NS[:3], 4)
    censored = x > NS[0]  # only the smallest n has a learned trial: the slope is not pinned down
    fit = fits.censored_fit(x, np.where(censored, 9.0, 3.0), censored)
    assert not fit.converged and np.isnan(fit.slope)
    out = fits.bootstrap_fit(x, np.where(censored, 9.0, 3.0), censored, replicates=20)
    assert out.replicates == 0 and np.isnan(out.low)


@pytest.mark.parametrize("slope", [0.8, 2.1])
def test_least_squares_on_medians_and_tobit_agree_without_censoring(slope):
    """Issue 38: on uncensored synthetic trials both fits recover a known exponent (within 0.1, 48
    trials per cell, sigma 0.6) and agree with each other within 0.1."""
    x, y, censored = _synthetic(slope, 2.0, 0.6, 1e30, seed=5)
    assert not censored.any()
    tobit, medians = fits.censored_fit(x, y, censored), fits.median_fit(x, y, censored)
    assert tobit.converged and medians.converged and len(medians.xs) == NS.size
    assert abs(tobit.slope - slope) < 0.1 and abs(medians.slope - slope) < 0.1
    assert abs(tobit.slope - medians.slope) < 0.1


def test_median_fit_uses_the_cells_at_most_half_censored():
    """A cell's median counts while at most half of its trials are censored; local slopes are NaN
    across a censored median."""
    x = np.repeat(NS[:4], 4)
    y = x.copy()  # log steps = log n: slope 1
    censored = np.zeros(x.size, bool)
    censored[8:10] = True  # third cell: 2 of 4 censored, median still the 2nd smallest
    censored[12:15] = True  # fourth cell: 3 of 4 censored: median censored
    fit = fits.median_fit(x, np.where(censored, 50.0, y), censored)
    assert fit.converged and fit.xs == tuple(float(v) for v in np.float32(NS[:3]))
    np.testing.assert_allclose(fit.slope, 1.0, atol=1e-5)
    slopes = fits.local_slopes(x, y, censored)
    assert len(slopes) == 3 and np.allclose([s for _, _, s in slopes[:2]], 1.0) and np.isnan(slopes[2][2])
    assert not fits.median_fit(x[:8], y[:8], np.r_[np.zeros(4, bool), np.ones(4, bool)]).converged


@pytest.mark.parametrize("call,match", [
    (lambda: fits.censored_fit([1, 2], [1.0], [False, False]), "same length"),
    (lambda: fits.censored_fit([1, 2], [1.0, np.inf], [False, True]), "must be finite"),
    (lambda: fits.censored_fit([1, 2], [1.0, 2.0], [False, False], weights=[1, -1]), "weights must be"),
    (lambda: fits.bootstrap_fit([1, 2], [1.0, 2.0], [False, False], replicates=0), r"replicates must be in \[1,"),
    (lambda: fits.bootstrap_fit([1, 2], [1.0, 2.0], [False, False], level=1.0), "level must be in"),
])
def test_bad_inputs(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# ----------------------------------------------------------------------------- steps of result rows


def _rows(steps, n=8, budget=100):
    size = len(steps)
    return Table({"steps": np.asarray(steps, np.int32), "n": np.full(size, n), "max_steps": np.full(size, budget)})


def test_censored_steps_and_their_quantiles_count_a_censored_trial_as_infinite():
    rows = _rows([30, -1, 10, 20, -1])
    s = steps.censored_steps(rows)
    assert s.tolist() == [30.0, np.inf, 10.0, 20.0, np.inf]
    assert steps.quartiles(s).tolist() == [20.0, 30.0, np.inf] and steps.median(s) == 30.0
    assert steps.median_iqr(s, 100) == "30 [20, > 100]"
    assert steps.count_text(12345.0, 100) == "12,345" and steps.count_text(np.inf, 5000) == "> 5,000"
    assert steps.median_count(rows, "steps") == "30" and steps.median_count(_rows([-1, -1, 5]), "steps") == "-"
    assert steps.share_within(rows, "steps", 20) == (2, 5)  # 10 and 20; censored ones never count


def test_log_steps_puts_a_censored_trial_at_its_budget():
    x, y, censored = steps.log_steps(_rows([50, -1], n=16, budget=400))
    np.testing.assert_allclose(x, np.log([16.0, 16.0]))
    np.testing.assert_allclose(y, np.log([50.0, 400.0]))
    assert censored.tolist() == [False, True]


def test_median_exponents_recover_a_power_law_per_group():
    k, a = np.repeat([2, 3], 15), np.repeat([1.0, 2.0], 15)
    n = np.tile(np.repeat([8, 16, 32, 64, 128], 3), 2)
    counts = n.astype(float) ** a
    counts = np.where(counts <= 5000, counts, -1).astype(np.int32)  # censored past the budget
    rows = Table({"k": k, "n": n, "steps": counts, "max_steps": np.full(30, 5000)})
    exponents = steps.median_exponents(rows, ["k"])
    assert abs(exponents[(2,)][0] - 1.0) < 1e-9 and exponents[(2,)][1] == [8, 16, 32, 64, 128]
    assert abs(exponents[(3,)][0] - 2.0) < 1e-9 and exponents[(3,)][1] == [8, 16, 32, 64]  # 128^2 > the budget


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_identified_rows_is_identified_per_resample(seed):
    rng = np.random.default_rng(seed)
    size = int(rng.integers(1, 30))
    x = rng.choice(np.log([8.0, 16, 32, 64])[: int(rng.integers(1, 5))], size)
    censored = rng.random(size) < rng.random()
    weights = (rng.random((20, size)) < 0.3) * rng.integers(1, 4, (20, size)).astype(np.float32)
    assert fits._identified_rows(x, censored, weights).tolist() == [
        fits._identified(x, censored, w) for w in weights]


def test_a_bootstrap_fit_of_the_same_trials_is_computed_once(monkeypatch):
    """A study's figure and its report fit the same trials: the second call returns the first's fit; other
    trials, another seed or another number of resamples are fitted anew."""
    calls = []
    many = fits._fit_many
    monkeypatch.setattr(fits, "_fit_many", lambda *a: calls.append(1) or many(*a))
    monkeypatch.setattr(fits, "_BOOTSTRAPS", {})
    x = np.repeat(np.log([10.0, 20, 40]), 16)
    y = 2.0 * x + np.random.default_rng(5).normal(0, 0.3, x.size)
    first = fits.bootstrap_fit(x, y, np.zeros(x.size, bool), replicates=50)
    assert fits.bootstrap_fit(x.copy(), y.copy(), np.zeros(x.size, bool), replicates=50) is first
    assert len(calls) == 1
    other = fits.bootstrap_fit(x, y, np.zeros(x.size, bool), replicates=50, seed=1)
    fits.bootstrap_fit(x, y + 1.0, np.zeros(x.size, bool), replicates=50)
    fits.bootstrap_fit(x, y, np.zeros(x.size, bool), replicates=60)
    assert len(calls) == 4 and other.fit == first.fit and other.low != first.low
    monkeypatch.setattr(fits, "BOOTSTRAPS_KEPT", 2)
    fits.bootstrap_fit(x, y, np.zeros(x.size, bool), replicates=70)
    assert len(fits._BOOTSTRAPS) == 2  # the oldest dropped


def _index_resampling_law(success, x) -> dict:
    """Every resample of the trials by index (all T^T, equally likely): probability of each (rates, median)."""
    size = len(x)
    picks = np.stack(np.meshgrid(*[np.arange(size)] * size, indexing="ij"), -1).reshape(-1, size)
    law = {}
    for key in zip(map(tuple, success[picks].mean(1)), np.median(x[picks], axis=1).tolist()):
        key = (key[0], "nan" if key[1] != key[1] else key[1])
        law[key] = law.get(key, 0.0) + 1.0 / len(picks)
    return law


@pytest.mark.parametrize("x", [[2.0, 1.0, np.inf, 1.0, 3.0], [0.5, 2.0, 1.0, 4.0], [1.0, np.nan, 2.0, 0.5, 3.0],
                               [7.0, 7.0, 7.0, 7.0]], ids=["odd", "even", "nan", "constant"])
def test_resampled_rates_have_index_resamplings_law(x):
    """Counts drawn as a median's position and multinomials (thresholds.resampled_rates) have the law of resampling
    the trials' indices: all T^T resamples enumerated, a chi-square over their outcomes (fixed seed; 4.5 sigma)."""
    x = np.asarray(x)
    success = np.random.default_rng(len(x)).random((len(x), 3)) < 0.5
    law = _index_resampling_law(success, x)
    draws = 40_000
    rates, medians = thresholds.resampled_rates(success, x, draws, np.random.default_rng(0))
    seen = {}
    for key in zip(map(tuple, rates), medians.tolist()):
        key = (key[0], "nan" if key[1] != key[1] else key[1])
        seen[key] = seen.get(key, 0) + 1
    assert set(seen) <= set(law)
    expected = np.array([law[k] * draws for k in law])
    observed = np.array([seen.get(k, 0) for k in law])
    big = expected >= 5  # the rare outcomes pooled into one
    statistic = ((observed[big] - expected[big]) ** 2 / expected[big]).sum()
    rest = expected[~big].sum()
    statistic += (observed[~big].sum() - rest) ** 2 / rest if rest else 0.0
    df = big.sum() - (0 if rest else 1)
    assert statistic < df + 4.5 * np.sqrt(2 * df)


def test_threshold_slope_draws_counts_not_indices():
    """The bootstrap of two cells of 300,000 trials: memory of the order of their inputs (drawing indices took
    resamples x trials: 2.4 GB a cell), the interval tight about the exponent, reproducible from its seed."""
    import tracemalloc

    m = 2.0 ** np.arange(4, 12)
    rng = np.random.default_rng(4)
    success = [m[None] >= 2.0 ** (4 + 2 * np.log2(v) + rng.normal(0, 0.5, (300_000, 1))) for v in (2.0, 8.0)]
    x = [v * np.exp(rng.normal(0, 0.1, 300_000)) for v in (2.0, 8.0)]
    tracemalloc.start()
    out = thresholds.threshold_slope(success, x, m, replicates=1000)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 10 * sum(s.nbytes + v.nbytes for s, v in zip(success, x))
    assert out.low <= out.estimate <= out.high and out.replicates == 1000 and out.high - out.low < 0.6
    assert thresholds.threshold_slope(success, x, m, replicates=1000) == out
