"""Every bad input raises ValueError, and its message names the parameter (anchored at the start
of the message, so a message about some other parameter does not match)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxtrees as jt
from jaxtrees.core import distributions, impurity, sampling

KEY = jax.random.key(0)
X_OK = np.array([[0, 1], [1, 0], [1, 1]])
Y_OK = np.array([0, 1, 1])


def raises(param):
    """pytest.raises(ValueError) whose message starts with the parameter's name."""
    return pytest.raises(ValueError, match=rf"^{param}\b")


# ----------------------------------------------------------------------------- distributions


@pytest.mark.parametrize("p", [[0.5, 1.5], [-0.1], [0.2, np.nan], [np.inf], [], [[0.5]]])
def test_product_p_out_of_range(p):
    with raises("p"):
        jt.product(p)


def test_product_wrong_n():
    with raises("n"):
        jt.product([0.5, 0.5]).marginals(KEY, 3)


@pytest.mark.parametrize("c", [-0.1, 0.5, 0.7, np.nan, "0.1"])
def test_alpha_c_c_out_of_range(c):
    with raises("c"):
        jt.alpha_c(alpha=0.0, c=c)


@pytest.mark.parametrize("alpha,c", [(-0.01, 0.1), (0.4, 0.1), (0.45, 0.05), (0.5, 0.0)])
def test_alpha_c_alpha_out_of_range(alpha, c):
    with raises("alpha"):
        jt.alpha_c(alpha=alpha, c=c)


@pytest.mark.parametrize("kwargs", [dict(c=-0.1), dict(c=0.5), dict(c=0.3, delta=0.2)])
def test_smoothed_c_out_of_range(kwargs):
    with raises("c"):
        jt.smoothed(**kwargs)


@pytest.mark.parametrize("delta", [-0.1, 0.5, 0.9])
def test_smoothed_delta_out_of_range(delta):
    with raises("delta"):
        jt.smoothed(c=0.0, delta=delta)


@pytest.mark.parametrize("kwargs", [
    dict(c=0.1, p_hat=0.05),  # p_hat must be in (c, 1 - c)
    dict(c=0.1, p_hat=0.9),  # open interval
    dict(c=0.1, p_hat=[0.5, 0.95]),
    dict(c=0.1, p_hat=0.3, delta=0.2),  # (delta + c, 1 - delta - c) = (0.3, 0.7), open
    dict(c=0.0, p_hat=1.2),
])
def test_smoothed_p_hat_out_of_range(kwargs):
    with raises("p_hat"):
        jt.smoothed(**kwargs)


@pytest.mark.parametrize("n", [0, -1, 2.0])
def test_marginals_n(n):
    with raises("n"):
        distributions.marginals(jt.uniform(), KEY, n)


def test_marginals_batch():
    with raises("batch"):
        distributions.marginals(jt.uniform(), KEY, 3, batch=0)


# ----------------------------------------------------------------------------- targets


@pytest.mark.parametrize("make", [jt.random_junta, jt.random_parity])
@pytest.mark.parametrize("k", [0, -1, 6, 2.5])
def test_random_target_k(make, k):
    with raises("k"):
        make(KEY, n=5, k=k)


@pytest.mark.parametrize("make", [jt.random_junta, jt.random_parity])
def test_random_target_n(make):
    with raises("n"):
        make(KEY, n=0, k=1)


@pytest.mark.parametrize("support", [[0, 5], [-1, 2], [7]])
def test_support_out_of_range(support):
    with raises("support"):
        jt.parity(support, n=5)
    with raises("support"):
        jt.junta(support, [0, 1] * 2 ** (len(support) - 1), n=5)


@pytest.mark.parametrize("support", [[1, 1], [0, 3, 0]])
def test_support_repeated(support):
    with raises("support"):
        jt.parity(support, n=5)
    with raises("support"):
        jt.junta(support, [0, 1] * 2 ** (len(support) - 1), n=5)


@pytest.mark.parametrize("support", [[], [0, 1, 2, 3, 4, 5]])
def test_support_size(support):
    with raises("k"):
        jt.parity(support, n=5)


def test_support_not_integer():
    with raises("support"):
        jt.parity([0.5, 1.0], n=5)


@pytest.mark.parametrize("table", [[0, 1, 1], [0, 1, 1, 0, 1], [[0, 1], [1, 0]]])
def test_junta_table_wrong_length(table):
    with raises("table"):
        jt.junta([0, 2], table, n=4)


def test_junta_table_not_binary():
    with raises("table"):
        jt.junta([0, 2], [0, 1, 2, 0], n=4)


# ----------------------------------------------------------------------------- sampling


