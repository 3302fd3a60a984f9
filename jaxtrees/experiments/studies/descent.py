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
  test error 0, so a budget of 2^18 steps costs only what the slowest trial of a vmapped group
  needs. The budget ``max_steps`` is traced (a bound: the program records on the schedule of the
  group's largest budget and stops each trial at its own, with the same records as a program
  compiled for it), so several budgets share one program. Criteria (issue 38): the same
  training gives the steps to test error 0 (``steps``, the stop) and to test error <= ``eps``
  (``steps_eps``, 0.05 by default, the usual one in the SGD-on-parities literature); the test error
  is exact for n <= 13, else on ``test_size`` fresh examples, and 2,048 of them resolve an error of
  0.05 to +/- 0.0094 (95% binomial half-width; :data:`RESOLVING_TEST_SIZE`). Initialisation
  (``init``, traced, :data:`INITS`): ``he`` (first layer N(0, 2/n), LeCun output layer with a bias)
  or ``lecun-nobias`` (N(0, 1/n), no output bias); ``init`` and ``eps`` are shared parameters, so
  cells that differ only in them train on the same p, J and data.
  The report fits the exponent of n (and of 1/c) in the median steps by a Tobit fit over every
  trial, censored ones included (:mod:`jaxtrees.experiments.analysis`), with bootstrap
  intervals; then a sensitivity table (criterion x range of n (all, n >= 16) x fit (Tobit, or
  least squares on the medians of the cells at most half censored) x init, per (family, k, c)),
  a sentence per claim (smoothing lowers the exponent; it grows with k; the uniform curve bends
  upward) saying whether it holds in every variant, and the local slopes between consecutive n.
  A second figure follows the first layer: the row norms ||W1[j]||_2 on and off the support J over
  training, and the step by which J separates from the rest against the degree-1 signal
  min_j |I(D, j)| (:func:`jaxtrees.targets.label_covariance`).

  The CPU size of issue 38's report (:data:`CPU_REPORT`; ``jaxtrees run gd-scaling --quick`` with
  its ``--set`` values) is sized to run in <= 60 min on the 2-core CPU; see the README's row for its
  estimate.

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
from jaxtrees.experiments.studies.common import (PRECISION_BITS, SUCCESS_TOL, check_sample_grid, chosen,
                                                 learn_on_prefixes, sample_sizes, trial_keys)
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
#: Initialisations of gd-scaling's network (its ``init`` parameter): name -> (g, output bias): first-layer
#: weights N(0, g / n), and whether the output layer has a bias (trained; without one it stays 0). Both
#: have a LeCun N(0, 1 / width) output layer and hidden biases that start at 0. "he" is
#: :func:`jaxtrees.learners.sgd.mlp`'s ReLU default; "lecun-nobias" the other common choice. Both
#: scale the same normal draws, so cells that differ only in init (a shared parameter) start from
#: proportional first layers and see the same data.
INITS = {"he": (2.0, True), "lecun-nobias": (1.0, False)}
#: The restricted range of n of the report's sensitivity table (n >= this).
RANGE_MIN_N = 16
#: Fresh test examples that resolve a test error of 0.05 to +/- 0.01: the 95% binomial half-width
#: 1.96 sqrt(0.05 x 0.95 / N) is <= 0.01 from N = 1,825 on (2,048: +/- 0.0094; 8,192: +/- 0.0047).
RESOLVING_TEST_SIZE = 1825
#: The CPU size of issue 38's report: ``jaxtrees run gd-scaling --quick`` with these ``--set`` values
#: (parities, k <= 4, n <= 128, four c, both initialisations, 32 trials per cell, budget 2^18 steps
#: with a stop at test error 0; 2 x 3 x 4 x 5 = 120 cells, 3,840 trials, 5 programs). Estimated at
#: about 42 min on the idle 2-core CPU (40-56 min with the uncertain tails of the uniform 4-parity
#: on 128 bits), from a timed sample: 32 trials of that cell per device run 8,192 steps in 49 s with
#: the CPU shared (6.0 ms per step of 32 members; the 65,536-step report's n = 128, k = 4 program
#: gives 3.2 ms idle), and the earlier report's per-program run times (x 2 initialisations, x 4/5
#: of the c, the n = 128 uniform and c = 0.1 4-parities up to the new budget). c = 0.05 is left
#: out: its 4-parity on 128 bits alone would add about 14 min (both inits) at this budget.
CPU_REPORT = {"family": "parity", "n": "8,16,32,64,128", "k": "2,3,4", "c": "0,0.1,0.2,0.3",
              "init": "he,lecun-nobias", "max_steps": 2**18}


