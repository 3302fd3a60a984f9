"""The ``compare`` study's figures and report: the atlas at a glance, one figure per target family, the learnability
map, and 003 Theorem 2 for the rank learners.

:func:`report` takes the learners' settings table from :mod:`~jaxtrees.experiments.studies.compare` (which sizes the
learners); :func:`plot` draws every figure.
"""

from __future__ import annotations

import functools

import numpy as np

from jaxtrees.experiments import table as tables
from jaxtrees.experiments.report import saving, summary
from jaxtrees.experiments.studies import verdicts
from jaxtrees.experiments.studies.common import at_max, group_max, keyed
from jaxtrees.learners.rank import sample_bound

#: How a panel names its targets.
PLURALS = {"parity": "{k}-parities", "junta": "{k}-juntas", "tree": "depth-{k} trees", "rank": "rank-{k} trees",
           "addressing": "f_(1,{k}) addressing"}

def _c_label(c) -> str:
    return "uniform" if float(c) == 0 else f"c = {float(c):g}"


def _label(name: str, estimated=frozenset()) -> str:
    """A learner's name in a figure: km counts queries; "(est.)" where its error is measured on a test sample."""
    return f"{name} (queries)" if name == "km" else f"{name} (est.)" if name in estimated else name


def _estimated(rows) -> frozenset:
    """The learners whose errors the rows measure on a test sample (exact = 0), not exactly."""
    codes, learners = tables.factorize(rows, "learner")  # by their codes: no object per row
    return frozenset(learners[np.bincount(codes[np.asarray(rows["exact"]) == 0], minlength=len(learners)) > 0].tolist())


@summary.styled
def plot(rows, stem):
    curves = {}  # family -> (k, n, c) -> learner -> its rates over m: one pass over the rows
    for g in tables.rates(rows, ["family", "k", "n", "c", "learner", "m"], "success"):
        panel = curves.setdefault(g["family"], {}).setdefault((g["k"], g["n"], g["c"]), {})
        panel.setdefault(g["learner"], []).append(g)
    estimated = _estimated(rows)
    families = [functools.partial(family_plot, panels, family, f"{stem}_{family}", estimated)
                for family, panels in curves.items()]
    return saving.side_by_side(lambda: _overview_plot(rows, stem), *families)


def _overview_plot(rows, stem):
    """The atlas at a glance: per target family, each learner's success rate at the largest m, one
    bar per c (95% Wilson interval as an error bar)."""
    from matplotlib import colormaps

    panel_by = ["family", "k", "n"]
    top = at_max(rows, panel_by, "m")  # each panel's rows at its largest m
    bars = keyed(tables.rates(top, [*panel_by, "c", "learner"], "success"), [*panel_by, "c", "learner"])
    m_tops = group_max(top, panel_by, "m")
    names, estimated = rows.unique("learner"), _estimated(rows)
    fig, axes = summary.figure(len(m_tops), width=5.0, height=2.6 + 0.3 * len(names))  # title, legend, axis: ~2.3 in
    cs = rows.unique("c")
    height = 0.8 / len(cs)
    counts = []
    for ax, ((family, k, n), m_top) in zip(axes, m_tops.items()):
        for j, c in enumerate(cs):
            groups = {name: bars[(family, k, n, c, name)] for name in names if (family, k, n, c, name) in bars}
            counts += [g["trials"] for g in groups.values()]
            ys = [i + (j - (len(cs) - 1) / 2) * height for i in range(len(names))]
            rate = [groups[name]["rate"] if name in groups else 0.0 for name in names]
            err = [[max(0.0, r - groups[name]["low"]) if name in groups else 0.0 for r, name in zip(rate, names)],
                   [max(0.0, groups[name]["high"] - r) if name in groups else 0.0 for r, name in zip(rate, names)]]
            ax.barh(ys, rate, height=height, xerr=err, label=_c_label(c), color=colormaps["tab10"].colors[j % 10],
                    error_kw={"lw": 0.6, "alpha": 0.6})
        ax.set_yticks(range(len(names)), [_label(name, estimated) for name in names])
        ax.invert_yaxis()
        ax.set_xlim(0, 1.05)
        ax.set_xlabel(f"P[success] at m = {m_top}")
        ax.set_title(f"random {PLURALS[family].format(k=k)}, n = {n}")
        ax.grid(alpha=0.3, axis="x")
    summary.legend(fig, axes)
    summary.suptitle(fig, f"Each learner of the study on the same trials: success at the largest m "
                          f"({summary.trials_text(counts).replace('per point', 'per bar')})")
    return saving.save(fig, stem)


