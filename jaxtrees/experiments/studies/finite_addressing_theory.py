"""002 Remark 15 beside the addressing-samples trials: the report's "Theory" section and its figure's [form] fit.

:func:`theory_section` writes the section (Remark 15 by its form over three or more k, the project's 1/m-gain
refinement of its O(k), the (5/2)^(4k) sufficient condition and the lightest-restriction heuristic); :func:`form_line`
and :func:`draw_form` draw Remark 15's fit; :func:`hypotheses` says where Lemmas 12 and 14 hold.
"""

from __future__ import annotations

import numpy as np

from jaxtrees.experiments import table as tables
from jaxtrees.experiments.report import thresholds
from jaxtrees.experiments.studies import theory, verdicts
from jaxtrees.experiments.studies.common import trials_by_cell

BY = ["k", "c", "s", "impurity"]


def hypotheses(cell) -> dict:
    """Lemma 12's c >= c0 = ln 5 / delta and, for Gini (an (8, 8)-impurity), Lemma 14's k >= k0 (kappa of Lemma 8),
    on which Remark 15 builds: ``delta``, ``c0``, ``k0`` (None: not Gini) and ``applies``."""
    delta = 0.5 - cell["s"]
    c0 = float(theory.lemma14_c0(delta))
    k0 = float(theory.lemma14_k0(theory.lemma8_kappa(delta))) if cell["impurity"] == "gini" else None
    return {"delta": delta, "c0": c0, "k0": k0, "applies": k0 is not None and cell["c"] >= c0 and cell["k"] >= k0}


def theory_section(rows) -> str:
    """002 Remark 15 by its form (log2 m against h and k, both coefficients positive) where Lemmas 12 and 14 hold, the
    project's 1/m-gain refinement of its O(k) over every (c, s, impurity) group with three or more k, the (5/2)^(4k)
    sufficient condition (vacuous where its line lies below depth 0), the lightest restriction's slope (the project's
    heuristic), and the cells outside the hypotheses."""
    cells, m = trials_by_cell(rows, BY, matrix="first_address_depth")
    info = {cell: dict(zip(BY, cell)) for cell in cells}
    inside = [cell for cell in cells if hypotheses(info[cell])["applies"]]
    lines = []
    if inside:
        lines.append(_remark15_form(cells, m, inside, info))
    gain = _gain_form(cells, m, info)
    if gain is not None:
        lines.append(gain)
    if inside:
        lines += [constants(rows, m), _lightest_form(cells, m, inside, info)]
    out = [cell for cell in cells if cell not in inside]
    if out:
        lines.append(verdicts.outside("002 Remark 15", "the cells " + "; ".join(_cell_text(info[cell]) for cell in out),
                                    "it builds on Lemma 14, which needs an (alpha, L)-impurity (Gini here), c >= c0 "
                                    "= ln 5 / delta (Lemma 12) and k >= k0 (the table's 'Lemmas 12, 14 hold')"))
    return verdicts.section(lines, "Each statement against the measured points, its kind first. h: a trial's first "
                                 "addressing depth at m (the shallowest node that queries an addressing bit); medians "
                                 "over a cell's trials, where they lie strictly inside (0, 2^k).")


#: Bootstrap resamples of Remark 15's slopes.
REPLICATES = 1000


def _cell_text(info) -> str:
    return f"k = {info['k']}, c = {info['c']}, s = {info['s']:g}, {info['impurity']}"


def _median_depths(cells, m, keys, index=None) -> dict:
    """Per cell of ``keys``: its median first addressing depth per m (none within the bound: +inf), over the trials
    ``index[cell]`` (all: None)."""
    out = {}
    for cell in keys:
        depth = cells[cell][0] if index is None else cells[cell][0][index[cell]]
        out[cell] = np.quantile(np.where(depth < 0, np.inf, depth), 0.5, method="inverted_cdf", axis=0)
    return out


def _bootstrap(cells, m, keys, statistic):
    """:func:`thresholds.bootstrap_statistic` of ``statistic(medians)`` with trials resampled within each cell."""
    sizes = [len(cells[cell][0]) for cell in keys]
    offsets = np.cumsum([0, *sizes])

    def of(index):
        split = {cell: index[(index >= a) & (index < b)] - a for cell, a, b in zip(keys, offsets, offsets[1:])}
        return statistic(_median_depths(cells, m, keys, split))

    strata = np.repeat(np.arange(len(keys)), sizes)
    return thresholds.bootstrap_statistic(of, strata, replicates=REPLICATES)


def _coefficient(medians, m, keys, info, which: int, least_k: int = 1) -> float:
    """Least squares of log2 m on (h, k, 1) over the cells ``keys`` and the m where the cell's median h lies inside
    (0, 2^k): the coefficient of h (``which`` 0) or of k (1); NaN with fewer than ``least_k`` distinct k among the
    points or a rank-deficient design."""
    h, k, y = _hk_points(medians, m, keys, info)
    if np.unique(k).size < least_k:
        return float("nan")
    design = np.stack([h, k, np.ones_like(h)], axis=1)
    if h.size < 3 or np.linalg.matrix_rank(design) < (3 if np.unique(k).size > 1 else 2):
        return float("nan")
    if np.unique(k).size == 1:  # one k: h's coefficient alone
        return float(np.polyfit(h, y, 1)[0]) if which == 0 else float("nan")
    return float(np.linalg.lstsq(design, y, rcond=None)[0][which])


