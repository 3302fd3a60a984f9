"""002 Remark 15, the finite-sample counterexample: the ``addressing-samples`` study.

Remark 15: Lemma 14's gains (memory bits Omega((1/2)^(2k)), addressing bits O((2/5)^(2k))) survive estimation from a
sample when every estimate is accurate to O((2/5)^(2k)), which 2^(O(h + k)) examples give for every restriction of
size <= h; so a greedy tree grown on m examples queries memory bits only down to a depth that grows with log2 m.
Each trial draws a c-smoothed distribution and m_max examples of f_{c,k}, grows a greedy tree (empirical gains) on
every prefix m and records the shallowest depth at which it queries an addressing bit, in the whole tree and on a
random input's path; the report tests the remark by its form, log2 m = Theta(h + k), and the project's derivation of
its O(h) by the lightest restriction's slope (:func:`~jaxtrees.experiments.studies.theory.remark15_depth`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxtrees import targets
from jaxtrees.core import checks, distributions, sampling
from jaxtrees.core.impurity import BUILTIN as IMPURITIES
from jaxtrees.core.impurity import NAMES as IMPURITY_NAMES
from jaxtrees.experiments.report import summary, thresholds
from jaxtrees.experiments import table as tables
from jaxtrees.experiments.study import Compile, Study
from jaxtrees.experiments.studies import theory, verdicts
from jaxtrees.experiments.studies.common import CPU_OPT_LEVEL, at_max, trials_by_cell
from jaxtrees.experiments.study.trials import PRECISION_BITS, on_prefixes, sample_sizes, trial_keys
from jaxtrees.experiments.study.trials import impurity_of as impurity
from jaxtrees.hypotheses import tree
from jaxtrees.learners import GrowthRule
from jaxtrees.learners.greedy import grow


def max_depth(params) -> int:
    """The trees' depth bound: 2^k + 1 (every memory bit, then one more query) or log2(m_max) // 2 + 2, the smaller
    (at depth h the lightest node of a delta-balanced tree keeps about m delta^h examples: past log2(m) / 2 at
    delta = 1/4 a greedy tree has run out of examples somewhere)."""
    return int(min(2 ** params["k"] + 1, int(np.log2(params["m_max"])) // 2 + 2))


def first_address_depth(t, n_address: int):
    """The shallowest depth at which the heap tree ``t`` queries an addressing bit (feature < n_address); -1: none."""
    levels = jnp.asarray(tree.node_levels(t.max_depth))
    address = (t.feature >= 0) & (t.feature < n_address)
    first = jnp.min(jnp.where(address, levels, t.max_depth + 1))
    return jnp.where(first > t.max_depth, -1, first).astype(jnp.int32)


def path_address_depth(t, x, n_address: int):
    """The depth of the first addressing query on input ``x``'s path through ``t``; -1: none."""
    def step(level, state):
        node, first = state
        feature = t.feature[node]
        split = feature >= 0
        first = jnp.where((first < 0) & split & (feature < n_address), level, first)
        return jnp.where(split, 2 * node + 1 + x[jnp.maximum(feature, 0)].astype(jnp.int32), node), first

    return jax.lax.fori_loop(0, t.max_depth, step, (jnp.int32(0), jnp.int32(-1)))[1]


def _trial(key, params):
    """002 Remark 15: greedy trees on m examples of f_{c,k}: first addressing depth against log2 m"""
    f = targets.addressing(params["c"], params["k"])
    keys = trial_keys(key, "distribution", "sample", "input")
    p = sampling.quantize(distributions.Smoothed(jnp.float32(0.5), params["s"]).marginals(keys["distribution"], f.n),
                          PRECISION_BITS)
    x = jax.random.bernoulli(keys["input"], p)
    name, traced = impurity(params)
    rule = GrowthRule(max_depth=max_depth(params), impurity=name)
    sample = sampling.draw(keys["sample"], p, f, params["m_max"], precision_bits=PRECISION_BITS)

    def fit(data):
        t = grow(data, rule, impurity=traced)
        return first_address_depth(t, f.n_address), path_address_depth(t, x, f.n_address), tree.depth(t)

    first, path, depth = on_prefixes(fit, sample, sample_sizes(params))
    return {"first_address_depth": first, "path_address_depth": path, "tree_depth": depth}


