"""jaxtrees.sklearn's estimators (DecisionTreeClassifier, LowDegreeClassifier, FindMinClassifier,
AdaBoostClassifier, RandomForestClassifier) are scikit-learn estimators: scikit-learn's own checks, its
model-selection tools, probabilities, sample weights, binarization, parameter errors; LowDegreeClassifier
agrees with the LowDegree learner, FindMinClassifier with FINDMIN on the distinct rows, AdaBoostClassifier
and RandomForestClassifier with the AdaBoost and random_forest learners."""

import subprocess
import sys
import warnings

import jax
import numpy as np
import pytest
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils.estimator_checks import parametrize_with_checks

import jaxtrees as jt
from jaxtrees.learners import AdaBoost, LowDegree, Parities, random_forest
from jaxtrees.learners import rank_reference
from jaxtrees.sklearn import (AdaBoostClassifier, BinarizationWarning, DecisionTreeClassifier, FindMinClassifier,
                              LowDegreeClassifier, RandomForestClassifier)

RNG = np.random.default_rng(0)
X = RNG.integers(0, 2, size=(300, 8))
Y = X[:, 1] ^ (X[:, 2] & X[:, 5])


#: Checks the ensembles fail by design, with the reason (scikit-learn's ``expected_failed_checks``).
EXPECTED_FAILURES = {
    "AdaBoostClassifier": {
        "check_sample_weight_equivalence_on_dense_data": "D_1 proportional to the weights is the distribution of "
        "the repeated rows, but AdaBoost runs in float32: sums in another order can move the outputs by ~2e-7 "
        "relative, above the check's rtol=1e-7"},
    "RandomForestClassifier": {
        "check_sample_weight_equivalence_on_dense_data": "the bootstrap draws from the rows, so repeated rows "
        "are drawn more often than one row of the same weight (scikit-learn's RandomForestClassifier fails it too)"},
}


@pytest.mark.slow  # 3 x 63 checks, each compiling for its own data shapes: about two minutes on 2 cores
@parametrize_with_checks([DecisionTreeClassifier(), LowDegreeClassifier(), FindMinClassifier()])
def test_scikit_learn_checks(estimator, check):
    check(estimator)


# 4 x 63 checks; each random-forest fit compiles for 4-15 s on 2 busy cores, most of the time
@pytest.mark.slow
@parametrize_with_checks([AdaBoostClassifier(n_estimators=5),
                          AdaBoostClassifier(weak_learner="parities", n_estimators=5),
                          AdaBoostClassifier(weak_learner="cart16", n_estimators=5),
                          RandomForestClassifier(n_estimators=5, max_depth=3)],
                         expected_failed_checks=lambda est: EXPECTED_FAILURES.get(type(est).__name__, {}))
def test_scikit_learn_checks_of_the_ensembles(estimator, check):
    check(estimator)


