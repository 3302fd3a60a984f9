"""Exact (infinite-sample) oracles, growth and scoring, against brute force and the papers."""

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxtrees as jt
from jaxtrees.hypotheses import tree as tree_lib
from jaxtrees.learners import population

IMPURITIES = ["entropy", "gini", "kearns_mansour"]


def all_inputs(n):
    return np.asarray(list(itertools.product([0, 1], repeat=n)), np.int64)[:, ::-1]


def brute_means(f, p, fixed, values):
    """E[f | restriction] and E[f | restriction, x_i := 1] by enumerating {0,1}^n (float64)."""
    n = p.size
    xs = all_inputs(n)
    fx = np.asarray(f(jnp.asarray(xs)), np.float64)

    def cond_mean(fix, val):
        prob = np.prod(np.where(xs == 1, p, 1 - p), axis=1)
        ok = np.all(np.where(fix, xs == val, True), axis=1)
        return np.sum(prob * ok * fx) / np.sum(prob * ok)

    mu = cond_mean(fixed, values)
    mu1 = np.array([cond_mean(fixed | (np.arange(n) == i), values | (np.arange(n) == i)) for i in range(n)])
    return mu, mu1


#: The target constructors and the oracle as compiled programs (one per family and k, instead of
#: one small program per operation and shape run eagerly).
_random_target = jax.jit(lambda family, kf, n, k: [functools.partial(jt.random_junta, nondegenerate=False),
                                                    jt.random_parity, jt.random_tree][family](kf, n, k),
                         static_argnums=(0, 2, 3))
_means = jax.jit(lambda f, p, fixed, values: f.means(p, fixed, values))


@pytest.mark.parametrize("n", [6, pytest.param(9, marks=pytest.mark.slow), pytest.param(12, marks=pytest.mark.slow)])
def test_oracles_equal_brute_force(n):
    rng = np.random.default_rng(n)
    key = jax.random.key(n)
    checked = 0
    for trial in range(12):
        k = int(rng.integers(1, min(n, 5) + 1))
        kf = jax.random.fold_in(key, trial)
        f = _random_target(trial % 3, kf, n, min(k, 4) if trial % 3 == 2 else k)
        p = rng.uniform(0.05, 0.95, n)
        fixed = rng.random(n) < 0.3
        values = rng.random(n) < 0.5
        mu, mu1 = _means(f, jnp.asarray(p, jnp.float32), jnp.asarray(fixed), jnp.asarray(values))
        want_mu, want_mu1 = brute_means(f, p, fixed, values)
        np.testing.assert_allclose(float(mu), want_mu, atol=2e-6)
        np.testing.assert_allclose(np.asarray(mu1), want_mu1, atol=2e-6)
        checked += 1
    assert checked == 12


@pytest.mark.parametrize("delta", [0.05, 0.2, 0.4])
def test_lemma13_xor_bias(delta):
    """|Pr[x_1 xor ... xor x_n = 1] - 1/2| <= (1 - 2 delta)^n / 2 <= exp(-2 delta n) / 2 (002 Lemma 13)."""
    rng = np.random.default_rng(13)
    for n in (1, 2, 5, 10, 20):
        for _ in range(20):
            p = rng.uniform(delta, 1 - delta, n).astype(np.float32)
            mu, _ = jt.parity(np.arange(n), n).means(jnp.asarray(p), jnp.zeros(n, bool), jnp.zeros(n, bool))
            bias = abs(float(mu) - 0.5)
            assert bias <= 0.5 * (1 - 2 * delta) ** n + 1e-7
            assert 0.5 * (1 - 2 * delta) ** n <= 0.5 * np.exp(-2 * delta * n)
            # and it is the product formula: bias = |prod (1 - 2 p_i)| / 2
            np.testing.assert_allclose(bias, 0.5 * abs(np.prod(1 - 2 * p.astype(np.float64))), atol=1e-7)


