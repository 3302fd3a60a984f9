"""The ``boosting`` study: seed 004's Tables 2 and 3 (AdaBoost with decision stumps, 2-parities,
3-parities and CART-16 trees on the seed's real data sets, every round's test error, beside the
paper's values) and a random forest on the same splits.

A trial is one random split of one data set on which each learner runs ``rounds`` rounds; the
learners, the rows and the data (the OCR sets join via ``JAXTREES_OCR_PATH``): docs/studies.md.
"""

from __future__ import annotations

import math

import functools
import os

import jax.numpy as jnp
import numpy as np

from jaxtrees import datasets
from jaxtrees.core import bits, checks, sampling
from jaxtrees.core.sampling import Data
from jaxtrees.experiments.report import saving, summary
from jaxtrees.experiments import table as tables
from jaxtrees.experiments.study import Compile, Study
from jaxtrees.experiments.studies import theory, verdicts
from jaxtrees.experiments.studies.common import a_row_of_each, at_max, group_max
from jaxtrees.learners import CART16, AdaBoost, Parities, Stump
from jaxtrees.learners.bagging import random_forest

#: The boosted weak learners, in the report's order, and how the figure names them.
WEAK = {"stumps": "decision stumps", "parity2": "2-parities", "parity3": "3-parities", "cart16": "CART-16 trees"}
#: Every learner of a trial: the weak learners boosted, and the random forest.
LEARNERS = {**WEAK, "forest": "random forest"}
#: Seed 004, Tables 2 and 3: test error (%) after 250 rounds, mean of 20 splits.
PAPER = {"census": {"stumps": 18.50, "parity2": 20.44, "parity3": 22.00, "cart16": 22.00},
         "splice": {"stumps": 7.37, "parity2": 4.64, "parity3": 4.99, "cart16": 3.18},
         "ocr17": {"stumps": 1.09, "parity2": 0.68, "parity3": 0.62, "cart16": 1.11},
         "ocr49": {"stumps": 6.08, "parity2": 2.80, "parity3": 2.77, "cart16": 2.16},
         "cancer": {"stumps": 4.45, "parity2": 4.02, "parity3": 3.64, "cart16": 3.19},
         "ecoli": {"stumps": 7.06, "parity2": 6.84, "parity3": 5.87, "cart16": 8.98},
         "heart": {"stumps": 22.24, "parity2": 23.88, "parity3": 22.94, "cart16": 24.06}}
#: The deepest forest trees the study grows (the heap layout holds 2^(depth + 1) - 1 nodes per tree).
MAX_FOREST_DEPTH = 16
#: Where the OCR sets' raw files are, if anywhere (they are never shipped).
OCR_PATH = "JAXTREES_OCR_PATH"


def weak_learner(name: str):
    return {"stumps": Stump(impurity="error"), "parity2": Parities(degree=2), "parity3": Parities(degree=3),
            "cart16": CART16}[name]


def available() -> list[str]:
    """The data sets this machine has: the shipped ones, and the OCR sets when ``JAXTREES_OCR_PATH`` is set."""
    return list(datasets.SHIPPED) + (["ocr17", "ocr49"] if os.environ.get(OCR_PATH) else [])


@functools.lru_cache(maxsize=None)
def _data(name: str):
    return datasets.load(name, None if name in datasets.SHIPPED else os.environ[OCR_PATH])


@functools.lru_cache(maxsize=None)
def _padded(names: tuple) -> tuple:
    """``(n, W_train, W_test)``: the largest features and words of the data sets ``names`` (the forest's shapes):
    a split of ``train_size`` rows and one of the others (:class:`jaxtrees.problems.DataSet`), packed."""
    shapes = [(len(d.features), bits.n_words(d.train_size), bits.n_words(d.y.shape[0] - d.train_size))
              for d in map(_data, names)]
    return tuple(max(s[i] for s in shapes) for i in range(3))


#: The trial's outputs that carry the padded split to the forest (:func:`_forest`), not rows.
FOREST_INPUTS = ("forest_features",) + tuple(f"forest_{part}_{field}" for part in ("train", "test")
                                             for field in ("X", "y", "valid"))


