"""Issue 58, what round four left: jt.grow's weights spanning more than 2^12, the distributed start with missing
peers, and what the new-user sweep (scripts/sweep_bad_inputs.py) found."""

from __future__ import annotations

import socket
import threading
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxtrees as jt
from jaxtrees import cli
from jaxtrees.experiments.run import distributed
from jaxtrees.learners import growth

RNG = np.random.default_rng(0)
X_H = RNG.integers(0, 2, (200, 10))
Y_H = X_H[:, 3] ^ (X_H[:, 5] & X_H[:, 7])
W_H = np.ones(200)
W_H[0] = 1e9  # one heavy example: the others' gains fall below float32's resolution when counted by differences
RULE_H = jt.GrowthRule(max_depth=3, impurity="gini")


# ---------------------------------------------------------------- jt.grow, weights spanning more than 2^12

@pytest.mark.parametrize("scale", [1e-38, 1e-20, 1e-3, 1.0, 1e12, 1e28])
def test_grow_gives_one_tree_for_w_and_s_w_when_the_weights_span_more_than_2_12(scale):
    """Before: the default rule counted by differences and grew a tree erring 0.11 on its own sample, silently."""
    d = jt.from_arrays(X_H, Y_H)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # concrete weights: decided without a warning
        tree = jt.grow(jt.with_weights(d, W_H * scale), RULE_H)
    reference = jt.grow(jt.with_weights(d, W_H), jt.GrowthRule(max_depth=3, impurity="gini", exact_weights=True))
    np.testing.assert_array_equal(tree.feature, reference.feature)
    assert float(jt.sample_error(tree, d)) == 0.0


def test_grow_with_traced_weights_warns_naming_exact_weights():
    d = jt.from_arrays(X_H, Y_H)
    with pytest.warns(growth.WeightCountingWarning, match=r"exact_weights=True"):
        jax.jit(lambda w: jt.grow(jt.with_weights(d, w), RULE_H))(W_H)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a stated choice is not warned about
        exact = jt.GrowthRule(max_depth=3, impurity="gini", exact_weights=True)
        tree = jax.jit(lambda w: jt.grow(jt.with_weights(d, w), exact))(W_H)
        assert float(jt.sample_error(tree, d)) == 0.0
        jax.jit(lambda w: jt.grow(jt.with_weights(d, w), jt.GrowthRule(max_depth=3, exact_weights=False)))(W_H)


def test_weights_within_2_12_and_integer_counts_keep_the_fast_counting():
    d = jt.from_arrays(X_H, Y_H)
    rule = jt.GrowthRule(max_depth=3)
    assert growth.resolve_weights(rule, jnp.asarray(np.linspace(1.0, 4096.0, 200), jnp.float32)).exact_weights is False
    assert growth.resolve_weights(rule, jnp.asarray(np.r_[1.0, 4097.0], jnp.float32)).exact_weights is True
    assert growth.resolve_weights(rule, jnp.arange(200, dtype=jnp.int32)).exact_weights is False
    assert growth.resolve_weights(rule, None).exact_weights is False
    with pytest.raises(ValueError, match="exact_weights must be True, False or None"):
        jt.GrowthRule(max_depth=2, exact_weights="yes")
    counts = jt.grow(jt.with_weights(d, np.full(200, 3)), rule)
    np.testing.assert_array_equal(counts.feature, jt.grow(d, rule).feature)


# ---------------------------------------------------------------- the distributed start (item 3)

def _port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


TINY = ["--quick", "--set", "n=8", "--set", "k=2", "--set", "c=0", "--set", "impurity=entropy", "--set", "m_min=16",
        "--set", "m_max=32", "--set", "replicates=2", "--no-progress"]