def _hk_points(medians, m, keys, info):
    """``(h, k, log2 m)`` over the cells ``keys`` and the m where the cell's median h lies inside (0, 2^k)."""
    h = np.concatenate([medians[cell] for cell in keys])
    k = np.concatenate([np.full(m.size, float(info[cell]["k"])) for cell in keys])
    y = np.concatenate([np.log2(m)] * len(keys))
    keep = np.concatenate([(medians[cell] > 0) & (medians[cell] < 2 ** info[cell]["k"]) for cell in keys])
    return h[keep], k[keep], y[keep]


def _k_reach(m, keys, info) -> tuple[float, float]:
    """The k coefficient's reach: the slopes of log2 m on the cells' k that an m grid can show."""
    return verdicts.slope_reach([info[cell]["k"] for cell in keys], np.log2(m[0]), np.log2(m[-1]))


def _coefficient_slope(cells, m, keys, info, which, label, claim, side, least_k=1, reach=(-np.inf, np.inf)):
    """A :class:`verdicts.Slope` of :func:`_coefficient` with trials resampled within each cell."""
    fit = _bootstrap(cells, m, keys, lambda medians: _coefficient(medians, m, keys, info, which, least_k))
    return verdicts.Slope(label, fit.estimate, fit.low, fit.high, claim, side, fit.replicates, REPLICATES, reach)


def _remark15_form(cells, m, inside, info):
    """Remark 15: 2^O(h + k) examples suffice and 2^Omega(h + k) are needed, so log2 m = Theta(h + k): in the least
    squares of log2 m on (h, k) over the cells where Lemmas 12 and 14 hold, both coefficients must be positive (k's
    from three or more k)."""
    ks = sorted({info[cell]["k"] for cell in inside})
    count = f"{len(inside)} cell{'s' if len(inside) > 1 else ''} where Lemmas 12 and 14 hold, k = " + \
        ", ".join(map(str, ks))
    slopes = (_coefficient_slope(cells, m, inside, info, 0, f"per unit of h ({count})", 0.0, "positive"),
              _coefficient_slope(cells, m, inside, info, 1, "per unit of k" + ("" if len(ks) >= 3 else
                                                                                " (needs three or more k)"),
                                 0.0, "positive", least_k=3, reach=_k_reach(m, inside, info)))
    return verdicts.Form("002 Remark 15", "2^O(h + k) examples make a greedy tree query memory bits to depth h and "
                       "2^Omega(h + k) are needed, so log2 m = Theta(h + k)", "doublings of m per unit of h and per "
                       "unit of k at the first addressing depth h, least squares of log2 m on (h, k) over the cells' "
                       "medians", slopes)


def _gain_form(cells, m, info):
    """The project's refinement of Remark 15's O(k): a zero-gain feature's empirical Gini gain shrinks like 1/m (not
    1/sqrt(m)), so a node's memory bit (true gain >= 2^(-2k) / (4 kappa), Lemma 14) beats every addressing bit's
    spurious gain once the node holds about 2^(2k) examples: at a fixed h, log2 m grows by <= 2 per unit of k (the
    (5/2)^(4k) derivation: 4 log2(5/2) = 5.29). Per (c, s, impurity) group with three or more k, all its k."""
    groups = {}
    for cell in cells:
        groups.setdefault((info[cell]["c"], info[cell]["s"], info[cell]["impurity"]), []).append(cell)
    slopes = []
    for (c, s, name), keys in groups.items():
        ks = sorted({info[cell]["k"] for cell in keys})
        if len(ks) >= 3:
            slopes.append(_coefficient_slope(cells, m, keys, info, 1, f"c = {c}, s = {s:g}, {name}, k = "
                                             + ", ".join(map(str, ks)), 2.0, "upper", least_k=3,
                                             reach=_k_reach(m, keys, info)))
    if not slopes:
        return None
    return verdicts.Form("002 Remark 15's O(k), the project's refinement (not the paper's)", "a zero-gain feature's "
                       "empirical gain shrinks like 1/m, so about 2^(2k) examples at a node let the memory bit's gain "
                       ">= 2^(-2k) / (4 kappa) beat every addressing bit's spurious one: log2 m <= 2k + O(h)",
                       "doublings of m per unit of k at a fixed first addressing depth h (the k coefficient of log2 m "
                       "on (h, k), least squares over the cells' medians), against 2 (the (5/2)^(4k) derivation's: "
                       f"{4 * theory.LOG2_FIVE_HALVES:.2f})", tuple(slopes))