def _check(params):
    k = checks.integer("k", params["k"], low=1, high=8)
    c = checks.integer("c", params["c"], low=1, high=64)
    checks.real("s", params["s"], low=0.0, high=0.5, high_open=True)
    checks.choice("impurity", params["impurity"], IMPURITIES)
    m_min = checks.integer("m_min", params["m_min"], low=1)
    m_max = checks.integer("m_max", params["m_max"], low=1, high=2**22)
    if m_min > m_max or m_max & (m_max - 1) or m_min & (m_min - 1):
        raise ValueError(f"m_min and m_max must be powers of two with m_min <= m_max, got {m_min} and {m_max}")
    n = c * k * k + 2**k
    if n * m_max > 2**31:
        raise ValueError(f"n * m_max must be <= 2^31 (sample bits per trial), got n = c k^2 + 2^k = {n} and {m_max}")


# ----------------------------------------------------------------------------- report and figures

BY = ["k", "c", "s", "impurity"]


def hypotheses(cell) -> dict:
    """Lemma 12's c >= c0 = ln 5 / delta and, for Gini (an (8, 8)-impurity), Lemma 14's k >= k0 (kappa of Lemma 8),
    on which Remark 15 builds: ``delta``, ``c0``, ``k0`` (None: not Gini) and ``applies``."""
    delta = 0.5 - cell["s"]
    c0 = float(theory.lemma14_c0(delta))
    k0 = float(theory.lemma14_k0(theory.lemma8_kappa(delta))) if cell["impurity"] == "gini" else None
    return {"delta": delta, "c0": c0, "k0": k0, "applies": k0 is not None and cell["c"] >= c0 and cell["k"] >= k0}


def _depths(rows, column):
    """A depth column as floats, -1 (no addressing query within the bound) as +inf."""
    depth = np.asarray(rows[column], np.float64)
    return np.where(depth < 0, np.inf, depth)


def _medians(rows, column):
    """``{cell: (log2 m, median, lower quartile, upper quartile)}`` of a depth column per cell of BY."""
    keys, q = tables.group_quantiles(rows, [*BY, "m"], _depths(rows, column), [0.5, 0.25, 0.75])
    out = {}
    for key, (median, low, high) in zip(keys, q):
        out.setdefault(key[:-1], []).append((np.log2(key[-1]), median, low, high))
    return {cell: tuple(np.asarray(v) for v in zip(*points)) for cell, points in out.items()}


def _slope(log2_m, median, k):
    """Least-squares slope and depth-0 intercept (in log2 m) of the median depth over the m where it lies strictly
    between 0 and 2^k; (nan, nan) with fewer than two such m."""
    inside = np.isfinite(median) & (median > 0) & (median < 2**k)
    if np.unique(log2_m[inside]).size < 2:
        return float("nan"), float("nan")
    slope, offset = np.polyfit(log2_m[inside], median[inside], 1)
    return float(slope), float(-offset / slope) if slope else float("nan")


