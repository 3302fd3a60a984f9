"""The rows of a run as columns: from a call's outputs to a part's columns, and back, checked.

:class:`Layout` holds a run's per-cell arrays (each parameter's value codes, the axis values), so
that a call's rows are gathered from them (:meth:`Layout.columns`), never built row by row;
:func:`check_columns` checks rows read back against the configuration, column by column.
"""

from __future__ import annotations

import numpy as np

from jaxtrees.experiments.contract import WAY_OUT, config_digest
from jaxtrees.experiments.table import ByCell, Table


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
        scalar outputs repeat); bools as int8 (0/1), and int8 only they (a trial's int8 output as int16), parameters
        as their grid values."""
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
            elif value.dtype == np.int8:  # int8 on disk means bool (how the report reads it): a trial's int8 widened
                value = value.astype(np.int16)
            value = value.reshape(cell.size, -1)
            out[name] = (np.repeat(value[:, 0], width) if value.shape[1] == 1 and width != 1 else value.reshape(-1))
            if out[name].size != rows:
                raise ValueError(f"output {name!r}: {value.shape[1]} values per trial where the axis has {width}")
        return out


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


def check_columns(parts, config: dict | None, ordered: bool = True, layout: Layout | None = None,
                  history: dict | None = None) -> Table:
    """The rows of ``parts`` (``(path, pyarrow table)`` or ``(path, table, config digest)`` read back, an iterable
    consumed one part at a time) as one :class:`~jaxtrees.experiments.table.Table`, sorted by (cell, replicate)
    where ``ordered`` (else in the parts' order), every column checked against ``config``: the study and seed, cells
    and replicates in range, each parameter its cell's value, each trial's rows all there once (in one part), every
    other column a number. The study, seed and parameters come back as :class:`~jaxtrees.experiments.table.ByCell`
    columns (nothing per row). A part written under an earlier grid of the directory (its digest in ``history``:
    digest -> configuration) is checked against that grid, its cells renumbered in ``config``'s; its rows outside
    ``config``'s grid (a value or replicate since removed) are left out and counted in the table's ``outside``; where
    the parts record more than one contract revision (``(path, table, digest, revision)``), the table's ``revision``
    holds each row's (else None). ValueError naming the file."""

    if config is None:
        return _unchecked(parts, ordered)
    if layout is None:
        layout = _layout(config)
    current = config_digest(config)
    earlier: dict = {}  # digest -> (layout, by_cell, the old cell's index in this grid or -1)
    by_cell = _by_cell(config, layout)
    names, paths, kept, runs, outside, revisions = None, [], {}, [], 0, []
    for path, table, *stamp in parts:
        if names is None:
            names = table.column_names
            missing = [c for c in ["cell", "replicate", *by_cell] if c not in names]
            if missing:
                raise ValueError(f"{path}: the rows lack the column(s) {', '.join(missing)}; {WAY_OUT}")
        elif sorted(table.column_names) != sorted(names):
            raise ValueError(f"{path}: its columns ({', '.join(table.column_names)}) are not the other parts' "
                             f"({', '.join(names)}); {WAY_OUT}")
        if not table.num_rows:
            continue
        digest = stamp[0] if stamp else None
        if digest is None or digest == current or not history or digest not in history:
            columns, trial = _checked_part(table, path, config, layout, by_cell)
        else:
            if digest not in earlier:
                old = _layout(history[digest], layout.study)
                earlier[digest] = (old, _by_cell(history[digest], old), _renumbered(old, layout))
            old, old_by_cell, to_now = earlier[digest]
            columns, _ = _checked_part(table, path, history[digest], old, old_by_cell)
            cell = to_now[columns["cell"]]
            inside = (cell >= 0) & (columns["replicate"] < layout.replicates)
            outside += int(inside.size - np.count_nonzero(inside))
            columns = {name: values[inside] for name, values in columns.items()}
            columns["cell"] = cell[inside].astype(columns["replicate"].dtype if cell.size else np.int32)
            trial = columns["cell"].astype(np.int64) * layout.replicates + columns["replicate"]
            if not trial.size:
                continue
        paths.append(path)
        revisions.append((stamp[1] if len(stamp) > 1 else 0, trial.size))
        for name, values in columns.items():
            kept.setdefault(name, []).append(values)
        starts = np.flatnonzero(np.r_[True, trial[1:] != trial[:-1]])
        runs.append((trial[starts], np.diff(np.r_[starts, trial.size]), np.full(starts.size, len(paths) - 1, np.int32)))
        del table
    if not runs:
        if outside:  # every row lies outside the grid: nothing of it is done
            empty = Table({"cell": np.zeros(0, np.int32), "replicate": np.zeros(0, np.int32)})
            empty.outside = outside
            return empty
        raise ValueError("no rows to read")
    trial, count, source = (np.concatenate(r) for r in zip(*runs))
    del runs
    cell = trial // layout.replicates
    lengths = layout.lengths
    if lengths is None:  # a study not in the registry: every trial of a cell has as many rows as the most
        lengths = np.zeros(len(layout.cells), np.int64)
        np.maximum.at(lengths, cell, count)
    order = np.argsort(trial, kind="stable")
    twice = np.flatnonzero(trial[order][1:] == trial[order][:-1])
    short = np.flatnonzero(count != lengths[cell])
    if twice.size or short.size:  # a trial's rows in two runs (parts), or a run not all of them
        bad = order[twice[0] + 1] if twice.size else short[0]
        raise ValueError(f"{paths[source[bad]]}: trial (cell {cell[bad]}, replicate {trial[bad] % layout.replicates}) "
                         f"has its rows more than once or not all of them (another part holds it too?); {WAY_OUT}")
    columns = {}
    for name in names:
        columns[name] = by_cell[name] if name in by_cell else np.concatenate(kept.pop(name))
    table = Table(columns)
    revision = None
    if len({r for r, _ in revisions}) > 1:  # each row's revision, by its part
        revision = np.repeat(*(np.asarray(v, np.int64) for v in zip(*revisions))).astype(np.int32)
    if ordered and not np.all(order == np.arange(order.size)):
        starts = np.cumsum(count) - count  # each run's first row; runs laid out in trial order
        count = count[order]
        index = np.repeat(starts[order] - (np.cumsum(count) - count), count) + np.arange(len(table))
        table = table.take(index)
        revision = None if revision is None else revision[index]
    table.outside, table.revision = outside, revision
    return table


def _layout(config: dict, study=None) -> Layout:
    """The :class:`Layout` of a configuration (a dict as recorded), of ``study`` or the registry's study of its name."""
    from jaxtrees.experiments.study import Config

    if study is None:
        from jaxtrees.experiments import studies

        study = studies.STUDIES.get(config["study"])
    return Layout(study, Config(**config))


def _by_cell(config: dict, layout: Layout) -> dict:
    """The columns a cell decides (study, seed, parameters) as :class:`ByCell` columns of ``layout``'s cells."""
    zeros = np.zeros(len(layout.cells), np.int32)
    return {"study": ByCell(np.asarray([config["study"]], dtype=object), zeros),
            "seed": ByCell(np.asarray([config["seed"]], np.int32), zeros),
            **{name: ByCell(layout.values[name] if layout.values[name].dtype == object
                            else _narrow(layout.values[name]), layout.codes[name]) for name in layout.params}}


def _renumbered(old: Layout, now: Layout) -> np.ndarray:
    """Each of ``old``'s cells' index among ``now``'s cells (equal parameter values), -1 where it has none."""
    index = {tuple(_identity(c[n]) for n in now.params): i for i, c in enumerate(now.cells)}
    return np.asarray([index.get(tuple(_identity(c.get(n)) for n in now.params), -1) for c in old.cells], np.int64)


def _checked_part(table, path: str, config: dict, layout: Layout, by_cell: dict) -> tuple[dict, np.ndarray]:
    """One part's columns checked against the run (``by_cell``: the columns given by the cell); returns
    its other columns as arrays, each trial's rows made consecutive, and each row's trial."""
    import pyarrow as pa
    import pyarrow.compute as pc


    def fail(bad: np.ndarray, what: str):
        if np.any(bad):
            raise ValueError(f"{path}: {what}; {WAY_OUT}")

    cell, replicate = (_numbers(path, name, table.column(name)) for name in ("cell", "replicate"))
    fail((cell < 0) | (replicate < 0), "cell and replicate must be integers >= 0")
    fail((cell >= len(layout.cells)) | (replicate >= layout.replicates),
         f"a trial outside this run's {len(layout.cells)} cells x {layout.replicates} replicates")
    for name, column in by_cell.items():
        expected = column.per_cell[cell]
        if column.values.dtype == object:  # strings: their codes in the run's values, compared with the cell's
            codes = pc.index_in(table.column(name), value_set=pa.array(list(column.values))).fill_null(-1).to_numpy()
            fail(codes != expected, f"a row whose {name} is not its cell's (this run's {name}: "
                                    f"{', '.join(map(str, column.values))})")
        elif name == "seed":
            fail(_numbers(path, name, table.column(name)) != config["seed"],
                 f"a row of another seed (this run's is {config['seed']})")
        else:
            fail(_numbers(path, name, table.column(name)) != column.values[expected], f"a row whose {name} is not its cell's")
    out = {"cell": cell, "replicate": replicate}
    for name in table.column_names:
        if name not in by_cell and name not in out:
            out[name] = _numbers(path, name, table.column(name))
    trial = cell.astype(np.int64) * layout.replicates + replicate
    if np.any(trial[1:] < trial[:-1]) and _scattered(trial):  # a trial's rows apart (not as parts are written)
        order = np.argsort(trial, kind="stable")
        out, trial = {name: values[order] for name, values in out.items()}, trial[order]
    _check_axis(out, trial, layout, path)
    return out, trial


def _check_axis(out: dict, trial: np.ndarray, layout: Layout, path: str) -> None:
    """ValueError unless each trial's axis column holds its cell's axis values, each once (in any order: a part's
    rows may be interleaved), where the part has the column."""

    name = None if layout.axis is None or layout.study is None else layout.study.axis.name
    if name is None or name not in out or not trial.size:
        return
    cell = out["cell"].astype(np.int64)
    width = layout.axis.shape[1]
    match = (layout.axis[cell] == out[name][:, None]) & (np.arange(width) < layout.lengths[cell][:, None])
    position = np.argmax(match, axis=1)
    if not match[np.arange(cell.size), position].all() or _repeats(trial * width + position):
        raise ValueError(f"{path}: a row whose {name} is not its trial's (each trial runs along {name} = its cell's "
                         f"values, each once); {WAY_OUT}")


def _scattered(trial: np.ndarray) -> bool:
    """Whether some trial's rows are not consecutive."""
    return _repeats(trial[np.r_[True, trial[1:] != trial[:-1]]])


def _repeats(values: np.ndarray) -> bool:
    """Whether some value occurs more than once: a sort (NumPy 2's hashing ``np.unique`` took 15x as long on a part's
    trial ids, a third of reading 10^7 rows)."""
    ordered = np.sort(values)
    return bool(np.any(ordered[1:] == ordered[:-1]))


def _numbers(path: str, name: str, column) -> np.ndarray:
    """A numeric column as a NumPy array; ValueError naming the file otherwise."""
    import pyarrow as pa


    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if not (pa.types.is_integer(column.type) or pa.types.is_floating(column.type) or pa.types.is_boolean(column.type)):
        raise ValueError(f"{path}: column {name} must hold numbers, got {column.type}; {WAY_OUT}")
    return column.to_numpy(zero_copy_only=False)


def _unchecked(parts, ordered: bool) -> Table:
    """Rows of no known configuration: every column as it is, strings as objects."""
    import pyarrow as pa
    import pyarrow.compute as pc

    parts = list(parts)
    if not parts:
        raise ValueError("no rows to read")
    table = pa.concat_tables([t for _, t in parts], promote_options="permissive")
    columns, factors = {}, {}
    for name in table.column_names:
        column = table.column(name).combine_chunks()
        if pa.types.is_dictionary(column.type) or pa.types.is_string(column.type):
            column = pc.cast(column, pa.string()) if pa.types.is_dictionary(column.type) else column
            uniques = pc.unique(column).sort()
            codes = pc.index_in(column, value_set=uniques).to_numpy().astype(np.int32)
            values = np.asarray(uniques.to_pylist(), dtype=object)
            columns[name], factors[name] = values[codes], (codes, values)
        else:
            columns[name] = _numbers(parts[0][0], name, column)
    if ordered and "cell" in columns and "replicate" in columns:
        return Table(columns, factors).take(np.lexsort((columns["replicate"], columns["cell"])))
    return Table(columns, factors)


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
