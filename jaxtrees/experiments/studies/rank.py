"""The ``rank`` study: Ehrenfeucht-Haussler's FINDMIN (003) against ID3 on the same samples.

Each trial runs FINDMIN (:class:`~jaxtrees.learners.rank.FindMin`) and ID3 on every prefix of one
sample of a random rank-k tree, k-junta or k-parity: exact error against m with Theorem 2's bound,
the trees' ranks and sizes, FIND's invocations against Lemma 3. Its design: docs/studies.md.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from jaxtrees import targets
from jaxtrees.core import bits, checks, distributions, sampling
from jaxtrees.experiments.report import saving, summary
from jaxtrees.experiments import table as tables
from jaxtrees.experiments.study import Compile, Study
from jaxtrees.experiments.studies import theory, verdicts
from jaxtrees.experiments.studies.common import at_max, chosen, group_max, group_sums
from jaxtrees.experiments.study.trials import PRECISION_BITS, check_sample_grid, on_prefixes, sample_sizes, trial_keys
from jaxtrees.hypotheses import node_tree, tree
from jaxtrees.learners import GreedyTree, GrowthRule
from jaxtrees.learners.rank import FindMin, sample_bound

FAMILIES = ("rank", "junta", "parity")
#: How a panel names its targets.
PLURALS = {"rank": "rank-{k} trees", "junta": "{k}-juntas", "parity": "{k}-parities"}


#: Families whose targets are juntas (a parity as a junta): one program serves them (:attr:`Study.buckets`).
JUNTAS = ("junta", "parity")


def _target(kind: str, key, n: int, k, k_max: int, length: int):
    """The target for a traced k <= k_max (the arrays padded to k_max): the same as unpadded."""
    if kind == "rank":
        return targets.random_rank_tree(key, n, k, length, r_max=k_max)
    if kind == "junta":
        return targets.random_junta(key, n, k, nondegenerate=True, k_max=k_max)
    return targets.random_parity(key, n, k, k_max=k_max)


def _target_rank(f, n: int, k, k_max: int):
    """The target's rank: a rank tree's (:class:`~jaxtrees.targets.NodeTreeTarget`) its generated
    tree's; for a junta or parity, FINDMIN's on its complete truth table over the support (2^k rows,
    k variables; padded to 2^k_max rows and k_max variables, the rows past 2^k not in the sample and
    the padding variables constant on it, so never tried)."""
    if isinstance(f, targets.NodeTreeTarget):
        return node_tree.rank(f.tree)
    rows = bits.assignments(k_max)  # bool[2^k_max, k_max]: row a holds the bits of a
    x = jnp.any(rows[:, :, None] & (f.support[None, :, None] == jnp.arange(n)), axis=1)  # [2^k_max, n]
    in_sample = bits.prefix_mask(bits.n_words(2**k_max), jnp.left_shift(1, jnp.asarray(k, jnp.int32)))  # rows a < 2^k
    table = sampling.Data(bits.pack(rows.T), bits.pack(f(x) == 1), in_sample)
    return FindMin(max_rank=k_max).search(table).rank


def _trial(key, params):
    """003: FINDMIN (least-rank consistent tree) vs ID3 on rank-k trees, k-juntas, k-parities: error vs m with Theorem
    2's bound, ranks and sizes, FIND's calls vs Lemma 3"""
    n, k, k_max = params["n"], params["k"], params["k_max"]
    keys = trial_keys(key, "distribution", "target", "sample")
    p = sampling.quantize(distributions.Smoothed(jnp.float32(0.5), params["c"]).marginals(keys["distribution"], n),
                          PRECISION_BITS)
    f = chosen(params, "target", lambda kind: _target(kind, keys["target"], n, k, k_max, params["length"]))
    sample = sampling.draw(keys["sample"], p, f, params["m_max"], precision_bits=PRECISION_BITS)
    findmin = FindMin(max_rank=params["max_rank"], max_calls=params["max_calls"])
    id3 = GreedyTree(GrowthRule(max_depth=params["id3_depth"], impurity=params["impurity"]))
    fit_key = jax.random.fold_in(keys["sample"], 2)

    def at(data):
        s = findmin.search(data)
        t = id3.fit(fit_key, data)
        return {"findmin_error": s.tree.exact_error(p, f), "findmin_rank": s.rank,
                "findmin_found": s.found, "findmin_exhausted": s.exhausted, "findmin_calls": s.calls,
                "findmin_size": s.tree.size, "findmin_tree_rank": node_tree.rank(s.tree),
                "id3_error": t.exact_error(p, f), "id3_rank": tree.rank(t), "id3_size": 2 * tree.n_leaves(t) - 1}

    out = on_prefixes(at, sample, sample_sizes(params))
    return {**out, "target_rank": _target_rank(f, n, k, k_max)}


def _check(params):
    kind = checks.choice("target", params["target"], FAMILIES)
    n = checks.integer("n", params["n"], low=2, high=32)
    k = checks.integer("k", params["k"], low=1, high=min(n, 4))
    checks.real("c", params["c"], low=0.0, high=0.5, high_open=True)
    if kind == "rank":
        checks.integer("length", params["length"], low=1, high=n // k)
    checks.integer("max_rank", params["max_rank"], low=1, high=n)
    checks.integer("max_calls", params["max_calls"], low=1, high=2**30)
    checks.integer("id3_depth", params["id3_depth"], low=1, high=min(n, 12))
    checks.real("eps", params["eps"], low=0.0, high=1.0, low_open=True, high_open=True)
    checks.real("delta", params["delta"], low=0.0, high=1.0, low_open=True, high_open=True)
    check_sample_grid(params, n)


def lemma3_bound(n: int, r: int) -> int:
    """FIND's invocations over FINDMIN's ranks 0..r, by Lemma 3's bound (n + 1)^(2j) per rank j."""
    return sum((n + 1) ** (2 * j) for j in range(r + 1))


