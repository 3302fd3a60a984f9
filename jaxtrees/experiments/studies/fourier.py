"""The ``fourier`` study: Fourier learners against ID3 on the same trials, and the spectra of the
trees ID3 learns against the seed's bounds (001).

Each trial fits ID3, LMN, the Lasso and Kushilevitz-Mansour (from membership queries) on every
prefix of one sample of a k-parity, k-junta or depth-k tree, and takes the exact spectra of the
target and of the learned trees; the learners' settings and scoring: docs/studies.md.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxtrees import learners, targets
from jaxtrees.core import checks, distributions, sampling
from jaxtrees.experiments.report import saving, summary
from jaxtrees.experiments import table as tables
from jaxtrees.experiments.study import Compile, Study
from jaxtrees.experiments.studies import theory, verdicts
from jaxtrees.experiments.studies.common import chosen, group_max, group_sums
from jaxtrees.experiments.study.trials import (PRECISION_BITS, SUCCESS_TOL, check_sample_grid, on_prefixes,
                                               sample_sizes, trial_keys)
from jaxtrees.fourier import spectra
from jaxtrees.hypotheses import polynomial, tree
from jaxtrees.hypotheses.base import sample_error
from jaxtrees.learners.fourier import MAX_GRAM_SETS
from jaxtrees.learners import GreedyTree, GrowthRule, KushilevitzMansour, LowDegree, SparseRecovery
from jaxtrees.problems import Queries

#: Target families: name -> (key, n, k) -> target.
TARGETS = {
    "parity": lambda key, n, k: targets.as_junta(targets.random_parity(key, n, k)),  # a junta: one program for both
    "junta": targets.random_junta,
    "tree": targets.random_tree,
}
#: How a panel names its targets.
PLURALS = {"parity": "{k}-parities", "junta": "{k}-juntas", "tree": "depth-{k} trees"}
#: The learners compared, in the order of the figure's legend and the report's columns.
LEARNERS = ("id3", "lmn", "sparse", "km")
#: How the figure and the report name them.
NAMES = {"id3": "ID3", "lmn": "LMN", "sparse": "Lasso", "km": "KM"}


#: The eps of 001's approximation theorem the trial evaluates, by column suffix.
APPROX_EPS = {"e05": 0.05, "e10": 0.1, "e20": 0.2}


def _approximations(spec, leaves, prefix: str) -> dict:
    """001's approximation theorem for a spectrum of ``leaves`` leaves at each eps of :data:`APPROX_EPS`: the squared
    error E[(F - h)^2] (<= 2 eps) and the terms of h (<= s^2 / eps by the proof; the statement says s / eps)."""
    out = {}
    for suffix, eps in APPROX_EPS.items():
        a = spectra.approximate(spec, leaves, eps)
        out |= {f"{prefix}_approx_error_{suffix}": a.squared_error, f"{prefix}_approx_terms_{suffix}": a.terms}
    return out


def lmn(n: int, k: int, theta: float) -> LowDegree:
    """The study's LMN (the registry's ``lmn-k-biased``): degree k, p-biased basis of the sample's
    marginals, the estimates with |f~(S)| >= theta, at most the 4^k largest (a depth-k tree has at most 4^k)."""
    return learners.get("lmn-k-biased", learners.Size(n=n, k=k, theta=theta))


def sparse(n: int, k: int, l1: float) -> SparseRecovery:
    """The study's sparse recovery (``sparse-k``): the Lasso with penalty l1 over the degree-k
    characters of the sample's p-biased basis, at most the 4^k largest coefficients kept."""
    return learners.get("sparse-k", learners.Size(n=n, k=k, l1=l1))


def km(n: int, k: int, theta: float, m: int) -> KushilevitzMansour:
    """The study's KM at grid point m (``km``): m query triples per level ((2n + 1) m queries), heavy
    threshold theta, a frontier of min(4^k, floor(4 / theta^2)) prefixes."""
    return learners.get("km", learners.Size(n=n, k=k, theta=theta, m=m))


