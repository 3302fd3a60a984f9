"""Result rows as columns: :class:`Table` (name -> 1-d array) and vectorized group-bys.

A study's rows never pass through Python one by one: :func:`jaxtrees.experiments.results.reading.read_results`
returns a :class:`Table`, a study's ``plot`` and ``report`` see one, and every summary here (groups, rates with
Wilson bands, means, quantiles) is a handful of NumPy passes over its columns.

>>> t = Table({"c": [0.1, 0.1, 0.0, 0.1], "m": [64, 64, 64, 128], "success": [1, 0, 1, 1]})
>>> [(g["c"], g["m"], g["rate"], round(g["low"], 3)) for g in rates(t, ["c", "m"], "success")]
[(0.0, 64, 1.0, 0.207), (0.1, 64, 0.5, 0.095), (0.1, 128, 1.0, 0.207)]
>>> {key: len(part) for key, part in split(t, ["c"]).items()}
{(0.0,): 1, (0.1,): 3}
"""

from __future__ import annotations

import functools
import math
from typing import Mapping

import numpy as np

#: Integer columns whose values span fewer than this many integers are grouped by a lookup table, not a sort.
DENSE_RANGE = 2**22


class ByCell:
    """A column given by the row's cell: ``values[per_cell[table["cell"]]]`` (a run's parameters, its study and seed:
    nothing stored per row; ``values`` distinct and ascending)."""

    def __init__(self, values, per_cell):
        self.values, self.per_cell = np.asarray(values), np.asarray(per_cell)


class Dictionary:
    """A column of strings as ``values[codes]`` (a dictionary array): ``codes`` an int32 per row, ``values`` the
    distinct strings ascending (Python objects as many as the distinct values, however many rows)."""

    def __init__(self, codes, values):
        self.codes, self.values, self.shape = np.asarray(codes), np.asarray(values, dtype=object), np.shape(codes)


