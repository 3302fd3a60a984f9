"""000's guarantee around a base p-hat other than 1/2: the ``smoothed-base`` study.

000 defines a smoothened (alpha, c)-distribution as p_i = p-hat_i + U[-c, c] for any fixed p-hat_i in (alpha + c, 1 -
alpha - c); Theorem 2 (Theorem 12 with Lemma 11) holds for every such base. The target f = AND(x_B1) XOR AND(x_B2)
(two blocks of k/2 bits of a random support) has no degree-1 signal at the root at the base p-hat = 2^(-2/k) (each
AND is 1 with probability 1/2: :func:`~jaxtrees.experiments.studies.theory.critical_base`), as a parity has at 1/2.
Each trial smooths around that base (or around 1/2, the control), learns on prefixes as the ``juntas`` study does and
records the exact signal; the report checks Lemma 11, Theorem 7 per trial and Theorem 12 (docs/studies.md).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from jaxtrees import targets
from jaxtrees.core import checks, distributions, sampling
from jaxtrees.core.impurity import NAMES as IMPURITY_NAMES
from jaxtrees.experiments.report import saving, summary
from jaxtrees.experiments import table as tables
from jaxtrees.experiments.study import Checks, Compile, Study
from jaxtrees.experiments.studies import theory, verdicts
from jaxtrees.experiments.studies.common import CPU_OPT_LEVEL, at_max, bytes_per_trial, chosen, trials_by_cell
from jaxtrees.experiments.study.trials import (PRECISION_BITS, SUCCESS_TOL, check_sample_grid, exact_invariants,
                                               learn_on_prefixes, sample_sizes, trial_keys)
from jaxtrees.experiments.studies.signal import restriction_signal
from jaxtrees.experiments.studies.signal_report import (DELTA, c_slopes, draw_form, eps_panel, lemma11_check,
                                                        lipschitz_cells, lipschitz_lines)

#: The bases: ``critical`` p-hat = 2^(-2/k) (the target's root signal vanishes), ``half`` p-hat = 1/2 (the control).
BASES = ("critical", "half")


def p_hat(base: str, k):
    """The base p-hat of a cell: 2^(-2/k) for ``critical`` (a traced k: a float32 scalar), 1/2 for ``half``."""
    if base == "critical":
        return 2.0 ** (-2.0 / jnp.asarray(k, jnp.float32))
    return jnp.float32(0.5)


def base_of(cell) -> float:
    """A cell's p-hat as a Python float (its ``k`` and ``base`` given as values)."""
    return float(theory.critical_base(cell["k"])) if cell["base"] == "critical" else 0.5


def and_xor_table(k, k_max: int):
    """``bool[2^k_max]``: the table of AND(slots 0..k/2-1) XOR AND(slots k/2..k-1) padded to ``k_max`` slots (a slot
    t >= k is ignored, as :func:`jaxtrees.targets.random_junta` pads; k may be traced, even, 2 <= k <= k_max)."""
    bit = (jnp.arange(2**k_max)[:, None] >> jnp.arange(k_max)) & 1 == 1  # [2^k_max, k_max]
    slot = jnp.arange(k_max)
    first, second = slot < k // 2, (slot >= k // 2) & (slot < k)
    return jnp.all(bit | ~first, axis=1) ^ jnp.all(bit | ~second, axis=1)


def and_xor_junta(key, n: int, k, k_max: int):
    """The target: a uniformly random support of k (traced) of n bits (sorted; block 1 its k/2 lowest), the
    AND-XOR table on it."""
    support = targets.random_junta(key, n, k, k_max=k_max, nondegenerate=False)
    return support._replace(table=and_xor_table(jnp.asarray(k, jnp.int32), k_max))


def root_signal(f, p):
    """max_i |I(D, i)| at the root: the largest exact degree-1 signal p_i |E[f | x_i = 1] - E[f]| over the support."""
    n = p.shape[-1]
    none = jnp.zeros(n, bool)
    mu, mu1 = f.means(p, none, none)
    return jnp.max(jnp.where(f.support_mask(n), jnp.abs(p * (mu1 - mu)), 0.0))


