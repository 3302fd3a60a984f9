"""A run's rows read back, each part verified, and written out as one CSV.

:func:`read_results` reads ``OUT/STUDY/rows`` as a :class:`~jaxtrees.experiments.table.Table`, checked against the
configuration; :func:`export_csv` writes them as one tidy CSV; :func:`completeness` counts the trials done.
:func:`parts` yields the whole parts (each file's checksum and rows checked) and :func:`damaged` moves a damaged
one to :data:`DAMAGED` beside rows/ (or names it, for a reader). ``pandas.read_parquet(OUT/STUDY/rows)`` (or
polars, DuckDB) reads the rows too.
"""

from __future__ import annotations

import json
import os
import re
import sys
import zlib

import numpy as np

from jaxtrees.experiments.contract import WAY_OUT, config_digest
from jaxtrees.experiments.results import legacy
from jaxtrees.experiments.results.files import atomically, part_names, read_json
from jaxtrees.experiments.results.layout import Layout, check_columns
from jaxtrees.experiments.study import Config
from jaxtrees.experiments.table import Table, factorize

#: Parquet's key in a part's footer for what jaxtrees knows of it (configuration digest, rows, trials).
PART_KEY = b"jaxtrees"


def configs(manifest: dict | None) -> dict:
    """Digest -> configuration of every grid a directory's parts were written under (rows/_config.json's
    ``configs``; a manifest of an earlier version names one)."""
    if not manifest:
        return {}
    history = manifest.get("configs")
    if not isinstance(history, dict):
        history = {config_digest(manifest["config"]): manifest["config"]}
    return dict(history)


def read_results(directory: str, config: dict | None = None, columns: list[str] | None = None,
                 ordered: bool = True) -> Table:
    """The rows of ``directory`` (a finished run, or the whole parts of an unfinished one) as a
    :class:`~jaxtrees.experiments.table.Table` sorted by (cell, replicate) (``ordered``; else in the parts'
    order, which summaries do not need), each column checked against
    the configuration (``config``, default ``rows/_config.json``'s): ids and parameters those of its
    cell, every trial's rows present once. A directory of an earlier version (CSV) is read as it is.
    ValueError naming the file if there are no rows, a part is damaged or a trial is doubled."""
    rows_dir = os.path.join(directory, "rows")
    if config is None:
        config = (read_json(os.path.join(rows_dir, "_config.json"), rebuildable=True) or read_json(
            os.path.join(directory, "metadata.json")) or {}).get("config")
    if not part_names(rows_dir) and legacy.is_legacy(directory):
        return legacy.read(directory, config)
    if not part_names(rows_dir):
        raise ValueError(f"no results in {directory} (expected rows/part-*.parquet); rerun `jaxtrees run` with the "
                         f"same arguments to write them")
    if foreign_files(rows_dir):
        print(f"jaxtrees: warning: {rows_dir} holds files not of the run ({', '.join(foreign_files(rows_dir)[:5])}): "
              f"left out here, read by pandas.read_parquet of rows/; rerun `jaxtrees run` with the same arguments to "
              f"move them to {FOREIGN}/ beside rows/", file=sys.stderr)
    history = {} if config is None else configs(read_json(os.path.join(rows_dir, "_config.json"), rebuildable=True)
                                                or read_json(os.path.join(directory, "metadata.json"), rebuildable=True))
    if config is not None:
        history.setdefault(config_digest(config), config)
    whole = parts(rows_dir, history or None, columns, move=None)
    try:
        layout = None if config is None else Layout(registered(directory, config), Config(**config))
        rows = check_columns(whole, config, ordered, layout, history)  # one part in memory at a time
    except Exception as e:  # noqa: BLE001 - pyarrow's error on a part whose types are not the run's
        if not type(e).__module__.startswith("pyarrow"):
            raise
        raise ValueError(f"{directory}: a part's columns cannot be read as this run's ({type(e).__name__}: "
                         f"{str(e).splitlines()[0][:200] if str(e) else ''}); rerun `jaxtrees run` with the same "
                         f"arguments (it moves damaged parts aside), or {WAY_OUT}") from None
    if not len(rows):
        raise ValueError(f"no rows of the current grid in {directory} ({rows.outside:,} rows of values or replicates "
                         f"since removed); rerun `jaxtrees run` with the same arguments to write them")
    return rows