def test_process_0_whose_peers_never_come_says_so_in_one_sentence(tmp_path, capsys):
    """Before: after the timeout XLA's client aborted the process (SIGABRT, DEADLINE_EXCEEDED, a C++ stack)."""
    port = _port()
    started = time.monotonic()
    assert cli.main(["run", "juntas", "--out", str(tmp_path), *TINY, "--coordinator", f"localhost:{port}",
                     "--num-processes", "3", "--process-id", "0", "--distributed-timeout", "1"]) == 2
    assert time.monotonic() - started < 30
    err = capsys.readouterr().err
    assert f"process 0: process(es) 1, 2 of 3 did not join at localhost:{port} within 1 s" in err
    assert "--distributed-timeout" in err and err.count("\n") == 2 and err.startswith("process 0: waiting for 2 other")


def test_a_peer_of_another_run_is_refused_by_name():
    """A peer started with another --num-processes: both sides say which, neither hangs nor aborts."""
    port = _port()
    errors = {}

    def peer():
        try:
            distributed._rendezvous(f"localhost:{port}", 3, 1, 10)
        except ValueError as e:
            errors["peer"] = str(e)

    thread = threading.Thread(target=peer)
    thread.start()
    with pytest.raises(ValueError, match="process 1 was started with --num-processes 3, process 0 with 2"):
        distributed._rendezvous(f"localhost:{port}", 2, 0, 10)
    thread.join(30)
    assert "refused it: process 1 was started with --num-processes 3" in errors["peer"]


def test_the_rendezvous_lets_every_process_go_and_the_keeper_stays_until_all_have_left():
    """Process 0 starts the keeper, which serves the rendezvous, then the coordination service on the same port,
    until every process's connection has closed (process 0's death is then a peer's death like any other)."""
    port = _port()
    done = []
    threads = [threading.Thread(target=lambda i=i: done.append(distributed._rendezvous(f"localhost:{port}", 3, i, 20)))
               for i in (2, 1)]
    for t in threads:
        t.start()
    distributed._rendezvous(f"localhost:{port}", 3, 0, 20)
    for t in threads:
        t.join(30)
    assert len(done) == 2 and len(distributed._KEPT) == 3
    keeper = distributed._KEEPER.pop()
    for conn in distributed._KEPT[:2]:
        conn.close()
    time.sleep(0.5)
    assert keeper.poll() is None  # one process still runs: the keeper serves on
    distributed._KEPT.pop().close()
    assert keeper.wait(timeout=20) == 0
    distributed._KEPT.clear()


# ---------------------------------------------------------------- the sweep's findings, public API

KEY = jax.random.key(0)
X6 = np.random.default_rng(1).integers(0, 2, (64, 6))
DATA6 = jt.from_arrays(X6, X6[:, 0] ^ X6[:, 1])
PARITY8 = jt.parity(np.array([0, 7]), 8)


@pytest.mark.parametrize("call, match", [
    (lambda: jt.grow(DATA6, None), "rule must be a jaxtrees.GrowthRule.*got NoneType"),
    (lambda: jt.grow(X6, jt.GrowthRule(max_depth=2)), "data must be a packed jaxtrees Data.*got ndarray"),
    (lambda: jt.grow(DATA6, jt.GrowthRule(max_depth=2, tie_break="random"), 0),
     r"key must be a JAX PRNG key such as jax.random.key\(0\), got int 0"),
    (lambda: jt.draw(0, jnp.full(8, 0.5), PARITY8, 64), "key must be a JAX PRNG key"),
    (lambda: jt.draw(KEY, jnp.full(8, 0.5), PARITY8, 10**13), r"m must be in \[1, 2147483616\]"),
    (lambda: jt.prefix(DATA6, -1), r"m must be in \[0, 64\], got -1"),
    (lambda: jt.prefix(DATA6, 1000), r"m must be in \[0, 64\], got 1000"),
    (lambda: jt.support_mask(PARITY8, 4), "reads variable 7"),
    (lambda: jt.truncate(jt.grow(DATA6, jt.GrowthRule(max_depth=2)), -1), r"depth_limit must be in \[0, inf\]"),
    (lambda: jt.predict(jt.grow(DATA6, jt.GrowthRule(max_depth=2)), jnp.zeros(1, bool)),
     r"x must hold n > 1 features .*got shape \(1,\)"),
    (lambda: jt.smoothed(c=0.1).marginals(KEY, 0), r"n must be in \[1, inf\]"),
    (lambda: jt.uniform().marginals(KEY, 2.5), "n must be an integer, got 2.5"),
])
def test_public_calls_the_sweep_found_wrong_are_one_sentence(call, match):
    """Before: raw TypeErrors from jax (an int key, a float n), an OverflowError (m = 10^13), or a quiet result (a
    prefix clamped, a support mask or prediction of too few features, a negative truncation, an empty p)."""
    with pytest.raises(ValueError, match=match):
        call()


