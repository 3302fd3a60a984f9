"""AdaBoost (jaxtrees.learners.boosting) and its Ensemble: Algorithm 1 against a plain-numpy
reference round by round, scikit-learn's AdaBoostClassifier (SAMME) as an outside oracle split by
split, the training-error bound on every round, a perfect weak learner, real data, bad input.
Batching, determinism and degenerate data: tests/test_learner_conformance.py (``adaboost-stumps``)."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxtrees as jt
from jaxtrees import datasets
from jaxtrees.experiments.table import Table
from jaxtrees.learners.bagging import random_forest
from jaxtrees.learners.boosting import AdaBoost
from jaxtrees.learners.stumps import Stump


def noisy_data(seed, m=240, n=12):
    rng = np.random.default_rng(seed)
    X = (rng.random((m, n)) < rng.uniform(0.2, 0.8, n)).astype(int)
    y = ((X[:, 0] & X[:, 1]) | (X[:, 2] & ~X[:, 3] & 1) ^ (rng.random(m) < 0.15)).astype(int)
    return X, y


def reference_adaboost(X, y, rounds):
    """Algorithm 1 with the least-weighted-error stump (lowest feature among near-ties), float64."""
    m, n = X.shape
    Y = 2.0 * y - 1.0
    D = np.full(m, 1.0 / m)
    out = []
    for _ in range(rounds):
        best = None
        for i in range(n):
            side = X[:, i] == 1
            labels = [float(np.sum(D[s] * Y[s]) > 0) for s in (~side, side)]  # weighted majority per side (tie: 0)
            vote = np.where(side, 2 * labels[1] - 1, 2 * labels[0] - 1)
            error = np.sum(D * (vote != Y))
            if best is None or error < best[0] - 1e-6:
                best = (error, i, vote)
        error, feature, vote = best
        gamma = np.sum(D * Y * vote)
        alpha = 0.5 * np.log((1 + gamma) / (1 - gamma))
        D = D * np.exp(-alpha * Y * vote)
        D /= D.sum()
        out.append((feature, gamma, alpha))
    return out


def reference_parity_rounds(X, y, degree, rounds):
    """Algorithm 1 with the d-parity weak learner of seed 004: the character chi_S, |S| <= d, or its
    negation with the largest weighted correlation |sum_i D(i) F_i chi_S(x_i)| (F = 1 - 2y), float64."""
    m, n = X.shape
    F, Y = 1.0 - 2.0 * y, 2.0 * y - 1.0
    sets = [S for size in range(degree + 1) for S in itertools.combinations(range(n), size)]
    chi = np.stack([np.prod(1.0 - 2.0 * X[:, list(S)], axis=1) for S in sets], axis=1)  # [m, K]
    D = np.full(m, 1.0 / m)
    out = []
    for _ in range(rounds):
        corr = (D * F) @ chi
        best = int(np.argmax(np.abs(corr)))
        vote = -np.sign(corr[best]) * chi[:, best]  # h = 1 where corr chi_S < 0, as a +-1 vote
        gamma = np.sum(D * Y * vote)
        alpha = 0.5 * np.log((1 + gamma) / (1 - gamma))
        D = D * np.exp(-alpha * Y * vote)
        D /= D.sum()
        out.append((sets[best], gamma))
    return out


@pytest.mark.parametrize("degree", [1, 2])
def test_d_parity_weak_learner_rounds_equal_a_brute_force_search(degree):
    """LowDegree(degree=d, max_terms=1) on AdaBoost's weights is the seed's d-parity weak learner:
    the best of all characters of degree <= d and their negations by weighted correlation."""
    X, y = noisy_data(30 + degree, m=150, n=8)
    H = fit(AdaBoost(jt.LowDegree(degree=degree, max_terms=1), rounds=12), jt.from_arrays(X, y))
    reference = reference_parity_rounds(X, y, degree, 12)
    chosen = [tuple(int(i) for i in row if i < 8) for row in np.asarray(H.members.sets[:, 0])]
    assert chosen == [S for S, _ in reference]
    np.testing.assert_allclose(np.asarray(H.rounds.gamma), [g for _, g in reference], atol=2e-5)


def fit(learner, data, key=0):
    return jax.jit(learner.fit)(jax.random.key(key), data)


@pytest.mark.parametrize("seed", [0, 1])
def test_rounds_equal_the_numpy_reference(seed):
    X, y = noisy_data(seed)
    H = fit(AdaBoost(Stump(impurity="error"), rounds=15), jt.from_arrays(X, y))
    reference = reference_adaboost(X, y, 15)
    np.testing.assert_array_equal(np.asarray(H.members.feature[:, 0]), [r[0] for r in reference])
    np.testing.assert_allclose(np.asarray(H.rounds.gamma), [r[1] for r in reference], atol=2e-5)
    np.testing.assert_allclose(np.asarray(H.weights), [r[2] for r in reference], atol=1e-4)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_staged_test_errors_equal_scikit_learns_samme_with_gini_stumps(seed):
    """For two classes SAMME's reweighting is Algorithm 1's (its alpha is twice ours, the same vote),
    so with the same weak learner (weighted Gini stumps) every round's split and every staged test
    error agree. Continuous random weights make exact Gini ties between features unlikely."""
    ensemble = pytest.importorskip("sklearn.ensemble")
    tree = pytest.importorskip("sklearn.tree")
    X, y = noisy_data(10 + seed, m=400)
    train, test = slice(0, 300), slice(300, None)
    H = fit(AdaBoost(Stump(impurity="gini"), rounds=25), jt.from_arrays(X[train], y[train]))
    sk = ensemble.AdaBoostClassifier(tree.DecisionTreeClassifier(max_depth=1), n_estimators=25,
                                     random_state=0).fit(X[train], y[train])
    assert len(sk.estimators_) == 25
    np.testing.assert_array_equal(np.asarray(H.members.feature[:, 0]), [e.tree_.feature[0] for e in sk.estimators_])
    np.testing.assert_allclose(2 * np.asarray(H.weights), sk.estimator_weights_, rtol=1e-4)
    staged = [np.mean(p != y[test]) for p in sk.staged_predict(X[test])]
    np.testing.assert_allclose(np.asarray(H.staged_errors(jt.from_arrays(X[test], y[test]))), staged, atol=1e-6)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_training_error_is_below_the_bound_every_round(seed):
    X, y = noisy_data(20 + seed)
    H = fit(AdaBoost(Stump(), rounds=40), jt.from_arrays(X, y))
    r = jax.device_get(H.rounds)
    assert np.all(r.train_error <= r.bound + 1e-6)
    # 001: 2 sqrt(eps (1 - eps)) <= exp(-2 (1/2 - eps)^2) = exp(-gamma^2 / 2) with gamma = 1 - 2 eps
    assert np.all(r.bound <= np.exp(-0.5 * np.cumsum(r.gamma**2)) + 1e-6)
    assert r.train_error[-1] < r.train_error[0]
    np.testing.assert_allclose(r.train_error[-1], float(jt.sample_error(H, jt.from_arrays(X, y))), atol=1e-6)


def test_a_round_wrong_only_on_examples_of_tiny_weight_is_not_perfect():
    """Once the wrong examples' weights are below float32's resolution at 1, gamma rounds to 1; the
    round must still not get the perfect round's dominant vote, or H errs above the bound (0)."""
    X = np.eye(8, dtype=int)[np.r_[np.zeros(60, int), np.arange(1, 8)]]  # 60 copies of e_0, one of e_1..e_7
    y = np.r_[np.ones(60, int), np.zeros(7, int)]
    y[-1] = 1  # e_7 labelled 1: the stump x_0 errs on it alone
    w = np.r_[np.ones(60), np.full(7, 1e-9)].astype(np.float32)
    H = fit(AdaBoost(Stump(), rounds=4), jt.with_weights(jt.from_arrays(X, y), np.r_[w, np.zeros(32 * 3 - 67)]))
    r = jax.device_get(H.rounds)
    assert r.gamma[0] == 1.0  # in float32
    assert np.all(r.train_error <= r.bound + 1e-6) and np.all(np.isfinite(np.asarray(H.weights)))
    assert r.bound[0] > 0.0


