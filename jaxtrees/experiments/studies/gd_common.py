"""What the gradient-descent studies share: the network and training of a cell, their checks and texts.

Every gd study trains width-``width`` ReLU MLPs online (a fresh batch every step) with
:func:`jaxtrees.learners.sgd.train`; its figures and reports name the network, the optimizer and the
training from the rows' own configuration (:func:`network_text`). Notes: docs/gd-notes.md.

>>> sorted(STATIC_TRAINING)
['batch_size', 'eval_every', 'loss', 'max_steps', 'test_size', 'width']
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import optax

from jaxtrees.core import checks
from jaxtrees.experiments.report import summary
from jaxtrees.experiments import table as tables
from jaxtrees.learners import sgd

#: Barak et al. 2022: every (n, k) in {10, 20, 30} x {2, 3, 4} converged within this many steps.
BARAK_BUDGET = 100_000
#: Barak et al.'s network and training (width, batch, learning rate, loss, validation batch).
BARAK = {"width": 100, "batch_size": 32, "lr": 0.1, "loss": "hinge", "test_size": 8192}
#: Training settings a study cell may vary besides n, k and c (shown in tables when they vary).
TRAINING = ("lr", "width", "batch_size", "loss", "max_steps", "eval_every", "test_size")
#: The training settings that fix a program's shapes (static parameters).
STATIC_TRAINING = ("width", "batch_size", "loss", "max_steps", "eval_every", "test_size")
#: Exact test error over {0,1}^n up to this n (2^13 = Barak et al.'s validation batch size).
EXACT_MAX_N = 13
#: How reports and figures name an optimizer (gd-scaling's ``optimizer`` parameter).
OPTIMIZER_NAMES = {"sgd": "SGD", "adam": "Adam"}


def train_config(params) -> sgd.TrainConfig:
    """The :class:`jaxtrees.learners.sgd.TrainConfig` of a cell (online mode, SGD, eps = 0)."""
    return sgd.TrainConfig(sgd.mlp(params["width"]), loss=params["loss"], optimizer=optax.sgd,
                          steps=params["max_steps"], batch_size=params["batch_size"],
                          eval_every=params["eval_every"], mode="online", encoding="pm1",
                          test_size=params["test_size"], exact_max_n=EXACT_MAX_N, eps=0.0)


def support_share(params, mask):
    """Share of the first layer's absolute weight mass on the coordinates in ``mask``."""
    w1 = jnp.sum(jnp.abs(params[0].w), axis=-1)
    return jnp.sum(jnp.where(mask, w1, 0.0)) / jnp.sum(w1)


def check_training(params):
    """Refuse training settings out of range (ValueError naming the parameter)."""
    checks.real("lr", params["lr"], low=0.0, high=100.0, low_open=True)
    checks.integer("width", params["width"], low=1, high=65536)
    checks.integer("batch_size", params["batch_size"], low=1, high=65536)
    checks.choice("loss", params["loss"], sgd.LOSSES)
    steps = checks.integer("max_steps", params["max_steps"], low=1, high=10**8)
    every = checks.integer("eval_every", params["eval_every"], low=1, high=steps)
    if steps % every:
        raise ValueError(f"eval_every must divide max_steps = {steps}, got {every}")
    checks.integer("test_size", params["test_size"], low=1, high=2**20)


# ----------------------------------------------------------------------------- columns and groups
# ``rows`` is a :class:`~jaxtrees.experiments.table.Table` (a study's results or a subset of them).


def present(rows, name) -> list:
    """The distinct values column ``name`` takes in ``rows``, ascending, as Python values (only those a
    row has: a subset's column may carry the whole table's values in its codes)."""
    codes, uniques = tables.factorize(rows, name)
    seen = np.zeros(len(uniques), bool)
    seen[codes] = True
    return uniques[seen].tolist()


def first(rows, name):
    """The column's value in the first row, as a Python value (a per-cell constant such as
    ``max_steps``; unlike ``rows[0]``, it reads one column, and works beside a column of strings)."""
    return rows.first(name)


def columns(rows, *names):
    """A :class:`~jaxtrees.experiments.table.Table` of only these columns of ``rows`` (for a helper that
    reads ``rows[0]``, which fails where the table has a column of strings: ``str`` has no ``item()``)."""
    return tables.Table({name: rows[name] for name in names})


