"""Sample-complexity studies: how many examples does a greedy tree learner need?

``parity`` (000 Thm 1), ``juntas`` (000 Thm 2) and ``trees`` (000 Conjecture 3) share one trial: a
product distribution p and a target f on n bits, a tree grown on each prefix of one sample (common
random numbers), scored exactly against f under p (success at m: exact error 0). Each study's
design is in docs/studies.md.
"""

from __future__ import annotations

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np

from jaxtrees import targets
from jaxtrees.core import checks, distributions, sampling
from jaxtrees.experiments.report import summary, thresholds
from jaxtrees.experiments import table as tables
from jaxtrees.experiments.study import Checks, Compile, Study
from jaxtrees.experiments.studies import theory
from jaxtrees.experiments.studies.common import at_max
from jaxtrees.experiments.studies.common import (IMPURITY_NAMES, PRECISION_BITS, SUCCESS_TOL, bytes_per_trial,
                                                 check_sample_grid, learn_on_prefixes, sample_sizes, trial_keys)
from jaxtrees.experiments.study.trials import exact_invariants
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

# ----------------------------------------------------------------------------- the exact signal (000 Thm 7)


def restriction_signal(f, p):
    """``(eps_star, p_min)`` of a junta (or parity) ``f`` under the product distribution ``p``, exactly (000 Thm 7):
    eps_star is the smallest, over the restrictions w of the support (3^K of them, K its slots) with f_w not
    constant, of the largest |I(D_w, i)| = p_i |E[f | w, x_i = 1] - E[f | w]| over the support's free i; p_min =
    prod_{j in J} min(p_j, 1 - p_j), the smallest mass of a full restriction of the support (Theorem 7's
    alpha^k). Whether f_w is constant is read from the truth table (exact); +inf for a constant f. Padding slots
    (a junta padded to k_max) change neither."""
    f = targets.as_junta(f)
    K, n = f.support.shape[0], p.shape[-1]
    digits = np.array(list(itertools.product(range(3), repeat=K)), np.int64).reshape(-1, K)  # 2: free
    fixed_slots, value_slots = digits < 2, digits == 1
    assignment = (np.arange(2**K)[:, None] >> np.arange(K)) & 1  # [2^K, K]: row a's bits
    consistent = np.all(~fixed_slots[:, None, :] | (assignment[None] == value_slots[:, None, :]), axis=-1)
    ones = jnp.asarray(consistent, jnp.int32) @ f.table.astype(jnp.int32)
    nonconstant = (ones > 0) & (ones < jnp.asarray(consistent.sum(axis=1), jnp.int32))
    onehot = (f.support[:, None] == jnp.arange(n)).astype(jnp.int32)  # [K, n]
    fixed = (jnp.asarray(fixed_slots, jnp.int32) @ onehot) > 0
    values = (jnp.asarray(value_slots, jnp.int32) @ onehot) > 0
    mu, mu1 = jax.vmap(lambda a, b: f.means(p, a, b))(fixed, values)
    free = (jnp.sum(onehot, axis=0) > 0)[None] & ~fixed
    best = jnp.max(jnp.where(free, jnp.abs(p * (mu1 - mu[:, None])), 0.0), axis=1)
    eps_star = jnp.min(jnp.where(nonconstant, best, jnp.inf))
    p_min = jnp.prod(jnp.where(f.support_mask(n), jnp.minimum(p, 1 - p), 1.0))
    return eps_star, p_min


