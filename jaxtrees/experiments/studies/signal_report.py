"""000's lemmas and theorems beside the exact signal: what the learning and smoothed-base reports share.

Lemma 11 against the trials' empirical P[eps* <= t] (:func:`lemma11_check`); Theorems 7, 10 and 12 by their form over
the smoothed Gini cells (:func:`lipschitz_lines`, :func:`lipschitz_cells`, :func:`c_slopes`), and the figures' [form]
fits (:func:`eps_panel`, :func:`draw_form`).
"""

from __future__ import annotations

import math

import numpy as np

from jaxtrees.experiments import table as tables
from jaxtrees.experiments.report import summary, thresholds
from jaxtrees.experiments.studies import theory, verdicts

#: The failure probability in Theorem 7's ln(n / delta) (and Theorem 12's delta1 + delta2) where the figures and
#: reports scale m by it: 0.1, as their 90% success.
DELTA = 0.1

def lemma11_check(trials, by, alpha, c, k, which: str):
    """000 Lemma 11 with a union over the 3^k restrictions, uncapped, against each smoothed trial's cell's empirical
    P[eps* <= t] at its own t = eps* > 0 (trials with eps* = 0 count in every point's P, not as points)."""
    codes, _ = tables.group_codes(trials, by)
    eps = np.asarray(trials["eps_star"], np.float64)
    cdf = theory.empirical_cdf(codes, eps)
    bound = theory.lemma11_union_probability(eps, alpha, c, k, capped=False)
    positive = eps > 0
    zeros = int((~positive).sum())
    return verdicts.check("000 Lemma 11, union over the 3^k restrictions", "P[eps* <= t] <= 3^k (2/c)^k sqrt(t / (2 "
                        f"alpha^2)), {which}, uncapped", bound[positive], cdf[positive], "upper",
                        unit="smoothed trials", note=f"Measured: the empirical P[eps* <= t] of the trial's cell at its "
                        f"own t = eps* ({zeros:,} trials with eps* = 0 count in it).")


# ----------------------------------------------------------------------------- 000's Lipschitz theorems by their form

#: Bootstrap resamples of a form's slope.
REPLICATES = 1000

#: Impurity names as the reports write them.
IMPURITY_TEXT = {"entropy": "entropy", "gini": "Gini", "kearns_mansour": "Kearns-Mansour"}