def _trial(key, params):
    """000 Thm 2/12 around a base p-hat != 1/2 where the root's degree-1 signal vanishes: AND-XOR juntas"""
    n, k = params["n"], params["k"]
    keys = trial_keys(key, "distribution", "target", "sample")
    base = chosen(params, "base", lambda value: p_hat(value, k))
    p = sampling.quantize(distributions.Smoothed(base, params["c"]).marginals(keys["distribution"], n), PRECISION_BITS)
    f = and_xor_junta(keys["target"], n, k, params["k_max"])
    error, used = learn_on_prefixes(keys["sample"], p, f, n, k, params, max_depth=params["k_max"])
    eps_star, p_min = restriction_signal(f, p)
    return {"exact_error": error, "success": error <= SUCCESS_TOL,
            "support_recovered": jnp.all(used == targets.support_mask(f, n), axis=-1),
            "eps_star": eps_star, "p_min": p_min, "root_signal": root_signal(f, p)}


def _check(params):
    n = checks.integer("n", params["n"], low=2, high=4096)
    k = checks.integer("k", params["k"], low=2, high=min(n, 8))  # eps*: 3^k restrictions x 2^k assignments
    if k % 2:
        raise ValueError(f"k must be even (two blocks of k/2 bits), got {k}")
    checks.choice("base", params["base"], BASES)
    hat = base_of(params)
    checks.real("c", params["c"], low=0.0, high=min(hat, 1 - hat), high_open=True)
    check_sample_grid(params, n)


# ----------------------------------------------------------------------------- report and figures

BY = ["n", "k", "base", "c", "impurity"]


def _trials(rows):
    """One row per trial (its largest m) with its examples needed: the smallest m of the grid from which every
    larger m is exact (+inf: not exact at m_max)."""
    trial = [name for name in ("cell", "replicate") if name in rows]
    codes, size = tables.group_codes(rows, [*BY, *trial])
    m = np.asarray(rows["m"], np.float64)
    last_fail = np.zeros(size)
    np.maximum.at(last_fail, codes, np.where(np.asarray(rows["success"]) > 0, 0.0, m))
    m_min = np.full(last_fail.shape, np.inf)
    np.minimum.at(m_min, codes, m)
    needed = np.where(last_fail == 0, m_min, 2 * last_fail)  # the grid doubles
    top = at_max(rows.with_columns(_needed=needed[codes]), [*BY, *trial], "m")
    m_max = np.asarray(top["m"], np.float64)
    return top.with_columns(_needed=np.where(np.asarray(top["_needed"]) > m_max, np.inf, top["_needed"]))


def _hat(rows) -> np.ndarray:
    """Per row: the cell's p-hat (the base told by its code: no object per row)."""
    return np.where(tables.mapped(rows, "base", lambda base: base == "critical", bool),
                    theory.critical_base(np.asarray(rows["k"], np.float64)), 0.5)


def _gini(rows) -> np.ndarray:
    """Per row: whether its impurity is Lipschitz (Gini), told once per impurity."""
    return tables.mapped(rows, "impurity", theory.lipschitz, bool)


def _smoothed(trials):
    """The smoothed (c > 0) trials with a finite signal (eps* = 0 kept: the event Lemma 11 bounds)."""
    eps = np.asarray(trials["eps_star"], np.float64)
    return trials.take((np.asarray(trials["c"], np.float64) > 0) & np.isfinite(eps))


def _thresholds(rows) -> dict:
    by_m = {}
    for g in tables.rates(rows, [*BY, "m"], "success"):
        by_m.setdefault(tuple(g[name] for name in BY), []).append((g["m"], g["rate"]))
    return {cell: summary.threshold(points) for cell, points in by_m.items()}


def _report(rows):
    trials = _trials(rows)
    m90 = _thresholds(rows)
    rates = {tuple(g[name] for name in BY): g for g in tables.rates(trials, BY, "success")}
    keys, q = tables.group_quantiles(trials, BY, np.abs(np.asarray(trials["root_signal"], np.float64)), [0.5])
    _, eps = tables.group_quantiles(trials, BY, "eps_star", [0.5])
    table = []
    for key, (root,), (eps_median,) in zip(keys, q, eps):
        cell = dict(zip(BY, key))
        hat = base_of(cell)
        rate = rates[key]
        table.append([*key, f"{hat:.4f}", rate["trials"], f"{rate['rate']:.2f} [{rate['low']:.2f}, {rate['high']:.2f}]",
                      "not reached" if m90[key] is None else m90[key], f"{root:.3g}", f"{eps_median:.3g}"])
    m = rows["m"]
    text = ("f = AND(x_B1) XOR AND(x_B2) on a random support of k bits (blocks of k/2), p_i = p-hat + U[-c, c] "
            "(rounded to 2^-16); base `critical`: p-hat = 2^(-2/k), where every degree-1 signal at the root "
            f"vanishes; `half`: p-hat = 1/2. m grid {m.min()}..{m.max()} (nested prefixes of one sample per trial); "
            "90%: the smallest m from which the success rate stays >= 0.9. Signals: medians over the cell's trials.")
    header = [*BY, "p-hat", "trials", "P[success] at max m", "m for 90%", "root signal max_i |I(D, i)|", "eps*"]
    section = summary.section("ID3 around a base p-hat (000 Thm 2, 12)", text, header, table)
    return section + "\n" + _theory(rows, trials, m90)