def nested(rows, outer, inner) -> dict[tuple, tuple]:
    """``{outer key: (rows of that key, {inner key: rows})}`` from one group-by over ``outer + inner``
    (keys sorted as :func:`~jaxtrees.experiments.table.groups`): a figure's panels and their curves."""
    codes, keys = tables.groups(rows, [*outer, *inner])
    order = np.argsort(codes, kind="stable")
    ends = np.cumsum(np.bincount(codes, minlength=len(keys)))
    starts = ends - np.bincount(codes, minlength=len(keys))
    out, spans = {}, {}
    for key, s, e in zip(keys, starts, ends):
        head = key[:len(outer)]
        out.setdefault(head, {})[key[len(outer):]] = rows.take(order[s:e])
        spans[head] = (spans.get(head, (s, e))[0], e)  # an outer key's groups are consecutive
    return {head: (rows.take(order[slice(*spans[head])]), parts) for head, parts in out.items()}


def group_medians(rows, by, values) -> tuple[list[tuple], np.ndarray, np.ndarray]:
    """``(keys, medians, finite)``: per group of ``by``, ``np.nanmedian`` of ``values`` (an array over
    the rows, as float64: the mean of the two middle values of an even count; NaN values skipped, NaN
    for a group without any other) and the count of its values that are not NaN."""
    values = np.asarray(values, np.float64)
    codes, keys = tables.groups(rows, by)
    valid = ~np.isnan(values)
    count = np.bincount(codes[valid], minlength=len(keys))
    order = np.flatnonzero(valid)[np.lexsort((values[valid], codes[valid]))]  # by group, ascending, NaN dropped
    starts = np.cumsum(count) - count
    last = max(order.size - 1, 0)
    low = values[order[np.minimum(starts + (count - 1) // 2, last)]] if order.size else np.full(len(keys), np.nan)
    high = values[order[np.minimum(starts + count // 2, last)]] if order.size else np.full(len(keys), np.nan)
    with np.errstate(invalid="ignore"):
        medians = np.where(count > 0, (low + high) / 2, np.nan)
    return keys, medians, count


# ----------------------------------------------------------------------------- texts from the rows


def varying(rows, names) -> list[str]:
    """The parameters among ``names`` that take more than one value in ``rows``."""
    return [b for b in names if b in rows and len(present(rows, b)) > 1]


def suffix(names, values) -> str:
    """``, name = value`` for each of ``names`` (the varying parameters of a label or title)."""
    return "".join(f", {b} = {v}" for b, v in zip(names, values))


def vals(rows, name) -> str:
    """The distinct values of column ``name``, in natural order, joined by ``/``."""
    return "/".join(str(v) for v in sorted(present(rows, name), key=summary.natural_key))


def smoothing(c, uniform: str = "uniform (c = 0)") -> str:
    """How a label names the smoothing c (``uniform`` for c = 0)."""
    return uniform if c == 0 else f"c = {c:g}"


def optimizer(rows) -> str:
    """The optimizer(s) that trained the rows' networks ("SGD" for studies without an optimizer parameter)."""
    names = present(rows, "optimizer") if "optimizer" in rows else ["sgd"]
    return "/".join(OPTIMIZER_NAMES.get(name, name) for name in names)


def network(rows) -> str:
    """``width-100 ReLU MLP`` (every width of the rows)."""
    return f"width-{vals(rows, 'width')} ReLU MLP"


def network_title(rows) -> str:
    """The network and its optimizer, for a figure's title."""
    return f"{network(rows)}, {optimizer(rows)}"


def network_text(rows) -> str:
    """A sentence on the rows' network and training, for a report."""
    return (f"One hidden layer of width {vals(rows, 'width')} (ReLU, He init), {optimizer(rows)} learning rate "
            f"{vals(rows, 'lr')}, batch {vals(rows, 'batch_size')}, {vals(rows, 'loss')} loss, inputs in {{-1,+1}}, "
            f"online (fresh batch every step), budget {vals(rows, 'max_steps')} steps")


def divergence_note(rows) -> str:
    """A warning line when some networks diverged (non-finite weights: the drift is NaN or inf)."""
    diverged = int((~np.isfinite(np.asarray(rows["drift"], np.float64))).sum())
    return "" if diverged == 0 else (
        f"\n**diverged: {diverged} of {len(rows)} trials** ended with non-finite weights (learning rate "
        f"{vals(rows, 'lr')} too large for this loss and width?); they count as not learned.\n")


def budget_lines(ax, budget, barak=True):
    """The step budget (censoring) as a dotted line; Barak et al.'s budget dashed."""
    ax.axhline(budget, color="0.4", ls=":", lw=1, label=f"step budget {budget:,} (censoring)")
    if barak:
        ax.axhline(BARAK_BUDGET, color="k", ls="--", lw=1, label=f"Barak et al.: all within {BARAK_BUDGET:,}")