def lipschitz_lines(cells, m, by, kind) -> list:
    """000's Theorems 7, 10 (parities) and 12 (juntas, smoothed-base) by their form over the smoothed Gini cells (the
    only built-in impurity that is strongly concave and Lipschitz, 000 Sec. 1.2): the exponent of 1/eps* in m90
    against Theorem 7's 4, of 1/c against Theorem 10's 4k - 4 (as derived) or Theorem 12's bound's own exponent at
    the cells' c, and of ln(n / delta) against 1 where n varies; an ``[outside]`` line for the other impurities."""
    info, inside = lipschitz_cells(cells, by, kind)
    lines = []
    if inside:
        lines.append(_theorem7_form(inside, m, info))
        lines.append(_c_form(inside, m, info, kind))
        if len({info[cell]["n"] for cell in inside}) > 1:
            lines.append(_n_form(inside, m, info, kind))
    others = sorted({IMPURITY_TEXT.get(info[cell]["impurity"], info[cell]["impurity"]) for cell in cells
                     if not theory.lipschitz(info[cell]["impurity"])})
    if others:
        count = sum(1 for cell in cells if not theory.lipschitz(info[cell]["impurity"]))
        hint = "" if inside else ("; no smoothed Gini cell in these rows (the default grids have them; `--set "
                                  "impurity=entropy,gini` with a c > 0 adds them)")
        lines.append(verdicts.outside("000 Thms 7, " + ("10" if kind == "parity" else "12"), f"the {count} "
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


def _slope(cells, m, x_of, label, claim, side="upper", offset=None):
    """A :class:`verdicts.Slope` of log m90 (less the cell's ``offset(cell)``, the bound's other factors in logs) on
    log x over ``cells`` (x per trial: ``x_of(cell, values)``), its reach from the m grid (:func:`verdicts.slope_reach`),
    its label prefixed with the count of cells that reach 90% (the fitted ones)."""
    keys = list(cells)
    success = [cells[c][0] > 0 for c in keys]
    xs = [np.asarray(x_of(c, cells[c][1]), np.float64) for c in keys]
    shift = np.asarray([0.0 if offset is None else offset(c) for c in keys])
    if offset is None:
        fit = thresholds.threshold_slope(success, xs, m, replicates=REPLICATES)
    else:
        fit = _offset_slope(success, xs, shift, np.asarray(m, np.float64))
    with np.errstate(divide="ignore"):
        reach = verdicts.slope_reach(np.log([np.median(x) for x in xs]), math.log(m[0]) - shift, math.log(m[-1]) - shift)
    fitted = int((thresholds.thresholds(np.stack([s.mean(0) for s in success])) >= 0).sum())
    return verdicts.Slope(f"{fitted} of {len(keys)} {label}", fit.estimate, fit.low, fit.high, claim, side,
                          fit.replicates, REPLICATES, reach)


def _offset_slope(success, xs, shift, m):
    """:func:`thresholds.threshold_slope` of log m90 - ``shift`` (per cell) on log x, with its bootstrap interval
    (trials resampled within each cell, as there)."""
    log_m = np.log(m)

    def fit(rates, x):  # rates [B, C, M], x [B, C]
        index = thresholds.thresholds(rates)
        with np.errstate(divide="ignore"):
            return thresholds.row_slopes(np.log(x), np.where(index >= 0, log_m[np.maximum(index, 0)] - shift, np.nan))

    estimate = fit(np.stack([s.mean(0) for s in success])[None], np.array([[np.median(v) for v in xs]]))[0]
    rng = np.random.default_rng(0)
    rates, medians = zip(*(thresholds.resampled_rates(s, v, REPLICATES, rng) for s, v in zip(success, xs)))
    return thresholds.percentile_interval(estimate, fit(np.stack(rates, 1), np.stack(medians, 1)))


def theorem7_offset(info, cell) -> float:
    """log of Theorem 7's factors besides eps^-4 at a cell: alpha^-2k k ln(n / delta) (alpha: the cell's)."""
    one = info[cell]
    return float(np.log(one["alpha"] ** (-2 * one["k"]) * one["k"] * math.log(one["n"] / DELTA)))


def _theorem7_form(cells, m, info):
    """000 Thm 7 by its form: the exponent of 1/eps* (cell medians) in m90 / (alpha^-2k k ln(n / delta)) against 4
    (the other factors divided out at their stated exponents, so alpha's and k's spread across the cells does not
    pass for eps*'s)."""
    with np.errstate(divide="ignore"):
        slope = _slope(cells, m, lambda cell, v: 1 / v["eps_star"], "Gini cells reaching 90%", 4.0,
                       offset=lambda cell: theorem7_offset(info, cell))
    return verdicts.Form("000 Thm 7", "m ~ beta^-2 gamma^2 eps^-4 alpha^-2k k ln(n / delta) suffices (Gini: beta^-2 "
                       "gamma^2 = 1/4)", f"exponent of 1/eps* (the cell's median) in m90 / (alpha^-2k k ln(n / "
                       f"{DELTA:g})), the theorem's other factors divided out, least squares over the cells reaching 90%",
                       (slope,))


def c_slopes(cells, m, info, kind) -> dict:
    """Per group of cells that differ only in c (at least two): its :class:`verdicts.Slope` of log m90 on log(1/c)
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
            label = f"cells at n = {one['n']}, alpha = {one['alpha']:g} (as printed: {printed:.3g})"
        else:
            bound = theory.theorem12_examples(alpha, c, one["k"], one["n"], DELTA / 2, DELTA / 2)
            claim = theory.exponent(bound, 1 / c)
            label = f"cells at n = {one['n']}, k = {one['k']}" + (f", {group[2]}" if group[2] else "") + \
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
        return verdicts.Form("000 Thm 10", "m ~ beta^-2 gamma^2 (2c)^(-4k+4) alpha^(-2k-8) k ln(n / delta) suffices (as "
                           "derived; the paper prints (2c)^(-4k-4))", "exponent of 1/c in m90 over the Gini cells "
                           "against the derived 4k - 4", slopes)
    alpha = "min(p-hat, 1 - p-hat) - c" if kind == "smoothed-base" else "1/2 - c"  # around a base, or around 1/2
    return verdicts.Form("000 Thm 12", "m ~ B^k beta^-2 gamma^2 c^(-8k) delta1^-8 alpha^(-2k-8) k ln(n / delta2) "
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
                     f"cells at k = {k}, c = {c:g}" + (f", {base}" if base else ""), 1.0)
              for (k, c, base), members in groups.items() if len({info[cell]["n"] for cell in members}) > 1]
    if not slopes:
        return None
    return verdicts.Form("000 Thms 7, 12 (ln n)", f"m grows as ln(n / delta) at fixed k and c (delta = {DELTA:g})",
                       "exponent of ln(n / delta) in m90 over the Gini cells against 1", tuple(slopes))


def eps_panel(ax, inside, m, m90, info):
    """m for 90% / (alpha^-2k k ln(n / delta)) against the cell's median 1/eps* over the Gini cells, with Theorem 7's
    [form] fit (exponent <= 4)."""
    with np.errstate(divide="ignore"):  # a cell whose median eps* is 0 has no finite 1/eps*: left out, and said
        points = [(float(np.median(1 / v["eps_star"])), m90[cell] / math.exp(theorem7_offset(info, cell)))
                  for cell, (_, v) in inside.items() if m90.get(cell) is not None]
    unplaced = sum(not np.isfinite(x) for x, _ in points)
    points = [(x, y) for x, y in points if np.isfinite(x)]
    if points:
        look = summary.series_style(ax)
        ax.plot(*zip(*sorted(points)), ls="none", color=look["color"], marker=look["marker"], label="Gini cells")
        draw_form(ax, points, _theorem7_form(inside, m, info).slopes[0], look["color"])
        ax.set_xscale("log")
        ax.set_yscale("log")
    left = f"; {unplaced} cell(s) with median eps* = 0 not placed" if unplaced else ""
    summary.panel(ax, "m for 90% / (alpha^-2k k ln(n / delta)) against 1/eps*\n(Thm 7: fit, 95% band; dotted: its 4"
                  f"{left})", "1/eps* (cell median)", xbase=None)
    ax.set_ylabel(f"m for 90% / (alpha^-2k k ln(n / {DELTA:g}))")


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
