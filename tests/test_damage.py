"""Damage contained (issue 64): each part's whole file is checksummed (its name carries the CRC-32), a damaged part
is moved beside rows/ (readers of rows/ see whole parts only), a reader names it; export says what it writes."""

import io
import pathlib
import shutil
import sys
import zlib

import numpy as np
import pytest

from jaxtrees import cli
from jaxtrees.experiments import studies
from jaxtrees.experiments.results import reading
from jaxtrees.experiments.run import runner

OVERRIDES = {"n": 8, "k": 2, "c": "0,0.2", "impurity": "entropy", "m_min": 16, "m_max": 64, "replicates": 3}


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    out = tmp_path_factory.mktemp("finished")
    study = studies.get("juntas")
    return runner.run(study, runner.configure(study, quick=True, overrides=OVERRIDES), str(out), progress=False)


def _copy(finished, tmp_path):
    directory = tmp_path / "juntas"
    shutil.copytree(finished, directory)
    [part] = sorted((directory / "rows").glob("part-*.parquet"))
    return directory, part


def test_a_part_carries_its_whole_file_checksum_in_its_name(finished):
    from pathlib import Path

    for part in Path(finished, "rows").glob("part-*.parquet"):
        assert part.name.endswith(f"-c{zlib.crc32(part.read_bytes()):08x}.parquet")


def test_every_single_bit_flip_is_refused_naming_the_part_never_other_rows(finished, tmp_path):
    """Every 5th byte of the footer x 8 bits, and 200 data bytes: each read is a ValueError naming the part."""
    import pyarrow.parquet as pq

    directory, part = _copy(finished, tmp_path)
    data = part.read_bytes()
    footer = int.from_bytes(data[-8:-4], "little") + 8
    positions = [(i, bit) for i in range(len(data) - footer, len(data), 5) for bit in range(8)]
    rng = np.random.default_rng(0)
    positions += [(int(i), int(rng.integers(8))) for i in rng.integers(4, len(data) - footer, 200)]
    assert pq.read_metadata(part).num_rows and len(positions) > 200
    for i, bit in positions:
        part.write_bytes(data[:i] + bytes([data[i] ^ (1 << bit)]) + data[i + 1:])
        with pytest.raises(ValueError, match=f"{part.name} is damaged"):
            reading.export_csv(str(directory), str(tmp_path / "out.csv"))
    assert not (tmp_path / "out.csv").exists()


def test_a_damaged_part_moves_beside_rows_and_pandas_reads_rows_whole(finished, tmp_path, capsys):
    pandas = pytest.importorskip("pandas")
    directory, part = _copy(finished, tmp_path)
    data = part.read_bytes()
    part.write_bytes(data[:100] + bytes([data[100] ^ 1]) + data[101:])
    capsys.readouterr()
    assert cli.main(["run", "juntas", "--quick", "--out", str(tmp_path), "--no-progress",
                     *[f"--set={k}={v}" for k, v in OVERRIDES.items()]]) == 0
    assert f"{part} is damaged" in capsys.readouterr().err
    assert (directory / "damaged" / part.name).exists() and not part.exists()
    frame = pandas.read_parquet(directory / "rows")
    assert len(frame) == len(reading.read_results(str(finished)))
    assert not frame.duplicated(["cell", "replicate", "m"]).any()


def test_export_writes_stdout_refuses_a_directory_and_an_unfinished_run(finished, tmp_path, capsys, monkeypatch):
    directory, part = _copy(finished, tmp_path)
    out = io.BytesIO()
    wrapper = io.TextIOWrapper(out)
    monkeypatch.setattr(sys, "stdout", wrapper)
    assert cli.main(["export", str(directory), "--csv", "-"]) == 0
    wrapper.flush()
    text = out.getvalue().decode()
    monkeypatch.undo()
    assert text.startswith('"study","seed","cell"') and text.count("\n") == len(reading.read_results(str(directory))) + 1
    assert not (tmp_path / "-").exists()
    assert cli.main(["export", str(directory), "--csv", str(tmp_path)]) == 2
    assert f"--csv {tmp_path} is a directory" in capsys.readouterr().err
    assert not list(tmp_path.glob("*.tmp"))
    study = studies.get("juntas")
    unfinished = runner.run(study, runner.configure(study, quick=True, overrides=OVERRIDES), str(tmp_path / "partial"),
                            progress=False, max_trials=2)
    assert cli.main(["export", unfinished]) == 2
    err = capsys.readouterr().err
    assert "holds 2 of its 6 trials" in err and "pass --partial" in err
    assert cli.main(["export", unfinished, "--partial"]) == 0


