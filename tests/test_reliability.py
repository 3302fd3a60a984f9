"""Issue 35: nothing silently wrong, nothing stuck. Damaged or relabelled results directories,
mismatched sizes, names that do not say what ran, and bad command lines give a clear error or a
correct result."""

import json
import os
import shutil

import pytest

from jaxtrees import cli

TINY = ["--quick", "--set", "n=8", "--set", "k=2", "--set", "c=0,0.2", "--set", "m_min=16", "--set", "m_max=64",
        "--set", "replicates=6", "--no-progress"]


def _run(out, *extra, **values):
    """The tiny juntas run into ``out`` with ``extra`` arguments and some --set values replaced."""
    tiny = [f"{a.partition('=')[0]}={values[a.partition('=')[0]]}" if a.partition("=")[0] in values else a
            for a in TINY]
    return cli.main(["run", "juntas", "--out", str(out), *tiny, *extra])


def test_a_directory_without_metadata_is_rebuilt_from_its_parts_or_refused(tmp_path, capsys):
    """Case 1: with metadata.json deleted, another configuration is refused (it once relabelled the
    old rows as its own), the same one rebuilds the metadata, and parts of an unknown one are refused."""
    directory = tmp_path / "juntas"
    assert _run(tmp_path) == 0
    results = (directory / "results.csv").read_bytes()
    (directory / "metadata.json").unlink()
    capsys.readouterr()
    assert _run(tmp_path, "--seed", "1", c=0.2) == 2
    assert "holds a run of another configuration (see its parts/config.json)" in capsys.readouterr().err
    assert not (directory / "metadata.json").exists() and (directory / "results.csv").read_bytes() == results

    assert _run(tmp_path) == 0
    assert "metadata.json was missing: rebuilt from parts/config.json" in capsys.readouterr().err
    metadata = json.loads((directory / "metadata.json").read_text())
    assert metadata["config"]["seed"] == 0 and metadata["config"]["grid"]["c"] == [0.0, 0.2]
    assert (directory / "results.csv").read_bytes() == results

    (directory / "metadata.json").unlink()
    (directory / "parts" / "config.json").unlink()
    assert _run(tmp_path, "--seed", "1") == 2
    assert "holds rows of an unknown configuration" in capsys.readouterr().err


def test_a_part_cut_short_runs_again_and_a_damaged_one_is_named(tmp_path, capsys):
    """Case 5: a part whose last line is unfinished is moved aside with a warning and its trials run
    again (the same rows); a garbage line is an error naming the file and line, results.csv is left
    as it was, and moving the file out (the documented way out) lets the run finish."""
    directory = tmp_path / "juntas"
    assert _run(tmp_path) == 0
    results = (directory / "results.csv").read_bytes()
    [part] = (directory / "parts").glob("*.csv")
    part.write_bytes(part.read_bytes()[:-3])
    capsys.readouterr()
    assert _run(tmp_path) == 0
    err = capsys.readouterr().err
    assert f"{part} ends in an unfinished line" in err and "its trials run again" in err
    assert (directory / "results.csv").read_bytes() == results
    assert os.path.exists(f"{part}.unfinished")

    [part] = (directory / "parts").glob("*.csv")
    lines = part.read_text().splitlines(keepends=True)
    part.write_text("".join(lines[:2] + ["garbage\n"] + lines[2:]))
    assert _run(tmp_path) == 2
    err = capsys.readouterr().err
    assert f"{part}, line 3: 1 fields where the header has" in err and "move the file out" in err
    assert (directory / "results.csv").read_bytes() == results

    shutil.move(part, tmp_path / "aside.csv")
    assert _run(tmp_path) == 0
    assert (directory / "results.csv").read_bytes() == results


def test_a_row_that_is_not_this_runs_is_an_error(tmp_path, capsys):
    """Case 5: every row read back is checked against the run's configuration (its last row here:
    cell 1, c = 0.2, replicate 5)."""
    directory = tmp_path / "juntas"
    assert _run(tmp_path) == 0
    [part] = (directory / "parts").glob("*.csv")
    header, *rows = part.read_text().splitlines(keepends=True)
    assert header == "study,seed,cell,replicate,c,impurity,k,m_max,m_min,n,m,exact_error,success,support_recovered\n"
    last = rows[-1].split(",")
    for column, value, message in [(11, "x", "exact_error must be a number, got 'x'"),
                                   (1, "1", "a row of study 'juntas', seed '1'; this run is study 'juntas', seed 0"),
                                   (4, "0.0", "cell 1 has c=0.0, impurity=entropy"),
                                   (2, "9", "cell 9, replicate 5 is not a trial of this run (2 cells x 6 replicates)"),
                                   (3, "-1", "cell and replicate must be integers >= 0, got '1' and '-1'")]:
        damaged = last[:column] + [value] + last[column + 1:]
        part.write_text(header + "".join(rows[:-1]) + ",".join(damaged))
        capsys.readouterr()
        assert _run(tmp_path) == 2
        assert f"{part}, line {len(rows) + 1}: {message}" in capsys.readouterr().err


def test_report_and_plot_on_a_damaged_results_file_or_an_unwritable_directory(tmp_path, capsys):
    """Case 6: a header-only or damaged results.csv is a clear error (once TypeError / ZeroDivisionError
    tracebacks); a report that cannot be written is still printed; figures that cannot be written are an error."""
    directory = tmp_path / "juntas"
    assert _run(tmp_path) == 0
    results = directory / "results.csv"
    text = results.read_text()
    header, *lines = text.splitlines(keepends=True)
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

    results.write_text(header)
    for command in ("report", "plot"):
        assert cli.main([command, str(directory)]) == 2
        assert f"no results in {results}" in capsys.readouterr().err
    results.write_text(header + lines[0] + "1,2,3\n" + "".join(lines[1:]))
    for command in ("report", "plot"):
        assert cli.main([command, str(directory)]) == 2
        assert f"{results}, line 3: 3 fields where the header has 14" in capsys.readouterr().err
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