class Table:
    """Columns of equal length, each a 1-d NumPy array (strings kept as a :class:`Dictionary`, a run's parameters as
    :class:`ByCell` columns: either made on first use); ``table[name]`` is a column, ``table[i]`` one row as a dict
    (for a glance, e.g. a group's constant ``part[0]["max_steps"]``), ``len`` the rows. Iterating over rows is
    refused: work on columns (:func:`split`, :func:`rates`, ...)."""

    def __init__(self, columns: Mapping[str, object], factors: Mapping[str, tuple] | None = None):
        factors = dict(factors or {})
        self._columns = {name: _column(name, values, factors.get(name)) for name, values in columns.items()}
        sizes = {values.shape[0] for values in self._columns.values() if not isinstance(values, ByCell)}
        if len(sizes) > 1:
            raise ValueError(f"Table: columns of different lengths {sorted(sizes)}")
        if "cell" not in self._columns and any(isinstance(v, ByCell) for v in self._columns.values()):
            raise ValueError("Table: a ByCell column needs the table's cell column")
        self._size = sizes.pop() if sizes else 0
        # name -> (codes, uniques), or a function giving them: known or computed once (a Dictionary holds its own)
        self._factors = {name: f for name, f in factors.items() if not isinstance(self._columns.get(name), Dictionary)}
        self._made = {}  # ByCell and Dictionary columns made so far
        self._groups = {}  # by -> groups(self, by), the last GROUPINGS_KEPT

    @classmethod
    def from_rows(cls, rows) -> "Table":
        """A table from a list of row dicts (a small hand-made set, or rows parsed from text): each column parsed once,
        int where every value is an integer, float where every value is a number (``nan`` included), str otherwise."""
        rows = list(rows)
        if not rows:
            return cls({})
        return cls({name: _parsed([r[name] for r in rows]) for name in rows[0]})

    @property
    def names(self) -> list[str]:
        """The column names, in order."""
        return list(self._columns)

    def __len__(self) -> int:
        return self._size

    def __contains__(self, name) -> bool:
        return name in self._columns

    def __getitem__(self, key):
        if isinstance(key, str):
            try:
                values = self._columns[key]
            except KeyError:
                raise KeyError(f"no column {key!r}; the table has {', '.join(self._columns)}") from None
            if isinstance(values, (ByCell, Dictionary)):
                if key not in self._made:
                    self._made[key] = values.values[self._index(values)]
                return self._made[key]
            return values
        if isinstance(key, (int, np.integer)):
            return {name: self._at(name, key) for name in self._columns}
        raise TypeError(f"Table[{key!r}]: index a column by name, or one row by an int")

    def _index(self, column, rows=slice(None)):
        """A :class:`ByCell` or :class:`Dictionary` column's index into its values, at ``rows``."""
        return column.per_cell[self._columns["cell"][rows]] if isinstance(column, ByCell) else column.codes[rows]

    def _at(self, name, row: int):
        """The column's value in row ``row`` as a Python value (an object column's values are Python values already)."""
        column = self._columns[name]
        value = column[row] if isinstance(column, np.ndarray) else column.values[self._index(column, row)]
        return value.item() if isinstance(value, np.generic) else value

    def __iter__(self):
        raise TypeError("a Table is not iterated row by row: use its columns (table[name]) or split / rates / means")

    def __repr__(self) -> str:
        return f"Table({self._size} rows: {', '.join(self._columns)})"

    def take(self, index) -> "Table":
        """The rows at ``index`` (integer indices or a boolean mask), in that order."""
        index = np.asarray(index)
        index = np.flatnonzero(index) if index.dtype == bool else index.astype(np.int64) if index.size == 0 else index
        factors = {name: _taken(factor, index) for name, factor in self._factors.items()}
        return Table({name: values if isinstance(values, ByCell) else Dictionary(values.codes[index], values.values)
                      if isinstance(values, Dictionary) else values[index] for name, values in self._columns.items()},
                     factors)

    def select(self, *names) -> "Table":
        """The table of only these columns (those it has, and ``cell`` where one is a :class:`ByCell` column; no
        copies): take it before ``take`` on a wide table."""
        names = [name for name in names if name in self._columns]
        if "cell" not in names and any(isinstance(self._columns[name], ByCell) for name in names):
            names.append("cell")
        return Table({name: self._columns[name] for name in names},
                     {name: f for name, f in self._factors.items() if name in names})

    def where(self, **equal) -> "Table":
        """The rows whose columns equal the given values (``table.where(m=64, c=0.1)``)."""
        mask = np.ones(self._size, bool)
        for name, value in equal.items():
            mask &= self[name] == value
        return self.take(mask)

    def with_columns(self, **columns) -> "Table":
        """A table with these columns added (or replaced)."""
        factors = {name: f for name, f in self._factors.items() if name not in columns}
        mine = {name: self[name] if "cell" in columns and isinstance(v, ByCell) else v for name, v in self._columns.items()}
        return Table({**mine, **columns}, factors)

    def dtype(self, name) -> np.dtype:
        """The column's dtype (a :class:`ByCell` column's, without making it)."""
        values = self._columns[name]
        return values.values.dtype if isinstance(values, (ByCell, Dictionary)) else values.dtype

    def unique(self, name) -> list:
        """The distinct values the column holds, ascending, as Python values."""
        codes, uniques = factorize(self, name)
        return uniques[np.bincount(codes, minlength=len(uniques)) > 0].tolist()

    def first(self, name):
        """The column's value in the first row (a Python value)."""
        return self._at(name, 0)

    def to_dict(self) -> dict[str, np.ndarray]:
        """The columns (name -> array), in order."""
        return {name: self[name] for name in self._columns}


def _taken(factor, index):
    """A column's groups at rows ``index``: computed now where they are known, on first use where they are not."""
    return (lambda: _taken(factor(), index)) if callable(factor) else (factor[0][index], factor[1])


