"""Gradient-descent studies (issue 5, 000 Open Question 1): how long does SGD take on juntas?

Each trial trains one network with :func:`jaxtrees.learners.sgd.train` (online mode: a fresh batch from
the distribution at every step, as in Barak et al. 2022, "Hidden progress in deep learning: SGD
learns parities near the computational limit"): a width-``width`` ReLU MLP (He init), SGD with
learning rate ``lr``, batch ``batch_size``, hinge loss by default, inputs encoded in {-1,+1}. The
test error is recorded every ``eval_every`` = K steps: exactly over all 2^n inputs when n <= 13,
else on ``test_size`` = 2^13 fresh examples drawn once per trial (Barak et al.'s validation
batch). "Steps to learn" is the first recorded step with test error <= eps (eps = 0: 100%
accuracy), so it is resolved to K steps; a trial that never gets there within ``max_steps`` is
*censored* (``steps`` = -1) and counts as +infinity in medians and quantiles.

- ``gd-parity-uniform``: Barak et al.'s baseline: k-parities on n uniform bits, (n, k) in
  {10, 20, 30} x {2, 3, 4}; median steps per (n, k) next to their claim (every configuration
  converges within 10^5 steps, steps growing like n^O(k)).
- ``gd-smoothed``: the same networks and targets on c-smoothed product distributions
  p_i = 1/2 + U[-c, c] (:class:`jaxtrees.core.distributions.Smoothed`; c = 0 is uniform): median steps
  vs n at fixed k, per c. Smoothing gives the parity degree-1 correlations
  E_p[chi_J(x) x_j] != 0 (the signal ID3 uses in 000); does SGD become polynomial in n?
- ``gd-vs-id3``: random non-degenerate k-juntas on identical c-smoothed distributions: p and f
  are drawn from the trial key exactly as the ``juntas`` tree study draws them, then ID3 (grown
  to depth k on the prefixes m = m_min, ..., m_max of one sample, scored exactly) and the network
  (online; examples seen = steps x batch) learn the same (p, f). Per trial: the examples each
  needs to reach error <= eps.
- ``gd-scaling``: the open question at scale: k-parities and random non-degenerate k-juntas
  (``family``), n on a geometric grid, several c, one network family (``optimizer``, ``lr``,
  ``width``; Adam and other widths are runs of the same study, e.g. ``--set optimizer=adam
  --set lr=0.001`` or ``--set width=400``). Records are geometric (``records_per_doubling`` per
  doubling of the step count: resolution 2^(1/r) - 1) and a trial stops at its first record with
  test error 0, so a budget of 2^18 steps costs only what the slowest trial of a batch needs.
  The report fits the exponent of n (and of 1/c) in the median steps by a Tobit fit over every
  trial, censored ones included (:mod:`jaxtrees.experiments.analysis`), with bootstrap
  intervals; a second figure follows the first layer: the row norms ||W1[j]||_2 on and off the
  support J over training, and the step by which J separates from the rest against the degree-1
  signal min_j |I(D, j)| (:func:`jaxtrees.targets.label_covariance`).

In the parity studies the support size k is a traced parameter (one compilation per n serves
every k): the target is a mask parity on a uniformly random k-subset of the n
coordinates (:class:`jaxtrees.targets.MaskParity`). n, the network and the step budget are
static (they fix shapes).

>>> sorted(STATIC_TRAINING)
['batch_size', 'eval_every', 'loss', 'max_steps', 'test_size', 'width']
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxtrees import targets
from jaxtrees.core import checks, distributions, sampling
from jaxtrees.experiments import analysis, summary
from jaxtrees.experiments.study import Study
from jaxtrees.experiments.studies.common import (PRECISION_BITS, SUCCESS_TOL, check_sample_grid, learn_on_prefixes,
                                                 sample_sizes, trial_keys)
from jaxtrees.learners import sgd

#: Barak et al. 2022: every (n, k) in {10, 20, 30} x {2, 3, 4} converged within this many steps.
BARAK_BUDGET = 100_000
#: Training settings a study cell may vary besides n, k and c (shown in tables when they vary).
TRAINING = ("lr", "width", "batch_size", "loss", "max_steps", "eval_every", "test_size")
#: Exact test error over {0,1}^n up to this n (2^13 = Barak et al.'s validation batch size).
EXACT_MAX_N = 13


def train_config(params) -> sgd.TrainConfig:
    """The :class:`jaxtrees.learners.sgd.TrainConfig` of a cell (online mode, SGD, eps = 0)."""
    return sgd.TrainConfig(sgd.mlp(params["width"]), loss=params["loss"], optimizer=optax.sgd,
                          steps=params["max_steps"], batch_size=params["batch_size"],
                          eval_every=params["eval_every"], mode="online", encoding="pm1",
                          test_size=params["test_size"], exact_max_n=EXACT_MAX_N, eps=0.0)


def _support_share(params, mask):
    """Share of the first layer's absolute weight mass on the coordinates in ``mask``."""
    w1 = jnp.sum(jnp.abs(params[0].w), axis=-1)
    return jnp.sum(jnp.where(mask, w1, 0.0)) / jnp.sum(w1)


# ----------------------------------------------------------------------------- parity trials


def _parity_trial(key, params):
    n = params["n"]
    keys = trial_keys(key, "distribution", "target", "training")  # as the tree studies derive theirs
    kp, kf, kt = keys["distribution"], keys["target"], keys["training"]
    if "c" in params:
        p = distributions.Smoothed(jnp.float32(0.5), params["c"]).marginals(kp, n)
    else:
        p = jnp.full((n,), 0.5, jnp.float32)
    f = targets.MaskParity(targets.random_subset(kf, n, params["k"]))
    result = sgd.train(kt, p, f, train_config(params), learning_rate=params["lr"])
    return {"steps": result.steps_to_eps, "learned": result.steps_to_eps >= 0,
            "final_error": result.trace.test_error[-1], "support_share": _support_share(result.params, f.mask),
            "drift": result.trace.drift[-1]}


def _check_training(params):
    checks.real("lr", params["lr"], low=0.0, high=100.0, low_open=True)
    checks.integer("width", params["width"], low=1, high=65536)
    checks.integer("batch_size", params["batch_size"], low=1, high=65536)
    checks.choice("loss", params["loss"], sgd.LOSSES)
    steps = checks.integer("max_steps", params["max_steps"], low=1, high=10**8)
    every = checks.integer("eval_every", params["eval_every"], low=1, high=steps)
    if steps % every:
        raise ValueError(f"eval_every must divide max_steps = {steps}, got {every}")
    checks.integer("test_size", params["test_size"], low=1, high=2**20)


