"""The parity, juntas and trees studies' figures and reports: success over m, the thresholds table, and the exact
signal beside 000's theory (Lemmas 9 and 11, Theorems 7, 10 and 12).

The studies' own plot and report functions (:mod:`~jaxtrees.experiments.studies.learning`) call
:func:`success_plot`, :func:`threshold_report`, :func:`signal_plot` and :func:`signal_theory`.
"""

from __future__ import annotations

import math

import numpy as np

from jaxtrees.experiments import table as tables
from jaxtrees.experiments.report import summary
from jaxtrees.experiments.studies import theory, verdicts
from jaxtrees.experiments.studies.common import a_row_of_each, at_max, trial_codes, trials_by_cell
from jaxtrees.experiments.studies.signal_report import (DELTA, c_slopes, draw_form, eps_panel, lemma11_check,
                                                        lipschitz_cells, lipschitz_lines)

def success_plot(rows, stem, panel_by, curve_by, label, title, suptitle):
    """One panel per value of ``panel_by`` (titled ``title(*values)``), in it one success-rate
    curve over m per value of ``curve_by`` (labelled ``label(*values)``)."""
    panels = {}
    for g in tables.rates(rows, [*panel_by, *curve_by, "m"], "success"):  # one pass over the rows
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


def threshold_report(rows, by, title, extra=None):
    """Per cell: success rate at the largest m, the smallest m with >= 90% success, mean error."""
    header = [*by, "trials", "P[success] at max m", "m for 90%", "mean exact error at max m"]
    if extra:
        header.append(f"P[{extra}] at max m")
    by_m = {}
    for g in tables.rates(rows, [*by, "m"], "success"):
        by_m.setdefault(tuple(g[name] for name in by), []).append(g)
    errors = {tuple(g[name] for name in [*by, "m"]): g for g in tables.means(rows, [*by, "m"], "exact_error")}
    extras = ({tuple(g[name] for name in [*by, "m"]): g for g in tables.rates(rows, [*by, "m"], extra)}
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


def _k_n_alpha(rows, kind):
    """Per row: k, n, c and alpha (p_i in (alpha, 1 - alpha)) as floats: a parity cell's own alpha and k = log2 n,
    a junta cell's k, n and alpha = 1/2 - c (c-smoothed around 1/2)."""
    c = np.asarray(rows["c"], np.float64)
    if kind == "parity":
        k = np.asarray(rows["log2_n"], np.float64)
        return k, 2.0**k, c, np.asarray(rows["alpha"], np.float64)
    return np.asarray(rows["k"], np.float64), np.asarray(rows["n"], np.float64), c, 0.5 - c


#: The columns the signal figure and Theory section read (a Table of only these is taken apart, not every column).
SIGNAL_INPUTS = ("m", "c", "k", "n", "log2_n", "alpha", "eps_star", "p_min", "success")


def _signal_trials(rows, by):
    """One row per trial (its largest m), smoothed (c > 0) with a finite signal (eps* = 0 kept: the event Lemma 11
    bounds)."""
    trials = at_max(rows.select(*by, *SIGNAL_INPUTS), by, "m")
    eps = np.asarray(trials["eps_star"], np.float64)
    return trials.take((np.asarray(trials["c"], np.float64) > 0) & np.isfinite(eps))


def _thresholds(rows, by) -> dict:
    """Per cell of ``by``: the smallest m from which the success rate stays >= 0.9 (None: not reached)."""
    by_m = {}
    for g in tables.rates(rows, [*by, "m"], "success"):
        by_m.setdefault(tuple(g[name] for name in by), []).append((g["m"], g["rate"]))
    return {cell: summary.threshold(points) for cell, points in by_m.items()}


def _scale(rows, kind):
    """Theorem 7's eps*^-4 p_min^-2 k ln(n / delta) per row (k and n per cell), computed once per trial (eps* and
    p_min are the trial's)."""
    codes, size = trial_codes(rows)
    one = a_row_of_each(codes, size)
    if kind == "parity":
        k = tables.on_cells(rows, lambda k: np.asarray(k, np.float64), "log2_n")[one]
        n = 2.0**k
    else:
        k, n = (tables.on_cells(rows, lambda v: np.asarray(v, np.float64), name)[one] for name in ("k", "n"))
    return theory.theorem7_scale(np.asarray(rows["eps_star"])[one], np.asarray(rows["p_min"])[one], k, n, DELTA)[codes]


def signal_theory(rows, by, kind) -> str:
    """The Theory section of the parity and juntas reports: 000 Lemma 9 (parities: an identity of the (alpha, c)
    construction) or Lemma 11 (juntas) against the exact signal eps*, and Theorems 7, 10 (parities) and 12 (juntas)
    tested by their form on the Gini cells (:func:`lipschitz_lines`)."""
    if "eps_star" not in rows:
        return ""
    lines = []
    if kind == "parity":
        lines.append(verdicts.identity("000 Lemma 9", "eps* > alpha^2 (2c)^(k-1) for p_j in (alpha, 1 - alpha), |p_j - "
                                     "1/2| >= c (the exact signal p_j (1 - p_j) prod |2 p_i - 1| of every (alpha, c) "
                                     "parity)"))
    else:
        trials = _signal_trials(rows, by)
        k, n, c, alpha = _k_n_alpha(trials, kind)
        lines.append(lemma11_check(trials, by, alpha, c, k, "alpha = 1/2 - c"))
    cells, m = trials_by_cell(rows, by, ("eps_star",))
    lines += lipschitz_lines(cells, m, by, kind)
    return "\n" + verdicts.section(lines, "Each statement of the seed against the measured points, its kind first. "
                                        "eps*: per trial, the smallest over restrictions w of the support with f_w "
                                        "not constant of the largest |I(D_w, i)| (exact); p_min = prod_J min(p_j, 1 "
                                        "- p_j); m90: the smallest m from which a cell's success rate stays >= 0.9.")


#: Points drawn per empirical CDF (evenly spaced in rank; a cell's trials may be millions): exact at each of them.
CURVE_POINTS = 1024


@summary.styled
def signal_plot(rows, stem, by, kind):
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
        for g in tables.rates(rows.select(*by, "success").with_columns(_bin=bins), [*by, "_bin"], "success"):
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
    eps_panel(axes[4], inside, m, m90, info)
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


def _cell_label(cell) -> str:
    return ", ".join(f"{name} = {value:g}" if isinstance(value, float) else f"{name} = {value}"
                     for name, value in cell.items())