def _theory(rows, trials, m90) -> str:
    """000 Lemma 11 (any base), Theorem 7 per trial with its constant 1 (Gini), Theorems 7 and 12 by their form (Gini),
    and the vanishing signal at c = 0."""
    smoothed = _smoothed(trials)
    k = np.asarray(smoothed["k"], np.float64)
    c = np.asarray(smoothed["c"], np.float64)
    alpha = theory.smoothed_alpha(_hat(smoothed), c)
    lines = [lemma11_check(smoothed, BY, alpha, c, k, "alpha = min(p-hat, 1 - p-hat) - c")]
    gini = smoothed.take(_gini(smoothed))
    if len(gini):
        scale = THEOREM7_FACTOR * _scale(gini)
        needed = np.asarray(gini["_needed"], np.float64)
        m_max = np.asarray(gini["m"], np.float64)
        known = np.where(np.isinf(needed) & (scale > m_max), np.nan, needed)  # censored beyond the grid: no verdict
        lines.append(verdicts.check("000 Thm 7 per trial (constant 1, Gini: beta^-2 gamma^2 = 1/4)", "examples needed "
                                  f"<= eps*^-4 p_min^-2 k ln(n / {DELTA:g}) / 4", scale, known, "upper",
                                  unit="smoothed Gini trials", note="Examples needed: the smallest m from which the "
                                  "trial's tree is exact (not exact at m_max: counted against a bound <= m_max, else "
                                  "left out)."))
    cells, m = trials_by_cell(rows, BY, ("eps_star",))
    lines += lipschitz_lines(cells, m, BY, "smoothed-base")
    lines += _vanishing_lines(trials)
    return verdicts.section(lines, "Each statement of the seed against the measured points, its kind first. eps*: per "
                                 "trial, the smallest over restrictions w of the support with f_w not constant of the "
                                 "largest |I(D_w, i)| (exact); p_min = prod_J min(p_j, 1 - p_j); m90: the smallest m "
                                 "from which a cell's success rate stays >= 0.9.")


#: Theorem 7's beta^-2 gamma^2 for Gini (beta = 8, gamma = 4): its per-trial bound with constant 1 is the scale / 4.
THEOREM7_FACTOR = 0.25


def _scale(trials) -> np.ndarray:
    """Theorem 7's eps*^-4 p_min^-2 k ln(n / delta) per trial."""
    return theory.theorem7_scale(np.asarray(trials["eps_star"], np.float64), trials["p_min"],
                                 np.asarray(trials["k"], np.float64), np.asarray(trials["n"], np.float64), DELTA)


def _vanishing_lines(trials) -> list[str]:
    """Per (n, k, base) at c = 0: the median root signal (0 at the critical base, up to the 2^-16 grid) and the
    success rate at m_max."""
    plain = trials.take(np.asarray(trials["c"], np.float64) == 0)
    if not len(plain):
        return []
    by = ["n", "k", "base", "impurity"]
    keys, q = tables.group_quantiles(plain, by, np.abs(np.asarray(plain["root_signal"], np.float64)), [0.5])
    critical = [root for key, (root,) in zip(keys, q) if key[2] == "critical"]
    rates = [f"k = {g['k']}, {g['base']}, {g['impurity']}: {g['rate']:.2f}"
             for g in tables.rates(plain, by, "success")]
    return [verdicts.identity("000 before Thm 2 (why smoothing)", "without smoothing (c = 0) at p-hat = 2^(-2/k) the "
                            "root's degree-1 signal of AND-XOR vanishes, as a parity's does at 1/2", "Median root "
                            f"signal there at most {max(critical, default=0):.2g} (the 2^-16 rounding of p-hat); "
                            "P[exact at m_max] at c = 0: " + "; ".join(rates) + ".")]


@summary.styled
def _plot(rows, stem):
    return saving.side_by_side(lambda: _success_plot(rows, stem), lambda: _theory_plot(rows, stem + "_theory"))