def test_valid_calls_next_to_those_checks_still_work():
    tree = jt.grow(DATA6, jt.GrowthRule(max_depth=2, tie_break="random"), jax.random.PRNGKey(0))  # a legacy key
    assert int(jt.prefix(DATA6, jnp.int32(10)).m) == 10 and int(jt.prefix(DATA6, 0).m) == 0
    assert int(jax.jit(lambda m: jt.prefix(DATA6, m).m)(10)) == 10
    assert int(jt.support_mask(PARITY8, 8).sum()) == 2
    assert jt.predict(tree, jnp.zeros((3, 6), bool)).shape == (3,)
    assert jax.jit(jt.predict)(tree, jnp.zeros((3, 6), bool)).shape == (3,)


def test_a_traced_product_p_out_of_range_gives_nan_marginals():
    marginals = jax.jit(lambda q: jt.product(jnp.full(4, q)).marginals(KEY, 4))
    assert np.isnan(marginals(1.5)).all()  # before: p = 1.5 came back as the marginals
    np.testing.assert_array_equal(marginals(0.25), np.full(4, 0.25, np.float32))


def test_low_degree_classifier_names_coef_threshold_not_threshold():
    """Before: "threshold must be in [0, 1)", the name of the estimator's other parameter (the binarization)."""
    with pytest.raises(ValueError, match=r"coef_threshold must be in \[0, 1\), got 1.5"):
        jt.LowDegreeClassifier(coef_threshold=1.5).fit(X6, X6[:, 0])


def test_a_learner_given_no_data_and_a_spectrum_of_too_few_variables_are_refused():
    """Before: AttributeError ('str' object has no attribute 'X'), and the spectrum of x0 x7 over n = 4 dropped x7."""
    with pytest.raises(ValueError, match="data must be a packed jaxtrees Data.*got str"):
        jt.GreedyTree(jt.GrowthRule(max_depth=2)).fit(KEY, "data")
    with pytest.raises(ValueError, match="reads variable 7"):
        jt.fourier.spectrum(PARITY8, 4)
    assert jt.fourier.spectrum(PARITY8, 8).masks.shape[0] >= 1


def test_best_first_trees_count_wide_weights_exactly_too():
    d = jt.from_arrays(X_H, Y_H)
    learner = jt.BestFirstTree(jt.GrowthRule(max_depth=3, impurity="gini"), max_leaves=8)
    tree = learner.fit(KEY, jt.with_weights(d, W_H))
    assert float(jt.sample_error(tree, d)) == 0.0  # before: 0.11, the light examples rounded away


def test_a_tree_grown_on_flagged_weights_scores_nan_on_any_data():
    """Round four flagged traced negative weights (NaN weights, m = 0), but the root-only tree grown on them still
    scored a plausible error on other data (0.52 on an unweighted sample); now its errors are NaN everywhere."""
    f = jt.parity(np.array([0, 1]), 6)
    d = jt.draw(KEY, jnp.full(6, 0.5), f, 64)
    fit = jax.jit(lambda w: jt.grow(jt.with_weights(d, w), jt.GrowthRule(max_depth=2, exact_weights=False)))
    bad, good = fit(-jnp.ones(64)), fit(jnp.ones(64))
    assert np.isnan(float(jt.sample_error(bad, d))) and np.isnan(float(jt.exact_error(bad, jnp.full(6, 0.5), f)))
    assert np.isnan(float(bad.exact_error(jnp.full(6, 0.5), f)))
    assert float(jt.sample_error(good, d)) == 0.0 and float(jt.exact_error(good, jnp.full(6, 0.5), f)) == 0.0
