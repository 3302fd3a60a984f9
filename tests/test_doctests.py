"""The examples in the jaxtrees docstrings run and print what they claim.

Every module of the package and of its subpackages is found with pkgutil (so a renamed or new
module is covered without editing this list); the core modules must have examples.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import jaxtrees

MODULES = ["jaxtrees"] + sorted(m.name for m in pkgutil.walk_packages(jaxtrees.__path__, "jaxtrees."))
WITH_EXAMPLES = {"jaxtrees", "jaxtrees.core.bits", "jaxtrees.core.distributions", "jaxtrees.core.sampling",
                 "jaxtrees.core.impurity", "jaxtrees.targets", "jaxtrees.targets.base", "jaxtrees.targets.juntas",
                 "jaxtrees.targets.trees", "jaxtrees.targets.addressing", "jaxtrees.targets.agnostic",
                 "jaxtrees.hypotheses.base", "jaxtrees.hypotheses.tree", "jaxtrees.problems", "jaxtrees.learners",
                 "jaxtrees.learners.base", "jaxtrees.learners.growth", "jaxtrees.learners.greedy",
                 "jaxtrees.learners.population", "jaxtrees.learners.stumps", "jaxtrees.learners.sgd",
                 "jaxtrees.sklearn", "jaxtrees.experiments.report.summary", "jaxtrees.experiments.studies",
                 "jaxtrees.datasets", "jaxtrees.experiments.report.survival",
                 "jaxtrees.experiments.report.compare_rates", "jaxtrees.experiments.report.figure_spec"}


def test_core_modules_found():
    assert WITH_EXAMPLES <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, verbose=False, report=True)
    assert result.failed == 0, f"{result.failed} of {result.attempted} doctest examples failed in {name}"
    if name in WITH_EXAMPLES:
        assert result.attempted > 0, f"no doctest examples found in {name}"