def _check_parity(params):
    n = checks.integer("n", params["n"], low=2, high=4096)
    checks.integer("k", params["k"], low=1, high=n)
    if "c" in params:
        checks.real("c", params["c"], low=0.0, high=0.5, high_open=True)
    _check_training(params)
    train_config(params)  # anything TrainConfig still refuses


BARAK = {"width": 100, "batch_size": 32, "lr": 0.1, "loss": "hinge", "test_size": 8192}
STATIC_TRAINING = ("width", "batch_size", "loss", "max_steps", "eval_every", "test_size")


# ----------------------------------------------------------------------------- gd-parity-uniform


@summary.styled
def _uniform_plot(rows, stem):
    fig, (ax, ax_cdf) = summary.figure(2)
    extra = _varying(rows, TRAINING)
    budget = max(int(r["max_steps"]) for r in rows)
    for key, sel in summary.split(rows, ["k", *extra]).items():
        label = f"k = {key[0]}" + _suffix(extra, key[1:])
        _median_curve(ax, sel, "n", label)
    _budget_lines(ax, budget)
    ax.set_xlabel("input bits n")
    ax.set_ylabel("SGD steps to 100% test accuracy\n(median, interquartile band)")
    ax.set_title("k-parities, uniform inputs")
    ax.legend(fontsize=9)
    for key, sel in summary.split(rows, ["n", "k", *extra]).items():
        _learned_curve(ax_cdf, sel, "steps", 1, f"n = {key[0]}, k = {key[1]}" + _suffix(extra, key[2:]))
    ax_cdf.set_xlabel("SGD steps t")
    ax_cdf.set_ylabel("P[100% test accuracy by step t]\n(95% Wilson band)")
    ax_cdf.set_title("time to learn")
    ax_cdf.legend(fontsize=8, loc="lower right")
    summary.suptitle(fig, _network_title(rows) + ", online, uniform inputs (Barak et al. 2022 baseline)")
    return summary.save(fig, stem)


def _uniform_report(rows):
    extra = _varying(rows, TRAINING)
    header = ["n", "k", *extra, "trials", "learned within budget", "median steps [IQR]", "max steps (learned)",
              "Barak et al. 2022 claim", "this run"]
    table = []
    for key, sel in summary.split(rows, ["n", "k", *extra]).items():
        s = _steps(sel)
        budget = int(sel[0]["max_steps"])
        learned = int(np.isfinite(s).sum())
        verdict = _barak_verdict(s, budget)
        table.append([*key, len(s), f"{learned}/{len(s)}", _median_iqr(s, budget),
                      f"{int(s[np.isfinite(s)].max()):,}" if learned else "-",
                      f"all within {BARAK_BUDGET:,} steps; steps ~ n^O(k)", verdict])
    fits = _exponents(rows, ["k", *extra])
    lines = [f"- k = {key[0]}{_suffix(extra, key[1:])}: median steps ~ n^{a:.2f} over n = {ns}"
             for key, (a, ns) in fits.items()]
    budgets = sorted({int(r["max_steps"]) for r in rows})
    caveat = ""
    if max(budgets) < BARAK_BUDGET:
        caveat = (f"\n\nThe step budget here ({', '.join(f'{b:,}' for b in budgets)}) is below Barak et al.'s "
                  f"{BARAK_BUDGET:,}: a censored trial does not contradict their claim, only a learned one "
                  "confirms it.")
    ns, ks = sorted({int(r["n"]) for r in rows}), sorted({int(r["k"]) for r in rows})
    if ns != [10, 20, 30] or ks != [2, 3, 4]:
        caveat += (f" This grid (n in {ns}, k in {ks}) is not Barak et al.'s {{10, 20, 30}} x {{2, 3, 4}}: "
                   "it cannot show the configurations outside it (the quick size leaves out n = 30 and k = 4, "
                   "the slow ones), and an exponent fitted on fewer than three n is only indicative.")
    return (f"## k-parities on uniform inputs: SGD steps to 100% accuracy (Barak et al. 2022 baseline)\n\n"
            f"{_network_text(rows)}. Steps: first recorded step (every K = "
            f"{', '.join(sorted({r['eval_every'] for r in rows}, key=int))}) with test error 0, exact over "
            f"{{0,1}}^n for n <= {EXACT_MAX_N}, else on {_vals(rows, 'test_size')} fresh examples. Censored trials (no 100% accuracy "
            f"within the budget) count as > budget.\n\n" + summary.markdown_table(header, table)
            + caveat + "\n\nGrowth in n (least squares on log median vs log n, uncensored medians):\n\n"
            + ("\n".join(lines) if lines else "- not enough n with an uncensored median") + "\n"
            + _divergence_note(rows))


def _divergence_note(rows) -> str:
    """A warning line when some networks diverged (non-finite weights: the drift is NaN or inf)."""
    diverged = sum(1 for r in rows if not math.isfinite(float(r["drift"])))
    return "" if diverged == 0 else (
        f"\n**diverged: {diverged} of {len(rows)} trials** ended with non-finite weights (learning rate "
        f"{_vals(rows, 'lr')} too large for this loss and width?); they count as not learned.\n")


def _barak_verdict(s, budget):
    learned = np.isfinite(s)
    if learned.all():
        top = int(s.max())
        return f"consistent: all learned by step {top:,}" if top <= BARAK_BUDGET else \
            f"slower: learned only by step {top:,}"
    missing = int((~learned).sum())
    if budget >= BARAK_BUDGET:
        return f"contradicts: {missing}/{len(s)} not learned within {BARAK_BUDGET:,}"
    return f"undecided: {missing}/{len(s)} censored at {budget:,} < {BARAK_BUDGET:,}"