def family_plot(panels, family, stem, estimated=frozenset()):
    """One family's figure: ``panels`` maps (k, n, c) to {learner: its :func:`~jaxtrees.experiments.table.rates`
    over m}, each in sorted order."""
    learners_shown = len({name for curves in panels.values() for name in curves})
    cols = min(len(panels), summary.PANELS_PER_ROW)
    width = max(6.0, 13.0 / cols)  # room for a legend of one entry per learner
    legend_rows = -(-learners_shown // max(1, int(width * cols // 2.6)))
    fig, axes = summary.figure(len(panels), width=width, height=4.6 + 0.32 * legend_rows / -(-len(panels) // cols))
    counts = []
    for ax, ((k, n, c), curves) in zip(axes, panels.items()):
        for i, (name, groups) in enumerate(curves.items()):
            counts += [g["trials"] for g in groups]
            summary.rate_curve(ax, groups, "m", _label(name, estimated), band_alpha=0.08, ms=4, ls=("-", "--", ":")[min(i // 10, 2)])
        bound = theorem2_m(family, k, n)
        top = max((g["m"] for groups in curves.values() for g in groups), default=0)
        note = "" if bound is None else f"\nThm 2 m(0.1, 0.1) = {bound:,.0f}" + ("" if bound <= top else " (beyond)")
        if bound is not None and bound <= top:
            ax.axvline(bound, color="k", ls="-.", lw=1, label="003 Thm 2's m(0.1, 0.1), r = k (find-k, findmin)")
        summary.panel(ax, f"random {PLURALS[family].format(k=k)}, n = {n}, {_c_label(c)}{note}",
                      "training examples m (km: (2n + 1) m queries)", ylim=summary.RATE_LIMITS)
    return summary.finish(fig, axes, stem, "P[success]\n(95% Wilson band)",
                          f"Every learner on the same samples of {PLURALS[family].format(k='k')}: success = exact "
                          "error 0, or no error on a fresh test sample", counts)


REFERENCE = "id3-entropy"
#: What the seeds claim, which the atlas' findings (each cell: the reference and the learners that beat it) test.
_SEEDS = (f"ID3 is {REFERENCE} (greedy growth to the study's depth). The seeds claim ID3 learns juntas under smoothed "
          "product distributions (000, Theorem 2) but not parities under the uniform one (000, Theorem 1), that the "
          "addressing functions defeat impurity-based growth (002), and that boosting sparse parities helps where "
          "stumps cannot (004).\n\n")
#: The eps and delta at which the figures mark 003 Theorem 2's m(eps, delta) and the report checks it.
THEOREM2 = (0.1, 0.1)
#: The learners Theorem 2 (and Theorem 3) speak of: rank-r consistent trees.
RANK_LEARNERS = ("find-k", "findmin")
#: Families whose targets have rank <= k (a depth-k tree has 2^(k+1) - 1 nodes: Theorem 3's floor(log2 s) = k).
RANK_K_FAMILIES = ("parity", "junta", "tree", "rank")


def theorem2_m(family: str, k: int, n: int):
    """003 Theorem 2's m(eps, delta) (Theorem 3's for the depth-k trees, r = floor(log2 (2^(k+1) - 1)) = k) at
    :data:`THEOREM2` for a family of rank <= k; None for the addressing targets (rank not bounded by k)."""
    if family not in RANK_K_FAMILIES or not 1 <= int(k) <= int(n):
        return None
    return sample_bound(int(n), int(k), *THEOREM2)


def theorem2_report(rows) -> str:
    """compare's Theory section: 003 Theorem 2 for find-k and findmin, at every m of the grid from its m on."""
    if not any(name in rows.unique("learner") for name in RANK_LEARNERS):
        return ""
    eps, delta = THEOREM2
    sel = rows.take(tables.mapped(rows, "learner", lambda learner: learner in RANK_LEARNERS, bool))
    sel = sel.with_columns(_ok=np.asarray(sel["error"], np.float64) <= eps)
    curves = {}
    for g in tables.rates(sel, ["family", "k", "n", "c", "learner", "m"], "_ok"):
        bound = theorem2_m(g["family"], g["k"], g["n"])
        if bound is not None:
            curves.setdefault(tuple(g[name] for name in ("family", "k", "n", "c", "learner")), (bound, []))[1].append(g)
    return "\n" + verdicts.section([verdicts.sample_size_check(
        "003 Thm 2 (Thm 3 for depth-k trees)", f"P[error <= {eps:g}] >= {1 - delta:g} for find-k and findmin from m >= "
        "(1/eps) ((e n / r)^r ln(8n) + ln(1/delta)), r = k; the bound's m against the measured m from which the rate "
        f"stays >= {1 - delta:g}", list(curves.values()), 1 - delta, unit="(cell, learner) curves")],
        "The figures mark that m on every panel of a rank-k family (dash-dot) where it lies within the grid.")


def _estimated_note(rows, estimated: set) -> str:
    """What "(est.)" marks: success as no mistake on a test sample, an estimate, not exact success."""
    if not estimated:
        return ""
    sizes = rows.unique("test_m")
    size = ", ".join(f"{int(t):,}" for t in sizes)
    return (f"(est.): {', '.join(sorted(estimated))} are scored on test_m = {size} fresh examples, not exactly: their "
            f"success is no mistake on that sample (at 95%, an error below about 3 / {size}), an estimate, never "
            f"exact success.\n\n")


def report(rows, settings_table: str):
    """compare's report; ``settings_table``: the learners' settings (markdown) of the rows."""
    by = ["family", "k", "n", "c"]
    names = rows.unique("learner")
    curves = {}  # (family, k, n, c, learner) -> its rates over m: one pass over the rows
    for g in tables.rates(rows, [*by, "learner", "m"], "success"):
        curves.setdefault(tuple(g[name] for name in [*by, "learner"]), []).append(g)
    m90, top = {}, {}
    for (family, k, n, c, name), groups in curves.items():
        reach = summary.threshold([(g["m"], g["rate"]) for g in groups])
        if name == "km" and reach is not None:
            reach = f"{(2 * int(n) + 1) * reach} queries"
        best = max(groups, key=lambda g: g["m"])
        m90[(family, k, n, c, name)] = "-" if reach is None else reach
        top[(family, k, n, c, name)] = best
    cells = tables.cells(rows, by)
    estimated = _estimated(rows)
    label = {name: f"{name} (est.)" if name in estimated else name for name in names}
    maps = []
    for family in rows.unique("family"):
        columns = [cell[1:] for cell in cells if cell[0] == family]
        header = ["learner"] + [f"k = {k}, n = {n}, {_c_label(c)}" for k, n, c in columns]
        table = [[label[name]] + [m90.get((family, *column, name), "") for column in columns] for name in names]
        maps.append(f"#### {PLURALS[family].format(k='k')}\n\n" + summary.markdown_table(header, table))
    findings = []
    for cell in cells:
        family, k, n, c = cell
        where = f"{PLURALS[family].format(k=k)}, n = {n}, {_c_label(c)}"
        ref = top.get((*cell, REFERENCE))
        learned = [name for name in names if m90.get((*cell, name), "-") != "-"]
        if ref is not None:
            findings.append(f"- {where}: {REFERENCE} succeeds in {ref['rate']:.2f} [{ref['low']:.2f}, "
                            f"{ref['high']:.2f}] of trials at m = {ref['m']}"
                            + ("" if m90[(*cell, REFERENCE)] == "-" else f" (>= 0.9 from m = {m90[(*cell, REFERENCE)]})")
                            + (f"; learners reaching 0.9 that {REFERENCE} does not: "
                               + ", ".join(f"{name} ({m90[(*cell, name)]})" for name in learned)
                               if m90[(*cell, REFERENCE)] == "-" and learned else "")
                            + ("; no learner reaches 0.9" if not learned else "") + ".")
        else:  # a study of other learners (compare.with_learners): what each reaches, no reference
            findings.append(f"- {where}: " + (", ".join(f"{name} reaches 0.9 from m = {m90[(*cell, name)]}"
                                                        for name in learned) or "no learner reaches 0.9") + ".")
    boosting = []
    for cell in cells:
        pair = [top.get((*cell, name)) for name in ("adaboost-stumps", "adaboost-parities-2")]
        if all(pair):
            family, k, n, c = cell
            boosting.append(f"- {PLURALS[family].format(k=k)}, n = {n}, {_c_label(c)}: AdaBoost with stumps "
                            f"{pair[0]['rate']:.2f}, with 2-parities {pair[1]['rate']:.2f} at m = {pair[0]['m']}.")
    return ("## Every learner on the same trials\n\n"
            "Learnability map: the smallest m of the grid from which a learner succeeds in >= 90% of trials "
            "(\"-\": not within the grid). Success: exact error 0 for trees (exact scoring), no error on the fresh "
            "test sample otherwise; km counts membership queries, population-entropy grows from the distribution "
            "itself (it succeeds at every m or none).\n\n" + _estimated_note(rows, estimated)
            + "\n\n".join(maps)
            + "\n\n### The learners' settings\n\nWhat each learner of the rows ran (the registry's configuration "
            "at the study's size; names ending in -k follow the cell's k).\n\n" + settings_table
            + "\n\n### What the atlas shows\n\n" + (_SEEDS if REFERENCE in names else "")
            + "\n".join(findings) + "\n\n" + ("Boosting, success at the largest m:\n\n" + "\n".join(boosting) + "\n"
                                              if boosting else "") + theorem2_report(rows))