def test_a_perfect_weak_learner_ends_boosting_without_inf_or_nan():
    X, _ = noisy_data(5)
    y = X[:, 4]  # one stump is exact: gamma_1 = 1
    H = fit(AdaBoost(Stump(), rounds=6), jt.from_arrays(X, y))
    assert np.all(np.isfinite(np.asarray(H.weights))) and float(H.weights[0]) == 1.0
    np.testing.assert_array_equal(np.asarray(H.weights[1:]), 0.0)
    np.testing.assert_array_equal(np.asarray(H.rounds.train_error), 0.0)
    assert float(H.rounds.gamma[0]) == pytest.approx(1.0)


def test_boosting_many_splits_of_a_real_data_set_at_once():
    """20 splits of heart (100 train, 170 test), 30 rounds, as one vmap over split keys; every
    split's errors are finite and the bound holds; boosting lowers the mean test error."""
    d = datasets.load("heart")
    problem = d.problem()
    keys = jax.random.split(jax.random.key(0), 20)
    booster = AdaBoost(Stump(), rounds=30)

    def split(key):
        H = booster.fit(key, problem.train(key, d.train_size))
        return H.rounds, H.staged_errors(problem.test(key, d.train_size))

    rounds, test_errors = jax.device_get(jax.jit(jax.vmap(split))(keys))
    assert test_errors.shape == (20, 30) and np.all(rounds.train_error <= rounds.bound + 1e-6)
    assert test_errors[:, -1].mean() < test_errors[:, 0].mean() and test_errors[:, -1].mean() < 0.3


