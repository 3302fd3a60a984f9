"""002's addressing targets cell by cell: the recorded depths, the horizon, the code and Lemma 14's constants.

What the ``addressing`` and ``agnostic`` trials (:mod:`~jaxtrees.experiments.studies.counterexamples`) and their
reports (:mod:`~jaxtrees.experiments.studies.counterexamples_report`) both read from a cell's parameters.
"""

from __future__ import annotations

import functools
import math

from jaxtrees import targets
from jaxtrees.experiments.studies import theory

CODES = ("block", "coded")


def depths(params) -> list[int]:
    """Depths at which the truncated error is recorded: 0 and fractions 1/8 .. 1 of the horizon."""
    horizon = _horizon(params)
    return sorted({0, *(round(horizon * f) for f in (1 / 8, 1 / 4, 1 / 2, 3 / 4, 1))})


def lemma14(params) -> dict:
    """The constants of 002 Lemma 14 for this cell: delta, c_0 = ln 5 / delta, and for Gini
    (an (alpha, L)-impurity with alpha = L = 8) kappa and k_0 = ln(2 kappa) / ln(5/4) + 1. A coded cell
    (f_{c,k,S}) adds Lemmas 16-17's condition: ``distance`` (its code's), ``distance_needed`` = (ln 5 / delta) k
    and ``distance_ok``; there Lemma 17 (not Lemma 14) applies when k >= k_0 and the distance suffices."""
    delta = 0.5 - params["s"]
    out = {"delta": delta, "c0": float(theory.lemma14_c0(delta)), "kappa": None, "k0": None, "applies": False}
    coded = params.get("code", "block") == "coded"
    if coded:
        distance = code_distance(params["k"], params["c"] * params["k"])
        needed = float(theory.lemma16_distance(params["k"], delta))
        out.update(distance=distance, distance_needed=needed, distance_ok=distance >= needed)
    if params["impurity"] == "gini":
        kappa = float(theory.lemma8_kappa(delta))  # G(q) = 4 q (1 - q): alpha = L = 8
        out.update(kappa=kappa, k0=float(theory.lemma14_k0(kappa)))
        if coded:
            out["applies"] = bool(out["distance_ok"]) and params["k"] >= out["k0"]
        else:
            out["applies"] = params["c"] >= out["c0"] and params["k"] >= out["k0"]
    return out


@functools.lru_cache(maxsize=None)
def code_distance(k: int, length: int) -> int:
    """The distance of :func:`best_code` (k, length): min over non-empty I of |symmetric difference of S_i, i in I|."""
    return targets.code_distance(best_code(k, length))


def target_depth(params) -> int:
    """The depth of a tree computing the cell's target: c k^2 + 1 (block) or c k + 1 (coded) (002 Secs. 4-5)."""
    return params["c"] * params["k"] ** (2 if params.get("code", "block") == "block" else 1) + 1


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
        return n_free(params)
    return 2 ** params["k"]


def n_free(params):
    eps, size = params["eps"], 2 ** params["k"]
    return int(math.floor(eps * size / 2)) // 2 * 2
