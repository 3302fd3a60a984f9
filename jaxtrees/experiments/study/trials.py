"""The building blocks of a trial: named keys, the m-grid, learning on every prefix of one sample, the grid's checks.

A study's trial is a pure ``trial(key, params) -> {output: array}`` that the runner vmaps and jits; the built-in
studies (:mod:`jaxtrees.experiments.studies`) are made of these pieces, and so can a researcher's own:

>>> import jax, jaxtrees as jt
>>> from jaxtrees.experiments.study import trials
>>> params = {"m_min": 16, "m_max": 256}
>>> trials.check_sample_grid(params, n=16)
>>> trials.sample_sizes(params)
[16, 32, 64, 128, 256]
>>> def trial(key, params):
...     keys = trials.trial_keys(key, "distribution", "target", "sample")
...     p = jt.quantize(jt.smoothed(c=0.1).marginals(keys["distribution"], 16), trials.PRECISION_BITS)
...     f = jt.random_junta(keys["target"], n=16, k=3)
...     error, used = trials.learn_on_prefixes(keys["sample"], p, f, 16, 3, params, noise=0.05, impurity="gini")
...     return {"exact_error": error, "success": error <= trials.SUCCESS_TOL}
>>> out = jax.jit(jax.vmap(lambda key: trial(key, params)))(jax.random.split(jax.random.key(0), 8))
>>> out["exact_error"].shape                         # 8 trials, one exact error per m
(8, 5)
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxtrees.core import checks, prng, sampling
from jaxtrees.core import impurity as impurity_lib
from jaxtrees.core.impurity import BUILTIN as IMPURITIES
from jaxtrees.hypotheses import tree
from jaxtrees.learners import GrowthRule
from jaxtrees.learners.base import check_data
from jaxtrees.learners.greedy import grow

#: Exact errors at most this count as 0.
SUCCESS_TOL = 1e-6
#: Marginals are rounded to multiples of 2^-16 (by at most 2^-17) and sampled exactly.
PRECISION_BITS = 16
#: The largest m_max of :func:`check_sample_grid`.
MAX_M = 2**24
#: The impurity :func:`learn_on_prefixes` grows with where neither its argument nor ``params`` names one.
DEFAULT_IMPURITY = "entropy"


def trial_keys(key, *names: str) -> dict:
    """The keys of one trial, one per named use: ``dict(zip(names, jax.random.split(key, len(names))))``.

    Every study derives its keys here, so that studies drawing the same things in the same
    order (e.g. ``"distribution", "target", "sample"``) see the same p and f for the same trial key.

    >>> sorted(trial_keys(jax.random.key(0), "target", "sample"))
    ['sample', 'target']
    """
    return dict(zip(names, prng.split(key, len(names))))


def sample_sizes(params) -> list[int]:
    """The m-grid: powers of two from ``params["m_min"]`` to ``params["m_max"]``.

    >>> sample_sizes({"m_min": 16, "m_max": 128})
    [16, 32, 64, 128]
    >>> sample_sizes({"m_min": 1024, "m_max": 16})
    Traceback (most recent call last):
    ...
    ValueError: m_min must be <= m_max (the m-grid runs m_min, 2 m_min, ..., m_max), got m_min = 1024 and m_max = 16
    >>> sample_sizes({"m_min": 16, "m_max": 1000})
    Traceback (most recent call last):
    ...
    ValueError: m_max must be m_min times a power of two (the m-grid runs m_min, 2 m_min, ..., m_max), got m_min = 16 and m_max = 1000
    """
    m, out = params["m_min"], []
    if not m >= 1:
        raise ValueError(f"m_min must be >= 1 (the m-grid runs m_min, 2 m_min, ..., m_max), got m_min = {m}")
    if m > params["m_max"]:
        raise ValueError(f"m_min must be <= m_max (the m-grid runs m_min, 2 m_min, ..., m_max), got m_min = {m} and "
                         f"m_max = {params['m_max']}")
    while m <= params["m_max"]:
        out.append(m)
        m *= 2
    if out[-1] != params["m_max"]:  # else the grid would stop short of m_max without a word
        raise ValueError(f"m_max must be m_min times a power of two (the m-grid runs m_min, 2 m_min, ..., m_max), got "
                         f"m_min = {params['m_min']} and m_max = {params['m_max']}")
    return out


def learn_on_prefixes(key, p, f, n, depth, params, max_depth: int | None = None, *, noise=None, impurity=None):
    """Grow on every prefix of one sample; exact error (and features used) per m: ``(float32[len(grid)],
    bool[len(grid), n])`` for the m-grid :func:`sample_sizes` of ``params`` (its ``m_min``, ``m_max``).

    ``p`` must be on the grid of multiples of 2^-PRECISION_BITS (:func:`jaxtrees.core.sampling.quantize`): the
    sample is drawn exactly from it with the dyadic sampler (PRECISION_BITS random words per 32
    examples instead of 32) and trees are scored exactly against it. The m-grid runs through
    :func:`on_prefixes` (one tree at a time per trial), so memory holds one tree's node bitsets
    per trial, not one per m. With ``max_depth`` (static) ``depth`` may be traced (<= max_depth): trees
    are grown in arrays of max_depth and stop at depth, the same trees as at max_depth = depth.

    ``noise``: a label-noise rate eta (a float or a traced scalar in [0, 1], rounded to a multiple of
    2^-PRECISION_BITS): each training label is flipped independently with probability eta; the exact error
    stays against the clean ``f``. ``impurity``: the impurity to grow with (a built-in's name, or anything
    :class:`~jaxtrees.learners.GrowthRule` takes), replacing ``params["impurity"]``; without it
    ``params["impurity"]`` is a name, or (traced) its index in ``params["impurity_choices"]`` (:func:`impurity_of`),
    and without that :data:`DEFAULT_IMPURITY`. ``noise=None, impurity=None`` compute what they always have.
    """
    name, traced = impurity_of(params) if impurity is None else (impurity, None)
    rule = GrowthRule(max_depth=depth if max_depth is None else max_depth, impurity=name)
    if noise is None:
        sample = sampling.draw(key, p, f, params["m_max"], precision_bits=PRECISION_BITS)
    else:
        sample = sampling.draw(key, p, f, params["m_max"], _rate(noise), precision_bits=PRECISION_BITS)

    fit_key = jax.random.fold_in(key, 2)  # read only by random tie-breaks (gd-vs-id3 trains on fold_in(key, 1))

    def at(data):
        check_data(data)
        t = grow(data, rule, fit_key, depth=None if max_depth is None else depth, impurity=traced)
        return t.exact_error(p, f), tree.features_used(t, n)

    return on_prefixes(at, sample, sample_sizes(params))


def _rate(noise):
    """A concrete array scalar as a Python float (the sampler checks Python numbers), else ``noise`` unchanged."""
    if hasattr(noise, "dtype") and checks.is_concrete(noise):
        if np.ndim(noise) != 0:
            raise ValueError(f"noise must be a scalar rate in [0, 1], got shape {np.shape(noise)}")
        return float(noise)
    return noise


def impurity_of(params) -> tuple:
    """``(name, selected)``: a static impurity name for the rule, and None, or where the study traces
    it (``params["impurity"]`` an index into the program's ``params["impurity_choices"]``) and the
    program serves several, the :class:`~jaxtrees.core.impurity.Selected` that replaces it. Without
    ``params["impurity"]``: ``(DEFAULT_IMPURITY, None)``.

    >>> impurity_of({"impurity": "gini"}), impurity_of({})
    (('gini', None), ('entropy', None))
    """
    value = params.get("impurity", DEFAULT_IMPURITY)
    if isinstance(value, str):
        return value, None
    names = params["impurity_choices"]
    if len(names) == 1:
        return names[0], None
    return names[0], impurity_lib.selected(value, names)


#: :func:`prefix_widths` cuts the m-grid at m_max / 4 and m_max / 16 where the cut is at least
#: this many examples: below it a fit is cheap and one more compiled fit costs more than it saves.
SPLIT_WIDTH = 2**12


def prefix_widths(grid, split_width: int | None = None) -> list[tuple[int, list[int]]]:
    """The m-grid (ascending) as runs ``[(width, ms)]``, each fitted on the first ``width`` examples.

    A fit on ``prefix(sample, m)`` costs what a fit on the whole sample costs (the prefix is a
    mask over the same words), so a grid of powers of two up to m_max run at width m_max costs
    len(grid) fits at m_max. Cut at m_max / 4 and m_max / 16 (cuts below ``split_width`` are not
    made; default :data:`SPLIT_WIDTH`), the two largest m run at m_max, the next two at m_max / 4
    and the rest at m_max / 16: at most 2 + 2 / 4 + (len(grid) - 4) / 16 fits' worth, for one more
    compiled fit per cut.

    >>> prefix_widths([16, 32, 64, 128, 256, 512, 1024], split_width=64)
    [(64, [16, 32, 64]), (256, [128, 256]), (1024, [512, 1024])]
    >>> prefix_widths([16, 32, 64, 128, 256, 512, 1024])  # m_max / 4 < SPLIT_WIDTH: one run
    [(1024, [16, 32, 64, 128, 256, 512, 1024])]
    """
    split_width = SPLIT_WIDTH if split_width is None else split_width
    top = grid[-1]
    cuts = [w for w in (top // 4, top // 16) if w >= split_width and w > grid[0]]
    runs, upper = [], top
    for cut in cuts + [0]:
        ms = [m for m in grid if cut < m <= upper]
        if ms:
            runs.append((upper, ms))
        upper = cut
    return runs[::-1]


def on_prefixes(fit, sample, grid, split_width: int | None = None):
    """``fit(prefix)`` on the first m examples of ``sample`` for each m of ``grid``, outputs stacked
    along a leading grid axis: a ``lax.map`` over the m of each run of :func:`prefix_widths`, on the
    run's first ``width`` examples (:func:`jaxtrees.core.sampling.head`). The same outputs as
    ``lax.map`` over ``prefix(sample, m)`` (the fit sees the same examples), at a fraction of the cost."""
    outs = [jax.lax.map(lambda m, part=sampling.head(sample, width): fit(sampling.prefix(part, m)), jnp.asarray(ms))
            for width, ms in prefix_widths(list(grid), split_width)]
    return jax.tree.map(lambda *runs: jnp.concatenate(runs), *outs)


def check_sample_grid(params, n: int) -> None:
    """Raise ValueError, naming the parameter and its allowed range, unless ``params["m_min"]`` and
    ``params["m_max"]`` are powers of two with m_min <= m_max <= min(2^24, 2^31 / n) (n bits per example), and
    ``params["impurity"]``, where present, is a built-in impurity's name.

    >>> check_sample_grid({"m_min": 16, "m_max": 1000}, n=16)
    Traceback (most recent call last):
    ...
    ValueError: m_max must be one of the powers of two 1, 2, 4, ..., 2^24, got m_max = 1000
    """
    if "impurity" in params:
        checks.choice("impurity", params["impurity"], IMPURITIES)
    missing = [name for name in ("m_min", "m_max") if name not in params]
    if missing:
        raise ValueError(f"params must hold m_min and m_max (the m-grid: powers of two, 1 <= m_min <= m_max <= 2^24), "
                         f"missing {', '.join(missing)}")
    m_min = checks.integer("m_min", params["m_min"], low=1)
    m_max = checks.integer("m_max", params["m_max"], low=1, high=MAX_M)
    if m_min > m_max:
        raise ValueError(f"m_min must be <= m_max, got m_min = {m_min} and m_max = {m_max}")
    for name, m in (("m_min", m_min), ("m_max", m_max)):
        if m & (m - 1):
            raise ValueError(f"{name} must be one of the powers of two 1, 2, 4, ..., 2^24, got {name} = {m}")
    if n * m_max > 2**31:
        raise ValueError(f"m_max must be <= 2^31 / n = {2**31 // n} for n = {n} (n * m_max sample bits per trial "
                         f"<= 2^31), got m_max = {m_max}")


def exact_invariants(rows) -> dict:
    """A :class:`~jaxtrees.experiments.study.Study`'s ``invariants`` for rows holding ``exact_error`` and ``success``
    (``exact_error <= SUCCESS_TOL``, compared in float32 as the trial does): a probability, and success exactly there."""
    error = np.asarray(rows["exact_error"], np.float32)
    return {"0 <= exact_error <= 1": (error >= 0) & (error <= np.float32(1 + 2**-20)),  # float32 sums of leaf errors
            f"success exactly where exact_error <= {SUCCESS_TOL:g}":
                (np.asarray(rows["success"]) != 0) == (error <= np.float32(SUCCESS_TOL))}