def _trial(key, params):
    """001: LMN, Lasso (degree k), KM (queries) vs ID3 (depth k) on k-parities, k-juntas, depth-k trees; tree spectra vs
    bounds"""
    n, k = params["n"], params["k"]
    keys = trial_keys(key, "distribution", "target", "sample")
    kp, kf, ks = keys["distribution"], keys["target"], keys["sample"]
    p = sampling.quantize(distributions.Smoothed(jnp.float32(0.5), params["c"]).marginals(kp, n), PRECISION_BITS)
    f = chosen(params, "target", lambda kind: TARGETS[kind](kf, n, k))
    sample = sampling.draw(ks, p, f, params["m_max"], precision_bits=PRECISION_BITS)
    test = sampling.draw(jax.random.fold_in(ks, 1), p, f, params["test_m"], precision_bits=PRECISION_BITS)
    id3, low_degree = GreedyTree(GrowthRule(max_depth=k, impurity=params["impurity"])), lmn(n, k, params["theta"])
    lasso = sparse(n, k, params["l1"])
    fit_key = jax.random.fold_in(ks, 2)

    def at(data):
        t = id3.fit(fit_key, data)
        spec = spectra.of_tree(t, n)
        return {"id3_error": t.exact_error(p, f), "lmn_error": sample_error(low_degree.fit(fit_key, data), test),
                "sparse_error": sample_error(lasso.fit(fit_key, data), test),
                "tree_leaves": tree.n_leaves(t), "tree_depth": tree.depth(t),
                "tree_l1": spectra.l1(spec), "tree_degree": spectra.degree(spec),
                **_approximations(spec, tree.n_leaves(t), "tree")}

    grid = sample_sizes(params)
    out = on_prefixes(at, sample, grid)
    # KM at grid point m is KM's fit on its first m triples per level: one program for the grid.
    km_key, oracle, queries = jax.random.fold_in(ks, 3), Queries(f, n), km(n, k, params["theta"], grid[-1])
    out["km_error"] = jax.lax.map(lambda m: sample_error(queries.fit_triples(km_key, oracle, m), test),
                                  jnp.asarray(grid))
    out["km_queries"] = jnp.asarray([km(n, k, params["theta"], m).queries(n) for m in grid])
    target = spectra.spectrum(f, n)
    return {**out, "id3_success": out["id3_error"] <= SUCCESS_TOL, "lmn_success": out["lmn_error"] == 0.0,
            "sparse_success": out["sparse_error"] == 0.0,
            "km_success": out["km_error"] == 0.0,
            "target_l1": spectra.l1(target), "target_degree": spectra.degree(target),
            "target_sparsity": spectra.sparsity(target), **_approximations(target, 2**k, "target")}


def _check(params):
    kind = checks.choice("target", params["target"], tuple(TARGETS))
    n = checks.integer("n", params["n"], low=2, high=64)
    checks.integer("k", params["k"], low=1, high=min(n, 6 if kind == "tree" else 8))
    checks.real("c", params["c"], low=0.0, high=0.5, high_open=True)
    checks.integer("test_m", params["test_m"], low=32, high=2**20)
    checks.real("theta", params["theta"], low=0.0, high=1.0, high_open=True)
    checks.real("l1", params["l1"], low=0.0)
    check_sample_grid(params, n)
    if polynomial.n_subsets(n, params["k"]) > MAX_GRAM_SETS:
        raise ValueError(f"k must keep the degree-k sets over n = {n} coordinates at most {MAX_GRAM_SETS} (sparse "
                         f"recovery's Gram matrix), got k = {params['k']}: {polynomial.n_subsets(n, params['k'])} sets")


def _c_label(c) -> str:
    return "uniform" if float(c) == 0 else f"c = {float(c):g}"


PANEL = ["target", "n", "k", "theta", "l1"]


