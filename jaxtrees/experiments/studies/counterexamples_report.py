"""The ``addressing`` and ``agnostic`` studies' figures and reports: error against depth, 002 Lemma 14's gains and
the Theory sections (002 Theorems 3, 4, 10 and 11, Lemmas 14, 16 and 17).
"""

from __future__ import annotations

import numpy as np

from jaxtrees.experiments import table as tables
from jaxtrees.experiments.report import saving, summary
from jaxtrees.experiments.studies import theory, verdicts
from jaxtrees.experiments.studies.addressing_cells import lemma14, n_free, target_depth
from jaxtrees.experiments.studies.common import a_row_of_each, at_max


def _error_plot(rows, stem, by, horizon_name, title, label, overlay=None):
    panels = {}  # impurity -> cell of ``by`` -> its mean error per depth: one pass over the rows
    for g in tables.means(rows, ["impurity", *by, "depth"], "error"):
        panels.setdefault(g["impurity"], {}).setdefault(tuple(g[name] for name in by), []).append(g)
    fig, axes = summary.figure(len(panels))
    counts = []
    for ax, (impurity, curves) in zip(axes, panels.items()):
        for cell, groups in curves.items():
            counts += [g["trials"] for g in groups]
            xs = [g["depth"] for g in groups]
            ys = [g["mean"] for g in groups]
            err = [1.96 * (g["sem"] if g["sem"] == g["sem"] else 0.0) for g in groups]
            line, = ax.plot(xs, ys, "-", ms=4, label=label(dict(zip(by, cell))), **summary.series_style(ax))
            ax.fill_between(xs, [y - e for y, e in zip(ys, err)], [y + e for y, e in zip(ys, err)],
                            color=line.get_color(), alpha=0.2)
            if overlay is not None:
                overlay(ax, {**dict(zip(by, cell)), "impurity": impurity}, line.get_color(), max(xs))
        ax.set_xscale("symlog", base=2, linthresh=1)
        ax.set_xlim(left=0)  # depths are >= 0: no ticks on the negative side
        summary.panel(ax, f"{title}, {impurity}", f"tree depth d (up to {horizon_name})", xbase=None, ylim=(0, 0.52))
    return summary.finish(fig, axes, stem, "error of the tree truncated at depth d\n(mean, 95% CI)",
                          "Greedy growth, exact gains" + ("" if overlay is None else "; " + overlay.__doc__), counts)


def addressing_overlay(ax, params, colour, horizon):
    """thin lines: 002 Thm 10's floor delta / 6 (solid where 1 - exp(-2^k delta^2 / 8) >= 2/3, dotted
    elsewhere), vertical: the 2^k horizon (dashed) and the target's depth (dash-dot)"""
    delta = 0.5 - params["s"]
    valid = bool(theory.theorem10_floor_valid(params["k"], delta))
    ax.hlines(float(theory.theorem10_floor(delta)), 0, horizon, colors=colour, lw=0.9, ls="-" if valid else ":")
    ax.axvline(2 ** params["k"], color=colour, lw=0.7, ls="--")
    ax.axvline(target_depth(params), color=colour, lw=0.7, ls="-.")


def agnostic_overlay(ax, params, colour, horizon):
    """thin lines: 002 Thm 11's floor 1/8 for paths without an addressing query (black), vertical: |A^free|
    (dashed) and the junta's depth c k^2 (dash-dot)"""
    ax.axhline(theory.THEOREM11_FLOOR, color="black", lw=0.8, ls="-")
    ax.axvline(n_free(params), color=colour, lw=0.7, ls="--")
    ax.axvline(params["c"] * params["k"] ** 2, color=colour, lw=0.7, ls="-.")


def _rate_text(rate):
    return f"{rate['rate']:.3f} [{rate['low']:.3f}, {rate['high']:.3f}]"


@summary.styled
def addressing_plot(rows, stem):
    return saving.side_by_side(
        lambda: _error_plot(rows, stem, ["code", "k", "c", "s"], "2^k", "f_{c,k}: exact path mode",
                            lambda c: f"{c['code']} k = {c['k']}, c = {c['c']}, s = {c['s']:g}", addressing_overlay),
        lambda: gains_plot(rows, stem + "_gains"))


