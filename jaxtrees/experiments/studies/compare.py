"""The ``compare`` study: every registered learner on the same trials (the comparison atlas).

A cell is (learner, family, k, n, c); the learner is *shared* (:attr:`Study.shared`), so trial r of
every learner in a cell sees the same distribution, target and sample (common random numbers), each
learner as the registry sizes it for the cell (:func:`size`). Targets, scoring and outputs:
docs/studies.md; the figures and report: :mod:`~jaxtrees.experiments.studies.compare_report`.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from jaxtrees import learners, targets
from jaxtrees.core import checks, distributions, sampling
from jaxtrees.core import impurity as impurity_lib
from jaxtrees.experiments.report import summary
from jaxtrees.experiments import table as tables
from jaxtrees.experiments.study import Compile, Study
from jaxtrees.experiments.studies.common import chosen
from jaxtrees.experiments.study.trials import (PRECISION_BITS, SUCCESS_TOL, check_sample_grid, on_prefixes,
                                               sample_sizes, trial_keys)
from jaxtrees.experiments.studies.compare_report import plot, report
from jaxtrees.hypotheses.base import sample_error
from jaxtrees.hypotheses.polynomial import n_subsets
from jaxtrees.learners import greedy
from jaxtrees.learners.fourier import MAX_GRAM_SETS
from jaxtrees.problems import Population, Queries

FAMILIES = ("parity", "junta", "tree", "rank", "addressing")
#: The spine length of the rank-k targets.
RANK_LENGTH = 2


#: Families whose targets are juntas (a parity as a junta, :func:`~jaxtrees.targets.as_junta`): one
#: program serves them (:attr:`Study.buckets`).
JUNTAS = ("parity", "junta")


def target(family: str, key, n: int, k: int):
    """The cell's target; ``n`` and ``k`` are static. Parities and juntas come as :class:`~jaxtrees.targets.Junta`."""
    if family == "parity":
        return targets.as_junta(targets.random_parity(key, n, k))
    if family == "junta":
        return targets.random_junta(key, n, k)
    if family == "tree":
        return targets.random_tree(key, n, k)
    if family == "rank":
        return targets.random_rank_tree(key, n, k, RANK_LENGTH)
    return targets.addressing(1, k)


#: The ID3 learners that differ only in their impurity (``id3-<impurity>``) ...
ID3_BY_IMPURITY = {f"id3-{name}": name for name in impurity_lib.NAMES if f"id3-{name}" in learners.names()}
#: ... and the stumps, ID3 at depth 1: one branch of the program serves them all, the impurity and the depth
#: chosen by the learner's traced index (:func:`~jaxtrees.core.impurity.selected`, ``grow``'s traced depth).
STUMPS = {name: name.removeprefix("stump-") for name in learners.names() if name.startswith("stump-")}
#: Every learner of the "id3" branch, and its impurity.
GREEDY_BY_IMPURITY = {**ID3_BY_IMPURITY, **STUMPS}


def learner_unit(name: str) -> str:
    """The branch a learner runs in: ``"id3"`` for :data:`GREEDY_BY_IMPURITY`, else its own. The learners of
    a program (:func:`learner_program`) run in it as a ``lax.switch`` on the learner's traced index over
    their branches (one program's sampling, scoring and trial loop instead of one per learner: docs/benchmarks.md)."""
    return "id3" if name in GREEDY_BY_IMPURITY else name


#: The learners' programs (trees; boosting and bagging; the forest and the rank learners; Fourier, queries and
#: SGD), compiled side by side (compile workers), each a ``lax.switch`` over its learners' branches, of about equal
#: compile seconds on the CPU (docs/benchmarks.md, "Issue 56, quick sizes and program splits": the same rows as one
#: program). A learner named in none runs in the last.
PROGRAMS = (
    ("id3-entropy", "id3-error", "id3-gini", "id3-kearns_mansour", "id3-random-ties", "stump-error", "stump-gini",
     "best-first-gini", "population-entropy"),
    ("adaboost-cart", "adaboost-parities-2", "adaboost-stumps", "bagging-majority"),
    ("random-forest", "find-k", "findmin"),
    ("lmn-k", "lmn-k-biased", "sparse-k", "km", "parities-k", "sgd"),
)


