"""The ``boosting`` study: AdaBoost with decision stumps and with 2-parities on the real data sets of
seed 004 (Table 2's first two columns), every round's test error, beside the paper's values.

A trial is one random split of one data set (:mod:`jaxtrees.datasets`: the seed's training size,
the rest for test; the split key is the trial key, so every weak learner boosts on the same
split) and boosts for ``rounds`` rounds with each weak learner:

- ``stumps``: :class:`~jaxtrees.learners.stumps.Stump` of least weighted error (Algorithm 1's);
- ``parity2``: the character chi_S, |S| <= 2, or its negation of largest weighted correlation
  (``LowDegree(degree=2, max_terms=1)``, an exhaustive search over all 1 + n + C(n, 2) of them).

Rows run along ``round`` (1 .. rounds): test error, training error, edge gamma_t and the bound
prod 2 sqrt(eps (1 - eps)) per weak learner. Replicates are splits (the seed: 20 splits, 250
rounds). The data here are the labeled rows only, so splice trains on 500 examples (the seed had
1000), and the test sets are the labeled rows left over (see :mod:`jaxtrees.datasets`).
"""

from __future__ import annotations

import functools

from jaxtrees import datasets
from jaxtrees.core import checks
from jaxtrees.experiments import summary
from jaxtrees.experiments.study import Study
from jaxtrees.learners import AdaBoost, LowDegree, Stump

#: The weak learners, in the report's order, and how the figure names them.
WEAK = {"stumps": "decision stumps", "parity2": "2-parities"}
#: Seed 004, Table 2: test error (%) after 250 rounds, mean of 20 splits.
PAPER = {"census": {"stumps": 18.50, "parity2": 20.44}, "splice": {"stumps": 7.37, "parity2": 4.64},
         "ocr17": {"stumps": 1.09, "parity2": 0.68}, "ocr49": {"stumps": 6.08, "parity2": 2.80},
         "cancer": {"stumps": 4.45, "parity2": 4.02}, "ecoli": {"stumps": 7.06, "parity2": 6.84},
         "heart": {"stumps": 22.24, "parity2": 23.88}}


def weak_learner(name: str):
    return Stump(impurity="error") if name == "stumps" else LowDegree(degree=2, max_terms=1)


@functools.lru_cache(maxsize=None)
def _data(name: str):
    return datasets.load(name)


def _trial(key, params):
    d = _data(params["data"])
    problem = d.problem()
    train, test = problem.train(key, d.train_size), problem.test(key, d.train_size)
    out = {}
    for name in WEAK:
        H = AdaBoost(weak_learner(name), rounds=params["rounds"]).fit(key, train)
        out |= {f"{name}_test_error": H.staged_errors(test), f"{name}_train_error": H.rounds.train_error,
                f"{name}_gamma": H.rounds.gamma, f"{name}_bound": H.rounds.bound}
    return out


def _check(params):
    checks.choice("data", params["data"], datasets.SHIPPED)
    checks.integer("rounds", params["rounds"], low=1, high=10_000)


def _rounds(params):
    return list(range(1, int(params["rounds"]) + 1))


@summary.styled
def _plot(rows, stem):
    panels = summary.split(rows, ["data"])
    fig, axes = summary.figure(len(panels))
    counts = []
    for ax, ((name,), sel) in zip(axes, panels.items()):
        for weak, label in WEAK.items():
            groups = sorted(summary.means(sel, ["round"], f"{weak}_test_error"), key=lambda g: int(g["round"]))
            counts += [g["trials"] for g in groups]
            x = [int(g["round"]) for g in groups]
            mean = [100 * g["mean"] for g in groups]
            line, = ax.plot(x, mean, "-", label=label, **summary.series_style(ax), markevery=max(1, len(x) // 8))
            sem = [100 * (g["sem"] if g["sem"] == g["sem"] else 0.0) for g in groups]
            ax.fill_between(x, [m - s for m, s in zip(mean, sem)], [m + s for m, s in zip(mean, sem)],
                            color=line.get_color(), alpha=0.2)
            if name in PAPER:
                ax.axhline(PAPER[name][weak], color=line.get_color(), ls=":", lw=1)
        ax.set_xscale("log")
        ax.set_xlabel("boosting round t")
        ax.set_title(f"{name} ({len(_data(name).features)} features)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("test error (%)\n(mean +- s.e. over splits)")
    summary.legend(fig, axes)
    summary.suptitle(fig, "AdaBoost on the seed's data sets; dotted: the paper's error after 250 rounds "
                          f"(Table 2) ({summary.trials_text(counts)})")
    return summary.save(fig, stem)


def _report(rows):
    header = ["data", "splits", "rounds"] + [f"{WEAK[w]} {what}" for w in WEAK
                                             for what in ("test error % (sd)", "paper %", "difference")]
    table = []
    for (name,), sel in summary.split(rows, ["data"]).items():
        last = max(int(r["round"]) for r in sel)
        final = [r for r in sel if int(r["round"]) == last]
        line = [name, len(final), last]
        for weak in WEAK:
            errors = [100 * float(r[f"{weak}_test_error"]) for r in final]
            mean = sum(errors) / len(errors)
            sd = (sum((e - mean) ** 2 for e in errors) / max(1, len(errors) - 1)) ** 0.5
            paper = PAPER.get(name, {}).get(weak)
            line += [f"{mean:.2f} ({sd:.2f})", "" if paper is None else f"{paper:.2f}",
                     "" if paper is None else f"{mean - paper:+.2f}"]
        table.append(line)
    bound_ok = all(float(r[f"{w}_train_error"]) <= float(r[f"{w}_bound"]) + 1e-6 for r in rows for w in WEAK)
    return ("## AdaBoost on the seed's data sets (004, Table 2)\n\n"
            "Test error after the last round, mean (sd) over splits; the paper: 250 rounds, 20 splits, and "
            "its own test files (here the labeled rows left over; splice trains on 500 examples, not 1000). "
            "Weak learners: stumps of least weighted error; 2-parities by exhaustive weighted correlation.\n\n"
            + summary.markdown_table(header, table)
            + f"\n\nTraining error <= prod 2 sqrt(eps (1 - eps)) on every round of every split: "
              f"{'yes' if bound_ok else 'NO'}.\n")


BOOSTING = Study(
    name="boosting",
    description="004 Table 2: AdaBoost with decision stumps and 2-parities on the seed's data sets, vs the paper",
    quick={"data": list(datasets.SHIPPED), "rounds": 50},
    full={"data": list(datasets.SHIPPED), "rounds": 250},
    static=("data", "rounds"),
    trial=_trial,
    replicates=(2, 20),
    check=_check,
    plot=_plot,
    report=_report,
    axis=("round", _rounds),
    columns={
        "round": "boosting round t (rows run along t = 1 .. rounds)",
        **{f"{w}_{what}": text.format(WEAK[w]) for w in WEAK for what, text in (
            ("test_error", "test error of AdaBoost with {} after t rounds (the split's held-out labeled rows)"),
            ("train_error", "training error of AdaBoost with {} after t rounds"),
            ("gamma", "edge gamma_t = 1 - 2 eps_t of round t's {} hypothesis under D_t"),
            ("bound", "prod_{{s <= t}} 2 sqrt(eps_s (1 - eps_s)) for {}, an upper bound on the training error"))},
    },
)