def _success_plot(rows, stem):
    panels = {}
    for g in tables.rates(rows, [*BY, "m"], "success"):
        panels.setdefault((g["n"], g["k"], g["base"], g["impurity"]), {}).setdefault(g["c"], []).append(g)
    fig, axes = summary.figure(len(panels))
    counts = []
    for ax, ((n, k, base, impurity), curves) in zip(axes, panels.items()):
        for c, groups in curves.items():
            counts += [g["trials"] for g in groups]
            summary.rate_curve(ax, groups, "m", "no smoothing (c = 0)" if c == 0 else f"c = {c:g}")
        hat = base_of({"k": k, "base": base})
        summary.panel(ax, f"k = {k}, n = {n}, p-hat = {hat:.3f} ({base}), {impurity}", "training examples m",
                      ylim=summary.RATE_LIMITS)
    return summary.finish(fig, axes, stem, "P[exact error = 0]\n(95% Wilson band)",
                          "ID3 on AND-XOR juntas, c-smoothed around p-hat = 2^(-2/k) (root signal 0) or 1/2", counts)


@summary.styled
def _theory_plot(rows, stem):
    """eps*'s distribution per smoothed cell with Lemma 11's union bound (dashed, capped at 1), each trial's examples
    needed against Theorem 7's eps*^-4 p_min^-2 k ln(n / delta) with its bound for Gini (constant 1, beta^-2 gamma^2 =
    1/4), and Theorems 12 and 7 by their form on the Gini cells: m for 90% against 1/c and against 1/eps*."""
    trials = _smoothed(_trials(rows))
    if not len(trials):
        return []
    fig, axes = summary.figure(4, height=5.0)
    codes, keys = tables.groups(trials, BY)
    eps = np.asarray(trials["eps_star"], np.float64)
    cdf = theory.empirical_cdf(codes, eps)
    k = np.asarray(trials["k"], np.float64)
    c = np.asarray(trials["c"], np.float64)
    alpha = theory.smoothed_alpha(_hat(trials), c)
    bound = theory.lemma11_union_probability(eps, alpha, c, k)
    scale = _scale(trials)
    needed = np.asarray(trials["_needed"], np.float64)
    top = np.asarray(trials["m"], np.float64)
    ends = np.cumsum(np.bincount(codes, minlength=len(keys)))
    by_cell = np.argsort(codes, kind="stable")  # each cell's trials in row order: one sort, not a pass per cell
    for g, key in enumerate(keys):
        mine = by_cell[ends[g - 1] if g else 0:ends[g]]
        order = mine[np.argsort(eps[mine], kind="stable")]
        cell = dict(zip(BY, key))
        label = f"k = {cell['k']}, {cell['base']}, c = {cell['c']:g}, {cell['impurity']}"
        look = summary.series_style(axes[0])
        axes[0].step(eps[order], cdf[order], where="post", color=look["color"], label=label)
        axes[0].plot(eps[order], bound[order], "--", color=look["color"], lw=1)
        exact = mine[np.isfinite(needed[mine])]
        axes[1].scatter(scale[exact], needed[exact], s=10, color=look["color"], marker="o", alpha=0.6)
        never = mine[~np.isfinite(needed[mine])]
        axes[1].scatter(scale[never], 2 * top[never], s=14, color=look["color"], marker="^", alpha=0.6)
    vacuous = lemma11_check(trials, BY, alpha, c, k, "").kind == "vacuous"
    axes[0].plot([], [], "k--", lw=1, label="Lemma 11 x 3^k" + (": vacuous at this size" if vacuous else ""))
    axes[0].set_xscale("log")
    summary.panel(axes[0], "eps* per trial: P[eps* <= t]\n(dashed: Lemma 11 x 3^k restrictions, capped at 1)", "t",
                  xbase=None, ylim=summary.RATE_LIMITS)
    axes[0].set_xscale("log")
    _theorem7_bound(axes[1], trials, scale, top)
    cells, m = trials_by_cell(rows, BY, ("eps_star",))
    info, inside = lipschitz_cells(cells, BY, "smoothed-base")
    m90 = _thresholds(rows)
    _c_panel(axes[2], c_slopes(inside, m, info, "smoothed-base"), info, m90)
    eps_panel(axes[3], inside, m, m90, info)
    return summary.finish(fig, axes, stem, "P[eps* <= t]", "000 around a base p-hat: the exact signal against Lemma 11 "
                          "and Theorem 7, Theorems 12 and 7 by their form (c > 0)",
                          np.bincount(codes, minlength=len(keys)).tolist())