def learner_program(name: str) -> int:
    """The index in :data:`PROGRAMS` of the program that runs learner ``name``."""
    return next((i for i, names in enumerate(PROGRAMS) if name in names), len(PROGRAMS) - 1)


#: The study's learners: every registered one.
LEARNERS = learners.names()


def size(n: int, k: int, params: dict, m: int | None = None) -> learners.Size:
    """The registry's :class:`~jaxtrees.learners.Size` of a cell (``m``: the examples, default m_max;
    KM's grid point sets its query budget)."""
    return learners.Size(n=n, k=k, m=params["m_max"] if m is None else m, depth=params["depth"],
                         rounds=params["rounds"], theta=params["theta"], l1=params["l1"], max_rank=params["max_rank"],
                         max_calls=params["max_calls"], width=params["width"], lr=params["lr"], steps=params["sgd_steps"])


def configured(name: str, n: int, k: int, params: dict, m: int | None = None):
    """The learner ``name`` as the registry sizes it for a cell of size (n, k) (``m``: KM's grid point)."""
    return learners.get(name, size(n, k, params, m))


def settings(name: str, n: int, k: int, params: dict) -> str:
    """What learner ``name`` runs in a cell of size (n, k) with ``params``: its configuration (at the
    smallest and largest m for km, whose query budget follows m)."""
    if name == "sgd":
        return (f"MLP of width {params['width']}, hinge loss, optax.sgd at learning rate {params['lr']}, "
                f"{params['sgd_steps']} steps in batches of 32 on the sample")
    if name == "km":
        grid = sample_sizes(params)
        return "; ".join(f"m = {m}: {configured(name, n, k, params, m)!r}" for m in (grid[0], grid[-1]))
    return repr(configured(name, n, k, params))


def _settings_table(rows) -> str:
    """Markdown: each learner's settings in each (k, n) and learner parameters of the rows."""
    names = [name for name in COMPARE.full if name in rows and name not in ("family", "c")]
    table = {}
    for combo in tables.cells(rows, names):  # sorted column by column
        params = dict(zip(names, combo))
        key = (params["learner"], settings(params["learner"], params["n"], params["k"], params))
        table.setdefault(key, []).append(f"k = {params['k']}, n = {params['n']}")
    return summary.markdown_table(["learner", "cells", "settings"],
                                  [[name, "; ".join(cells), f"`{text}`"] for (name, text), cells in table.items()])


