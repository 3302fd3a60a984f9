"""gd-scaling's report and figures: exponent tables, sensitivity, claims, local slopes, cells and the mechanism.

The fits are :mod:`~jaxtrees.experiments.studies.gd_scaling_fits`'; every text names the network, the
optimizer and the training from the rows' own configuration. The mechanism figure follows the first
layer: row norms ||W1[j]||_2 on and off the support J over training, and the step by which J
separates against the degree-1 signal min_j |I(D, j)| (:func:`jaxtrees.targets.label_covariance`).
"""

from __future__ import annotations

import math

import numpy as np

from jaxtrees.experiments.report import saving, steps, summary
from jaxtrees.experiments import table as tables
from jaxtrees.experiments.studies import gd_scaling_fits as scaling_fits
from jaxtrees.experiments.studies import theory, verdicts
from jaxtrees.experiments.studies.gd_common import (EXACT_MAX_N, TRAINING, budget_lines, divergence_note, first,
                                                    group_medians, nested, network, network_text, optimizer,
                                                    present, smoothing, suffix, vals, varying)

#: Fresh test examples that resolve a test error of 0.05 to +/- 0.01: the 95% binomial half-width
#: 1.96 sqrt(0.05 x 0.95 / N) is <= 0.01 from N = 1,825 on (2,048: +/- 0.0094; 8,192: +/- 0.0047).
RESOLVING_TEST_SIZE = 1825


def _censored_medians(trials) -> str:
    """A sentence naming the cells whose median is censored (more than half not learned), per criterion."""
    parts = []
    for label, column, rows in scaling_fits.criteria(trials):
        keys, q = steps.group_quartiles(rows, ["family", "k", "c", "n", "init"], column)
        cells = [key for key, median in zip(keys, q[:, 1]) if not np.isfinite(median)]
        names = ", ".join(f"{k}-{f}, c = {c:g}, n = {n}, {i}" for f, k, c, n, i in cells)
        parts.append(f"{label}: " + (f"{len(cells)} ({names})" if cells else "none"))
    return "Cells whose median is censored (more than half of the trials not learned within the budget): " + \
        "; ".join(parts) + "."


def _resolution_text(trials) -> str:
    """How finely the test set resolves the criteria."""
    sizes = present(trials, "test_size")
    eps = [e for e in present(trials, "eps") if e > 0] if "eps" in trials else []
    sampled = bool(np.any(np.asarray(trials["n"]) > EXACT_MAX_N))
    if not eps or not sampled:
        return ""
    widths = ", ".join(f"+/- {1.96 * math.sqrt(e * (1 - e) / size):.4f} at eps = {e:g} on {size:,}"
                       for e in eps for size in sizes)
    return (f" For n > {EXACT_MAX_N} the error is measured on the test sample: 95% binomial half-width {widths} "
            f"examples ({RESOLVING_TEST_SIZE:,} resolve 0.05 to +/- 0.01).")


