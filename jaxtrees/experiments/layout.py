"""The rows of a run as columns: from a call's outputs to a part's columns, and back, checked.

:class:`Layout` holds a run's per-cell arrays (each parameter's value codes, the axis values), so
that a call's rows are gathered from them (:meth:`Layout.columns`), never built row by row;
:func:`check_columns` checks rows read back against the configuration, column by column.
"""

from __future__ import annotations

import numpy as np

from jaxtrees.experiments.table import Table


class Layout:
    """Per-cell arrays of ``study``'s run ``config``: ``codes[name][cell]`` indexes the parameter's
    sorted distinct values ``values[name]``; ``axis[cell, :lengths[cell]]`` the cell's axis values."""

    def __init__(self, study, config):
        self.study, self.name, self.seed = study, config.study, config.seed
        self.cells = config.cells()
        self.replicates = config.replicates
        self.params = sorted(config.grid)
        self.values, self.codes = {}, {}
        for name in self.params:
            distinct = sorted(set(config.grid[name]), key=_order)
            self.values[name] = np.asarray(distinct, dtype=object if isinstance(distinct[0], str) else None)
            index = {_identity(v): i for i, v in enumerate(distinct)}
            self.codes[name] = np.asarray([index[_identity(c[name])] for c in self.cells], np.int32)
        if study is None:  # a study not in the registry: rows per trial unknown (check_columns infers them)
            self.lengths, self.axis = None, None
        elif study.axis is None:
            self.lengths = np.ones(len(self.cells), np.int64)
            self.axis = None
        else:
            per_cell = [list(study.axis.values(c)) for c in self.cells]
            self.lengths = np.asarray([len(v) for v in per_cell], np.int64)
            self.axis = np.zeros((len(self.cells), int(self.lengths.max())),
                                 np.result_type(*[np.asarray(v).dtype for v in per_cell]))
            for i, v in enumerate(per_cell):
                self.axis[i, :len(v)] = v

    def columns(self, cell: np.ndarray, replicate: np.ndarray, outputs: dict) -> dict:
        """A call's rows as columns: one row per trial (``cell[t]``, ``replicate[t]``) and, where the
        study has an axis, per axis value (outputs of shape ``[trials, len(axis)]`` run along it,
        scalar outputs repeat); bools as int8 (0/1), parameters as their grid values."""
        cell = np.asarray(cell, np.int64)
        width = 1 if self.axis is None else int(self.lengths[cell[0]]) if cell.size else 0
        if cell.size and np.any(self.lengths[cell] != width):
            raise ValueError("Layout.columns: a call's cells must have axis values of one length")
        rows = cell.size * width
        at = np.repeat(cell, width)
        out = {"study": _Constant(self.name, rows), "seed": np.full(rows, self.seed, np.int32),
               "cell": at.astype(np.int32), "replicate": np.repeat(np.asarray(replicate, np.int32), width)}
        for name in self.params:
            out[name] = _Coded(self.values[name], self.codes[name][at])
        if self.axis is not None:
            out[self.study.axis.name] = _narrow(self.axis[cell, :width].reshape(-1))
        for name, value in outputs.items():
            value = np.asarray(value)
            if value.dtype == bool:
                value = value.astype(np.int8)
            value = value.reshape(cell.size, -1)
            out[name] = (np.repeat(value[:, 0], width) if value.shape[1] == 1 and width != 1 else value.reshape(-1))
            if out[name].size != rows:
                raise ValueError(f"output {name!r}: {value.shape[1]} values per trial where the axis has {width}")
        return out

    def whole(self, cell: np.ndarray, trial: np.ndarray) -> bool:
        """Whether the rows of a part (their ``cell`` and trial ids) hold each of its trials exactly once, whole."""
        trials, first, counts = np.unique(trial, return_index=True, return_counts=True)
        return bool(np.all(counts == self.lengths[np.asarray(cell, np.int64)[first]]))


class _Constant:
    """A column of one string, ``size`` times (dictionary-encoded when written)."""

    def __init__(self, value: str, size: int):
        self.value, self.size = value, size


class _Coded:
    """A parameter column: ``values[codes]`` (dictionary-encoded when written)."""

    def __init__(self, values: np.ndarray, codes: np.ndarray):
        self.values, self.codes = values, codes


def _narrow(values: np.ndarray) -> np.ndarray:
    """Integer values as int32 where they fit (a parameter column costs half), else as they are."""
    if values.dtype.kind == "i" and values.size and -2**31 <= values.min() and values.max() < 2**31:
        return values.astype(np.int32)
    return values