def _trial(key, params):
    """every registered learner on the same trials: k-parities, k-juntas, depth-k trees, rank-k trees, addressing;
    uniform and c-smoothed; success vs m, a learnability map, per-learner cost"""
    n, k = params["n"], params["k"]
    options = params.get("learner_choices", (params["learner"],))
    keys = trial_keys(key, "distribution", "target", "sample")
    p = sampling.quantize(distributions.Smoothed(jnp.float32(0.5), params["c"]).marginals(keys["distribution"], n),
                          PRECISION_BITS)
    f = chosen(params, "family", lambda family: target(family, keys["target"], n, k))
    ks = keys["sample"]
    sample = sampling.draw(ks, p, f, params["m_max"], precision_bits=PRECISION_BITS)
    test = sampling.draw(jax.random.fold_in(ks, 1), p, f, params["test_m"], precision_bits=PRECISION_BITS)
    fit_key = jax.random.fold_in(ks, 2)
    grid = sample_sizes(params)

    def run(unit):
        """The outputs of the learners of ``unit`` (:func:`learner_unit`) on this trial."""
        exact = []  # whether the hypotheses have an exact error (a class attribute, known when tracing)

        def score(h):
            exact.append(bool(h.exact))
            error = h.exact_error(p, f) if h.exact else sample_error(h, test)
            return error, error <= SUCCESS_TOL if h.exact else error == 0.0

        greedy_options = [o for o in options if o in GREEDY_BY_IMPURITY]
        name = greedy_options[0] if unit == "id3" else unit
        if unit == "km":  # KM at m: the first m triples per level of KM at m_max, one compiled fit for the grid
            km = configured(name, n, k, params, grid[-1])
            error, success = jax.lax.map(lambda m: score(km.fit_triples(fit_key, Queries(f, n), m)), jnp.asarray(grid))
            examples = jnp.asarray([configured(name, n, k, params, m).queries(n) for m in grid])
        elif unit == "population-entropy":  # no sample: the infinite-sample tree, the same at every m
            error, success = score(configured(name, n, k, params).fit(fit_key, Population(p, f)))
            error, success = jnp.full((len(grid),), error), jnp.full((len(grid),), success)
            examples = jnp.full((len(grid),), -1)
        elif unit == "id3" and len(greedy_options) > 1:  # impurity and depth by the learner's traced index
            rule = configured(next((o for o in greedy_options if o in ID3_BY_IMPURITY), name), n, k, params).rule
            at = lambda values: jnp.asarray(values, jnp.int32)[params["learner"]]  # noqa: E731
            chosen_impurity = impurity_lib.selected(
                at([greedy_options.index(o) if o in GREEDY_BY_IMPURITY else 0 for o in options]),
                tuple(GREEDY_BY_IMPURITY[o] for o in greedy_options))
            depth = at([1 if o in STUMPS else rule.max_depth for o in options])
            error, success = on_prefixes(
                lambda data: score(greedy.grow(data, rule, fit_key, depth=depth, impurity=chosen_impurity)), sample, grid)
            examples = jnp.asarray(grid)
        else:
            learner = configured(name, n, k, params)
            error, success = on_prefixes(lambda data: score(learner.fit(fit_key, data)), sample, grid)
            examples = jnp.asarray(grid)
        return {"error": error, "success": success, "examples": examples.astype(jnp.int32),
                "exact": jnp.full((len(grid),), exact[0])}

    units = list(dict.fromkeys(map(learner_unit, options)))
    if len(units) == 1:
        return run(units[0])
    branch = jnp.asarray([units.index(learner_unit(o)) for o in options], jnp.int32)[params["learner"]]
    return jax.lax.switch(branch, [lambda unit=unit: run(unit) for unit in units])


def _working_set(params) -> int:
    """Bytes a trial sweeps round after round: the weighted learners (AdaBoost, bagging, forests)
    unpack the sample into float32 rows, about n + 8 of them (features, weights, labels, margins,
    votes), of m_max slots each. At the full size (n = 17, m_max = 16384: 1.6 MiB) a CPU then runs
    2 trials per vmapped group instead of 32: 64 trials of every learner at k = 3 on parities,
    c = 0.1, took 58 s instead of 125 s on the 2-core CPU, no learner slower."""
    return 4 * (params["n"] + 8) * params["m_max"]