@summary.styled
def _plot(rows, stem):
    return saving.side_by_side(lambda: _success_plot(rows, stem), lambda: _spectra_plot(rows, f"{stem}_spectra"),
                                lambda: _approx_plot(rows, f"{stem}_approximation"))


def _success_plot(rows, stem):
    panels = {}  # panel -> learner -> c -> its rates over m: one group-by per learner
    for learner in LEARNERS:
        for g in tables.rates(rows, [*PANEL, "c", "m"], f"{learner}_success"):
            curves = panels.setdefault(tuple(g[name] for name in PANEL), {}).setdefault(learner, {})
            curves.setdefault(g["c"], []).append(g)
    fig, axes = summary.figure(len(panels))
    counts = []
    for ax, ((kind, n, k, theta, l1), by_learner) in zip(axes, panels.items()):
        for learner in LEARNERS:
            for c, groups in by_learner[learner].items():
                counts += [g["trials"] for g in groups]
                summary.rate_curve(ax, groups, "m", f"{NAMES[learner]}, {_c_label(c)}")
        summary.panel(ax, f"random {PLURALS[kind].format(k=k)}, n = {n}\n(theta = {theta:g}, l1 = {l1:g})",
                      "training examples m (KM: (2n + 1) m queries)", ylim=summary.RATE_LIMITS)
    return summary.finish(fig, axes, stem, "P[success]\n(95% Wilson band)",
                          "ID3 (depth k) vs LMN and Lasso (degree k) on the same samples, KM from membership queries; "
                          "ID3: exact error 0, the others: no error on a fresh test sample", counts)


@summary.styled
def _approx_plot(rows, stem):
    """001's approximation theorem: E[(F - h)^2] against eps with the line 2 eps; the terms of h over s / eps
    against s, with the statement's 1 (s / eps) and the proof's s (s^2 / eps)."""
    points = _approx_points(rows)
    if not points:
        return []
    fig, axes = summary.figure(2)
    rng = np.random.default_rng(0)
    for who, (eps, s, error, terms) in points.items():
        look = summary.series_style(axes[0])
        label = "ID3's trees (every m)" if who == "tree" else "targets"
        jitter = np.exp(0.06 * rng.standard_normal(eps.size))
        axes[0].plot(eps * jitter, error, ls="none", alpha=0.25, ms=3, label=label, **look)
        axes[1].plot(s * jitter, terms / (s / eps), ls="none", alpha=0.25, ms=3, label=label, **look)
    grid = np.asarray(sorted(APPROX_EPS.values()))
    axes[0].plot(grid, 2 * grid, "k--", lw=1, label="2 eps (001)")
    top = max(float(np.max(p[1])) for p in points.values())
    sizes = np.geomspace(1, max(top, 2), 20)
    axes[1].plot(sizes, sizes, "k--", lw=1, label="proof: s^2 / eps")
    axes[1].axhline(1.0, color="k", ls=":", lw=1, label="statement: s / eps")
    axes[0].set_xscale("log")
    axes[0].set_yscale("symlog", linthresh=1e-4)
    axes[0].set_xlabel("eps")
    axes[0].set_ylabel("E[(F - h)^2]")
    axes[0].set_title("error of h against eps")
    axes[1].set_xscale("log", base=2)
    axes[1].set_yscale("log")
    axes[1].set_xlabel("leaves s")
    axes[1].set_ylabel("terms of h / (s / eps)")
    axes[1].set_title("terms of h against s")
    for ax in axes:
        ax.grid(alpha=0.3, which="both")
    summary.legend(fig, axes)
    summary.suptitle(fig, "001's approximation theorem: h of degree log2(s / eps) keeping |h^(S)| >= eps / L1")
    return saving.save(fig, stem)


def _at_m_max(rows):
    """The rows of the trees learned at m_max."""
    return rows.take(rows["m"] == rows["m_max"])


