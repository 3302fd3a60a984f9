"""The ``boosting`` study: seed 004's Tables 2 and 3 (AdaBoost with decision stumps, 2-parities,
3-parities and CART-16 trees on the seed's real data sets, every round's test error, beside the
paper's values) and a random forest on the same splits.

A trial is one random split of one data set on which each learner runs ``rounds`` rounds; the
learners, the rows and the data (the OCR sets join via ``JAXTREES_OCR_PATH``): docs/studies.md.
"""

from __future__ import annotations

import functools
import os

import jax
import jax.numpy as jnp
import numpy as np

from jaxtrees import datasets
from jaxtrees.core import bits, checks, sampling
from jaxtrees.core.sampling import Data
from jaxtrees.experiments import summary
from jaxtrees.experiments import table as tables
from jaxtrees.experiments.study import Study
from jaxtrees.experiments.studies.common import at_max, group_max
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
    """``(n, W_train, W_test)``: the largest features and words of the data sets ``names`` (the forest's shapes)."""
    key = jax.random.key(0)
    words = lambda part, d: jax.eval_shape(lambda k: part(k, d.train_size), key).X.shape[-1]  # noqa: E731
    shapes = [(len(d.features), words(d.problem().train, d), words(d.problem().test, d)) for d in map(_data, names)]
    return tuple(max(s[i] for s in shapes) for i in range(3))


#: The trial's outputs that carry the padded split to the forest (:func:`_forest`), not rows.
FOREST_INPUTS = ("forest_features",) + tuple(f"forest_{part}_{field}" for part in ("train", "test")
                                             for field in ("X", "y", "valid"))


def _trial(key, params):
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
    names = rows.unique("data")
    curves = {weak: {} for weak in LEARNERS}  # learner -> data -> its means per round, by round
    for weak in LEARNERS:
        for g in summary.means(rows, ["data", "round"], f"{weak}_test_error"):  # one pass per learner
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
              f"{'yes' if bound_ok else 'NO'}.\n")


BOOSTING = Study(
    name="boosting",
    description="004 Tables 2-3: AdaBoost with stumps, d-parities, CART-16 (and a random forest) on the seed's data "
                "sets, vs the paper",
    quick={"data": list(datasets.SHIPPED), "rounds": 50, "max_degree": 2, "forest_depth": 10},
    full={"data": available(), "rounds": 250, "max_degree": 3, "forest_depth": 10},
    static=("data", "rounds", "max_degree", "forest_depth"),
    branches=("data",),
    trial=_trial,
    after=_forest,
    replicates=(2, 20),
    level_loop=False,  # the forest is compiled once (``after``), unrolled: 6-30x faster than looped (benchmarks.md)
    check=_check,
    working_set_per_trial=_working_set,
    plot=_plot,
    report=_report,
    axis=("round", _rounds),
    columns={
        "round": "boosting round t (rows run along t = 1 .. rounds; for the forest, its first t trees)",
        "forest_test_error": "test error of the random forest of the first t trees (averaged votes)",
        **{f"{w}_{what}": text.format(WEAK[w]) for w in WEAK for what, text in (
            ("test_error", "test error of AdaBoost with {} after t rounds (the split's held-out labeled rows)"),
            ("train_error", "training error of AdaBoost with {} after t rounds"),
            ("gamma", "edge gamma_t = 1 - 2 eps_t of round t's {} hypothesis under D_t"),
            ("bound", "prod_{{s <= t}} 2 sqrt(eps_s (1 - eps_s)) for {}, an upper bound on the training error"))},
    },
)