def scaling_report(rows):
    """gd-scaling's report (markdown) from its rows."""
    every = scaling_fits.trials(rows)
    exact = scaling_fits.exact_trials(every)
    extra = varying(every, TRAINING + ("optimizer", "records_per_doubling", "init"))
    by_n = scaling_fits.scaling_exponents(exact, ["family", "k", *extra, "c"], "n")
    table = [[*key[:-1], f"{key[-1]:g}", scaling_fits.fit_text(fit), ", ".join(f"{v:g}" for v in ns),
              f"{cens:.0%}", scaling_fits.median_slope(sel)] for key, (fit, ns, cens, sel) in by_n.items()]
    header = ["family", "k", *extra, "c", "exponent of n [95% CI]", "n", "censored", "slope of medians"]
    plain = [b for b in extra if b != "init"]
    by = ["family", "k", *plain, "c"]
    slopes = scaling_fits.sensitivity(every, by)
    header_s, table_s = scaling_fits.sensitivity_table(slopes, by)
    local = scaling_fits.local_slopes(every, by)
    header_l, table_l = scaling_fits.local_table(local, by)
    claims = scaling_fits.claims(slopes, local, by, plain)
    by_c = scaling_fits.scaling_exponents(exact, ["family", "k", *extra, "n"], "c")
    table_c = [[*key, scaling_fits.fit_text(fit), ", ".join(f"{v:g}" for v in cs), f"{cens:.0%}"]
               for key, (fit, cs, cens, _) in by_c.items() if len(cs) >= 2]
    header_c = ["family", "k", *extra, "n", "exponent of 1/c [95% CI]", "c", "censored"]
    criteria = scaling_fits.criteria(every)
    names = ["family", "k", *extra, "c", "n"]
    cells = _cells_table(exact, names, [part for _, _, part in criteria[1:]])
    header_cells = ["family", "k", *extra, "c", "n", "trials", "learned", "median steps [IQR]",
                    *(f"median steps to {label} [IQR]" for label, _, _ in criteria[1:]),
                    "median step J separated (-: most stopped first)", "median min_j |I(D, j)|"]
    mech = _mechanism_fit(exact)
    variants = len({v for _, v in slopes})
    return (f"## {optimizer(every)} steps to learn k-juntas and k-parities: how they grow with n, k and c\n\n"
            f"{network_text(every)}; p_i = 1/2 + U[-c, c] (c = 0: uniform). Steps: first record with test error 0 "
            f"(records at {vals(every, 'records_per_doubling')} per doubling of the step count from step "
            f"{vals(every, 'eval_every')}, so steps are resolved to about "
            f"{100 * (2 ** (1 / int(every['records_per_doubling'].max())) - 1):.0f}%; exact over "
            f"{{0,1}}^n for n <= {EXACT_MAX_N}, else on {vals(every, 'test_size')} fresh examples); a trial "
            "stops when it learns (test error 0, the strictest criterion), and the same training gives the steps "
            f"to each looser criterion ({', '.join(label for label, _, _ in criteria)}).{_resolution_text(every)} "
            "Censored trials (not learned within the budget) enter the fits as censored, not dropped. "
            f"{_censored_medians(every)}\n\n"
            "### Exponent of n\n\nTobit fit (maximum likelihood, right-censored normal) of log(steps) = "
            "a log(n) + b + s e over every trial of the (family, k, c) group; a is the exponent of n in the "
            f"median steps. Interval: 2.5-97.5% percentiles of {scaling_fits.BOOTSTRAP} bootstrap fits (trials resampled "
            "within each n). 'Slope of medians': least squares on log(median) over the n whose median is "
            "not censored, for comparison. 'not identified': fewer than two n with a learned trial.\n\n"
            + summary.markdown_table(header, table)
            + "\n\n### Sensitivity: criterion x range of n x fit x initialisation\n\n"
              "The exponent of n under each of the run's variants: criterion (test error 0, or <= eps, from "
              f"the same trainings), range of n (all, or n >= {scaling_fits.RANGE_MIN_N}), fit (Tobit over every trial, "
              "censored ones included, with its bootstrap interval; or least squares on the log medians of the "
              "cells at most half censored, '-' with fewer than two), initialisation (he: first layer N(0, 2/n), "
              "LeCun output with a bias; lecun-nobias: N(0, 1/n), no output bias; cells that differ only in init "
              "share their trial keys).\n\n"
            + summary.markdown_table(header_s, table_s)
            + f"\n\nClaims, each checked in every one of the {variants} variants (point estimates):\n\n"
            + ("\n".join(claims) if claims else "- no claim can be checked on this grid (one c, one k, ...)")
            + "\n\n### Local slopes\n\nThe slope of log(median steps) against log(n) between consecutive n "
              "('-': a censored median); one exponent over the whole range hides a curve that bends.\n\n"
            + summary.markdown_table(header_l, table_l)
            + "\n\n### Exponent of 1/c at fixed n\n\nThe same fit of log(steps) against log(1/c) over c > 0 (at "
              "least two values of c; test error 0).\n\n"
            + (summary.markdown_table(header_c, table_c) if table_c else "- fewer than two c > 0 in this grid")
            + "\n\n### Mechanism: the support separates in the first layer\n\n"
              "'Step J separated': the first record from which every support coordinate's first-layer "
              "row norm ||W1[j]||_2 stays above every off-support row norm. I(D, j) = E[f x_j] - E[f] E[x_j], the "
              "degree-1 signal (000 Lemma 11: for p_i = 1/2 + U[-c, c], P[max_J |I| <= t] <= (2/c)^k sqrt(t / "
              "(2 alpha^2)), alpha = 1/2 - c; a k-parity's is exactly p_j (1 - p_j) prod_{i in J \\ j} |2 p_i - 1|). "
            + mech + "\n\n### Cells\n\n" + summary.markdown_table(header_cells, cells) + "\n"
            + divergence_note(exact) + "\n" + theory_section(exact))


