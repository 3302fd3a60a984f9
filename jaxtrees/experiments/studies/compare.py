"""The ``compare`` study: every registered learner on the same trials (the comparison atlas).

A cell is (learner, family, k, n, c); the learner is *shared* (:attr:`Study.shared`), so trial r of
every learner in a cell sees the same distribution, target and sample (common random numbers), each
learner as the registry sizes it for the cell (:func:`size`). Targets, scoring and outputs:
docs/studies.md.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxtrees import learners, targets
from jaxtrees.core import checks, distributions, sampling
from jaxtrees.core import impurity as impurity_lib
from jaxtrees.experiments.report import summary
from jaxtrees.experiments.study import Compile, Study
from jaxtrees.experiments.studies import fourier
from jaxtrees.experiments.studies.common import (PRECISION_BITS, SUCCESS_TOL, at_max, check_sample_grid, chosen,
                                                 group_max, keyed, on_prefixes, sample_sizes, trial_keys)
from jaxtrees.hypotheses.base import sample_error
from jaxtrees.hypotheses.polynomial import n_subsets
from jaxtrees.learners import greedy
from jaxtrees.learners.fourier import MAX_GRAM_SETS
from jaxtrees.learners.rank import sample_bound
from jaxtrees.problems import Population, Queries

FAMILIES = ("parity", "junta", "tree", "rank", "addressing")
#: How a panel names its targets.
PLURALS = {"parity": "{k}-parities", "junta": "{k}-juntas", "tree": "depth-{k} trees", "rank": "rank-{k} trees",
           "addressing": "f_(1,{k}) addressing"}
#: The spine length of the rank-k targets.
RANK_LENGTH = 2


#: Families whose targets are juntas (a parity as a junta, :func:`~jaxtrees.targets.as_junta`): one
#: program serves them (:attr:`Study.buckets`).
JUNTAS = ("parity", "junta")


def target(family: str, key, n: int, k: int):
    """The cell's target; ``n`` and ``k`` are static. Parities and juntas come as :class:`~jaxtrees.targets.Junta`."""
    if family == "parity":
        return targets.as_junta(targets.random_parity(key, n, k))
    if family == "junta":
        return targets.random_junta(key, n, k)
    if family == "tree":
        return targets.random_tree(key, n, k)
    if family == "rank":
        return targets.random_rank_tree(key, n, k, RANK_LENGTH)
    return targets.addressing(1, k)


#: The ID3 learners that differ only in their impurity (``id3-<impurity>``) ...
ID3_BY_IMPURITY = {f"id3-{name}": name for name in impurity_lib.NAMES if f"id3-{name}" in learners.names()}
#: ... and the stumps, ID3 at depth 1: one branch of the program serves them all, the impurity and the depth
#: chosen by the learner's traced index (:func:`~jaxtrees.core.impurity.selected`, ``grow``'s traced depth).
STUMPS = {name: name.removeprefix("stump-") for name in learners.names() if name.startswith("stump-")}
#: Every learner of the "id3" branch, and its impurity.
GREEDY_BY_IMPURITY = {**ID3_BY_IMPURITY, **STUMPS}


def learner_unit(name: str) -> str:
    """The branch a learner runs in: ``"id3"`` for :data:`GREEDY_BY_IMPURITY`, else its own. The learners of
    a program (:func:`learner_program`) run in it as a ``lax.switch`` on the learner's traced index over
    their branches (one program's sampling, scoring and trial loop instead of one per learner: docs/benchmarks.md)."""
    return "id3" if name in GREEDY_BY_IMPURITY else name


#: The learners' programs (trees; boosting and bagging; the forest and the rank learners; Fourier, queries and
#: SGD), compiled side by side (compile workers), each a ``lax.switch`` over its learners' branches, of about equal
#: compile seconds on the CPU (docs/benchmarks.md, "Issue 56, quick sizes and program splits": the same rows as one
#: program). A learner named in none runs in the last.
PROGRAMS = (
    ("id3-entropy", "id3-error", "id3-gini", "id3-kearns_mansour", "id3-random-ties", "stump-error", "stump-gini",
     "best-first-gini", "population-entropy"),
    ("adaboost-cart", "adaboost-parities-2", "adaboost-stumps", "bagging-majority"),
    ("random-forest", "find-k", "findmin"),
    ("lmn-k", "lmn-k-biased", "sparse-k", "km", "parities-k", "sgd"),
)