def _bound(cell) -> float:
    """Theorem 2's m for the cell's eps, delta and r = k."""
    return sample_bound(int(cell["n"]), int(cell["k"]), float(cell["eps"]), float(cell["delta"]))


def _c_label(c) -> str:
    return "uniform" if float(c) == 0 else f"c = {float(c):g}"


def _mean_curve(ax, groups, label, **style):
    """A mean over m with its 95% band, from :func:`~jaxtrees.experiments.table.means` groups sorted by m."""
    xs = [g["m"] for g in groups]
    mean = [g["mean"] for g in groups]
    half = [1.96 * (g["sem"] if g["sem"] == g["sem"] else 0.0) for g in groups]
    line, = ax.plot(xs, mean, label=label, ms=5, **{**summary.series_style(ax), **style})
    ax.fill_between(xs, [a - h for a, h in zip(mean, half)], [a + h for a, h in zip(mean, half)],
                    color=line.get_color(), alpha=0.15)


def _curves(rows, by, metric) -> dict:
    """Per group of ``by``: the :func:`~jaxtrees.experiments.table.means` of ``metric`` over m (one pass)."""
    out = {}
    for g in tables.means(rows, [*by, "m"], metric):
        out.setdefault(tuple(g[name] for name in by), []).append(g)
    return out


PANEL = ["target", "k", "n", "eps", "delta"]


@summary.styled
def _plot(rows, stem):
    return saving.side_by_side(lambda: _error_plot(rows, stem), lambda: _ranks_plot(rows, f"{stem}_ranks"),
                                lambda: _calls_plot(rows, f"{stem}_calls"), lambda: _nodes_plot(rows, f"{stem}_nodes"))


