"""experiments/report/survival.py: the Kaplan-Meier estimate against a plain loop, a textbook case (Freireich's 6-MP
arm, as in Kleinbaum & Klein, Survival Analysis, and R's survfit) and the closed form without censoring."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxtrees.experiments.report import survival


def reference(times, censored):
    """The product-limit estimate by its definition: at each distinct event time, survival *= 1 - d / n at risk."""
    out, s = {}, 1.0
    for t in sorted(set(times[~censored])):
        n = np.sum(times >= t)
        d = np.sum((times == t) & ~censored)
        s *= 1 - d / n
        out[t] = s
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 12), st.booleans()), min_size=1, max_size=40))
def test_the_curve_matches_the_definition(trials):
    times = np.array([t for t, _ in trials], float)
    censored = np.array([c for _, c in trials])
    curve = survival.kaplan_meier(times, censored)
    expected = reference(times, censored)
    assert curve.times.tolist() == list(expected)
    np.testing.assert_allclose(curve.survival, list(expected.values()), rtol=1e-12)
    assert curve.censored == censored.sum()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 30), min_size=1, max_size=50), st.sampled_from([0.25, 0.5, 0.75]))
def test_without_censoring_the_quantiles_are_the_averaged_inverted_cdf(values, q):
    """The documented convention: no censoring, KM quantile = numpy's averaged_inverted_cdf (the median: np.median)."""
    x = np.array(values, float)
    curve = survival.kaplan_meier(x, np.zeros(x.size, bool))
    assert survival.quantile(curve, q) == np.quantile(x, q, method="averaged_inverted_cdf")
    if q == 0.5:
        assert survival.quantile(curve, q) == np.median(x)


def test_the_six_mp_arm():
    """Weeks of remission on 6-MP (Freireich 1963; + censored): S(t) and Greenwood's standard errors as tabulated,
    median 23 with R survfit's (log) interval [16, NA]."""
    t = np.array([6, 6, 6, 6, 7, 9, 10, 10, 11, 13, 16, 17, 19, 20, 22, 23, 25, 32, 32, 34, 35], float)
    plus = np.array([0, 0, 0, 1, 0, 1, 0, 1, 1, 0, 0, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1], bool)
    curve = survival.kaplan_meier(t, plus)
    assert curve.times.tolist() == [6, 7, 10, 13, 16, 22, 23]
    np.testing.assert_allclose(curve.survival, [0.8571, 0.8067, 0.7529, 0.6902, 0.6275, 0.5378, 0.4482], atol=1e-4)
    np.testing.assert_allclose(curve.survival * np.sqrt(curve.log_variance),
                               [0.0764, 0.0869, 0.0963, 0.1068, 0.1141, 0.1282, 0.1346], atol=1e-4)
    assert survival.quantile(curve, 0.5) == 23
    assert survival.median_interval(curve) == (16.0, np.inf)
    assert survival.quantile(curve, 0.25) == 13 and survival.quantile(curve, 0.75) == np.inf


def test_censoring_before_half_the_trials_end_leaves_the_median_unknown():
    values = np.array([3.0, 5.0, 100.0, 100.0, 100.0, -1.0])  # three ran out at the budget 100, one as a sentinel
    censored = np.array([False, False, True, True, True, True])
    curve = survival.kaplan_meier(values, censored)
    assert survival.quantile(curve, 0.5) == np.inf and curve.last_censored == 100.0
    summary = survival.summarized(np.zeros(6, int), 1, values, censored)
    assert summary.censored.tolist() == [4] and summary.count.tolist() == [6] and summary.median[0] == np.inf
    assert summary.q1[0] == 5.0


@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_per_group_summaries_equal_one_curve_per_group(n):
    rng = np.random.default_rng(n)
    codes = rng.integers(0, 3, 40)
    values = rng.integers(1, 20, 40).astype(float)
    censored = rng.random(40) < 0.3
    out = survival.summarized(codes, 4, values, censored)
    for g in range(3):
        curve = survival.kaplan_meier(values[codes == g], censored[codes == g])
        assert out.median[g] == survival.quantile(curve, 0.5) and out.censored[g] == censored[codes == g].sum()
    assert out.count[3] == 0 and np.isnan(out.median[3])
