"""Untied trees are identical, node by node, to scikit-learn's DecisionTreeClassifier.

scikit-learn (criterion="entropy" | "gini", splitter="best", max_depth=D, random_state=0, every
other parameter at its default) is the oracle on data sets whose splits are untied: the reference
ID3 reports a margin > 1e-4 between the best and the second-best feature at every split. With
untied gains the choice does not depend on tie-breaking (sklearn's is by a random feature order),
nor on the scale of the impurity (sklearn's gini is half ours), nor on float32 rounding.

Why the trees must then be equal: on binary features sklearn's only threshold is 0.5, so its left
child is x_f = 0, our heap child 2i+1; it skips features constant within the node (so never
reuses a feature on a path), makes pure nodes leaves (impurity <= EPSILON), and, with
min_samples_split=2, min_samples_leaf=1 and min_impurity_decrease=0, otherwise always splits: it
takes the best split even when its improvement is 0, since it becomes a leaf only if
``improvement + EPSILON < min_impurity_decrease``. Our rule with min_gain=0 splits iff the best
gain is >= -tie_tol, so a zero-gain split is made by both; with two or more admissible features a
zero best gain is a tie of all of them (gains are >= 0) and the data set is not untied, and with
one admissible feature both split on it. So no zero-gain filter is needed: the compared data
sets include such splits, and test_zero_gain_split_made_by_both checks one explicitly. Leaves
predict the majority class, a tie going to class 0 in both.

Data sets with exact ties between features of different statistics (test_grow_reference's
exact-tie test) or float32-ambiguous gain differences are not compared with the reference here;
being tied, they are not compared with sklearn either.

The engine trees come from the shared jit+vmap engine with the same shapes and rules as
test_grow_reference.py (compiled programs are reused when both files run).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from sklearn.tree import DecisionTreeClassifier as SkTree

import helpers
import jaxtrees as jt
from reference import id3, untied
from test_grow_reference import GROUPS

CRITERIA = ("entropy", "gini")
# The depths of test_grow_reference's default-rule groups (their compiled programs are reused).
DEPTHS = {"entropy": (1, 3, 5), "gini": (1, 2, 3, 4)}
DATA_SETS = 15 * 32  # per criterion, in whole batches per depth
MIN_UNTIED = 200


def shape_for(criterion, depth):
    """(n, W) of the default-rule group of test_grow_reference with this impurity and depth."""
    for kwargs, n, W in GROUPS.values():
        if kwargs == dict(max_depth=depth, impurity=criterion):
            return n, W
    raise LookupError((criterion, depth))


def compare_with_sklearn(tree: jt.Tree, clf: SkTree, where: str):
    t = clf.tree_
    size = tree.feature.size
    visited = np.zeros(size, bool)
    stack = [(0, 0)]
    while stack:
        i, s = stack.pop()
        assert i < size, f"{where}: sklearn grew below max_depth"
        visited[i] = True
        assert tree.weight[i] == t.n_node_samples[s], f"{where}: weight at node {i}"
        if t.children_left[s] == -1:
            assert tree.feature[i] == -1, f"{where}: node {i} splits on {tree.feature[i]}, sklearn's is a leaf"
            sk_label = clf.classes_[np.argmax(t.value[s][0])]
            assert tree.label[i] == sk_label, f"{where}: label at leaf {i}"
        else:
            assert tree.feature[i] == t.feature[s], f"{where}: feature at node {i}"
            assert t.threshold[s] == 0.5
            stack += [(2 * i + 1, t.children_left[s]), (2 * i + 2, t.children_right[s])]
    assert np.all(tree.weight[~visited] == 0) and np.all(tree.feature[~visited] == -1), where


@functools.lru_cache(maxsize=None)
def oracle_counts(criterion):
    """Grow, compare and count, for one criterion; returns (identical to sklearn, Tally)."""
    n_sklearn = 0
    tally = helpers.Tally()
    per_depth = -(-DATA_SETS // (len(DEPTHS[criterion]) * helpers.BATCH)) * helpers.BATCH
    for depth in DEPTHS[criterion]:
        n, W = shape_for(criterion, depth)
        rng = np.random.default_rng([99, CRITERIA.index(criterion), depth])
        data = helpers.datasets(rng, n, W, per_depth)
        rule = jt.GrowthRule(max_depth=depth, impurity=criterion)
        trees = helpers.grow_many(data, rule)
        for i, ((X, y), tree) in enumerate(zip(data, trees)):
            where = f"{criterion} depth={depth} [{i}] m={len(y)} n={n}"
            ref = id3(X, y, criterion, depth)
            if not tally.add(ref):  # ambiguous, or exact ties (test_grow_reference covers those)
                continue
            helpers.assert_matches_reference(tree, ref, where)
            if not untied(ref):
                continue
            clf = SkTree(criterion=criterion, splitter="best", max_depth=depth, random_state=0).fit(X, y)
            compare_with_sklearn(tree, clf, where)
            n_sklearn += 1
    total = len(DEPTHS[criterion]) * per_depth
    helpers.REPORT[f"sklearn oracle ({criterion})"] = (
        f"{n_sklearn} untied data sets (every margin > 1e-4) identical to sklearn node by node, of "
        f"{total} generated; engine vs reference: {tally}")
    assert n_sklearn == tally.untied
    return n_sklearn, tally


@pytest.mark.parametrize("criterion", CRITERIA)
def test_untied_trees_equal_sklearn(criterion):
    n_sklearn, _ = oracle_counts(criterion)
    assert n_sklearn >= MIN_UNTIED


def test_walk_detects_a_difference():
    """The node-by-node walk is not vacuous: a tree with one feature changed fails it."""
    rng = np.random.default_rng(5)
    X = helpers.make_X(rng, 200, 6, "bernoulli")
    y = (X[:, 1] ^ X[:, 4]) | X[:, 2]
    ref = id3(X, y, "gini", 3)
    assert untied(ref)
    tree = jt.Tree(ref["feature"], ref["label"], ref["weight"], ref["mean"], ref["gain"])
    clf = SkTree(criterion="gini", max_depth=3, random_state=0).fit(X, y)
    compare_with_sklearn(tree, clf, "hand")
    leaf = int(np.flatnonzero((ref["weight"] > 0) & (ref["feature"] < 0))[0])
    for field, i, value in [("feature", 0, (ref["feature"][0] + 1) % 6), ("label", leaf, 1 - ref["label"][leaf]),
                            ("weight", 1, ref["weight"][1] + 1)]:
        bad = dict(feature=ref["feature"].copy(), label=ref["label"].copy(), weight=ref["weight"].copy())
        bad[field][i] = value
        with pytest.raises(AssertionError):
            compare_with_sklearn(jt.Tree(bad["feature"], bad["label"], bad["weight"], ref["mean"], ref["gain"]),
                                 clf, "bad")


def test_zero_gain_split_made_by_both():
    """A node whose only admissible feature has gain 0 (children as mixed as the parent) is split
    by both sklearn and the engine (the generated data sets above include ten such splits)."""
    X = np.array([[0, 0], [1, 0]] * 4)  # column 1 is constant
    y = np.array([0, 0, 1, 1, 0, 1, 1, 0])  # mean 1/2 in the node and in both children
    n, W = shape_for("entropy", 1)
    assert (n, W) == (2, 1)  # the compiled program of the depth-1 entropy group
    tree = helpers.grow_many([(X, y)], jt.GrowthRule(max_depth=1, impurity="entropy"))[0]
    clf = SkTree(criterion="entropy", max_depth=1, random_state=0).fit(X, y)
    assert clf.tree_.node_count == 3 and tree.feature[0] == 0 and abs(tree.gain[0]) < 1e-7
    compare_with_sklearn(tree, clf, "zero gain")
