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


TINY = ["--quick", "--set", "n=8", "--set", "k=2", "--set", "c=0", "--set", "m_min=16", "--set", "m_max=32",
        "--set", "replicates=2", "--no-progress"]


def test_process_0_whose_peers_never_come_says_so_in_one_sentence(tmp_path, capsys):
    """Before: after the timeout XLA's client aborted the process (SIGABRT, DEADLINE_EXCEEDED, a C++ stack)."""
    port = _port()
    started = time.monotonic()
    assert cli.main(["run", "juntas", "--out", str(tmp_path), *TINY, "--coordinator", f"localhost:{port}",
                     "--num-processes", "3", "--process-id", "0", "--distributed-timeout", "1"]) == 2
    assert time.monotonic() - started < 30
    err = capsys.readouterr().err
    assert f"process 0: process(es) 1, 2 of 3 did not join at localhost:{port} within 1 s" in err
    assert "--distributed-timeout" in err and err.count("\n") == 1


def test_a_peer_of_another_run_is_refused_by_name():
    """A peer started with another --num-processes: both sides say which, neither hangs nor aborts."""
    port = _port()
    errors = {}

    def peer():
        try:
            cli._rendezvous(f"localhost:{port}", 3, 1, 10)
        except ValueError as e:
            errors["peer"] = str(e)

    thread = threading.Thread(target=peer)
    thread.start()
    with pytest.raises(ValueError, match="process 1 was started with --num-processes 3, process 0 with 2"):
        cli._rendezvous(f"localhost:{port}", 2, 0, 10)
    thread.join(30)
    assert "refused it: process 1 was started with --num-processes 3" in errors["peer"]


def test_the_rendezvous_lets_every_process_go_and_frees_the_port():
    port = _port()
    done = []
    threads = [threading.Thread(target=lambda i=i: done.append(cli._rendezvous(f"localhost:{port}", 3, i, 20)))
               for i in (2, 1)]
    for t in threads:
        t.start()
    cli._rendezvous(f"localhost:{port}", 3, 0, 20)
    for t in threads:
        t.join(30)
    assert len(done) == 2
    with socket.create_server(("", port)):  # the coordination service can bind it next
        pass