def learner_program(name: str) -> int:
    """The index in :data:`PROGRAMS` of the program that runs learner ``name``."""
    return next((i for i, names in enumerate(PROGRAMS) if name in names), len(PROGRAMS) - 1)


#: The study's learners: every registered one.
LEARNERS = learners.names()


def size(n: int, k: int, params: dict, m: int | None = None) -> learners.Size:
    """The registry's :class:`~jaxtrees.learners.Size` of a cell (``m``: the examples, default m_max;
    KM's grid point sets its query budget)."""
    return learners.Size(n=n, k=k, m=params["m_max"] if m is None else m, depth=params["depth"],
                         rounds=params["rounds"], theta=params["theta"], l1=params["l1"], max_rank=params["max_rank"],
                         max_calls=params["max_calls"], width=params["width"], lr=params["lr"], steps=params["sgd_steps"])


def configured(name: str, n: int, k: int, params: dict, m: int | None = None):
    """The learner ``name`` as the registry sizes it for a cell of size (n, k) (``m``: KM's grid point)."""
    return learners.get(name, size(n, k, params, m))


def settings(name: str, n: int, k: int, params: dict) -> str:
    """What learner ``name`` runs in a cell of size (n, k) with ``params``: its configuration (at the
    smallest and largest m for km, whose query budget follows m)."""
    if name == "sgd":
        return (f"MLP of width {params['width']}, hinge loss, optax.sgd at learning rate {params['lr']}, "
                f"{params['sgd_steps']} steps in batches of 32 on the sample")
    if name == "km":
        grid = sample_sizes(params)
        return "; ".join(f"m = {m}: {configured(name, n, k, params, m)!r}" for m in (grid[0], grid[-1]))
    return repr(configured(name, n, k, params))


def _settings_table(rows) -> str:
    """Markdown: each learner's settings in each (k, n) and learner parameters of the rows."""
    names = [name for name in COMPARE.full if name in rows and name not in ("family", "c")]
    table = {}
    for combo in summary.cells(rows, names):  # sorted column by column
        params = dict(zip(names, combo))
        key = (params["learner"], settings(params["learner"], params["n"], params["k"], params))
        table.setdefault(key, []).append(f"k = {params['k']}, n = {params['n']}")
    return summary.markdown_table(["learner", "cells", "settings"],
                                  [[name, "; ".join(cells), f"`{text}`"] for (name, text), cells in table.items()])


