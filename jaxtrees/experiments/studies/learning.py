"""Sample-complexity studies: how many examples does a greedy tree learner need?

``parity`` (000 Thm 1), ``juntas`` (000 Thm 2) and ``trees`` (000 Conjecture 3) share one trial: a
product distribution p and a target f on n bits, a tree grown on each prefix of one sample (common
random numbers), scored exactly against f under p (success at m: exact error 0). Each study's
design is in docs/studies.md.
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxtrees import targets
from jaxtrees.core import checks, distributions, sampling
from jaxtrees.experiments import summary
from jaxtrees.experiments.study import Study
from jaxtrees.experiments.studies.common import (IMPURITY_NAMES, PRECISION_BITS, SUCCESS_TOL, bytes_per_trial,
                                                 check_sample_grid, learn_on_prefixes, sample_sizes, trial_keys)
from jaxtrees.learners import MAX_DEPTH

#: What the sample-complexity studies' output columns mean.
COLUMNS = {
    "m": "training examples: the first m of the trial's sample (m-grid m_min, 2 m_min, ..., m_max)",
    "exact_error": "Pr_{x ~ p}[tree(x) != f(x)], computed exactly (float32)",
    "success": "1 if exact_error <= 1e-6 (exact learning), else 0",
}

#: LLVM level for these studies' CPU programs: level 2 compiled the juntas programs in 0.55-0.85x the
#: time of XLA's default 3 and ran their long-row counting 2.3x faster (docs/benchmarks.md).
CPU_OPT_LEVEL = 2

# ----------------------------------------------------------------------------- juntas


def _juntas_trial(key, params):
    n, k = params["n"], params["k"]
    keys = trial_keys(key, "distribution", "target", "sample")
    kp, kf, ks = keys["distribution"], keys["target"], keys["sample"]
    p = sampling.quantize(distributions.Smoothed(jnp.float32(0.5), params["c"]).marginals(kp, n), PRECISION_BITS)
    f = targets.random_junta(kf, n, k, k_max=params["k_max"])
    error, used = learn_on_prefixes(ks, p, f, n, k, params, max_depth=params["k_max"])
    recovered = jnp.all(used == targets.support_mask(f, n), axis=-1)
    return {"exact_error": error, "success": error <= SUCCESS_TOL, "support_recovered": recovered}


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

    return _success_plot(rows, stem, ["n", "k"], ["impurity", "c"], label,
                         lambda n, k: f"random {k}-juntas, n = {n}",
                         "ID3-style growth to depth k on c-smoothed product distributions")


def _juntas_report(rows):
    return _threshold_report(rows, ["n", "k", "impurity", "c"], "random k-juntas (000 Thm 2)",
                             extra="support_recovered")


JUNTAS = Study(
    name="juntas",
    description="000 Thm 2: random k-juntas, c-smoothed vs uniform: P[exact error 0] vs m, m for 90%",
    quick={"n": 16, "k": [3, 4], "c": [0.0, 0.05, 0.1, 0.2], "impurity": "entropy", "m_min": 16, "m_max": 8192},
    full={"n": [16, 32, 64], "k": [3, 4, 5, 6], "c": [0.0, 0.05, 0.1, 0.2], "impurity": ["entropy", "gini"],
          "m_min": 16, "m_max": 65536},
    static=("n", "m_min", "m_max"),
    uniform=("impurity",),
    bounds=("k",),
    choices={"impurity": IMPURITY_NAMES},
    cpu_opt_level=CPU_OPT_LEVEL,
    trial=_juntas_trial,
    replicates=(200, 1000),
    check=_juntas_check,
    plot=_juntas_plot,
    report=_juntas_report,
    axis=("m", sample_sizes),
    bytes_per_trial=bytes_per_trial(lambda params: params["n"]),
    columns={**COLUMNS, "support_recovered": "1 if the features the tree tests are exactly the junta's support"},
)


# ----------------------------------------------------------------------------- parity


def _parity_trial(key, params):
    log2_n = params["log2_n"]
    n = 2**log2_n
    keys = trial_keys(key, "distribution", "target", "sample")
    kp, kf, ks = keys["distribution"], keys["target"], keys["sample"]
    c = params["c"]
    biased = distributions.AlphaC(params["alpha"], c).marginals(kp, n)
    p = sampling.quantize(jnp.where(c > 0, biased, 0.5), PRECISION_BITS)  # c = 0: the uniform distribution
    f = targets.random_parity(kf, n, log2_n)
    error, _ = learn_on_prefixes(ks, p, f, n, log2_n, params)
    return {"exact_error": error, "success": error <= SUCCESS_TOL}


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

    return _success_plot(rows, stem, ["impurity"], ["log2_n", "alpha", "c"], label,
                         lambda impurity: f"log2(n)-parities, {impurity}",
                         "Parities under (alpha, c)-distributions vs uniform")


def _parity_report(rows):
    return _threshold_report(rows, ["log2_n", "impurity", "alpha", "c"], "log2(n)-parities (000 Thm 1)")


PARITY = Study(
    name="parity",
    description="000 Thm 1: log2(n)-parities, (alpha, c)-distributions vs uniform: P[exact error 0] vs m",
    quick={"log2_n": 4, "c": [0.0, 0.1, 0.2], "alpha": 0.05, "impurity": ["entropy", "gini", "kearns_mansour"],
           "m_min": 16, "m_max": 8192},
    full={"log2_n": [4, 5, 6], "c": [0.0, 0.05, 0.1, 0.2], "alpha": 0.05,
          "impurity": ["entropy", "gini", "kearns_mansour"], "m_min": 16, "m_max": 262144},
    static=("log2_n", "m_min", "m_max"),
    uniform=("impurity",),
    choices={"impurity": IMPURITY_NAMES},
    cpu_opt_level=CPU_OPT_LEVEL,
    trial=_parity_trial,
    replicates=(100, 1000),
    check=_parity_check,
    plot=_parity_plot,
    report=_parity_report,
    axis=("m", sample_sizes),
    bytes_per_trial=bytes_per_trial(lambda params: 2 ** params["log2_n"]),
    columns=COLUMNS,
)


# ----------------------------------------------------------------------------- trees


def _trees_trial(key, params):
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

    return _success_plot(rows, stem, ["log2_n"], ["c", "extra_depth"], label,
                         lambda log2_n: f"random depth-{log2_n} trees, n = {2**int(log2_n)}",
                         "Conjecture 3: depth-log n decision trees under smoothing")


def _trees_report(rows):
    return _threshold_report(rows, ["log2_n", "extra_depth", "impurity", "c"], "random depth-log2(n) trees (000 Conj. 3)")


TREES = Study(
    name="trees",
    description="000 Conjecture 3: random depth-log2(n) trees, c-smoothed vs uniform: P[exact error 0] vs m",
    quick={"log2_n": [3, 4], "extra_depth": 1, "c": [0.0, 0.1, 0.2], "impurity": "entropy", "m_min": 16, "m_max": 8192},
    full={"log2_n": [3, 4, 5, 6], "extra_depth": [0, 2], "c": [0.0, 0.05, 0.1, 0.2], "impurity": ["entropy", "gini"],
          "m_min": 16, "m_max": 262144},
    static=("log2_n", "m_min", "m_max"),
    uniform=("impurity",),
    bounds=("extra_depth",),
    choices={"impurity": IMPURITY_NAMES},
    cpu_opt_level=CPU_OPT_LEVEL,
    trial=_trees_trial,
    replicates=(100, 1000),
    check=_trees_check,
    plot=_trees_plot,
    report=_trees_report,
    axis=("m", sample_sizes),
    bytes_per_trial=bytes_per_trial(lambda params: 2 ** params["log2_n"]),
    columns=COLUMNS,
)


# ----------------------------------------------------------------------------- shared report


def _success_plot(rows, stem, panel_by, curve_by, label, title, suptitle):
    """One panel per value of ``panel_by`` (titled ``title(*values)``), in it one success-rate
    curve over m per value of ``curve_by`` (labelled ``label(*values)``)."""
    panels = {}
    for g in summary.rates(rows, [*panel_by, *curve_by, "m"], "success"):  # one pass over the rows
        panel = tuple(g[name] for name in panel_by)
        panels.setdefault(panel, {}).setdefault(tuple(g[name] for name in curve_by), []).append(g)
    fig, axes = summary.figure(len(panels))
    counts = []
    for ax, (panel, curves) in zip(axes, panels.items()):
        for curve, groups in curves.items():
            counts += [g["trials"] for g in groups]
            summary.rate_curve(ax, groups, "m", label(*curve))
        summary.panel(ax, title(*panel), "training examples m", ylim=summary.RATE_LIMITS)
    return summary.finish(fig, axes, stem, "P[exact error = 0]\n(95% Wilson band)", suptitle, counts)


def _threshold_report(rows, by, title, extra=None):
    """Per cell: success rate at the largest m, the smallest m with >= 90% success, mean error."""
    header = [*by, "trials", "P[success] at max m", "m for 90%", "mean exact error at max m"]
    if extra:
        header.append(f"P[{extra}] at max m")
    by_m = {}
    for g in summary.rates(rows, [*by, "m"], "success"):
        by_m.setdefault(tuple(g[name] for name in by), []).append(g)
    errors = {tuple(g[name] for name in [*by, "m"]): g for g in summary.means(rows, [*by, "m"], "exact_error")}
    extras = ({tuple(g[name] for name in [*by, "m"]): g for g in summary.rates(rows, [*by, "m"], extra)}
              if extra else {})
    table = []
    for cell, groups in by_m.items():
        top = max(groups, key=lambda g: g["m"])
        m90 = summary.threshold([(g["m"], g["rate"]) for g in groups])
        err = errors[(*cell, top["m"])]
        line = [*cell, top["trials"], f"{top['rate']:.2f} [{top['low']:.2f}, {top['high']:.2f}]",
                "not reached" if m90 is None else m90, f"{err['mean']:.4f}"]
        if extra:
            line.append(f"{extras[(*cell, top['m'])]['rate']:.2f}")
        table.append(line)
    m = rows["m"]
    return f"## {title}\n\nm grid {m.min()}..{m.max()} " \
           f"(powers of two; nested prefixes of one sample per trial). 90%: smallest m from which the " \
           f"success rate stays >= 0.9.\n\n" + summary.markdown_table(header, table) + "\n"