def _signal_trials(trials):
    """The trials of the first initialisation (both train on the same p and target), smoothed (c > 0), whose
    signal ``influence_max`` is known: one point per distribution."""
    if "influence_max" not in trials:
        return trials.take(np.zeros(len(trials), bool))
    keep = np.asarray(trials["c"], np.float64) > 0
    if "init" in trials:
        keep &= _first_init(trials)
    return trials.take(keep & np.isfinite(np.asarray(trials["influence_max"], np.float64)))


def lemma11_points(trials, capped: bool = True):
    """``(table, measured, bound, codes, keys)`` for 000 Lemma 11 over the smoothed trials (:func:`_signal_trials`)
    by (family, k, c): each trial's max_J |I(D, j)| = t, the empirical P[max_J |I| <= t] of its cell
    (``measured``) and the lemma's (2/c)^k sqrt(t / (2 alpha^2)), alpha = 1/2 - c (``bound``; capped at 1 unless
    ``capped=False``)."""
    sel = _signal_trials(trials)
    codes, keys = tables.groups(sel, ["family", "k", "c"])
    t = np.asarray(sel["influence_max"], np.float64)
    measured = theory.empirical_cdf(codes, t)
    c = np.asarray(sel["c"], np.float64)
    bound = theory.lemma11_probability(t, 0.5 - c, c, np.asarray(sel["k"], np.float64), capped=capped)
    return sel, measured, bound, codes, keys


def lemma11_check(trials):
    """000 Lemma 11, uncapped, against every smoothed trial with t > 0 (None: no smoothed trial)."""
    sel, measured, bound, _, _ = lemma11_points(trials, capped=False)
    if not len(sel):
        return None
    t = np.asarray(sel["influence_max"], np.float64)
    return verdicts.check("000 Lemma 11", "P[max_J |I(D, j)| <= t] <= (2/c)^k sqrt(t / (2 alpha^2)), alpha = 1/2 - c, "
                        "for p_i = 1/2 + U[-c, c], uncapped", bound[t > 0], measured[t > 0], "upper",
                        unit="smoothed trials", note=f"Measured: the empirical P[max_J |I| <= t] of the trial's "
                        f"(family, k, c) at its own t ({int((t <= 0).sum()):,} trials with t = 0 count in it).")


def theory_section(trials) -> str:
    """gd-scaling's "Theory" section: 000 Lemma 11 against every smoothed trial's exact signal; Lemma 9 outside."""
    lemma11 = lemma11_check(trials)
    lines = [lemma11 if lemma11 is not None else
             verdicts.outside("000 Lemma 11", "P[max_J |I(D, j)| <= t] <= (2/c)^k sqrt(t / (2 alpha^2))",
                            "no smoothed trial (c > 0) in these rows: the lemma is about p_i = 1/2 + U[-c, c]"),
             verdicts.outside("000 Lemma 9", "|I(D_w, j)| > alpha^2 (2c)^(k-1)", "it needs |p_j - 1/2| >= c, which p_i "
                            "= 1/2 + U[-c, c] does not give (the exact signal p_j (1 - p_j) prod_{i in J \\ j} |2 p_i "
                            "- 1| is `influence_min` / `influence_max` for parities)")]
    return verdicts.section(lines, "Each statement of the seed this study tests, its kind first, against the measured "
                                 "points.")


