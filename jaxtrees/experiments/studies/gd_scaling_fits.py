"""The fits behind gd-scaling's report: exponents of n and 1/c, the sensitivity table, the claims, local slopes.

Rows are gd-scaling's results (a :class:`~jaxtrees.experiments.table.Table`) reduced to one row per
trial (:func:`trials`). A variant of the exponent of n is a criterion (test error 0 or <= eps), an
initialisation, a range of n (:data:`RANGES`) and a fit (:data:`FITS`: a Tobit fit over every trial,
censored ones included, or least squares on the medians); the claims say whether they hold in every
variant.
"""

from __future__ import annotations

import math

import numpy as np

from jaxtrees.experiments.report import fits, steps, summary
from jaxtrees.experiments import table as tables
from jaxtrees.experiments.studies.gd_common import present, suffix

#: Bootstrap resamples behind every interval of the gd-scaling report.
BOOTSTRAP = 400
#: The restricted range of n of the report's sensitivity table (n >= this).
RANGE_MIN_N = 16


def trials(rows):
    """One row per trial (gd-scaling's rows run along ``step``; the scalars repeat on each), in (cell,
    replicate) order whatever the order of ``rows`` (the bootstrap resamples by position). Rows of runs
    made before the ``init`` parameter read as ``init = he``."""
    at = np.flatnonzero(np.asarray(rows["step"]) == np.asarray(rows["max_steps"]))
    if "cell" in rows and "replicate" in rows:
        at = at[np.lexsort((np.asarray(rows["replicate"])[at], np.asarray(rows["cell"])[at]))]
    out = rows.take(at)
    return out if "init" in out else out.with_columns(init=np.full(len(out), "he"))


def exact_trials(trials):
    """The trials of the run's first eps: cells that differ only in eps share their trial keys (the
    same trainings), so the exact criterion counts each training once."""
    if "eps" not in trials:
        return trials
    return trials.take(trials["eps"] == trials["eps"].min())


def criteria(trials) -> list[tuple[str, str, object]]:
    """``(label, steps column, trials)`` per success criterion: test error 0 (``steps``), then test
    error <= eps (``steps_eps``) for each eps > 0 of the run, largest first."""
    out = [("error 0", "steps", exact_trials(trials))]
    if "eps" in trials:
        for eps in sorted((e for e in present(trials, "eps") if e > 0), reverse=True):
            out.append((f"error <= {eps:g}", "steps_eps", trials.take(trials["eps"] == eps)))
    return out


def _exponent_cell(sel, x, column="steps"):
    """Tobit fit (with a stratified bootstrap) of log(steps) on ``x`` (one value per trial) over the trials ``sel``."""
    _, y, censored = steps.log_steps(sel, column)
    return fits.bootstrap_fit(x, y, censored, replicates=BOOTSTRAP)


def fit_text(out) -> str:
    """A bootstrap fit's slope with its interval (``not identified`` where it did not converge)."""
    if not out.fit.converged:
        return "not identified"
    if not out.replicates:
        return f"{out.fit.slope:.2f}"
    return f"{out.fit.slope:.2f} [{out.low:.2f}, {out.high:.2f}]"


def scaling_exponents(trials, by, x_name, column="steps"):
    """{group key: (BootstrapFit, distinct x values, censored share, the group's trials)} for log steps vs
    log n (``x_name="n"``) or vs log(1/c) over c > 0 (``"c"``)."""
    out = {}
    for key, sel in tables.split(trials, by).items():
        if x_name == "c":
            sel = sel.take(sel["c"] > 0)
        if not len(sel):
            continue
        values = np.asarray(sel[x_name], np.float64)
        fit = _exponent_cell(sel, np.log(1.0 / values) if x_name == "c" else np.log(values), column)
        values = present(sel, x_name)
        censored = float(np.mean(~np.isfinite(steps.censored_steps(sel, column))))
        out[key] = (fit, values, censored, sel)
    return out


#: The n ranges of the sensitivity table: label -> the smallest n kept.
RANGES = {"all n": 0, f"n >= {RANGE_MIN_N}": RANGE_MIN_N}
#: The fits of the sensitivity table.
FITS = ("Tobit", "medians")