@pytest.mark.parametrize("alpha, c", [(0.1, 0.1), (0.05, 0.3), (0.2, 0.2)])
def test_lemma9_parity_covariance(alpha, c):
    """|I(D_w, j)| > alpha^2 (2c)^(k-1) for j in J outside supp(w) (000 Lemma 9)."""
    key = jax.random.key(9)
    rng = np.random.default_rng(9)
    n, checked = 10, 0
    for trial in range(30):
        k = int(rng.integers(1, 6))
        p = jt.alpha_c(alpha, c).marginals(jax.random.fold_in(key, trial), n)
        f = jt.random_parity(jax.random.fold_in(key, 1000 + trial), n, k)
        support = np.asarray(f.support)
        fixed = np.zeros(n, bool)
        fixed[support[rng.random(k) < 0.5]] = True
        values = rng.random(n) < 0.5
        mu, mu1 = f.means(p, jnp.asarray(fixed), jnp.asarray(values))
        # I(D_w, j) = E[y x_j] - E[y] E[x_j] = p_j (E[y | x_j = 1] - E[y]) under D_w.
        for j in support[~fixed[support]]:
            cov = float(p[j]) * (float(mu1[j]) - float(mu))
            assert abs(cov) > alpha**2 * (2 * c) ** (k - 1) * (1 - 1e-4)
            checked += 1
    assert checked > 30


@pytest.mark.parametrize("impurity", IMPURITIES)
def test_population_growth_learns_smoothed_juntas_at_depth_k(impurity):
    """Exact error 0 at depth k for random k-juntas, k = 2..6, under c-smoothed distributions.

    One compile for all k: a k-junta is stored as a 6-junta whose table ignores its last 6 - k
    support variables (which, like every irrelevant variable, then has gain exactly 0).
    """
    n, B, K = 20, 64, 6
    rule = jt.GrowthRule(max_depth=K, impurity=impurity)

    def trial(key, k):
        kp, kf = jax.random.split(key)
        p = jt.smoothed(c=0.2).marginals(kp, n)
        f6 = jt.random_junta(kf, n, K)
        # a random k-variable table, padded to 6 variables: T[a] = T_k[a mod 2^k]
        table_k = jax.random.bernoulli(jax.random.fold_in(kf, 1), 0.5, (2**K,))[jnp.arange(2**K) % (2**k)]
        f = jt.targets.Junta(f6.support, table_k)
        t = jt.grow_exact(p, f, rule)
        # the variables the table really depends on (at most the first k)
        relevant = jt.support_mask(jt.targets.Parity(jnp.where(f.relevant(), f6.support, -1)), n)
        return jt.error_by_depth(t, p, f), jnp.all(jt.features_used(t, n) == relevant), jt.depth(t)

    run = jax.jit(jax.vmap(trial, in_axes=(0, None)))
    for k in range(2, K + 1):
        errors, same_support, depth = run(jax.random.split(jax.random.key(k), B), k)
        assert float(jnp.max(errors[:, k])) < 1e-6, (impurity, k)
        assert bool(jnp.all(same_support)), (impurity, k)
        assert bool(jnp.all(depth <= k)), (impurity, k)


def test_uniform_parity_gains_are_exactly_zero_and_tie_break_decides():
    n, support = 6, [1, 3, 5]
    f, p = jt.parity(support, n), jnp.full(n, 0.5)
    grow = jax.jit(jt.grow_exact)
    t = grow(p, f, jt.GrowthRule(max_depth=3))
    assert np.all(np.asarray(t.gain) == 0.0)
    np.testing.assert_array_equal(np.asarray(t.feature[:7]), [0, 1, 1, 2, 2, 2, 2])  # lowest unused index
    np.testing.assert_allclose(np.asarray(jt.error_by_depth(t, p, f)), 0.5)
    rule = jt.GrowthRule(max_depth=3, tie_break="random")
    trees = jax.vmap(grow, in_axes=(None, None, None, 0))(p, f, rule, jax.random.split(jax.random.key(0), 40))
    assert len(set(np.asarray(trees.feature[:, 0]).tolist())) == n  # uniformly random among n tied features
    # Depth n: every path then tests the whole support, and the tree is exact.
    full = grow(p, f, jt.GrowthRule(max_depth=n))
    assert float(jt.exact_error(full, p, f)) == 0.0


