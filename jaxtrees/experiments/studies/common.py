"""What the built-in studies share: trial keys, the sample-size grid and learning on its prefixes.

Studies use these helpers and never each other's private ones.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxtrees.core import checks, sampling
from jaxtrees.core.impurity import BUILTIN as IMPURITIES
from jaxtrees.hypotheses import tree
from jaxtrees.learners import GreedyTree, GrowthRule


def trial_keys(key, *names: str) -> dict:
    """The keys of one trial, one per named use: ``dict(zip(names, jax.random.split(key, len(names))))``.

    Every study derives its keys here, so that studies drawing the same things in the same
    order (e.g. ``"distribution", "target", "sample"``) see the same p and f for the same trial key.
    """
    return dict(zip(names, jax.random.split(key, len(names))))


#: Exact errors at most this count as 0.
SUCCESS_TOL = 1e-6
#: Marginals are rounded to multiples of 2^-16 (by at most 2^-17) and sampled exactly.
PRECISION_BITS = 16


def sample_sizes(params) -> list[int]:
    """The m-grid: powers of two from m_min to m_max."""
    m, out = params["m_min"], []
    while m <= params["m_max"]:
        out.append(m)
        m *= 2
    return out


def learn_on_prefixes(key, p, f, n, depth, params):
    """Grow on every prefix of one sample; exact error (and features used) per m.

    ``p`` must be on the grid of multiples of 2^-PRECISION_BITS (:func:`jaxtrees.core.sampling.quantize`): the
    sample is drawn exactly from it with the dyadic sampler (PRECISION_BITS random words per 32
    examples instead of 32) and trees are scored exactly against it. The m-grid is a
    ``lax.map`` (one tree at a time per trial), so memory holds one tree's node bitsets per trial,
    not one per m."""
    ms = jnp.asarray(sample_sizes(params))
    learner = GreedyTree(GrowthRule(max_depth=depth, impurity=params["impurity"]))
    sample = sampling.draw(key, p, f, params["m_max"], precision_bits=PRECISION_BITS)

    fit_key = jax.random.fold_in(key, 2)  # read only by random tie-breaks (gd-vs-id3 trains on fold_in(key, 1))

    def at(m):
        t = learner.fit(fit_key, sampling.prefix(sample, m))
        return t.exact_error(p, f), tree.features_used(t, n)

    return jax.lax.map(at, ms)


def bytes_per_trial(n):
    """Peak memory of one trial: the packed sample (n feature rows, labels, valid mask: (n + 2)
    m_max / 32 words), twice (the random words are made inside the sampler's loop, node bitsets
    and counts are smaller). Compiled temporaries measured 4.0 MiB per trial at n = 64,
    m_max = 2^18, where this gives 4.1 MiB."""
    return lambda params: 2 * 4 * (n(params) + 2) * params["m_max"] // 32


def check_sample_grid(params, n):
    checks.choice("impurity", params["impurity"], IMPURITIES)
    m_min = checks.integer("m_min", params["m_min"], low=1)
    m_max = checks.integer("m_max", params["m_max"], low=m_min, high=2**24)
    if m_max & (m_max - 1) or m_min & (m_min - 1):
        raise ValueError(f"m_min and m_max must be powers of two, got {m_min} and {m_max}")
    if n * m_max > 2**31:
        raise ValueError(f"n * m_max must be <= 2^31 (sample bits per trial), got {n} * {m_max}")