#: The signal columns the parity and juntas studies add (000 Thm 7, Lemmas 9 and 11).
SIGNAL_COLUMNS = {
    "eps_star": "min over restrictions w of the support with f_w not constant of max_i |I(D_w, i)| (exact; 000 Thm 7's "
                "eps)",
    "p_min": "prod_{j in J} min(p_j, 1 - p_j): the smallest mass of a full restriction of the support (Thm 7's "
             "alpha^k)",
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

    return summary.side_by_side(
        lambda: _success_plot(rows, stem, ["n", "k"], ["impurity", "c"], label,
                              lambda n, k: f"random {k}-juntas, n = {n}",
                              "ID3-style growth to depth k on c-smoothed product distributions"),
        lambda: _signal_plot(rows, stem + "_signal", ["n", "k", "impurity", "c"], "juntas"))


def _juntas_report(rows):
    by = ["n", "k", "impurity", "c"]
    return _threshold_report(rows, by, "random k-juntas (000 Thm 2)", extra="support_recovered") + \
        _signal_theory(rows, by, "juntas")


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

    return summary.side_by_side(
        lambda: _success_plot(rows, stem, ["impurity"], ["log2_n", "alpha", "c"], label,
                              lambda impurity: f"log2(n)-parities, {impurity}",
                              "Parities under (alpha, c)-distributions vs uniform"),
        lambda: _signal_plot(rows, stem + "_signal", ["log2_n", "impurity", "alpha", "c"], "parity"))


def _parity_report(rows):
    by = ["log2_n", "impurity", "alpha", "c"]
    return _threshold_report(rows, by, "log2(n)-parities (000 Thm 1)") + _signal_theory(rows, by, "parity")


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

    return _success_plot(rows, stem, ["log2_n"], ["c", "extra_depth"], label,
                         lambda log2_n: f"random depth-{log2_n} trees, n = {2**int(log2_n)}",
                         "Conjecture 3: depth-log n decision trees under smoothing")


def _trees_report(rows):
    return _threshold_report(rows, ["log2_n", "extra_depth", "impurity", "c"],
                             "random depth-log2(n) trees (000 Conj. 3)") + "\n" + theory.section([],
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


# ----------------------------------------------------------------------------- theory beside measurement (000)

#: The failure probability in Theorem 7's ln(n / delta) when the figures and reports scale m by it.
DELTA = 0.1


def _k_n_alpha(rows, kind):
    """Per row: k, n, c and alpha (p_i in (alpha, 1 - alpha)) as floats: a parity cell's own alpha and k = log2 n,
    a junta cell's k, n and alpha = 1/2 - c (c-smoothed around 1/2)."""
    c = np.asarray(rows["c"], np.float64)
    if kind == "parity":
        k = np.asarray(rows["log2_n"], np.float64)
        return k, 2.0**k, c, np.asarray(rows["alpha"], np.float64)
    return np.asarray(rows["k"], np.float64), np.asarray(rows["n"], np.float64), c, 0.5 - c


#: The columns the signal figure and Theory section read (a Table of only these is taken apart, not every column).
SIGNAL_COLUMNS = ("m", "c", "k", "n", "log2_n", "alpha", "eps_star", "p_min", "success")


def _signal_trials(rows, by):
    """One row per trial (its largest m), smoothed (c > 0) with a finite signal (eps* = 0 kept: the event Lemma 11
    bounds)."""
    trials = at_max(rows.select(*by, *SIGNAL_COLUMNS), by, "m")
    eps = np.asarray(trials["eps_star"], np.float64)
    return trials.take((np.asarray(trials["c"], np.float64) > 0) & np.isfinite(eps))


def _thresholds(rows, by) -> dict:
    """Per cell of ``by``: the smallest m from which the success rate stays >= 0.9 (None: not reached)."""
    by_m = {}
    for g in summary.rates(rows, [*by, "m"], "success"):
        by_m.setdefault(tuple(g[name] for name in by), []).append((g["m"], g["rate"]))
    return {cell: summary.threshold(points) for cell, points in by_m.items()}


def _scale(rows, kind):
    """Theorem 7's eps*^-4 p_min^-2 k ln(n / delta) per row (k and n per cell), computed once per trial (eps* and
    p_min are the trial's)."""
    codes, size = _trial_codes(rows)
    one = _a_row_of_each(codes, size)
    if kind == "parity":
        k = tables.on_cells(rows, lambda k: np.asarray(k, np.float64), "log2_n")[one]
        n = 2.0**k
    else:
        k, n = (tables.on_cells(rows, lambda v: np.asarray(v, np.float64), name)[one] for name in ("k", "n"))
    return theory.theorem7_scale(np.asarray(rows["eps_star"])[one], np.asarray(rows["p_min"])[one], k, n, DELTA)[codes]


def _signal_theory(rows, by, kind) -> str:
    """The Theory section of the parity and juntas reports: 000 Lemma 9 (parities: an identity of the (alpha, c)
    construction) or Lemma 11 (juntas) against the exact signal eps*, and Theorems 7, 10 (parities) and 12 (juntas)
    tested by their form on the Gini cells (:func:`lipschitz_lines`)."""
    if "eps_star" not in rows:
        return ""
    lines = []
    if kind == "parity":
        lines.append(theory.identity("000 Lemma 9", "eps* > alpha^2 (2c)^(k-1) for p_j in (alpha, 1 - alpha), |p_j - "
                                     "1/2| >= c (the exact signal p_j (1 - p_j) prod |2 p_i - 1| of every (alpha, c) "
                                     "parity)"))
    else:
        trials = _signal_trials(rows, by)
        k, n, c, alpha = _k_n_alpha(trials, kind)
        lines.append(lemma11_check(trials, by, alpha, c, k, "alpha = 1/2 - c"))
    cells, m = trials_by_cell(rows, by, ("eps_star",))
    lines += lipschitz_lines(cells, m, by, kind)
    return "\n" + theory.section(lines, "Each statement of the seed against the measured points, its kind first. "
                                        "eps*: per trial, the smallest over restrictions w of the support with f_w "
                                        "not constant of the largest |I(D_w, i)| (exact); p_min = prod_J min(p_j, 1 "
                                        "- p_j); m90: the smallest m from which a cell's success rate stays >= 0.9.")


def lemma11_check(trials, by, alpha, c, k, which: str):
    """000 Lemma 11 with a union over the 3^k restrictions, uncapped, against each smoothed trial's cell's empirical
    P[eps* <= t] at its own t = eps* > 0 (trials with eps* = 0 count in every point's P, not as points)."""
    codes, _ = tables.group_codes(trials, by)
    eps = np.asarray(trials["eps_star"], np.float64)
    cdf = theory.empirical_cdf(codes, eps)
    bound = theory.lemma11_union_probability(eps, alpha, c, k, capped=False)
    positive = eps > 0
    zeros = int((~positive).sum())
    return theory.check("000 Lemma 11, union over the 3^k restrictions", "P[eps* <= t] <= 3^k (2/c)^k sqrt(t / (2 "
                        f"alpha^2)), {which}, uncapped", bound[positive], cdf[positive], "upper",
                        unit="smoothed trials", note=f"Measured: the empirical P[eps* <= t] of the trial's cell at its "
                        f"own t = eps* ({zeros:,} trials with eps* = 0 count in it).")


# ----------------------------------------------------------------------------- 000's Lipschitz theorems by their form

#: Bootstrap resamples of a form's slope.
REPLICATES = 1000

#: Impurity names as the reports write them.
IMPURITY_TEXT = {"entropy": "entropy", "gini": "Gini", "kearns_mansour": "Kearns-Mansour"}


def trials_by_cell(rows, by, columns=(), matrix: str = "success") -> tuple[dict, np.ndarray]:
    """``(cells, m)``: per cell of ``by`` (a tuple of its values), ``(values, per_trial)``: ``float[trials, M]`` of
    the column ``matrix`` over the ascending m grid ``m``, and each of ``columns`` per trial (at its largest m).
    Trials are told apart by the ``cell`` and ``replicate`` columns (cells sorted, a cell's trials by cell and
    replicate), else by the rows' m order (cells in their first trial's order)."""
    column, m = _grid(rows, "m")
    codes, size = _trial_codes(rows)
    values = np.full((size, m.size), np.nan)
    values[codes, column] = np.asarray(rows[matrix], np.float64)
    last = _a_row_of_each(codes, size)  # (a trial's per-trial values are on each of its rows)
    cell_codes, keys = tables.groups(rows, by)
    cell = cell_codes[last]  # each trial's cell
    count = np.bincount(cell, minlength=len(keys))
    ends, order = np.cumsum(count), np.argsort(cell, kind="stable")  # a cell's trials by (cell, replicate)
    if "cell" in rows or "replicate" in rows:
        ranked = np.flatnonzero(count)  # cells sorted
    else:  # cells in their first trial's order
        first = np.full(len(keys), size)
        np.minimum.at(first, cell, np.arange(size))
        ranked = np.argsort(first, kind="stable")[:np.count_nonzero(count)]
    per_trial = {name: np.asarray(rows[name], np.float64)[last] for name in columns}  # each column read once
    out = {}
    for g in ranked:
        members = order[ends[g] - count[g]:ends[g]]
        out[keys[g]] = (values[members], {name: v[members] for name, v in per_trial.items()})
    return out, m


def _grid(rows, name) -> tuple[np.ndarray, np.ndarray]:
    """``(index, grid)``: a column's distinct values ascending (float64) and each row's index in them, from its
    codes (:func:`~jaxtrees.experiments.table.factorize`: no sort of the rows)."""
    codes, uniques = tables.factorize(rows, name)
    present = np.bincount(codes, minlength=len(uniques)) > 0
    if present.all():
        return codes, np.asarray(uniques, np.float64)
    return (np.cumsum(present) - 1)[codes], np.asarray(uniques, np.float64)[present]  # a subset's rows


def _a_row_of_each(codes, size: int) -> np.ndarray:
    """Per group of ``codes`` (``size`` groups), the index of one of its rows."""
    row = np.zeros(size, np.int64)
    row[codes] = np.arange(len(codes))
    return row


def _trial_codes(rows) -> tuple[np.ndarray, int]:
    """``(codes, trials)``: each row's trial, told apart by the ``cell`` and ``replicate`` columns (a cell fixes the
    parameters), else by the rows' m order (a trial's rows consecutive, one per m)."""
    trial = [name for name in ("cell", "replicate") if name in rows]
    if trial:
        return tables.group_codes(rows, trial)
    starts = np.r_[True, np.diff(np.asarray(rows["m"], np.float64)) <= 0]
    return np.cumsum(starts) - 1, int(np.count_nonzero(starts))


def lipschitz_lines(cells, m, by, kind) -> list:
    """000's Theorems 7, 10 (parities) and 12 (juntas, smoothed-base) by their form over the smoothed Gini cells (the
    only built-in impurity that is strongly concave and Lipschitz, 000 Sec. 1.2): the exponent of 1/eps* in m90
    against Theorem 7's 4, of 1/c against Theorem 10's 4k - 4 (as derived) or Theorem 12's bound's own exponent at
    the cells' c, and of ln(n / delta) against 1 where n varies; an ``[outside]`` line for the other impurities."""
    info, inside = lipschitz_cells(cells, by, kind)
    lines = []
    if inside:
        lines.append(_theorem7_form(inside, m))
        lines.append(_c_form(inside, m, info, kind))
        if len({info[cell]["n"] for cell in inside}) > 1:
            lines.append(_n_form(inside, m, info, kind))
    others = sorted({IMPURITY_TEXT.get(info[cell]["impurity"], info[cell]["impurity"]) for cell in cells
                     if not theory.lipschitz(info[cell]["impurity"])})
    if others:
        count = sum(1 for cell in cells if not theory.lipschitz(info[cell]["impurity"]))
        hint = "" if inside else ("; no smoothed Gini cell in these rows (the default grids have them; `--set "
                                  "impurity=entropy,gini` with a c > 0 adds them)")
        lines.append(theory.outside("000 Thms 7, " + ("10" if kind == "parity" else "12"), f"the {count} "
                                    f"{' and '.join(others)} cells", f"{' and '.join(others)} "
                                    f"{'is' if len(others) == 1 else 'are'} not Lipschitz (slope unbounded at q = 0 "
                                    f"and 1), and 000 assumes a strongly concave, Lipschitz impurity (Sec. 1.2){hint}"))
    return [line for line in lines if line is not None]


def lipschitz_cells(cells, by, kind) -> tuple[dict, dict]:
    """``(info, inside)``: every cell's :func:`_cell_info`, and the cells (of ``cells``) inside 000's Lipschitz
    theorems' hypotheses: smoothed (c > 0), Gini."""
    info = {cell: _cell_info(dict(zip(by, cell)), kind) for cell in cells}
    inside = {cell: v for cell, v in cells.items() if info[cell]["c"] > 0 and theory.lipschitz(info[cell]["impurity"])}
    return info, inside


def _cell_info(cell, kind) -> dict:
    """A cell's k, n, c, alpha (the smallest min(p_i, 1 - p_i): parity's own, 1/2 - c around 1/2, min(p-hat, 1 -
    p-hat) - c around a base) and impurity as plain values, and the label of its group of c."""
    if kind == "parity":
        k = int(cell["log2_n"])
        out = {"k": k, "n": 2**k, "alpha": float(cell["alpha"]), "group": (k, float(cell["alpha"]))}
    else:
        hat = float(theory.critical_base(cell["k"])) if cell.get("base") == "critical" else 0.5
        out = {"k": int(cell["k"]), "n": int(cell["n"]), "alpha": float(theory.smoothed_alpha(hat, cell["c"])),
               "group": (int(cell["n"]), int(cell["k"]), cell.get("base", ""))}
    return {**out, "c": float(cell["c"]), "impurity": cell["impurity"]}


def _slope(cells, m, x_of, label, claim, side="upper"):
    """A :class:`theory.Slope` of log m90 on log x over ``cells`` (x per trial: ``x_of(cell, values)``)."""
    keys = list(cells)
    fit = thresholds.threshold_slope([cells[c][0] > 0 for c in keys], [x_of(c, cells[c][1]) for c in keys], m,
                                   replicates=REPLICATES)
    return theory.Slope(label, fit.estimate, fit.low, fit.high, claim, side, fit.replicates, REPLICATES)


def _theorem7_form(cells, m):
    """000 Thm 7 by its form: the exponent of 1/eps* in m90 (cell medians) against 4."""
    with np.errstate(divide="ignore"):
        slope = _slope(cells, m, lambda cell, v: 1 / v["eps_star"], f"{len(cells)} Gini cells", 4.0)
    return theory.Form("000 Thm 7", "m ~ beta^-2 gamma^2 eps^-4 alpha^-2k k ln(n / delta) suffices (Gini: beta^-2 "
                       "gamma^2 = 1/4)", "exponent of 1/eps* (the cell's median) in m90, least squares over the cells "
                       "reaching 90%", (slope,))


def c_slopes(cells, m, info, kind) -> dict:
    """Per group of cells that differ only in c (at least two): its :class:`theory.Slope` of log m90 on log(1/c)
    against the theorem's own exponent at those c (Theorem 10: 4k - 4 as derived; Theorem 12: the bound's, 8k as c ->
    0 with alpha fixed), and the cells."""
    groups = {}
    for cell in cells:
        groups.setdefault(info[cell]["group"], []).append(cell)
    out = {}
    for group, members in groups.items():
        if len(members) < 2:
            continue
        one = info[members[0]]
        c = np.asarray([info[cell]["c"] for cell in members])
        alpha = np.asarray([info[cell]["alpha"] for cell in members])
        if kind == "parity":
            claim = theory.exponent(theory.theorem10_examples(alpha, c, one["k"], one["n"], DELTA), 1 / c)
            printed = theory.exponent(theory.theorem10_examples_as_printed(alpha, c, one["k"], one["n"], DELTA), 1 / c)
            label = f"n = {one['n']}, alpha = {one['alpha']:g} (as printed: {printed:.3g})"
        else:
            bound = theory.theorem12_examples(alpha, c, one["k"], one["n"], DELTA / 2, DELTA / 2)
            claim = theory.exponent(bound, 1 / c)
            label = f"n = {one['n']}, k = {one['k']}" + (f", {group[2]}" if group[2] else "") + \
                f" (8k = {theory.theorem12_slope(one['k']):g})"
        out[group] = (_slope({cell: cells[cell] for cell in members}, m,
                             lambda cell, v: np.full(len(v["eps_star"]), 1 / info[cell]["c"]), label, claim), members)
    return out


def _c_form(cells, m, info, kind):
    """000 Thm 10 (parities) or 12 by its form: :func:`c_slopes`."""
    slopes = tuple(slope for slope, _ in c_slopes(cells, m, info, kind).values())
    if not slopes:
        return None
    if kind == "parity":
        return theory.Form("000 Thm 10", "m ~ beta^-2 gamma^2 (2c)^(-4k+4) alpha^(-2k-8) k ln(n / delta) suffices (as "
                           "derived; the paper prints (2c)^(-4k-4))", "exponent of 1/c in m90 over the Gini cells "
                           "against the derived 4k - 4", slopes)
    alpha = "min(p-hat, 1 - p-hat) - c" if kind == "smoothed-base" else "1/2 - c"  # around a base, or around 1/2
    return theory.Form("000 Thm 12", "m ~ B^k beta^-2 gamma^2 c^(-8k) delta1^-8 alpha^(-2k-8) k ln(n / delta2) "
                       "suffices", "exponent of 1/c in m90 over the Gini cells against the bound's own at these c "
                       f"(alpha = {alpha}; 8k as c -> 0)", slopes)


def _n_form(cells, m, info, kind):
    """000 Thm 7's ln(n / delta) by its form: per (k, c[, base]) the exponent of ln(n / delta) in m90 against 1."""
    if kind == "parity":  # k = log2 n grows with n: no fixed-k comparison
        return None
    groups = {}
    for cell in cells:
        one = info[cell]
        groups.setdefault((one["k"], one["c"], one["group"][2]), []).append(cell)
    slopes = [_slope({cell: cells[cell] for cell in members}, m,
                     lambda cell, v: np.full(len(v["eps_star"]), math.log(info[cell]["n"] / DELTA)),
                     f"k = {k}, c = {c:g}" + (f", {base}" if base else ""), 1.0)
              for (k, c, base), members in groups.items() if len({info[cell]["n"] for cell in members}) > 1]
    if not slopes:
        return None
    return theory.Form("000 Thms 7, 12 (ln n)", f"m grows as ln(n / delta) at fixed k and c (delta = {DELTA:g})",
                       "exponent of ln(n / delta) in m90 over the Gini cells against 1", tuple(slopes))


#: Points drawn per empirical CDF (evenly spaced in rank; a cell's trials may be millions): exact at each of them.
CURVE_POINTS = 1024


@summary.styled
def _signal_plot(rows, stem, by, kind):
    """The exact signal beside the theory: eps*'s distribution per smoothed cell against Lemma 11's bound (juntas,
    dashed) or Lemma 9's floor (parities, dotted); P[success] against m / (Theorem 7's eps*^-4 p_min^-2 k ln(n /
    delta)); for juntas, m for 90% against 1/c with Theorem 12's slope 8k and against ln n."""
    if "eps_star" not in rows:
        return []
    trials = _signal_trials(rows, by)
    panels = 5
    fig, axes = summary.figure(panels)
    codes, keys = tables.groups(trials, by)
    eps = np.asarray(trials["eps_star"], np.float64)
    cdf = theory.empirical_cdf(codes, eps)
    k, n, c, alpha = _k_n_alpha(trials, kind)
    ax = axes[0]
    for g, key in enumerate(keys):
        mine = np.flatnonzero(codes == g)
        order = mine[np.argsort(eps[mine], kind="stable")]
        order = order[np.unique(np.linspace(0, order.size - 1, CURVE_POINTS).astype(np.int64))]  # exact at these
        look = summary.series_style(ax)
        ax.step(eps[order], cdf[order], where="post", color=look["color"], label=_cell_label(dict(zip(by, key))))
        if kind == "parity":
            ax.axvline(float(theory.lemma9_floor(alpha[mine[0]], c[mine[0]], k[mine[0]])), color=look["color"],
                       ls=":", lw=1)
        else:
            ax.plot(eps[order], theory.lemma11_union_probability(eps[order], alpha[order], c[order], k[order]), "--",
                    color=look["color"], lw=1)
    if kind != "parity" and len(trials):
        vacuous = lemma11_check(trials, by, alpha, c, k, "").kind == "vacuous"
        ax.plot([], [], "k--", lw=1, label="Lemma 11 x 3^k" + (": vacuous at this size" if vacuous else ""))
    ax.set_xscale("log")
    summary.panel(ax, "eps* per trial: P[eps* <= t]" + ("\n(dotted: Lemma 9's floor)" if kind == "parity" else
                                                         "\n(dashed: Lemma 11 x 3^k restrictions, capped at 1)"),
                  "t", xbase=None, ylim=summary.RATE_LIMITS)
    ax.set_xscale("log")
    ax = axes[1]  # Theorem 7's scale: the cells collapse if its dependence is right
    smoothed = tables.on_cells(rows, lambda c: np.asarray(c, np.float64) > 0, "c")
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        x = rows["m"] / _scale(rows, kind)
    good = smoothed & np.isfinite(x) & (x > 0)
    if good.any():
        edges = np.geomspace(x[good].min(), x[good].max() * 1.0001, 16)
        bins = np.where(good, np.clip(np.digitize(x, edges) - 1, 0, len(edges) - 2), -1)  # -1: left out
        curves = {}
        for g in summary.rates(rows.select(*by, "success").with_columns(_bin=bins), [*by, "_bin"], "success"):
            if g["_bin"] >= 0:
                curves.setdefault(tuple(g[name] for name in by), []).append(g)
        centres = np.sqrt(edges[:-1] * edges[1:])
        for key, groups in curves.items():
            summary.rate_curve(ax, [{**g, "_x": centres[g["_bin"]]} for g in groups], "_x",
                               _cell_label(dict(zip(by, key))))
        ax.set_xscale("log")
    summary.panel(ax, "P[exact] against Thm 7's scale", f"m / (eps*^-4 p_min^-2 k ln(n / {DELTA:g}))", xbase=None,
                  ylim=summary.RATE_LIMITS)
    ax.set_xscale("log")
    cells, m = trials_by_cell(rows, by, ("eps_star",))
    info, inside = lipschitz_cells(cells, by, kind)
    m90 = _thresholds(rows, by)
    _m90_panels(axes[2], axes[3], m90, by, kind, c_slopes(inside, m, info, kind))
    eps_panel(axes[4], inside, m, m90)
    return summary.finish(fig, axes, stem, "P[eps* <= t]", "000's exact signal eps* (c > 0) against its lemmas and "
                          "Theorem 7's scale", np.bincount(codes, minlength=len(keys)).tolist() or [0])


def _m90_panels(by_c, by_n, m90, by, kind, forms):
    """m for 90% against 1/c per group of cells that differ only in c, with the [form] fit of each Gini group (its
    exponent dashed through the points, the bootstrap 95% interval shaded, the theorem's exponent dotted: Theorem 12's
    bound's for juntas, Theorem 10's 4k - 4 as derived for parities), and against ln n."""
    curves_c, curves_n = {}, {}
    for cell, m in m90.items():
        info = dict(zip(by, cell))
        if m is None or info["c"] <= 0:
            continue
        if kind == "parity":  # k = log2 n; the cells of one alpha
            info = {**info, "k": info["log2_n"], "n": 2 ** info["log2_n"],
                    "impurity": f"{info['impurity']}, alpha = {info['alpha']:g}"}
        curves_c.setdefault((info["n"], info["k"], info["impurity"]), []).append((1 / info["c"], m, cell))
        label = f"c = {info['c']:g}, {info['impurity']}" if kind == "parity" else \
            f"k = {info['k']}, c = {info['c']:g}, {info['impurity']}"  # a parity's k grows with n
        curves_n.setdefault(label, []).append((math.log(info["n"]), m))
    for (n, k, imp), pts in curves_c.items():
        pts.sort()
        look = summary.series_style(by_c)
        by_c.plot([x for x, _, _ in pts], [y for _, y, _ in pts], color=look["color"], marker=look["marker"],
                  label=f"n = {n}, k = {k}, {imp}")
        for slope, members in forms.values():
            if pts[0][2] in members:
                draw_form(by_c, [(x, y) for x, y, _ in pts], slope, look["color"])
    by_c.set_xscale("log")
    by_c.set_yscale("log")
    reference = "Thm 10's 4k - 4" if kind == "parity" else "Thm 12's exponent"
    summary.panel(by_c, f"m for 90% against 1/c (Gini: fit, 95% band;\ndotted: {reference})", "1/c", xbase=None)
    by_c.set_xscale("log")
    for label, pts in curves_n.items():
        pts.sort()
        by_n.plot(*zip(*pts), label=label, **summary.series_style(by_n))
    by_n.set_yscale("log")
    summary.panel(by_n, "m for 90% against ln n", "ln n", xbase=None)


def eps_panel(ax, inside, m, m90):
    """m for 90% against the cell's median 1/eps* over the Gini cells, with Theorem 7's [form] fit (exponent <= 4)."""
    points = [(float(np.median(1 / v["eps_star"])), m90[cell]) for cell, (_, v) in inside.items()
              if m90.get(cell) is not None]
    if points:
        look = summary.series_style(ax)
        ax.plot(*zip(*sorted(points)), ls="none", color=look["color"], marker=look["marker"], label="Gini cells")
        draw_form(ax, points, _theorem7_form(inside, m).slopes[0], look["color"])
        ax.set_xscale("log")
        ax.set_yscale("log")
    summary.panel(ax, "m for 90% against 1/eps* (cell median)\n(Thm 7: fit, 95% band; dotted: its 4)", "1/eps*",
                  xbase=None)
    ax.set_ylabel("m for 90%")


def draw_form(ax, points, slope, color):
    """A [form] fit on log-log axes: the fitted exponent dashed through the geometric centre of ``points`` ((x, y)
    of the cells the fit used), its bootstrap interval shaded, the statement's exponent dotted, the numbers at the
    right end (unlabelled: the series' colours stay)."""
    x, y = np.log(np.asarray(points, np.float64)).T
    if not np.isfinite(slope.estimate) or np.unique(x).size < 2:
        return
    x0, y0 = x.mean(), y.mean()
    xs = np.linspace(x.min(), x.max(), 32)
    line = lambda b: np.exp(y0 + b * (xs - x0))  # noqa: E731
    ax.plot(np.exp(xs), line(slope.estimate), "--", color=color, lw=1)
    if np.isfinite(slope.low):
        ax.fill_between(np.exp(xs), np.minimum(line(slope.low), line(slope.high)),
                        np.maximum(line(slope.low), line(slope.high)), color=color, alpha=0.15, lw=0)
    near = np.abs(y0 + slope.claim * (xs - x0) - y0) <= (y.max() - y.min()) / 2 + math.log(4)  # the data's height
    ax.plot(np.exp(xs[near]), line(slope.claim)[near], ":", color=color, lw=1)
    interval = f" [{slope.low:.2g}, {slope.high:.2g}]" if np.isfinite(slope.low) else ""
    ax.annotate(f"{slope.estimate:.2g}{interval} vs {slope.claim:.3g}", (np.exp(xs[-1]), line(slope.estimate)[-1]),
                fontsize=7, color=color, ha="right", va="bottom")


def _cell_label(cell) -> str:
    return ", ".join(f"{name} = {value:g}" if isinstance(value, float) else f"{name} = {value}"
                     for name, value in cell.items())