def _report(rows):
    tree_medians, path_medians = _medians(rows, "first_address_depth"), _medians(rows, "path_address_depth")
    top = at_max(rows, BY, "m")
    depths = {tuple(g[name] for name in BY): g for g in tables.means(top, BY, "tree_depth")}
    table = []
    for cell, (log2_m, median, _, _) in tree_medians.items():
        info = dict(zip(BY, cell))
        hyp = hypotheses(info)
        slope, zero = _slope(log2_m, median, info["k"])
        paths = path_medians[cell][1]
        path_slope, _ = _slope(log2_m, paths, info["k"])
        grown = depths[cell]
        table.append([*cell, info["c"] * info["k"] ** 2 + 2 ** info["k"],
                      ("yes" if hyp["applies"] else "no") + f" (c0 = {hyp['c0']:.2f}" +
                      ("" if hyp["k0"] is None else f", k0 = {hyp['k0']:.2f}") + ")",
                      2 ** info["k"], max_depth({**info, "m_max": int(rows["m"].max())}), grown["trials"],
                      _depth_list(log2_m, median), _depth_list(log2_m, paths),
                      f"{slope:.2f} (lightest restriction: {1 / np.log2(1 / hyp['delta']):.2f}), {path_slope:.2f}",
                      f"{zero:.1f} (project's constants: {4 * info['k'] * theory.LOG2_FIVE_HALVES:.1f})",
                      f"{grown['mean']:.2f}"])
    header = [*BY, "n", "Lemmas 12, 14 hold", "2^k", "depth bound", "trials",
              "median first addressing depth, tree (log2 m: depth)", "the same on a random input's path",
              "slope per doubling of m: tree, path", "log2 m at depth 0 (tree)", "mean tree depth at max m"]
    text = ("Each trial: a c-smoothed distribution (p_i in [1/2 - s, 1/2 + s], delta-balanced with delta = 1/2 - s), "
            "m_max examples of f_{c,k} (c k^2 addressing bits, then 2^k memory bits), a greedy tree grown on every "
            "prefix m (empirical gains, ties to the lowest index, depth bound as in the table). First addressing "
            "depth: the shallowest node that queries an addressing bit (`>` : none within the depth bound). Slope and "
            "depth-0 point: least squares of the median over the m where it lies strictly between 0 and 2^k; the "
            "project's derivation of the remark (constant 1): the lightest restriction's 1 / log2(1 / delta) per "
            "doubling, against the whole tree (a random path's share halves per level: about 1), and 4k log2(5/2).")
    return summary.section("Finite samples: f_{c,k}'s first addressing depth against log2 m (002 Remark 15)", text,
                           header, table) + "\n" + _theory(rows)


def _depth_list(log2_m, median) -> str:
    return ", ".join(f"{int(x)}: {int(d) if np.isfinite(d) else '>'}" for x, d in zip(log2_m, median))


def _theory(rows) -> str:
    """002 Remark 15 by its form (log2 m at the first addressing depth h against h + k) where Lemmas 12 and 14 hold,
    the project's derivation of its O(h) (the whole tree's depth against the lightest restriction's slope), the
    project's explicit constants delta^-h (5/2)^(4k), and the cells outside the hypotheses."""
    cells, m = trials_by_cell(rows, BY, matrix="first_address_depth")
    info = {cell: dict(zip(BY, cell)) for cell in cells}
    inside = [cell for cell in cells if hypotheses(info[cell])["applies"]]
    lines = []
    if inside:
        lines += [_remark15_form(cells, m, inside, info), _lightest_form(cells, m, inside, info), _constants(rows)]
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


def _remark15_form(cells, m, inside, info):
    """Remark 15: 2^O(h + k) examples suffice and 2^Omega(h + k) are needed, so log2 m = Theta(h + k): the slope of
    log2 m on h + k (the cells' median h where inside (0, 2^k)) must be positive."""
    def statistic(medians):
        return float(thresholds.row_slopes(*(v[None] for v in _remark15_points(medians, m, inside, info)))[0])

    fit = _bootstrap(cells, m, inside, statistic)
    slope = verdicts.Slope(f"{len(inside)} cell{'s' if len(inside) > 1 else ''} where Lemmas 12 and 14 hold",
                         fit.estimate, fit.low, fit.high, 0.0, "positive", fit.replicates, REPLICATES)
    return verdicts.Form("002 Remark 15", "2^O(h + k) examples make a greedy tree query memory bits to depth h and "
                       "2^Omega(h + k) are needed, so log2 m = Theta(h + k)", "doublings of m per unit of h + k at the "
                       "first addressing depth h, least squares over the cells' medians", (slope,))


