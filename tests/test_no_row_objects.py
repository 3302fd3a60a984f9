"""No Python object per trial or per row in group-bys, string columns, export and the studies' reports (issue 64, item
9; issue 72, item 9): strings are dictionary arrays, and the reports' Python work does not grow with their trials."""

import gc
import importlib.util
import os
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pytest

import jaxtrees
from jaxtrees.experiments import studies
from jaxtrees.experiments.report import saving
from jaxtrees.experiments.results import reading
from jaxtrees.experiments import table as tables
from jaxtrees.experiments.studies import common, counterexamples_report, theory
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


@pytest.mark.parametrize("given", ["str array", "objects"])
def test_a_string_column_is_kept_as_codes_and_its_distinct_strings(given):
    """The table holds a string column as a dictionary (an int32 code per row, the distinct strings once): no reference
    per row until the column is asked for; its codes, rows, subsets and groups read the same as the objects'."""
    words = np.asarray(["gini", "entropy", "kearns_mansour", "gini"] * 25_000)
    t = Table({"name": words if given == "str array" else words.astype(object), "x": np.arange(words.size)})
    distinct = t.unique("name")
    assert distinct == ["entropy", "gini", "kearns_mansour"] and t.dtype("name") == object
    assert max(map(sys.getrefcount, distinct)) < 100  # nothing per row refers to them
    codes, uniques = tables.factorize(t, "name")
    assert codes.dtype == np.int32 and uniques.tolist() == distinct
    (_, keys), _, _, refs = _cost(lambda: tables.groups(t, ["name"]), distinct)
    assert keys == [("entropy",), ("gini",), ("kearns_mansour",)] and refs < 10
    assert t["name"].tolist() == words.tolist() and max(map(sys.getrefcount, distinct)) > 25_000  # asked for: made
    part = t.take(np.asarray([3, 1, 2]))
    assert part["name"].tolist() == ["gini", "entropy", "kearns_mansour"] and part[1]["name"] == "entropy"
    assert t.first("name") == "gini" and len(t.where(name="entropy")) == 25_000
    assert t.select("name").take(t["x"] % 4 == 2).unique("name") == ["kearns_mansour"]


def test_objects_that_are_not_all_strings_stay_objects():
    mixed = Table({"x": np.asarray(["a", 1, None], dtype=object), "y": np.asarray(["b", 2.5, "b"], dtype=object)})
    assert mixed["x"].tolist() == ["a", 1, None] and mixed["y"].tolist() == ["b", 2.5, "b"]
    assert mixed[2] == {"x": None, "y": "b"} and Table({"x": np.asarray([], dtype=object)})["x"].size == 0


def test_mapped_calls_once_per_distinct_value():
    """tables.mapped: a function of a string (or parameter) column per row, called on the distinct values only."""
    rows = _smoothed_base(200)
    calls = []
    gini = tables.mapped(rows, "impurity", lambda v: calls.append(v) or theory.lipschitz(v), bool)
    assert sorted(calls) == ["entropy", "gini"]
    assert gini.tolist() == [theory.lipschitz(v) for v in rows["impurity"]]
    assert tables.mapped(rows.take(np.zeros(0, np.int64)), "impurity", theory.lipschitz, bool).shape == (0,)


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

    arrow = reading.to_arrow(t)
    assert pa.types.is_dictionary(arrow.column("impurity").type)
    assert csv(arrow) == csv(pa.table(t.to_dict()))


