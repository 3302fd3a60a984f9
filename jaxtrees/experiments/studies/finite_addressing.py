"""002 Remark 15, the finite-sample counterexample: the ``addressing-samples`` study.

Remark 15: Lemma 14's gains (memory bits Omega((1/2)^(2k)), addressing bits O((2/5)^(2k))) survive estimation from a
sample when every estimate is accurate to O((2/5)^(2k)), which 2^(O(h + k)) examples give for every restriction of
size <= h; so a greedy tree grown on m examples queries memory bits only down to a depth that grows with log2 m.
Each trial draws a c-smoothed distribution and m_max examples of f_{c,k}, grows a greedy tree (empirical gains) on
every prefix m and records the shallowest depth at which it queries an addressing bit, in the whole tree and on a
random input's path; the report tests the remark by its form, log2 m = Theta(h + k) (both coefficients positive,
over three or more k), the project's refinement of its O(k) (a zero-gain feature's empirical gain ~ 1/m, so 2^(2k)
examples per node: <= 2 doublings per unit of k), the (5/2)^(4k) sufficient condition
(:func:`~jaxtrees.experiments.studies.theory.remark15_depth`) and the lightest restriction's slope, a heuristic.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxtrees import targets
from jaxtrees.core import checks, distributions, sampling
from jaxtrees.core.impurity import BUILTIN as IMPURITIES
from jaxtrees.core.impurity import NAMES as IMPURITY_NAMES
from jaxtrees.experiments.report import summary
from jaxtrees.experiments import table as tables
from jaxtrees.experiments.study import Compile, Study
from jaxtrees.experiments.studies import theory
from jaxtrees.experiments.studies.common import CPU_OPT_LEVEL, at_max
from jaxtrees.experiments.studies.finite_addressing_theory import (BY, constants, draw_form, form_line, hypotheses,
                                                                   theory_section)
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
    return float(slope), float(-offset / slope) if abs(slope) > 1e-9 else float("nan")  # flat: no depth-0 point


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
                           header, table) + "\n" + theory_section(rows)


def _depth_list(log2_m, median) -> str:
    return ", ".join(f"{int(x)}: {int(d) if np.isfinite(d) else '>'}" for x, d in zip(log2_m, median))


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
    form = form_line(rows)
    m = np.unique(np.asarray(rows["m"], np.float64))
    sufficient = "Remark 15, the project's constants" + (": vacuous at this size" if constants(rows, m).kind ==
                                                          "vacuous" else "")
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
                draw_form(ax, form, info["k"], depths, look["color"])
        ax.plot([], [], "k--", lw=1, label=sufficient)
        fit = "; dotted: its form's fit, 95% band" if where == "whole tree" and form is not None else ""
        summary.panel(ax, f"{where}, s = {s:g}, {name}\n(dashed: Remark 15 with the project's constants{fit})",
                      "first addressing depth h", xbase=None)
        ax.set_xlim(left=-0.3)
    return summary.finish(fig, axes, stem, "log2 m (median depth, quartiles)",
                          "Greedy trees on m examples of f_{c,k}: the depth at which they first query an addressing "
                          "bit, against Remark 15", counts)


def _bytes_per_trial(params) -> int:
    """The device memory one trial needs at its peak (``Compile.bytes_per_trial``)."""
    return (4 * (params["c"] * params["k"] ** 2 + 2 ** params["k"] + 2) * params["m_max"] // 32
            + 8 * 2 ** max_depth(params) * params["m_max"] // 32)


ADDRESSING_SAMPLES = Study(
    name="addressing-samples",
    trial=_trial,
    grid=({"k": [3, 4, 5, 6, 7], "c": 5, "s": 0.1, "impurity": "gini", "m_min": 64, "m_max": 8192},
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