@jax.jit
def _errors_vs_enumeration(t, p, f, xs):
    """Exact error per truncation depth, and the same by summing Pr[x] over all inputs x."""
    prob = jnp.prod(jnp.where(xs == 1, p, 1 - p), axis=1)
    fx = f(xs)
    by_enum = jnp.stack([jnp.sum(prob * (jt.predict(jt.truncate(t, d), xs) != fx)) for d in range(t.max_depth + 1)])
    return jt.exact_error(t, p, f), jt.error_by_depth(t, p, f), by_enum


def test_exact_error_equals_enumeration():
    n, B = 9, 8
    xs = jnp.asarray(all_inputs(n))
    keys = jax.random.split(jax.random.key(4), B)
    p = jax.vmap(lambda k: jax.random.uniform(k, (n,), minval=0.1, maxval=0.9))(keys)
    rule = jt.GrowthRule(max_depth=4)
    grow = jax.jit(jax.vmap(lambda k, pp, f: jt.grow(jt.draw(k, pp, f, 60), rule)))
    for make in (lambda k: jt.random_junta(k, n, 3), lambda k: jt.random_parity(k, n, 3)):
        fs = jax.vmap(make)(keys)
        trees = grow(keys, p, fs)
        exact, by_depth, by_enum = jax.vmap(_errors_vs_enumeration, in_axes=(0, 0, 0, None))(trees, p, fs, xs)
        np.testing.assert_allclose(np.asarray(by_depth), np.asarray(by_enum), atol=2e-6)
        np.testing.assert_allclose(np.asarray(exact), np.asarray(by_enum[:, -1]), atol=2e-6)
        assert float(jnp.max(by_enum[:, 0])) > 0.05  # non-trivial errors are being compared


def test_exact_error_agrees_with_large_fresh_sample():
    n, k, m_test, B = 32, 4, 2**16, 16

    def trial(key):
        kp, kf, ks, kt = jax.random.split(key, 4)
        p = jt.smoothed(c=0.2).marginals(kp, n)
        f = jt.random_junta(kf, n, k)
        t = jt.grow(jt.draw(ks, p, f, m=128), jt.GrowthRule(max_depth=k))
        return jt.exact_error(t, p, f), jt.sample_error(t, jt.draw(kt, p, f, m_test))

    exact, empirical = jax.jit(jax.vmap(trial))(jax.random.split(jax.random.key(0), B))
    exact, empirical = np.asarray(exact, np.float64), np.asarray(empirical, np.float64)
    sigma = np.sqrt(np.maximum(exact * (1 - exact), 1e-12) / m_test)
    assert np.all(np.abs(exact - empirical) <= 5 * sigma + 1e-6)
    assert exact.max() > 0.01  # with m = 128 some trees are wrong: the check is not vacuous


def test_grow_exact_batched_equals_single():
    n, k, B = 16, 3, 8
    rule = jt.GrowthRule(max_depth=4, impurity="gini", tie_break="random")
    keys = jax.random.split(jax.random.key(3), B)
    p = jt.marginals(jt.smoothed(c=0.1), jax.random.key(1), n, batch=B)
    fs = jax.vmap(lambda kk: jt.random_junta(kk, n, k))(keys)
    batched = jax.jit(jax.vmap(jt.grow_exact, in_axes=(0, 0, None, 0)))(p, fs, rule, keys)
    single = jax.jit(jt.grow_exact)
    for b in range(B):
        one = single(p[b], jax.tree.map(lambda a: a[b], fs), rule, keys[b])
        for got, want in zip(batched, one):
            np.testing.assert_array_equal(np.asarray(got[b]), np.asarray(want))