def _trial(key, params):
    """every registered learner on the same trials: k-parities, k-juntas, depth-k trees, rank-k trees, addressing;
    uniform and c-smoothed; success vs m, a learnability map, per-learner cost"""
    n, k = params["n"], params["k"]
    options = params.get("learner_choices", (params["learner"],))
    keys = trial_keys(key, "distribution", "target", "sample")
    p = sampling.quantize(distributions.Smoothed(jnp.float32(0.5), params["c"]).marginals(keys["distribution"], n),
                          PRECISION_BITS)
    f = chosen(params, "family", lambda family: target(family, keys["target"], n, k))
    ks = keys["sample"]
    sample = sampling.draw(ks, p, f, params["m_max"], precision_bits=PRECISION_BITS)
    test = sampling.draw(jax.random.fold_in(ks, 1), p, f, params["test_m"], precision_bits=PRECISION_BITS)
    fit_key = jax.random.fold_in(ks, 2)
    grid = sample_sizes(params)

    def run(unit):
        """The outputs of the learners of ``unit`` (:func:`learner_unit`) on this trial."""
        exact = []  # whether the hypotheses have an exact error (a class attribute, known when tracing)

        def score(h):
            exact.append(bool(h.exact))
            error = h.exact_error(p, f) if h.exact else sample_error(h, test)
            return error, error <= SUCCESS_TOL if h.exact else error == 0.0

        greedy_options = [o for o in options if o in GREEDY_BY_IMPURITY]
        name = greedy_options[0] if unit == "id3" else unit
        if unit == "km":  # KM at m: the first m triples per level of KM at m_max, one compiled fit for the grid
            km = configured(name, n, k, params, grid[-1])
            error, success = jax.lax.map(lambda m: score(km.fit_triples(fit_key, Queries(f, n), m)), jnp.asarray(grid))
            examples = jnp.asarray([configured(name, n, k, params, m).queries(n) for m in grid])
        elif unit == "population-entropy":  # no sample: the infinite-sample tree, the same at every m
            error, success = score(configured(name, n, k, params).fit(fit_key, Population(p, f)))
            error, success = jnp.full((len(grid),), error), jnp.full((len(grid),), success)
            examples = jnp.full((len(grid),), -1)
        elif unit == "id3" and len(greedy_options) > 1:  # impurity and depth by the learner's traced index
            rule = configured(next((o for o in greedy_options if o in ID3_BY_IMPURITY), name), n, k, params).rule
            at = lambda values: jnp.asarray(values, jnp.int32)[params["learner"]]  # noqa: E731
            chosen_impurity = impurity_lib.selected(
                at([greedy_options.index(o) if o in GREEDY_BY_IMPURITY else 0 for o in options]),
                tuple(GREEDY_BY_IMPURITY[o] for o in greedy_options))
            depth = at([1 if o in STUMPS else rule.max_depth for o in options])
            error, success = on_prefixes(
                lambda data: score(greedy.grow(data, rule, fit_key, depth=depth, impurity=chosen_impurity)), sample, grid)
            examples = jnp.asarray(grid)
        else:
            learner = configured(name, n, k, params)
            error, success = on_prefixes(lambda data: score(learner.fit(fit_key, data)), sample, grid)
            examples = jnp.asarray(grid)
        return {"error": error, "success": success, "examples": examples.astype(jnp.int32),
                "exact": jnp.full((len(grid),), exact[0])}

    units = list(dict.fromkeys(map(learner_unit, options)))
    if len(units) == 1:
        return run(units[0])
    branch = jnp.asarray([units.index(learner_unit(o)) for o in options], jnp.int32)[params["learner"]]
    return jax.lax.switch(branch, [lambda unit=unit: run(unit) for unit in units])


def _working_set(params) -> int:
    """Bytes a trial sweeps round after round: the weighted learners (AdaBoost, bagging, forests)
    unpack the sample into float32 rows, about n + 8 of them (features, weights, labels, margins,
    votes), of m_max slots each. At the full size (n = 17, m_max = 16384: 1.6 MiB) a CPU then runs
    2 trials per vmapped group instead of 32: 64 trials of every learner at k = 3 on parities,
    c = 0.1, took 58 s instead of 125 s on the 2-core CPU, no learner slower."""
    return 4 * (params["n"] + 8) * params["m_max"]


def _check(params):
    name = checks.choice("learner", params["learner"], LEARNERS)
    family = checks.choice("family", params["family"], FAMILIES)
    n = checks.integer("n", params["n"], low=2, high=64)
    k = checks.integer("k", params["k"], low=1, high=min(n, 4))
    if family == "addressing" and n < k * k + 2**k:
        raise ValueError(f"n must be >= k^2 + 2^k = {k * k + 2 ** k} for f_(1,k) addressing with k = {k}, got {n}")
    if family == "rank" and k * RANK_LENGTH > n:
        raise ValueError(f"k must be <= n / {RANK_LENGTH} for rank-k trees (depth {RANK_LENGTH} k), got {k}")
    checks.real("c", params["c"], low=0.0, high=0.5, high_open=True)
    checks.integer("depth", params["depth"], low=1, high=min(n, 10))
    checks.integer("rounds", params["rounds"], low=1, high=1000)
    checks.integer("max_rank", params["max_rank"], low=1, high=n)
    checks.integer("max_calls", params["max_calls"], low=1, high=2**30)
    checks.real("theta", params["theta"], low=0.0, high=1.0, low_open=True, high_open=True)
    checks.real("l1", params["l1"], low=0.0)
    checks.integer("width", params["width"], low=1, high=4096)
    checks.integer("sgd_steps", params["sgd_steps"], low=1, high=10**6)
    checks.real("lr", params["lr"], low=0.0, high=100.0, low_open=True)
    checks.integer("test_m", params["test_m"], low=32, high=2**20)
    check_sample_grid({**params, "impurity": "entropy"}, n)
    if name in ("lmn-k", "lmn-k-biased", "sparse-k") and n_subsets(n, k) > MAX_GRAM_SETS:
        raise ValueError(f"k must keep the degree-k sets over n = {n} at most {MAX_GRAM_SETS} for {name}, got k = {k}")