@summary.styled
def gains_plot(rows, stem):
    """002 Lemma 14 against k: per path the smallest free memory-bit gain and the largest addressing-bit gain (Gini)
    over its memory-only restrictions, their median over paths per (code, c, s), with 2^(-2k) / (4 kappa) (solid)
    and kappa (2/5)^(2k) (dashed) per s."""
    if "memory_gain_min" not in rows:
        return []
    trial = [name for name in ("cell", "replicate") if name in rows]
    names = ["code", "k", "c", "s"]
    codes, size = tables.group_codes(rows, [*trial, *names])
    memory, addr = np.full(size, np.inf), np.full(size, -np.inf)
    np.fmin.at(memory, codes, np.asarray(rows["memory_gain_min"], np.float64))
    np.fmax.at(addr, codes, np.asarray(rows["address_gain_max"], np.float64))
    # a row of each path: its cell's columns by their codes (no key per path)
    per_path = rows.select(*names).take(a_row_of_each(codes, size)).with_columns(memory=memory, address=addr)
    per_path = per_path.take(np.isfinite(memory) & np.isfinite(addr))
    fig, axes = summary.figure(1, width=6.5, height=4.8)
    ax = axes[0]
    curves = {}
    for column in ("memory", "address"):
        k_keys, q = tables.group_quantiles(per_path, ["code", "c", "s", "k"], column, [0.5])
        for (code, c, s_, k), (median,) in zip(k_keys, q):
            curves.setdefault((code, c, s_), {}).setdefault(column, []).append((k, median))
    for (code, c, s_), both in curves.items():
        look = summary.series_style(ax)
        ax.plot(*zip(*both["memory"]), "-", color=look["color"], marker=look["marker"],
                label=f"{code}, c = {c}, s = {s_:g}: memory (min)")
        ax.plot(*zip(*both["address"]), "--", color=look["color"], marker=look["marker"], mfc="none",
                label=f"{code}, c = {c}, s = {s_:g}: addressing (max)")
    k_values = np.asarray(per_path["k"], np.int64)
    ks = np.arange(k_values.min(), k_values.max() + 1) if k_values.size else np.zeros(0, np.int64)
    for shade, s_ in zip(("black", "grey", "silver"), per_path.unique("s") if len(per_path) else []):
        kappa = theory.lemma8_kappa(0.5 - s_)
        ax.plot(ks, theory.lemma14_memory_floor(ks, kappa), "-", color=shade, lw=1,
                label=f"2^(-2k) / (4 kappa), s = {s_:g}")
        ax.plot(ks, theory.lemma14_address_ceiling(ks, kappa), ":", color=shade, lw=1,
                label=f"kappa (2/5)^(2k), s = {s_:g}")
    ax.set_yscale("log")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_xlabel("k")
    ax.set_ylabel("Gini gain (median over paths)")
    ax.set_title("002 Lemma 14: memory bits vs addressing bits")
    ax.grid(alpha=0.3, which="both")
    summary.legend(fig, axes)
    summary.suptitle(fig, "Gini gains along the path while it holds memory bits only (exact)")
    return saving.save(fig, stem)


def _path_report(rows, by, metric, columns, cell_columns, title, text) -> str:
    """Per cell of ``by`` (and the impurity): the cell, ``cell_columns(params, per_path, rate, err)``
    (the cell's paths at its deepest recorded depth, a :class:`~jaxtrees.experiments.table.Table`; the
    rate of ``metric`` there and the mean error there), as a markdown table under ``title`` and its ``text``."""
    by = [*by, "impurity"]
    at_horizon = at_max(rows, by, "depth")  # one row per path
    rates = tables.rates(at_horizon, by, metric)
    errors = tables.means(at_horizon, by, "error")
    table = []
    for (cell, per_path), rate, err in zip(tables.split(at_horizon, by).items(), rates, errors):
        table.append([*cell, *cell_columns(dict(zip(by, cell)), per_path, rate, err)])
    return summary.section(title, text, [*by, *columns], table)


def _error_text(err) -> str:
    return f"{err['mean']:.3f} +- {1.96 * err['sem']:.3f}"


