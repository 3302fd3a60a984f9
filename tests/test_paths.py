"""Path mode (population.follow_path), the agnostic addressing target f_pi and its nearby junta."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxtrees as jt
from jaxtrees.learners import population

N = 8


def _all_inputs(n):
    return np.asarray(list(itertools.product([0, 1], repeat=n)), bool)[:, ::-1]


@jax.jit
def _paths_and_tree(p, f, xs):
    rule = jt.GrowthRule(max_depth=4, impurity="entropy")
    tree = jt.grow_exact(p, f, rule)
    paths = jax.vmap(jt.follow_path, in_axes=(None, None, None, 0))(p, f, rule, xs)
    return tree, paths, jt.error_by_depth(tree, p, f)


@pytest.mark.parametrize("which", ["junta", "parity", "tree"])
def test_paths_are_the_paths_of_the_stored_tree(which):
    """For every x in {0,1}^8: the path's features and means are those of x's nodes in
    grow_exact's tree, and sum_x Pr[x] min(mu_d, 1 - mu_d) is the truncated tree's exact error."""
    key = jax.random.key(7)
    p = jt.smoothed(c=0.2).marginals(key, N)
    f = {"junta": jt.random_junta(key, N, 4), "parity": jt.random_parity(key, N, 3),
         "tree": jt.random_tree(key, N, 3)}[which]
    xs = _all_inputs(N)
    tree, paths, errors = _paths_and_tree(p, f, jnp.asarray(xs))
    feature, mean = np.asarray(tree.feature), np.asarray(tree.mean)
    for x, path_feature, path_mean in zip(xs, np.asarray(paths.feature), np.asarray(paths.mean)):
        node = 0
        for d in range(4):
            np.testing.assert_allclose(path_mean[d], mean[node], atol=1e-6)
            assert path_feature[d] == feature[node]
            if feature[node] < 0:
                break
            node = 2 * node + 1 + int(x[feature[node]])
    prob = np.prod(np.where(xs, np.asarray(p), 1 - np.asarray(p)), axis=1)
    np.testing.assert_allclose(prob @ np.asarray(paths.error, np.float64), np.asarray(errors), atol=2e-6)


def test_random_tie_breaks_are_consistent_per_node():
    """Uniform parity: every gain is 0, so random tie-breaks choose every split. Inputs that agree
    on the variables queried so far reach the same node and must query the same next variable."""
    n = 6
    f = jt.parity([0, 1, 2], n)
    p = jnp.full(n, 0.5)
    rule = jt.GrowthRule(max_depth=n, tie_break="random")
    xs = _all_inputs(n)
    paths = jax.jit(jax.vmap(jt.follow_path, in_axes=(None, None, None, 0, None)))(
        p, f, rule, jnp.asarray(xs), jax.random.key(1))
    feature = np.asarray(paths.feature)
    nodes = {}
    for x, path in zip(xs, feature):
        for d in range(n):
            node = tuple((int(v), bool(x[v])) for v in path[:d])
            assert nodes.setdefault(node, path[d]) == path[d]
    assert len({tuple(path) for path in feature}) > 1  # the root's choice is not "lowest" everywhere
    assert len(set(feature[:, 0])) == 1


def _addressing_paths(f, c_smooth, k, impurity, n_paths, seed, depth):
    rule = jt.GrowthRule(max_depth=depth, impurity=impurity, tie_tol=0.0)

    def trial(key):
        kp, kx = jax.random.split(key)
        p = jt.smoothed(c=c_smooth).marginals(kp, f.n)
        path = jt.follow_path(p, f, rule, jax.random.bernoulli(kx, p))
        is_memory = (jnp.arange(f.n) >= f.n_address) & ~jnp.concatenate([jnp.zeros(f.n_address, bool), f.pinned])
        first = path.first_query(jnp.arange(f.n) < f.n_address)
        before = jnp.sum(is_memory[jnp.maximum(path.feature, 0)] & (path.feature >= 0)
                         & (jnp.arange(depth) < jnp.where(first < 0, depth, first)))
        return first, before, path.error

    return jax.jit(jax.vmap(trial))(jax.random.split(jax.random.key(seed), n_paths))


def test_lemma14_memory_bits_first_on_every_path():
    """002 Lemma 14 with delta = 0.4 (c-smoothed around 1/2 with c = 0.1), c = 5 >= ln 5 / delta and
    Gini (alpha = L = 8, kappa = 1.04, k_0 = 4.3): every one of 2^5 memory bits precedes the first
    addressing bit, on each of 64 random (distribution, input) paths; then the tree of depth
    2^k still errs with probability >= 0.3 (Theorem 10: Omega(delta))."""
    k = 5
    f = jt.addressing(5, k)
    first, before, error = _addressing_paths(f, 0.1, k, "gini", 64, seed=14, depth=2**k + 1)
    assert np.all(np.asarray(first) == 2**k)
    assert np.all(np.asarray(before) == 2**k)
    assert float(np.mean(np.asarray(error)[:, 2**k])) >= 0.3


def test_agnostic_target_free_memory_bits_first():
    """002 Sec. 6 / Lemma 17: on f_pi the free memory bits (and no pinned one) come before any
    addressing bit; f_pi is eps-close to its nearby junta, which a depth-A tree computes."""
    k, eps = 5, 0.5
    f = jt.agnostic_addressing(jax.random.key(0), jt.addressing(5, k), eps)
    n_free = int(jnp.sum(~f.pinned))
    assert eps * 2**k / 4 <= n_free <= eps * 2**k / 2 and n_free % 2 == 0
    assert int(jnp.sum(f.pinned & f.pinned_value)) == int(jnp.sum(f.pinned & ~f.pinned_value))
    first, before, _ = _addressing_paths(f, 0.1, k, "gini", 32, seed=17, depth=n_free + 1)
    assert np.all(np.asarray(first) == n_free)
    assert np.all(np.asarray(before) == n_free)
    g = jt.nearby_junta(f)
    p = jt.smoothed(c=0.1).marginals(jax.random.key(5), f.n)
    none = jnp.zeros(f.n, bool)
    distance = float(f.means(p, none, none)[0] - g.means(p, none, none)[0])
    assert 0.0 < distance < eps


def test_nearby_junta_distance_equals_enumeration():
    """Pr[f_pi != g] = E[f_pi] - E[g] (g <= f_pi pointwise), checked on all 2^11 inputs."""
    f = jt.agnostic_addressing(jax.random.key(2), jt.coded_addressing(jt.random_code(1, 3, 3)), eps=1.0)
    g = jt.nearby_junta(f)
    xs = jnp.asarray(_all_inputs(f.n))
    fx, gx = np.asarray(f(xs)), np.asarray(g(xs))
    assert np.all(gx <= fx)
    p = np.random.default_rng(0).uniform(0.2, 0.8, f.n)
    prob = np.prod(np.where(np.asarray(xs), p, 1 - p), axis=1)
    none = jnp.zeros(f.n, bool)
    pj = jnp.asarray(p, jnp.float32)
    distance = float(f.means(pj, none, none)[0] - g.means(pj, none, none)[0])
    np.testing.assert_allclose(distance, prob @ (fx != gx), atol=2e-6)
    # g ignores the memory: flipping any memory bit never changes it
    flipped = np.asarray(xs).copy()
    flipped[:, f.n_address:] ^= True
    np.testing.assert_array_equal(np.asarray(g(jnp.asarray(flipped))), gx)


def test_path_and_agnostic_bad_input():
    f = jt.addressing(1, 2)
    p = jnp.full(f.n, 0.5)
    with pytest.raises(ValueError, match="x must have the shape of p"):
        jt.follow_path(p, f, jt.GrowthRule(max_depth=3), jnp.zeros(f.n + 1, bool))
    with pytest.raises(ValueError, match="eps"):
        jt.agnostic_addressing(jax.random.key(0), jt.addressing(1, 3), eps=0.25)
    with pytest.raises(ValueError, match="eps must be"):
        jt.agnostic_addressing(jax.random.key(0), f, eps=1.5)
    with pytest.raises(ValueError, match="target must be an Addressing"):
        jt.nearby_junta(jt.parity([0], 3))
    with pytest.raises(ValueError, match="key is required"):
        jt.follow_path(p, f, jt.GrowthRule(max_depth=3, tie_break="random"), jnp.zeros(f.n, bool))