def _spectra_plot(rows, stem):
    """Learned trees at m_max: L1 vs leaves and degree vs depth, with the bounds L1 <= s, degree <= depth."""
    top = _at_m_max(rows)
    fig, axes = summary.figure(2)
    kinds = tables.split(top, ["target"])
    for i, ((kind,), sel) in enumerate(kinds.items()):
        shift = 0.12 * (i - (len(kinds) - 1) / 2)  # side by side, not on top of each other
        style = summary.series_style(axes[0])
        for ax, (x, y) in zip(axes, (("tree_leaves", "tree_l1"), ("tree_depth", "tree_degree"))):
            ax.plot(np.asarray(sel[x], np.float64) + shift, np.asarray(sel[y], np.float64), ls="none", alpha=0.35,
                    label=f"trees learned on {PLURALS[kind].format(k='k')}", **style)
    for ax, (label_x, label_y) in zip(axes, (("leaves s", "L1 norm of the tree's spectrum"),
                                             ("depth", "Fourier degree"))):
        hi = max(max(line.get_xdata(), default=1) for line in ax.get_lines()) if ax.get_lines() else 1
        ax.plot([0, hi], [0, hi], "k--", lw=1, label="bound (001): L1 <= s, degree <= depth")
        ax.set_xlabel(label_x)
        ax.set_ylabel(label_y)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.yaxis.get_major_locator().set_params(integer=True)
        ax.grid(alpha=0.3)
    axes[0].set_title("L1 vs leaves")
    axes[1].set_title("degree vs depth")
    summary.legend(fig, axes)
    summary.suptitle(fig, f"Spectra of the trees ID3 learns at m_max (exact, uniform basis; {len(top)} trees)")
    return saving.save(fig, stem)


def _report(rows):
    by = ["target", "n", "k", "theta", "l1", "c"]
    header = [*by, "trials"] + [f"{NAMES[name]} {what}" for name in LEARNERS
                                for what in ("P[success] at max m", "m for 90%")]
    curves = {}  # learner -> cell -> its rates over m: one group-by per learner
    for name in LEARNERS:
        for g in tables.rates(rows, [*by, "m"], f"{name}_success"):
            curves.setdefault(name, {}).setdefault(tuple(g[column] for column in by), []).append(g)
    table = []
    for cell in curves[LEARNERS[0]]:
        line = [*cell]
        for name in LEARNERS:
            groups = curves[name][cell]
            top = max(groups, key=lambda g: g["m"])
            if len(line) == len(by):
                line.append(top["trials"])
            m90 = summary.threshold([(g["m"], g["rate"]) for g in groups])
            line += [f"{top['rate']:.2f} [{top['low']:.2f}, {top['high']:.2f}]", "not reached" if m90 is None else m90]
        table.append(line)
    spectra_header = ["target", "n", "k", "trees", "target L1 (mean)", "target degree (max)",
                      "trees with L1 <= leaves", "trees with degree <= depth", "tree L1 (mean)", "tree leaves (mean)"]
    top = _at_m_max(rows)
    cell = ["target", "n", "k"]
    leaves, l1 = np.asarray(top["tree_leaves"], np.float64), np.asarray(top["tree_l1"], np.float64)
    within_l1 = group_sums(top, cell, l1 <= leaves + 1e-4)
    within_degree = group_sums(top, cell, np.asarray(top["tree_degree"]) <= np.asarray(top["tree_depth"]))
    target_l1, tree_l1 = group_sums(top, cell, "target_l1"), group_sums(top, cell, "tree_l1")
    tree_leaves, target_degree = group_sums(top, cell, "tree_leaves"), group_max(top, cell, "target_degree")
    spectra_table = []
    for key, (_, trees) in target_l1.items():
        spectra_table.append([*key, trees, f"{target_l1[key][0] / trees:.3f}", target_degree[key],
                              f"{within_l1[key][0]:.0f} of {trees}", f"{within_degree[key][0]:.0f} of {trees}",
                              f"{tree_l1[key][0] / trees:.3f}", f"{tree_leaves[key][0] / trees:.2f}"])
    m = rows["m"]
    m_grid = f"{m.min()}..{m.max()}"
    return summary.section(
        "Fourier learners vs ID3 (001)",
        f"m grid {m_grid} (powers of two; nested prefixes of one sample per trial, the same examples for "
            "every learner). ID3: depth k, success = exact error 0. LMN: degree k, p-biased basis of "
            "the sample's marginals, estimates with |f~(S)| >= theta (at most 4^k), success = no error on test_m "
            "fresh examples. Lasso: sparse recovery over the same characters, penalty l1, fitted on the first m "
            "examples, success as LMN's. KM: membership queries at uniform points, m triples per level = (2n + 1) m queries, "
            "heavy threshold theta, frontier min(4^k, 4 / theta^2), success as LMN's. "
        "90%: smallest m from which the success rate stays >= 0.9.", header, table,
        after="\n\n### Spectra of the trees ID3 learns at max m (exact, uniform basis)\n\n"
              "001: a tree with s leaves has L1 <= s and degree <= its depth.\n\n"
              + summary.markdown_table(spectra_header, spectra_table)) + "\n" + _theory_report(rows)