def _remark15_points(medians, m, inside, info):
    """``(h + k, log2 m)`` over the cells ``inside`` and the m where the cell's median h lies inside (0, 2^k)."""
    x = np.concatenate([medians[cell] + info[cell]["k"] for cell in inside])
    y = np.concatenate([np.log2(m)] * len(inside))
    keep = np.concatenate([(medians[cell] > 0) & (medians[cell] < 2 ** info[cell]["k"]) for cell in inside])
    return x[keep], y[keep]


def _lightest_form(cells, m, inside, info):
    """The project's derivation of Remark 15's O(h): a restriction of h bits keeps a share >= delta^h of the sample, so
    the lightest node runs out of examples first and the whole tree's first addressing depth grows by 1 / log2(1 /
    delta) per doubling of m (:func:`theory.remark15_depth`); per cell, the slope of its median depth on log2 m."""
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
    return verdicts.Form("002 Remark 15, the project's derivation of its O(h)", "a restriction of h memory bits keeps a "
                       "share >= delta^h of the sample, so the lightest node runs out of examples first", "the whole "
                       "tree's median first addressing depth per doubling of m against 1 / log2(1 / delta)",
                       tuple(slopes))


def _constants(rows):
    """The project's explicit constants, m = delta^-h (5/2)^(4k) (gain estimation as mean estimation to (2/5)^(2k),
    constant 1), against every (trial, m) point inside the hypotheses."""
    codes, keys = tables.groups(rows, BY)
    cells = [dict(zip(BY, key)) for key in keys]
    hyp = [hypotheses(cell) for cell in cells]
    applies = np.asarray([h["applies"] for h in hyp], bool)[codes]
    k = np.asarray([cell["k"] for cell in cells], np.float64)[codes]
    delta = np.asarray([h["delta"] for h in hyp], np.float64)[codes]
    depth = np.asarray(rows["first_address_depth"], np.float64)
    claim = applies & (depth >= 0) & (depth < 2.0**k)  # Lemma 14 speaks of restrictions of size < 2^k
    return verdicts.check("002 Remark 15 with the project's constants (not the paper's)", "m >= delta^-h (5/2)^(4k) "
                        "examples keep every node at depth <= h on memory bits, so m < that at a measured first "
                        "addressing depth h", theory.remark15_examples(depth, k, delta)[claim],
                        np.asarray(rows["m"], np.float64)[claim], "upper", unit="(trial, m) points")


@summary.styled
def _plot(rows, stem):
    """Per (s, impurity), the whole tree and a random input's path: log2 m against the median first addressing
    depth (quartiles shaded), the 2^k horizon (dash-dot) where it lies within the depth bound, Remark 15 with the
    project's constants, log2 m = h log2(1 / delta) + 4k log2(5/2) (dashed: vacuous at this size), and on the whole
    tree Remark 15's [form] fit, log2 m linear in h + k over the cells where Lemmas 12 and 14 hold (its 95% band)."""
    columns = (("first_address_depth", "whole tree"), ("path_address_depth", "a random input's path"))
    panels = {}
    for column, where in columns:
        for cell, points in _medians(rows, column).items():
            info = dict(zip(BY, cell))
            panels.setdefault((info["s"], info["impurity"], where), []).append((info, points))
    fig, axes = summary.figure(len(panels))
    counts = np.bincount(tables.group_codes(rows, [*BY, "m"])[0]).tolist()
    top = int(rows["m"].max())
    form = _form_line(rows)
    constants = "Remark 15, the project's constants" + (": vacuous at this size" if _constants(rows).kind == "vacuous"
                                                         else "")
    for ax, ((s, name, where), curves) in zip(axes, panels.items()):
        for info, (log2_m, median, low, high) in curves:
            look = summary.series_style(ax)
            shown = np.isfinite(median)
            ax.plot(median[shown], log2_m[shown], "-", color=look["color"], marker=look["marker"], ms=5,
                    label=f"k = {info['k']}, c = {info['c']}")
            ax.fill_betweenx(log2_m, low, np.where(np.isfinite(high), high, np.nan), color=look["color"], alpha=0.15)
            bound = max_depth({**info, "m_max": top})
            depths = np.arange(0, bound + 1)
            ax.plot(depths, np.log2(theory.remark15_examples(depths, info["k"], 0.5 - s)), "--", color=look["color"],
                    lw=1)
            if 2 ** info["k"] <= bound:
                ax.axvline(2 ** info["k"], color=look["color"], lw=0.8, ls="-.")
            if where == "whole tree" and form is not None and hypotheses(info)["applies"]:
                _draw_form(ax, form, info["k"], depths, look["color"])
        ax.plot([], [], "k--", lw=1, label=constants)
        fit = "; dotted: its form's fit, 95% band" if where == "whole tree" and form is not None else ""
        summary.panel(ax, f"{where}, s = {s:g}, {name}\n(dashed: Remark 15 with the project's constants{fit})",
                      "first addressing depth h", xbase=None)
        ax.set_xlim(left=-0.3)
    return summary.finish(fig, axes, stem, "log2 m (median depth, quartiles)",
                          "Greedy trees on m examples of f_{c,k}: the depth at which they first query an addressing "
                          "bit, against Remark 15", counts)


