"""Results directories of earlier versions (CSV: ``parts/*.csv``, ``results.csv``): read, or converted.

:func:`read` reads such a directory's rows as a :class:`~jaxtrees.experiments.table.Table` (pyarrow's
CSV reader, typed columns); :func:`convert` (``jaxtrees convert DIR``) rewrites it as Parquet parts,
after which ``jaxtrees run`` resumes into it.
"""

from __future__ import annotations

import json
import os

import numpy as np


def is_legacy(directory: str) -> bool:
    """Whether ``directory`` holds CSV rows (``results.csv`` or ``parts/*.csv``)."""
    return bool(_files(directory))


def _files(directory: str) -> list[str]:
    results = os.path.join(directory, "results.csv")
    parts = os.path.join(directory, "parts")
    if os.path.isfile(results):
        return [results]
    if os.path.isdir(parts):
        return [os.path.join(parts, n) for n in sorted(os.listdir(parts)) if n.endswith(".csv")]
    return []


def _config(directory: str):
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

    files, tables = _files(directory), []
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
    """The rows of an earlier version's results directory, checked as :func:`~jaxtrees.experiments.store.read_results` checks parts."""
    from jaxtrees.experiments.layout import check_columns

    import pyarrow as pa

    table, paths, sources = _arrow(directory)
    config = config if config is not None else _config(directory)
    grid = (config or {}).get("grid", {})
    for i, field in enumerate(table.schema):  # a trial's float outputs are float32, written as decimals
        if pa.types.is_null(field.type):  # a column of nan only (the CSV reader types it null)
            table = table.set_column(i, field.name, pa.array(np.full(table.num_rows, np.nan, np.float32)))
        elif pa.types.is_floating(field.type) and field.name not in grid:
            table = table.set_column(i, field.name, table.column(i).cast(pa.float32()))
    ends = np.cumsum(np.bincount(sources, minlength=len(paths)))
    return check_columns([(path, table.slice(end - n, n)) for path, end, n in zip(paths, ends, np.diff(np.r_[0, ends]))],
                         config)


def convert(directory: str) -> str:
    """Rewrite an earlier version's results directory as Parquet (``rows/``); the CSV files are
    removed once the new rows read back equal to them. Returns a line saying what was done."""
    from jaxtrees.experiments import store

    if not is_legacy(directory):
        raise ValueError(f"{directory} holds no CSV rows (results.csv or parts/*.csv) to convert")
    rows_dir = os.path.join(directory, "rows")
    if os.path.isdir(rows_dir) and any(n.startswith("part-") for n in os.listdir(rows_dir)) and \
            not os.path.isdir(os.path.join(directory, "parts")):
        raise ValueError(f"{directory} is already Parquet (rows/); its results.csv is an export (`jaxtrees export`), "
                         f"not rows to convert: nothing was changed")
    config = _config(directory)
    if config is None:
        raise ValueError(f"{directory}: neither metadata.json nor parts/config.json says which run wrote its rows")
    rows = read(directory, config)
    _check_columns(directory, config, rows)
    files = _files(directory)
    rows_dir = os.path.join(directory, "rows")
    os.makedirs(rows_dir, exist_ok=True)
    removed = [os.path.join(rows_dir, n) for n in sorted(os.listdir(rows_dir)) if n.startswith("part-")]
    for path in removed:  # an interrupted convert's part: its CSV rows are still here, written again below
        os.remove(path)
    writer = store.Store(os.path.dirname(directory.rstrip("/")) or ".", os.path.basename(directory.rstrip("/")))
    writer.config, writer.digest = config, store.config_digest(config)
    manifest = os.path.join(rows_dir, "_config.json")
    if not os.path.exists(manifest):
        store.write_atomic(manifest, json.dumps({"config": config, "created": store.now()}, indent=2))
    trial = np.asarray(rows["cell"], np.int64) * config["replicates"] + np.asarray(rows["replicate"], np.int64)
    columns = {name: rows[name] for name in rows.names}
    columns["study"] = np.asarray(columns["study"], dtype=object)
    path = writer.write_part(columns, int(np.unique(trial).size))
    back = store.read_results(directory, config)
    if len(back) != len(rows):
        os.remove(path)
        raise ValueError(f"{directory}: the converted rows did not read back whole; nothing was removed")
    recorded = _record_contract(directory, config)
    for old in files:
        os.remove(old)
    parts = os.path.join(directory, "parts")
    gone = list(files)
    if os.path.isdir(parts):
        for name in os.listdir(parts):
            os.remove(os.path.join(parts, name))
            gone.append(os.path.join(parts, name))
        os.rmdir(parts)
    again = f"; removed {len(removed)} part(s) of an interrupted convert first" if removed else ""
    return (f"converted {len(rows):,} rows of {directory} to {path}; removed {', '.join(sorted(set(gone)))}{again}"
            f"{recorded}")


def _check_columns(directory: str, config: dict, rows) -> None:
    """ValueError naming the columns the study writes now that the old rows lack (their trials could not be resumed
    into one dataset), before anything is written."""
    from jaxtrees.experiments import studies
    from jaxtrees.experiments.study import ID_COLUMNS

    study = studies.STUDIES.get(config["study"])
    if study is None:
        return
    lacking = [name for name in study.columns if name not in rows.names and name not in ID_COLUMNS]
    if lacking:
        raise ValueError(f"{directory}: its rows lack the column(s) {', '.join(lacking)} that this jaxtrees' "
                         f"{config['study']} study writes, so a run could not resume into them; nothing was changed "
                         f"(`jaxtrees report` and `export` still read the CSV rows; rerun the study into a new --out)")


def _record_contract(directory: str, config: dict) -> str:
    """Record this machine's resume contract for a converted directory (metadata.json and rows/_config.json), so
    that the first run resumed into it compares its settings with it; a clause saying so ("" without a study)."""
    import jax

    from jaxtrees.experiments import runner, store, studies

    study = studies.STUDIES.get(config["study"])
    if study is None:
        return ""
    terms = {**runner.contract(study, jax.devices()[0]), "groups": {}}
    for path in (os.path.join(directory, "metadata.json"), os.path.join(directory, "rows", "_config.json")):
        try:
            with open(path) as fh:
                recorded = json.load(fh)
        except (OSError, ValueError):
            recorded = {"config": config, "created": store.now(), "runs": []} if path.endswith("metadata.json") else None
        if recorded is not None and "contract" not in recorded:
            recorded["contract"] = terms
            store.write_atomic(path, json.dumps(recorded, indent=2))
    return ("; recorded this machine's resume contract (jaxtrees source, jax, settings): the CSV rows' own settings "
            "are unknown, so a resume under other settings is refused from now on")