GD_PARITY_UNIFORM = Study(
    name="gd-parity-uniform",
    description="Barak et al. 2022 baseline: SGD on k-parities, uniform inputs: median steps to 100% accuracy",
    quick={"n": [10, 20], "k": [2, 3], **BARAK, "max_steps": 5000, "eval_every": 100},
    full={"n": [10, 20, 30], "k": [2, 3, 4], **BARAK, "max_steps": BARAK_BUDGET, "eval_every": 100},
    static=("n", *STATIC_TRAINING),
    trial=_parity_trial,
    replicates=(128, 100),
    check=_check_parity,
    plot=_uniform_plot,
    report=_uniform_report,
    columns={
        "steps": "first recorded SGD step with test error 0 (-1: not within max_steps)",
        "learned": "1 if steps >= 0",
        "final_error": f"test error at the last step (exact over {{0,1}}^n for n <= {EXACT_MAX_N}, else on "
                       "test_size fresh examples)",
        "support_share": "share of the first layer's absolute weight on the parity's coordinates at the end",
        "drift": "||w_T - w_0||_inf over all parameters at the end (NaN / inf: diverged)",
    },
)


# ----------------------------------------------------------------------------- gd-smoothed


@summary.styled
def _smoothed_plot(rows, stem):
    extra = _varying(rows, TRAINING)
    panels = summary.split(rows, ["k", *extra])
    fig, axes = summary.figure(len(panels), width=6.4, height=4.8)
    budget = max(int(r["max_steps"]) for r in rows)
    for ax, (key, sel) in zip(axes, panels.items()):
        for (c,), part in summary.split(sel, ["c"]).items():
            _median_curve(ax, part, "n", "uniform (c = 0)" if float(c) == 0 else f"c = {float(c):g}")
        _budget_lines(ax, budget, barak=False)
        ax.set_xlabel("input bits n")
        ax.set_title(f"k = {key[0]}-parities" + _suffix(extra, key[1:]))
    axes[0].set_ylabel("SGD steps to 0 test error\n(median, interquartile band)")
    summary.legend(fig, axes)
    summary.suptitle(fig, f"SGD ({_network(rows)}), online,\non p_i = 1/2 + U[-c, c] (c-smoothed)")
    return summary.save(fig, stem)


def _smoothed_report(rows):
    extra = _varying(rows, TRAINING)
    header = ["k", *extra, "c", "n", "trials", "learned within budget", "median steps [IQR]", "median vs uniform",
              "mean share of |W1| on J"]
    table = []
    for key, sel in summary.split(rows, ["k", *extra, "c", "n"]).items():
        s = _steps(sel)
        budget = int(sel[0]["max_steps"])
        uniform = [r for r in rows if float(r["c"]) == 0 and all(r[b] == v for b, v in
                                                                  zip(["k", *extra, "n"], [*key[:-2], key[-1]]))]
        ratio = "-"
        if uniform and float(key[-2]) != 0:
            mu, ms = np.quantile(_steps(uniform), 0.5, method="inverted_cdf"), np.quantile(s, 0.5, method="inverted_cdf")
            if np.isfinite(ms) and np.isfinite(mu):
                ratio = f"{ms / mu:.2f}x"
            elif np.isfinite(ms):
                ratio = "< (uniform censored)"
            elif np.isfinite(mu):
                ratio = "> (censored)"
        share = np.nanmean([float(r["support_share"]) for r in sel])
        table.append([*key, len(s), f"{int(np.isfinite(s).sum())}/{len(s)}", _median_iqr(s, budget), ratio,
                      f"{share:.3f} (chance {int(key[0]) / int(key[-1]):.3f})"])
    fits = _exponents(rows, ["k", *extra, "c"])
    lines = [f"- k = {key[0]}{_suffix(extra, key[1:-1])}, c = {float(key[-1]):g}: median steps ~ n^{a:.2f} "
             f"over n = {ns}" for key, (a, ns) in fits.items()]
    return (f"## k-parities on c-smoothed inputs: SGD steps to learn vs n\n\n{_network_text(rows)}; "
            "p_i = 1/2 + U[-c, c] drawn per trial (c = 0: uniform). Steps: first recorded step with test "
            f"error 0 (exact for n <= {EXACT_MAX_N}, else on {_vals(rows, 'test_size')} fresh examples); censored trials count as "
            "> budget. 'Share of |W1| on J': the first layer's absolute weight mass on the parity's "
            "coordinates at the end (k/n by chance).\n\n" + summary.markdown_table(header, table)
            + "\n\nGrowth in n (least squares on log median vs log n, uncensored medians; a polynomial "
              "is a straight line on the figure's log-log axes):\n\n"
            + ("\n".join(lines) if lines else "- not enough n with an uncensored median") + "\n"
            + _divergence_note(rows))


GD_SMOOTHED = dataclasses.replace(  # the same trial as gd-parity-uniform, on a grid over c
    GD_PARITY_UNIFORM,
    name="gd-smoothed",
    description="SGD on k-parities under c-smoothed product distributions (c = 0: uniform): steps to learn vs n",
    quick={"n": [10, 20, 30], "k": 3, "c": [0.0, 0.1, 0.2, 0.3], **BARAK, "max_steps": 4000, "eval_every": 100},
    full={"n": [10, 20, 30, 40, 50], "k": [3, 4], "c": [0.0, 0.05, 0.1, 0.2, 0.3], **BARAK,
          "max_steps": BARAK_BUDGET, "eval_every": 100},
    replicates=(64, 100),
    plot=_smoothed_plot,
    report=_smoothed_report,
)


# ----------------------------------------------------------------------------- gd-vs-id3


def _vs_trial(key, params):
    n, k = params["n"], params["k"]
    keys = trial_keys(key, "distribution", "target", "sample")  # as the juntas study: the same p and f
    kp, kf, ks = keys["distribution"], keys["target"], keys["sample"]
    p = sampling.quantize(distributions.Smoothed(jnp.float32(0.5), params["c"]).marginals(kp, n),
                          PRECISION_BITS)  # the p both learners see, sampled exactly
    f = targets.random_junta(kf, n, k)
    tree_error, _ = learn_on_prefixes(ks, p, f, n, k, params)
    ms = jnp.asarray(sample_sizes(params), jnp.int32)
    tree_ok = tree_error <= params["eps"] + SUCCESS_TOL
    tree_examples = jnp.where(jnp.any(tree_ok), ms[jnp.argmax(tree_ok)], -1)
    result = sgd.train(jax.random.fold_in(ks, 1), p, f, train_config(params), learning_rate=params["lr"])
    net_ok = result.trace.test_error <= params["eps"]
    steps = jnp.where(jnp.any(net_ok), (jnp.argmax(net_ok) + 1) * params["eval_every"], -1)
    return {"tree_examples": tree_examples.astype(jnp.int32), "tree_error": tree_error[-1],
            "net_steps": steps.astype(jnp.int32),
            "net_examples": jnp.where(steps >= 0, steps * params["batch_size"], -1).astype(jnp.int32),
            "net_error": result.trace.test_error[-1], "net_support_share": result.trace.support_share[-1]}


