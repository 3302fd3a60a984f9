"""gd-scaling's report and figures: exponent tables, sensitivity, claims, local slopes, cells and the mechanism.

The fits are :mod:`~jaxtrees.experiments.studies.gd_scaling_fits`'; every text names the network, the
optimizer and the training from the rows' own configuration. The mechanism figure follows the first
layer: row norms ||W1[j]||_2 on and off the support J over training, and the step by which J
separates against the degree-1 signal min_j |I(D, j)| (:func:`jaxtrees.targets.label_covariance`).
"""

from __future__ import annotations

import math

import numpy as np

from jaxtrees.experiments import analysis, summary
from jaxtrees.experiments.studies import gd_scaling_fits as scaling_fits
from jaxtrees.experiments.studies.gd_common import (EXACT_MAX_N, TRAINING, budget_lines, divergence_note, network,
                                                    network_text, optimizer, smoothing, suffix, vals, varying)

#: Fresh test examples that resolve a test error of 0.05 to +/- 0.01: the 95% binomial half-width
#: 1.96 sqrt(0.05 x 0.95 / N) is <= 0.01 from N = 1,825 on (2,048: +/- 0.0094; 8,192: +/- 0.0047).
RESOLVING_TEST_SIZE = 1825


def _censored_medians(trials) -> str:
    """A sentence naming the cells whose median is censored (more than half not learned), per criterion."""
    parts = []
    for label, column, rows in scaling_fits.criteria(trials):
        cells = [key for key, sel in summary.split(rows, ["family", "k", "c", "n", "init"]).items()
                 if not np.isfinite(analysis.median(analysis.censored_steps(sel, column)))]
        names = ", ".join(f"{k}-{f}, c = {c:g}, n = {n}, {i}" for f, k, c, n, i in cells)
        parts.append(f"{label}: " + (f"{len(cells)} ({names})" if cells else "none"))
    return "Cells whose median is censored (more than half of the trials not learned within the budget): " + \
        "; ".join(parts) + "."


def _resolution_text(trials) -> str:
    """How finely the test set resolves the criteria."""
    sizes = sorted({r["test_size"] for r in trials})
    eps = sorted({r["eps"] for r in trials if r.get("eps", 0) > 0}) if "eps" in trials[0] else []
    sampled = any(r["n"] > EXACT_MAX_N for r in trials)
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
    cells, names = [], ["family", "k", *extra, "c", "n"]
    for key, sel in summary.split(exact, names).items():
        s = analysis.censored_steps(sel)
        budget = sel[0]["max_steps"]
        loose = [analysis.median_iqr(analysis.censored_steps([r for r in part if _same_cell(r, sel[0], names)],
                                                             "steps_eps"), budget) for _, _, part in criteria[1:]]
        cells.append([*key, len(s), f"{int(np.isfinite(s).sum())}/{len(s)}", analysis.median_iqr(s, budget), *loose,
                      analysis.median_count(sel, "separated_all"),
                      f"{np.median([r['influence_min'] for r in sel]):.2g}"])
    header_cells = ["family", "k", *extra, "c", "n", "trials", "learned", "median steps [IQR]",
                    *(f"median steps to {label} [IQR]" for label, _, _ in criteria[1:]),
                    "median step J separated (-: most stopped first)", "median min_j |I(D, j)|"]
    mech = _mechanism_fit(exact)
    variants = len({v for _, v in slopes})
    return (f"## {optimizer(every)} steps to learn k-juntas and k-parities: how they grow with n, k and c\n\n"
            f"{network_text(every)}; p_i = 1/2 + U[-c, c] (c = 0: uniform). Steps: first record with test error 0 "
            f"(records at {vals(every, 'records_per_doubling')} per doubling of the step count from step "
            f"{vals(every, 'eval_every')}, so steps are resolved to about "
            f"{100 * (2 ** (1 / max(r['records_per_doubling'] for r in every)) - 1):.0f}%; exact over "
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
              "degree-1 signal (000 Lemma 9: |I| > alpha^2 (2c)^(k-1) for a k-parity). "
            + mech + "\n\n### Cells\n\n" + summary.markdown_table(header_cells, cells) + "\n"
            + divergence_note(exact))


def _same_cell(a, b, names) -> bool:
    return all(a[name] == b[name] for name in names)


def _mechanism_fit(trials) -> str:
    """Least squares of log(step J separated) on log(min_j |I(D, j)|) over trials where both exist."""
    pts = [(r["influence_min"], r["separated_all"]) for r in trials
           if r["separated_all"] > 0 and r["influence_min"] > 1e-6]
    if len(pts) < 3 or len({i for i, _ in pts}) < 2:
        return "Too few trials with a separated support and a nonzero signal to fit separation against I."
    x, y = np.log([i for i, _ in pts]), np.log([s for _, s in pts])
    slope = float(np.polyfit(x, y, 1)[0])
    r = float(np.corrcoef(x, y)[0, 1])
    return (f"Over the {len(pts)} trials whose support separated and whose weakest support coordinate has "
            f"|I| > 1e-6: log(step J separated) = {slope:.2f} log(min_j |I(D, j)|) + const (least squares, "
            f"correlation {r:.2f}; a gradient signal of size I needs ~I^-2 steps to stand out of noise: slope -2).")


