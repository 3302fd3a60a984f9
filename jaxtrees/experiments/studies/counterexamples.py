"""The addressing counterexamples of 002, in path mode (exact gains, no samples).

Each trial follows one input's path in the infinite-sample tree under a c-smoothed distribution
(:func:`jaxtrees.learners.population.follow_path`): ``addressing`` (002 Thm 3, Lemma 14: f_{c,k} and
f_{c,k,S}) and ``agnostic`` (002 Thm 4: f_pi). What each measures per path: docs/studies.md.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from jaxtrees import targets
from jaxtrees.core import checks, distributions
from jaxtrees.core.impurity import BUILTIN as IMPURITIES
from jaxtrees.core.impurity import NAMES as IMPURITY_NAMES
from jaxtrees.experiments import summary
from jaxtrees.experiments.study import Study
from jaxtrees.experiments.studies.common import at_max, impurity, trial_keys
from jaxtrees.learners import growth, population

CODES = ("block", "coded")


def depths(params) -> list[int]:
    """Depths at which the truncated error is recorded: 0 and fractions 1/8 .. 1 of the horizon."""
    horizon = _horizon(params)
    return sorted({0, *(round(horizon * f) for f in (1 / 8, 1 / 4, 1 / 2, 3 / 4, 1))})


def lemma14(params) -> dict:
    """The constants of 002 Lemma 14 for this cell: delta, c_0 = ln 5 / delta, and for Gini
    (an (alpha, L)-impurity with alpha = L = 8) kappa and k_0 = ln(2 kappa) / ln(5/4) + 1."""
    delta = 0.5 - params["s"]
    out = {"delta": delta, "c0": math.log(5) / delta, "kappa": None, "k0": None, "applies": False}
    if params["impurity"] == "gini":
        alpha = L = 8.0  # G(q) = 4 q (1 - q): G'' = -8
        kappa = max(2 / (alpha * delta * (1 - delta)), L / 8)
        out.update(kappa=kappa, k0=math.log(2 * kappa) / math.log(5 / 4) + 1)
        if params.get("code", "block") == "block":
            out["applies"] = params["c"] >= out["c0"] and params["k"] >= out["k0"]
    return out


def _target(params):
    k, c = params["k"], params["c"]
    if params.get("code", "block") == "block":
        return targets.addressing(c, k)
    return targets.coded_addressing(best_code(k, c * k))


def best_code(k: int, length: int, tries: int = 200):
    """The random code (seed k) with the largest distance found in ``tries`` draws per target."""
    for d in range(length, -1, -1):
        try:
            return targets.random_code(k, k, length, min_distance=d, tries=tries)
        except ValueError:
            continue
    raise AssertionError("min_distance = 0 always succeeds")


def _horizon(params):
    if "eps" in params:
        return _n_free(params)
    return 2 ** params["k"]


def _n_free(params):
    eps, size = params["eps"], 2 ** params["k"]
    return int(math.floor(eps * size / 2)) // 2 * 2


def _follow(key, f, params, depth):
    keys = trial_keys(key, "distribution", "input")
    kp, kx = keys["distribution"], keys["input"]
    p = distributions.Smoothed(jnp.float32(0.5), params["s"]).marginals(kp, f.n)
    name, traced = impurity(params)  # traced: one program for every impurity of the grid
    rule = growth.GrowthRule(max_depth=depth, impurity=name, tie_tol=0.0)
    path = population.follow_path(p, f, rule, jax.random.bernoulli(kx, p), impurity=traced)
    address = jnp.arange(f.n) < f.n_address
    first = path.first_query(address)
    free_memory = ~address & ~jnp.concatenate([jnp.zeros(f.n_address, bool), f.pinned])
    before = jnp.arange(depth) < jnp.where(first < 0, depth, first)
    queried = path.feature >= 0
    memory_before = jnp.sum(free_memory[jnp.maximum(path.feature, 0)] & queried & before)
    error = path.error[jnp.asarray(depths(params))]
    return p, first, memory_before, error


def _addressing_trial(key, params):
    f = _target(params)
    size = 2 ** params["k"]
    _, first, memory_before, error = _follow(key, f, params, size + 1)
    return {"first_address_depth": first, "memory_first": memory_before == size, "error": error}


def _check_common(params):
    checks.integer("k", params["k"], low=1, high=12)
    checks.integer("c", params["c"], low=1, high=64)
    checks.real("s", params["s"], low=0.0, high=0.5, high_open=True)
    checks.choice("impurity", params["impurity"], IMPURITIES)


def _addressing_check(params):
    _check_common(params)
    checks.choice("code", params["code"], CODES)
    A = params["c"] * params["k"] ** (2 if params["code"] == "block" else 1)
    if A + 2 ** params["k"] > 2**16:
        raise ValueError(f"n = c k^2 + 2^k (block) or c k + 2^k (coded) must be <= 65536, got {A + 2 ** params['k']}")


def _agnostic_trial(key, params):
    keys = trial_keys(key, "target", "distribution")
    kf, kp = keys["target"], keys["distribution"]
    f = targets.agnostic_addressing(kf, targets.addressing(params["c"], params["k"]), params["eps"])
    g = targets.nearby_junta(f)
    n_free = _n_free(params)
    p, first, free_before, error = _follow(kp, f, params, n_free + 1)
    none = jnp.zeros(f.n, bool)
    distance = f.means(p, none, none)[0] - g.means(p, none, none)[0]
    return {"first_address_depth": first, "free_first": free_before == n_free, "error": error,
            "distance_to_junta": distance}


def _agnostic_check(params):
    _check_common(params)
    eps = checks.real("eps", params["eps"], low=0.0, high=1.0, low_open=True)
    n_free = _n_free(params)
    if n_free == 0 or n_free < eps * 2 ** params["k"] / 4:
        raise ValueError(f"eps = {eps} with k = {params['k']} leaves no even |A^free| in "
                         f"[eps 2^(k-2), eps 2^(k-1)]; raise eps or k")


def _error_plot(rows, stem, by, horizon_name, title, label):
    panels = {}  # impurity -> cell of ``by`` -> its mean error per depth: one pass over the rows
    for g in summary.means(rows, ["impurity", *by, "depth"], "error"):
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
        ax.set_xscale("symlog", base=2, linthresh=1)
        summary.panel(ax, f"{title}, {impurity}", f"tree depth d (up to {horizon_name})", xbase=None, ylim=(0, 0.52))
    return summary.finish(fig, axes, stem, "error of the tree truncated at depth d\n(mean, 95% CI)",
                          "Greedy growth, exact gains", counts)


#: Output columns of the exact path-mode studies.
PATH_COLUMNS = {
    "depth": "depth d at which the path is read (0 and 1/8, 1/4, 1/2, 3/4, 1 of the horizon)",
    "error": "for x ~ p: min(mu_d, 1 - mu_d), mu_d = E[f | x's node at depth d]; its mean over paths is "
             "the exact error of the tree truncated at d",
    "first_address_depth": "depth of the path's first query of an addressing bit (-1: none within the horizon)",
}


def _rate_text(rate):
    return f"{rate['rate']:.3f} [{rate['low']:.3f}, {rate['high']:.3f}]"


@summary.styled
def _addressing_plot(rows, stem):
    return _error_plot(rows, stem, ["code", "k", "c", "s"], "2^k", "f_{c,k}: exact path mode",
                       lambda c: f"{c['code']} k = {c['k']}, c = {c['c']}, s = {c['s']:g}")


def _path_report(rows, by, metric, columns, cell_columns, title, text) -> str:
    """Per cell of ``by`` (and the impurity): the cell, ``cell_columns(params, per_path, rate, err)``
    (the cell's paths at its deepest recorded depth, a :class:`~jaxtrees.experiments.table.Table`; the
    rate of ``metric`` there and the mean error there), as a markdown table under ``title`` and its ``text``."""
    by = [*by, "impurity"]
    at_horizon = at_max(rows, by, "depth")  # one row per path
    rates = summary.rates(at_horizon, by, metric)
    errors = summary.means(at_horizon, by, "error")
    table = []
    for (cell, per_path), rate, err in zip(summary.split(at_horizon, by).items(), rates, errors):
        table.append([*cell, *cell_columns(dict(zip(by, cell)), per_path, rate, err)])
    return summary.section(title, text, [*by, *columns], table)


def _error_text(err) -> str:
    return f"{err['mean']:.3f} +- {1.96 * err['sem']:.3f}"


def _addressing_report(rows):
    def columns(params, per_path, rate, err):
        first = np.sort(per_path["first_address_depth"])
        median = int(first[len(first) // 2])
        lemma = lemma14(params)
        hyp = ("n/a (not (alpha, L))" if lemma["k0"] is None else
               f"{'yes' if lemma['applies'] else 'no'} (c0 = {lemma['c0']:.2f}, k0 = {lemma['k0']:.2f})")
        A = params["c"] * params["k"] ** (2 if params["code"] == "block" else 1)
        return [hyp, rate["trials"], _rate_text(rate), "none (> 2^k)" if median < 0 else median, _error_text(err), A + 1]

    return _path_report(rows, ["code", "k", "c", "s"], "memory_first",
                        ["Lemma 14 hypotheses", "paths", "P[all memory bits first]", "median first addressing depth",
                         "error at depth 2^k", "target depth"], columns,
                        "Addressing counterexample f_{c,k} (002 Thm 3, Lemma 14), exact path mode",
                        "Each path: a c-smoothed distribution (p_i in [1/2 - s, 1/2 + s], delta = 1/2 - s), x ~ p, "
                        "exact gains, ties within 0. 'All memory bits first': every one of the 2^k memory bits is "
                        "queried before the first addressing bit. Lemma 14 hypotheses (Gini only): c >= ln 5 / delta "
                        "and k >= k0.")


@summary.styled
def _agnostic_plot(rows, stem):
    return _error_plot(rows, stem, ["k", "c", "eps", "s"], "|A^free|", "f_pi: exact path mode",
                       lambda c: f"k = {c['k']}, c = {c['c']}, eps = {c['eps']:g}")


def _agnostic_report(rows):
    def columns(params, per_path, rate, err):
        dist = summary.means(per_path, [], "distance_to_junta")[0]
        return [_n_free(params), rate["trials"], _rate_text(rate), _error_text(err), f"{dist['mean']:.4f}",
                params["c"] * params["k"] ** 2]

    return _path_report(rows, ["k", "c", "eps", "s"], "free_first",
                        ["|A^free|", "paths", "P[free memory bits first]", "error at depth |A^free|",
                         "Pr[f_pi != g] (mean)", "junta depth c k^2"], columns,
                        "Agnostic counterexample f_pi (002 Thm 4, Sec. 6), exact path mode",
                        "f_pi pins the memory bits outside A^free; it is eps-close to the junta g(x) = 1[z(x) in A^1], "
                        "which a depth c k^2 tree computes. The greedy tree queries every free memory bit before any "
                        "addressing bit, so at depth |A^free| it still errs with constant probability.")


ADDRESSING = Study(
    name="addressing",
    description="002 Thm 3 / Lemma 14: f_{c,k} in exact path mode: memory bits before addressing bits, error vs depth",
    quick={"k": [3, 4, 5, 6], "c": [1, 2, 7], "code": "block", "s": 0.25, "impurity": ["gini", "entropy"]},
    full={"k": [3, 4, 5, 6, 7, 8], "c": [1, 2, 4, 7], "code": ["block", "coded"], "s": [0.1, 0.25],
          "impurity": ["gini", "entropy", "kearns_mansour"]},
    static=("k", "c", "code"),
    branches=("k", "c", "code"),
    uniform=("impurity",),
    choices={"impurity": IMPURITY_NAMES},
    trial=_addressing_trial,
    replicates=(64, 256),
    check=_addressing_check,
    plot=_addressing_plot,
    report=_addressing_report,
    axis=("depth", depths),
    columns={**PATH_COLUMNS,
             "memory_first": "1 if all 2^k memory bits are queried before the first addressing bit"},
)

AGNOSTIC = Study(
    name="agnostic",
    description="002 Thm 4: f_pi (eps-close to a junta) in exact path mode: free memory bits first, error vs depth",
    quick={"k": [4, 5, 6], "c": 7, "eps": [0.5, 1.0], "s": 0.25, "impurity": "gini"},
    full={"k": [4, 5, 6, 7, 8], "c": 7, "eps": [0.25, 0.5, 1.0], "s": [0.1, 0.25],
          "impurity": ["gini", "entropy", "kearns_mansour"]},
    static=("k", "c", "eps"),
    branches=("k", "c", "eps"),
    uniform=("impurity",),
    choices={"impurity": IMPURITY_NAMES},
    trial=_agnostic_trial,
    replicates=(64, 256),
    check=_agnostic_check,
    plot=_agnostic_plot,
    report=_agnostic_report,
    axis=("depth", depths),
    columns={**PATH_COLUMNS,
             "free_first": "1 if every free memory bit (A^free) is queried before the first addressing bit",
             "distance_to_junta": "Pr_{x ~ p}[f_pi(x) != g(x)], g the nearby junta (exact)"},
)
