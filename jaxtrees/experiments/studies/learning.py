"""Sample-complexity studies: how many examples does a greedy tree learner need?

``parity`` (000 Thm 1), ``juntas`` (000 Thm 2) and ``trees`` (000 Conjecture 3) share one trial: a
product distribution p and a target f on n bits, a tree grown on each prefix of one sample (common
random numbers), scored exactly against f under p (success at m: exact error 0). Each study's
design is in docs/studies.md; the figures and reports: :mod:`~jaxtrees.experiments.studies.learning_report`.
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxtrees import targets
from jaxtrees.core import checks, distributions, sampling
from jaxtrees.core.impurity import NAMES as IMPURITY_NAMES
from jaxtrees.experiments.report import saving, summary
from jaxtrees.experiments.study import Checks, Compile, Study
from jaxtrees.experiments.studies import learning_report, verdicts
from jaxtrees.experiments.studies.common import CPU_OPT_LEVEL, bytes_per_trial
from jaxtrees.experiments.study.trials import (PRECISION_BITS, SUCCESS_TOL, check_sample_grid, exact_invariants,
                                               learn_on_prefixes, sample_sizes, trial_keys)
from jaxtrees.experiments.studies.signal import SIGNAL_COLUMNS, restriction_signal
from jaxtrees.learners import MAX_DEPTH

#: What the sample-complexity studies' output columns mean.
COLUMNS = {
    "m": "training examples: the first m of the trial's sample (m-grid m_min, 2 m_min, ..., m_max)",
    "exact_error": "Pr_{x ~ p}[tree(x) != f(x)], computed exactly (float32)",
    "success": "1 if exact_error <= 1e-6 (exact learning), else 0",
}

# ----------------------------------------------------------------------------- juntas


def _juntas_trial(key, params):
    """000 Thm 2: random k-juntas, c-smoothed vs uniform: P[exact error 0] vs m, m for 90%"""
    n, k = params["n"], params["k"]
    keys = trial_keys(key, "distribution", "target", "sample")
    kp, kf, ks = keys["distribution"], keys["target"], keys["sample"]
    p = sampling.quantize(distributions.Smoothed(jnp.float32(0.5), params["c"]).marginals(kp, n), PRECISION_BITS)
    f = targets.random_junta(kf, n, k, k_max=params["k_max"])
    error, used = learn_on_prefixes(ks, p, f, n, k, params, max_depth=params["k_max"])
    recovered = jnp.all(used == targets.support_mask(f, n), axis=-1)
    eps_star, p_min = restriction_signal(f, p)
    return {"exact_error": error, "success": error <= SUCCESS_TOL, "support_recovered": recovered,
            "eps_star": eps_star, "p_min": p_min}


def _juntas_check(params):
    n = checks.integer("n", params["n"], low=2, high=4096)
    checks.integer("k", params["k"], low=1, high=min(n, 12))
    checks.real("c", params["c"], low=0.0, high=0.5, high_open=True)
    check_sample_grid(params, n)


@summary.styled
def _juntas_plot(rows, stem):
    several = len(rows.unique("impurity")) > 1

    def label(impurity, c):
        return ("uniform (c = 0)" if float(c) == 0 else f"smoothed, c = {float(c):g}") + (
            f", {impurity}" if several else "")

    return saving.side_by_side(
        lambda: learning_report.success_plot(rows, stem, ["n", "k"], ["impurity", "c"], label,
                              lambda n, k: f"random {k}-juntas, n = {n}",
                              "ID3-style growth to depth k on c-smoothed product distributions"),
        lambda: learning_report.signal_plot(rows, stem + "_signal", ["n", "k", "impurity", "c"], "juntas"))


def _juntas_report(rows):
    by = ["n", "k", "impurity", "c"]
    return learning_report.threshold_report(rows, by, "random k-juntas (000 Thm 2)", extra="support_recovered") + \
        learning_report.signal_theory(rows, by, "juntas")


JUNTAS = Study(
    name="juntas",
    trial=_juntas_trial,
    grid=({"n": 16, "k": [3, 4], "c": [0.0, 0.05, 0.1, 0.2], "impurity": ["entropy", "gini"], "m_min": 16,
           "m_max": 8192},
          {"n": [16, 32, 64], "k": [3, 4, 5, 6], "c": [0.0, 0.05, 0.1, 0.2], "impurity": ["entropy", "gini"],
           "m_min": 16, "m_max": 65536}),
    replicates=(200, 1000),
    static=("n", "m_min", "m_max"),
    axis=("m", sample_sizes),
    meanings={**COLUMNS, **SIGNAL_COLUMNS,
              "support_recovered": "1 if the features the tree tests are exactly the junta's support"},
    check=Checks(cell=_juntas_check, rows=exact_invariants),
    plot=_juntas_plot,
    report=_juntas_report,
    compile=Compile(uniform=("impurity",), bounds=("k",), choices={"impurity": IMPURITY_NAMES},
                    cpu_opt_level=CPU_OPT_LEVEL, bytes_per_trial=bytes_per_trial(lambda params: params["n"])),
)


# ----------------------------------------------------------------------------- parity


def _parity_trial(key, params):
    """000 Thm 1: log2(n)-parities, (alpha, c)-distributions vs uniform: P[exact error 0] vs m"""
    log2_n = params["log2_n"]
    n = 2**log2_n
    keys = trial_keys(key, "distribution", "target", "sample")
    kp, kf, ks = keys["distribution"], keys["target"], keys["sample"]
    c = params["c"]
    biased = distributions.AlphaC(params["alpha"], c).marginals(kp, n)
    p = sampling.quantize(jnp.where(c > 0, biased, 0.5), PRECISION_BITS)  # c = 0: the uniform distribution
    f = targets.random_parity(kf, n, log2_n)
    error, _ = learn_on_prefixes(ks, p, f, n, log2_n, params)
    eps_star, p_min = restriction_signal(f, p)
    return {"exact_error": error, "success": error <= SUCCESS_TOL, "eps_star": eps_star, "p_min": p_min}


def _parity_check(params):
    checks.integer("log2_n", params["log2_n"], low=1, high=12)
    c = checks.real("c", params["c"], low=0.0, high=0.5, high_open=True)
    checks.real("alpha", params["alpha"], low=0.0, high=0.5 - c, high_open=True)
    check_sample_grid(params, 2 ** params["log2_n"])


@summary.styled
def _parity_plot(rows, stem):
    def label(log2_n, alpha, c):
        return f"n = {2**int(log2_n)}, " + (
            "uniform" if float(c) == 0 else f"(alpha, c) = ({float(alpha):g}, {float(c):g})")

    return saving.side_by_side(
        lambda: learning_report.success_plot(rows, stem, ["impurity"], ["log2_n", "alpha", "c"], label,
                              lambda impurity: f"log2(n)-parities, {impurity}",
                              "Parities under (alpha, c)-distributions vs uniform"),
        lambda: learning_report.signal_plot(rows, stem + "_signal", ["log2_n", "impurity", "alpha", "c"], "parity"))


def _parity_report(rows):
    by = ["log2_n", "impurity", "alpha", "c"]
    return learning_report.threshold_report(rows, by, "log2(n)-parities (000 Thm 1)") + learning_report.signal_theory(rows, by, "parity")


PARITY = Study(
    name="parity",
    trial=_parity_trial,
    grid=({"log2_n": 4, "c": [0.0, 0.1, 0.2], "alpha": 0.05, "impurity": ["entropy", "gini", "kearns_mansour"],
           "m_min": 16, "m_max": 8192},
          {"log2_n": [4, 5, 6], "c": [0.0, 0.05, 0.1, 0.2], "alpha": 0.05,
           "impurity": ["entropy", "gini", "kearns_mansour"], "m_min": 16, "m_max": 262144}),
    replicates=(100, 1000),
    static=("log2_n", "m_min", "m_max"),
    axis=("m", sample_sizes),
    meanings={**COLUMNS, **SIGNAL_COLUMNS},
    check=Checks(cell=_parity_check, rows=exact_invariants),
    plot=_parity_plot,
    report=_parity_report,
    compile=Compile(uniform=("impurity",), choices={"impurity": IMPURITY_NAMES}, cpu_opt_level=CPU_OPT_LEVEL,
                    bytes_per_trial=bytes_per_trial(lambda params: 2 ** params["log2_n"])),
)


# ----------------------------------------------------------------------------- trees


def _trees_trial(key, params):
    """000 Conjecture 3: random depth-log2(n) trees, c-smoothed vs uniform: P[exact error 0] vs m"""
    log2_n = params["log2_n"]
    n = 2**log2_n
    keys = trial_keys(key, "distribution", "target", "sample")
    kp, kf, ks = keys["distribution"], keys["target"], keys["sample"]
    p = sampling.quantize(distributions.Smoothed(jnp.float32(0.5), params["c"]).marginals(kp, n), PRECISION_BITS)
    f = targets.random_tree(kf, n, log2_n)
    error, _ = learn_on_prefixes(ks, p, f, n, log2_n + params["extra_depth"], params,
                                 max_depth=log2_n + params["extra_depth_max"])
    return {"exact_error": error, "success": error <= SUCCESS_TOL}


def _trees_check(params):
    log2_n = checks.integer("log2_n", params["log2_n"], low=1, high=12)
    checks.integer("extra_depth", params["extra_depth"], low=0, high=MAX_DEPTH - log2_n)
    checks.real("c", params["c"], low=0.0, high=0.5, high_open=True)
    check_sample_grid(params, 2**log2_n)


@summary.styled
def _trees_plot(rows, stem):
    def label(c, extra):
        return ("uniform" if float(c) == 0 else f"smoothed, c = {float(c):g}") + f", extra depth {extra}"

    return learning_report.success_plot(rows, stem, ["log2_n"], ["c", "extra_depth"], label,
                         lambda log2_n: f"random depth-{log2_n} trees, n = {2**int(log2_n)}",
                         "Conjecture 3: depth-log n decision trees under smoothing")


def _trees_report(rows):
    return learning_report.threshold_report(rows, ["log2_n", "extra_depth", "impurity", "c"],
                             "random depth-log2(n) trees (000 Conj. 3)") + "\n" + verdicts.section([],
        "000 Conjecture 3 (ID3 learns depth-log n trees under smoothing) states no bound: no statement to test here; "
        "the juntas and parity studies test Theorems 7, 10 and 12 by their form and compare Lemmas 9 and 11.")


TREES = Study(
    name="trees",
    trial=_trees_trial,
    grid=({"log2_n": [3, 4], "extra_depth": 1, "c": [0.0, 0.1, 0.2], "impurity": "entropy", "m_min": 16,
           "m_max": 8192},
          {"log2_n": [3, 4, 5, 6], "extra_depth": [0, 2], "c": [0.0, 0.05, 0.1, 0.2], "impurity": ["entropy", "gini"],
           "m_min": 16, "m_max": 262144}),
    replicates=(100, 1000),
    static=("log2_n", "m_min", "m_max"),
    axis=("m", sample_sizes),
    meanings=COLUMNS,
    check=Checks(cell=_trees_check, rows=exact_invariants),
    plot=_trees_plot,
    report=_trees_report,
    compile=Compile(uniform=("impurity",), bounds=("extra_depth",), choices={"impurity": IMPURITY_NAMES},
                    cpu_opt_level=CPU_OPT_LEVEL, bytes_per_trial=bytes_per_trial(lambda params: 2 ** params["log2_n"])),
)