def export_csv(directory: str, path: str | None = None, partial: bool = False) -> str:
    """Write the rows of ``directory`` as one tidy CSV (``directory/results.csv`` by default; ``-``: stdout), sorted
    by (cell, replicate), atomically and durably; returns its path. ValueError for an unfinished run (unless
    ``partial``), a directory as ``path``, or an old CSV directory's own results.csv."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    path = path or os.path.join(directory, "results.csv")
    if path != "-" and os.path.isdir(path):
        raise ValueError(f"--csv {path} is a directory; give the path of the CSV file to write")
    if not part_names(os.path.join(directory, "rows")) and legacy.is_legacy(directory) and \
            os.path.abspath(path) == os.path.abspath(os.path.join(directory, "results.csv")):
        raise ValueError(f"{directory} holds an earlier jaxtrees' CSV rows (results.csv): convert them first "
                         f"(`jaxtrees convert {directory}`), or export elsewhere with --csv PATH")
    rows = read_results(directory)
    done, total = completeness(directory, rows)
    if done < total and not partial:
        raise ValueError(f"{directory} holds {done:,} of its {total:,} trials (a run unfinished or still running); "
                         f"rerun `jaxtrees run` with the same arguments to finish it, or pass --partial to export "
                         f"the trials done")
    table = to_arrow(rows)
    if path == "-":
        buffer = pa.BufferOutputStream()
        pcsv.write_csv(table, buffer)
        sys.stdout.flush()
        sys.stdout.buffer.write(memoryview(buffer.getvalue()))
        sys.stdout.buffer.flush()
        return path
    atomically(path, lambda fh: pcsv.write_csv(table, fh))
    return path


def to_arrow(rows: Table):
    """The rows as a ``pyarrow.Table`` (what ``jt.run`` returns, what export writes): columns of strings
    dictionary-encoded from their codes (:func:`~jaxtrees.experiments.table.factorize`: no object per row), the
    others as they are."""
    import pyarrow as pa

    arrays = {}
    for name in rows.names:
        codes, uniques = factorize(rows, name) if rows.dtype(name) == object else (None, ())
        if codes is not None and all(isinstance(value, str) for value in uniques):
            arrays[name] = pa.DictionaryArray.from_arrays(pa.array(codes), pa.array(list(uniques), pa.string()))
        else:
            arrays[name] = pa.array(rows[name])
    return pa.table(arrays)


def completeness(directory: str, rows: Table) -> tuple[int, int]:
    """(trials in ``rows`` (as :func:`read_results` returns them: each trial whole), trials the run's configuration
    asks for), from its metadata."""
    config = Config(**read_json(os.path.join(directory, "metadata.json"))["config"])
    seen = np.zeros(config.trials, bool)
    seen[np.asarray(rows["cell"], np.int64) * config.replicates + np.asarray(rows["replicate"], np.int64)] = True
    return int(np.count_nonzero(seen)), config.trials


def registered(directory: str, config: dict):
    """The registry's study of the run's name where the run was of it (metadata.json says so, or, written by an
    earlier version, says nothing), else None: a user's study of a built-in's name is not the built-in."""
    from jaxtrees.experiments import studies

    source = ((read_json(os.path.join(directory, "metadata.json"), rebuildable=True) or {}).get("study") or {}).get(
        "source") or {"builtin": config["study"]}
    return studies.STUDIES.get(config["study"]) if "builtin" in source else None


def parts(rows_dir: str, digests: dict | None, columns, move: bool | None):
    """``(path, pyarrow table, digest, revision)`` of each whole part of ``rows_dir`` of a configuration in
    ``digests`` (None: any), ``digest`` and ``revision`` (of the contract, 0 before any override) those it records; a part that cannot be read, or whose rows are not those it
    records, is moved to ``NAME.damaged`` (``move``: by this process, with a warning; False: by another) and
    left out, or (``move`` None: a reader's) raises ValueError naming it."""
    import pyarrow.parquet as pq

    for name in part_names(rows_dir):
        path = os.path.join(rows_dir, name)
        try:
            reader = pq.ParquetFile(_verified(path), page_checksum_verification=True)
            try:
                stamp = json.loads((reader.schema_arrow.metadata or {}).get(PART_KEY, b"{}"))
            except ValueError as e:  # not JSON, or not UTF-8
                raise OSError(f"its footer's record is not readable ({e})") from None
            if not isinstance(stamp, dict):
                raise OSError(f"its footer's record is not an object ({type(stamp).__name__})")
            if digests is not None and stamp.get("config") is not None and stamp.get("config") not in digests:
                refused(path, "a part of another configuration (another study, seed, grid or replicate count)",
                        move, FOREIGN, "not read")
                continue
            # a part of an earlier version carries no whole-file checksum: every page is read (page checksums)
            table = reader.read(columns=columns if _CRC.search(name) else None)
            if columns is not None:
                table = table.select([c for c in columns if c in table.column_names])
                _numeric_schema(reader.schema_arrow, columns)
            if stamp.get("rows") != reader.metadata.num_rows or table.num_rows != stamp["rows"]:
                raise OSError(f"it holds {table.num_rows} rows where it records {stamp.get('rows')}")
        except FileNotFoundError:
            continue  # another process moved it first
        except (OSError, KeyError, TypeError, json.JSONDecodeError) as e:
            damaged(path, str(e), move)
            continue
        except Exception as e:  # noqa: BLE001 - pyarrow's errors on a damaged file (ArrowInvalid, ...)
            if type(e).__module__.startswith("pyarrow"):
                damaged(path, str(e).splitlines()[0] if str(e) else type(e).__name__, move)
                continue
            raise
        yield path, table, stamp.get("config"), int(stamp.get("revision", 0))


def _numeric_schema(schema, read: list) -> None:
    """OSError unless every column not ``read`` (a run's outputs and axis, left unread by planning) holds numbers."""
    import pyarrow as pa

    for field in schema:
        if field.name not in read and not (pa.types.is_integer(field.type) or pa.types.is_floating(field.type)
                                           or pa.types.is_boolean(field.type)):
            raise OSError(f"column {field.name} must hold numbers, got {field.type}")


def _verified(path: str):
    """The part's bytes (a pyarrow buffer) where its whole-file checksum matches the one its name carries (a part of
    an earlier version carries none: its path, page checksums only); OSError otherwise."""
    import pyarrow as pa

    match = _CRC.search(os.path.basename(path))
    if match is None:
        return path
    with pa.OSFile(path) as fh:  # memory pyarrow owns: its reader threads never free a Python object (at exit:
        data = fh.read_buffer()  # an abort, "terminate called without an active exception")
    crc = zlib.crc32(memoryview(data))
    if crc != int(match.group(1), 16):
        raise OSError(f"its checksum {crc:08x} is not the {match.group(1)} it was written with")
    return pa.BufferReader(data)


#: A part's whole-file CRC-32 in its name (``part-TIME-PROCESS-ID-cCRC.parquet``).
_CRC = re.compile(r"-c([0-9a-f]{8})\.parquet$")
#: Where damaged parts go, beside rows/ (so that every reader of rows/ sees whole parts only).
DAMAGED = "damaged"
#: Where the files rows/ must not hold go (another run's parts, anything not a part), beside rows/.
FOREIGN = "foreign"


def damaged(path: str, why: str, move: bool | None, then: str = "its trials run again"):
    """A damaged part: moved to :data:`DAMAGED` with a warning (``move``: by this process), left to the process that
    moves it (False), or (``move`` None: a reader's) ValueError naming it."""
    if move is None:
        raise ValueError(f"{path} is damaged ({why}); rerun `jaxtrees run` with the same arguments (the run moves it "
                         f"to {DAMAGED}/ beside rows/ and runs its trials again), or {WAY_OUT}")
    refused(path, f"damaged ({why})", move, DAMAGED, then)


def refused(path: str, why: str, move: bool | None, folder: str, then: str):
    """A file rows/ must not hold: moved to ``folder`` beside rows/ with a warning saying ``why`` and what ``then``
    (``move``: by this process), left to the process that moves it (False), or (``move`` None: a reader's) ValueError
    naming it."""
    if move is None:
        raise ValueError(f"{path}: {why}; rerun `jaxtrees run` with the same arguments (the run moves it to "
                         f"{folder}/ beside rows/), or {WAY_OUT}")
    if not move:
        return
    aside = move_aside(path, folder)
    if aside is not None:
        print(f"jaxtrees: warning: {path} is {why}: moved to {aside}, {then}", file=sys.stderr)


def foreign_files(rows_dir: str) -> list[str]:
    """The names in ``rows_dir`` that are not the run's: neither a part, ``_config.json`` nor a temporary of a
    writing process (pandas and pyarrow read every file of the folder but those named ``.*`` or ``_*``)."""
    if not os.path.isdir(rows_dir):
        return []
    return sorted(n for n in os.listdir(rows_dir) if not (
        (n.startswith("part-") and n.endswith(".parquet")) or n == "_config.json"
        or (n.endswith(".tmp") and n.startswith((".p", "_config.json.p")))))


def move_foreign(rows_dir: str) -> None:
    """Move every foreign file of ``rows_dir`` (:func:`foreign_files`) to :data:`FOREIGN` beside it, with a warning."""
    for name in foreign_files(rows_dir):
        refused(os.path.join(rows_dir, name), "not a part of this run", True, FOREIGN, "not read")


def move_aside(path: str, folder: str) -> str | None:
    """Move ``path`` to ``folder`` beside its directory (a name taken there: a numbered one); its new path, or None
    where another process moved it first."""
    aside = os.path.join(os.path.dirname(os.path.dirname(path)), folder)
    target, n = os.path.join(aside, os.path.basename(path)), 1
    while os.path.lexists(target):
        target, n = os.path.join(aside, f"{os.path.basename(path)}.{n}"), n + 1
    try:
        os.makedirs(aside, exist_ok=True)
        os.replace(path, target)
    except FileNotFoundError:
        return None
    return target