def test_node_restrictions_probabilities_sum_to_one_per_level():
    p = jnp.asarray(np.random.default_rng(0).uniform(0.1, 0.9, 8), jnp.float32)
    f = jt.parity([0, 3], 8)
    t = jax.jit(jt.grow_exact)(p, f, jt.GrowthRule(max_depth=3))
    r = jax.jit(tree_lib.node_restrictions)(t, p)
    node = np.asarray(tree_lib.reached(t))
    leaf_or_last = node & ((np.asarray(t.feature) < 0))
    # the leaves partition the space
    np.testing.assert_allclose(float(np.sum(np.asarray(r.weight)[leaf_or_last])), 1.0, atol=1e-6)
    np.testing.assert_allclose(np.asarray(r.weight)[node], np.asarray(t.weight)[node], rtol=1e-6)


def test_decision_tree_target_agrees_with_its_tree_and_packed_bits():
    n, d = 8, 3
    xs = jnp.asarray(all_inputs(n))
    for s in range(5):
        f = jt.random_tree(jax.random.key(s), n, d)
        feature = np.asarray(f.feature)
        for i in range(1, feature.size):  # no variable twice on a path
            a = i
            while a:
                a = (a - 1) // 2
                assert feature[a] != feature[i]
        # the same function, rebuilt through the validating constructor, evaluated three ways
        g = jt.decision_tree(feature, np.asarray(f.leaf), n)
        want = np.asarray(jt.predict(g.as_tree(), xs))
        np.testing.assert_array_equal(np.asarray(f(xs)), want)
        packed = jt.bits.unpack(f.bits(jt.bits.pack(xs.T.astype(bool))), 2**n)
        np.testing.assert_array_equal(np.asarray(packed).astype(int), want)


@pytest.mark.parametrize("feature, leaf, n, name", [
    ([0, 0, 1], [0, 1, 0, 1], 4, "repeated"),
    ([0, 1, 9], [0, 1, 0, 1], 4, "feature"),
    ([0, 1], [0, 1, 0, 1], 4, "leaf"),
    ([0, 1, 2], [0, 2, 0, 1], 4, "binary"),
])
def test_decision_tree_bad_input(feature, leaf, n, name):
    with pytest.raises(ValueError, match=name):
        jt.decision_tree(feature, leaf, n)


def test_random_tree_bad_depth():
    with pytest.raises(ValueError, match="d must be"):
        jt.random_tree(jax.random.key(0), 4, 5)


def test_addressing_targets_equal_brute_force():
    """f_{1,2} (n = 8), f_{1,3,S} (n = 11) and f_pi of the latter: packed bits, plain calls and the
    oracle, on random p, and on p with exact 1/2 entries (s_j = 0 in the Fourier oracle)."""
    code = jt.random_code(0, 3, 3)
    targets = [jt.addressing(1, 2), jt.coded_addressing(code),
               jt.agnostic_addressing(jax.random.key(3), jt.coded_addressing(code), eps=1.0)]
    assert int(jnp.sum(~targets[-1].pinned)) == 4
    for f in targets:
        n = f.n
        xs = all_inputs(n)
        memory = np.where(np.asarray(f.pinned), np.asarray(f.pinned_value), xs[:, f.n_address:])
        fx = np.asarray(f(jnp.asarray(xs)))
        address = np.asarray(f.address(jnp.asarray(xs)))
        np.testing.assert_array_equal(fx, memory[np.arange(len(xs)), address])
        packed = jt.bits.unpack(f.bits(jt.bits.pack(jnp.asarray(xs.T, bool))), 2**n)
        np.testing.assert_array_equal(np.asarray(packed).astype(int), fx)
        rng = np.random.default_rng(n)
        for trial in range(6):
            p = rng.uniform(0.05, 0.95, n)
            if trial % 2:
                p[rng.random(n) < 0.5] = 0.5
            fixed, values = rng.random(n) < 0.3, rng.random(n) < 0.5
            mu, mu1 = f.means(jnp.asarray(p, jnp.float32), jnp.asarray(fixed), jnp.asarray(values))
            want_mu, want_mu1 = brute_means(f, p, fixed, values)
            np.testing.assert_allclose(float(mu), want_mu, atol=2e-6)
            unfixed = ~fixed
            np.testing.assert_allclose(np.asarray(mu1)[unfixed], want_mu1[unfixed], atol=2e-6)