@pytest.mark.parametrize("m", [0, -3, 10.0])
def test_draw_m(m):
    with raises("m"):
        jt.draw(KEY, jnp.full(3, 0.5), jt.parity([0], n=3), m)


@pytest.mark.parametrize("noise", [-0.1, 1.5, np.nan])
def test_draw_noise(noise):
    with raises("noise"):
        jt.draw(KEY, jnp.full(3, 0.5), jt.parity([0], n=3), 10, noise=noise)


@pytest.mark.parametrize("p", [[0.5, 1.2, 0.5], [0.5, np.nan, 0.5], [-0.1, 0.5, 0.5], [[0.5, 0.5, 0.5]]])
def test_draw_p(p):
    with raises("p"):
        jt.draw(KEY, np.asarray(p), jt.parity([0], n=3), 10)


@pytest.mark.parametrize("p", [[0.5, 1.2, 0.5], [0.5, np.nan, 0.5], [0.5, 0.5]])
def test_exact_error_p(p):
    """Out of [0, 1], NaN, or fewer marginals than the features the tree tests."""
    tree = jt.hypotheses.tree.stump(2)
    with raises("p"):
        jt.exact_error(tree, np.asarray(p), jt.parity([0], n=3))
    with raises("p"):
        jt.error_by_depth(tree, np.asarray(p), jt.parity([0], n=3))


def test_random_junta_k_beyond_a_truth_table():
    with pytest.raises(ValueError, match=r"^k must be in \[1, 20\]: a k-junta's truth table has 2\^k entries"):
        jt.random_junta(KEY, n=64, k=30)
    assert jt.random_parity(KEY, n=64, k=30).support.shape == (30,)  # parities need no table


@pytest.mark.parametrize("X", [[[0, 2], [1, 0], [1, 1]], [[0, 1], [1, -1], [1, 1]], [[0, 0.5], [1, 0], [1, 1]]])
def test_from_arrays_non_binary_X(X):
    with raises("X"):
        sampling.from_arrays(np.array(X), Y_OK)


@pytest.mark.parametrize("y", [[0, 2, 1], [0.5, 1, 0], [-1, 0, 1]])
def test_from_arrays_non_binary_y(y):
    with raises("y"):
        sampling.from_arrays(X_OK, np.array(y))


@pytest.mark.parametrize("X,y", [(X_OK, [0, 1]), (X_OK, [[0], [1], [1]]), (X_OK[:0], [])])
def test_from_arrays_shapes(X, y):
    with pytest.raises(ValueError, match=r"^(X|y)\b"):
        sampling.from_arrays(X, np.array(y))


def test_from_arrays_X_not_2d():
    with raises("X"):
        sampling.from_arrays(np.array([0, 1, 1]), Y_OK)


# ----------------------------------------------------------------------------- growth rule


@pytest.mark.parametrize("max_depth", [-1, 2**20 + 1, 2.0, True, None])
def test_rule_max_depth(max_depth):
    with raises("max_depth"):
        jt.GrowthRule(max_depth=max_depth)


def test_stored_tree_too_deep():
    """Rules deeper than 24 levels are for path mode only; growing a stored tree says so early."""
    rule = jt.GrowthRule(max_depth=25)
    sample = sampling.from_arrays(X_OK, Y_OK)
    with raises("max_depth"):
        jt.grow(sample, rule)
    with raises("max_depth"):
        jt.grow_exact(np.full(X_OK.shape[1], 0.5, np.float32), jt.parity([0], X_OK.shape[1]), rule)


@pytest.mark.parametrize("spec", ["entropie", "Gini", "", 3])
def test_rule_unknown_impurity(spec):
    with raises("impurity"):
        jt.GrowthRule(max_depth=2, impurity=spec)


@pytest.mark.parametrize("fn", [
    lambda q: (4 * q * (1 - q)) ** 2,  # symmetric, G(0) = G(1) = 0, not concave
    lambda q: q * (1 - q) * (1 + q),  # concave on [0, 1], asymmetric
    lambda q: 4 * q * (1 - q) + 0.1,  # G(0) != 0
    lambda q: jnp.sin(np.pi * q) ** 3,  # symmetric, zero at the ends, not concave near 0
    lambda q: q[:3],  # wrong shape
    lambda q: 1 / (q - q),  # not finite
    lambda q: q.reshape(7, -1),  # raises inside the callable
], ids=["squared-gini", "asymmetric", "nonzero-ends", "sin-cubed", "shape", "nan", "raises"])
def test_rule_bad_user_impurity(fn):
    with raises("impurity"):
        jt.GrowthRule(max_depth=2, impurity=fn)
    with raises("impurity"):
        impurity.get(fn)