def _c_label(c) -> str:
    return "uniform" if float(c) == 0 else f"c = {float(c):g}"


def _label(name: str) -> str:
    return f"{name} (queries)" if name == "km" else name


@summary.styled
def _plot(rows, stem):
    curves = {}  # family -> (k, n, c) -> learner -> its rates over m: one pass over the rows
    for g in summary.rates(rows, ["family", "k", "n", "c", "learner", "m"], "success"):
        panel = curves.setdefault(g["family"], {}).setdefault((g["k"], g["n"], g["c"]), {})
        panel.setdefault(g["learner"], []).append(g)
    families = [functools.partial(_family_plot, panels, family, f"{stem}_{family}") for family, panels in curves.items()]
    return summary.side_by_side(lambda: _overview_plot(rows, stem), *families)


def _overview_plot(rows, stem):
    """The atlas at a glance: per target family, each learner's success rate at the largest m, one
    bar per c (95% Wilson interval as an error bar)."""
    from matplotlib import colormaps

    panel_by = ["family", "k", "n"]
    top = at_max(rows, panel_by, "m")  # each panel's rows at its largest m
    bars = keyed(summary.rates(top, [*panel_by, "c", "learner"], "success"), [*panel_by, "c", "learner"])
    m_tops = group_max(top, panel_by, "m")
    names = rows.unique("learner")
    fig, axes = summary.figure(len(m_tops), width=5.0, height=1.2 + 0.3 * len(names))
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
        ax.set_yticks(range(len(names)), [_label(name) for name in names])
        ax.invert_yaxis()
        ax.set_xlim(0, 1.05)
        ax.set_xlabel(f"P[success] at m = {m_top}")
        ax.set_title(f"random {PLURALS[family].format(k=k)}, n = {n}")
        ax.grid(alpha=0.3, axis="x")
    summary.legend(fig, axes)
    summary.suptitle(fig, f"Every registered learner on the same trials: success at the largest m "
                          f"({summary.trials_text(counts).replace('per point', 'per bar')})")
    return summary.save(fig, stem)