def scaling_config(params) -> sgd.TrainConfig:
    """The :class:`~jaxtrees.learners.sgd.TrainConfig` of a gd-scaling cell: :func:`train_config` with the
    cell's optimizer, geometric records, a stop at the first record with test error 0 and the
    first layer's row norms in the trace. Its schedule runs to ``max_steps_max`` where a program
    serves several budgets (``max_steps`` is a bound; the trial passes its own as ``budget``)."""
    horizon = params.get("max_steps_max", params["max_steps"])
    return dataclasses.replace(train_config({**params, "max_steps": horizon}), optimizer=OPTIMIZERS[params["optimizer"]],
                               records_per_doubling=params["records_per_doubling"], stop_at_eps=True,
                               record_row_norms=True)


def _doublings(K: int, S: int) -> int:
    """ceil(log2(S / K)) for S a multiple of K."""
    return (S // K - 1).bit_length()


def checkpoints(params) -> list[int]:
    """The steps along gd-scaling's ``step`` axis: for j = 0, 1, ..., ceil(log2(S / K)) the last record
    at or before min(K 2^j, S) (K = eval_every, S = max_steps); the last is S."""
    steps = scaling_config(params).record_steps
    K, S = params["eval_every"], params["max_steps"]
    return [int(steps[np.searchsorted(steps, min(K * 2**j, S), side="right") - 1]) for j in range(_doublings(K, S) + 1)]


def _checkpoint_records(steps_at, params):
    """The record indices of :func:`checkpoints` in a trace whose record steps are ``steps_at``
    (:func:`jaxtrees.learners.sgd.record_steps`, traced under a budget B): one per j up to the
    program's bound, those past B repeating B's record (the runner keeps the cell's first ones)."""
    K = params["eval_every"]
    J = _doublings(K, params.get("max_steps_max", params["max_steps"]))
    steps_at = jnp.asarray(steps_at, jnp.int32)
    marks = jnp.minimum(jnp.asarray(K * 2 ** np.arange(J + 1), jnp.int32), steps_at[-1])
    at_budget = jnp.searchsorted(steps_at, steps_at[-1], side="left")  # the record made at B
    return jnp.minimum(jnp.searchsorted(steps_at, marks, side="right") - 1, at_budget)


def _budget(params):
    """The trial's step budget for :func:`~jaxtrees.learners.sgd.train`: None where the program's schedule
    ends at it (a Python ``max_steps`` equal to its bound), else ``max_steps`` (traced: one program
    serves every budget of a static group)."""
    S = params["max_steps"]
    if isinstance(S, (int, np.integer)) and S == params.get("max_steps_max", S):
        return None
    return S


def _initialisation(params, model):
    """``(init, trainable)`` for :func:`~jaxtrees.learners.sgd.train`: the cell's :data:`INITS` entry, by
    its traced index where the program serves several (``None, None``: the model's own He init)."""
    value = params["init"]
    names = (value,) if isinstance(value, str) else params["init_choices"]
    if tuple(names) == ("he",):
        return None, None
    gain, bias = chosen(params, "init", lambda name: (jnp.float32(INITS[name][0]), jnp.bool_(INITS[name][1])))

    def init(key, n):
        first, *rest = model.init(key, n)  # He: N(0, 2 / n), scaled to N(0, gain / n)
        return (first._replace(w=first.w * jnp.sqrt(gain / 2.0)), *rest)

    return init, (sgd.Dense(True, True), sgd.Dense(True, bias))  # one hidden layer: (hidden, output)


def _first_hit(errors, eps, steps_at):
    """The step of the first record with test error <= eps (-1: none; records not made are NaN)."""
    hit = errors <= eps
    return jnp.where(jnp.any(hit), jnp.asarray(steps_at, jnp.int32)[jnp.argmax(hit)], -1).astype(jnp.int32)


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
    budget = _budget(params)
    init, trainable = _initialisation(params, config.model)
    result = sgd.train(keys["training"], p, f, config, budget=budget, init=init, trainable=trainable,
                       learning_rate=params["lr"])
    steps_at = sgd.record_steps(config, budget)
    trace, mask = result.trace, f.support_mask(n)
    influence = jnp.abs(targets.label_covariance(f, p))
    first, every = _separation(trace.row_norms, mask, steps_at)
    norms = trace.row_norms[_checkpoint_records(steps_at, params)]  # [checkpoints of the bound, n]
    steps_eps = _first_hit(trace.test_error, params["eps"], steps_at)
    return {"steps": result.steps_to_eps, "learned": result.steps_to_eps >= 0,
            "steps_eps": steps_eps, "learned_eps": steps_eps >= 0,
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
    checks.real("eps", params["eps"], low=0.0, high=0.5, high_open=True)
    checks.choice("init", params["init"], INITS)
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
    """One row per trial (gd-scaling's rows run along ``step``; the scalars repeat on each). Rows of
    runs made before the ``init`` parameter read as ``init = he``."""
    return [{"init": "he", **r} for r in rows if int(r["step"]) == int(r["max_steps"])]


def _exact_trials(trials) -> list[dict]:
    """The trials of the run's first eps: cells that differ only in eps share their trial keys (the
    same trainings), so the exact criterion counts each training once."""
    if "eps" not in trials[0]:
        return trials
    first = min(float(r["eps"]) for r in trials)
    return [r for r in trials if float(r["eps"]) == first]


def _criteria(trials) -> list[tuple[str, str, list]]:
    """``(label, steps column, trials)`` per success criterion: test error 0 (``steps``), then test
    error <= eps (``steps_eps``) for each eps > 0 of the run, largest first."""
    out = [("error 0", "steps", _exact_trials(trials))]
    if "eps" in trials[0]:
        for eps in sorted({float(r["eps"]) for r in trials if float(r["eps"]) > 0}, reverse=True):
            out.append((f"error <= {eps:g}", "steps_eps", [r for r in trials if float(r["eps"]) == eps]))
    return out


def _log_steps(sel, column="steps"):
    """``(log n, log steps, censored)`` of the trials ``sel``: a censored trial at log of its budget."""
    s = _steps(sel, column)
    censored = ~np.isfinite(s)
    budget = np.asarray([float(r["max_steps"]) for r in sel])
    return np.log([float(r["n"]) for r in sel]), np.log(np.where(censored, budget, s)), censored


def _exponent_cell(sel, x_of, column="steps"):
    """Tobit fit (with a stratified bootstrap) of log(steps) on x_of(row) over the trials ``sel``."""
    _, y, censored = _log_steps(sel, column)
    x = np.asarray([x_of(r) for r in sel])
    return analysis.bootstrap_fit(x, y, censored, replicates=BOOTSTRAP)


def _fit_text(out) -> str:
    if not out.fit.converged:
        return "not identified"
    if not out.replicates:
        return f"{out.fit.slope:.2f}"
    return f"{out.fit.slope:.2f} [{out.low:.2f}, {out.high:.2f}]"


def _scaling_exponents(trials, by, x_name, column="steps"):
    """{group key: (BootstrapFit, distinct x values, censored share, the group's trials)} for log steps vs
    log n (``x_name="n"``) or vs log(1/c) over c > 0 (``"c"``)."""
    out = {}
    for key, sel in summary.split(trials, by).items():
        if x_name == "c":
            sel = [r for r in sel if float(r["c"]) > 0]
        if not sel:
            continue
        x_of = (lambda r: math.log(1.0 / float(r["c"]))) if x_name == "c" else (lambda r: math.log(float(r[x_name])))
        fit = _exponent_cell(sel, x_of, column)
        values = sorted({float(r[x_name]) for r in sel})
        censored = float(np.mean(~np.isfinite(_steps(sel, column))))
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
    if not sel:
        return np.nan, "-"
    x, y, censored = _log_steps(sel, column)
    if fit == "Tobit":
        out = analysis.bootstrap_fit(x, y, censored, replicates=BOOTSTRAP)
        return (out.fit.slope if out.fit.converged else np.nan), _fit_text(out)
    out = analysis.median_fit(x, y, censored)
    return (out.slope, f"{out.slope:.2f}") if out.converged else (np.nan, "-")


def _sensitivity(trials, by) -> dict:
    """{(group key, (criterion, init, range, fit)): (slope, text)}: the exponent of n of every group
    of ``by`` under every variant of the run (criteria x inits x :data:`RANGES` x :data:`FITS`)."""
    out = {}
    for label, column, rows in _criteria(trials):
        for (init,), part in summary.split(rows, ["init"]).items():
            for name, low in RANGES.items():
                for key, sel in summary.split([r for r in part if int(r["n"]) >= low], by).items():
                    for fit in FITS:
                        out[(key, (label, init, name, fit))] = _variant_fit(sel, column, fit)
    return out


def _sensitivity_table(fits, by) -> tuple[list, list]:
    """The sensitivity table: one row per (group, criterion, init), one column per (fit, range)."""
    columns = [(fit, name) for fit in FITS for name in RANGES]
    rows = {}
    for (key, (label, init, name, fit)), (_, text) in fits.items():
        rows.setdefault((key, label, init), {})[(fit, name)] = text
    header = [*by[:-1], "c", "criterion", "init"] + [f"{fit}, {name}" for fit, name in columns]
    table = [[*key[:-1], f"{float(key[-1]):g}", label, init] + [rows[(key, label, init)].get(col, "-") for col in columns]
             for key, label, init in _by_group(rows)]
    return header, table


def _by_group(keys) -> list:
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


def _group_name(group: dict, extra) -> str:
    """'3-parities' / '2-juntas', with the varying training parameters."""
    family = "parities" if group["family"] == "parity" else "juntas"
    return f"{group['k']}-{family}" + _suffix(extra, [group[b] for b in extra])


def _ordered(values):
    return sorted(values, key=lambda key: tuple(summary.natural_key(str(v)) for v in key))


def _claims(fits, local, by, extra) -> list[str]:
    """One sentence per claim saying whether it holds in every variant of ``fits`` (:func:`_sensitivity`,
    point estimates): smoothing lowers the exponent of n (the largest c against c = 0); the exponent
    grows with k; the uniform curve bends upward (its last finite local slope above its first, per
    criterion and init: ``local``, :func:`_local_slopes`)."""
    variants = sorted({v for _, v in fits}, key=lambda v: (v[0], v[1], list(RANGES).index(v[2]), FITS.index(v[3])))
    slope = {(key, v): a for (key, v), (a, _) in fits.items()}
    groups = [dict(zip(by, key)) for key in _ordered({key for key, _ in fits})]
    key_of = lambda g: tuple(g[b] for b in by)  # noqa: E731

    def verdict(pairs):
        """pairs: variant -> list of group keys to compare in order; the claim: slopes strictly fall."""
        results = []
        for v in variants:
            a = [slope.get((key, v), np.nan) for key in pairs]
            results.append((", ".join(v), None if np.any(np.isnan(a)) else bool(np.all(np.diff(a) < 0))))
        return _verdict(results)

    lines = []
    for head in _ordered({tuple(g[b] for b in by if b != "c") for g in groups}):
        sel = [g for g in groups if tuple(g[b] for b in by if b != "c") == head]
        cs = sorted(float(g["c"]) for g in sel)
        if len(cs) < 2 or cs[0] != 0:
            continue
        zero = next(g for g in sel if float(g["c"]) == 0)
        top = next(g for g in sel if float(g["c"]) == cs[-1])
        lines.append(f"- Smoothing lowers the exponent of n of {_group_name(zero, extra)} (c = {cs[-1]:g} below "
                     f"c = 0): " + verdict([key_of(zero), key_of(top)]))
    for head in _ordered({tuple(g[b] for b in by if b != "k") for g in groups}):
        sel = sorted((g for g in groups if tuple(g[b] for b in by if b != "k") == head), key=lambda g: int(g["k"]))
        if len(sel) < 2:
            continue
        ks = ", ".join(str(g["k"]) for g in sel)
        family = "parities" if sel[0]["family"] == "parity" else "juntas"
        lines.append(f"- The exponent of n grows with k (k = {ks}) for {family}"
                     f"{_suffix(extra, [sel[0][b] for b in extra])} at c = {float(sel[0]['c']):g}: "
                     + verdict([key_of(g) for g in reversed(sel)]))
    bends = {}
    for (key, criterion, init), slopes in local.items():
        if float(key[-1]) == 0:
            finite = [s for _, _, s in slopes if np.isfinite(s)]
            bends.setdefault(key, []).append((f"{criterion}, {init}", None if len(finite) < 2 else
                                              bool(finite[-1] > finite[0])))
    for key in _ordered(bends):
        lines.append(f"- The uniform {_group_name(dict(zip(by, key)), extra)} bend upward on log-log axes (last local "
                     f"slope above the first; per criterion and init): " + _verdict(bends[key]))
    return lines


def _local_slopes(trials, by) -> dict:
    """{(group key, criterion, init): [(n0, n1, slope)]}: the slope of log(median steps) against log n
    between consecutive n (NaN where a median is censored), under every criterion and init."""
    out = {}
    for label, column, rows in _criteria(trials):
        for (init,), part in summary.split(rows, ["init"]).items():
            for key, sel in summary.split(part, by).items():
                x, y, censored = _log_steps(sel, column)
                out[(key, label, init)] = [(math.exp(a), math.exp(b), s)
                                           for a, b, s in analysis.local_slopes(x, y, censored)]
    return out


def _local_table(local, by) -> tuple[list, list]:
    """The local slopes as a table: one row per (group, criterion, init), one column per pair of consecutive n."""
    pairs = sorted({(round(a), round(b)) for slopes in local.values() for a, b, _ in slopes})
    header = [*by[:-1], "c", "criterion", "init"] + [f"{a}→{b}" for a, b in pairs]
    table = []
    for key, label, init in _by_group(local):
        at = {(round(a), round(b)): s for a, b, s in local[(key, label, init)]}
        table.append([*key[:-1], f"{float(key[-1]):g}", label, init]
                     + [f"{at[p]:.2f}" if p in at and np.isfinite(at[p]) else "-" for p in pairs])
    return header, table


def _censored_medians(trials) -> str:
    """A sentence naming the cells whose median is censored (more than half not learned), per criterion."""
    parts = []
    for label, column, rows in _criteria(trials):
        cells = [key for key, sel in summary.split(rows, ["family", "k", "c", "n", "init"]).items()
                 if not np.isfinite(np.quantile(_steps(sel, column), 0.5, method="inverted_cdf"))]
        names = ", ".join(f"{k}-{f}, c = {float(c):g}, n = {n}, {i}" for f, k, c, n, i in cells)
        parts.append(f"{label}: " + (f"{len(cells)} ({names})" if cells else "none"))
    return "Cells whose median is censored (more than half of the trials not learned within the budget): " + \
        "; ".join(parts) + "."


def _resolution_text(trials) -> str:
    """How finely the test set resolves the criteria."""
    sizes = sorted({int(r["test_size"]) for r in trials})
    eps = sorted({float(r["eps"]) for r in trials if float(r.get("eps", 0)) > 0}) if "eps" in trials[0] else []
    sampled = any(int(r["n"]) > EXACT_MAX_N for r in trials)
    if not eps or not sampled:
        return ""
    widths = ", ".join(f"+/- {1.96 * math.sqrt(e * (1 - e) / size):.4f} at eps = {e:g} on {size:,}"
                       for e in eps for size in sizes)
    return (f" For n > {EXACT_MAX_N} the error is measured on the test sample: 95% binomial half-width {widths} "
            f"examples ({RESOLVING_TEST_SIZE:,} resolve 0.05 to +/- 0.01).")


def _scaling_report(rows):
    trials = _trials(rows)
    exact = _exact_trials(trials)
    extra = _varying(trials, TRAINING + ("optimizer", "records_per_doubling", "init"))
    by_n = _scaling_exponents(exact, ["family", "k", *extra, "c"], "n")
    table = [[*key[:-1], f"{float(key[-1]):g}", _fit_text(fit), ", ".join(f"{v:g}" for v in ns),
              f"{cens:.0%}", _median_slope(sel)] for key, (fit, ns, cens, sel) in by_n.items()]
    header = ["family", "k", *extra, "c", "exponent of n [95% CI]", "n", "censored", "slope of medians"]
    plain = [b for b in extra if b != "init"]
    by = ["family", "k", *plain, "c"]
    fits = _sensitivity(trials, by)
    header_s, table_s = _sensitivity_table(fits, by)
    local = _local_slopes(trials, by)
    header_l, table_l = _local_table(local, by)
    claims = _claims(fits, local, by, plain)
    by_c = _scaling_exponents(exact, ["family", "k", *extra, "n"], "c")
    table_c = [[*key, _fit_text(fit), ", ".join(f"{v:g}" for v in cs), f"{cens:.0%}"]
               for key, (fit, cs, cens, _) in by_c.items() if len(cs) >= 2]
    header_c = ["family", "k", *extra, "n", "exponent of 1/c [95% CI]", "c", "censored"]
    criteria = _criteria(trials)
    cells, names = [], ["family", "k", *extra, "c", "n"]
    for key, sel in summary.split(exact, names).items():
        s = _steps(sel)
        budget = int(sel[0]["max_steps"])
        loose = [_median_iqr(_steps([r for r in part if _same_cell(r, sel[0], names)], "steps_eps"), budget)
                 for _, _, part in criteria[1:]]
        cells.append([*key, len(s), f"{int(np.isfinite(s).sum())}/{len(s)}", _median_iqr(s, budget), *loose,
                      _median_int(sel, "separated_all"), f"{np.median([float(r['influence_min']) for r in sel]):.2g}"])
    header_cells = ["family", "k", *extra, "c", "n", "trials", "learned", "median steps [IQR]",
                    *(f"median steps to {label} [IQR]" for label, _, _ in criteria[1:]),
                    "median step J separated (-: most stopped first)", "median min_j |I(D, j)|"]
    mech = _mechanism_fit(exact)
    variants = len({v for _, v in fits})
    return (f"## {_optimizer(trials)} steps to learn k-juntas and k-parities: how they grow with n, k and c\n\n"
            f"{_network_text(trials)}; p_i = 1/2 + U[-c, c] (c = 0: uniform). Steps: first record with test error 0 "
            f"(records at {_vals(trials, 'records_per_doubling')} per doubling of the step count from step "
            f"{_vals(trials, 'eval_every')}, so steps are resolved to about "
            f"{100 * (2 ** (1 / max(int(r['records_per_doubling']) for r in trials)) - 1):.0f}%; exact over "
            f"{{0,1}}^n for n <= {EXACT_MAX_N}, else on {_vals(trials, 'test_size')} fresh examples); a trial "
            "stops when it learns (test error 0, the strictest criterion), and the same training gives the steps "
            f"to each looser criterion ({', '.join(label for label, _, _ in criteria)}).{_resolution_text(trials)} "
            "Censored trials (not learned within the budget) enter the fits as censored, not dropped. "
            f"{_censored_medians(trials)}\n\n"
            "### Exponent of n\n\nTobit fit (maximum likelihood, right-censored normal) of log(steps) = "
            "a log(n) + b + s e over every trial of the (family, k, c) group; a is the exponent of n in the "
            f"median steps. Interval: 2.5-97.5% percentiles of {BOOTSTRAP} bootstrap fits (trials resampled "
            "within each n). 'Slope of medians': least squares on log(median) over the n whose median is "
            "not censored, for comparison. 'not identified': fewer than two n with a learned trial.\n\n"
            + summary.markdown_table(header, table)
            + "\n\n### Sensitivity: criterion x range of n x fit x initialisation\n\n"
              "The exponent of n under each of the run's variants: criterion (test error 0, or <= eps, from "
              f"the same trainings), range of n (all, or n >= {RANGE_MIN_N}), fit (Tobit over every trial, "
              "censored ones included, with its bootstrap interval; or least squares on the log medians of the "
              "cells at most half censored, '-' with fewer than two), initialisation (he: first layer N(0, 2/n), "
              "LeCun output with a bias; lecun-nobias: N(0, 1/n), no output bias; cells that differ only in init "
              "share their trial keys).\n\n"
            + summary.markdown_table(header_s, table_s)
            + f"\n\nClaims, each checked in every one of the {variants} variants (point estimates):\n\n"
            + ("\n".join(claims) if claims else "- no claim can be checked on this grid (one c, one k, ...)")
            + "\n\n### Local slopes\n\nThe slope of log(median steps) against log(n) between consecutive n "
              "('-': a censored median); one exponent over the whole range hides a curve that bends.\n\n"
            + summary.markdown_table(header_l, table_l)
            + "\n\n### Exponent of 1/c at fixed n\n\nThe same fit of log(steps) against log(1/c) over c > 0 (at "
              "least two values of c; test error 0).\n\n"
            + (summary.markdown_table(header_c, table_c) if table_c else "- fewer than two c > 0 in this grid")
            + "\n\n### Mechanism: the support separates in the first layer\n\n"
              "'Step J separated': the first record from which every support coordinate's first-layer "
              "row norm ||W1[j]||_2 stays above every off-support row norm. I(D, j) = E[f x_j] - E[f] E[x_j], the "
              "degree-1 signal (000 Lemma 9: |I| > alpha^2 (2c)^(k-1) for a k-parity). "
            + mech + "\n\n### Cells\n\n" + summary.markdown_table(header_cells, cells) + "\n"
            + _divergence_note(exact))


def _same_cell(a, b, names) -> bool:
    return all(a[name] == b[name] for name in names)


def _median_slope(sel, column="steps") -> str:
    fits = _exponents(sel, [], column)
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
    every = _trials(rows)
    trials = _exact_trials(every)
    loose = _criteria(every)[1:2]  # the loosest criterion, dashed
    extra = _varying(trials, TRAINING + ("optimizer", "records_per_doubling", "init"))
    panels = summary.split(trials, ["family", "k", *extra])
    fig, axes = summary.figure(len(panels), width=5.6, height=4.6)
    budget = max(int(r["max_steps"]) for r in trials)
    fits = _scaling_exponents(trials, ["family", "k", *extra, "c"], "n")
    names = ["family", "k", *extra, "c"]
    for ax, (key, sel) in zip(axes, panels.items()):
        for (c,), part in summary.split(sel, ["c"]).items():
            fit = fits.get((*key, c), (None,))[0]
            slope = f", n^{fit.fit.slope:.2f}" if fit is not None and fit.fit.converged else ""
            _median_curve(ax, part, "n", ("uniform (c = 0)" if float(c) == 0 else f"c = {float(c):g}") + slope)
            colour = ax.get_lines()[-1].get_color()
            for _, column, rows_ in loose:
                points = [(float(n), np.quantile(_steps(cell, column), 0.5, method="inverted_cdf"))
                          for (n,), cell in summary.split([r for r in rows_ if _same_cell(r, part[0], names)],
                                                          ["n"]).items()]
                ax.plot([n for n, _ in points], [m if np.isfinite(m) else np.nan for _, m in points], "--",
                        color=colour, lw=1)
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
                          f"axes; legend: Tobit-fitted exponent of n"
                          + (f"; dashed: median steps to test {loose[0][0]}" if loose else "")
                          + "; triangles at the budget: share of censored "
                          f"trials (size); {summary.trials_text([len(v) for v in summary.split(trials, ['family', 'k', *extra, 'c', 'n']).values()])}")
    files = summary.save(fig, stem)
    first = {(r["cell"], r["replicate"]) for r in trials if r["init"] == trials[0]["init"]}
    return files + _mechanism_plot([r for r in rows if (r["cell"], r["replicate"]) in first],
                                   [r for r in trials if (r["cell"], r["replicate"]) in first], stem)


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
           "records_per_doubling": 8, "eps": 0.05, "init": "he"},
    full={"family": ["parity", "junta"], "n": [8, 16, 32, 64, 128, 256], "k": [2, 3, 4, 5],
          "c": [0.0, 0.05, 0.1, 0.2, 0.3], "optimizer": "sgd", **BARAK, "max_steps": 2**18, "eval_every": 8,
          "records_per_doubling": 16, "eps": 0.05, "init": list(INITS)},
    static=("family", "n", "optimizer", "records_per_doubling", *(b for b in STATIC_TRAINING if b != "max_steps")),
    bounds=("k", "max_steps"),
    choices={"init": tuple(INITS)},
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
        "steps": "first record with test error 0 (-1: not within max_steps); the trial stops there (the "
                 "strictest criterion)",
        "learned": "1 if steps >= 0",
        "steps_eps": "first record with test error <= eps (the cell's eps; -1: not within max_steps), from the same "
                     "training as steps, so steps_eps <= steps where both are >= 0",
        "learned_eps": "1 if steps_eps >= 0",
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
    shared=("family", "optimizer", "init", "eps"),
    parameters={
        "family": "the targets: parity (a k-parity on a random k-subset) or junta (a random non-degenerate k-junta)",
        "k": "the size of the target's support",
        "c": "the smoothing: p_i = 1/2 + U[-c, c] per trial (0: uniform)",
        "optimizer": "sgd or adam (lr is the step size of either)",
        "max_steps": "the step budget (a multiple of eval_every; traced: one program serves every budget); a trial "
                     "stops earlier at its first record with test error 0",
        "eval_every": "K: the first record is at step K; records come on a geometric schedule from there",
        "records_per_doubling": "records per doubling of the step count (resolution 2^(1/r) - 1)",
        "test_size": f"fresh test examples when n > {EXACT_MAX_N} (else the error is exact over {{0,1}}^n); "
                     f">= {RESOLVING_TEST_SIZE:,} resolve an error of 0.05 to +/- 0.01",
        "eps": "the second success criterion: test error <= eps (steps_eps), read from the same training",
        "init": "he: first layer N(0, 2/n), LeCun output with a bias; lecun-nobias: N(0, 1/n), no output bias",
        "lr": "the learning rate",
        "width": "the hidden layer's width",
        "batch_size": "examples per step (fresh every step: online)",
        "loss": "hinge, logistic or square (of the margin)",
    },
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


def _exponents(rows, by, column="steps") -> dict:
    """Per group: the slope a of log(median steps) ~ a log(n) + b over the n whose median is not
    censored (:func:`jaxtrees.experiments.analysis.median_fit`), and those n."""
    out = {}
    for key, sel in summary.split(rows, by).items():
        s = _steps(sel, column)
        x = np.log([float(r["n"]) for r in sel])
        fit = analysis.median_fit(x, np.log(np.where(np.isfinite(s), s, 1.0)), ~np.isfinite(s))
        if fit.converged:
            out[key] = (fit.slope, [round(math.exp(v)) for v in fit.xs])
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