# Non-concave callables that pass the check: it compares raw second differences on the grid,
# g[i-1] - 2 g[i] + g[i+1] = G'' h^2 with h = 1e-3, against 1e-5, so any curvature G'' < 10 passes.
NOT_CONCAVE_BUT_ACCEPTED = {
    "minus-gini": lambda q: -4 * q * (1 - q),  # convex, G'' = 8
    "gini-with-dip": lambda q: 4 * q * (1 - q) - 0.9 * (4 * q * (1 - q)) ** 2,  # >= 0, G''(1/2) = 6.4
}


@pytest.mark.parametrize("name", list(NOT_CONCAVE_BUT_ACCEPTED))
def test_rule_non_concave_user_impurity_with_small_curvature(name):
    fn = NOT_CONCAVE_BUT_ACCEPTED[name]
    q = np.linspace(0, 1, 1001)
    assert np.max(np.diff(fn(q), 2)) > 0  # really not concave (in float64)
    with raises("impurity"):
        jt.GrowthRule(max_depth=2, impurity=fn)


def test_rule_good_user_impurity_accepted():
    rule = jt.GrowthRule(max_depth=2, impurity=lambda q: jnp.sin(np.pi * q))
    assert isinstance(rule.impurity, jt.Impurity)


@pytest.mark.parametrize("tb", ["random_", "highest", None])
def test_rule_unknown_tie_break(tb):
    with raises("tie_break"):
        jt.GrowthRule(max_depth=2, tie_break=tb)


@pytest.mark.parametrize("v", [1, 0, -2, 2.5])
def test_rule_min_samples_split(v):
    with raises("min_samples_split"):
        jt.GrowthRule(max_depth=2, min_samples_split=v)


@pytest.mark.parametrize("v", [-1, -5, 0, 1.5])
def test_rule_min_samples_leaf(v):
    # The GrowthRule docstring requires min_samples_leaf >= 1 (so 0 is rejected too).
    with raises("min_samples_leaf"):
        jt.GrowthRule(max_depth=2, min_samples_leaf=v)


@pytest.mark.parametrize("v", [np.nan, np.inf, "0.1"])
def test_rule_min_gain(v):
    with raises("min_gain"):
        jt.GrowthRule(max_depth=2, min_gain=v)


@pytest.mark.parametrize("v", [-1e-6, np.nan])
def test_rule_tie_tol(v):
    with raises("tie_tol"):
        jt.GrowthRule(max_depth=2, tie_tol=v)


# ----------------------------------------------------------------------------- sizes that must agree


def test_a_distribution_and_a_target_of_different_n_are_refused():
    """Issue 35, case 2: p over 8 bits and a junta reading variable 13 once gave a sample, a tree
    and an exact error; every entry point that combines them now names both sizes."""
    p = jnp.full(8, 0.5)
    f = jt.junta([3, 13], [0, 1, 1, 0], n=16)
    message = r"^p and the target must have the same n: p has n = 8, the target reads variable 13"
    with pytest.raises(ValueError, match=message):
        jt.draw(KEY, p, f, 64)
    sample = jt.draw(KEY, p, jt.junta([3, 5], [0, 1, 1, 0], n=8), 64)
    tree = jt.learners.get("id3-entropy").fit(KEY, sample)
    for call in (jt.exact_error, jt.error_by_depth):
        with pytest.raises(ValueError, match=message):
            call(tree, p, f)
    with pytest.raises(ValueError, match=message):
        jt.grow_exact(p, f, jt.GrowthRule(max_depth=2))
    with pytest.raises(ValueError, match=message):
        jt.targets.label_covariance(f, p)
    with pytest.raises(ValueError, match=message):
        jt.learners.population.follow_path(p, f, jt.GrowthRule(max_depth=2), jnp.zeros(8, bool))
    with pytest.raises(ValueError, match=r"^X and the tree must have the same n: X has n = 2, the tree reads variable"):
        tree.predict_bits(sample.X[:2])


def test_sizes_fixed_by_shapes_are_checked_at_trace_time_under_jit():
    """A mask parity's n and an addressing function's n are static: the check runs under jit too."""
    f = jt.targets.MaskParity(jnp.arange(16) < 3)
    draw = jax.jit(lambda key, p, f: jt.draw(key, p, f, 64))
    with pytest.raises(ValueError, match=r"^p and the target must have the same n: p has n = 8, the target is over n = 16"):
        draw(KEY, jnp.full(8, 0.5), f)
    g = jt.addressing(c=1, k=2)  # n = c k^2 + 2^k = 8
    with pytest.raises(ValueError, match=r"^p and the target must have the same n: p has n = 7, the target reads n = 8"):
        jax.jit(lambda p, g: jt.targets.label_covariance(g, p))(jnp.full(7, 0.5), g)
    assert draw(KEY, jnp.full(16, 0.5), f).n == 16