def _vs_check(params):
    n = checks.integer("n", params["n"], low=2, high=4096)
    checks.integer("k", params["k"], low=1, high=min(n, 12))
    checks.real("c", params["c"], low=0.0, high=0.5, high_open=True)
    checks.real("eps", params["eps"], low=0.0, high=0.5, high_open=True)
    check_sample_grid(params, n)
    _check_training(params)
    if params["max_steps"] * params["batch_size"] >= 2**31:
        raise ValueError(f"max_steps * batch_size must be < 2^31 (examples seen), got "
                         f"{params['max_steps']} * {params['batch_size']}")
    train_config(params)


@summary.styled
def _vs_plot(rows, stem):
    extra = _varying(rows, TRAINING + ("impurity", "eps"))
    panels = summary.split(rows, ["n", "k", *extra])
    fig, axes = summary.figure(len(panels), width=6.4, height=4.8)
    top = max(max(int(r["m_max"]) for r in rows), max(int(r["max_steps"]) * int(r["batch_size"]) for r in rows))
    grid = [2**e for e in range(int(math.log2(min(int(r["m_min"]) for r in rows))), int(math.log2(top)) + 2)]
    for ax, (key, sel) in zip(axes, panels.items()):
        for i, ((c,), part) in enumerate(summary.split(sel, ["c"]).items()):
            colour = f"C{i}"
            name = "uniform" if float(c) == 0 else f"c = {float(c):g}"
            m_max = int(part[0]["m_max"])
            tree = [(m, _share_within(part, "tree_examples", m)) for m in grid if m <= m_max]
            net = [(m, _share_within(part, "net_examples", m)) for m in grid]
            _rate_line(ax, tree, f"ID3, {name}", colour, "--")
            _rate_line(ax, net, f"SGD net, {name}", colour, "-")
        ax.set_xscale("log", base=2)
        ax.set_ylim(-0.03, 1.03)
        ax.set_xlabel("examples (ID3: sample size m; SGD: steps x batch)")
        ax.set_title(f"random {key[1]}-juntas, n = {key[0]}" + _suffix(extra, key[2:]))
        ax.grid(alpha=0.3)
    summary.legend(fig, axes)
    eps = sorted({float(r["eps"]) for r in rows})
    axes[0].set_ylabel(f"P[error <= {', '.join(f'{e:g}' for e in eps)} within that many examples]\n(95% Wilson band)")
    summary.suptitle(fig, "ID3 (depth k) vs SGD (" + _network(rows) + ") on identical (p, f)")
    return summary.save(fig, stem)


def _vs_report(rows):
    extra = _varying(rows, TRAINING + ("impurity",))
    header = ["n", "k", *extra, "eps", "c", "trials", "ID3: reached eps by m_max", "ID3 examples, median [IQR]",
              "SGD: reached eps in budget", "SGD examples, median [IQR]", "SGD / ID3 (medians)",
              "paired: P[SGD needs more]"]
    table = []
    for key, sel in summary.split(rows, ["n", "k", *extra, "eps", "c"]).items():
        tree = _steps(sel, "tree_examples")
        net = _steps(sel, "net_examples")
        m_max = int(sel[0]["m_max"])
        budget = int(sel[0]["max_steps"]) * int(sel[0]["batch_size"])
        mt = np.quantile(tree, 0.5, method="inverted_cdf")
        mn = np.quantile(net, 0.5, method="inverted_cdf")
        ratio = f"{mn / mt:.0f}x" if np.isfinite(mt) and np.isfinite(mn) else "-"
        both = np.isfinite(tree) | np.isfinite(net)
        more = (net > tree) & both
        table.append([*key, len(sel), f"{int(np.isfinite(tree).sum())}/{len(sel)}", _median_iqr(tree, m_max),
                      f"{int(np.isfinite(net).sum())}/{len(sel)}", _median_iqr(net, budget), ratio,
                      f"{more.sum() / max(both.sum(), 1):.2f}"])
    return ("## Random k-juntas on identical smoothed distributions: examples to error <= eps, ID3 vs SGD\n\n"
            "Per trial one (p, f): p_i = 1/2 + U[-c, c], f a random non-degenerate k-junta (drawn from the "
            "trial key as in the `juntas` study). ID3: trees grown to depth k on the prefixes m = m_min = "
            f"{min(int(r['m_min']) for r in rows)}, 2 m_min, ..., m_max = {max(int(r['m_max']) for r in rows)} "
            "of one sample, scored exactly; its "
            "examples = the smallest m on that grid with exact error <= eps. SGD: "
            + _network_text(rows) + "; its examples = steps x batch at the first record with test error <= eps "
            f"(exact for n <= {EXACT_MAX_N}); every example is fresh (online), each ID3 example is reused at "
            "every node. Censored values (not reached) count as > m_max resp. > budget. 'Paired': among trials "
            "where at least one learner reached eps, the share where SGD needed more examples.\n\n"
            + summary.markdown_table(header, table) + "\n")


GD_VS_ID3 = Study(
    name="gd-vs-id3",
    description="Random k-juntas on identical smoothed distributions: examples to error <= eps, SGD net vs ID3",
    quick={"n": 12, "k": 3, "c": [0.0, 0.1, 0.2, 0.3], "eps": 0.0, "impurity": "entropy", "m_min": 16,
           "m_max": 8192, **BARAK, "max_steps": 3000, "eval_every": 50},
    full={"n": [12, 16, 24], "k": [3, 4], "c": [0.0, 0.05, 0.1, 0.2, 0.3], "eps": [0.0, 0.05], "impurity": "entropy",
          "m_min": 16, "m_max": 65536, **BARAK, "max_steps": 20000, "eval_every": 50},
    static=("n", "k", "impurity", "m_min", "m_max", *STATIC_TRAINING),
    trial=_vs_trial,
    replicates=(64, 200),
    check=_vs_check,
    plot=_vs_plot,
    report=_vs_report,
    columns={
        "tree_examples": "smallest m on the m-grid whose depth-k tree has exact error <= eps (-1: none)",
        "tree_error": "exact error of the tree grown on m_max examples",
        "net_steps": "first recorded SGD step with test error <= eps (-1: none within max_steps)",
        "net_examples": "net_steps x batch_size: examples SGD saw (online; -1: none)",
        "net_error": "the network's test error at the last step",
        "net_support_share": "share of the first layer's absolute weight on the junta's support at the end",
    },
)