def _trial(key, params):
    """004 Tables 2-3: AdaBoost with stumps, d-parities, CART-16 (and a random forest) on the seed's data sets, vs the
    paper"""
    d = _data(params["data"])
    problem = d.problem()
    train, test = problem.train(key, d.train_size), problem.test(key, d.train_size)
    n, train_words, test_words = _padded(tuple(available()))
    padded = sampling.pad(train, n, train_words)[:3] + sampling.pad(test, n, test_words)[:3]
    out = dict(zip(FOREST_INPUTS, (jnp.int32(len(d.features)),) + padded))
    for name in WEAK:
        if name == "parity3" and params["max_degree"] < 3:
            out |= {f"parity3_{what}": jnp.full(params["rounds"], jnp.nan) for what in ("test_error", "train_error",
                                                                                          "gamma", "bound")}
            continue
        H = AdaBoost(weak_learner(name), rounds=params["rounds"]).fit(key, train)
        out |= {f"{name}_test_error": H.staged_errors(test), f"{name}_train_error": H.rounds.train_error,
                f"{name}_gamma": H.rounds.gamma, f"{name}_bound": H.rounds.bound}
    return out


def _forest(key, params, out):
    """The random forest on the trial's split, padded to every data set's largest shape: one forest program
    serves every data set's branch (the same trees as on the unpadded split: ``Bagging.fit``'s ``features``)."""
    features, *split = (out.pop(name) for name in FOREST_INPUTS)
    forest = random_forest(members=params["rounds"], max_depth=params["forest_depth"])
    return out | {"forest_test_error": forest.fit(key, Data(*split[:3]), features=features).staged_errors(
        Data(*split[3:]))}


def _check(params):
    if params["data"] in datasets.NAMES and params["data"] not in available():
        raise ValueError(f"data {params['data']!r} is not shipped (licence unknown): set {OCR_PATH} to the "
                         f"directory holding its raw files")
    checks.choice("data", params["data"], available())
    checks.integer("rounds", params["rounds"], low=1, high=10_000)
    checks.integer("max_degree", params["max_degree"], low=2, high=3)
    checks.integer("forest_depth", params["forest_depth"], low=1, high=MAX_FOREST_DEPTH)