def _error_plot(rows, stem):
    findmin, id3 = _curves(rows, [*PANEL, "c"], "findmin_error"), _curves(rows, [*PANEL, "c"], "id3_error")
    panels = {}
    for key in findmin:
        panels.setdefault(key[:-1], []).append(key)
    m_max = group_max(rows, PANEL, "m")
    fig, axes = summary.figure(len(panels))
    counts = []
    for ax, (panel, keys) in zip(axes, panels.items()):
        cell = dict(zip(PANEL, panel))
        for key in keys:
            c = key[-1]
            counts += [g["trials"] for g in findmin[key]]
            _mean_curve(ax, findmin[key], f"FINDMIN, {_c_label(c)}", ls="-")
            _mean_curve(ax, id3[key], f"ID3, {_c_label(c)}", ls="--")
        bound = _bound(cell)
        ax.axhline(float(cell["eps"]), color="k", lw=0.8, ls=":", label="eps")
        where = f"Thm 2: m = {bound:,.0f}"
        if bound <= m_max[panel]:
            ax.axvline(bound, color="k", lw=1, ls="-.", label="Theorem 2's m(eps, delta) for r = k")
        else:
            where += " (beyond the grid)"
        ax.set_yscale("symlog", linthresh=1e-3)
        summary.panel(ax, f"random {PLURALS[cell['target']].format(k=cell['k'])}, n = {cell['n']}\n{where}",
                      "training examples m", ylim=(0, 0.6))
    return summary.finish(fig, axes, stem, "mean exact error\n(95% band)", "FINDMIN (least-rank consistent tree, "
                          "003) vs ID3 on the same samples: exact error", counts)


def _trees(rows):
    """``{learner: (n, rank, nodes)}`` over every row (FINDMIN's where it found a tree), as float arrays."""
    found = _found(rows)
    return {"FINDMIN": tuple(np.asarray(found[c], np.float64) for c in ("n", "findmin_tree_rank", "findmin_size")),
            "ID3": tuple(np.asarray(rows[c], np.float64) for c in ("n", "id3_rank", "id3_size"))}


@summary.styled
def _nodes_plot(rows, stem):
    """Nodes against rank for FINDMIN's and ID3's trees (every row, jittered), between 003 Lemma 1's
    2^(r+1) - 1 (solid) and 2 sum_{i <= r} C(n, i) - 1 (dashed, per n)."""
    fig, axes = summary.figure(1)
    ax = axes[0]
    top = 0
    for offset, (learner, (n, r, nodes)) in zip((-0.12, 0.12), _trees(rows).items()):
        jitter = offset + 0.05 * np.random.default_rng(0).standard_normal(r.size)
        ax.plot(r + jitter, nodes, ls="none", alpha=0.25, ms=3, label=learner, **summary.series_style(ax))
        top = max(top, int(r.max(initial=0)))
    ranks = np.arange(top + 1)
    ax.plot(ranks, theory.rank_nodes_min(ranks), "k-", lw=1, label="Lemma 1: 2^(r+1) - 1")
    for n in rows.unique("n"):
        ax.plot(ranks, theory.rank_nodes_max(n, ranks), "k--", lw=1, label=f"Lemma 1: 2 sum C(n, i) - 1, n = {n}")
    ax.set_yscale("log")
    ax.set_xticks(ranks)
    ax.set_xlabel("rank r of the tree")
    ax.set_ylabel("nodes")
    ax.set_title("Tree sizes against rank (003 Lemma 1)")
    ax.grid(alpha=0.3)
    summary.legend(fig, axes)
    return saving.save(fig, stem)