# ----------------------------------------------------------------------------- gd-scaling

#: The target families of gd-scaling: a k-parity on a random k-subset, a random non-degenerate k-junta
#: (k traced, padded to k_max: one program for every k).
FAMILIES = {"parity": lambda key, n, k, k_max: targets.MaskParity(targets.random_subset(key, n, k)),
            "junta": lambda key, n, k, k_max: targets.random_junta(key, n, k, k_max=k_max)}
#: Optimizers of gd-scaling (``lr`` is the step size of either).
OPTIMIZERS = {"sgd": optax.sgd, "adam": optax.adam}
#: One random subset or junta per trial: its largest k (2^k truth table, C(n, k) supports).
SCALING_MAX_K = 12
#: Bytes of the encoded test inputs one scoring pass holds per input bit (sgd.EVAL_CHUNK rows of float32).
EVAL_BYTES = sgd.EVAL_CHUNK * 4
#: Bootstrap resamples behind every interval of the gd-scaling report.
BOOTSTRAP = 400


def scaling_config(params) -> sgd.TrainConfig:
    """The :class:`~jaxtrees.learners.sgd.TrainConfig` of a gd-scaling cell: :func:`train_config` with the
    cell's optimizer, geometric records, a stop at the first record with test error 0 and the
    first layer's row norms in the trace."""
    return dataclasses.replace(train_config(params), optimizer=OPTIMIZERS[params["optimizer"]],
                               records_per_doubling=params["records_per_doubling"], stop_at_eps=True,
                               record_row_norms=True)


