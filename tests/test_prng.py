"""``jaxtrees.core.prng`` draws the very words ``jax.random`` draws, and falls back to it otherwise.

Equality is bitwise (uint32 words, float32 uniforms, Bernoulli booleans), over shapes of rank
0..3 including empty ones, typed and legacy keys, jit, vmap over keys and nested vmap; keys of
other implementations and ``jax_threefry_partitionable=False`` take ``jax.random`` itself.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxtrees.core import prng

SHAPES = [(), (0,), (1,), (7,), (3, 5), (2, 3, 4), (1000, 33), (4, 0, 2)]


@pytest.mark.parametrize("shape", SHAPES)
def test_bits_uniform_bernoulli_equal_jax_random(shape):
    key = jax.random.key(3)
    np.testing.assert_array_equal(prng.bits(key, shape), jax.random.bits(key, shape, jnp.uint32))
    np.testing.assert_array_equal(prng.uniform(key, shape), jax.random.uniform(key, shape))
    p = jnp.float32(0.3)
    np.testing.assert_array_equal(prng.bernoulli(key, p, shape), jax.random.bernoulli(key, p, shape))


@settings(max_examples=10, deadline=None, derandomize=True, database=None)
@given(seed=st.integers(0, 2**32 - 1), shape=st.lists(st.integers(1, 9), min_size=1, max_size=3))
def test_bits_equal_for_any_seed(seed, shape):
    key = jax.random.key(seed)
    np.testing.assert_array_equal(prng.bits(key, shape), jax.random.bits(key, shape, jnp.uint32))


def test_words_at_is_the_flat_index():
    key = jax.random.key(11)
    full = np.asarray(prng.bits(key, (6, 7))).ravel()
    index = jnp.array([[41, 0], [5, 17]], jnp.uint32)
    np.testing.assert_array_equal(prng.words_at(key, index), full[np.asarray(index)])


def test_pair_at_is_both_words_of_the_hash():
    """pair_at's two words xor to words_at's word, and are the hash's two outputs."""
    key = jax.random.key(11)
    index = jnp.array([[41, 0], [5, 17]], jnp.uint32)
    x0, x1 = prng.pair_at(key, index)
    np.testing.assert_array_equal(np.asarray(x0) ^ np.asarray(x1), prng.words_at(key, index))
    k0, k1 = np.asarray(jax.random.key_data(key))
    w0, w1 = prng.threefry2x32(k0, k1, np.uint32(0), index)
    np.testing.assert_array_equal(x0, w0)
    np.testing.assert_array_equal(x1, w1)
    assert not np.array_equal(x0, x1)
    with pytest.raises(TypeError, match="threefry"):
        prng.pair_at(jax.random.key(0, impl="rbg"), index)


def test_uniform_at_is_uniform_at_the_flat_index():
    key = jax.random.key(12)
    full = np.asarray(prng.uniform(key, (6, 7))).ravel()
    index = jnp.array([[41, 0, 3], [5, 17, 40]], jnp.uint32)
    np.testing.assert_array_equal(prng.uniform_at(key, index), full[np.asarray(index)])


@pytest.mark.parametrize("key", [jax.random.key(5), jax.random.PRNGKey(5)], ids=["typed", "legacy"])
def test_fold_in_equals_jax_random(key):
    data = lambda k: jax.random.key_data(k) if jnp.issubdtype(k.dtype, jax.dtypes.prng_key) else k  # noqa: E731
    for t in (0, 1, 77, 2**31 - 1):
        np.testing.assert_array_equal(data(prng.fold_in(key, t)), data(jax.random.fold_in(key, t)))
    np.testing.assert_array_equal(data(prng.fold_in(key, jnp.uint32(2**32 - 1))),
                                  data(jax.random.fold_in(key, jnp.uint32(2**32 - 1))))
    keys = jax.random.split(jax.random.key(1), 4)
    steps = jnp.arange(4, dtype=jnp.int32)
    ours = jax.jit(jax.vmap(lambda k, t: jax.random.key_data(prng.fold_in(k, t))))(keys, steps)
    theirs = jax.vmap(lambda k, t: jax.random.key_data(jax.random.fold_in(k, t)))(keys, steps)
    np.testing.assert_array_equal(ours, theirs)
    rbg = jax.random.key(5, impl="rbg")  # other implementations: jax.random itself
    np.testing.assert_array_equal(jax.random.key_data(prng.fold_in(rbg, 3)),
                                  jax.random.key_data(jax.random.fold_in(rbg, 3)))