def _lightest_form(cells, m, inside, info):
    """The project's heuristic for Remark 15's O(h), not the paper's: if each level kept exactly a delta share of the
    sample, the lightest node would run out of examples first and the whole tree's first addressing depth would grow
    by 1 / log2(1 / delta) per doubling of m (the slope of :func:`theory.remark15_depth`); per cell, the slope of its
    median depth on log2 m, two-sided."""
    slopes = []
    for cell in inside:
        def statistic(medians, cell=cell):
            depth = medians[cell]
            keep = (depth > 0) & (depth < 2 ** info[cell]["k"])
            return float(thresholds.row_slopes(np.log2(m)[None], np.where(keep, depth, np.nan)[None])[0])

        fit = _bootstrap(cells, m, [cell], statistic)
        delta = hypotheses(info[cell])["delta"]
        claim = float(theory.remark15_depth(2.0, info[cell]["k"], delta) - theory.remark15_depth(1.0, info[cell]["k"],
                                                                                                   delta))
        slopes.append(verdicts.Slope(_cell_text(info[cell]), fit.estimate, fit.low, fit.high, claim, "equal",
                                   fit.replicates, REPLICATES))
    return verdicts.Form("002 Remark 15's O(h), the project's heuristic (not the paper's)", "if every level kept "
                       "exactly a delta share of the sample, the lightest node would run out of examples first, so h "
                       "would grow by 1 / log2(1 / delta) per doubling of m; the remark's own derivation (the "
                       "sufficient condition above) bounds h from below only", "the whole tree's median first "
                       "addressing depth per doubling of m against the heuristic's 1 / log2(1 / delta)", tuple(slopes))


def constants(rows, m):
    """The (5/2)^(4k) line, a sufficient condition (the project's constants, constant 1): m >= delta^-h (5/2)^(4k)
    examples keep every node at depth <= h on memory bits, i.e. the first addressing depth h >= (log2 m - 4k
    log2(5/2)) / log2(1 / delta); tested one-sided against every (trial, m) point inside the hypotheses (m < that m at
    the measured h), and vacuous where the line lies below depth 0 at every m of the cells (no h can cross it)."""
    codes, keys = tables.groups(rows, BY)
    cells = [dict(zip(BY, key)) for key in keys]
    hyp = [hypotheses(cell) for cell in cells]
    applies = np.asarray([h["applies"] for h in hyp], bool)[codes]
    k = np.asarray([cell["k"] for cell in cells], np.float64)[codes]
    delta = np.asarray([h["delta"] for h in hyp], np.float64)[codes]
    depth = np.asarray(rows["first_address_depth"], np.float64)
    claim = applies & (depth >= 0) & (depth < 2.0**k)  # Lemma 14 speaks of restrictions of size < 2^k
    line = theory.remark15_depth(m.max(), np.asarray([c["k"] for c, h in zip(cells, hyp) if h["applies"]]),
                                 np.asarray([h["delta"] for h in hyp if h["applies"]]))
    top = float(np.max(line)) if line.size else float("nan")
    found = verdicts.check("002 Remark 15, the (5/2)^(4k) sufficient condition (the project's constants, not the "
                           "paper's)", "m >= delta^-h (5/2)^(4k) examples keep every node at depth <= h on memory bits, "
                           "so h >= (log2 m - 4k log2(5/2)) / log2(1 / delta), and m < delta^-h (5/2)^(4k) at a "
                           "measured h", theory.remark15_examples(depth, k, delta)[claim],
                           np.asarray(rows["m"], np.float64)[claim], "upper", unit="(trial, m) points",
                           note=f"The line's largest depth over these cells' m: {top:.2f}" + (
                               " (below 0: no measured h can cross it; it is a sufficient condition, not a "
                               "prediction of h)." if top < 0 else "."))
    return found


def form_line(rows):
    """Remark 15's [form] fit for the figure: ``(slope of h, (a, b, c) of log2 m = a h + b k + c, mean h)``; None
    without a fit (one k: b = 0, c absorbing it)."""
    cells, m = trials_by_cell(rows, BY, matrix="first_address_depth")
    info = {cell: dict(zip(BY, cell)) for cell in cells}
    inside = [cell for cell in cells if hypotheses(info[cell])["applies"]]
    if not inside:
        return None
    h, k, y = _hk_points(_median_depths(cells, m, inside), m, inside, info)
    slope = _remark15_form(cells, m, inside, info).slopes[0]
    if h.size < 2 or not np.isfinite(slope.estimate):
        return None
    if np.unique(k).size > 1 and np.linalg.matrix_rank(np.stack([h, k, np.ones_like(h)], 1)) == 3:
        coef = np.linalg.lstsq(np.stack([h, k, np.ones_like(h)], 1), y, rcond=None)[0]
    else:
        a, c = np.polyfit(h, y, 1)
        coef = np.array([a, 0.0, c - 0.0])
    return slope, tuple(float(v) for v in coef), float(h.mean())


def draw_form(ax, form, k, depths, color):
    """log2 m = a h + b k + c over the depths, dotted, with h's coefficient's 95% band about the fitted points' mean
    h."""
    slope, (a, b, c), h0 = form
    h = depths.astype(np.float64)
    at = a * h0 + b * k + c
    ax.plot(h, a * h + b * k + c, ":", color=color, lw=1.5)
    if np.isfinite(slope.low):
        ax.fill_between(h, at + slope.low * (h - h0), at + slope.high * (h - h0), color=color, alpha=0.1, lw=0)
