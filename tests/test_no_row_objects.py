"""No Python object per trial or per row in group-bys, string columns and export (issue 64, item 9)."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv

from jaxtrees.experiments.results import reading
from jaxtrees.experiments import table as tables
from jaxtrees.experiments.studies import common
from jaxtrees.experiments.table import ByCell, Table

ROOT = Path(__file__).resolve().parents[1]


def _trials(replicates: int, per_trial: int = 1) -> Table:
    """A table as read back: 8 cells (k, c, impurity by cell) x ``replicates``, ``per_trial`` rows (m) each."""
    cell = np.repeat(np.arange(8, dtype=np.int32), replicates * per_trial)
    replicate = np.tile(np.repeat(np.arange(replicates, dtype=np.int32), per_trial), 8)
    m = np.tile(16 * 2 ** np.arange(per_trial, dtype=np.int32), 8 * replicates)
    rng = np.random.default_rng(0)
    return Table({"cell": cell, "replicate": replicate, "m": m, "success": rng.integers(0, 2, m.size),
                  "eps_star": np.repeat(rng.random(8 * replicates), per_trial),
                  "k": ByCell([3, 4], np.arange(8) // 4), "c": ByCell([0.0, 0.1, 0.2, 0.3], np.arange(8) % 4),
                  "impurity": ByCell(np.asarray(["entropy", "gini"], object), np.arange(8) % 2)})


def _blocks(fn):
    """``(result, Python memory blocks it left allocated)``."""
    before = sys.getallocatedblocks()
    result = fn()
    return result, sys.getallocatedblocks() - before


def test_grouping_by_trial_makes_no_object_per_group():
    """Codes only and keys as columns: arrays, a handful of objects for 20,000 groups; the tuples of ``groups`` come
    only when asked, and agree with the columns."""
    t = _trials(2500)
    by = ["k", "c", "impurity", "cell", "replicate"]
    (codes, size), made = _blocks(lambda: tables.group_codes(t, by))
    assert isinstance(codes, np.ndarray) and size == 20_000 and made < 500
    (again, columns), made = _blocks(lambda: tables.group_columns(t, by))
    assert again is codes and made < 500 and list(columns) == by
    assert all(isinstance(v, np.ndarray) and v.size == size for v in columns.values())
    assert t._groups[tuple(by)].keys is None  # no tuples made yet
    (codes_, keys), made = _blocks(lambda: tables.groups(t, by))
    assert made > size and codes_ is codes
    assert keys == list(zip(*(v.tolist() for v in columns.values()))) == sorted(keys)
    assert tables.group_codes(t, [])[1] == 1 and tables.group_columns(t, [])[1] == {}
    empty = t.take(np.zeros(0, np.int64))
    assert tables.group_codes(empty, by)[1] == 0 and tables.groups(empty, by)[1] == []


def test_trials_by_cell_agrees_with_a_loop_over_trials():
    """common.trials_by_cell (each trial's cell from the cells' codes, no key per trial) against per-trial Python:
    with cell and replicate columns, and with trials told apart by their m order only."""
    t = _trials(7, per_trial=3)
    order = np.random.default_rng(1).permutation(len(t) // 3)
    t = t.take((3 * order[:, None] + np.arange(3)).reshape(-1))  # trials shuffled: cells appear in another order
    by = ["k", "c", "impurity"]
    for rows in (t, Table({name: t[name] for name in ("m", "success", "eps_star", *by)})):
        cells, m = common.trials_by_cell(rows, by, ("eps_star",))
        expected = {}
        for start in range(0, len(rows), 3):
            key = tuple(rows[start][name] for name in by)
            expected.setdefault(key, []).append(start)
        if "cell" in rows:  # cells sorted, a cell's trials by replicate
            expected = {key: sorted(starts, key=lambda s: rows[s]["replicate"])
                        for key, starts in sorted(expected.items())}
        assert list(cells) == list(expected) and m.tolist() == [16, 32, 64]
        for key, starts in expected.items():
            success = [[float(rows[s + j]["success"]) for j in range(3)] for s in starts]
            assert cells[key][0].tolist() == success
            assert cells[key][1]["eps_star"].tolist() == [rows[s + 2]["eps_star"] for s in starts]


def test_string_columns_share_one_str_per_value():
    """A column of strings given as a NumPy str array becomes objects, one shared str per distinct value."""
    t = Table({"name": np.asarray(["gini", "entropy", "gini"] * 1000)})
    assert t["name"].dtype == object and t["name"][:3].tolist() == ["gini", "entropy", "gini"]
    assert len({id(v) for v in t["name"]}) == 2


def test_export_writes_the_bytes_the_rows_as_objects_would():
    """export's columns (strings dictionary-encoded from their codes) write the CSV bytes the materialized columns
    write, for strings by cell, strings per row and numbers alike."""
    t = _trials(3, per_trial=2)
    t = t.with_columns(study=ByCell(np.asarray(["juntas"], object), np.zeros(8, np.int32)),
                       label=np.asarray(["a, b", 'say "x"', "z"] * (len(t) // 3), object),
                       error=np.linspace(0, 1, len(t), dtype=np.float32))

    def csv(table) -> bytes:
        out = pa.BufferOutputStream()
        pcsv.write_csv(table, out)
        return bytes(out.getvalue())

    arrow = reading._arrow(t)
    assert pa.types.is_dictionary(arrow.column("impurity").type)
    assert csv(arrow) == csv(pa.table(t.to_dict()))


def test_bench_store_measures_grouping_side_by_side(capsys):
    spec = importlib.util.spec_from_file_location("bench_store", ROOT / "scripts" / "bench_store.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(["--grouping", "800", "--reps", "1"])
    lines = dict(line.split(": ") for line in capsys.readouterr().out.strip().splitlines()[1:])
    assert list(lines) == [f"grouping_{what}_{way}" for way in ("keys", "codes", "columns") for what in ("s", "mib")]