def _check(params):
    name = checks.choice("learner", params["learner"], learners.names())
    family = checks.choice("family", params["family"], FAMILIES)
    n = checks.integer("n", params["n"], low=2, high=64)
    k = checks.integer("k", params["k"], low=1, high=min(n, 4))
    if family == "addressing" and n < k * k + 2**k:
        raise ValueError(f"n must be >= k^2 + 2^k = {k * k + 2 ** k} for f_(1,k) addressing with k = {k}, got {n}")
    if family == "rank" and k * RANK_LENGTH > n:
        raise ValueError(f"k must be <= n / {RANK_LENGTH} for rank-k trees (depth {RANK_LENGTH} k), got {k}")
    checks.real("c", params["c"], low=0.0, high=0.5, high_open=True)
    checks.integer("depth", params["depth"], low=1, high=min(n, 10))
    checks.integer("rounds", params["rounds"], low=1, high=1000)
    checks.integer("max_rank", params["max_rank"], low=1, high=n)
    checks.integer("max_calls", params["max_calls"], low=1, high=2**30)
    checks.real("theta", params["theta"], low=0.0, high=1.0, low_open=True, high_open=True)
    checks.real("l1", params["l1"], low=0.0)
    checks.integer("width", params["width"], low=1, high=4096)
    checks.integer("sgd_steps", params["sgd_steps"], low=1, high=10**6)
    checks.real("lr", params["lr"], low=0.0, high=100.0, low_open=True)
    checks.integer("test_m", params["test_m"], low=32, high=2**20)
    check_sample_grid({**params, "impurity": "entropy"}, n)
    if name in ("lmn-k", "lmn-k-biased", "sparse-k") and n_subsets(n, k) > MAX_GRAM_SETS:
        raise ValueError(f"k must keep the degree-k sets over n = {n} at most {MAX_GRAM_SETS} for {name}, got k = {k}")

def _report(rows):
    return report(rows, _settings_table(rows))


COLUMNS = {
    "m": "training examples: the first m of the trial's sample (the same sample for every learner of the cell)",
    "error": "the hypothesis's error: exact (exact = 1) or on test_m fresh examples (exact = 0)",
    "success": "1 if error <= 1e-6 (exact) or error = 0 (test sample)",
    "examples": "labelled examples used: m; km: membership queries (2n + 1) m; population-entropy: -1 (the distribution)",
    "exact": "1 if the error is exact (from the target's oracle), 0 if measured on the test sample",
}

SHARED = {"depth": 4, "rounds": 32, "max_rank": 3, "max_calls": 2**18, "theta": 0.1, "l1": 0.05, "width": 64,
          "sgd_steps": 400, "lr": 0.05, "m_min": 16}

COMPARE = Study(
    name="compare",
    trial=_trial,
    grid=({"learner": LEARNERS, "family": ["parity", "junta"], "k": 2, "n": 8, "c": [0.0, 0.2],
           "test_m": 2048, "m_max": 1024, **SHARED},
          {"learner": LEARNERS, "family": list(FAMILIES), "k": [2, 3], "n": 17, "c": [0.0, 0.1, 0.2],
           "test_m": 8192, "m_max": 16384, **{**SHARED, "depth": 6, "rounds": 100, "max_rank": 4, "sgd_steps": 2000}}),
    replicates=(24, 200),
    static=("k", "n", "depth", "rounds", "max_rank", "max_calls", "theta", "l1", "width",
            "sgd_steps", "test_m", "m_min", "m_max"),
    shared=("learner",),
    axis=("m", sample_sizes),
    meanings=COLUMNS,
    check=_check,
    plot=plot,
    report=_report,
    compile=Compile(uniform=("family", "learner"), choices={"family": FAMILIES, "learner": tuple(LEARNERS)},
                    buckets={"family": lambda family: "junta" if family in JUNTAS else family,
                             "learner": learner_program},
                    cpu_opt_level=2, working_set_per_trial=_working_set),
)


def with_learners(names, name: str = "compare-learners") -> Study:
    """The atlas over ``names`` (registered learners: a user's too, registered before the call) in place of every
    registered one: ``STUDY = compare.with_learners(["half-id3", "id3-gini", "lmn-k"])`` in a study file."""
    names = list(dict.fromkeys(names))
    unknown = [n for n in names if n not in learners.names()]
    if not names or unknown:
        raise ValueError(f"with_learners takes registered learner names, got {unknown or names}; registered: "
                         f"{', '.join(learners.names())}")
    grid = tuple({**g, "learner": names} for g in COMPARE.grid)
    knobs = dataclasses.replace(COMPARE.compile, choices={**COMPARE.compile.choices, "learner": tuple(names)})
    return dataclasses.replace(COMPARE, name=name, grid=grid, compile=knobs)