def _approx_points(rows) -> dict:
    """001's approximation per learned tree (every trial and m) and target (one per trial): ``{who: (eps, s, error,
    terms)}`` as float arrays over (row, eps)."""
    out = {}
    targets_ = rows.take(rows["m"] == rows["m_max"])  # one row per trial for the target's columns
    for who, table, leaves in (("tree", rows, np.asarray(rows["tree_leaves"], np.float64)),
                               ("target", targets_, 2.0 ** np.asarray(targets_["k"], np.float64))):
        if f"{who}_approx_error_e05" not in table:
            continue
        parts = [(np.full(len(table), eps), leaves, np.asarray(table[f"{who}_approx_error_{suffix}"], np.float64),
                  np.asarray(table[f"{who}_approx_terms_{suffix}"], np.float64)) for suffix, eps in APPROX_EPS.items()]
        out[who] = tuple(np.concatenate(column) for column in zip(*parts))
    return out


def _target_terms_cap(rows) -> np.ndarray:
    """Per (target, eps) point in :func:`_approx_points`' order: the most Fourier terms a target of its family can
    have, 2^k for a junta or parity, 4^k for a depth-k tree."""
    targets_ = rows.take(rows["m"] == rows["m_max"])
    k = np.asarray(targets_["k"], np.float64)
    cap = np.where(np.asarray(targets_["target"]) == "tree", 4.0**k, 2.0**k)
    return np.tile(cap, len(APPROX_EPS))


def _theory_report(rows) -> str:
    """The fourier report's Theory section: 001's L1 <= s, degree <= depth, and its approximation theorem's error <=
    2 eps and terms <= s^2 / eps (the proof's), identities of every tree; terms <= s / eps (the statement's) against
    every learned tree and target."""
    tests = "tests/test_fourier.py, tests/test_theory.py"
    epsilons = ", ".join(map(str, APPROX_EPS.values()))
    lines = [verdicts.identity("001 (Step 2)", "a tree of s leaves and depth d has L1 <= s and degree <= d",
                             "Every learned tree, every trial and m.", tests),
             verdicts.identity("001 approximation theorem and its proof (Step 3)", "h = the terms of degree <= log2(s / "
                             "eps) with |h^(S)| >= eps / L1 has E[(F - h)^2] <= 2 eps and at most L1^2 / eps <= s^2 / "
                             "eps terms", f"Every learned tree and target, eps = {epsilons}.", tests)]
    for who, (eps, s, error, terms) in _approx_points(rows).items():
        name = "learned trees" if who == "tree" else "targets"
        stated = theory.fourier_terms_stated(s, eps)
        cap = _target_terms_cap(rows) if who == "target" else np.inf  # the terms any such instance can have
        source = f"001 approximation theorem, as stated ({name})"
        if verdicts.decide("test", by_construction=bool(np.all(cap <= stated))) == "identity":
            held = int((terms <= stated).sum())
            lines.append(verdicts.identity(source, "terms of h <= s / eps", f"Holds in {held:,} of {terms.size:,} "
                                         "(target, eps) points: a k-junta (a parity) has at most 2^k = s Fourier "
                                         "coefficients and a depth-k tree at most 4^k = s^2 (2^k subsets of each "
                                         f"leaf's path), at most {float(np.max(cap / stated)):.3g} x s / eps at these "
                                         "eps.", "arithmetic of the targets"))
            continue
        lines.append(verdicts.check(source, "terms of h <= s / eps", stated, terms, "upper",
                                  unit=f"({name[:-1]}, eps) points"))
    return verdicts.section(lines, "Each statement of the notes, its kind first, against every measured point. The "
                                 "notes state sparsity s / eps; their proof (Step 3: at most L1^2 / eps coefficients "
                                 "of size >= eps / L1) gives s^2 / eps, an identity; the statement's s / eps can fail.")