def _column(name, values, factor=None):
    """A column as the table keeps it: strings (a str array, or objects that are all str) as a :class:`Dictionary`
    (from their known ``factor``, ``(codes, uniques)``, where given)."""
    if isinstance(values, (ByCell, Dictionary)):
        return values
    values = np.asarray(values)
    if values.ndim != 1:
        raise ValueError(f"Table: column {name!r} must be 1-d, got shape {values.shape}")
    if values.dtype.kind in "US" or (values.dtype == object and values.size and isinstance(values[0], str)):
        try:
            codes, uniques = factor if isinstance(factor, tuple) else _factorize(values)
        except TypeError:  # objects of several types: not strings, kept as they are
            return values
        if values.dtype.kind in "US" or all(isinstance(value, str) for value in uniques.tolist()):
            return Dictionary(codes.astype(np.int32, copy=False), uniques.astype(object))
    return values


def _parsed(values: list) -> np.ndarray:
    if all(isinstance(v, (int, float, np.number, bool)) for v in values):
        return np.asarray(values)
    for kind in (int, float):
        try:
            return np.asarray([kind(v) for v in values])
        except (TypeError, ValueError):
            continue
    return np.asarray(values, dtype=object)


def factorize(table: Table, name: str) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, uniques)`` of a column: ``uniques`` its distinct values ascending, ``codes[i]`` the
    index of row i's value in them (computed once per table; a column read from a store arrives
    with its codes). ``uniques`` may hold values no row has where the table is a subset."""
    known = table._factors.get(name)
    if callable(known):  # computed on first use (a store's parameter columns: from their cells)
        known = table._factors[name] = known()
    if known is None:
        column = table._columns.get(name)
        if isinstance(column, Dictionary):
            return column.codes, column.values
        known = table._factors[name] = (column.per_cell[table["cell"]], column.values) if isinstance(column, ByCell) \
            else _factorize(table[name])  # a ByCell column's: its cells' codes, no pass over the values
    return tuple(known)


def _factorize(values: np.ndarray, bound: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, uniques)`` of ``values`` (``bound``: known to lie in [0, bound), no pass to find their range)."""
    if values.size and values.dtype.kind in "biu":
        low, high = (0, bound - 1) if bound is not None else (int(values.min()), int(values.max()))
        if high - low < DENSE_RANGE:
            offset = values.view(np.uint8) if values.dtype.kind == "b" else values if low == 0 else \
                values.astype(np.int64) - low  # transient where the values do not start at 0
            present = np.bincount(offset, minlength=high - low + 1) > 0
            lookup = (np.cumsum(present) - 1).astype(np.int32)
            return lookup[offset], (np.flatnonzero(present) + low).astype(values.dtype)
    uniques, codes = np.unique(values, return_inverse=True)
    return codes.reshape(-1).astype(np.int32 if uniques.size < 2**31 else np.int64), uniques


def on_cells(table: Table, fn, *names) -> np.ndarray:
    """``fn`` of the columns ``names``, per row: evaluated once per cell where each is a :class:`ByCell` column
    (a run's parameters), then spread over the rows; else over the rows."""
    columns = [table._columns.get(name) for name in names]
    if columns and all(isinstance(c, ByCell) for c in columns):
        return np.asarray(fn(*(c.values[c.per_cell] for c in columns)))[table["cell"]]
    return np.asarray(fn(*(table[name] for name in names)))


def mapped(table: Table, name: str, fn, dtype=None) -> np.ndarray:
    """``fn`` of the column ``name``'s value, per row: called once per distinct value (a string's, a parameter's), then
    spread over the rows by their codes (:func:`factorize`: no Python object per row)."""
    codes, uniques = factorize(table, name)
    return np.asarray([fn(value) for value in uniques.tolist()], dtype)[codes]


def groups(table: Table, by) -> tuple[np.ndarray, list[tuple]]:
    """``(codes, keys)``: the rows' group (the distinct values of the ``by`` columns) as an index
    into ``keys``, the groups' values as tuples of Python values, sorted column by column (one tuple
    per group: for groups as many as the trials, :func:`group_codes` or :func:`group_columns`)."""
    known = _known(table, by)
    if known.keys is None:
        known.keys = list(zip(*[values.tolist() for values in known.columns])) if known.columns else [()]
    return known.codes, list(known.keys)