def _iqr_texts(q, budgets) -> list[str]:
    """:func:`~jaxtrees.experiments.report.steps.median_iqr` of each group from its quartiles ``q[g]``."""
    return [f"{steps.count_text(q2, b)} [{steps.count_text(q1, b)}, {steps.count_text(q3, b)}]"
            for (q1, q2, q3), b in zip(q, budgets)]


def _cells_table(exact, names, loose) -> list[list]:
    """The report's table of cells (groups of ``names``) from the trials ``exact``: trials, learned,
    the quartiles of the steps (and of ``steps_eps`` in each looser criterion's trials ``loose``), the
    median step J separated and the median min_j |I(D, j)|; one group-by per column."""
    keys, q = steps.group_quartiles(exact, names)
    codes, _ = tables.group_codes(exact, names)
    trials = np.bincount(codes, minlength=len(keys))
    learned = np.bincount(codes, np.isfinite(steps.censored_steps(exact)).astype(np.float64), minlength=len(keys))
    budgets = steps.group_first(exact, names, "max_steps")
    columns = [_iqr_texts(q, budgets)]
    for part in loose:  # the same cells in a looser criterion's trials, the exact cell's budget
        at = dict(zip(*steps.group_quartiles(part, names, "steps_eps")))
        columns.append(_iqr_texts([at[key] for key in keys], budgets))
    _, separated = steps.group_quartiles(exact, names, "separated_all")
    influence_min = np.asarray(exact["influence_min"], np.float64)
    _, influence, _ = group_medians(exact, names, influence_min)
    with_nan = np.bincount(codes, np.isnan(influence_min).astype(np.float64), minlength=len(keys)) > 0
    influence[with_nan] = np.nan  # as np.median: NaN where a value is
    return [[*key, int(n), f"{int(k)}/{int(n)}", *(c[g] for c in columns),
             f"{int(sep):,}" if np.isfinite(sep) else "-", f"{inf:.2g}"]
            for g, (key, n, k, sep, inf) in enumerate(zip(keys, trials, learned, separated[:, 1], influence))]


def _mechanism_points(trials):
    """``(min_j |I(D, j)|, step J separated)`` of the trials whose support separated and whose signal is > 1e-6."""
    influence, separated = np.asarray(trials["influence_min"], np.float64), np.asarray(trials["separated_all"])
    keep = (separated > 0) & (influence > 1e-6)
    return influence[keep], separated[keep], keep


def _mechanism_fit(trials) -> str:
    """Least squares of log(step J separated) on log(min_j |I(D, j)|) over trials where both exist."""
    influence, separated, _ = _mechanism_points(trials)
    if influence.size < 3 or np.unique(influence).size < 2:
        return "Too few trials with a separated support and a nonzero signal to fit separation against I."
    x, y = np.log(influence), np.log(separated.astype(np.float64))
    slope = float(np.polyfit(x, y, 1)[0])
    r = float(np.corrcoef(x, y)[0, 1])
    return (f"Over the {influence.size} trials whose support separated and whose weakest support coordinate has "
            f"|I| > 1e-6: log(step J separated) = {slope:.2f} log(min_j |I(D, j)|) + const (least squares, "
            f"correlation {r:.2f}; a gradient signal of size I needs ~I^-2 steps to stand out of noise: slope -2).")


