"""Converting an earlier version's results directory (CSV) to Parquet parts: ``jaxtrees convert DIR``.

:func:`convert` reads the CSV rows (:mod:`~jaxtrees.experiments.results.legacy`), writes them as one part, records
this machine's resume contract (:func:`~jaxtrees.experiments.run.job.contract`) and removes the CSV files once
the part reads back whole.
"""

from __future__ import annotations

import json
import os

import numpy as np

from jaxtrees.experiments import studies
from jaxtrees.experiments.contract import config_digest, now
from jaxtrees.experiments.results import files, legacy, reading, store
from jaxtrees.experiments.run import job
from jaxtrees.experiments.study import ID_COLUMNS


def convert(directory: str) -> str:
    """Rewrite an earlier version's results directory as Parquet (``rows/``); the CSV files are
    removed once the new rows read back equal to them. Returns a line saying what was done."""
    if not legacy.is_legacy(directory):
        raise ValueError(f"{directory} holds no CSV rows (results.csv or parts/*.csv) to convert")
    rows_dir = os.path.join(directory, "rows")
    if os.path.isdir(rows_dir) and any(n.startswith("part-") for n in os.listdir(rows_dir)) and \
            not os.path.isdir(os.path.join(directory, "parts")):
        raise ValueError(f"{directory} is already Parquet (rows/); its results.csv is an export (`jaxtrees export`), "
                         f"not rows to convert: nothing was changed")
    config = legacy.csv_config(directory)
    if config is None:
        raise ValueError(f"{directory}: neither metadata.json nor parts/config.json says which run wrote its CSV "
                         f"rows, so they can be neither converted nor resumed; nothing was changed (the CSV files "
                         f"stay as they are: restore metadata.json from a copy and convert, or rerun the study into "
                         f"a new --out)")
    _check_parameters(directory, config)
    rows = legacy.read(directory, config)
    _check_columns(directory, config, rows)
    csv_files = legacy.csv_files(directory)
    rows_dir = os.path.join(directory, "rows")
    os.makedirs(rows_dir, exist_ok=True)
    removed = [os.path.join(rows_dir, n) for n in sorted(os.listdir(rows_dir)) if n.startswith("part-")]
    for path in removed:  # an interrupted convert's part: its CSV rows are still here, written again below
        os.remove(path)
    writer = store.Store(os.path.dirname(directory.rstrip("/")) or ".", os.path.basename(directory.rstrip("/")))
    writer.config, writer.digest = config, config_digest(config)
    manifest = os.path.join(rows_dir, "_config.json")
    if not os.path.exists(manifest):
        files.write_atomic(manifest, json.dumps({"config": config, "created": now()}, indent=2))
    trial = np.asarray(rows["cell"], np.int64) * config["replicates"] + np.asarray(rows["replicate"], np.int64)
    columns = {name: rows[name] for name in rows.names}
    columns["study"] = np.asarray(columns["study"], dtype=object)
    path = writer.write_part(columns, int(np.unique(trial).size))
    back = reading.read_results(directory, config)
    if len(back) != len(rows):
        os.remove(path)
        raise ValueError(f"{directory}: the converted rows did not read back whole; nothing was removed")
    recorded = _record_contract(directory, config)
    for old in csv_files:
        os.remove(old)
    parts = os.path.join(directory, "parts")
    gone = list(csv_files)
    if os.path.isdir(parts):
        for name in os.listdir(parts):
            os.remove(os.path.join(parts, name))
            gone.append(os.path.join(parts, name))
        os.rmdir(parts)
    again = f"; removed {len(removed)} part(s) of an interrupted convert first" if removed else ""
    return (f"converted {len(rows):,} rows of {directory} to {path}; removed {', '.join(sorted(set(gone)))}{again}"
            f"{recorded}")


def _check_parameters(directory: str, config: dict) -> None:
    """ValueError unless the old run's grid names this version's parameters of its study (where it is a built-in
    one), before anything is read or written."""
    study = studies.STUDIES.get(config.get("study"))
    grid = config.get("grid")
    if study is None or not isinstance(grid, dict) or set(grid) == set(study.full):
        return
    raise ValueError(f"{directory}: its run's grid ({', '.join(sorted(grid)) or 'none'}) is not the parameters of "
                     f"this jaxtrees' {config['study']} study ({', '.join(sorted(study.full))}), so its rows cannot "
                     f"be resumed into; nothing was changed (the CSV files stay as they are, for any CSV reader; "
                     f"rerun the study into a new --out for rows of this version)")


def _check_columns(directory: str, config: dict, rows) -> None:
    """ValueError naming the columns the study writes now that the old rows lack (their trials could not be resumed
    into one dataset), before anything is written."""
    study = studies.STUDIES.get(config["study"])
    if study is None:
        return
    lacking = [name for name in study.columns if name not in rows.names and name not in ID_COLUMNS]
    if lacking:
        raise ValueError(f"{directory}: its rows lack the column(s) {', '.join(lacking)} that this jaxtrees' "
                         f"{config['study']} study writes, so a run could not resume into them; nothing was changed "
                         f"(`jaxtrees report {directory}` and `jaxtrees export {directory} --csv PATH` still read "
                         f"the CSV rows as they are; rerun the study into a new --out for rows of this version)")


def _record_contract(directory: str, config: dict) -> str:
    """Record this machine's resume contract for a converted directory (metadata.json and rows/_config.json), so
    that the first run resumed into it compares its settings with it; a clause saying so ("" without a study)."""
    import jax

    study = studies.STUDIES.get(config["study"])
    if study is None:
        return ""
    terms = {**job.contract(study, jax.devices()[0]), "groups": {}}
    for path in (os.path.join(directory, "metadata.json"), os.path.join(directory, "rows", "_config.json")):
        try:
            with open(path) as fh:
                recorded = json.load(fh)
        except (OSError, ValueError):
            recorded = {"config": config, "created": now(), "runs": []} if path.endswith("metadata.json") else None
        if recorded is not None and "contract" not in recorded:
            recorded["contract"] = terms
            files.write_atomic(path, json.dumps(recorded, indent=2))
    return ("; recorded this machine's resume contract (jaxtrees source, jax, settings): the CSV rows' own settings "
            "are unknown, so a resume under other settings is refused from now on")