@summary.styled
def scaling_plot(rows, stem):
    """gd-scaling's figures: steps vs n per (family, k), and the mechanism (:func:`_mechanism_plot`)."""
    every = scaling_fits.trials(rows)
    trials = scaling_fits.exact_trials(every)
    loose = scaling_fits.criteria(every)[1:2]  # the loosest criterion, dashed
    extra = varying(trials, TRAINING + ("optimizer", "records_per_doubling", "init"))
    panels = summary.split(trials, ["family", "k", *extra])
    fig, axes = summary.figure(len(panels), width=5.6, height=4.6)
    budget = max(r["max_steps"] for r in trials)
    fits = scaling_fits.scaling_exponents(trials, ["family", "k", *extra, "c"], "n")
    names = ["family", "k", *extra, "c"]
    for ax, (key, sel) in zip(axes, panels.items()):
        for (c,), part in summary.split(sel, ["c"]).items():
            fit = fits.get((*key, c), (None,))[0]
            slope = f", n^{fit.fit.slope:.2f}" if fit is not None and fit.fit.converged else ""
            summary.median_curve(ax, part, "n", smoothing(c) + slope)
            colour = ax.get_lines()[-1].get_color()
            for _, column, rows_ in loose:
                points = [(n, analysis.median(analysis.censored_steps(cell, column)))
                          for (n,), cell in summary.split([r for r in rows_ if _same_cell(r, part[0], names)],
                                                          ["n"]).items()]
                ax.plot([n for n, _ in points], [m if np.isfinite(m) else np.nan for _, m in points], "--",
                        color=colour, lw=1)
            for (n,), cell in summary.split(part, ["n"]).items():
                censored = float(np.mean(~np.isfinite(analysis.censored_steps(cell))))
                if censored > 0:
                    ax.plot([n], [budget], "^", color=colour, ms=4 + 8 * censored, alpha=0.7, ls="none")
        budget_lines(ax, budget, barak=False)
        ax.set_xlabel("input bits n")
        ax.set_title(f"random {key[1]}-{'parities' if key[0] == 'parity' else 'juntas'}" + suffix(extra, key[2:]))
        ax.legend(fontsize=8, loc="upper left")  # per panel: the fitted exponents are the panel's
    axes[0].set_ylabel(f"{optimizer(trials)} steps to 0 test error\n(median, interquartile band)")
    summary.suptitle(fig, f"{optimizer(trials)} ({network(trials)}), online, p_i = 1/2 + U[-c, c]: steps vs n on log-log "
                          f"axes; legend: Tobit-fitted exponent of n"
                          + (f"; dashed: median steps to test {loose[0][0]}" if loose else "")
                          + "; triangles at the budget: share of censored "
                          f"trials (size); {summary.trials_text([len(v) for v in summary.split(trials, ['family', 'k', *extra, 'c', 'n']).values()])}")
    files = summary.save(fig, stem)
    first = {(r["cell"], r["replicate"]) for r in trials if r["init"] == trials[0]["init"]}
    return files + _mechanism_plot([r for r in rows if (r["cell"], r["replicate"]) in first],
                                   [r for r in trials if (r["cell"], r["replicate"]) in first], stem)


def _mechanism_plot(rows, trials, stem):
    """Left: median first-layer row norm on J (solid) and off J (dashed) over training, one panel per
    k at the largest n (parities, or juntas without parities); right: step J separated vs min |I|."""
    family = "parity" if any(r["family"] == "parity" for r in rows) else "junta"
    n_top = max(r["n"] for r in rows if r["family"] == family)
    ks = sorted({r["k"] for r in rows if r["family"] == family})
    fig, axes = summary.figure(len(ks) + 1, width=5.2, height=4.4)
    for ax, k in zip(axes, ks):
        sel = [r for r in rows if r["family"] == family and r["n"] == n_top and r["k"] == k]
        for i, ((c,), part) in enumerate(summary.split(sel, ["c"]).items()):
            colour = f"C{i}"
            label = smoothing(c, "uniform")
            for column, ls, where in (("norm_on", "-", " on J"), ("norm_off", "--", " off J")):
                points = []
                for (step,), at in summary.split(part, ["step"]).items():
                    v = np.asarray([r[column] for r in at], float)
                    if np.isfinite(v).sum() >= max(1, len(v) // 4):  # while a quarter of the trials still train
                        points.append((step, float(np.nanmedian(v))))
                if points:
                    ax.plot(*zip(*points), ls=ls, color=colour, label=label + where)
        ax.legend(fontsize=7, ncols=2)
        ax.set_xscale("log")
        ax.set_xlabel(f"{optimizer(rows)} step")
        ax.set_title(f"{k}-{family}, n = {n_top}")
        ax.grid(alpha=0.3, which="both")
    axes[0].set_ylabel("first-layer row norm ||W1[i]||_2\n(median over trials still training)")
    ax = axes[-1]
    for (family_, k), sel in summary.split(trials, ["family", "k"]).items():
        pts = [(r["influence_min"], r["separated_all"]) for r in sel
               if r["separated_all"] > 0 and r["influence_min"] > 1e-6]
        if pts:
            ax.plot(*zip(*pts), ls="none", ms=3, alpha=0.5, label=f"{k}-{family_}", **summary.series_style(ax))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("min over J of |I(D, j)| (degree-1 signal)")
    ax.set_ylabel("step by which J separated")
    ax.set_title("separation vs signal, every trial")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    summary.suptitle(fig, "Mechanism: the support's first-layer weights grow away from the rest")
    return summary.save(fig, stem + "_mechanism")