def checkpoints(params) -> list[int]:
    """The steps along gd-scaling's ``step`` axis: for each K 2^j <= S (K = eval_every, S = max_steps)
    the last record at or before it, and S."""
    steps = scaling_config(params).record_steps
    K, S = params["eval_every"], params["max_steps"]
    marks = [K * 2**j for j in range(int(math.log2(S // K)) + 1)] + [S]
    return sorted({int(steps[np.searchsorted(steps, m, side="right") - 1]) for m in marks})


def _last_valid(series):
    """The last non-NaN entry of a trace series (the record at the stop or at the budget)."""
    valid = ~jnp.isnan(series)
    return series[jnp.maximum(jnp.sum(valid) - 1, 0)]


def _separation(norms, mask, record_steps):
    """Per support coordinate j: the first record from which ||W1[j]|| exceeds every off-support
    row norm at every later record made; -1 where that never happens. Returns (first, all):
    the earliest such step over J, and the step by which all of J has separated (-1: not all)."""
    made = ~jnp.isnan(norms[:, 0])  # [E]
    off_max = jnp.max(jnp.where(mask, -jnp.inf, norms), axis=-1)  # [E]
    above = (norms > off_max[:, None]) | ~made[:, None]  # [E, n]; records not made do not break a run
    stays = jax.lax.cummin(above.astype(jnp.int32), axis=0, reverse=True).astype(bool) & made[:, None]
    ever = jnp.any(stays, axis=0)
    step = jnp.where(ever, jnp.asarray(record_steps, jnp.int32)[jnp.argmax(stays, axis=0)], -1)  # [n]
    big = jnp.iinfo(jnp.int32).max
    first = jnp.min(jnp.where(mask & ever, step, big))
    every = jnp.all(ever | ~mask)
    return (jnp.where(first == big, -1, first).astype(jnp.int32),
            jnp.where(every, jnp.max(jnp.where(mask, step, -1)), -1).astype(jnp.int32))


def _scaling_trial(key, params):
    n, k = params["n"], params["k"]
    keys = trial_keys(key, "distribution", "target", "training")  # as gd-smoothed: the same p, J and run
    p = distributions.Smoothed(jnp.float32(0.5), params["c"]).marginals(keys["distribution"], n)
    f = FAMILIES[params["family"]](keys["target"], n, k, params["k_max"])
    config = scaling_config(params)
    result = sgd.train(keys["training"], p, f, config, learning_rate=params["lr"])
    trace, mask = result.trace, f.support_mask(n)
    influence = jnp.abs(targets.label_covariance(f, p))
    first, every = _separation(trace.row_norms, mask, config.record_steps)
    at = np.searchsorted(config.record_steps, checkpoints(params))
    norms = trace.row_norms[at]  # [checkpoints, n]
    return {"steps": result.steps_to_eps, "learned": result.steps_to_eps >= 0,
            "final_error": _last_valid(trace.test_error), "support_share": _last_valid(trace.support_share),
            "drift": _last_valid(trace.drift),
            "influence_min": jnp.min(jnp.where(mask, influence, jnp.inf)),
            "influence_max": jnp.max(jnp.where(mask, influence, 0.0)),
            "separated_first": first, "separated_all": every,
            "norm_on": jnp.sum(jnp.where(mask, norms, 0.0), -1) / k,
            "norm_off": jnp.sum(jnp.where(mask, 0.0, norms), -1) / (n - k)}


def _scaling_check(params):
    n = checks.integer("n", params["n"], low=2, high=4096)
    checks.integer("k", params["k"], low=1, high=min(n - 1, SCALING_MAX_K))
    checks.choice("family", params["family"], FAMILIES)
    checks.choice("optimizer", params["optimizer"], OPTIMIZERS)
    checks.real("c", params["c"], low=0.0, high=0.5, high_open=True)
    checks.integer("records_per_doubling", params["records_per_doubling"], low=1, high=1024)
    _check_training(params)
    if params["max_steps"] < 2 * params["eval_every"]:
        raise ValueError(f"max_steps must be at least 2 eval_every = {2 * params['eval_every']} (two records), "
                         f"got {params['max_steps']}")
    scaling_config(params)


def _scaling_bytes(params) -> int:
    """Peak memory of one trial: the test set (bits and encoded chunk), the trace's row norms and
    the network's parameters, gradients and optimizer state (a generous 4 copies)."""
    n = params["n"]
    rows = 2**n if n <= EXACT_MAX_N else params["test_size"]
    records = scaling_config(params).record_steps.size
    return rows * n * 2 + EVAL_BYTES * n + records * (n + 8) * 4 + 16 * (n + 2) * params["width"]



def _trials(rows) -> list[dict]:
    """One row per trial (gd-scaling's rows run along ``step``; the scalars repeat on each)."""
    return [r for r in rows if int(r["step"]) == int(r["max_steps"])]


def _exponent_cell(sel, x_of):
    """Tobit fit (with a stratified bootstrap) of log(steps) on x_of(row) over the trials ``sel``."""
    budget = np.asarray([float(r["max_steps"]) for r in sel])
    s = _steps(sel)
    censored = ~np.isfinite(s)
    y = np.log(np.where(censored, budget, s))
    x = np.asarray([x_of(r) for r in sel])
    return analysis.bootstrap_fit(x, y, censored, replicates=BOOTSTRAP)



def _fit_text(out) -> str:
    if not out.fit.converged:
        return "not identified"
    if not out.replicates:
        return f"{out.fit.slope:.2f}"
    return f"{out.fit.slope:.2f} [{out.low:.2f}, {out.high:.2f}]"


def _scaling_exponents(trials, by, x_name):
    """{group key: (BootstrapFit, distinct x values, censored share, the group's trials)} for log steps vs
    log n (``x_name="n"``) or vs log(1/c) over c > 0 (``"c"``)."""
    out = {}
    for key, sel in summary.split(trials, by).items():
        if x_name == "c":
            sel = [r for r in sel if float(r["c"]) > 0]
        if not sel:
            continue
        x_of = (lambda r: math.log(1.0 / float(r["c"]))) if x_name == "c" else (lambda r: math.log(float(r[x_name])))
        fit = _exponent_cell(sel, x_of)
        values = sorted({float(r[x_name]) for r in sel})
        censored = float(np.mean(~np.isfinite(_steps(sel))))
        out[key] = (fit, values, censored, sel)
    return out


def _scaling_report(rows):
    trials = _trials(rows)
    extra = _varying(trials, TRAINING + ("optimizer", "records_per_doubling"))
    by_n = _scaling_exponents(trials, ["family", "k", *extra, "c"], "n")
    table = [[*key[:-1], f"{float(key[-1]):g}", _fit_text(fit), ", ".join(f"{v:g}" for v in ns),
              f"{cens:.0%}", _median_slope(sel)] for key, (fit, ns, cens, sel) in by_n.items()]
    header = ["family", "k", *extra, "c", "exponent of n [95% CI]", "n", "censored", "slope of medians"]
    by_c = _scaling_exponents(trials, ["family", "k", *extra, "n"], "c")
    table_c = [[*key, _fit_text(fit), ", ".join(f"{v:g}" for v in cs), f"{cens:.0%}"]
               for key, (fit, cs, cens, _) in by_c.items() if len(cs) >= 2]
    header_c = ["family", "k", *extra, "n", "exponent of 1/c [95% CI]", "c", "censored"]
    cells = []
    for key, sel in summary.split(trials, ["family", "k", *extra, "c", "n"]).items():
        s = _steps(sel)
        cells.append([*key, len(s), f"{int(np.isfinite(s).sum())}/{len(s)}", _median_iqr(s, int(sel[0]["max_steps"])),
                      _median_int(sel, "separated_all"), f"{np.median([float(r['influence_min']) for r in sel]):.2g}"])
    header_cells = ["family", "k", *extra, "c", "n", "trials", "learned", "median steps [IQR]",
                    "median step J separated (-: most stopped first)", "median min_j |I(D, j)|"]
    mech = _mechanism_fit(trials)
    return (f"## {_optimizer(trials)} steps to learn k-juntas and k-parities: how they grow with n, k and c\n\n"
            f"{_network_text(trials)}; p_i = 1/2 + U[-c, c] (c = 0: uniform). Steps: first record with test error 0 "
            f"(records at {_vals(trials, 'records_per_doubling')} per doubling of the step count from step "
            f"{_vals(trials, 'eval_every')}, so steps are resolved to about "
            f"{100 * (2 ** (1 / max(int(r['records_per_doubling']) for r in trials)) - 1):.0f}%; exact over "
            f"{{0,1}}^n for n <= {EXACT_MAX_N}, else on {_vals(trials, 'test_size')} fresh examples); a trial "
            "stops when it learns. Censored trials (not learned within the budget) enter the fits as "
            "censored, not dropped.\n\n"
            "### Exponent of n\n\nTobit fit (maximum likelihood, right-censored normal) of log(steps) = "
            "a log(n) + b + s e over every trial of the (family, k, c) group; a is the exponent of n in the "
            f"median steps. Interval: 2.5-97.5% percentiles of {BOOTSTRAP} bootstrap fits (trials resampled "
            "within each n). 'Slope of medians': least squares on log(median) over the n whose median is "
            "not censored, for comparison. 'not identified': fewer than two n with a learned trial.\n\n"
            + summary.markdown_table(header, table)
            + "\n\n### Exponent of 1/c at fixed n\n\nThe same fit of log(steps) against log(1/c) over c > 0 (at "
              "least two values of c).\n\n"
            + (summary.markdown_table(header_c, table_c) if table_c else "- fewer than two c > 0 in this grid")
            + "\n\n### Mechanism: the support separates in the first layer\n\n"
              "'Step J separated': the first record from which every support coordinate's first-layer "
              "row norm ||W1[j]||_2 stays above every off-support row norm. I(D, j) = E[f x_j] - E[f] E[x_j], the "
              "degree-1 signal (000 Lemma 9: |I| > alpha^2 (2c)^(k-1) for a k-parity). "
            + mech + "\n\n### Cells\n\n" + summary.markdown_table(header_cells, cells) + "\n"
            + _divergence_note(trials))


def _median_slope(sel) -> str:
    fits = _exponents(sel, [])
    return f"{fits[()][0]:.2f}" if () in fits else "-"


def _median_int(sel, column) -> str:
    v = np.asarray([float(r[column]) for r in sel])
    v = np.where(v < 0, np.inf, v)
    m = np.quantile(v, 0.5, method="inverted_cdf")
    return f"{int(m):,}" if np.isfinite(m) else "-"


def _mechanism_fit(trials) -> str:
    """Least squares of log(step J separated) on log(min_j |I(D, j)|) over trials where both exist."""
    pts = [(float(r["influence_min"]), float(r["separated_all"])) for r in trials
           if float(r["separated_all"]) > 0 and float(r["influence_min"]) > 1e-6]
    if len(pts) < 3 or len({i for i, _ in pts}) < 2:
        return "Too few trials with a separated support and a nonzero signal to fit separation against I."
    x, y = np.log([i for i, _ in pts]), np.log([s for _, s in pts])
    slope = float(np.polyfit(x, y, 1)[0])
    r = float(np.corrcoef(x, y)[0, 1])
    return (f"Over the {len(pts)} trials whose support separated and whose weakest support coordinate has "
            f"|I| > 1e-6: log(step J separated) = {slope:.2f} log(min_j |I(D, j)|) + const (least squares, "
            f"correlation {r:.2f}; a gradient signal of size I needs ~I^-2 steps to stand out of noise: slope -2).")


@summary.styled
def _scaling_plot(rows, stem):
    trials = _trials(rows)
    extra = _varying(trials, TRAINING + ("optimizer", "records_per_doubling"))
    panels = summary.split(trials, ["family", "k", *extra])
    fig, axes = summary.figure(len(panels), width=5.6, height=4.6)
    budget = max(int(r["max_steps"]) for r in trials)
    fits = _scaling_exponents(trials, ["family", "k", *extra, "c"], "n")
    for ax, (key, sel) in zip(axes, panels.items()):
        for (c,), part in summary.split(sel, ["c"]).items():
            fit = fits.get((*key, c), (None,))[0]
            slope = f", n^{fit.fit.slope:.2f}" if fit is not None and fit.fit.converged else ""
            _median_curve(ax, part, "n", ("uniform (c = 0)" if float(c) == 0 else f"c = {float(c):g}") + slope)
            colour = ax.get_lines()[-1].get_color()
            for (n,), cell in summary.split(part, ["n"]).items():
                censored = float(np.mean(~np.isfinite(_steps(cell))))
                if censored > 0:
                    ax.plot([float(n)], [budget], "^", color=colour, ms=4 + 8 * censored, alpha=0.7, ls="none")
        _budget_lines(ax, budget, barak=False)
        ax.set_xlabel("input bits n")
        ax.set_title(f"random {key[1]}-{'parities' if key[0] == 'parity' else 'juntas'}" + _suffix(extra, key[2:]))
        ax.legend(fontsize=8, loc="upper left")  # per panel: the fitted exponents are the panel's
    axes[0].set_ylabel(f"{_optimizer(trials)} steps to 0 test error\n(median, interquartile band)")
    summary.suptitle(fig, f"{_optimizer(trials)} ({_network(trials)}), online, p_i = 1/2 + U[-c, c]: steps vs n on log-log "
                          f"axes; legend: Tobit-fitted exponent of n; triangles at the budget: share of censored "
                          f"trials (size); {summary.trials_text([len(v) for v in summary.split(trials, ['family', 'k', *extra, 'c', 'n']).values()])}")
    files = summary.save(fig, stem)
    return files + _mechanism_plot(rows, trials, stem)


def _mechanism_plot(rows, trials, stem):
    """Left: median first-layer row norm on J (solid) and off J (dashed) over training, one panel per
    k at the largest n (parities, or juntas without parities); right: step J separated vs min |I|."""
    family = "parity" if any(r["family"] == "parity" for r in rows) else "junta"
    n_top = max(int(r["n"]) for r in rows if r["family"] == family)
    ks = sorted({int(r["k"]) for r in rows if r["family"] == family})
    fig, axes = summary.figure(len(ks) + 1, width=5.2, height=4.4)
    for ax, k in zip(axes, ks):
        sel = [r for r in rows if r["family"] == family and int(r["n"]) == n_top and int(r["k"]) == k]
        for i, ((c,), part) in enumerate(summary.split(sel, ["c"]).items()):
            colour = f"C{i}"
            label = "uniform" if float(c) == 0 else f"c = {float(c):g}"
            for column, ls, suffix in (("norm_on", "-", " on J"), ("norm_off", "--", " off J")):
                points = []
                for (step,), at in summary.split(part, ["step"]).items():
                    v = np.asarray([float(r[column]) for r in at])
                    if np.isfinite(v).sum() >= max(1, len(v) // 4):  # while a quarter of the trials still train
                        points.append((float(step), float(np.nanmedian(v))))
                if points:
                    ax.plot(*zip(*points), ls=ls, color=colour, label=label + suffix)
        ax.legend(fontsize=7, ncols=2)
        ax.set_xscale("log")
        ax.set_xlabel(f"{_optimizer(rows)} step")
        ax.set_title(f"{k}-{family}, n = {n_top}")
        ax.grid(alpha=0.3, which="both")
    axes[0].set_ylabel("first-layer row norm ||W1[i]||_2\n(median over trials still training)")
    ax = axes[-1]
    for (family_, k), sel in summary.split(trials, ["family", "k"]).items():
        pts = [(float(r["influence_min"]), float(r["separated_all"])) for r in sel
               if float(r["separated_all"]) > 0 and float(r["influence_min"]) > 1e-6]
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


GD_SCALING = Study(
    name="gd-scaling",
    description="Open Question 1 at scale: SGD steps to learn k-parities / k-juntas vs n, k and c, exponents of n "
                "and 1/c (Tobit fits), and how the support separates",
    quick={"family": ["parity", "junta"], "n": [8, 16, 32, 64], "k": [2, 3], "c": [0.0, 0.1, 0.3],
           "optimizer": "sgd", **{**BARAK, "test_size": 2048}, "max_steps": 16384, "eval_every": 8,
           "records_per_doubling": 8},
    full={"family": ["parity", "junta"], "n": [8, 16, 32, 64, 128], "k": [2, 3, 4, 5],
          "c": [0.0, 0.05, 0.1, 0.2, 0.3], "optimizer": "sgd", **BARAK, "max_steps": 2**18, "eval_every": 8,
          "records_per_doubling": 16},
    static=("family", "n", "optimizer", "records_per_doubling", *STATIC_TRAINING),
    bounds=("k",),
    trial=_scaling_trial,
    replicates=(32, 32),
    check=_scaling_check,
    plot=_scaling_plot,
    report=_scaling_report,
    axis=("step", checkpoints),
    bytes_per_trial=_scaling_bytes,
    columns={
        "step": "checkpoint step (rows run along the steps K 2^j <= S; norm_on / norm_off are taken there, the "
                "other columns are the trial's and repeat)",
        "steps": "first record with test error 0 (-1: not within max_steps); the trial stops there",
        "learned": "1 if steps >= 0",
        "final_error": "test error at the last record made (at the stop or the budget)",
        "support_share": "share of the first layer's absolute weight on the support at the last record",
        "drift": "||w_T - w_0||_inf over all parameters at the last record (NaN / inf: diverged)",
        "influence_min": "min over the support J of |I(D, j)| = |E[f x_j] - E[f] E[x_j]| (exact, 000 Sec. 3)",
        "influence_max": "max over J of |I(D, j)|",
        "separated_first": "first record from which some j in J has ||W1[j]||_2 above every off-support row "
                           "norm at every later record (-1: none)",
        "separated_all": "the same for every j in J: the step by which the whole support separated (-1: not)",
        "norm_on": "mean over J of ||W1[j]||_2 at this step (NaN: the trial had stopped)",
        "norm_off": "mean over the coordinates off J of ||W1[i]||_2 at this step (NaN: stopped)",
    },
    shared=("family", "optimizer"),
)


# ----------------------------------------------------------------------------- shared summaries


def _varying(rows, names):
    """The parameters among ``names`` that take more than one value in ``rows``."""
    return [b for b in names if b in rows[0] and len({r[b] for r in rows}) > 1]


def _suffix(names, values) -> str:
    return "".join(f", {b} = {v}" for b, v in zip(names, values))


def _steps(rows, column="steps") -> np.ndarray:
    """The column as floats, censored values (-1) as +inf."""
    v = np.asarray([float(r[column]) for r in rows])
    return np.where(v < 0, np.inf, v)


def _quartiles(s):
    return np.quantile(s, [0.25, 0.5, 0.75], method="inverted_cdf")


def _fmt(v, budget) -> str:
    return f"> {budget:,}" if not np.isfinite(v) else f"{int(v):,}"


def _median_iqr(s, budget) -> str:
    q1, q2, q3 = _quartiles(s)
    return f"{_fmt(q2, budget)} [{_fmt(q1, budget)}, {_fmt(q3, budget)}]"


def _exponents(rows, by) -> dict:
    """Per group: the slope a of log(median steps) ~ a log(n) + b over n with an uncensored median."""
    out = {}
    for key, sel in summary.split(rows, by).items():
        points = [(int(n), np.quantile(_steps(part), 0.5, method="inverted_cdf"))
                  for (n,), part in summary.split(sel, ["n"]).items()]
        points = [(n, m) for n, m in points if np.isfinite(m)]
        if len(points) >= 2:
            x, y = np.log([n for n, _ in points]), np.log([m for _, m in points])
            out[key] = (float(np.polyfit(x, y, 1)[0]), [n for n, _ in points])
    return out


def _median_curve(ax, rows, x, label):
    """Median of ``steps`` vs ``x`` with the interquartile band; censored medians are not drawn, and a
    censored upper quartile is drawn at the budget (marked by the dotted budget line)."""
    points = []
    for (xv,), part in summary.split(rows, [x]).items():
        s = _steps(part)
        budget = float(part[0]["max_steps"])
        q1, q2, q3 = _quartiles(s)
        points.append((float(xv), q1, q2, q3, budget))
    xs = [p[0] for p in points]
    med = [p[2] if np.isfinite(p[2]) else np.nan for p in points]
    line, = ax.plot(xs, med, "-", ms=4, label=label, **summary.series_style(ax))
    lo = [min(p[1], p[4]) for p in points]
    hi = [min(p[3], p[4]) for p in points]
    ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.2)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(xs, [f"{v:g}" for v in xs])
    ax.set_xticks([], minor=True)
    ax.grid(alpha=0.3, which="both")


def _budget_lines(ax, budget, barak=True):
    ax.axhline(budget, color="0.4", ls=":", lw=1, label=f"step budget {budget:,} (censoring)")
    if barak:
        ax.axhline(BARAK_BUDGET, color="k", ls="--", lw=1, label=f"Barak et al.: all within {BARAK_BUDGET:,}")


def _share_within(rows, column, m):
    """(successes, trials) of ``0 <= column <= m``."""
    v = np.asarray([int(float(r[column])) for r in rows])
    return int(((v >= 0) & (v <= m)).sum()), len(v)


def _rate_line(ax, points, label, colour, style):
    xs = [m for m, _ in points]
    rate = [k / t for _, (k, t) in points]
    bands = [summary.wilson(k, t) for _, (k, t) in points]
    look = summary.series_style(ax) if colour is None else {"color": colour, "marker": "o"}
    line, = ax.plot(xs, rate, style, label=label, ms=3, **look)
    ax.fill_between(xs, [b[0] for b in bands], [b[1] for b in bands], color=line.get_color(), alpha=0.12)


def _learned_curve(ax, rows, column, scale, label):
    """P[learned by step t] over the recorded steps t, with Wilson bands."""
    every, budget = int(rows[0]["eval_every"]), int(rows[0]["max_steps"])
    ts = np.arange(every, budget + 1, every)
    if ts.size > 80:
        ts = np.unique(np.geomspace(every, budget, 80).astype(int) // every * every)
    _rate_line(ax, [(t * scale, _share_within(rows, column, t)) for t in ts], label, None, "-")
    ax.set_xscale("log")
    ax.set_ylim(-0.03, 1.03)
    ax.grid(alpha=0.3)


def _network(rows) -> str:
    widths = sorted({r["width"] for r in rows}, key=int)
    return f"width-{'/'.join(widths)} ReLU MLP"


def _network_title(rows) -> str:
    return f"{_network(rows)}, {_optimizer(rows)}"


#: How reports and figures name an optimizer of :data:`OPTIMIZERS`.
OPTIMIZER_NAMES = {"sgd": "SGD", "adam": "Adam"}


def _optimizer(rows) -> str:
    """The optimizer(s) that trained the rows' networks ("SGD" for studies without an optimizer parameter)."""
    names = sorted({r.get("optimizer", "sgd") for r in rows})
    return "/".join(OPTIMIZER_NAMES.get(name, name) for name in names)


def _vals(rows, name) -> str:
    return "/".join(sorted({r[name] for r in rows}, key=summary.natural_key))


def _network_text(rows) -> str:
    vals = lambda b: _vals(rows, b)  # noqa: E731
    return (f"One hidden layer of width {vals('width')} (ReLU, He init), {_optimizer(rows)} learning rate {vals('lr')}, batch "
            f"{vals('batch_size')}, {vals('loss')} loss, inputs in {{-1,+1}}, online (fresh batch every step), "
            f"budget {vals('max_steps')} steps")
