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
