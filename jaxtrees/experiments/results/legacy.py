"""Results directories of earlier versions (CSV: ``parts/*.csv``, ``results.csv``), read.

:func:`read` reads such a directory's rows as a :class:`~jaxtrees.experiments.table.Table` (pyarrow's
CSV reader, typed columns); :func:`~jaxtrees.experiments.convert.convert` (``jaxtrees convert DIR``) rewrites it
as Parquet parts, after which ``jaxtrees run`` resumes into it.
"""

from __future__ import annotations

import json
import os

import numpy as np

from jaxtrees.experiments.results.layout import check_columns


def is_legacy(directory: str) -> bool:
    """Whether ``directory`` holds CSV rows (``results.csv`` or ``parts/*.csv``)."""
    return bool(csv_files(directory))


def csv_files(directory: str) -> list[str]:
    results = os.path.join(directory, "results.csv")
    parts = os.path.join(directory, "parts")
    if os.path.isfile(results):
        return [results]
    if os.path.isdir(parts):
        return [os.path.join(parts, n) for n in sorted(os.listdir(parts)) if n.endswith(".csv")]
    return []


def csv_config(directory: str):
    for path in (os.path.join(directory, "metadata.json"), os.path.join(directory, "parts", "config.json")):
        if os.path.exists(path):
            try:
                with open(path) as fh:
                    return json.load(fh)["config"]
            except (OSError, ValueError, KeyError, TypeError):
                continue
    return None


def _arrow(directory: str):
    """The CSV rows as one pyarrow table, and each row's file (index into the file list)."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    files, tables = csv_files(directory), []
    for path in files:
        try:
            with open(path, "rb") as fh:
                data = fh.read()
            if data.startswith(b"\xef\xbb\xbf"):  # a spreadsheet's byte-order mark
                data = data[3:]
            if data and not data.endswith(b"\n"):
                raise ValueError("its last line is unfinished (a copy cut short)")
            tables.append(pcsv.read_csv(pa.BufferReader(data)) if data.strip() else None)
        except (OSError, ValueError, pa.ArrowInvalid) as e:
            raise ValueError(f"{path}: not a results file ({str(e).splitlines()[0]}); move it out of the directory "
                             f"or delete the directory to start over") from None
    kept = [(p, t) for p, t in zip(files, tables) if t is not None and t.num_rows]
    if not kept:
        raise ValueError(f"no results in {directory} (its CSV files hold no rows)")
    table = pa.concat_tables([t for _, t in kept], promote_options="permissive")
    sources = np.repeat(np.arange(len(kept)), [t.num_rows for _, t in kept])
    return table, [p for p, _ in kept], sources


def read(directory: str, config: dict | None = None):
    """The rows of an earlier version's results directory, checked as :func:`~jaxtrees.experiments.results.reading.read_results` checks parts."""
    import pyarrow as pa

    table, paths, sources = _arrow(directory)
    config = config if config is not None else csv_config(directory)
    grid = (config or {}).get("grid", {})
    for i, field in enumerate(table.schema):  # a trial's float outputs are float32, written as decimals
        if pa.types.is_null(field.type):  # a column of nan only (the CSV reader types it null)
            table = table.set_column(i, field.name, pa.array(np.full(table.num_rows, np.nan, np.float32)))
        elif pa.types.is_floating(field.type) and field.name not in grid:
            table = table.set_column(i, field.name, table.column(i).cast(pa.float32()))
    ends = np.cumsum(np.bincount(sources, minlength=len(paths)))
    return check_columns([(path, table.slice(end - n, n)) for path, end, n in zip(paths, ends, np.diff(np.r_[0, ends]))],
                         config)
