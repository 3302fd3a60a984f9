"""Bagging and random forests: the bootstrap, out-of-bag errors recounted in numpy, feature bagging
per node and per member, and scikit-learn's RandomForestClassifier as the outside oracle."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier

import jaxtrees as jt
from jaxtrees import datasets
from jaxtrees.core import bits, sampling
from jaxtrees.hypotheses import tree
from jaxtrees.learners import feature_subsets
from jaxtrees.learners.bagging import Bagging, bootstrap, random_forest

KEY = jax.random.key(0)


def plain(data):
    slots = data.X.shape[-1] * bits.WORD_BITS
    valid = np.asarray(bits.unpack(data.valid, slots))
    return (np.asarray(bits.unpack(data.X, slots)).T[valid].astype(int),
            np.asarray(bits.unpack(data.y, slots))[valid].astype(int))


def noisy_data(seed, m=150, n=8):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 2, (m, n))
    y = (X[:, 0] & X[:, 1]) ^ X[:, 2] ^ (rng.random(m) < 0.1)
    return sampling.from_arrays(X, y.astype(int))


@pytest.mark.parametrize("n", [8, 31, 40])  # an example's features and label in one word, exactly one, two
def test_bootstrap_is_the_data_with_each_example_repeated_by_its_count(n):
    data = sampling.with_weights(noisy_data(0, m=77, n=n), np.linspace(0.5, 2.0, 77, dtype=np.float32))
    sample, counts = jax.jit(bootstrap)(KEY, data)
    counts = np.asarray(counts)
    assert counts.sum() == 77 and counts[77:].sum() == 0 and int(sample.m) == 77
    X, y = plain(data)
    Xs, ys = plain(sample)
    w = np.asarray(data.weight)[:77]
    expected = np.column_stack([np.repeat(X, counts[:77], 0), np.repeat(y, counts[:77]), np.repeat(w, counts[:77])])
    drawn = np.column_stack([Xs, ys, np.asarray(sample.weight)[:77]])
    assert sorted(map(tuple, drawn)) == sorted(map(tuple, expected))
    if n == 8:  # unweighted, a tree grown on the resample is the one grown with the counts as weights
        data = data._replace(weight=None)
        sample = jax.jit(bootstrap)(KEY, data)[0]
        rule = jt.GrowthRule(max_depth=4, impurity="gini")
        weighted = jt.grow(sampling.with_weights(data, counts[:77]), rule)
        np.testing.assert_array_equal(jt.grow(sample, rule).feature, weighted.feature)


@pytest.mark.parametrize("vote", ["average", "majority"])
def test_out_of_bag_error_equals_a_numpy_recount(vote):
    data = noisy_data(1)
    bagger = Bagging(jt.GreedyTree(jt.GrowthRule(max_depth=3, impurity="gini", max_features=3)), members=15, vote=vote)
    H = jax.jit(bagger.fit)(KEY, data)
    X, y = plain(data)
    members = [jax.tree.map(lambda a, i=i: a[i], H.members) for i in range(15)]
    counts = np.stack([np.asarray(bootstrap(jax.random.split(k, 3)[0], data)[1])[:len(y)]
                       for k in jax.random.split(KEY, 15)])
    if vote == "average":
        votes = np.stack([np.asarray(t.probability(X)) for t in members]) - 0.5
        assert isinstance(H, jt.Forest)
    else:
        votes = np.stack([np.asarray(t.predict(X)) for t in members]) - 0.5
        assert isinstance(H, jt.Ensemble)
    out = counts == 0
    counted = out.any(0)
    wrong = ((np.where(out, votes, 0).sum(0) > 0) != y) & counted
    oob = H.oob if vote == "average" else H.rounds  # an Ensemble carries what its learner recorded in `rounds`
    np.testing.assert_allclose(float(oob.error), wrong.sum() / counted.sum(), rtol=1e-6)
    assert int(oob.counted) == counted.sum()
    full = (votes.sum(0) > 0).astype(int)  # every member's vote: the hypothesis itself
    np.testing.assert_array_equal(np.asarray(H.predict(X)), full)
    np.testing.assert_array_equal(bits.unpack(H.predict_bits(data.X), len(y)), full.astype(bool))


def test_random_subset_keeps_k_admissible_features_uniformly():
    admissible = jnp.asarray(np.random.default_rng(0).random((4000, 12)) < 0.6).at[:10].set(False).at[0, 3].set(True)
    feature, drawn = map(np.asarray, feature_subsets.random_subset(KEY, admissible, 3))
    a = np.asarray(admissible)
    np.testing.assert_array_equal(drawn.sum(1), np.minimum(a.sum(1), 3))
    assert np.all(drawn[:, :-1] >= drawn[:, 1:])  # the drawn slots come first
    assert np.all(np.diff(np.where(drawn, feature, 12 + np.arange(3)), axis=1) > 0)  # distinct, increasing
    keep = np.zeros_like(a)
    np.put_along_axis(keep, np.where(drawn, feature, 0), drawn, axis=1)
    assert not np.any(keep & ~a)
    rows = a.sum(1) == 7  # among rows with 7 admissible features, each is kept with probability 3/7
    share = keep[rows].sum(0) / a[rows].sum(0)
    assert np.all(np.abs(share - 3 / 7) < 0.06), share


def test_random_subset_is_uniform_over_subsets():
    """6 admissible features across two words: each of the 15 pairs with probability 1/15."""
    admissible = np.zeros((30000, 40), bool)
    admissible[:, [1, 7, 31, 32, 33, 39]] = True
    feature, drawn = feature_subsets.random_subset(KEY, jnp.asarray(admissible), 2)
    assert bool(jnp.all(drawn))
    pairs, counts = np.unique(np.asarray(feature), axis=0, return_counts=True)
    assert len(pairs) == 15 and np.all(np.isin(pairs, [1, 7, 31, 32, 33, 39]))
    expected = 30000 / 15
    assert np.all(np.abs(counts - expected) < 4 * np.sqrt(expected * 14 / 15)), counts


def test_max_features_per_node():
    """Feature 0 is the best split; with 2 of 8 features per node the root takes it iff it is drawn:
    probability 2/8. With max_features = n growth is the plain one."""
    data = noisy_data(2, m=400)
    rule = jt.GrowthRule(max_depth=1, impurity="gini", max_features=2)
    roots = jax.jit(jax.vmap(lambda k: jt.grow(data, rule, k).feature[0]))(jax.random.split(KEY, 800))
    share = float(jnp.mean(roots == 2))  # x_2 alone decides 75% of the labels: the best root
    assert abs(share - 0.25) < 4 * (0.25 * 0.75 / 800) ** 0.5, share
    every = jt.GrowthRule(max_depth=4, impurity="gini", max_features=8)
    np.testing.assert_array_equal(jt.grow(data, every, KEY).feature,
                                  jt.grow(data, jt.GrowthRule(max_depth=4, impurity="gini")).feature)
    assert every.features_per_node(8) is None and jt.GrowthRule(1, max_features="sqrt").features_per_node(131) == 11
    assert jt.GrowthRule(1, max_features="log2").features_per_node(403) == 8


def test_features_per_member_limits_each_tree():
    data = noisy_data(3, n=10)
    H = Bagging(jt.GreedyTree(jt.GrowthRule(max_depth=5)), members=20, features_per_member=3).fit(KEY, data)
    used = np.asarray(jax.vmap(lambda t: tree.features_used(t, 10))(H.members))
    assert used.sum(1).max() <= 3 and used.any(0).sum() > 3


@pytest.mark.parametrize("name, members, depth", [
    ("cancer", 25, 6),
    # Full size (scikit-learn's default of 100 trees, the boosting study's depth 10): the same comparison
    # as cancer with 25 trees of depth 6 above.
    pytest.param("cancer", 100, 10, marks=pytest.mark.slow),
    pytest.param("heart", 100, 10, marks=pytest.mark.slow),
    pytest.param("census", 100, 10, marks=pytest.mark.slow),
])
def test_random_forest_matches_scikit_learn(name, members, depth):
    """Mean test errors over the same splits within two standard errors of RandomForestClassifier
    with the same settings (``members`` trees, Gini, depth <= ``depth``, sqrt(n) features per node, bootstrap)."""
    forest = random_forest(members=members, max_depth=depth)
    d = datasets.load(name)
    problem = d.problem()
    keys = jax.random.split(jax.random.fold_in(KEY, 7), 8)
    train = jax.jit(jax.vmap(lambda k: problem.train(k, d.train_size)))(keys)  # one program, not op by op
    test = jax.jit(jax.vmap(lambda k: problem.test(k, d.train_size)))(keys)
    ours = np.asarray(jax.jit(jax.vmap(lambda k, a, b: forest.fit(k, a).staged_errors(b)[-1]))(keys, train, test))
    theirs = []
    for i in range(8):
        split = lambda data: plain(jax.tree.map(lambda a: a[i], data))  # noqa: E731
        clf = RandomForestClassifier(members, max_depth=depth, max_features="sqrt", random_state=i).fit(*split(train))
        theirs.append(1 - clf.score(*split(test)))
    se = np.sqrt(ours.var(ddof=1) / 8 + np.var(theirs, ddof=1) / 8)
    assert abs(ours.mean() - np.mean(theirs)) <= 2 * se + 1e-3, (name, ours.mean(), np.mean(theirs), se)


def test_bad_input():
    with pytest.raises(ValueError, match="members must be"):
        Bagging(jt.GreedyTree(jt.GrowthRule(2)), members=0)
    with pytest.raises(ValueError, match="vote must be"):
        Bagging(jt.GreedyTree(jt.GrowthRule(2)), vote="median")
    with pytest.raises(ValueError, match="features_per_member must be in"):
        Bagging(jt.GreedyTree(jt.GrowthRule(2)), features_per_member=9).fit(KEY, noisy_data(0))
    with pytest.raises(ValueError, match="max_features must be"):
        jt.GrowthRule(2, max_features="half")
    with pytest.raises(ValueError, match="key is required"):
        jt.grow(noisy_data(0), jt.GrowthRule(2, max_features=2))
