"""The learner conformance suite: every registered learner (``jaxtrees.learners.names()``) passes the
checks of :mod:`jaxtrees.learners.conformance`, with no per-learner code here; registering a learner adds
it. The checks are the library's (``jt.learners.check`` runs them on any learner, a user's included):

- ``jax.vmap(learner.fit)`` over a batch equals a loop of single fits;
- the same key gives the same hypothesis; a batch fitted in chunks of any size equals one batch;
- degenerate data (m = 1, all labels equal, all weight on one example, n = 1; for population
  learners, marginals at 0 and 1 and a constant target; for query learners, a constant target
  and n = 1) gives a valid hypothesis;
- bad input (wrong shapes, negative or NaN weights, m = 0, marginals outside [0, 1]) raises a
  ValueError naming the parameter;
- the hypothesis predicts packed and plain inputs alike, and an exact error, where the
  hypothesis has one, lies in [0, 1] and matches its error on a large test sample.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import pytest

import jaxtrees as jt
from jaxtrees import learners
from jaxtrees.learners import conformance

NAMES = learners.names()


@functools.lru_cache(maxsize=None)
def fits(name):
    """The checks' shared fits of the learner ``name``, made once per process: a new ``jax.jit`` of
    ``learner.fit`` compiles again, so every test of the same learner shares them."""
    return conformance.prepare(name)


def test_registry_lists_the_ported_learners():
    assert {"id3-entropy", "id3-gini", "id3-kearns_mansour", "population-entropy", "sgd", "stump-error"} <= set(NAMES)
    for name in NAMES:
        conformance.protocol(fits(name))
        assert hash(learners.get(name)) == hash(fits(name).learner) and learners.get(name) == fits(name).learner


@pytest.mark.parametrize("name", NAMES)
def test_vmap_equals_loop_of_single_fits(name):
    conformance.vmap_equals_loop(fits(name))


@pytest.mark.parametrize("name", NAMES)
def test_same_key_same_hypothesis_and_chunking_does_not_matter(name):
    conformance.same_key_same_hypothesis(fits(name))
    conformance.chunk_invariance(fits(name))


@pytest.mark.parametrize("name", NAMES)
def test_hypothesis_is_valid_and_exact_error_matches_a_test_sample(name):
    conformance.valid_hypothesis(fits(name))


@pytest.mark.parametrize("name", NAMES)
def test_degenerate_data_gives_a_valid_hypothesis(name):
    conformance.degenerate_data(fits(name))


@pytest.mark.parametrize("name", NAMES)
def test_bad_input_raises_a_clear_error(name):
    conformance.bad_input(fits(name))
    if fits(name).learner.access == "query":  # a Queries with n < 1 cannot be built
        with pytest.raises(ValueError, match="n must be"):
            jt.problems.Queries(jt.parity([0], conformance.N), 0)


@dataclasses.dataclass(frozen=True)
class Unchecked:
    """ID3 that drops the data's weights instead of checking them: its fit never calls check_data on them."""

    tree: learners.GreedyTree = learners.GreedyTree(learners.GrowthRule(max_depth=3, impurity="gini"))
    access = "sample"

    def fit(self, key, data):
        return self.tree.fit(key, data._replace(weight=None))


def test_check_passes_on_a_registered_learner():
    summary = learners.check("id3-gini")
    assert list(summary) == list(conformance.CHECKS) and all(summary.values())


def test_check_names_the_failing_check_of_a_learner_that_skips_check_data():
    with pytest.raises(conformance.ConformanceError, match=r"fails 1 of 7 conformance checks \(bad input\)") as error:
        learners.check(Unchecked())
    assert list(error.value.failures) == ["bad input"]
    assert "a negative weight raised nothing" in error.value.failures["bad input"]