def columns_table(columns: dict):
    """A pyarrow table of :meth:`Layout.columns`' columns (strings dictionary-encoded, no copies of arrays)."""
    import pyarrow as pa

    arrays = {}
    for name, value in columns.items():
        if isinstance(value, _Constant):
            arrays[name] = pa.DictionaryArray.from_arrays(pa.array(np.zeros(value.size, np.int32)),
                                                          pa.array([value.value]))
        elif isinstance(value, _Coded):
            if value.values.dtype == object:
                arrays[name] = pa.DictionaryArray.from_arrays(pa.array(value.codes), pa.array(list(value.values)))
            else:
                arrays[name] = pa.array(_narrow(value.values)[value.codes])
        else:
            arrays[name] = pa.array(value)
    return pa.table(arrays)


def check_columns(table, config: dict | None, paths: list[str], sources: np.ndarray, ordered: bool = True,
                  layout: Layout | None = None) -> Table:
    """``table`` (pyarrow, rows read back from ``paths``, or a list of such tables, which this function
    takes over and empties; ``sources[i]``: the path of row i) as a
    :class:`~jaxtrees.experiments.table.Table`, sorted by (cell, replicate) where ``ordered``, every column
    checked against ``config``: the study and seed, cells and replicates in range, each parameter its
    cell's value, each trial's rows all there once (and in one file), every other column a number.
    ValueError naming the file. Columns are taken out of ``table`` one by one (its memory freed as they go)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from jaxtrees.experiments.store import WAY_OUT

    if isinstance(table, list):  # the caller's tables: concatenated, the list emptied so that columns free as taken
        tables, table = table, pa.concat_tables(table, promote_options="permissive")
        tables.clear()
    names = table.column_names
    missing = [c for c in ["cell", "replicate"] + ([] if config is None else ["study", "seed", *sorted(config["grid"])])
               if c not in names]
    if missing:
        raise ValueError(f"{paths[0]}: the rows lack the column(s) {', '.join(missing)}; {WAY_OUT}")

    def fail(bad: np.ndarray, what: str):
        if np.any(bad):
            row = int(np.flatnonzero(bad)[0])
            raise ValueError(f"{paths[int(sources[row])]}: {what}; {WAY_OUT}")

    def take(name):  # the column as a contiguous pyarrow array, dropped from the table
        nonlocal table
        column = table.column(name)
        table = table.drop_columns([name])
        return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column

    def numbers(name, column):
        if pa.types.is_dictionary(column.type) or pa.types.is_string(column.type) or not (
                pa.types.is_integer(column.type) or pa.types.is_floating(column.type)
                or pa.types.is_boolean(column.type)):
            raise ValueError(f"{paths[0]}: column {name} must hold numbers, got {column.type}; {WAY_OUT}")
        return column.to_numpy(zero_copy_only=False)

    cell, replicate = (numbers(name, take(name)) for name in ("cell", "replicate"))
    fail((cell < 0) | (replicate < 0), "cell and replicate must be integers >= 0")
    columns, factors = {"cell": cell, "replicate": replicate}, {}
    if config is not None:
        from jaxtrees.experiments import studies
        from jaxtrees.experiments.study import Config

        layout = layout or Layout(studies.STUDIES.get(config["study"]), Config(**config))
        fail((cell >= len(layout.cells)) | (replicate >= layout.replicates),
             f"a trial outside this run's {len(layout.cells)} cells x {layout.replicates} replicates")
        for name in ("study", *layout.params):
            values = np.asarray([config["study"]], dtype=object) if name == "study" else layout.values[name]
            per_cell = np.zeros(len(layout.cells), np.int32) if name == "study" else layout.codes[name]
            column = take(name)
            if values.dtype == object:  # strings: their codes in the grid's values, compared with the cell's
                codes = pc.index_in(column, value_set=pa.array(list(values))).fill_null(-1).to_numpy()
                fail(codes != per_cell[cell], f"a row whose {name} is not its cell's (this run's {name}: "
                                              f"{', '.join(map(str, values))})")
                columns[name] = values[codes]
            else:
                columns[name] = numbers(name, column)
                fail(columns[name] != values[per_cell][cell], f"a row whose {name} is not its cell's")
            factors[name] = (lambda per_cell=per_cell, values=values: (per_cell[cell], values))
        seed = numbers("seed", take("seed"))
        fail(seed != config["seed"], f"a row of another seed (this run's is {config['seed']})")
        columns["seed"] = seed
        trial = cell.astype(np.int64) * layout.replicates + replicate
        increasing = bool(np.all(trial[1:] >= trial[:-1]))
        order = None if increasing else np.argsort(trial, kind="stable")
        sorted_trial = trial if order is None else trial[order]
        starts = np.flatnonzero(np.r_[True, sorted_trial[1:] != sorted_trial[:-1]])
        counts = np.diff(np.r_[starts, sorted_trial.size])
        first = starts if order is None else order[starts]
        lengths = layout.lengths
        if lengths is None:  # a study not in the registry: every trial of a cell has as many rows as the most
            lengths = np.zeros(len(layout.cells), np.int64)
            np.maximum.at(lengths, cell[first], counts)
        by_source = sources if order is None else sources[order]
        split = np.add.reduceat((by_source != np.repeat(by_source[starts], counts)).astype(np.int64), starts) > 0
        wrong = (counts != lengths[cell[first]]) | split
        if np.any(wrong):
            bad = first[np.flatnonzero(wrong)[0]]
            raise ValueError(f"{paths[int(sources[bad])]}: trial (cell {cell[bad]}, replicate {replicate[bad]}) has "
                             f"its rows more than once or not all of them (another part holds it too?); {WAY_OUT}")
        if not ordered:
            order = None
    else:
        order = np.lexsort((replicate, cell)) if ordered else None
    for name in list(table.column_names):
        column = take(name)
        if name == "study" or (config is not None and name in config["grid"]) or (
                config is None and (pa.types.is_dictionary(column.type) or pa.types.is_string(column.type))):
            column = pc.cast(column, pa.string()) if pa.types.is_dictionary(column.type) else column
            uniques = pc.unique(column)
            codes = pc.index_in(column, value_set=uniques).to_numpy().astype(np.int64)
            values = np.asarray(uniques.to_pylist(), dtype=object)
            columns[name], factors[name] = values[codes], (codes, values)
        else:
            columns[name] = numbers(name, column)
    columns = {name: columns[name] for name in names}
    table = Table(columns, factors)
    return table if order is None else table.take(order)


def _order(value):
    return (0, float(value), "") if isinstance(value, (int, float)) else (1, 0.0, str(value))


def _identity(value):
    """A grid value as a dict key that keeps 1, 1.0 and True apart."""
    return type(value).__name__, value


#: The input that holds a group's branch of a program of several (``Study.branches``).
BRANCH = "branch_index"


def pack(study, layout: Layout, pending: np.ndarray, group: int) -> tuple[np.ndarray, np.ndarray]:
    """``(slots, padding)``: ``pending`` trials ordered so that every group of ``group`` consecutive
    slots shares the values of the study's ``grouped`` parameters (sorted by those values, stable), each
    run of equal values padded to a whole number of groups with copies of its last trial."""
    if not study.grouped:
        return pending, np.zeros(pending.size, bool)
    cell = pending // layout.replicates
    key = np.zeros(pending.size, np.int64)
    for name in study.grouped:
        key = key * len(layout.values[name]) + layout.codes[name][cell]
    order = np.argsort(key, kind="stable")
    trials, key = pending[order], key[order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    counts = np.diff(np.r_[starts, key.size])
    padded = -(-counts // group) * group
    run = np.repeat(np.arange(starts.size), padded)
    within = np.arange(run.size) - np.repeat(np.cumsum(padded) - padded, padded)
    return trials[starts[run] + np.minimum(within, counts[run] - 1)], within >= counts[run]


def inputs(study, layout: Layout, hashes: np.ndarray, static: dict, slots: np.ndarray, per_call: int,
            group: int, branch: np.ndarray | None = None):
    """The call's inputs: ``slots`` padded to ``per_call`` (copies of the last), gathered from per-cell
    arrays: cell hashes, replicate numbers, the dynamic parameters per trial and the ``grouped`` ones per
    group (int32 where every cell of the grid has an int or bool, or for ``choices`` (the value's index in
    the program's ``name_choices``), else float32: one dtype per parameter for the whole run)."""
    slots = np.concatenate([slots, np.repeat(slots[-1:], per_call - slots.size)])
    cell = slots // layout.replicates
    dynamic, shared = {}, {}
    for name in layout.params:
        if name in study.static:
            continue
        values = layout.values[name]
        if name in study.choices:
            allowed = static[f"{name}_choices"]
            per_value = np.asarray([allowed.index(v) if v in allowed else -1 for v in values], np.int32)
        else:
            integer = all(isinstance(v, (int, np.integer)) for v in values.tolist())
            per_value = values.astype(np.int32 if integer else np.float32)
        column = per_value[layout.codes[name][cell]]
        if name in study.grouped:
            shared[name] = column[::group]
        else:
            dynamic[name] = column
    if branch is not None:
        shared[BRANCH] = branch[cell][::group]
    return hashes[cell], (slots % layout.replicates).astype(np.uint32), dynamic, shared