@pytest.mark.parametrize("kwargs, match", [
    (dict(weak=Stump(), rounds=0), r"rounds must be in \[1"),
    (dict(weak=jt.PopulationTree(jt.GrowthRule(max_depth=1)), rounds=3), "weak must be a learner that fits weighted"),
])
def test_bad_configuration_is_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        AdaBoost(**kwargs)


def test_bad_weights_are_refused_before_any_work():
    X, y = noisy_data(0, m=40)
    with pytest.raises(ValueError, match="weight"):
        AdaBoost(Stump(), rounds=2).fit(jax.random.key(0), jt.with_weights(jt.from_arrays(X, y), -jnp.ones(40)))


def test_boosting_study_trial_is_adaboost_on_the_trials_split():
    """The study's trial: one split (the trial key) of the data set, every learner on it; 3-parities
    only at max_degree 3 (their columns are NaN otherwise); the forest (``Study.after``) on the split
    padded to every data set's largest shape is the forest on the split."""
    from jaxtrees.experiments.studies import boosting

    key = jax.random.key(5)
    params = {"data": "heart", "rounds": 7, "max_degree": 2, "forest_depth": 3}
    out = jax.jit(lambda k: boosting._forest(k, params, boosting._trial(k, params)))(key)
    assert set(out) == {f"{w}_{what}" for w in boosting.WEAK for what in ("test_error", "train_error", "gamma",
                                                                          "bound")} | {"forest_test_error"}
    d = datasets.load("heart")
    problem = d.problem()
    train, test = problem.train(key, 100), problem.test(key, 100)
    H = AdaBoost(jt.learners.Parities(degree=2), rounds=7).fit(key, train)  # the study's 2-parity learner
    np.testing.assert_allclose(np.asarray(out["parity2_test_error"]), np.asarray(H.staged_errors(test)), atol=1e-6)
    C = AdaBoost(jt.learners.CART16, rounds=7).fit(key, train)
    np.testing.assert_allclose(np.asarray(out["cart16_test_error"]), np.asarray(C.staged_errors(test)), atol=1e-6)
    assert np.all(np.isnan(np.asarray(out["parity3_test_error"])))
    F = random_forest(members=7, max_depth=3).fit(key, train)  # the study's forest, depth forest_depth
    np.testing.assert_array_equal(np.asarray(out["forest_test_error"]), np.asarray(F.staged_errors(test)))
    assert out["stumps_gamma"].shape == (7,)
    assert np.all(np.asarray(out["stumps_train_error"]) <= np.asarray(out["stumps_bound"]) + 1e-6)
    rows = Table({"data": np.full(7, "heart", object), "round": np.arange(1, 8),  # the trial's rows, as the store's
                  **{k: np.asarray(v) for k, v in out.items()}})
    report = boosting.BOOSTING.report(rows)
    mean = 100 * float(out["stumps_test_error"][-1])  # the error after the last round, not the mean over rounds
    assert f"| heart | decision stumps | 1 | 7 | {mean:.2f} (0.00) | 22.24 |" in report and "| 24.06 |" in report
    assert "3-parities" not in report.split("|---|")[-1]  # not run: no row
    assert "on every round of every split: yes" in report
    bad = rows.with_columns(stumps_train_error=np.asarray(out["stumps_bound"]) + 0.01)
    assert "on every round of every split: NO" in boosting.BOOSTING.report(bad)


