"""Issue 35: nothing silently wrong, nothing stuck. Damaged or relabelled results directories,
mismatched sizes, names that do not say what ran, and bad command lines give a clear error or a
correct result."""

import json
import os
import shutil

import pytest

import helpers

from jaxtrees import cli
from jaxtrees.experiments.results import reading

TINY = ["--quick", "--set", "n=8", "--set", "k=2", "--set", "c=0,0.2", "--set", "impurity=entropy", "--set", "m_min=16",
        "--set", "m_max=64", "--set", "replicates=6", "--no-progress"]


def _run(out, *extra, **values):
    """The tiny juntas run into ``out`` with ``extra`` arguments and some --set values replaced."""
    tiny = [f"{a.partition('=')[0]}={values[a.partition('=')[0]]}" if a.partition("=")[0] in values else a
            for a in TINY]
    return cli.main(["run", "juntas", "--out", str(out), *tiny, *extra])


def _columns(directory) -> dict:
    table = reading.read_results(str(directory))
    return {name: table[name].tolist() for name in table.names}


def test_a_directory_without_metadata_is_rebuilt_from_its_parts_or_refused(tmp_path, capsys):
    """Case 1: with metadata.json deleted, another configuration is refused (it once relabelled the
    old rows as its own), the same one rebuilds the metadata, and parts of an unknown one are refused."""
    directory = tmp_path / "juntas"
    assert _run(tmp_path) == 0
    rows = _columns(directory)
    (directory / "metadata.json").unlink()
    capsys.readouterr()
    assert _run(tmp_path, "--seed", "1", c=0.2) == 2
    assert "holds a run of another configuration (seed 0, not 1; see its rows/_config.json)" in capsys.readouterr().err
    assert not (directory / "metadata.json").exists() and _columns(directory) == rows

    assert _run(tmp_path) == 0
    assert "metadata.json was missing or damaged: rebuilt from rows/_config.json" in capsys.readouterr().err
    metadata = json.loads((directory / "metadata.json").read_text())
    assert metadata["config"]["seed"] == 0 and metadata["config"]["grid"]["c"] == [0.0, 0.2]
    assert _columns(directory) == rows

    (directory / "metadata.json").unlink()
    (directory / "rows" / "_config.json").unlink()
    assert _run(tmp_path, "--seed", "1") == 2
    assert "holds rows of an unknown configuration" in capsys.readouterr().err


def _damaged_copy(part, column: str, change):
    """Rewrite a part with one column changed (``change(values) -> values``), its own record of its rows kept."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(part)
    i = table.column_names.index(column)
    values = change(table.column(i).to_pylist())
    table = table.set_column(i, column, pa.array(values))
    pq.write_table(table, part)
    return helpers.resealed(part)


@pytest.mark.parametrize("column, change, message", [
    ("exact_error", lambda v: [str(x) for x in v], "column exact_error must hold numbers, got string"),
    ("seed", lambda v: v[:-1] + [1], "a row of another seed (this run's is 0)"),
    ("c", lambda v: v[:-1] + [0.1], "a row whose c is not its cell's"),
    ("cell", lambda v: v[:-1] + [9], "a trial outside this run's 2 cells x 6 replicates"),
    ("replicate", lambda v: v[:-1] + [-1], "cell and replicate must be integers >= 0"),
], ids=["output", "seed", "parameter", "cell", "replicate"])
def test_a_row_that_is_not_this_runs_is_refused_by_a_reader_and_run_again_by_a_run(tmp_path, capsys, column, change,
                                                                                   message):
    """Case 5: every row read back is checked against the run's configuration (its last row here): ``report``
    refuses the part, naming it and what is wrong; ``run`` moves it aside with that reason and runs its trials again."""
    directory = tmp_path / "juntas"
    assert _run(tmp_path) == 0
    rows = _columns(directory)
    [part] = (directory / "rows").glob("part-*.parquet")
    part = _damaged_copy(part, column, change)
    capsys.readouterr()
    assert cli.main(["report", str(directory)]) == 2
    err = capsys.readouterr().err
    assert str(part) in err and message in err, err
    assert _run(tmp_path) == 0
    err = capsys.readouterr().err
    assert f"{part} is damaged" in err and message in err and "its trials run again" in err
    assert _columns(directory) == rows


def test_report_and_plot_on_damaged_rows_or_an_unwritable_directory(tmp_path, capsys):
    """Case 6: no rows, or a part that is not Parquet, is a clear error naming it; a report that cannot be written
    is still printed; figures that cannot be written are an error; a damaged metadata.json says how to rebuild it."""
    directory = tmp_path / "juntas"
    assert _run(tmp_path) == 0
    (directory / "report.md").unlink()
    (directory / "report.md").mkdir()  # cannot be written, even by root
    capsys.readouterr()
    assert cli.main(["report", str(directory)]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("# jaxtrees study `juntas`") and f"cannot write {directory / 'report.md'}" in err
    for name in ("juntas.png", "juntas.svg"):
        (directory / name).unlink()
    (directory / "juntas.png").mkdir()
    assert cli.main(["plot", str(directory)]) == 2
    assert f"cannot write the figures juntas.png / .svg in {directory}" in capsys.readouterr().err

    [part] = (directory / "rows").glob("part-*.parquet")
    shutil.move(part, tmp_path / "aside.parquet")
    for command in ("report", "plot"):
        assert cli.main([command, str(directory)]) == 2
        assert f"no results in {directory}" in capsys.readouterr().err
    part.write_text("study,seed,cell\njuntas,0,0\n")
    for command in ("report", "plot"):
        assert cli.main([command, str(directory)]) == 2
        assert f"{part} is damaged" in capsys.readouterr().err
    (directory / "metadata.json").write_text("{")
    assert cli.main(["report", str(directory)]) == 2
    assert f"cannot read {directory / 'metadata.json'}" in capsys.readouterr().err


@pytest.mark.parametrize("args, message", [
    (["--set", "m_min=1024", "--set", "m_max=64"], "m_min must be <= m_max, got m_min = 1024 and m_max = 64 (in the cell "),
    (["--set", "k=3", "--set", "k=4"], "--set k is given twice (k=3 and k=4); give it once, with a comma-separated "
                                       "list for a grid (--set k=3,4)"),
    (["--set", " k =3", "--set", "k=4"], "--set k is given twice"),
])
def test_command_line_mistakes_are_refused(tmp_path, capsys, args, message):
    """Case 7: a bound that comes from another parameter names it (the cell lists m_min=1024); a
    repeated --set once kept the last value silently."""
    assert cli.main(["run", "juntas", "--quick", "--out", str(tmp_path), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and ("m_min=1024" in err or "m_min" not in message)
    assert not (tmp_path / "juntas").exists()


def test_an_empty_out_is_refused(tmp_path, capsys, monkeypatch):
    """Case 7: --out= once wrote into ./juntas."""
    monkeypatch.chdir(tmp_path)
    for out in (["--out="], ["--out", " "]):
        assert cli.main(["run", "juntas", "--quick", *out, "--set", "k=3"]) == 2
        assert "--out must name a directory (default: results), got an empty value" in capsys.readouterr().err
    assert os.listdir(tmp_path) == []