def _family_plot(panels, family, stem):
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
            summary.rate_curve(ax, groups, "m", _label(name), band_alpha=0.08, ms=4, ls=("-", "--", ":")[min(i // 10, 2)])
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


def _theorem2_report(rows) -> str:
    """compare's Theory section: 003 Theorem 2 for find-k and findmin, at every m of the grid from its m on."""
    from jaxtrees.experiments.studies import theory

    if not any(name in rows.unique("learner") for name in RANK_LEARNERS):
        return ""
    eps, delta = THEOREM2
    sel = rows.take(np.isin(rows["learner"], RANK_LEARNERS))
    sel = sel.with_columns(_ok=np.asarray(sel["error"], np.float64) <= eps)
    levels, shares, beyond = [], [], 0
    for g in summary.rates(sel, ["family", "k", "n", "c", "learner", "m"], "_ok"):
        bound = theorem2_m(g["family"], g["k"], g["n"])
        if bound is None:
            continue
        if g["m"] >= bound:
            levels.append(1 - delta)
            shares.append(g["rate"])
        else:
            beyond += 1
    return "\n" + theory.section([theory.check(
        "003 Thm 2 (Thm 3 for depth-k trees)", f"P[error <= {eps:g}] >= {1 - delta:g} for find-k and findmin from m >= "
        "(1/eps) ((e n / r)^r ln(8n) + ln(1/delta)), r = k", levels, shares, "lower",
        unit="(cell, learner, m) points at or past that m", note=f"{beyond} points of the grid lie below it.")],
        "The figures mark that m on every panel of a rank-k family (dash-dot) where it lies within the grid.")


def _report(rows):
    by = ["family", "k", "n", "c"]
    names = rows.unique("learner")
    curves = {}  # (family, k, n, c, learner) -> its rates over m: one pass over the rows
    for g in summary.rates(rows, [*by, "learner", "m"], "success"):
        curves.setdefault(tuple(g[name] for name in [*by, "learner"]), []).append(g)
    m90, top = {}, {}
    for (family, k, n, c, name), groups in curves.items():
        reach = summary.threshold([(g["m"], g["rate"]) for g in groups])
        if name == "km" and reach is not None:
            reach = f"{(2 * int(n) + 1) * reach} queries"
        best = max(groups, key=lambda g: g["m"])
        m90[(family, k, n, c, name)] = "-" if reach is None else reach
        top[(family, k, n, c, name)] = best
    cells = summary.cells(rows, by)
    maps = []
    for family in rows.unique("family"):
        columns = [cell[1:] for cell in cells if cell[0] == family]
        header = ["learner"] + [f"k = {k}, n = {n}, {_c_label(c)}" for k, n, c in columns]
        table = [[name] + [m90.get((family, *column, name), "") for column in columns] for name in names]
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
            "itself (it succeeds at every m or none).\n\n"
            + "\n\n".join(maps)
            + "\n\n### The learners' settings\n\nWhat each learner of the rows ran (the registry's configuration "
            "at the study's size; names ending in -k follow the cell's k).\n\n" + _settings_table(rows)
            + f"\n\n### What the atlas shows\n\nID3 is {REFERENCE} (greedy growth to the study's depth). The seeds "
            "claim ID3 learns juntas under smoothed product distributions (000, Theorem 2) but not parities under "
            "the uniform one (000, Theorem 1), that the addressing functions defeat impurity-based growth (002), "
            "and that boosting sparse parities helps where stumps cannot (004).\n\n"
            + "\n".join(findings) + "\n\n" + ("Boosting, success at the largest m:\n\n" + "\n".join(boosting) + "\n"
                                              if boosting else "") + _theorem2_report(rows))


COLUMNS = {
    "m": "training examples: the first m of the trial's sample (the same sample for every learner of the cell)",
    "error": "the hypothesis's error: exact (exact = 1) or on test_m fresh examples (exact = 0)",
    "success": "1 if error <= 1e-6 (exact) or error = 0 (test sample)",
    "examples": "labelled examples used: m; km: membership queries (2n + 1) m; population-entropy: -1 (the distribution)",
    "exact": "1 if the error is exact (from the target's oracle), 0 if measured on the test sample",
}

SHARED = {"depth": 4, "rounds": 32, "max_rank": 3, "max_calls": 2**18, "theta": 0.1, "l1": 0.05, "width": 64,
          "sgd_steps": 400, "lr": 0.05, "m_min": 16}

COMPARE = Study(
    name="compare",
    trial=_trial,
    grid=({"learner": LEARNERS, "family": ["parity", "junta"], "k": 2, "n": 8, "c": [0.0, 0.2],
           "test_m": 2048, "m_max": 1024, **SHARED},
          {"learner": LEARNERS, "family": list(FAMILIES), "k": [2, 3], "n": 17, "c": [0.0, 0.1, 0.2],
           "test_m": 8192, "m_max": 16384, **{**SHARED, "depth": 6, "rounds": 100, "max_rank": 4, "sgd_steps": 2000}}),
    replicates=(24, 200),
    static=("k", "n", "depth", "rounds", "max_rank", "max_calls", "theta", "l1", "width",
            "sgd_steps", "test_m", "m_min", "m_max"),
    shared=("learner",),
    axis=("m", sample_sizes),
    meanings=COLUMNS,
    check=_check,
    plot=_plot,
    report=_report,
    compile=Compile(uniform=("family", "learner"), choices={"family": FAMILIES, "learner": tuple(LEARNERS)},
                    buckets={"family": lambda family: "junta" if family in JUNTAS else family,
                             "learner": learner_program},
                    cpu_opt_level=2, working_set_per_trial=_working_set),
)
