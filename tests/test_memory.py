"""One process survives any number of compiled programs (issue 39).

Each program XLA:CPU compiles stays mapped (about 3 memory maps per kernel, several MB) while a jit
cache holds it; a module-level ``jax.jit`` holds one per shape for the life of the process. Here
one process compiles many distinct programs and ``programs.release_if_crowded`` keeps its maps under
a bound and its resident memory from growing with the number of programs.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import helpers
import jaxtrees as jt
from jaxtrees.core import programs

pytestmark = pytest.mark.skipif(programs.map_count() is None, reason="needs /proc (Linux)")


@jax.jit
def small(x):  # one program per shape of x
    return jnp.sin(x) * 2 + 1, x.sum()


def compile_many(make, count, budget):
    """Compile ``count`` distinct programs (``make(i)``), releasing past ``budget`` maps above the
    start; returns (maps after each program, resident bytes after each, releases)."""
    programs.release()
    start = programs.map_count()
    maps, resident, releases = [], [], 0
    for i in range(count):
        jax.block_until_ready(make(i))
        maps.append(programs.map_count() - start)
        resident.append(programs.resident_bytes())
        releases += programs.release_if_crowded(start + budget)
    return np.array(maps), np.array(resident), releases


def test_programs_cost_maps_and_release_returns_them():
    """A live module-level jit keeps its programs mapped; ``release`` unmaps them and the heap
    they used is reused by the next ones."""
    programs.release()
    start, rss_start = programs.map_count(), programs.resident_bytes()
    for i in range(30):
        jax.block_until_ready(small(np.ones(i + 1, np.float32)))
    grown, rss_grown = programs.map_count() - start, programs.resident_bytes() - rss_start
    assert grown >= 30 * 3, f"30 programs added only {grown} maps"  # at least code, constants, data each
    programs.release()
    assert programs.map_count() - start < grown / 4, "release() left the programs mapped"
    for i in range(30):
        jax.block_until_ready(small(np.ones(i + 1, np.float32)))
    programs.release()
    # The second 30 programs reuse the first ones' heap: resident memory grows far less than 2x.
    assert programs.resident_bytes() - rss_start < 1.5 * max(rss_grown, 16 << 20)


def test_many_programs_stay_bounded():
    """100 distinct programs under a budget of 250 maps: several releases, the maps never exceed
    the budget by more than one program, and resident memory stops growing after the first cycle."""
    maps, resident, releases = compile_many(lambda i: small(np.ones(i + 1, np.float32)), 100, budget=250)
    per_program = maps[:10].max() / 10
    assert releases >= 2
    assert maps.max() <= 250 + 4 * per_program + 32, (maps.max(), per_program)
    first_cycle = resident[: int(np.argmax(maps)) + 1].max()
    assert resident.max() <= first_cycle + (64 << 20), (resident.max() >> 20, first_cycle >> 20)


@pytest.mark.slow
def test_many_grow_programs_stay_bounded():
    """150 distinct ``grow`` programs (the suite's heavy compiles; ~150 maps each, so about
    22,000 maps kept without releases) under a budget of 3,000 maps."""
    rng = np.random.default_rng(0)
    rule = jt.GrowthRule(max_depth=3)
    jit_grow = jax.jit(jt.grow)

    def make(i):
        m, n = 32 * (1 + i // 5), 3 + i % 5
        X, y = rng.integers(0, 2, (m, n)).astype(np.int8), rng.integers(0, 2, m).astype(np.int8)
        return jit_grow(helpers.np_sample(X, y), rule)

    maps, resident, releases = compile_many(make, 150, budget=3000)
    per_program = maps[:5].max() / 5
    assert per_program > 50, per_program  # the cost this guards against
    assert releases >= 5
    assert maps.max() <= 3000 + 2 * per_program + 64, (maps.max(), per_program)
    first_cycle = resident[: int(np.argmax(maps)) + 1].max()
    assert resident.max() <= first_cycle + (128 << 20), (resident.max() >> 20, first_cycle >> 20)