def _variant_fit(sel, column, fit) -> tuple[float, str]:
    """``(slope, text)`` of one variant's fit over the trials ``sel``: Tobit over every trial (with
    its bootstrap interval), or least squares on the medians of the cells at most half censored
    (NaN, "-": not identified)."""
    if not len(sel):
        return np.nan, "-"
    x, y, censored = steps.log_steps(sel, column)
    if fit == "Tobit":
        out = fits.bootstrap_fit(x, y, censored, replicates=BOOTSTRAP)
        return (out.fit.slope if out.fit.converged else np.nan), fit_text(out)
    out = fits.median_fit(x, y, censored)
    return (out.slope, f"{out.slope:.2f}") if out.converged else (np.nan, "-")


def sensitivity(trials, by) -> dict:
    """{(group key, (criterion, init, range, fit)): (slope, text)}: the exponent of n of every group
    of ``by`` under every variant of the run (criteria x inits x :data:`RANGES` x :data:`FITS`)."""
    out = {}
    for label, column, rows in criteria(trials):
        groups = {name: tables.split(rows.take(rows["n"] >= low), ["init", *by]) for name, low in RANGES.items()}
        for init in present(rows, "init"):  # the order of the variants: criterion, init, range, group, fit
            for name in RANGES:
                for (init_, *key), sel in groups[name].items():
                    if init_ == init:
                        for fit in FITS:
                            out[(tuple(key), (label, init, name, fit))] = _variant_fit(sel, column, fit)
    return out


def sensitivity_table(fits, by) -> tuple[list, list]:
    """The sensitivity table: one row per (group, criterion, init), one column per (fit, range)."""
    columns = [(fit, name) for fit in FITS for name in RANGES]
    rows = {}
    for (key, (label, init, name, fit)), (_, text) in fits.items():
        rows.setdefault((key, label, init), {})[(fit, name)] = text
    header = [*by[:-1], "c", "criterion", "init"] + [f"{fit}, {name}" for fit, name in columns]
    table = [[*key[:-1], f"{key[-1]:g}", label, init] + [rows[(key, label, init)].get(col, "-") for col in columns]
             for key, label, init in by_group(rows)]
    return header, table


def by_group(keys) -> list:
    """``(group key, criterion, init)`` triples ordered by group (natural order), then criterion and
    init in the order they first appear."""
    keys = list(keys)
    first = {}
    for _, label, init in keys:
        first.setdefault(label, len(first))
        first.setdefault(("init", init), len(first))
    return sorted(keys, key=lambda t: (tuple(summary.natural_key(str(v)) for v in t[0]), first[t[1]],
                                       first[("init", t[2])]))


def _verdict(results) -> str:
    """A sentence's end on a claim from ``[(variant name, True / False / None)]`` (None: not identified)."""
    held = [v for v, ok in results if ok]
    failed = [v for v, ok in results if ok is False]
    unknown = [v for v, ok in results if ok is None]

    def names(vs):
        return "; ".join(vs[:6]) + (f"; and {len(vs) - 6} more" if len(vs) > 6 else "")

    if not held and not failed:
        return "not identified in any variant."
    if not held and not unknown:
        return f"**fails in every variant** ({len(failed)} of {len(results)})."
    if not failed and not unknown:
        return f"**holds in every variant** ({len(held)} of {len(results)})."
    if not failed:
        return (f"**holds in every variant where identified** ({len(held)} of {len(results)}; not identified in: "
                f"{names(unknown)}).")
    text = f"**depends on the variant**: holds in {len(held)} of {len(results)}, fails in: {names(failed)}"
    return text + (f"; not identified in: {names(unknown)}" if unknown else "") + "."


def group_name(group: dict, extra) -> str:
    """'3-parities' / '2-juntas', with the varying training parameters."""
    family = "parities" if group["family"] == "parity" else "juntas"
    return f"{group['k']}-{family}" + suffix(extra, [group[b] for b in extra])


def ordered(values):
    return sorted(values, key=lambda key: tuple(summary.natural_key(str(v)) for v in key))