def _theory_report(rows, fms, by) -> str:
    """The rank report's Theory section: 003 Lemma 1's node bounds (FINDMIN's and ID3's trees), Theorem 2's
    guarantee at and past its m, Lemma 3's invocations."""
    learners = " and ".join(_trees(rows))
    lines = [verdicts.identity("003 Lemma 1", "a reduced tree of rank r over n variables has between 2^(r+1) - 1 and 2 "
                             "sum_{i <= r} C(n, i) - 1 nodes (Lemma 5: rank <= floor(log2 nodes))",
                             f"Trees: {learners}'s, every trial and m.", "tests/test_rank.py, tests/test_theory.py")]
    for delta in sorted({dict(zip(by, cell))["delta"] for cell in fms}):
        cells = [(_bound(dict(zip(by, cell))), [{**g, "m": m} for m, g in fm.items()]) for cell, fm in fms.items()
                 if dict(zip(by, cell))["delta"] == delta]
        lines.append(verdicts.sample_size_check(
            "003 Thm 2", f"P[FINDMIN's error <= eps] >= 1 - delta = {1 - delta:g} from m >= (1/eps) ((e n / r)^r ln(8n) "
            "+ ln(1/delta)), r = k; the bound's m against the measured m from which the rate stays >= 1 - delta",
            cells, 1.0 - delta, unit="cells"))
    found = _found(rows)
    positive = np.asarray(found["findmin_rank"]) > 0  # rank 0: one call, the bound's 1, by construction
    lines.append(verdicts.check("003 Lemma 3", "FIND's invocations in FINDMIN <= sum_{j <= r} (n + 1)^(2j) at the rank "
                              "found, r >= 1", _lemma3_bounds(found)[positive],
                              np.asarray(found["findmin_calls"])[positive], "upper",
                              unit="searches (every trial and m)", note=f"{int((~positive).sum()):,} searches at rank "
                              "0 make one call, the bound's 1."))
    return verdicts.section(lines, "Each statement of the seed this study tests, its kind first, against every measured "
                                 "point.")


def _found(rows):
    """The rows where FINDMIN found a consistent tree."""
    return rows.take(np.asarray(rows["findmin_found"]) != 0)


@summary.styled
def _ranks_plot(rows, stem):
    """Mean rank against m: the target's, FINDMIN's r(S), ID3's tree."""
    by = ["target", "k", "n"]
    target, id3 = _curves(rows, by, "target_rank"), _curves(rows, by, "id3_rank")
    findmin = _curves(_found(rows), by, "findmin_rank")
    fig, axes = summary.figure(len(target))
    for ax, (kind, k, n) in zip(axes, target):
        _mean_curve(ax, target[(kind, k, n)], "target", ls=":")
        _mean_curve(ax, findmin.get((kind, k, n), []), "FINDMIN: r(S)", ls="-")
        _mean_curve(ax, id3[(kind, k, n)], "ID3's tree", ls="--")
        summary.panel(ax, f"random {PLURALS[kind].format(k=k)}, n = {n}", "training examples m")
    axes[0].set_ylabel("mean rank (95% band)")
    summary.legend(fig, axes)
    summary.suptitle(fig, "Ranks of the target, of the sample (FINDMIN) and of ID3's tree, all c pooled")
    return saving.save(fig, stem)


def _lemma3_bounds(rows) -> np.ndarray:
    """:func:`lemma3_bound` at each row's n and FINDMIN rank, as floats (computed once per distinct pair)."""
    codes, keys = tables.groups(rows, ["n", "findmin_rank"])
    return np.asarray([float(lemma3_bound(n, r)) for n, r in keys], np.float64)[codes] if keys else np.zeros(0)