@pytest.mark.parametrize("k", [2, 3, 4, 5, 6])
def test_lemma12_and_16_address_is_almost_uniform(k):
    """|Pr[z(x) = a] - 2^-k| <= 5^-k, also with one addressing bit fixed (002 Lemmas 12, 16)."""
    delta = 0.4
    rng = np.random.default_rng(k)
    c = int(np.ceil(np.log(5) / delta))  # Lemma 12: c >= ln 5 / delta
    d = int(np.ceil(np.log(5) / delta * k))  # Lemma 16: distance d >= (ln 5 / delta) k
    code = jt.random_code(k, k, length=3 * d, min_distance=d)
    assert jt.code_distance(code) >= d
    for f in (jt.addressing(c, k), jt.coded_addressing(code)):
        A = f.n_address
        for _ in range(5):
            s = jnp.asarray(1 - 2 * rng.uniform(delta, 1 - delta, A), jnp.float32)
            prob = np.asarray(f.address_distribution(s), np.float64)
            np.testing.assert_allclose(prob.sum(), 1.0, atol=1e-5)
            assert np.max(np.abs(prob - 2.0**-k)) <= 5.0**-k
            j = int(rng.integers(A))
            for b in (0, 1):
                prob_b = np.asarray(f.address_distribution(s.at[j].set(1 - 2 * b)), np.float64)
                assert np.max(np.abs(prob_b - 2.0**-k)) <= 5.0**-k


@pytest.mark.parametrize("k", [2, pytest.param(3, marks=pytest.mark.slow)])
def test_exact_growth_on_addressing_queries_memory_bits_first(k):
    """002 Thm 3 / Lemma 14: with c >= ln 5 / delta the tree of depth 2^k queries only memory
    bits, so it stays far from f_{c,k} (which a depth ck^2 + 1 tree computes exactly)."""
    f = jt.addressing(4, k)  # c = 4 >= ln 5 / 0.402
    n = f.n_address + 2**k
    rule = jt.GrowthRule(max_depth=2**k, impurity="gini", tie_tol=0.0)

    def trial(key):
        p = jt.smoothed(c=0.098).marginals(key, n)  # delta-balanced, delta = 0.402
        t = jt.grow_exact(p, f, rule)
        queried = tree_lib.reached(t) & (t.feature >= 0)
        return jnp.any(queried & (t.feature < f.n_address)), jt.error_by_depth(t, p, f)[-1]

    address_queried, error = jax.jit(jax.vmap(trial))(jax.random.split(jax.random.key(k), 16))
    assert not bool(jnp.any(address_queried))
    assert float(jnp.min(error)) > 0.25


def test_code_helpers_bad_input():
    with pytest.raises(ValueError, match="min_distance"):
        jt.random_code(0, 3, 4, min_distance=4)
    with pytest.raises(ValueError, match="code must be binary"):
        jt.coded_addressing([[0, 2], [1, 1]])
    with pytest.raises(ValueError, match="c must be"):
        jt.addressing(0, 3)
    # Every target has a support (the Target protocol): all addressing bits and the unpinned memory bits.
    assert np.asarray(jt.support_mask(jt.addressing(1, 2), 8)).all()