def claims(fits, local, by, extra) -> list[str]:
    """One sentence per claim saying whether it holds in every variant of ``fits`` (:func:`sensitivity`,
    point estimates): smoothing lowers the exponent of n (the largest c against c = 0); the exponent
    grows with k; the uniform curve bends upward (its last finite local slope above its first, per
    criterion and init: ``local``, :func:`local_slopes`)."""
    variants = sorted({v for _, v in fits}, key=lambda v: (v[0], v[1], list(RANGES).index(v[2]), FITS.index(v[3])))
    slope = {(key, v): a for (key, v), (a, _) in fits.items()}
    groups = [dict(zip(by, key)) for key in ordered({key for key, _ in fits})]
    key_of = lambda g: tuple(g[b] for b in by)  # noqa: E731

    def verdict(pairs):
        """pairs: variant -> list of group keys to compare in order; the claim: slopes strictly fall."""
        results = []
        for v in variants:
            a = [slope.get((key, v), np.nan) for key in pairs]
            results.append((", ".join(v), None if np.any(np.isnan(a)) else bool(np.all(np.diff(a) < 0))))
        return _verdict(results)

    lines = []
    for head in ordered({tuple(g[b] for b in by if b != "c") for g in groups}):
        sel = [g for g in groups if tuple(g[b] for b in by if b != "c") == head]
        cs = sorted(g["c"] for g in sel)
        if len(cs) < 2 or cs[0] != 0:
            continue
        zero = next(g for g in sel if g["c"] == 0)
        top = next(g for g in sel if g["c"] == cs[-1])
        lines.append(f"- Smoothing lowers the exponent of n of {group_name(zero, extra)} (c = {cs[-1]:g} below "
                     f"c = 0): " + verdict([key_of(zero), key_of(top)]))
    for head in ordered({tuple(g[b] for b in by if b != "k") for g in groups}):
        sel = sorted((g for g in groups if tuple(g[b] for b in by if b != "k") == head), key=lambda g: g["k"])
        if len(sel) < 2:
            continue
        ks = ", ".join(str(g["k"]) for g in sel)
        family = "parities" if sel[0]["family"] == "parity" else "juntas"
        lines.append(f"- The exponent of n grows with k (k = {ks}) for {family}"
                     f"{suffix(extra, [sel[0][b] for b in extra])} at c = {sel[0]['c']:g}: "
                     + verdict([key_of(g) for g in reversed(sel)]))
    bends = {}
    for (key, criterion, init), slopes in local.items():
        if key[-1] == 0:
            finite = [s for _, _, s in slopes if np.isfinite(s)]
            bends.setdefault(key, []).append((f"{criterion}, {init}", None if len(finite) < 2 else
                                              bool(finite[-1] > finite[0])))
    for key in ordered(bends):
        lines.append(f"- The uniform {group_name(dict(zip(by, key)), extra)} bend upward on log-log axes (last local "
                     f"slope above the first; per criterion and init): " + _verdict(bends[key]))
    return lines


def local_slopes(trials, by) -> dict:
    """{(group key, criterion, init): [(n0, n1, slope)]}: the slope of log(median steps) against log n
    between consecutive n (NaN where a median is censored), under every criterion and init."""
    out = {}
    for label, column, rows in criteria(trials):
        for (init, *key), sel in tables.split(rows, ["init", *by]).items():  # ordered by init, then group
            x, y, censored = steps.log_steps(sel, column)
            out[(tuple(key), label, init)] = [(math.exp(a), math.exp(b), s)
                                              for a, b, s in fits.local_slopes(x, y, censored)]
    return out


def local_table(local, by) -> tuple[list, list]:
    """The local slopes as a table: one row per (group, criterion, init), one column per pair of consecutive n."""
    pairs = sorted({(round(a), round(b)) for slopes in local.values() for a, b, _ in slopes})
    header = [*by[:-1], "c", "criterion", "init"] + [f"{a}→{b}" for a, b in pairs]
    table = []
    for key, label, init in by_group(local):
        at = {(round(a), round(b)): s for a, b, s in local[(key, label, init)]}
        table.append([*key[:-1], f"{key[-1]:g}", label, init]
                     + [f"{at[p]:.2f}" if p in at and np.isfinite(at[p]) else "-" for p in pairs])
    return header, table


def median_slope(sel, column="steps") -> str:
    fits = steps.median_exponents(sel, [], column)
    return f"{fits[()][0]:.2f}" if () in fits else "-"