@summary.styled
def scaling_plot(rows, stem):
    """gd-scaling's figures: steps vs n per (family, k), and the mechanism (:func:`_mechanism_plot`)."""
    every = scaling_fits.trials(rows)
    trials = scaling_fits.exact_trials(every)
    loose = scaling_fits.criteria(every)[1:2]  # the loosest criterion, dashed
    extra = varying(trials, TRAINING + ("optimizer", "records_per_doubling", "init"))
    names = ["family", "k", *extra, "c"]
    panels = nested(trials, ["family", "k", *extra], ["c"])
    fig, axes = summary.figure(len(panels), width=5.6, height=4.6)
    budget = int(trials["max_steps"].max())
    fits = scaling_fits.scaling_exponents(trials, names, "n")
    dashed = []  # per looser criterion: {curve key: [(n, median steps)]}
    for _, column, rows_ in loose:
        keys, q = steps.group_quartiles(rows_, [*names, "n"], column)
        curves = {}
        for key, median in zip(keys, q[:, 1]):
            curves.setdefault(key[:-1], []).append((key[-1], median))
        dashed.append(curves)
    codes, cells = tables.groups(trials, [*names, "n"])
    counts = np.bincount(codes, minlength=len(cells))
    unlearned = (~np.isfinite(steps.censored_steps(trials))).astype(np.float64)
    censored = dict(zip(cells, np.bincount(codes, unlearned, minlength=len(cells)) / counts))
    for ax, (key, (_, curves)) in zip(axes, panels.items()):
        for (c,), part in curves.items():
            fit = fits.get((*key, c), (None,))[0]
            slope = f", n^{fit.fit.slope:.2f}" if fit is not None and fit.fit.converged else ""
            summary.median_curve(ax, part, "n", smoothing(c) + slope)
            colour = ax.get_lines()[-1].get_color()
            for points in dashed:
                points = points.get((*key, c), [])
                ax.plot([n for n, _ in points], [m if np.isfinite(m) else np.nan for _, m in points], "--",
                        color=colour, lw=1)
            for n in present(part, "n"):
                share = float(censored[(*key, c, n)])
                if share > 0:
                    ax.plot([n], [budget], "^", color=colour, ms=4 + 8 * share, alpha=0.7, ls="none")
        budget_lines(ax, budget, barak=False)
        ax.set_xlabel("input bits n")
        ax.set_title(f"random {key[1]}-{'parities' if key[0] == 'parity' else 'juntas'}" + suffix(extra, key[2:]))
        ax.legend(fontsize=8, loc="upper left")  # per panel: the fitted exponents are the panel's
    axes[0].set_ylabel(f"{optimizer(trials)} steps to 0 test error\n(median, interquartile band)")
    summary.suptitle(fig, f"{optimizer(trials)} ({network(trials)}), online, p_i = 1/2 + U[-c, c]: steps vs n on log-log "
                          f"axes; legend: Tobit-fitted exponent of n"
                          + (f"; dashed: median steps to test {loose[0][0]}" if loose else "")
                          + "; triangles at the budget: share of censored "
                          f"trials (size); {summary.trials_text(counts.tolist())}")
    files = saving.save(fig, stem)
    mine = trials.take(_first_init(trials))  # the mechanism of the first init's trainings
    return files + _mechanism_plot(rows.take(_same_trials(rows, mine)), trials.take(_same_trials(trials, mine)), stem)


def _first_init(trials) -> np.ndarray:
    """The mask of the trials of the first row's initialisation (told by its code: no object per row)."""
    init = first(trials, "init")
    return tables.mapped(trials, "init", lambda value: value == init, bool)


def _same_trials(rows, trials) -> np.ndarray:
    """The mask of ``rows`` whose trial (cell, replicate) is one of ``trials``'."""
    def ids(t):
        return np.asarray(t["cell"], np.int64) * (2**31) + np.asarray(t["replicate"], np.int64)

    return np.isin(ids(rows), ids(trials))