def group_codes(table: Table, by) -> tuple[np.ndarray, int]:
    """``(codes, size)``: the rows' group as :func:`groups` numbers them, and the number of groups (no keys made)."""
    known = _known(table, by)
    return known.codes, known.size


def group_columns(table: Table, by) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """``(codes, columns)``: the rows' group as :func:`groups` numbers them, and the groups' keys as columns
    (``columns[name][g]``: the ``by`` column ``name``'s value in group g, an array over the groups)."""
    by = list(by)
    known = _known(table, by)
    return known.codes, dict(zip(by, known.columns))


#: Groupings a table keeps (a plot and its report group the same rows by the same columns several times).
GROUPINGS_KEPT = 4


class _Grouping:
    """A grouping: ``codes`` (read-only, shared), ``size`` groups, keys as ``columns`` (made on first use), ``keys``."""

    def __init__(self, codes, size, make):
        self.codes, self.size, self.make, self.keys = codes, size, make, None
        codes.flags.writeable = False

    @functools.cached_property
    def columns(self) -> list[np.ndarray]:
        columns, self.make = self.make(), None
        for values in columns:
            values.flags.writeable = False
        return columns


def _known(table: Table, by) -> _Grouping:
    """The grouping of ``table`` by ``by``, computed once per table (the last :data:`GROUPINGS_KEPT` kept)."""
    by = tuple(by)
    if not by:
        return _Grouping(np.zeros(len(table), np.int64), 1, list)
    known = table._groups.get(by)
    if known is None:
        known = _Grouping(*_groups(table, list(by)))
        while len(table._groups) >= GROUPINGS_KEPT:
            table._groups.pop(next(iter(table._groups)))
        table._groups[by] = known
    return known


def _groups(table: Table, by: list):
    """``(codes, size, columns)``: each row's group, the number of groups, and a function giving each ``by``
    column's value per group (groups sorted)."""
    cellwise = [name for name in by if isinstance(table._columns.get(name), ByCell)]
    sequence = cellwise + [name for name in by if name not in cellwise]  # cells' columns: combined per cell first
    factors = [(c.per_cell, c.values) for c in map(table._columns.get, cellwise)] + \
        [factorize(table, name) for name in sequence[len(cellwise):]]
    sizes = [len(uniques) for _, uniques in factors]
    if math.prod(sizes) >= 2**62:
        raise ValueError(f"groups: too many combinations of {by} to index")
    per_cell = np.zeros(len(factors[0][0]) if cellwise else 1, np.int64)
    for codes, uniques in factors[:len(cellwise)]:
        per_cell = per_cell * len(uniques) + codes
    combined = per_cell[table["cell"]] if cellwise else np.zeros(len(table), np.int64)
    for codes, uniques in factors[len(cellwise):]:
        combined *= len(uniques)
        combined += codes
    codes, present = _factorize(combined, math.prod(sizes) if math.prod(sizes) < DENSE_RANGE else None)
    del combined
    values = dict(zip(sequence, (uniques for _, uniques in factors)))

    def digits(present) -> dict:
        out = {}
        for name, size in zip(reversed(sequence), reversed(sizes)):
            out[name], present = present % size, present // size
        return out

    if sequence != by:  # groups sorted by the columns in the order asked
        at = digits(present)
        rank = np.lexsort([at[name] for name in reversed(by)])
        codes, present = np.argsort(rank).astype(codes.dtype)[codes], present[rank]
    return codes, len(present), lambda: [values[name][d] for name, d in zip(by, map(digits(present).get, by))]