def _working_set(params) -> int:
    """Bytes a trial sweeps again and again: the forest's deepest level (``rounds`` trees x 2^(depth - 1) nodes x
    the padded n features x three int16 counts) and AdaBoost's float rows (about n + 8 of them over the training
    slots). Past the CPU's cache budget the runner vmaps fewer trials per group: one, at every built-in size
    (docs/studies.md)."""
    d = _data(params["data"])
    n, slots = len(d.features), -(-d.train_size // bits.WORD_BITS) * bits.WORD_BITS
    padded = _padded(tuple(available()))[0]  # the forest's features: the largest data set's
    return params["rounds"] * 2 ** (params["forest_depth"] - 1) * padded * 6 + 4 * (n + 8) * slots


def _rounds(params):
    return list(range(1, int(params["rounds"]) + 1))


@summary.styled
def _plot(rows, stem):
    return saving.side_by_side(lambda: _errors_plot(rows, stem), lambda: _bounds_plot(rows, stem + "_bounds"))


def _errors_plot(rows, stem):
    names = rows.unique("data")
    curves = {weak: {} for weak in LEARNERS}  # learner -> data -> its means per round, by round
    for weak in LEARNERS:
        for g in tables.means(rows, ["data", "round"], f"{weak}_test_error"):  # one pass per learner
            curves[weak].setdefault(g["data"], []).append(g)
    fig, axes = summary.figure(len(names))
    counts = []
    for ax, name in zip(axes, names):
        for weak, label in LEARNERS.items():
            groups = curves[weak].get(name, [])
            groups = [g for g in groups if g["mean"] == g["mean"]]  # 3-parities: NaN unless max_degree = 3
            if not groups:
                continue
            counts += [g["trials"] for g in groups]
            x = [g["round"] for g in groups]
            mean = [100 * g["mean"] for g in groups]
            line, = ax.plot(x, mean, "-", label=label, **summary.series_style(ax), markevery=max(1, len(x) // 8))
            sem = [100 * (g["sem"] if g["sem"] == g["sem"] else 0.0) for g in groups]
            ax.fill_between(x, [m - s for m, s in zip(mean, sem)], [m + s for m, s in zip(mean, sem)],
                            color=line.get_color(), alpha=0.2)
            if weak in PAPER.get(name, {}):
                ax.axhline(PAPER[name][weak], color=line.get_color(), ls=":", lw=1)
        summary.panel(ax, f"{name} ({len(_data(name).features)} features)", "boosting round t (forest: trees)",
                      xbase=10)
    return summary.finish(fig, axes, stem, "test error (%)\n(mean +- s.e. over splits)",
                          "AdaBoost and a random forest on the seed's data sets; dotted: the paper's error after "
                          "250 rounds (Tables 2, 3)", counts)


def _bounds_plot(rows, stem) -> list[str]:
    """Training error per round on a log axis beside 001's bounds: per data set a panel, per boosted learner its
    mean training error (solid), prod 2 sqrt(eps (1 - eps)) (dashed), exp(-sum gamma^2 / 2) (dotted); the grey
    line 1/m, and a marker on it at the median round from which ceil(2 ln m / gamma^2) rounds have passed."""
    from matplotlib.lines import Line2D

    b = bounds(rows)
    data, names = tables.factorize(rows, "data")  # each row's data set as a code into names (no object per row)
    codes, size = tables.group_codes(rows, ["data", "round"])
    count = np.bincount(codes, minlength=size)
    t = np.asarray(rows["round"], np.float64)
    point = a_row_of_each(codes, size)  # a row of each (data set, round)
    present = np.flatnonzero(np.bincount(data, minlength=len(names)))
    split = [n_ for n_ in ("cell", "replicate") if n_ in rows]
    splits_of = rows.select(*split).with_columns(_data=data)  # the columns that tell the splits apart
    fig, axes = summary.figure(len(present))
    for ax, code in zip(axes, present):
        name = names[code]
        mine = data[point] == code
        x = t[point][mine]
        for weak, arrays in b.items():
            look = summary.series_style(ax)
            for column, ls, label in (("train", "-", WEAK[weak]), ("product", "--", None), ("exp", ":", None)):
                mean = np.bincount(codes, arrays[column], minlength=len(count)) / np.maximum(count, 1)
                ax.plot(x, mean[mine], ls=ls, color=look["color"], lw=1.2, label=label or "_")
            at = t >= arrays["rounds"]
            first_codes, splits = tables.group_codes(splits_of.take(at), ["_data", *split])
            if splits:
                firsts = np.full(splits, np.inf)
                np.minimum.at(firsts, first_codes, t[at])
                here = data[at][a_row_of_each(first_codes, splits)] == code  # each split's data set, by its code
                if here.any():
                    ax.plot([np.median(firsts[here])], [1 / _data(name).train_size], marker=look["marker"],
                            color=look["color"], ms=8, ls="none")
        ax.axhline(1 / _data(name).train_size, color="grey", lw=1)
        ax.set_yscale("log")
        summary.panel(ax, f"{name} (m = {_data(name).train_size})", "boosting round t", xbase=10)
    styles = [Line2D([], [], color="black", ls=ls, label=label) for ls, label in (
        ("--", "prod 2 sqrt(eps (1 - eps)) (001)"), (":", "exp(-sum gamma^2 / 2)"),
        ("-", "training error (mean over splits)"))]
    axes[0].add_artist(axes[0].legend(handles=styles, fontsize=8, loc="lower left"))
    return summary.finish(fig, axes, stem, "training error (log axis)", "AdaBoost's training error and 001's bounds; "
                          "grey: 1/m; marker: the median round t from which t >= ceil(2 ln m / gamma^2), gamma the "
                          "smallest edge so far", count[count > 0].tolist())


#: A cell further than this from the paper (percentage points) is listed in the report.
TOLERANCE = 2.0


def _report(rows):
    header = ["data", "learner", "splits", "rounds", "test error % (sd)", "paper %", "difference"]
    final = at_max(rows, ["data"], "round")  # each data set's rows after its last round
    codes, keys = tables.groups(final, ["data"])
    count = np.bincount(codes, minlength=len(keys))
    last = group_max(final, ["data"], "round")
    stats = {}  # learner -> (mean, sd, any NaN) per data set, in percent, summed in row order
    for weak in LEARNERS:
        errors = 100 * np.asarray(final[f"{weak}_test_error"], np.float64)
        mean = np.bincount(codes, errors, minlength=len(keys)) / count
        squares = np.bincount(codes, (errors - mean[codes]) ** 2, minlength=len(keys))
        missing = np.bincount(codes, np.isnan(errors), minlength=len(keys)) > 0
        stats[weak] = (mean, np.sqrt(squares / np.maximum(1, count - 1)), missing)
    table, far = [], []
    for i, (name,) in enumerate(keys):
        for weak, label in LEARNERS.items():
            mean, sd, missing = (float(v[i]) for v in stats[weak])
            if missing:
                continue
            paper = PAPER.get(name, {}).get(weak)
            table.append([name, label, int(count[i]), last[(name,)], f"{mean:.2f} ({sd:.2f})",
                          "" if paper is None else f"{paper:.2f}", "" if paper is None else f"{mean - paper:+.2f}"])
            if paper is not None and abs(mean - paper) > TOLERANCE:
                far.append(f"{name} / {label}: {mean:.2f} vs {paper:.2f}")
    bound_ok = True
    for w in WEAK:
        bound = np.asarray(rows[f"{w}_bound"], np.float64)
        train = np.asarray(rows[f"{w}_train_error"], np.float64)
        known = bound == bound
        bound_ok &= bool(np.all(train[known] <= bound[known] + 1e-6))
    within = sum(1 for line in table if line[6] and abs(float(line[6])) <= TOLERANCE)
    compared = sum(1 for line in table if line[6])
    return ("## AdaBoost and a random forest on the seed's data sets (004, Tables 2 and 3)\n\n"
            "Test error after the last round, mean (sd) over splits; the paper: 250 rounds, 20 splits, and "
            "its own test files (here the labeled rows left over; splice trains on 500 examples, not 1000). "
            "Weak learners: stumps of least weighted error; d-parities by exact exhaustive weighted correlation; "
            "CART-16: Gini trees grown best-first to 16 leaves. The random forest (Gini trees of depth <= 10, "
            "sqrt(n) features per node, as many trees as rounds) has no paper value.\n\n"
            + summary.markdown_table(header, table)
            + f"\n\nWithin {TOLERANCE:g} percentage points of the paper: {within} of {compared} cells."
            + ("" if not far else " Further: " + "; ".join(far) + ".")
            + f"\n\nTraining error <= prod 2 sqrt(eps (1 - eps)) on every round of every split: "
              f"{'yes' if bound_ok else 'NO'}.\n\n" + _theory_report(rows))


# ----------------------------------------------------------------------------- theory beside measurement


def _trials_by_round(rows) -> list[np.ndarray]:
    """The rows of each trial (split) in round order, as index blocks ``[trials, R]``, one block per distinct
    number of rounds R (a trial's rows are written whole)."""
    by = [name for name in ("cell", "replicate") if name in rows] or ["data"]
    codes, size = tables.group_codes(rows, by)
    count = np.bincount(codes, minlength=size)
    blocks = []
    for R in np.unique(count):
        sel = np.flatnonzero(count[codes] == R)
        blocks.append(sel[np.lexsort((np.asarray(rows["round"])[sel], codes[sel]))].reshape(-1, int(R)))
    return blocks


def _examples(rows) -> np.ndarray:
    """Each row's training-set size m (its data set's)."""
    codes, names = tables.factorize(rows, "data")
    return np.asarray([_data(str(name)).train_size for name in names], np.float64)[codes]


def bounds(rows) -> dict:
    """Per boosted learner with edges in ``rows``: per-row arrays aligned with the rows, ``train`` (the training
    error), ``product`` (the ``*_bound`` column: prod 2 sqrt(eps (1 - eps))), ``exp`` (exp(-sum_{s <= t} gamma_s^2
    / 2)), ``rounds`` (ceil(2 ln m / gamma^2), gamma the smallest edge up to t), ``printed`` (004 Eq. 1's
    ceil(ln m / (2 gamma^2)) for the same gamma), and ``m``."""
    blocks = _trials_by_round(rows)
    m = _examples(rows)
    out = {}
    for weak in WEAK:
        gamma = np.asarray(rows[f"{weak}_gamma"], np.float64)
        if np.all(np.isnan(gamma)):
            continue
        exp, rounds, printed = (np.full(len(rows), np.nan) for _ in range(3))
        for index in blocks:
            g = gamma[index]
            exp[index] = theory.adaboost_exp_bound(g, axis=1)
            smallest = np.minimum.accumulate(g, axis=1)
            rounds[index] = theory.adaboost_rounds(m[index], smallest)
            printed[index] = theory.adaboost_rounds_as_printed(m[index], smallest)
        out[weak] = {"train": np.asarray(rows[f"{weak}_train_error"], np.float64),
                     "product": np.asarray(rows[f"{weak}_bound"], np.float64), "exp": exp, "rounds": rounds,
                     "printed": printed, "m": m}
    return out


def _theory_report(rows) -> str:
    """The boosting report's Theory section: 001's AdaBoost theorem (both steps) and the derived round count, identities
    of every run; 004 Eq. 1 as 004 states it (a generalization bound at its T), untestable as printed."""
    b = bounds(rows)
    if not b:
        return ""
    names = ", ".join(WEAK[weak] for weak in b)
    lines = [verdicts.identity("001 AdaBoost theorem", "training error <= prod_t 2 sqrt(eps_t (1 - eps_t)) <= "
                             "exp(-sum_t gamma_t^2 / 2), gamma_t = 1 - 2 eps_t, on every round", f"Learners: {names}.",
                             "tests/test_boosting.py, tests/test_theory.py"),
             verdicts.identity("001 AdaBoost theorem, its round count", "training error < 1/m from round ceil(2 ln m / "
                             "gamma^2) on (gamma: the smallest edge so far), since exp(-t gamma^2 / 2) < 1/m there",
                             _reached(rows, b)),
             _eq1_line(rows, b)]
    return verdicts.section(lines, "Each statement, its kind first (004's edge gamma_t = 1 - 2 eps_t, the `*_gamma` "
                                 "column; 001 writes gamma' = 1/2 - eps = gamma / 2).")


#: 004 Eq. 1's failure probability when its ln(1/delta) term is evaluated.
EQ1_DELTA = 0.05


def _eq1_line(rows, b) -> str:
    """004 Eq. 1 as 004 states it: AdaBoost run for T = ceil(ln m / (2 gamma^2)) rounds has err(H) <= O~(ln|H| / (m
    gamma^2) + ln(1/delta)), whose ln(1/delta) term alone (constant 1) exceeds 1: bound / test error at round T."""
    t = np.asarray(rows["round"], np.float64)
    split = [name for name in ("data", "cell", "replicate") if name in rows]
    codes, splits = tables.group_codes(rows, split)
    parts = []
    for weak, arrays in b.items():
        at = t >= arrays["printed"]
        first = np.full(splits, np.inf)
        np.minimum.at(first, codes[at], t[at])
        hit = at & (t == first[codes])
        error = np.asarray(rows[f"{weak}_test_error"], np.float64)[hit]
        if error.size:
            with np.errstate(divide="ignore"):
                ratio = math.log(1 / EQ1_DELTA) / error
            span = f"{ratio.min():.3g}" + (f" to {ratio.max():.3g}" if ratio.max() > ratio.min() else "")
            parts.append(f"{WEAK[weak]}: {span} in the {error.size} of {splits} splits that reach T")
    return ("- [vacuous] 004 Eq. 1 as 004 states it: after T = ceil(ln m / (2 gamma^2)) rounds err(H) <= O~(ln|H| / "
            "(m gamma^2) + ln(1/delta)), a generalization bound (004 sets T for it, not for training error < 1/m); "
            f"with O~'s constant 1 its ln(1/delta) term alone is {math.log(1 / EQ1_DELTA):.2f} at delta = "
            f"{EQ1_DELTA:g}, "
            "above any error: bound / test error at round T >= " + ("; ".join(parts) or "no split reaches T")
            + ": untestable as printed (its ln(1/delta) is not divided by m, an evident typo for the usual "
            "ln(1/delta) / m term, so the printed bound exceeds every error at every size).")


def _reached(rows, b) -> str:
    """How many splits reach the derived round within their rounds, per boosted learner."""
    by = [name for name in ("data", "cell", "replicate") if name in rows]
    codes, splits = tables.group_codes(rows, by)
    t = np.asarray(rows["round"], np.float64)
    parts = [f"{WEAK[weak]} {int((np.bincount(codes, t >= arrays['rounds'], minlength=splits) > 0).sum())}"
             for weak, arrays in b.items()]
    return f"Splits that reach that round, of {splits}: " + ", ".join(parts) + "."


BOOSTING = Study(
    name="boosting",
    trial=_trial,
    grid=({"data": ["census", "splice", "ecoli"], "rounds": 50, "max_degree": 2, "forest_depth": 10},
          {"data": available(), "rounds": 250, "max_degree": 3, "forest_depth": 10}),
    replicates=(2, 20),
    static=("data", "rounds", "max_degree", "forest_depth"),
    axis=("round", _rounds),
    check=_check,
    plot=_plot,
    report=_report,
    # the forest is compiled once (``after``): looped where a program has at most 16 trials (the quick size's 6:
    # 14 s less compiling, ~1.5 s more per trial), unrolled beyond (6-30x faster than looped: benchmarks.md)
    compile=Compile(branches=("data",), after=_forest, level_loop=16, working_set_per_trial=_working_set),
    meanings={
        "round": "boosting round t (rows run along t = 1 .. rounds; for the forest, its first t trees)",
        "forest_test_error": "test error of the random forest of the first t trees (averaged votes)",
        **{f"{w}_{what}": text.format(WEAK[w]) for w in WEAK for what, text in (
            ("test_error", "test error of AdaBoost with {} after t rounds (the split's held-out labeled rows)"),
            ("train_error", "training error of AdaBoost with {} after t rounds"),
            ("gamma", "edge gamma_t = 1 - 2 eps_t of round t's {} hypothesis under D_t"),
            ("bound", "prod_{{s <= t}} 2 sqrt(eps_s (1 - eps_s)) for {}, an upper bound on the training error"))},
    },
)