def test_boosting_study_runs_one_trial_per_cpu_group():
    """A trial's forest sweeps its deepest level (rounds trees x 2^(depth - 1) nodes x n features of
    counts, tens of MB) level after level: past the CPU cache budget, so the runner vmaps one trial per
    group at both built-in sizes (a quick program of 2 trials no longer pays for a group of 32); a
    shallow forest on few rounds fits in a larger group."""
    from jaxtrees.experiments.run import runner
    from jaxtrees.experiments.studies import boosting

    cpu = jax.devices("cpu")[0]
    for size in (boosting.BOOSTING.quick, boosting.BOOSTING.full):
        for data in datasets.SHIPPED:
            params = {**size, "data": data}
            assert boosting._working_set(params) > runner.CPU_CACHE_BUDGET
            assert runner.group_size(cpu, working_set=boosting._working_set(params)) == 1
    small = {"data": "cancer", "rounds": 5, "max_degree": 2, "forest_depth": 2}
    assert runner.group_size(cpu, working_set=boosting._working_set(small)) > 1


def test_boosting_study_compiles_one_forest_for_every_data_set():
    """The data sets are branches of one program, and the forest runs after them (``Study.after``) on the
    split padded to the largest data set: one forest, grown in a level loop by a program of at most 16 trials
    (the quick size's 6), unrolled by larger ones (the full size's 100); a negative loop bound is refused by name."""
    import dataclasses

    from jaxtrees.experiments.run import runner
    from jaxtrees.experiments.studies import boosting

    study = boosting.BOOSTING
    assert study.branches == ("data",) and study.after is boosting._forest
    assert len(study.programs(runner.configure(study, quick=True))) == 1
    n, train_words, test_words = boosting._padded(tuple(boosting.available()))
    assert n == max(len(boosting._data(name).features) for name in boosting.available())
    key = jax.random.key(0)  # the shapes of the splits the trial packs, as traced
    traced = [(len(d.features), *(jax.eval_shape(lambda k, part=part, d=d: part(k, d.train_size), key).X.shape[-1]
                                  for part in (d.problem().train, d.problem().test)))
              for d in map(boosting._data, boosting.available())]
    assert (n, train_words, test_words) == tuple(max(shape[i] for shape in traced) for i in range(3))
    assert runner.loop_max_trials(study) == 16
    assert runner.configure(study, quick=True).trials <= 16 < runner.configure(study, quick=False).trials
    def looped(level_loop):
        return dataclasses.replace(study, compile=dataclasses.replace(study.compile, level_loop=level_loop))

    assert runner.loop_max_trials(looped(True)) == runner.LOOP_MAX_TRIALS and runner.loop_max_trials(looped(False)) == 0
    with pytest.raises(ValueError, match="compile.level_loop"):
        looped(-1)