def split(table: Table, by) -> dict[tuple, Table]:
    """The rows of each group of the ``by`` columns (groups sorted by value), each a :class:`Table`."""
    codes, keys = groups(table, by)
    order, count = np.argsort(codes, kind="stable"), np.bincount(codes, minlength=len(keys))
    ends = np.cumsum(count)
    starts = ends - count
    return {key: table.take(order[s:e]) for key, s, e in zip(keys, starts, ends)}


def cells(table: Table, by) -> list[tuple]:
    """The distinct values of the ``by`` columns, sorted."""
    return groups(table, by)[1]


def wilson(successes, trials, z: float = 1.96):
    """Wilson score interval of a binomial proportion (95% by default); arrays elementwise
    (0 trials: (0, 1))."""
    successes, trials = np.asarray(successes, np.float64), np.asarray(trials, np.float64)
    safe = np.maximum(trials, 1)
    phat = successes / safe
    denom = 1 + z**2 / safe
    centre = (phat + z**2 / (2 * safe)) / denom
    half = z * np.sqrt(np.maximum(phat * (1 - phat) / safe + z**2 / (4 * safe**2), 0)) / denom
    low = np.where(trials > 0, np.maximum(0.0, centre - half), 0.0)
    high = np.where(trials > 0, np.minimum(1.0, centre + half), 1.0)
    return (float(low), float(high)) if low.ndim == 0 else (low, high)


def rates(table: Table, by, metric: str) -> list[dict]:
    """Success rate of a 0/1 ``metric`` per group of the ``by`` columns, with its Wilson band: dicts
    with the ``by`` values, ``trials``, ``successes``, ``rate``, ``low``, ``high``, groups sorted."""
    codes, keys = groups(table, by)
    trials = np.bincount(codes, minlength=len(keys))
    successes = np.rint(np.bincount(codes, np.asarray(table[metric], np.float64), minlength=len(keys))).astype(np.int64)
    low, high = map(np.atleast_1d, wilson(successes, trials))
    return [{**dict(zip(by, key)), "trials": int(n), "successes": int(k), "rate": int(k) / int(n), "low": float(lo),
             "high": float(hi)} for key, n, k, lo, hi in zip(keys, trials, successes, low, high) if n]


def means(table: Table, by, metric: str) -> list[dict]:
    """Mean of ``metric`` per group with its standard error: dicts with the ``by`` values, ``trials``,
    ``mean``, ``sem`` (NaN for a single trial), groups sorted."""
    codes, keys = groups(table, by)
    x = np.asarray(table[metric], np.float64)
    count = np.bincount(codes, minlength=len(keys))
    mean = np.bincount(codes, x, minlength=len(keys)) / np.maximum(count, 1)
    squares = np.bincount(codes, (x - mean[codes]) ** 2, minlength=len(keys))
    with np.errstate(invalid="ignore", divide="ignore"):
        sem = np.where(count > 1, np.sqrt(squares / np.maximum(count - 1, 1)) / np.sqrt(count), np.nan)
    return [{**dict(zip(by, key)), "trials": int(n), "mean": float(mu), "sem": float(s)}
            for key, n, mu, s in zip(keys, count, mean, sem) if n]


def group_quantiles(table: Table, by, values, qs) -> tuple[list[tuple], np.ndarray]:
    """``(keys, q)``: per group, the ``qs`` quantiles of ``values`` (an array over the rows, or a
    column name) by the inverted CDF (observed values; +inf counts as the largest), ``q[g, j]``."""
    values = np.asarray(table[values] if isinstance(values, str) else values, np.float64)
    codes, keys = groups(table, by)
    order = np.lexsort((values, codes))
    count = np.bincount(codes, minlength=len(keys))
    starts = np.cumsum(count) - count
    out = np.full((len(keys), len(qs)), np.nan)
    for j, q in enumerate(qs):
        rank = np.maximum(np.ceil(q * count).astype(np.int64) - 1, 0)  # inverted_cdf: the ceil(q N)-th smallest
        out[:, j] = np.where(count > 0, values[order[np.minimum(starts + rank, len(values) - 1)]], np.nan)
    return keys, out
