"""rows/ holds only the run's own whole parts: a resume reads its contract from both copies, a part refused for any
reason (another configuration, a duplicate, a bad footer) and any foreign file are moved out of rows/, named; NaN and
inf outputs are kept by every read."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import jaxtrees as jt
from jaxtrees import cli
from jaxtrees.experiments import studies
from jaxtrees.experiments.results import reading
from jaxtrees.experiments.run import runner
from test_damage import OVERRIDES, finished  # noqa: F401 (the finished run both files damage copies of)

TINY = ["--set", "n=8", "--set", "k=2", "--set", "c=0,0.2", "--set", "impurity=entropy", "--set", "m_min=16",
        "--set", "m_max=64", "--set", "replicates=3", "--no-progress"]


def _copy(finished, tmp_path):
    directory = tmp_path / "juntas"
    shutil.copytree(finished, directory)
    return directory


def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "jaxtrees.cli", *args], env={**os.environ, **(env or {})},
                          capture_output=True, text=True)


@pytest.mark.parametrize("copy", ["metadata.json", "rows/_config.json"])
def test_a_resume_whose_contract_is_missing_from_one_copy_is_refused_never_a_fresh_start(tmp_path, copy):
    """Reproduced first: with metadata.json's "contract" deleted, a resume under JAX_RANDOM_SEED_OFFSET=1 exited 0 and
    mixed rows of two seeds' streams."""
    study = studies.get("juntas")
    runner.run(study, runner.configure(study, quick=True, overrides=OVERRIDES), str(tmp_path), progress=False,
               max_trials=2)
    before = len(reading.read_results(str(tmp_path / "juntas")))
    path = tmp_path / "juntas" / copy
    recorded = json.loads(path.read_text())
    del recorded["contract"]
    path.write_text(json.dumps(recorded))
    done = _cli("run", "juntas", "--quick", "--out", str(tmp_path), *TINY, env={"JAX_RANDOM_SEED_OFFSET": "1"})
    assert done.returncode == 2, done.stderr
    assert f"{copy} records no contract" in done.stderr and "--allow-changes" in done.stderr
    assert len(reading.read_results(str(tmp_path / "juntas"))) == before  # nothing more written


def test_parts_of_another_configuration_a_duplicate_and_a_foreign_file_leave_rows(finished, tmp_path, capsys):
    directory = _copy(finished, tmp_path)
    rows = directory / "rows"
    [part] = sorted(rows.glob("part-*.parquet"))
    other = tmp_path / "other"
    study = studies.get("juntas")
    runner.run(study, runner.configure(study, quick=True, overrides={**OVERRIDES, "replicates": 2}), str(other),
               progress=False)
    [foreign_part] = sorted((other / "juntas" / "rows").glob("part-*.parquet"))
    shutil.copy(foreign_part, rows / foreign_part.name)
    duplicate = rows / part.name.replace("part-0", "part-1", 1)  # the same rows under a later name
    shutil.copy(part, duplicate)
    (rows / "notes.parquet").write_bytes(part.read_bytes())
    (rows / "README.txt").write_text("my notes")
    with pytest.raises(ValueError, match="a part of another configuration"):
        reading.read_results(str(directory))
    capsys.readouterr()
    assert cli.main(["run", "juntas", "--quick", "--out", str(tmp_path), *TINY]) == 0
    err = capsys.readouterr().err
    assert sorted(p.name for p in rows.iterdir()) == ["_config.json", part.name]
    for name in ("notes.parquet", "README.txt", foreign_part.name):
        assert (directory / "foreign" / name).exists() and name in err
    assert (directory / "damaged" / duplicate.name).exists() and "another part holds" in err
    assert len(reading.read_results(str(directory))) == len(reading.read_results(str(finished)))
    import pandas as pd

    assert len(pd.read_parquet(rows)) == len(reading.read_results(str(finished)))


def test_an_old_format_part_with_a_bad_footer_is_named_and_moved(finished, tmp_path, capsys):
    """A part without the CRC in its name (an earlier version's): its footer's bytes not UTF-8."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    directory = _copy(finished, tmp_path)
    [part] = sorted((directory / "rows").glob("part-*.parquet"))
    table = pq.read_table(part)
    old = part.with_name(part.name.split("-c")[0] + ".parquet")
    pq.write_table(table.replace_schema_metadata({b"jaxtrees": b"\xff\xfe{"}), old, write_page_checksum=True)
    part.unlink()
    with pytest.raises(ValueError, match=f"{old.name} is damaged") as error:
        reading.read_results(str(directory))
    assert "utf-8" not in str(error.value) or old.name in str(error.value)
    capsys.readouterr()
    assert cli.main(["run", "juntas", "--quick", "--out", str(tmp_path), *TINY]) == 0
    assert old.name in capsys.readouterr().err and (directory / "damaged" / old.name).exists()
    assert pa.__version__ and len(reading.read_results(str(directory))) == len(reading.read_results(str(finished)))


def test_a_flipped_data_byte_of_an_old_format_part_is_refused_by_its_page_checksum(finished, tmp_path):
    """Page checksums (written since the Parquet store) are verified by the reader: a part without a whole-file CRC in
    its name is still refused on one flipped data byte."""
    import pyarrow.parquet as pq

    directory = _copy(finished, tmp_path)
    [part] = sorted((directory / "rows").glob("part-*.parquet"))
    old = part.with_name(part.name.split("-c")[0] + ".parquet")
    part.rename(old)
    data = bytearray(old.read_bytes())
    meta = pq.read_metadata(old)
    column = meta.row_group(0).column(meta.schema.names.index("success"))
    at = column.data_page_offset + (column.total_compressed_size // 2)
    data[at] ^= 0x10
    old.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=f"{old.name} is damaged"):
        reading.read_results(str(directory))


def test_nan_and_inf_outputs_are_read_and_counted_never_dropped(tmp_path):
    import jax.numpy as jnp

    def trial(key, params):
        """Outputs nan, inf and -inf by cell."""
        value = jnp.where(params["c"] == 0.0, jnp.nan, jnp.where(params["c"] == 1.0, jnp.inf, -jnp.inf))
        return {"value": value.astype(jnp.float32), "success": jnp.bool_(True)}

    study = jt.Study(name="nonfinite", trial=trial, grid={"c": [0.0, 1.0, 2.0]}, replicates=3)
    jt.run(study, out=str(tmp_path), quick=True)
    rows = reading.read_results(str(tmp_path / "nonfinite"))
    assert len(rows) == 9
    value = np.asarray(rows["value"])
    assert np.isnan(value).sum() == 3 and (value == np.inf).sum() == 3 and (value == -np.inf).sum() == 3
    assert reading.completeness(str(tmp_path / "nonfinite"), rows) == (9, 9)
    csv = reading.export_csv(str(tmp_path / "nonfinite"), str(tmp_path / "out.csv"))
    assert len(open(csv).read().splitlines()) == 10


def test_a_reader_names_foreign_files_in_rows_and_leaves_them_out(finished, tmp_path, capsys):
    directory = _copy(finished, tmp_path)
    (directory / "rows" / "notes.csv").write_text("a,b\n1,2\n")
    assert len(reading.read_results(str(directory))) == len(reading.read_results(str(finished)))
    assert "holds files not of the run (notes.csv)" in capsys.readouterr().err