def test_export_holds_no_reference_per_row():
    """export's columns of 10^5 rows: strings by cell and strings per row as dictionaries of their codes, no
    reference per row to a string."""
    t = _trials(12_500)
    t = t.with_columns(label=np.asarray(["a, b", 'say "x"', "z", "a, b"] * (len(t) // 4)))
    arrow, _, _, refs = _cost(lambda: reading.to_arrow(t), _strings(t))
    assert refs < 100 and pa.types.is_dictionary(arrow.column("label").type)
    assert arrow.column("label").to_pylist()[:4] == ["a, b", 'say "x"', "z", "a, b"]


def test_bench_store_measures_grouping_side_by_side(capsys):
    spec = importlib.util.spec_from_file_location("bench_store", ROOT / "scripts" / "bench_store.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(["--grouping", "800", "--reps", "1"])
    lines = dict(line.split(": ") for line in capsys.readouterr().out.strip().splitlines()[1:])
    assert list(lines) == [f"grouping_{what}_{way}" for way in ("keys", "codes", "columns") for what in ("s", "mib")]


# ----------------------------------------------------------------------------- the studies' reports, 10^3 vs 10^5 trials


def _cost(fn, strings=()):
    """``(result, lines, blocks, refs)`` of ``fn()``: the Python lines it runs in jaxtrees' own frames, and the most
    Python memory blocks (objects of any kind) and references to ``strings`` alive at any of those lines, beyond
    those alive at the start."""
    package = os.path.dirname(jaxtrees.__file__) + os.sep
    strings = list(strings)
    count, top = [0], [0, 0]

    def line(frame, event, arg):
        if event == "line":
            count[0] += 1
            top[0] = max(top[0], sys.getallocatedblocks())
            top[1] = max(top[1], sum(map(sys.getrefcount, strings)))
        return line

    gc.collect()
    blocks, refs = sys.getallocatedblocks(), sum(map(sys.getrefcount, strings))
    top[:] = blocks, refs
    previous = sys.gettrace()
    sys.settrace(lambda frame, event, arg: line if frame.f_code.co_filename.startswith(package) else None)
    try:
        result = fn()
    finally:
        sys.settrace(previous)
    return result, count[0], top[0] - blocks, top[1] - refs


def _store_like(cells: list[dict], trials: int, axis: str, values, outputs) -> Table:
    """Rows as a run's store reads them back: ``cells`` x replicates (``trials`` at least in all) x the ``axis``
    ``values``, parameters as :class:`ByCell` columns, ``outputs(rng, cells, replicates, values)`` per row."""
    replicates, size = -(-trials // len(cells)), len(values)
    columns = {"cell": np.repeat(np.arange(len(cells), dtype=np.int32), replicates * size),
               "replicate": np.tile(np.repeat(np.arange(replicates, dtype=np.int32), size), len(cells)),
               axis: np.tile(np.asarray(values, np.int32), len(cells) * replicates)}
    for name in cells[0]:
        distinct = sorted({cell[name] for cell in cells})
        columns[name] = ByCell(np.asarray(distinct, object if isinstance(distinct[0], str) else None),
                               np.asarray([distinct.index(cell[name]) for cell in cells], np.int32))
    rng = np.random.default_rng(trials)
    out = outputs(rng, len(cells), replicates, np.asarray(values, np.float64))
    return Table({**columns, **{name: np.asarray(v, np.float32 if v.dtype.kind == "f" else None)
                                for name, v in out.items()}})


def _grid(**axes) -> list[dict]:
    cells = [{}]
    for name, values in axes.items():
        cells = [{**cell, name: value} for cell in cells for value in (values if isinstance(values, list) else [values])]
    return cells


def _per_trial(rng, trials: int, size: int, low=0.0, high=1.0):
    """A value per trial, on each of its ``size`` rows."""
    return np.repeat(rng.uniform(low, high, trials), size)


def _boosting(trials: int) -> Table:
    def outputs(rng, cells, replicates, rounds):
        n = cells * replicates * rounds.size
        out = {"forest_test_error": rng.uniform(0, 0.3, n)}
        for weak in ("stumps", "parity2", "cart16"):
            train = rng.uniform(0, 0.2, n)
            out |= {f"{weak}_test_error": rng.uniform(0, 0.3, n), f"{weak}_train_error": train,
                    f"{weak}_gamma": rng.uniform(0.91, 1.0, n), f"{weak}_bound": train + rng.uniform(0, 0.5, n)}
        return out | {f"parity3_{what}": np.full(n, np.nan) for what in ("test_error", "train_error", "gamma", "bound")}

    # edges near 1: ceil(2 ln m / gamma^2) <= 12 rounds on these data sets (m = 100), reached by every split
    cells = _grid(data=["ecoli", "heart"], rounds=12, max_degree=2, forest_depth=10)
    return _store_like(cells, trials, "round", list(range(1, 13)), outputs)


def _paths(rng, cells, replicates, depths, memory: str):
    """Outputs of the exact path-mode studies (addressing, agnostic)."""
    n, trials = cells * replicates * depths.size, cells * replicates
    gains = np.where(rng.random(n) < 0.5, np.nan, 1.0)
    return {"error": rng.uniform(0.1, 0.5, n), "first_address_depth": np.repeat(rng.integers(-1, 9, trials), depths.size),
            memory: np.repeat(rng.integers(0, 2, trials), depths.size), "memory_gain_min": gains * rng.uniform(1e-4, 1e-2, n),
            "address_gain_max": gains * rng.uniform(1e-9, 1e-6, n)}


def _agnostic(trials: int) -> Table:
    def outputs(rng, cells, replicates, depths):
        return {**_paths(rng, cells, replicates, depths, "free_first"),
                "distance_to_junta": _per_trial(rng, cells * replicates, depths.size, 0.0, 0.01)}

    return _store_like(_grid(k=[4, 5], c=7, eps=[0.5, 1.0], s=0.25, impurity="gini"), trials, "depth", [0, 1, 2, 4],
                       outputs)


def _addressing(trials: int) -> Table:
    return _store_like(_grid(k=[3, 4], c=[1, 7], code="block", s=0.25, impurity=["entropy", "gini"]), trials, "depth",
                       [0, 1, 2, 4, 8], lambda *args: _paths(*args, "memory_first"))


def _smoothed_base(trials: int) -> Table:
    def outputs(rng, cells, replicates, m):
        n, trials_ = cells * replicates * m.size, cells * replicates
        success = rng.random(n) < np.tile(m / m.max(), trials_)
        return {"exact_error": np.where(success, 0.0, rng.uniform(0.01, 0.3, n)), "success": success,
                "support_recovered": success & (rng.random(n) < 0.9),
                "eps_star": np.where(_per_trial(rng, trials_, m.size) < 0.05, 0.0, _per_trial(rng, trials_, m.size,
                                                                                              0.001, 0.2)),
                "p_min": _per_trial(rng, trials_, m.size, 0.01, 0.3), "root_signal": _per_trial(rng, trials_, m.size,
                                                                                                0.0, 0.1)}

    cells = _grid(n=16, k=[2, 4], base=["critical", "half"], c=[0.0, 0.1], impurity=["entropy", "gini"], m_min=16,
                  m_max=64)
    return _store_like(cells, trials, "m", [16, 32, 64], outputs)


#: Each study's rows of a given number of trials, its report function (text) and figures (files), and the trials of
#: the small and the large table (boosting's trials have 12 rows each).
CASES = {"boosting": (_boosting, studies.STUDIES["boosting"].report, studies.STUDIES["boosting"].plot, 20_000),
         "agnostic": (_agnostic, counterexamples_report.agnostic_report, counterexamples_report.agnostic_plot, 100_000),
         "addressing": (_addressing, counterexamples_report.addressing_report, counterexamples_report.gains_plot,
                        100_000),
         "smoothed-base": (_smoothed_base, studies.STUDIES["smoothed-base"].report,
                           studies.STUDIES["smoothed-base"].plot, 100_000)}
SMALL = 1_000


def _strings(rows) -> list:
    """The distinct strings of the table's string columns (the objects a row would refer to)."""
    return [v for name in rows.names if rows.dtype(name) == object for v in tables.factorize(rows, name)[1].tolist()]


def _grows(work, study: str) -> dict:
    """Per measure of :func:`_cost`, its growth from the small table to the large one (both after a warm-up), and the
    trials between them."""
    small, large = (CASES[study][0](trials) for trials in (SMALL, CASES[study][3]))
    work(CASES[study][0](100))  # data sets loaded, first-use caches filled
    costs = [_cost(lambda: work(rows), _strings(rows))[1:] for rows in (small, large)]
    return {what: b - a for what, a, b in zip(("lines", "blocks", "refs"), *costs)}, CASES[study][3] - SMALL


def test_the_measure_sees_a_python_line_an_object_and_a_reference_per_trial():
    """The instrument of the tests below: a key per trial (tuples), a column of a string per row (references) and a
    Python loop over rows each show up in its measure."""
    rows = _smoothed_base(10_000)
    trials, strings = len(rows) // 3, _strings(rows)
    assert _cost(lambda: tables.groups(rows, ["cell", "replicate"]), strings)[2] > trials
    assert _cost(lambda: rows["impurity"], strings)[3] >= len(rows)
    assert _cost(lambda: Table.from_rows([{"x": 1.5}] * trials), strings)[1] > trials


@pytest.mark.parametrize("study", list(CASES))
def test_a_reports_python_work_and_objects_do_not_grow_with_its_trials(study):
    """The report's text from 10^3 and 10^5 trials (boosting: 2 10^4): the Python lines it runs, the Python objects
    and the references to the rows' strings it holds grow by less than one per 20 trials (per-trial keys, lists or
    object arrays would add one or more per trial)."""
    growth, more = _grows(CASES[study][1], study)
    assert all(value < more / 20 for value in growth.values()), growth


@pytest.mark.parametrize("study", list(CASES))
def test_a_figures_python_work_and_objects_do_not_grow_with_its_trials(study, tmp_path, monkeypatch):
    """The same for the study's figures, drawn in this process and not written (matplotlib's rendering draws what the
    figure holds, a bounded number of lines and the points it plots)."""
    monkeypatch.setenv("JAXTREES_FIGURE_FORK", "0")
    monkeypatch.setattr(saving, "save", lambda fig, stem: [f"{stem}.png"])
    growth, more = _grows(lambda rows: CASES[study][2](rows, str(tmp_path / "figure")), study)
    assert all(value < more / 20 for value in growth.values()), growth


@pytest.mark.parametrize("study", list(CASES))
def test_a_report_reads_the_same_from_parameters_by_cell_and_from_plain_columns(study):
    """The report's text is the same from a store's rows (parameters by cell) and from the same rows given column by
    column (strings as str arrays): the codes stand for the values alike."""
    rows = CASES[study][0](300)
    plain = Table({name: np.asarray(rows[name], str) if rows.dtype(name) == object else np.array(rows[name])
                   for name in rows.names})
    assert CASES[study][1](plain) == CASES[study][1](rows)


def test_jt_run_s_arrow_table_keeps_strings_as_dictionary_arrays():
    """reading.to_arrow (what jt.run returns): a Dictionary column and a run's string parameter become dictionary arrays
    from their codes, with the same values as the plain columns; numbers stay as they are."""
    table = _trials(50, per_trial=2).with_columns(
        learner=tables.Dictionary(np.arange(800) % 3, np.asarray(["a", "b", "c"], object)))
    arrow = reading.to_arrow(table)
    for name in ("impurity", "learner"):
        assert pa.types.is_dictionary(arrow.schema.field(name).type), name
        assert arrow.column(name).to_pylist() == list(table[name]), name
    assert arrow.column("m").to_pylist() == table["m"].tolist() and arrow.column("k").to_pylist() == table["k"].tolist()
