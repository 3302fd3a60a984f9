"""The addressing counterexamples of 002, in path mode (exact gains, no samples).

Each trial follows one input's path in the infinite-sample tree under a c-smoothed distribution
(:func:`jaxtrees.learners.population.follow_path`): ``addressing`` (002 Thm 3, Lemma 14: f_{c,k} and
f_{c,k,S}) and ``agnostic`` (002 Thm 4: f_pi). What each measures per path: docs/studies.md. The figures and reports:
:mod:`~jaxtrees.experiments.studies.counterexamples_report`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxtrees import targets
from jaxtrees.core import checks, distributions
from jaxtrees.core.impurity import BUILTIN as IMPURITIES
from jaxtrees.core.impurity import NAMES as IMPURITY_NAMES
from jaxtrees.experiments.study import Compile, Study
from jaxtrees.experiments.studies.addressing_cells import CODES, best_code, depths
from jaxtrees.experiments.studies.addressing_cells import n_free as _n_free
from jaxtrees.experiments.study.trials import trial_keys
from jaxtrees.experiments.study.trials import impurity_of as impurity
from jaxtrees.experiments.studies.counterexamples_report import (addressing_plot, addressing_report, agnostic_plot,
                                                                 agnostic_report)
from jaxtrees.learners import growth, population


def _target(params):
    k, c = params["k"], params["c"]
    if params.get("code", "block") == "block":
        return targets.addressing(c, k)
    return targets.coded_addressing(best_code(k, c * k))


def _follow(key, f, params, depth):
    keys = trial_keys(key, "distribution", "input")
    kp, kx = keys["distribution"], keys["input"]
    p = distributions.Smoothed(jnp.float32(0.5), params["s"]).marginals(kp, f.n)
    name, traced = impurity(params)  # traced: one program for every impurity of the grid
    rule = growth.GrowthRule(max_depth=depth, impurity=name, tie_tol=0.0)
    x = jax.random.bernoulli(kx, p)
    path = population.follow_path(p, f, rule, x, impurity=traced)
    address = jnp.arange(f.n) < f.n_address
    first = path.first_query(address)
    free_memory = ~address & ~jnp.concatenate([jnp.zeros(f.n_address, bool), f.pinned])
    before = jnp.arange(depth) < jnp.where(first < 0, depth, first)
    queried = path.feature >= 0
    memory_before = jnp.sum(free_memory[jnp.maximum(path.feature, 0)] & queried & before)
    error = path.error[jnp.asarray(depths(params))]
    gains = _gini_gains(p, f, x, path, first, address, free_memory, params)
    return p, first, memory_before, error, gains


def _gini_gains(p, f, x, path, first, address, free_memory, params) -> dict:
    """002 Lemma 14's two gains at each recorded depth d of the path (:func:`depths`) whose restriction (the path's
    first d queries) holds memory bits only and fewer than 2^k of them: the smallest Gini gain (G(q) = 4 q (1 - q),
    an (8, 8)-impurity) of a free memory bit outside the restriction (>= 2^(-2k) / (4 kappa) by the proof) and the
    largest of an addressing bit (<= kappa (2/5)^(2k)); NaN at the other depths. Gini's whatever the path's
    impurity: the lemma bounds these gains for any memory-only restriction."""
    n, D = f.n, path.feature.shape[0]
    position = jnp.full(n, D, jnp.int32).at[jnp.where(path.feature >= 0, path.feature, n)].min(
        jnp.arange(D, dtype=jnp.int32), mode="drop")  # the depth at which each feature is queried (D: never)
    at = jnp.asarray(depths(params), jnp.int32)

    def gains(d):
        fixed = position < d
        mu, mu1 = f.means(p, fixed, x)
        q = jnp.clip(p, 1e-12, 1 - 1e-12)
        # Gini's gain G(mu) - q G(mu1) - (1 - q) G(mu0), G(t) = 4 t (1 - t), is exactly 4 q (1 - q) (mu1 - mu0)^2 =
        # 4 q (mu1 - mu)^2 / (1 - q): no difference of impurities near 1, whose float32 rounding (~1e-7) would
        # swamp an addressing bit's gain (<= kappa (2/5)^(2k): 1.5e-8 at k = 10)
        gain = 4.0 * q * (mu1 - mu) ** 2 / (1 - q)
        memory = jnp.min(jnp.where(free_memory & ~fixed, gain, jnp.inf))
        addr = jnp.max(jnp.where(address & ~fixed, gain, -jnp.inf))
        ok = ((first < 0) | (d <= first)) & (d < 2 ** params["k"]) & jnp.isfinite(memory)
        return jnp.where(ok, memory, jnp.nan), jnp.where(ok, addr, jnp.nan)

    memory, addr = jax.lax.map(gains, at)
    return {"memory_gain_min": memory, "address_gain_max": addr}


def _addressing_trial(key, params):
    """002 Thm 3 / Lemma 14: f_{c,k} in exact path mode: memory bits before addressing bits, error vs depth"""
    f = _target(params)
    size = 2 ** params["k"]
    _, first, memory_before, error, gains = _follow(key, f, params, size + 1)
    return {"first_address_depth": first, "memory_first": memory_before == size, "error": error, **gains}


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
    """002 Thm 4: f_pi (eps-close to a junta) in exact path mode: free memory bits first, error vs depth"""
    keys = trial_keys(key, "target", "distribution")
    kf, kp = keys["target"], keys["distribution"]
    f = targets.agnostic_addressing(kf, targets.addressing(params["c"], params["k"]), params["eps"])
    g = targets.nearby_junta(f)
    n_free = _n_free(params)
    p, first, free_before, error, gains = _follow(kp, f, params, n_free + 1)
    none = jnp.zeros(f.n, bool)
    distance = f.means(p, none, none)[0] - g.means(p, none, none)[0]
    return {"first_address_depth": first, "free_first": free_before == n_free, "error": error,
            "distance_to_junta": distance, **gains}


def _agnostic_check(params):
    _check_common(params)
    eps = checks.real("eps", params["eps"], low=0.0, high=1.0, low_open=True)
    n_free = _n_free(params)
    if n_free == 0 or n_free < eps * 2 ** params["k"] / 4:
        raise ValueError(f"eps = {eps} with k = {params['k']} leaves no even |A^free| in "
                         f"[eps 2^(k-2), eps 2^(k-1)]; raise eps or k")


#: Output columns of the exact path-mode studies.
PATH_COLUMNS = {
    "depth": "depth d at which the path is read (0 and 1/8, 1/4, 1/2, 3/4, 1 of the horizon)",
    "error": "for x ~ p: min(mu_d, 1 - mu_d), mu_d = E[f | x's node at depth d]; its mean over paths is "
             "the exact error of the tree truncated at d",
    "first_address_depth": "depth of the path's first query of an addressing bit (-1: none within the horizon)",
    "memory_gain_min": "002 Lemma 14: the smallest Gini gain of a free memory bit under the path's first d queries "
                       "(memory bits only, fewer than 2^k; NaN otherwise)",
    "address_gain_max": "002 Lemma 14: the largest Gini gain of an addressing bit under the same restriction",
}


ADDRESSING = Study(
    name="addressing",
    trial=_addressing_trial,
    grid=({"k": [3, 4, 5, 6], "c": [1, 2, 7], "code": "block", "s": 0.25, "impurity": ["gini", "entropy"]},
          {"k": [3, 4, 5, 6, 7, 8, 10], "c": [1, 2, 4, 7], "code": ["block", "coded"], "s": [0.1, 0.25],
           "impurity": ["gini", "entropy", "kearns_mansour"]}),
    replicates=(64, 256),
    static=("k", "c", "code"),
    axis=("depth", depths),
    meanings={**PATH_COLUMNS,
              "memory_first": "1 if all 2^k memory bits are queried before the first addressing bit"},
    check=_addressing_check,
    plot=addressing_plot,
    report=addressing_report,
    compile=Compile(branches=("k", "c", "code"), uniform=("impurity",), choices={"impurity": IMPURITY_NAMES}),
)

AGNOSTIC = Study(
    name="agnostic",
    trial=_agnostic_trial,
    grid=({"k": [4, 5, 6], "c": 7, "eps": [0.5, 1.0], "s": 0.25, "impurity": "gini"},
          {"k": [4, 5, 6, 7, 8], "c": 7, "eps": [0.25, 0.5, 1.0], "s": [0.1, 0.25],
           "impurity": ["gini", "entropy", "kearns_mansour"]}),
    replicates=(64, 256),
    static=("k", "c", "eps"),
    axis=("depth", depths),
    meanings={**PATH_COLUMNS,
              "free_first": "1 if every free memory bit (A^free) is queried before the first addressing bit",
              "distance_to_junta": "Pr_{x ~ p}[f_pi(x) != g(x)], g the nearby junta (exact)"},
    check=_agnostic_check,
    plot=agnostic_plot,
    report=agnostic_report,
    # a program per k: k as a branch too made one program of 5 of 6 quick cells (15 of 19 s)
    compile=Compile(branches=("c", "eps"), uniform=("impurity",), choices={"impurity": IMPURITY_NAMES}),
)