FOURIER = Study(
    name="fourier",
    trial=_trial,
    grid=({"target": ["parity", "junta", "tree"], "n": 12, "k": 2, "c": [0.0, 0.1, 0.2], "impurity": "entropy",
           "theta": 0.1, "l1": 0.05, "test_m": 4096, "m_min": 16, "m_max": 4096},
          {"target": ["parity", "junta", "tree"], "n": [12, 16], "k": [2, 3, 4], "c": [0.0, 0.05, 0.1, 0.2],
           "impurity": "entropy", "theta": 0.1, "l1": 0.05, "test_m": 16384, "m_min": 16, "m_max": 65536}),
    replicates=(32, 500),
    static=("n", "k", "impurity", "theta", "l1", "test_m", "m_min", "m_max"),
    axis=("m", sample_sizes),
    check=_check,
    plot=_plot,
    report=_report,
    compile=Compile(uniform=("target",), choices={"target": tuple(TARGETS)},
                    buckets={"target": lambda kind: "tree" if kind == "tree" else "junta"}, cpu_opt_level=2),
    meanings={
        "m": "training examples: the first m of the trial's sample (m-grid m_min, 2 m_min, ..., m_max)",
        "id3_error": "Pr_{x ~ p}[tree(x) != f(x)] of ID3's depth-k tree, exactly (float32)",
        "id3_success": "1 if id3_error <= 1e-6",
        "lmn_error": "LMN's error on test_m fresh examples",
        "lmn_success": "1 if lmn_error = 0",
        "sparse_error": "the Lasso's error on the same test_m examples (fitted on the first m examples)",
        "sparse_success": "1 if sparse_error = 0",
        "km_error": "KM's error on the same test_m examples (KM queries f at uniform points it chooses)",
        "km_success": "1 if km_error = 0",
        "km_queries": "membership queries KM made: (2n + 1) m (m triples per level, n levels, m for the coefficients)",
        "tree_leaves": "leaves of ID3's tree", "tree_depth": "depth of ID3's tree",
        "tree_l1": "L1 norm of the tree's uniform spectrum (exact)", "tree_degree": "Fourier degree of ID3's tree",
        "target_l1": "L1 norm of the target's uniform spectrum", "target_degree": "Fourier degree of the target",
        "target_sparsity": "nonzero uniform Fourier coefficients of the target (|f^(S)| > 1e-6)",
        **{f"{who}_approx_{what}_{suffix}": text.format(who=name, eps=eps)
           for who, name in (("tree", "ID3's tree"), ("target", "the target (s = 2^k leaves)"))
           for suffix, eps in APPROX_EPS.items() for what, text in (
               ("error", "001's approximation of {who} at eps = {eps:g}: E[(F - h)^2], exactly (<= 2 eps)"),
               ("terms", "001's approximation of {who} at eps = {eps:g}: the terms of h (<= s^2 / eps)"))},
    },
)
