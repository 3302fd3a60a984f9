"""What the built-in studies share: trial keys, the sample-size grid and learning on its prefixes.

Studies use these helpers and never each other's private ones.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxtrees.core import checks, prng, sampling
from jaxtrees.core.impurity import BUILTIN as IMPURITIES
from jaxtrees.core import impurity as impurity_lib
from jaxtrees.core.impurity import NAMES as IMPURITY_NAMES
from jaxtrees.experiments import table as tables
from jaxtrees.hypotheses import tree
from jaxtrees.learners import GrowthRule
from jaxtrees.learners.base import check_data
from jaxtrees.learners.greedy import grow


def trial_keys(key, *names: str) -> dict:
    """The keys of one trial, one per named use: ``dict(zip(names, jax.random.split(key, len(names))))``.

    Every study derives its keys here, so that studies drawing the same things in the same
    order (e.g. ``"distribution", "target", "sample"``) see the same p and f for the same trial key.
    """
    return dict(zip(names, prng.split(key, len(names))))


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


def learn_on_prefixes(key, p, f, n, depth, params, max_depth: int | None = None):
    """Grow on every prefix of one sample; exact error (and features used) per m.

    ``p`` must be on the grid of multiples of 2^-PRECISION_BITS (:func:`jaxtrees.core.sampling.quantize`): the
    sample is drawn exactly from it with the dyadic sampler (PRECISION_BITS random words per 32
    examples instead of 32) and trees are scored exactly against it. The m-grid runs through
    :func:`on_prefixes` (one tree at a time per trial), so memory holds one tree's node bitsets
    per trial, not one per m. ``params["impurity"]`` is a name, or (traced) its index in
    ``params["impurity_choices"]`` (:func:`impurity`); with ``max_depth`` (static) ``depth`` may be
    traced (<= max_depth): trees are grown in arrays of max_depth and stop at depth, the same trees
    as at max_depth = depth."""
    name, traced = impurity(params)
    rule = GrowthRule(max_depth=depth if max_depth is None else max_depth, impurity=name)
    sample = sampling.draw(key, p, f, params["m_max"], precision_bits=PRECISION_BITS)

    fit_key = jax.random.fold_in(key, 2)  # read only by random tie-breaks (gd-vs-id3 trains on fold_in(key, 1))

    def at(data):
        check_data(data)
        t = grow(data, rule, fit_key, depth=None if max_depth is None else depth, impurity=traced)
        return t.exact_error(p, f), tree.features_used(t, n)

    return on_prefixes(at, sample, sample_sizes(params))


def impurity(params) -> tuple:
    """``(name, selected)``: a static impurity name for the rule, and None, or where the study traces
    it (``params["impurity"]`` an index into the program's ``params["impurity_choices"]``) and the
    program serves several, the :class:`~jaxtrees.core.impurity.Selected` that replaces it."""
    value = params["impurity"]
    if isinstance(value, str):
        return value, None
    names = params["impurity_choices"]
    if len(names) == 1:
        return names[0], None
    return names[0], impurity_lib.selected(value, names)


def chosen(params, name: str, build):
    """``build(value)`` for the cell's value of the choices parameter ``name``: built from the Python
    value where the program serves one value, else ``lax.switch`` on its traced index over the
    program's values (``params[name + "_choices"]``; every build must give the same pytree
    structure and shapes, e.g. the values of one :attr:`~jaxtrees.experiments.study.Study.buckets`
    bucket). A uniform parameter's index is the same for a vmapped group, so one branch runs."""
    value = params[name]
    if isinstance(value, str):
        return build(value)
    options = params[f"{name}_choices"]
    if len(options) == 1:
        return build(options[0])
    return jax.lax.switch(value, [lambda option=option: build(option) for option in options])


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


def bytes_per_trial(n):
    """Peak memory of one trial: the packed sample (n feature rows, labels, valid mask: (n + 2)
    m_max / 32 words), twice (the random words are made inside the sampler's loop, node bitsets
    and counts are smaller). Compiled temporaries measured 4.0 MiB per trial at n = 64,
    m_max = 2^18, where this gives 4.1 MiB."""
    return lambda params: 2 * 4 * (n(params) + 2) * params["m_max"] // 32


def check_sample_grid(params, n):
    checks.choice("impurity", params["impurity"], IMPURITIES)
    m_min = checks.integer("m_min", params["m_min"], low=1)
    m_max = checks.integer("m_max", params["m_max"], low=1, high=2**24)
    if m_min > m_max:
        raise ValueError(f"m_min must be <= m_max, got m_min = {m_min} and m_max = {m_max}")
    if m_max & (m_max - 1) or m_min & (m_min - 1):
        raise ValueError(f"m_min and m_max must be powers of two, got {m_min} and {m_max}")
    if n * m_max > 2**31:
        raise ValueError(f"n * m_max must be <= 2^31 (sample bits per trial), got {n} * {m_max}")


# ----------------------------------------------------------------------------- result tables
# Small group-bys the studies' plots and reports share, over a
# :class:`~jaxtrees.experiments.table.Table` (vectorized: no Python object per row).


def keyed(groups, by) -> dict:
    """The dicts of :func:`~jaxtrees.experiments.table.rates` / ``means`` by their ``by`` values (a tuple)."""
    return {tuple(g[name] for name in by): g for g in groups}


def _values(rows, values) -> np.ndarray:
    return np.asarray(rows[values] if isinstance(values, str) else values)


def at_max(rows, by, column: str):
    """The rows whose ``column`` equals its largest value in their group of ``by`` (e.g. each
    cell's rows at its largest m), as a :class:`~jaxtrees.experiments.table.Table`.

    >>> t = tables.Table({"c": [0, 0, 1, 1], "m": [16, 32, 16, 64]})
    >>> at_max(t, ["c"], "m")["m"].tolist()
    [32, 64]
    """
    v = _values(rows, column)
    codes, _, top = _maxima(rows, by, v)
    return rows.take(v == top[codes])


def group_max(rows, by, values) -> dict:
    """Per group of ``by``: the largest of ``values`` (a column name, or an array over the rows) as a
    Python value, groups sorted."""
    _, keys, top = _maxima(rows, by, _values(rows, values))
    return dict(zip(keys, top.tolist()))


def _maxima(rows, by, v: np.ndarray):
    """``(codes, keys, top)``: :func:`~jaxtrees.experiments.table.groups` and each group's largest value."""
    codes, keys = tables.groups(rows, by)
    if not len(v):
        return codes, [], v[:0]
    top = np.empty(len(keys), v.dtype)
    top[codes] = v  # a value of each group, then the largest (NaN where the group has one)
    np.maximum.at(top, codes, v)
    return codes, keys, top


def group_sums(rows, by, values) -> dict:
    """Per group of ``by``: ``(sum, count)`` of ``values`` (a column name, or an array over the rows)
    as float64, summed in row order (as Python's ``sum`` over the rows), groups sorted."""
    codes, keys = tables.groups(rows, by)
    v = np.asarray(_values(rows, values), np.float64)
    sums = np.bincount(codes, v, minlength=len(keys)).tolist()
    counts = np.bincount(codes, minlength=len(keys)).tolist()
    return {key: (s, n) for key, s, n in zip(keys, sums, counts) if n}