@summary.styled
def _calls_plot(rows, stem):
    """FIND's invocations in FINDMIN against Lemma 3's bound sum_{j <= r} (n + 1)^(2j)."""
    fig, axes = summary.figure(1)
    ax = axes[0]
    hi = 1.0
    for (kind,), sel in tables.split(_found(rows), ["target"]).items():
        xs = _lemma3_bounds(sel)
        ys = np.asarray(sel["findmin_calls"], np.float64)
        hi = max(hi, xs.max(), ys.max())
        ax.plot(xs, ys, ls="none", alpha=0.3, label=f"{PLURALS[kind].format(k='k')}", **summary.series_style(ax))
    ax.plot([1, hi], [1, hi], "k--", lw=1, label="Lemma 3: sum_{j<=r} (n + 1)^(2j)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("Lemma 3's bound at the rank found")
    ax.set_ylabel("FIND invocations in FINDMIN")
    ax.set_title("FIND's recursive calls (all m, c, n)")
    ax.grid(alpha=0.3)
    summary.legend(fig, axes)
    return saving.save(fig, stem)


def _report(rows):
    by = ["target", "k", "n", "c", "eps", "delta"]
    header = [*by, "trials", "Thm 2 m", "grid m >= it", "P[FINDMIN err <= eps] there", "1 - delta",
              "FINDMIN m for P >= 1 - delta", "ID3 m for P >= 1 - delta", "FINDMIN err at max m", "ID3 err at max m"]
    ranks_header = [*by, "target rank", "r(S) at max m", "FINDMIN tree rank", "ID3 rank", "ID3 rank > r(S)",
                    "FINDMIN size", "ID3 size", "no tree found"]
    calls_header = [*by, "calls (mean)", "calls (max)", "max calls / Lemma 3 bound", "budget exhausted"]
    eps = np.asarray(rows["eps"], np.float64)
    rows = rows.with_columns(findmin_ok=np.asarray(rows["findmin_error"], np.float64) <= eps,
                             id3_ok=np.asarray(rows["id3_error"], np.float64) <= eps)
    fms, oks = {}, {}  # cell -> m -> rates of error <= eps: one pass each
    for rates, metric in ((fms, "findmin_ok"), (oks, "id3_ok")):
        for g in tables.rates(rows, [*by, "m"], metric):
            rates.setdefault(tuple(g[name] for name in by), {})[g["m"]] = g
    top = at_max(rows, by, "m")  # each cell's rows at its largest m
    found, top_found = _found(rows), _found(top)
    at_top = {metric: group_sums(top, by, metric) for metric in ("findmin_error", "id3_error", "target_rank",
                                                                  "id3_rank", "id3_size")}
    at_top_found = {metric: group_sums(top_found, by, metric) for metric in ("findmin_rank", "findmin_tree_rank",
                                                                              "findmin_size")}
    above = group_sums(top_found, by, np.asarray(top_found["id3_rank"]) > np.asarray(top_found["findmin_rank"]))
    calls, calls_max = group_sums(rows, by, "findmin_calls"), group_max(rows, by, "findmin_calls")
    exhausted = group_sums(rows, by, "findmin_exhausted")
    ratios = group_max(found, by, np.asarray(found["findmin_calls"], np.float64) / _lemma3_bounds(found))
    table, ranks_table, calls_table = [], [], []
    for cell, fm in fms.items():
        ok = oks[cell]
        info = dict(zip(by, cell))
        bound = _bound(info)
        level = 1.0 - info["delta"]
        at = min((m for m in fm if m >= bound), default=None)
        there = "beyond the grid" if at is None else (f"{fm[at]['rate']:.3f} [{fm[at]['low']:.3f}, "
                                                      f"{fm[at]['high']:.3f}]")
        m_top = max(fm)
        n_top = at_top["findmin_error"][cell][1]
        n_found = at_top_found["findmin_rank"].get(cell, (0.0, 0))[1]

        def mean(metric, sums=at_top):
            total, count = sums[metric].get(cell, (0.0, 0))
            return total / max(count, 1)

        def reach(groups):
            m = summary.threshold([(m, g["rate"]) for m, g in groups.items()], level)
            return "not reached" if m is None else m

        table.append([*cell, fm[m_top]["trials"], f"{bound:,.0f}", "-" if at is None else at, there, f"{level:g}",
                      reach(fm), reach(ok), f"{mean('findmin_error'):.4f}", f"{mean('id3_error'):.4f}"])
        ranks_table.append([*cell, f"{mean('target_rank'):.2f}", f"{mean('findmin_rank', at_top_found):.2f}",
                            f"{mean('findmin_tree_rank', at_top_found):.2f}", f"{mean('id3_rank'):.2f}",
                            f"{above.get(cell, (0.0, 0))[0]:.0f} of {n_found}",
                            f"{mean('findmin_size', at_top_found):.1f}",
                            f"{mean('id3_size'):.1f}", f"{n_top - n_found} of {n_top}"])
        total, count = calls[cell]
        calls_table.append([*cell, f"{total / count:.0f}", calls_max[cell],
                            f"{ratios.get(cell, float('nan')):.2e}", f"{exhausted[cell][0]:.0f} of {count}"])
    return summary.section(
        "FINDMIN (least-rank consistent trees, 003) vs ID3",
        "Theorem 2: from m >= (1/eps) ((e n / r)^r ln(8n) + ln(1/delta)) examples of a target of rank <= r, "
            "every consistent tree of rank <= r (FINDMIN's) has error <= eps with probability >= 1 - delta; here "
            "r = k (a k-junta or k-parity has rank <= k). Errors are exact. \"m for P >= 1 - delta\": the smallest m "
            "of the grid from which the share of trials with error <= eps stays >= 1 - delta.", header, table,
        after="\n\n### Ranks and sizes at max m\n\nTarget rank: the generated tree's, or (juntas, parities) the "
              "least rank of the function (FINDMIN on its truth table). r(S): the rank FINDMIN found (trials with a "
              "tree); sizes in nodes.\n\n" + summary.markdown_table(ranks_header, ranks_table)
              + "\n\n### FIND's invocations (Lemma 3)\n\nOver every m; the bound at the rank found is "
              "sum_{j <= r} (n + 1)^(2j).\n\n" + summary.markdown_table(calls_header, calls_table)) + "\n" + \
        _theory_report(rows, fms, by)


def _bytes_per_trial(params):
    """The packed sample twice, and FINDMIN's node table and stack of sample bitsets."""
    n, m = params["n"], params["m_max"]
    W = bits.n_words(m)
    slots = min(2 * sum(math.comb(n, i) for i in range(params["max_rank"] + 1)) - 1, 2 * 32 * W - 1)
    return 2 * 4 * (n + 2) * W + 24 * slots + 4 * (n + 2) * W


RANK = Study(
    name="rank",
    trial=_trial,
    grid=({"target": ["rank", "junta", "parity"], "n": 10, "k": [1, 2], "c": [0.0, 0.2], "length": 2,
           "max_rank": 3, "max_calls": 2**20, "id3_depth": 6, "impurity": "entropy", "eps": 0.1, "delta": 0.1,
           "m_min": 16, "m_max": 4096},
          {"target": ["rank", "junta", "parity"], "n": [12, 16], "k": [1, 2, 3], "c": [0.0, 0.1, 0.2], "length": 2,
           "max_rank": 4, "max_calls": 2**22, "id3_depth": 10, "impurity": "entropy", "eps": 0.1, "delta": 0.1,
           "m_min": 16, "m_max": 65536}),
    replicates=(20, 200),
    static=("n", "length", "max_rank", "max_calls", "id3_depth", "impurity", "m_min", "m_max"),
    axis=("m", sample_sizes),
    check=_check,
    plot=_plot,
    report=_report,
    compile=Compile(uniform=("target",), bounds=("k",), choices={"target": FAMILIES},
                    buckets={"target": lambda kind: "junta" if kind in JUNTAS else kind}, cpu_opt_level=2,
                    bytes_per_trial=_bytes_per_trial),
    meanings={
        "m": "training examples: the first m of the trial's sample (m-grid m_min, 2 m_min, ..., m_max)",
        "findmin_error": "Pr_{x ~ p}[tree(x) != f(x)] of FINDMIN's tree, exactly (float32)",
        "findmin_rank": "r(S): the least rank of a tree consistent with the m examples (-1: none found within "
                        "max_rank and max_calls)",
        "findmin_found": "1 if FINDMIN found a consistent tree",
        "findmin_exhausted": "1 if FINDMIN stopped at max_calls",
        "findmin_calls": "invocations of FIND(S, r) over FINDMIN's ranks 0..r(S) (Lemma 3)",
        "findmin_size": "nodes of FINDMIN's tree", "findmin_tree_rank": "rank of FINDMIN's tree (<= r(S))",
        "id3_error": "exact error of ID3's tree (depth <= id3_depth)", "id3_rank": "rank of ID3's tree",
        "id3_size": "nodes of ID3's tree",
        "target_rank": "rank of the target: its generated tree's, or the least rank of the junta / parity "
                       "(FINDMIN on its truth table over the support)",
    },
)