def test_import_jaxtrees_does_not_import_sklearn_until_the_estimator_is_used():
    code = ("import sys, jaxtrees as jt; before = 'sklearn' in sys.modules; jt.DecisionTreeClassifier; "
            "print(before, 'sklearn' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "True"]
    assert jt.DecisionTreeClassifier is DecisionTreeClassifier and jt.LowDegreeClassifier is LowDegreeClassifier


def test_without_scikit_learn_the_estimators_name_the_extra_that_installs_it():
    code = ("import sys; sys.modules['sklearn'] = None  # as if scikit-learn were not installed\n"
            "import jaxtrees as jt\n"
            "try:\n    jt.DecisionTreeClassifier().fit\n"
            "except ModuleNotFoundError as e:\n    print(e.name, '|', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    name, message = out.strip().split(" | ")
    assert name == "sklearn" and 'pip install "jaxtrees[sklearn]"' in message, out


def test_the_sklearn_extra_is_declared_and_the_test_extra_installs_scikit_learn_too():
    import tomllib
    from pathlib import Path

    extras = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(r.startswith("scikit-learn") for r in extras["sklearn"])
    assert any(r.startswith("scikit-learn") for r in extras["test"])


def test_real_valued_features_warn_once_per_fit_and_binary_ones_do_not():
    real = X + np.random.default_rng(4).uniform(-0.4, 0.4, X.shape)
    with pytest.warns(BinarizationWarning, match=r"other than 0 and 1.*x > threshold=0\.5") as record:
        DecisionTreeClassifier(max_depth=2).fit(real, Y)
    assert len(record) == 1 and issubclass(BinarizationWarning, UserWarning)
    assert record[0].filename == __file__  # it points at the caller's fit
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        DecisionTreeClassifier(max_depth=2).fit(X.astype(float), Y)  # {0, 1}: silent
        DecisionTreeClassifier(max_depth=2, threshold=0.0).fit(X, Y)
    with pytest.warns(BinarizationWarning, match="threshold=2"):
        LowDegreeClassifier(threshold=2.0).fit(X * 3, Y)


def test_model_selection_tools():
    scores = cross_val_score(DecisionTreeClassifier(max_depth=3), X, Y, cv=3)
    assert scores.shape == (3,) and scores.min() > 0.95
    pipe = make_pipeline(FunctionTransformer(lambda a: a[:, ::-1]), DecisionTreeClassifier(max_depth=3))
    assert pipe.fit(X, Y).score(X, Y) == 1.0
    grid = GridSearchCV(DecisionTreeClassifier(), {"max_depth": [1, 3], "impurity": ["gini", "entropy"]}, cv=3)
    assert grid.fit(X, Y).best_params_["max_depth"] == 3


def test_predict_before_fit_raises_not_fitted():
    with pytest.raises(NotFittedError):
        DecisionTreeClassifier().predict(X)


def test_predict_proba_is_the_leaf_frequency_and_agrees_with_predict():
    rng = np.random.default_rng(1)
    noisy = Y ^ (rng.random(Y.shape) < 0.2)
    clf = DecisionTreeClassifier(max_depth=2).fit(X, noisy)
    proba = clf.predict_proba(X)
    np.testing.assert_allclose(proba.sum(1), 1.0, atol=1e-6)
    leaves = np.asarray(jt.hypotheses.tree.leaf(clf.tree_, X))
    for node in np.unique(leaves):
        np.testing.assert_allclose(proba[leaves == node, 1], noisy[leaves == node].mean(), atol=1e-6)
    majority = proba[:, 1] != 0.5  # ties: the tree's own label rule decides
    np.testing.assert_array_equal(clf.predict(X)[majority], clf.classes_[proba.argmax(1)][majority])


def test_integer_sample_weights_equal_repeated_rows():
    rng = np.random.default_rng(2)
    w = rng.integers(0, 4, size=len(Y))
    noisy = Y ^ (np.arange(len(Y)) % 7 == 0)
    a = DecisionTreeClassifier(max_depth=3).fit(X, noisy, sample_weight=w).tree_
    b = DecisionTreeClassifier(max_depth=3).fit(np.repeat(X, w, axis=0), np.repeat(noisy, w)).tree_
    np.testing.assert_array_equal(a.feature, b.feature)
    np.testing.assert_array_equal(a.label[a.weight > 0], b.label[b.weight > 0])


def test_real_features_are_binarized_at_the_threshold_and_labels_may_be_any_two_classes():
    rng = np.random.default_rng(3)
    real = X + rng.uniform(-0.4, 0.4, X.shape)
    labels = np.where(Y == 1, "yes", "no")
    with pytest.warns(BinarizationWarning):
        clf = DecisionTreeClassifier(max_depth=3).fit(real, labels)
    ref = DecisionTreeClassifier(max_depth=3).fit(X, Y)
    np.testing.assert_array_equal(clf.tree_.feature, ref.tree_.feature)
    assert set(clf.predict(real)) <= {"yes", "no"} and clf.score(real, labels) == 1.0
    with pytest.warns(BinarizationWarning):
        shifted = DecisionTreeClassifier(max_depth=3, threshold=10.0).fit(real, labels)
    assert shifted.depth_ == 0  # every bit is 0: nothing to split on


def test_more_than_two_classes_is_refused():
    with pytest.raises(ValueError, match="Only binary classification"):
        DecisionTreeClassifier().fit(X, np.arange(len(Y)) % 3)


@pytest.mark.parametrize("params, name", [
    ({"max_depth": -1}, "max_depth"), ({"impurity": "information"}, "impurity"), ({"tie_break": "first"}, "tie_break"),
    ({"min_samples_split": 1}, "min_samples_split"), ({"min_samples_leaf": -1}, "min_samples_leaf"),
    ({"threshold": float("nan")}, "threshold"), ({"random_state": -3}, "random_state"),
])
def test_bad_parameters_name_themselves(params, name):
    with pytest.raises(ValueError, match=rf"^{name}\b"):
        DecisionTreeClassifier(**params).fit(X, Y)


def test_max_depth_none_is_bounded_and_too_deep_is_refused():
    assert DecisionTreeClassifier().fit(X[:5], Y[:5]).tree_.max_depth == 4  # m - 1
    with pytest.raises(ValueError, match="max_depth"):
        DecisionTreeClassifier().fit(np.zeros((2**18, 20), np.uint8), np.zeros(2**18, int))


def test_low_degree_classifier_is_the_low_degree_learner():
    rng = np.random.default_rng(4)
    noisy = Y ^ (np.arange(len(Y)) % 9 == 0)
    w = rng.integers(0, 3, size=len(Y)).astype(np.float32)
    for basis in ("uniform", "biased"):
        clf = LowDegreeClassifier(degree=2, basis=basis).fit(X, noisy, sample_weight=w)
        h = LowDegree(degree=2, basis=basis).fit(None, jt.with_weights(jt.from_arrays(X, noisy), w))
        np.testing.assert_array_equal(clf.sets_, np.asarray(h.sets))
        np.testing.assert_allclose(clf.coef_, np.asarray(h.values), atol=1e-6)
        np.testing.assert_array_equal(clf.predict(X), np.asarray(h.predict(X)))
        np.testing.assert_allclose(clf.decision_function(X), -np.asarray(h.evaluate(X)), atol=1e-5)


def test_low_degree_classifier_learns_a_parity_and_clips_its_degree():
    y = np.where(X[:, 1] ^ X[:, 4], "odd", "even")
    clf = LowDegreeClassifier(degree=2, max_terms=2).fit(X, y)
    assert clf.score(X, y) == 1.0 and clf.sets_[0].tolist() == [1, 4] and clf.degree_ == 2
    assert LowDegreeClassifier(degree=3).fit(X[:, :2], Y).degree_ == 2  # at most n_features
    assert LowDegreeClassifier(max_terms=10**6).fit(X[:, :2], Y).coef_.shape == (4,)
    grid = GridSearchCV(LowDegreeClassifier(), {"degree": [1, 2]}, cv=3).fit(X, X[:, 1] ^ X[:, 4])
    assert grid.best_params_["degree"] == 2


@pytest.mark.parametrize("params, name", [
    ({"degree": 0}, "degree"), ({"coef_threshold": 1.0}, "coef_threshold"), ({"max_terms": 0}, "max_terms"),
    ({"basis": "fourier"}, "basis"), ({"threshold": float("inf")}, "threshold"),
])
def test_low_degree_bad_parameters_name_themselves(params, name):
    with pytest.raises(ValueError, match=rf"^{name}\b"):
        LowDegreeClassifier(**params).fit(X, Y)
    with pytest.raises(NotFittedError):
        LowDegreeClassifier().predict(X)


def test_findmin_classifier_is_findmin_on_the_majority_labelled_distinct_rows():
    rng = np.random.default_rng(5)
    x = rng.integers(0, 2, size=(120, 5))
    y = x[:, 0] | (x[:, 2] & x[:, 4])
    y[:3] = 1 - y[:3]  # conflicting copies of rows seen elsewhere are outvoted
    clf = FindMinClassifier().fit(x, y)
    rows, inverse = np.unique(x, axis=0, return_inverse=True)
    votes = np.bincount(inverse.ravel(), weights=2.0 * y - 1.0, minlength=len(rows))
    tree, rank = rank_reference.findmin(rows, (votes > 0).astype(int))
    assert clf.found_ and clf.rank_ == rank and clf.calls_ >= 1
    np.testing.assert_array_equal(clf.predict(rows), rank_reference.predict(tree, rows))
    np.testing.assert_allclose(clf.predict_proba(x)[:, 1], clf.predict(x))
    weights = np.ones(120)
    weights[:3] = 0.0  # the flipped rows left out: the clean function, rank 1
    assert FindMinClassifier().fit(x, y, sample_weight=weights).score(x[3:], y[3:]) == 1.0
    assert FindMinClassifier(max_rank=0).fit(x, y).found_ is False
    with pytest.raises(ValueError, match="max_rank"):
        FindMinClassifier(max_rank=-1).fit(x, y)


def majority3(x):
    return (x[:, 0] + x[:, 1] + x[:, 2] >= 2).astype(int)


def test_adaboost_with_stumps_fits_a_majority_of_three():
    rng = np.random.default_rng(6)
    x = rng.integers(0, 2, size=(200, 6))
    clf = AdaBoostClassifier(n_estimators=10).fit(x, majority3(x))
    assert clf.score(x, majority3(x)) == 1.0 and clf.train_errors_[-1] == 0.0
    np.testing.assert_array_less(clf.train_errors_, clf.bounds_ + 1e-6)  # AdaBoost's bound holds each round
    assert clf.alphas_.shape == clf.gammas_.shape == (10,) and clf.gammas_[0] > 0


def test_adaboost_with_2_parities_learns_xor_and_stumps_cannot():
    rng = np.random.default_rng(7)
    x = rng.integers(0, 2, size=(400, 8))
    y = np.where(x[:, 2] ^ x[:, 6], "odd", "even")
    parities = AdaBoostClassifier(weak_learner="parities", degree=2, n_estimators=5).fit(x, y)
    assert parities.score(x, y) == 1.0 and parities.ensemble_.members.sets[0].tolist() == [[2, 6]]
    assert AdaBoostClassifier(n_estimators=30).fit(x, y).score(x, y) < 0.8  # sums of stumps: no XOR
    assert AdaBoostClassifier(weak_learner="cart16", n_estimators=10).fit(x, y).score(x, y) == 1.0  # 8 of 8 seeds (3 rounds: 5 of 8)
    assert AdaBoostClassifier(weak_learner="parities", degree=3).fit(x[:, :2], y).degree_ == 2  # at most n


def test_adaboost_probabilities_are_the_normalized_vote():
    rng = np.random.default_rng(8)
    noisy = Y ^ (rng.random(Y.shape) < 0.2)
    clf = AdaBoostClassifier(n_estimators=8).fit(X, noisy)
    decision, proba = clf.decision_function(X), clf.predict_proba(X)
    margin = np.sum(np.asarray(clf.ensemble_.votes(X)), axis=-1)
    np.testing.assert_allclose(decision, margin / np.abs(clf.alphas_).sum(), atol=1e-6)
    assert np.all(np.abs(decision) <= 1.0) and np.all(proba >= 0.0)
    np.testing.assert_allclose(proba[:, 1], (1 + decision) / 2)
    np.testing.assert_allclose(proba.sum(1), 1.0)
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[(decision > 0).astype(int)])


def test_adaboost_classifier_is_the_adaboost_learner_and_sample_weight_is_d1():
    rng = np.random.default_rng(9)
    noisy = Y ^ (np.arange(len(Y)) % 9 == 0)
    w = rng.integers(0, 3, size=len(Y)).astype(np.float32)
    clf = AdaBoostClassifier(weak_learner="parities", n_estimators=6, random_state=4).fit(X, noisy, sample_weight=w)
    H = AdaBoost(Parities(degree=2), rounds=6).fit(jax.random.key(4), jt.with_weights(jt.from_arrays(X, noisy), w))
    np.testing.assert_allclose(clf.alphas_, np.asarray(H.weights), rtol=1e-6)
    np.testing.assert_allclose(clf.gammas_, np.asarray(H.rounds.gamma), rtol=1e-6)
    np.testing.assert_array_equal(clf.predict(X), np.asarray(H.predict(X)))


def junta(x):
    return (x[:, 0] & x[:, 3]) | x[:, 7]


def forest(random_state, n_estimators=20):
    return RandomForestClassifier(n_estimators=n_estimators, max_depth=6, random_state=random_state)


def test_random_forest_learns_a_junta():
    rng = np.random.default_rng(10)
    x = rng.integers(0, 2, size=(800, 12))
    y = junta(x) ^ (rng.random(800) < 0.05)  # 5% label noise in training
    clf = forest(0).fit(x[:400], y[:400])
    assert clf.score(x[400:], junta(x[400:])) >= 0.95 and 0.0 < clf.oob_error_ < 0.2
    proba = clf.predict_proba(x[400:])
    np.testing.assert_allclose(proba.sum(1), 1.0, atol=1e-6)
    np.testing.assert_array_equal(clf.predict(x[400:]), proba[:, 1] > 0.5)


def test_random_forest_random_state_reproduces_and_is_the_learner_with_the_same_key():
    rng = np.random.default_rng(11)
    x = rng.integers(0, 2, size=(400, 12))
    y = junta(x) ^ (rng.random(400) < 0.1)
    a, b, c = forest(7).fit(x, y), forest(7).fit(x, y), forest(8).fit(x, y)
    np.testing.assert_array_equal(a.forest_.members.feature, b.forest_.members.feature)
    np.testing.assert_array_equal(a.predict_proba(x), b.predict_proba(x))
    assert not np.array_equal(a.forest_.members.feature, c.forest_.members.feature)
    learned = random_forest(members=20, max_depth=6).fit(jax.random.key(7), jt.from_arrays(x, y))
    np.testing.assert_array_equal(a.forest_.members.feature, np.asarray(learned.members.feature))
    np.testing.assert_array_equal(a.predict(x), np.asarray(learned.predict(x)))
    np.testing.assert_allclose(a.predict_proba(x)[:, 1], np.asarray(learned.probability(x)), atol=1e-6)


def test_random_forest_sample_weight_leaves_out_zero_weight_rows():
    rng = np.random.default_rng(12)
    x = rng.integers(0, 2, size=(400, 12))
    y = junta(x)
    flipped = np.arange(400) % 4 == 0
    w = np.where(flipped, 0.0, 1.0)
    clf = forest(1).fit(x, y ^ flipped, sample_weight=w)
    assert clf.score(x, y) == 1.0


ADA, FOREST = AdaBoostClassifier, RandomForestClassifier


@pytest.mark.parametrize("estimator, params, name", [
    (ADA, {"weak_learner": "trees"}, "weak_learner"), (ADA, {"n_estimators": 0}, "n_estimators"),
    (ADA, {"degree": 4}, "degree"), (ADA, {"degree": 0}, "degree"), (ADA, {"random_state": -1}, "random_state"),
    (ADA, {"threshold": float("nan")}, "threshold"), (FOREST, {"n_estimators": 0}, "n_estimators"),
    (FOREST, {"max_depth": -1}, "max_depth"), (FOREST, {"max_depth": None}, "max_depth"),
    (FOREST, {"max_features": "half"}, "max_features"), (FOREST, {"max_features": 0}, "max_features"),
    (FOREST, {"impurity": "information"}, "impurity"), (FOREST, {"random_state": 1.5}, "random_state"),
])
def test_ensemble_bad_parameters_name_themselves_at_fit(estimator, params, name):
    clf = estimator(**params)  # scikit-learn's convention: __init__ only stores them
    with pytest.raises(ValueError, match=rf"^{name}\b"):
        clf.fit(X, Y)
    with pytest.raises(NotFittedError):
        estimator().predict(X)