def _form_line(rows):
    """Remark 15's [form] fit for the figure: ``(slope, centre (h + k, log2 m))``; None without a fit."""
    cells, m = trials_by_cell(rows, BY, matrix="first_address_depth")
    info = {cell: dict(zip(BY, cell)) for cell in cells}
    inside = [cell for cell in cells if hypotheses(info[cell])["applies"]]
    if not inside:
        return None
    x, y = _remark15_points(_median_depths(cells, m, inside), m, inside, info)
    slope = _remark15_form(cells, m, inside, info).slopes[0]
    return (slope, (x.mean(), y.mean())) if x.size and np.isfinite(slope.estimate) else None


def _draw_form(ax, form, k, depths, color):
    """log2 m = centre + slope (h + k - centre) over the depths, dotted, with the slope's 95% band."""
    slope, (x0, y0) = form
    h = depths.astype(np.float64)
    line = lambda b: y0 + b * (h + k - x0)  # noqa: E731
    ax.plot(h, line(slope.estimate), ":", color=color, lw=1.5)
    if np.isfinite(slope.low):
        ax.fill_between(h, line(slope.low), line(slope.high), color=color, alpha=0.1, lw=0)


def _bytes_per_trial(params) -> int:
    """The device memory one trial needs at its peak (``Compile.bytes_per_trial``)."""
    return (4 * (params["c"] * params["k"] ** 2 + 2 ** params["k"] + 2) * params["m_max"] // 32
            + 8 * 2 ** max_depth(params) * params["m_max"] // 32)


ADDRESSING_SAMPLES = Study(
    name="addressing-samples",
    trial=_trial,
    grid=({"k": [3, 5], "c": 5, "s": 0.1, "impurity": "gini", "m_min": 64, "m_max": 8192},
          {"k": [3, 4, 5, 6], "c": 7, "s": [0.1, 0.25], "impurity": ["gini", "entropy"], "m_min": 64,
           "m_max": 131072}),
    replicates=(64, 256),
    static=("k", "c", "m_min", "m_max"),
    axis=("m", sample_sizes),
    check=_check,
    plot=_plot,
    report=_report,
    compile=Compile(branches=("k", "c"), uniform=("impurity",), choices={"impurity": IMPURITY_NAMES},
                    cpu_opt_level=CPU_OPT_LEVEL, bytes_per_trial=_bytes_per_trial),
    meanings={"m": "training examples: the first m of the trial's sample (m-grid m_min, 2 m_min, ..., m_max)",
              "first_address_depth": "the shallowest depth at which the tree queries an addressing bit (-1: none "
                                     "within the depth bound)",
              "path_address_depth": "the depth of the first addressing query on a random input's path (-1: none)",
              "tree_depth": "the tree's depth",
              "k": "address bits: f_{c,k} has c k^2 addressing bits and 2^k memory bits",
              "c": "each address bit is the parity of c k addressing bits",
              "s": "the smoothing: p_i = 1/2 + U[-s, s], delta = 1/2 - s"},
)