def _mechanism_plot(rows, trials, stem):
    """Left: median first-layer row norm on J (solid) and off J (dashed) over training, one panel per
    k at the largest n (parities, or juntas without parities); right: step J separated vs min |I|."""
    family = "parity" if "parity" in rows.unique("family") else "junta"
    rows_ = rows.take(tables.mapped(rows, "family", lambda value: value == family, bool))
    n_top = int(rows_["n"].max())
    ks = present(rows_, "k")
    at_top = rows_.take(rows_["n"] == n_top)
    fig, axes = summary.figure(len(ks) + 2, width=5.2, height=4.4)
    for ax, k in zip(axes, ks):
        sel = at_top.take(at_top["k"] == k)
        codes, keys = tables.groups(sel, ["c", "step"])
        count = np.bincount(codes, minlength=len(keys))
        curves = {}  # column -> {c: [(step, median over the trials still training)]}
        for column in ("norm_on", "norm_off"):
            v = np.asarray(sel[column], np.float64)
            _, medians, _ = group_medians(sel, ["c", "step"], v)
            finite = np.bincount(codes, np.isfinite(v).astype(np.float64), minlength=len(keys))
            keep = finite >= np.maximum(1, count // 4)  # while a quarter of the trials still train
            curves[column] = {}
            for (c, step), m, ok in zip(keys, medians, keep):
                points = curves[column].setdefault(c, [])
                if ok:
                    points.append((step, float(m)))
        for i, c in enumerate(curves["norm_on"]):
            label = smoothing(c, "uniform")
            for column, ls, where in (("norm_on", "-", " on J"), ("norm_off", "--", " off J")):
                points = curves[column][c]
                if points:
                    ax.plot(*zip(*points), ls=ls, color=f"C{i}", label=label + where)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, ncols=2)
        ax.set_xscale("log")
        ax.set_xlabel(f"{optimizer(rows)} step")
        ax.set_title(f"{k}-{family}, n = {n_top}")
        ax.grid(alpha=0.3, which="both")
    axes[0].set_ylabel("first-layer row norm ||W1[i]||_2\n(median over trials still training)")
    ax = axes[-2]
    *_, keep = _mechanism_points(trials)
    for (family_, k), sel in tables.split(trials.take(keep), ["family", "k"]).items():
        ax.plot(np.asarray(sel["influence_min"], np.float64), np.asarray(sel["separated_all"]), ls="none", ms=3,
                alpha=0.5, label=f"{k}-{family_}", **summary.series_style(ax))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("min over J of |I(D, j)| (degree-1 signal)")
    ax.set_ylabel("step by which J separated")
    ax.set_title("separation vs signal, every trial")
    ax.grid(alpha=0.3, which="both")
    if ax.get_legend_handles_labels()[0]:  # no trial separated and identified: an empty panel, no legend
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "no trial whose support separated", transform=ax.transAxes, ha="center", va="center")
    _lemma11_panel(axes[-1], trials)
    summary.suptitle(fig, "Mechanism: the support's first-layer weights grow away from the rest")
    return saving.save(fig, stem + "_mechanism")



def _lemma11_panel(ax, trials):
    """000 Lemma 11 beside its measurement: per smoothed (family, k, c), the empirical P[max_J |I| <= t] (solid
    steps) and the lemma's (2/c)^k sqrt(t / (2 alpha^2)) (dashed, same colour)."""
    sel, measured, bound, codes, keys = lemma11_points(trials)
    t = np.asarray(sel["influence_max"], np.float64)
    lemma11 = lemma11_check(trials)
    if lemma11 is not None:
        ax.plot([], [], "k--", lw=1, label="Lemma 11" + (", vacuous at this size" if lemma11.kind == "vacuous" else ""))
    for g, (family_, k, c) in enumerate(keys):
        mine = np.flatnonzero(codes == g)
        order = mine[np.argsort(t[mine], kind="stable")]
        look = summary.series_style(ax)
        ax.step(t[order], measured[order], where="post", color=look["color"], label=f"{k}-{family_}, c = {c:g}")
        ax.plot(t[order], bound[order], "--", color=look["color"], lw=1)
    ax.set_xscale("log")
    ax.set_ylim(*summary.RATE_LIMITS)
    ax.set_xlabel("t (max over J of |I(D, j)|)")
    ax.set_title("000 Lemma 11: P[max_J |I| <= t]\n(dashed: (2/c)^k sqrt(t / (2 alpha^2)))")
    ax.grid(alpha=0.3, which="both")
    if keys:
        ax.legend(fontsize=7)