@pytest.mark.parametrize("key", [jax.random.key(5), jax.random.PRNGKey(5)], ids=["typed", "legacy"])
def test_split_equals_jax_random(key):
    data = lambda k: jax.random.key_data(k) if jnp.issubdtype(k.dtype, jax.dtypes.prng_key) else k  # noqa: E731
    for num in (0, 1, 2, 3, 100):
        np.testing.assert_array_equal(data(prng.split(key, num)), data(jax.random.split(key, num)))
    np.testing.assert_array_equal(data(prng.split(key)), data(jax.random.split(key)))
    keys = jax.random.split(jax.random.key(1), 4)
    ours = jax.jit(jax.vmap(lambda k: jax.random.key_data(prng.split(k, 5))))(keys)
    np.testing.assert_array_equal(ours, jax.vmap(lambda k: jax.random.key_data(jax.random.split(k, 5)))(keys))
    rbg = jax.random.key(5, impl="rbg")  # other implementations: jax.random itself
    np.testing.assert_array_equal(jax.random.key_data(prng.split(rbg, 3)),
                                  jax.random.key_data(jax.random.split(rbg, 3)))
    with jax.threefry_partitionable(False):
        np.testing.assert_array_equal(data(prng.split(key, 3)), data(jax.random.split(key, 3)))


def test_jit_vmap_and_nested_vmap():
    keys = jax.random.split(jax.random.key(0), 6)
    ours = jax.jit(jax.vmap(lambda k: prng.uniform(k, (4, 9))))(keys)
    theirs = jax.vmap(lambda k: jax.random.uniform(k, (4, 9)))(keys)
    np.testing.assert_array_equal(ours, theirs)
    grid = keys.reshape(2, 3)
    ours = jax.vmap(jax.vmap(lambda k: prng.bits(k, (5,))))(grid)
    theirs = jax.vmap(jax.vmap(lambda k: jax.random.bits(k, (5,), jnp.uint32)))(grid)
    np.testing.assert_array_equal(ours, theirs)
    p = jnp.linspace(0.0, 1.0, 6)  # batched probabilities
    ours = jax.vmap(lambda k, q: prng.bernoulli(k, q, (50,)))(keys, p)
    theirs = jax.vmap(lambda k, q: jax.random.bernoulli(k, q, (50,)))(keys, p)
    np.testing.assert_array_equal(ours, theirs)


def test_legacy_uint32_keys():
    key = jax.random.PRNGKey(5)
    assert prng.fusible(key)
    np.testing.assert_array_equal(prng.bits(key, (10,)), jax.random.bits(key, (10,), jnp.uint32))
    keys = jax.vmap(jax.random.PRNGKey)(jnp.arange(3))
    np.testing.assert_array_equal(jax.vmap(lambda k: prng.bits(k, (4,)))(keys),
                                  jax.vmap(lambda k: jax.random.bits(k, (4,), jnp.uint32))(keys))


@pytest.mark.parametrize("impl", ["rbg", "unsafe_rbg"])
def test_other_implementations_use_jax_random(impl):
    key = jax.random.key(1, impl=impl)
    assert not prng.fusible(key)
    np.testing.assert_array_equal(prng.bits(key, (10,)), jax.random.bits(key, (10,), jnp.uint32))
    np.testing.assert_array_equal(prng.uniform(key, (3, 3)), jax.random.uniform(key, (3, 3)))
    with pytest.raises(TypeError, match="threefry"):
        prng.words_at(key, jnp.arange(3, dtype=jnp.uint32))


def test_non_partitionable_threefry_uses_jax_random():
    key = jax.random.key(2)
    with jax.threefry_partitionable(False):
        assert not prng.fusible(key)
        np.testing.assert_array_equal(jax.jit(lambda k: prng.bits(k, (9,)))(key),
                                      jax.random.bits(key, (9,), jnp.uint32))


def test_threefry2x32_known_answer():
    """Random123's published Threefry-2x32-20 test vectors (kat_vectors)."""
    x = prng.threefry2x32(np.uint32(0), np.uint32(0), np.uint32(0), np.uint32(0))
    assert [int(v) for v in x] == [0x6B200159, 0x99BA4EFE]
    ff = np.uint32(0xFFFFFFFF)
    x = prng.threefry2x32(ff, ff, ff, ff)
    assert [int(v) for v in x] == [0x1CB996FC, 0xBB002BE7]
    x = prng.threefry2x32(np.uint32(0x13198A2E), np.uint32(0x03707344),  # key, then counter
                          np.uint32(0x243F6A88), np.uint32(0x85A308D3))
    assert [int(v) for v in x] == [0xC4923A9C, 0x483DF7A0]


def test_batched_key_is_refused_like_jax_random():
    keys = jax.random.split(jax.random.key(0), 3)
    assert not prng.fusible(keys)
    with pytest.raises(ValueError):
        jax.random.bits(keys, (3,), jnp.uint32)
    with pytest.raises(ValueError):
        prng.bits(keys, (3,))