def _theorem7_bound(ax, trials, scale, top):
    """Theorem 7's per-trial bound for Gini (constant 1, beta^-2 gamma^2 = 1/4) as the line y = x / 4, dashed, and
    whether it is vacuous at this size."""
    finite = np.isfinite(scale) & (scale > 0)
    if finite.any():
        span = np.array([min(scale[finite].min(), top.min() / 32), max(scale[finite].max(), 2 * top.max())])
        gini = _gini(trials)
        needed = np.asarray(trials["_needed"], np.float64)[gini]
        known = np.where(np.isinf(needed) & (THEOREM7_FACTOR * scale[gini] > top[gini]), np.nan, needed)
        vacuous = gini.any() and verdicts.check("", "", THEOREM7_FACTOR * scale[gini], known, "upper").kind == "vacuous"
        ax.plot(span, THEOREM7_FACTOR * span, "k--", lw=1, label="Thm 7's bound, Gini, constant 1 (y = x / 4)"
                + (": vacuous at this size" if vacuous else ""))
    ax.set_yscale("log")
    summary.panel(ax, "examples needed per trial\nagainst Thm 7's scale (^: not exact)",
                  f"eps*^-4 p_min^-2 k ln(n / {DELTA:g})", xbase=10)
    ax.set_ylabel("examples needed")


def _c_panel(ax, slopes, info, m90):
    """m for 90% against 1/c per Gini group of cells that differ only in c, with Theorem 12's [form] fit."""
    for slope, members in slopes.values():
        points = sorted((1 / info[cell]["c"], m90[cell]) for cell in members if m90.get(cell) is not None)
        if not points:
            continue
        look = summary.series_style(ax)
        ax.plot(*zip(*points), color=look["color"], marker=look["marker"], label=f"{slope.label}, Gini")
        draw_form(ax, points, slope, look["color"])
    ax.set_xscale("log")
    ax.set_yscale("log")
    summary.panel(ax, "m for 90% against 1/c (Thm 12: fit, 95% band;\ndotted: its exponent at these c)", "1/c",
                  xbase=None)
    ax.set_ylabel("m for 90%")


SMOOTHED_BASE = Study(
    name="smoothed-base",
    trial=_trial,
    grid=({"n": 16, "k": [2, 4], "base": ["critical", "half"], "c": [0.0, 0.05, 0.1, 0.2],
           "impurity": ["entropy", "gini"], "m_min": 16, "m_max": 8192},
          {"n": [16, 64], "k": [2, 4, 6], "base": ["critical", "half"], "c": [0.0, 0.05, 0.1, 0.15, 0.2],
           "impurity": ["entropy", "gini"], "m_min": 16, "m_max": 131072}),
    replicates=(200, 1000),
    static=("n", "m_min", "m_max"),
    axis=("m", sample_sizes),
    check=Checks(cell=_check, rows=exact_invariants),
    plot=_plot,
    report=_report,
    compile=Compile(uniform=("impurity",), bounds=("k",), choices={"impurity": IMPURITY_NAMES, "base": BASES},
                    cpu_opt_level=CPU_OPT_LEVEL, bytes_per_trial=bytes_per_trial(lambda params: params["n"])),
    meanings={"m": "training examples: the first m of the trial's sample (m-grid m_min, 2 m_min, ..., m_max)",
              "exact_error": "Pr_{x ~ p}[tree(x) != f(x)], computed exactly (float32)",
              "success": "1 if exact_error <= 1e-6 (exact learning), else 0",
              "support_recovered": "1 if the features the tree tests are exactly the junta's support",
              "eps_star": "min over restrictions w of the support with f_w not constant of max_i |I(D_w, i)| (exact; "
                          "000 Thm 7's eps)",
              "p_min": "prod_{j in J} min(p_j, 1 - p_j): the smallest mass of a full restriction of the support",
              "root_signal": "max_i |I(D, i)| over the support at the root (exact): 0 at p = 2^(-2/k) exactly",
              "k": "the junta's support size (even): f = AND of its k/2 lowest bits XOR AND of the others",
              "base": "the smoothing's centre p-hat: critical = 2^(-2/k) (the root's signal vanishes), half = 1/2",
              "c": "the smoothing: p_i = p-hat + U[-c, c], c < min(p-hat, 1 - p-hat)"},
)