def test_convert_does_not_take_an_export_for_old_rows(finished, tmp_path, capsys):
    directory, _ = _copy(finished, tmp_path)
    assert cli.main(["export", str(directory)]) == 0
    parts = sorted(p.name for p in (directory / "rows").glob("part-*"))
    assert cli.main(["convert", str(directory)]) == 2
    assert "its results.csv is an export" in capsys.readouterr().err
    assert sorted(p.name for p in (directory / "rows").glob("part-*")) == parts


def _legacy(finished, tmp_path, drop=None):
    """``finished`` rewritten in the earlier CSV layout (parts/*.csv, parts/config.json), a column dropped if asked."""
    import json

    old = tmp_path / "old" / "juntas"
    shutil.copytree(finished, old)
    text = reading.export_csv(str(old), str(tmp_path / "rows.csv"))
    lines = open(text).read().replace('"', "").splitlines(keepends=True)
    if drop is not None:
        at = lines[0].rstrip("\n").split(",").index(drop)
        lines = [",".join(v for i, v in enumerate(line.rstrip("\n").split(",")) if i != at) + "\n" for line in lines]
    shutil.rmtree(old / "rows")
    (old / "parts").mkdir()
    config = json.loads((old / "metadata.json").read_text())
    (old / "metadata.json").write_text(json.dumps({k: v for k, v in config.items() if k != "contract"}))
    (old / "parts" / "config.json").write_text(json.dumps({"config": config["config"]}))
    (old / "parts" / "0001.csv").write_text("".join(lines))
    return old


def test_convert_refuses_rows_lacking_a_column_before_writing_and_records_a_contract(finished, tmp_path, capsys):
    import json

    old = _legacy(finished, tmp_path, drop="eps_star")
    assert cli.main(["convert", str(old)]) == 2
    assert "lack the column(s) eps_star" in capsys.readouterr().err and not list(old.glob("rows/part-*"))
    old = _legacy(finished, tmp_path / "whole")
    (old / "rows").mkdir()  # an interrupted convert: its part written, the CSV rows still there
    for part in pathlib.Path(finished).glob("rows/part-*.parquet"):
        shutil.copy(part, old / "rows" / part.name)
    assert cli.main(["convert", str(old)]) == 0
    said = capsys.readouterr().out
    assert "parts/0001.csv" in said and "removed 1 part(s) of an interrupted convert" in said
    assert "recorded this machine's resume contract" in said
    assert json.loads((old / "metadata.json").read_text())["contract"]["source"]
    assert len(reading.read_results(str(old))) == len(reading.read_results(str(finished)))


def test_a_damaged_config_file_is_rebuilt_from_metadata_and_the_advice_leads_somewhere(finished, tmp_path, capsys):
    directory, _ = _copy(finished, tmp_path)
    rows = len(reading.read_results(str(directory)))
    (directory / "rows" / "_config.json").write_text("{not json")
    assert len(reading.read_results(str(directory))) == rows  # readers fall back to metadata.json
    capsys.readouterr()
    assert cli.main(["run", "juntas", "--quick", "--out", str(tmp_path), "--no-progress",
                     *[f"--set={k}={v}" for k, v in OVERRIDES.items()]]) == 0
    assert "_config.json was damaged: rebuilt from metadata.json" in capsys.readouterr().err
    assert '"config"' in (directory / "rows" / "_config.json").read_text()
    (directory / "rows" / "_config.json").write_text("{not json")
    (directory / "metadata.json").write_text("{not json")
    assert cli.main(["report", str(directory)]) == 2
    err = capsys.readouterr().err
    assert "no readable rows/_config.json to rebuild it from" in err and "delete that file and rerun" not in err


def test_a_resealed_part_whose_axis_values_are_wrong_is_refused(finished, tmp_path):
    """A part rewritten with a valid checksum but m = 16 twice and no m = 32 in a trial is refused by name."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    import helpers

    directory, part = _copy(finished, tmp_path)
    table = pq.read_table(part)
    m = table.column("m").to_pylist()
    m[1] = m[0]
    pq.write_table(table.set_column(table.column_names.index("m"), "m", pa.array(m, pa.int32())), part)
    part = helpers.resealed(part)
    with pytest.raises(ValueError, match=f"{part.name}: a row whose m is not its trial's"):
        reading.read_results(str(directory))
