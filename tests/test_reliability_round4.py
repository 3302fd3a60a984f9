"""Issue 58, round four: nothing silently wrong. Weights at any scale, checks that work under jit,
features_used's n, and messages for traced values where Python numbers are required."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxtrees as jt


def _tree(features):
    """A heap tree of depth 2 testing ``features`` at its first slots."""
    f = jnp.asarray(list(features) + [-1] * (7 - len(features)), jnp.int32)
    return jt.Tree(f, jnp.zeros(7, jnp.int32), jnp.ones(7, jnp.float32), jnp.zeros(7), jnp.zeros(7))


def test_features_used_refuses_an_n_that_drops_features():
    tree = _tree([0, 8, 10])
    with pytest.raises(ValueError, match=r"n must be in \[11, inf\).*tests feature 10.*n = 4"):
        jt.features_used(tree, 4)
    assert np.flatnonzero(jt.features_used(tree, 11)).tolist() == [0, 8, 10]


def test_features_used_n_must_be_a_python_int_under_jit():
    with pytest.raises(ValueError, match="n must be a plain Python int, not a traced JAX value"):
        jax.jit(jt.features_used)(_tree([0]), 4)


@pytest.mark.parametrize("call", [
    lambda c: jt.smoothed(c=c),
    lambda c: jt.alpha_c(alpha=0.1, c=c),
])
def test_a_traced_scalar_where_a_python_number_is_needed_says_so_and_why(call):
    with pytest.raises(ValueError, match=r"c must be a plain Python number, not a traced JAX value .*read on the "
                                         r"host before tracing.*fixes an array shape.*static argument"):
        jax.jit(call)(0.1)


def test_a_traced_integer_where_a_python_int_is_needed_says_so():
    with pytest.raises(ValueError, match="m must be a plain Python int, not a traced JAX value"):
        jax.jit(lambda m: jt.draw(jax.random.key(0), jnp.full(4, 0.5), jt.random_parity(jax.random.key(1), 4, 2), m))(8)


# ---------------------------------------------------------------- weights at any scale (item 1)

from hypothesis import given, settings, strategies as st  # noqa: E402

RNG = np.random.default_rng(58)
X_W = RNG.integers(0, 2, size=(80, 6))
Y_W = (X_W[:, 0] ^ (X_W[:, 2] & X_W[:, 4])) ^ (RNG.random(80) < 0.1)
W = RNG.uniform(0.1, 10.0, size=80)
SCALES = settings(deadline=None, max_examples=12, derandomize=True, database=None)


def _tree_fit(w):
    return jt.DecisionTreeClassifier(impurity="gini", max_depth=3).fit(X_W, Y_W, sample_weight=w)


def _forest_fit(w):
    return jt.RandomForestClassifier(n_estimators=4, max_depth=3, random_state=1).fit(X_W, Y_W, sample_weight=w)


@SCALES
@given(st.floats(min_value=-40.0, max_value=38.0))
def test_decision_tree_does_not_depend_on_a_uniform_scale_of_the_weights(exponent):
    a, b = _tree_fit(W).tree_, _tree_fit(W * 10.0**exponent).tree_
    np.testing.assert_array_equal(a.feature, b.feature)
    np.testing.assert_array_equal(a.label, b.label)
    np.testing.assert_allclose(a.mean, b.mean, rtol=1e-5, atol=1e-6)  # s * w rounds to float32 otherwise


@SCALES
@given(st.floats(min_value=-40.0, max_value=38.0))
def test_random_forest_does_not_depend_on_a_uniform_scale_of_the_weights(exponent):
    a, b = _forest_fit(W), _forest_fit(W * 10.0**exponent)
    np.testing.assert_array_equal(a.forest_.members.feature, b.forest_.members.feature)
    np.testing.assert_array_equal(a.predict(X_W), b.predict(X_W))
    np.testing.assert_allclose(a.predict_proba(X_W), b.predict_proba(X_W), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("scale", [1e38, 1e37, 1e-36, 1e-38, 1e-45])
def test_uniform_weights_at_the_ends_of_float32_grow_the_unweighted_tree(scale):
    """The issue's cases: root-only trees (score 0.70) at 1e37, 1e38 and <= 1e-38, a wrong one at 1e-36."""
    X = np.random.default_rng(0).integers(0, 2, size=(200, 10))
    y = X[:, 3] ^ (X[:, 5] & X[:, 7])
    clf = jt.DecisionTreeClassifier(max_depth=3).fit(X, y, sample_weight=np.full(200, scale))
    plain = jt.DecisionTreeClassifier(max_depth=3).fit(X, y)
    np.testing.assert_array_equal(clf.tree_.feature, plain.tree_.feature)
    assert clf.score(X, y) == 1.0