def addressing_report(rows):
    def columns(params, per_path, rate, err):
        first = np.sort(per_path["first_address_depth"])
        median = int(first[len(first) // 2])
        lemma = lemma14(params)
        hyp = ("n/a (not (alpha, L))" if lemma["k0"] is None else
               f"{'yes' if lemma['applies'] else 'no'} (c0 = {lemma['c0']:.2f}, k0 = {lemma['k0']:.2f})")
        if params["code"] == "coded":  # Lemmas 16-17: the code's distance, not c, is the condition
            hyp = (f"{hyp.split(' (')[0]} (distance {lemma['distance']} {'>=' if lemma['distance_ok'] else '<'} "
                   f"(ln 5 / delta) k = {lemma['distance_needed']:.2f}"
                   + ("" if lemma["k0"] is None else f", k0 = {lemma['k0']:.2f}") + ")")
        A = params["c"] * params["k"] ** (2 if params["code"] == "block" else 1)
        return [hyp, rate["trials"], _rate_text(rate), "none (> 2^k)" if median < 0 else median, _error_text(err), A + 1]

    return _path_report(rows, ["code", "k", "c", "s"], "memory_first",
                        ["Lemma 14 hypotheses", "paths", "P[all memory bits first]", "median first addressing depth",
                         "error at depth 2^k", "target depth"], columns,
                        "Addressing counterexample f_{c,k} (002 Thm 3, Lemma 14), exact path mode",
                        "Each path: a c-smoothed distribution (p_i in [1/2 - s, 1/2 + s], delta = 1/2 - s), x ~ p, "
                        "exact gains, ties within 0. 'All memory bits first': every one of the 2^k memory bits is "
                        "queried before the first addressing bit. Lemma 14 hypotheses (Gini only): c >= ln 5 / delta "
                        "and k >= k0; a coded cell (f_{c,k,S}) needs, by Lemmas 16-17, its code's distance >= "
                        "(ln 5 / delta) k (with length c k, Plotkin's d <= c k 2^(k-1) / (2^k - 1), about c k / 2, rules it "
                        "out whenever c < 2 ln 5 / delta) and k >= k0.") + "\n" + _addressing_theory(rows)


@summary.styled
def agnostic_plot(rows, stem):
    return _error_plot(rows, stem, ["k", "c", "eps", "s"], "|A^free|", "f_pi: exact path mode",
                       lambda c: f"k = {c['k']}, c = {c['c']}, eps = {c['eps']:g}", agnostic_overlay)


def agnostic_report(rows):
    def columns(params, per_path, rate, err):
        dist = tables.means(per_path, [], "distance_to_junta")[0]
        return [n_free(params), rate["trials"], _rate_text(rate), _error_text(err), f"{dist['mean']:.4f}",
                params["c"] * params["k"] ** 2]

    return _path_report(rows, ["k", "c", "eps", "s"], "free_first",
                        ["|A^free|", "paths", "P[free memory bits first]", "error at depth |A^free|",
                         "Pr[f_pi != g] (mean)", "junta depth c k^2"], columns,
                        "Agnostic counterexample f_pi (002 Thm 4, Sec. 6), exact path mode",
                        "f_pi pins the memory bits outside A^free; it is eps-close to the junta g(x) = 1[z(x) in A^1], "
                        "which a depth c k^2 tree computes. The greedy tree queries every free memory bit before any "
                        "addressing bit, so at depth |A^free| it still errs with constant probability.") + "\n" + \
        _agnostic_theory(rows)


# ----------------------------------------------------------------------------- theory beside measurement


def _cell_params(rows, by) -> tuple[list[dict], np.ndarray]:
    """``(cells, codes)``: each group of ``by`` as a parameter dict, and each row's group index."""
    codes, keys = tables.groups(rows, by)
    return [dict(zip(by, key)) for key in keys], codes


def _floor_points(rows, by):
    """Per (cell of ``by``, depth): the mean error over paths, with each cell's parameters: ``(cells, cell, depth,
    mean)``, ``cell[g]`` and ``depth[g]`` point g's cell index and depth."""
    cells, codes = _cell_params(rows, by)
    combined, points = tables.group_columns(rows.with_columns(_cell=codes), ["_cell", "depth"])
    count = np.bincount(combined, minlength=len(points["depth"]))
    mean = np.bincount(combined, np.asarray(rows["error"], np.float64), minlength=len(count)) / np.maximum(count, 1)
    return cells, points["_cell"].astype(np.int64), points["depth"].astype(np.float64), mean


def _addressing_theory(rows) -> str:
    """The addressing report's Theory section: 002 Theorem 10's floor delta / 6 (a test where Lemma 14 and the 2/3
    condition hold), Lemma 14 and its gain bounds (identities of the exact gains where it applies), the depth
    separation, Lemmas 16-17's distance (a hypothesis of the coded cells), and the cells outside."""
    by = ["code", "k", "c", "s", "impurity"]
    cells, cell, depth, mean = _floor_points(rows, by)
    lemma = [lemma14(c) for c in cells]
    k = np.asarray([c["k"] for c in cells], np.float64)[cell]
    delta = np.asarray([lm["delta"] for lm in lemma], np.float64)[cell]
    applies = np.asarray([lm["applies"] for lm in lemma], bool)[cell]
    valid = theory.theorem10_floor_valid(k, delta) & (depth <= 2.0**k)
    floor = theory.theorem10_floor(delta)
    tested = applies & valid
    lines = [verdicts.check("002 Thm 10 (proof, Sec. 4)", "error of the tree truncated at depth d <= 2^k >= delta / 6 "
                          "where Lemma 14 applies and 1 - exp(-2^k delta^2 / 8) >= 2/3", floor[tested], mean[tested],
                          "lower", unit="(cell, depth) points")] if tested.any() else []
    outside = int((~tested).sum())
    if outside:
        lines.append(verdicts.outside("002 Thm 10 (proof, Sec. 4)", f"the floor delta / 6 at {outside} (cell, depth) "
                                    "points", "Lemma 14 fails there (not Gini, c < c0 or k < k0; coded: "
                                    "the code's distance) or 1 - exp(-2^k delta^2 / 8) < 2/3"))
    inside = [c for c, lm in zip(cells, lemma) if lm["applies"]]
    if inside:
        lines.append(verdicts.identity("002 Lemma 14 (Lemma 17 coded)", "every memory bit is queried before any "
                                     f"addressing bit, on the paths of the {_cells(len(inside))} where it applies "
                                     "(Gini, c >= ln 5 / delta or the code's distance, k >= k0; exact gains)",
                                     _share_text(rows, by, inside, "memory_first", "all memory bits first"),
                                     where="tests/test_counterexamples_study.py"))
    lines += _gain_lines(rows, by)
    separated = [c for c, lm in zip(cells, lemma) if lm["applies"] and target_depth(c) < 2 ** c["k"]]
    lines.append(verdicts.identity("002 Thm 3's depth separation", "the target's depth (c k^2 + 1, coded c k + 1) is "
                                 "below the 2^k horizon in the cells where Lemma 14 applies: " + (
                                     ", ".join(f"{c['code']} k = {c['k']}, c = {c['c']}, s = {c['s']:g} ("
                                               f"{target_depth(c)} < {2 ** c['k']})" for c in separated) if separated
                                     else "none in these rows (block codes need k >= 10 at c = 7: k = 8 has depth 449 "
                                     "> 256)"), where="arithmetic of the grid"))
    lines += _distance_lines(cells, lemma)
    return verdicts.section(lines, _THEORY_TEXT)


def _distance_lines(cells, lemma) -> list:
    """Lemmas 16-17's condition on the coded cells' codes (each distinct (k, c, s) once, whatever the impurity)."""
    codes = {}
    for c, lm in zip(cells, lemma):
        if c["code"] == "coded":
            codes[(c["k"], c["c"], c["s"])] = lm
    if not codes:
        return []
    short = {key: lm for key, lm in codes.items() if not lm["distance_ok"]}
    text = "; ".join(f"k = {k}, c = {c}, s = {s:g}: {lm['distance']} vs {lm['distance_needed']:.2f}"
                     for (k, c, s), lm in sorted(short.items()))
    if short:
        return [verdicts.outside("002 Lemmas 16-17", f"{len(short)} of the {len(codes)} codes of the coded cells",
                               f"their distance is below (ln 5 / delta) k ({text}), so Lemma 17 does not apply there")]
    return [verdicts.identity("002 Lemmas 16-17", f"each of the {len(codes)} codes has distance >= (ln 5 / delta) k",
                            where="tests/test_counterexamples_study.py")]


def _lemma12_holds(cell) -> bool:
    """Whether the address is near uniform (002 Lemma 12: c >= ln 5 / delta; coded, Lemma 16: the distance)."""
    lemma = lemma14(cell)
    return bool(lemma["distance_ok"]) if cell.get("code", "block") == "coded" else cell["c"] >= lemma["c0"]


def _gain_lines(rows, by) -> list:
    """002 Lemma 14's proof's two gain bounds (identities of the exact Gini gains where Lemma 12 (16) holds)."""
    if "memory_gain_min" not in rows:
        return []
    cells, codes = _cell_params(rows, by)
    holds = np.asarray([_lemma12_holds(c) for c in cells], bool)[codes]
    if not (holds & np.isfinite(np.asarray(rows["memory_gain_min"], np.float64))).any():
        return []
    return [verdicts.identity("002 Lemma 14's proof (Gini gains, Lemma 8's kappa)", "under a memory-only restriction of "
                            "size < 2^k every free memory bit's gain >= 2^(-2k) / (4 kappa) and every addressing bit's "
                            "<= kappa (2/5)^(2k), where c >= ln 5 / delta (coded: the code's distance)",
                            where="tests/test_counterexamples_study.py")]


def _paths_in(rows, by, cells):
    """The rows at each path's deepest recorded depth in ``cells`` (parameter dicts of ``by``)."""
    top = at_max(rows, by, "depth")
    codes, keys = tables.groups(top, by)
    wanted = {tuple(c[name] for name in by) for c in cells}
    return top.take(np.isin(codes, [i for i, key in enumerate(keys) if tuple(key) in wanted]))


def _share_text(rows, by, cells, column: str, what: str) -> str:
    """``Measured: all memory bits first in 64 of 64 paths.``: the count of paths of ``cells`` where ``column`` is 1."""
    flags = np.asarray(_paths_in(rows, by, cells)[column]) != 0
    return f"Measured: {what} in {int(flags.sum()):,} of {flags.size:,} paths."


def _cells(count: int) -> str:
    return f"{count} cell" + ("" if count == 1 else "s")


_THEORY_TEXT = "Each statement of the seed this study tests, its kind first, against the measured points."


def _agnostic_theory(rows) -> str:
    """The agnostic report's Theory section: 002 Theorem 11's 1/8 floor and distance bound and Lemma 14 for f_pi
    (identities of the block f_{c,k} where c >= c0: Lemma 12 in place of the paper's Lemma 16 for f_{c,k,S}), its gain
    bounds, and the cells outside."""
    by = ["k", "c", "eps", "s", "impurity"]
    at_horizon = at_max(rows, by, "depth")
    cells, _ = _cell_params(at_horizon, by)
    near = [c for c in cells if c["c"] >= lemma14(c)["c0"]]
    lines = []
    if near:
        paths = _paths_in(rows, by, near)
        free = np.asarray(paths["free_first"]) != 0
        error = np.asarray(paths["error"], np.float64)[free]
        low = f"; smallest error {error.min():.4g} against the floor 1/8" if error.size else ""
        lines.append(verdicts.identity("002 Thm 11's proof (Sec. 6), with Lemma 12 for the block f_{c,k} (the paper: "
                                     "Lemma 16 for f_{c,k,S})", "a path that has queried no addressing bit has error "
                                     f"min(mu_d, 1 - mu_d) >= 1/8, in the {_cells(len(near))} with c >= c0 = ln 5 / "
                                     "delta", f"Measured at depth |A^free|: {error.size:,} of {free.size:,} paths have "
                                     f"queried no addressing bit{low}.", where="tests/test_counterexamples_study.py"))
        k = np.asarray(paths["k"], np.float64)
        codes, keys = tables.groups(paths, by)  # |A^free| once per cell, then per path by its cell's code
        bound = np.asarray([n_free(dict(zip(by, key))) for key in keys], np.float64)[codes] * (2.0**-k + 5.0**-k)
        lines.append(verdicts.check("002 Thm 11's proof (Sec. 6), with Lemma 12 for the block f_{c,k}", "Pr[f_pi != g] "
                                    "<= |A^free| (2^-k + 5^-k) (< eps) for the nearby junta g", bound,
                                    np.asarray(paths["distance_to_junta"], np.float64), "upper",
                                    unit=f"paths of the {_cells(len(near))} with c >= c0", note="Measured: Pr_{x ~ "
                                    "p}[f_pi(x) != g(x)] exactly, per path's distribution."))
    far = [c for c in cells if c["c"] < lemma14(c)["c0"]]
    if far:
        lines.append(verdicts.outside("002 Thm 11's proof (Sec. 6)", f"the 1/8 floor and the distance bound in the "
                                    f"{_cells(len(far))} with c < c0 = ln 5 / delta", "Lemma 12 (the address near "
                                    "uniform) needs c >= c0"))
    inside = [c for c in cells if lemma14(c)["applies"]]
    if inside:
        lines.append(verdicts.identity("002 Lemma 14 for f_pi (the paper: Lemma 17 for f_{c,k,S})", "every free memory "
                                     "bit is queried before any addressing bit, on the paths of the "
                                     f"{_cells(len(inside))} where it applies (Gini, c >= c0, k >= k0; exact gains)",
                                     _share_text(rows, by, inside, "free_first", "free memory bits first"),
                                     where="tests/test_counterexamples_study.py"))
    if len(inside) < len(cells):
        lines.append(verdicts.outside("002 Lemma 14 for f_pi", f"{len(cells) - len(inside)} of the {len(cells)} cells",
                                    "it needs Gini (an (alpha, L)-impurity here), c >= c0 and k >= k0"))
    lines += _gain_lines(rows, by)
    return verdicts.section(lines, _THEORY_TEXT)