def _boosting_rows(rounds=240):
    """Two splits of heart (m = 100) as the store gives them: stumps with edge 0.2 every round and training error
    half the product bound until round 230, 0 after; 2-parities with edge 0.3 and training error at the bound;
    3-parities and CART-16 not run (NaN)."""
    t = np.tile(np.arange(1, rounds + 1), 2)
    size = t.size
    nan = np.full(size, np.nan)
    stumps = 0.96 ** (t / 2)  # prod sqrt(1 - 0.2^2)
    parity = 0.91 ** (t / 2)  # prod sqrt(1 - 0.3^2)
    return Table({"data": np.full(size, "heart", object), "cell": np.zeros(size, int),
                  "replicate": np.repeat([0, 1], rounds), "round": t,
                  "stumps_gamma": np.full(size, 0.2), "stumps_bound": stumps,
                  "stumps_train_error": np.where(t <= 230, stumps / 2, 0.0), "stumps_test_error": np.full(size, 0.2),
                  "parity2_gamma": np.full(size, 0.3), "parity2_bound": parity, "parity2_train_error": parity,
                  "parity2_test_error": np.full(size, 0.2),
                  **{f"{w}_{what}": nan for w in ("parity3", "cart16") for what in ("gamma", "bound", "train_error",
                                                                                     "test_error")},
                  "forest_test_error": np.full(size, 0.2)})


def test_boosting_theory_section_says_what_can_fail(tmp_path):
    """Issues 57, 65: 001's bound, its exponential form and the round ceil(2 ln m / gamma^2) (m = 100, gamma = 0.2: 231;
    gamma = 0.3: 103) hold for every run (identities: test_training_error_is_below_the_bound_every_round); 004 Eq. 1
    sets the printed T = ceil(ln m / (2 gamma^2)) (58) for a generalization bound whose ln(1/delta) term exceeds 1."""
    from jaxtrees.experiments.studies import boosting

    rows = _boosting_rows()
    report = boosting.BOOSTING.report(rows)
    assert "on every round of every split: yes" in report  # the existing line stays
    theory_part = report.split("## Theory")[1]
    assert "- [identity] 001 AdaBoost theorem: training error <= prod_t 2 sqrt(eps_t (1 - eps_t)) <= exp(-sum_t " \
           "gamma_t^2 / 2)" in theory_part and "Learners: decision stumps, 2-parities." in theory_part
    assert "- [identity] 001 AdaBoost theorem, its round count: " in theory_part
    assert "Splits that reach that round, of 2: decision stumps 2, 2-parities 2." in theory_part
    # test error 0.2 at round 58 of every split: ln 20 / 0.2 = 15.0
    assert "- [vacuous] 004 Eq. 1 as 004 states it: after T = ceil(ln m / (2 gamma^2)) rounds err(H) <= " in theory_part
    assert "bound / test error at round T >= decision stumps: 15 in the 2 of 2 splits that reach T; 2-parities: 15 " \
           "in the 2 of 2 splits that reach T: untestable as printed" in theory_part
    assert "3-parities" not in theory_part and "CART-16" not in theory_part and "holds in" not in theory_part
    b = boosting.bounds(rows)
    assert b["stumps"]["rounds"][0] == 231 and b["parity2"]["rounds"][0] == 103 and b["stumps"]["printed"][0] == 58
    np.testing.assert_allclose(b["stumps"]["exp"][:3], np.exp(-0.02 * np.arange(1, 4)))
    files = boosting.BOOSTING.plot(rows, str(tmp_path / "boosting"))
    assert str(tmp_path / "boosting_bounds.png") in files and (tmp_path / "boosting_bounds.png").stat().st_size > 5000
