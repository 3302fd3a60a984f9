"""``gd-scaling``: the open question at scale: how SGD's steps to learn k-parities / k-juntas grow with n, k and c.

The trial (one network per trial, online, geometric records, a stop at test error 0; ``max_steps``,
``k``, ``init`` and the target ``family`` traced) and the study's declaration; the report and figures are in
:mod:`~jaxtrees.experiments.studies.gd_scaling_report`, its fits in
:mod:`~jaxtrees.experiments.studies.gd_scaling_fits`. What the columns and criteria mean, and how the
CPU size was chosen: docs/gd-notes.md.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxtrees import targets
from jaxtrees.core import checks, distributions
from jaxtrees.experiments.study import Compile, Study
from jaxtrees.experiments.studies.common import chosen
from jaxtrees.experiments.study.trials import trial_keys
from jaxtrees.experiments.studies.gd_common import BARAK, EXACT_MAX_N, STATIC_TRAINING, check_training, train_config
from jaxtrees.experiments.studies.gd_scaling_report import RESOLVING_TEST_SIZE, scaling_plot, scaling_report
from jaxtrees.learners import sgd


#: The target families of gd-scaling: a k-parity on a random k-subset, a random non-degenerate k-junta
#: (k traced, padded to k_max: one program for every k); both are padded juntas (the parity by
#: :meth:`~jaxtrees.targets.MaskParity.padded`, the same labels), so one program serves both families (the
#: trial chooses by the family's traced index).
FAMILIES = {"parity": lambda key, n, k, k_max: targets.MaskParity(targets.random_subset(key, n, k)).padded(k, k_max),
            "junta": lambda key, n, k, k_max: targets.random_junta(key, n, k, k_max=k_max)}
#: Optimizers of gd-scaling (``lr`` is the step size of either).
OPTIMIZERS = {"sgd": optax.sgd, "adam": optax.adam}
#: One random subset or junta per trial: its largest k (2^k truth table, C(n, k) supports).
SCALING_MAX_K = 12
#: Bytes of the encoded test inputs one scoring pass holds per input bit (sgd.EVAL_CHUNK rows of float32).
EVAL_BYTES = sgd.EVAL_CHUNK * 4
#: Initialisations of gd-scaling's network (its ``init`` parameter): name -> (g, output bias): first-layer
#: weights N(0, g / n), and whether the output layer has a bias (trained; without one it stays 0). Both
#: have a LeCun N(0, 1 / width) output layer and hidden biases that start at 0. "he" is
#: :func:`jaxtrees.learners.sgd.mlp`'s ReLU default; "lecun-nobias" the other common choice. Both
#: scale the same normal draws, so cells that differ only in init (a shared parameter) start from
#: proportional first layers and see the same data.
INITS = {"he": (2.0, True), "lecun-nobias": (1.0, False)}
#: The CPU size of issue 38's report: ``jaxtrees run gd-scaling --quick`` with these ``--set`` values
#: (parities, k <= 4, n <= 128, four c, both initialisations, 32 trials per cell, budget 2^18 steps
#: with a stop at test error 0; 2 x 3 x 4 x 5 = 120 cells, 3,840 trials, 5 programs; its run and report:
#: docs/gd-scaling-cpu-report.md).
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
    """Open Question 1 at scale: SGD steps to learn k-parities / k-juntas vs n, k and c, exponents of n and 1/c (Tobit
    fits), and how the support separates"""
    n, k = params["n"], params["k"]
    keys = trial_keys(key, "distribution", "target", "training")  # as gd-smoothed: the same p, J and run
    p = distributions.Smoothed(jnp.float32(0.5), params["c"]).marginals(keys["distribution"], n)
    f = chosen(params, "family", lambda family: FAMILIES[family](keys["target"], n, k, params["k_max"]))
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
    check_training(params)
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


#: The columns of gd-scaling's rows.
SCALING_COLUMNS = {
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
    "influence_min": "min over the support J of |I(D, j)| = |E[f x_j] - E[f] E[x_j]| (exact, 000 Sec. 2.1)",
    "influence_max": "max over J of |I(D, j)|",
    "separated_first": "first record from which some j in J has ||W1[j]||_2 above every off-support row "
                       "norm at every later record (-1: none)",
    "separated_all": "the same for every j in J: the step by which the whole support separated (-1: not)",
    "norm_on": "mean over J of ||W1[j]||_2 at this step (NaN: the trial had stopped)",
    "norm_off": "mean over the coordinates off J of ||W1[i]||_2 at this step (NaN: stopped)",
}

#: What gd-scaling's parameters mean.
SCALING_PARAMETERS = {
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
}

GD_SCALING = Study(
    name="gd-scaling",
    trial=_scaling_trial,
    grid=({"family": ["parity", "junta"], "n": [8, 16, 32], "k": [2, 3], "c": [0.0, 0.1, 0.3],
           "optimizer": "sgd", **{**BARAK, "test_size": 2048}, "max_steps": 16384, "eval_every": 8,
           "records_per_doubling": 8, "eps": 0.05, "init": "he"},
          {"family": ["parity", "junta"], "n": [8, 16, 32, 64, 128, 256], "k": [2, 3, 4, 5],
           "c": [0.0, 0.05, 0.1, 0.2, 0.3], "optimizer": "sgd", **BARAK, "max_steps": 2**18, "eval_every": 8,
           "records_per_doubling": 16, "eps": 0.05, "init": list(INITS)}),
    replicates=(8, 32),
    static=("n", "optimizer", "records_per_doubling", *(b for b in STATIC_TRAINING if b != "max_steps")),
    shared=("family", "optimizer", "init", "eps"),
    axis=("step", checkpoints),
    meanings={**SCALING_PARAMETERS, **SCALING_COLUMNS},
    check=_scaling_check, plot=scaling_plot, report=scaling_report,
    compile=Compile(bounds=("k", "max_steps"), uniform=("family",),
                    choices={"family": tuple(FAMILIES), "init": tuple(INITS)}, bytes_per_trial=_scaling_bytes),
)