def test_one_heavy_example_among_light_ones_matches_scikit_learn():
    """One example of weight 1e9 among weights of 1: scikit-learn fits every example, as jaxtrees now does."""
    from sklearn.tree import DecisionTreeClassifier as SkTree

    X = np.random.default_rng(0).integers(0, 2, size=(200, 10))
    y = X[:, 3] ^ (X[:, 5] & X[:, 7])
    w = np.ones(200)
    w[0] = 1e9
    ours = jt.DecisionTreeClassifier(impurity="gini", max_depth=3).fit(X, y, sample_weight=w)
    theirs = SkTree(criterion="gini", max_depth=3, random_state=0).fit(X, y, sample_weight=w)
    assert ours.score(X, y) == theirs.score(X, y) == 1.0
    assert ours.tree_.feature[0] == theirs.tree_.feature[0]
    assert sorted(np.flatnonzero(ours.features_used_).tolist()) == [3, 5, 7]


def test_weights_float32_cannot_resolve_are_named_in_a_warning():
    X = np.random.default_rng(0).integers(0, 2, size=(40, 3))
    w = np.ones(40)
    w[0] = 1e-45
    with pytest.warns(jt.sampling.WeightRangeWarning, match=r"1 positive weight\(s\) are below 2\^-126"):
        jt.with_weights(jt.from_arrays(X, X[:, 0]), w)


# ---------------------------------------------------------------- checks under jit (item 2)

KEY = jax.random.key(0)


def test_draw_with_a_traced_p_out_of_range_returns_no_examples():
    f = jt.random_parity(jax.random.key(1), 8, 2)

    @jax.jit
    def trial(p):
        data = jt.draw(KEY, jnp.full(8, p), f, 64)
        return data.m, jt.sample_error(jt.grow(data, jt.GrowthRule(max_depth=2)), data)

    m, error = trial(1.7)
    assert int(m) == 0 and np.isnan(error)  # not a sample of all ones
    m, error = trial(0.5)
    assert int(m) == 64 and 0.0 <= float(error) <= 1.0
    assert int(jax.jit(lambda q: jt.draw(KEY, jnp.full(8, 0.5), f, 64, noise=q).m)(-0.2)) == 0


def test_draw_under_jit_equals_the_eager_draw_for_valid_values():
    f = jt.random_junta(jax.random.key(1), 8, 3)
    p = jnp.linspace(0.2, 0.8, 8)
    eager, traced = jt.draw(KEY, p, f, 100, noise=0.1), jax.jit(lambda p, q: jt.draw(KEY, p, f, 100, noise=q))(p, 0.1)
    for a, b in zip(eager, traced):
        np.testing.assert_array_equal(a, b)


def test_random_junta_with_a_traced_k_beyond_k_max_is_flagged_not_clamped():
    @jax.jit
    def trial(k):
        f = jt.random_junta(KEY, n=8, k=k, k_max=8)
        p = jnp.full(8, 0.5)
        tree = jt.grow(jt.draw(KEY, p, f, 256), jt.GrowthRule(max_depth=3))
        return f.in_range(), f.support_mask(8), tree.exact_error(p, f), jt.draw(KEY, p, f, 64).m

    ok, support, error, m = trial(10)
    assert not ok and not support.any() and np.isnan(error) and int(m) == 0  # not an 8-junta
    ok, support, error, m = trial(3)
    assert ok and int(support.sum()) == 3 and 0.0 <= float(error) <= 1.0 and int(m) == 64


def test_with_weights_with_traced_negative_weights_grows_a_nan_tree():
    X = np.random.default_rng(0).integers(0, 2, size=(50, 4))
    data = jt.from_arrays(X, X[:, 1])

    @jax.jit
    def fit(w):
        weighted = jt.with_weights(data, w)
        tree = jt.grow(weighted, jt.GrowthRule(max_depth=2))
        return tree.weight[0], jt.sample_error(tree, weighted), weighted.m

    root, error, m = fit(-jnp.ones(50))
    assert np.isnan(root) and np.isnan(error) and int(m) == 0  # not a plausible root-only tree
    root, error, m = fit(jnp.ones(50).at[3].set(jnp.nan))
    assert np.isnan(root) and np.isnan(error)
    root, error, m = fit(jnp.ones(50))
    assert float(root) == 50.0 and float(error) == 0.0 and int(m) == 50


def test_adaboost_does_not_depend_on_a_uniform_scale_of_the_weights():
    """Issue 58 item 1, AdaBoost: the estimator's weights pass through ``with_weights`` (rescaled exactly) before the
    rounds' reweighting, so predictions for w and s * w agree from s = 1e-40 to 1e38; one heavy example dominates as it
    does in scikit-learn (same 200 examples, 50 stumps: 0.41 here, 0.395 there)."""
    import warnings

    rng = np.random.default_rng(0)
    X = rng.integers(0, 2, (200, 8))
    y = (X[:, 0] ^ X[:, 1]) | (X[:, 2] & X[:, 3])
    base = jt.AdaBoostClassifier().fit(X, y).predict(X)
    for scale in (1e-40, 1e-30, 1e30, 1e38):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # 1e-40 is subnormal in float32: the range warning is expected
            got = jt.AdaBoostClassifier().fit(X, y, sample_weight=np.full(200, scale)).predict(X)
        np.testing.assert_array_equal(got, base, err_msg=f"scale {scale}")
