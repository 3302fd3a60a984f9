"""The columnar store: Parquet parts read anywhere, promises that hold on resuming, damage found, old CSV read."""

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import helpers

from jaxtrees import cli
from jaxtrees.experiments import studies
from jaxtrees.experiments.results import reading, store
from jaxtrees.experiments.run import job, runner
from jaxtrees.experiments.table import Table

TINY = ["--set", "n=8", "--set", "k=2", "--set", "c=0,0.2", "--set", "impurity=entropy", "--set", "m_min=16",
        "--set", "m_max=64", "--set", "replicates=6", "--no-progress"]
OVERRIDES = {"n": 8, "k": 2, "c": "0,0.2", "impurity": "entropy", "m_min": 16, "m_max": 64, "replicates": 6}


def _columns(directory) -> dict:
    table = reading.read_results(str(directory))
    return {name: table[name].tolist() for name in table.names}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("reference")
    assert cli.main(["run", "juntas", "--quick", "--out", str(out), *TINY]) == 0
    return out / "juntas"


def _cli(*args, env=None, **kwargs):
    return subprocess.run([sys.executable, "-m", "jaxtrees.cli", *args], env={**os.environ, **(env or {})},
                          capture_output=True, text=True, **kwargs)


def test_pandas_reads_the_rows_with_typed_columns(reference):
    pandas = pytest.importorskip("pandas")
    frame = pandas.read_parquet(reference / "rows")
    table = reading.read_results(str(reference))
    assert len(frame) == len(table) == 2 * 6 * 3
    assert str(frame["impurity"].dtype) == "category" and frame["exact_error"].dtype == np.float32
    assert frame["success"].dtype == np.int8 and frame["c"].dtype == np.float64 and frame["m"].dtype == np.int32
    frame = frame.sort_values(["cell", "replicate", "m"], kind="stable")
    assert frame["exact_error"].tolist() == table["exact_error"].tolist()


def test_export_writes_the_tidy_csv_and_an_old_csv_directory_is_read_and_converted(tmp_path, reference, capsys):
    """``jaxtrees export --csv`` writes every row; a directory in the earlier CSV layout (metadata.json, parts/*.csv
    with parts/config.json) is read as it is, refused by ``run`` with the way out, converted by ``jaxtrees convert``,
    and then resumed into (nothing left to run) with the same rows."""
    old = tmp_path / "old" / "juntas"
    shutil.copytree(reference, old)
    assert cli.main(["export", str(old), "--csv", str(tmp_path / "rows.csv")]) == 0
    text = (tmp_path / "rows.csv").read_text()
    assert text.count("\n") == 1 + 2 * 6 * 3 and text.splitlines()[0].startswith('"study","seed","cell"')
    shutil.rmtree(old / "rows")
    (old / "parts").mkdir()
    config = json.loads((old / "metadata.json").read_text())["config"]
    (old / "parts" / "config.json").write_text(json.dumps({"config": config}))
    lines = text.replace('"', "").splitlines(keepends=True)
    (old / "parts" / "0001.csv").write_text("\ufeff" + "".join(lines[:19]))  # a spreadsheet's byte-order mark
    (old / "parts" / "0002.csv").write_text(lines[0] + "".join(lines[19:]))  # trials whole: 6 x 3 rows, then the rest
    assert _columns(old) == _columns(reference)
    assert cli.main(["report", str(old)]) == 0
    assert cli.main(["run", "juntas", "--quick", "--out", str(tmp_path / "old"), *TINY]) == 2
    assert f"jaxtrees convert {old}" in capsys.readouterr().err
    assert cli.main(["convert", str(old)]) == 0
    assert not (old / "parts").exists() and _columns(old) == _columns(reference)
    assert cli.main(["run", "juntas", "--quick", "--out", str(tmp_path / "old"), *TINY]) == 0
    assert _columns(old) == _columns(reference)


def test_killed_in_its_first_program_a_run_resumes_with_its_recorded_group(tmp_path):
    """The group is recorded before the first call: a run of one program with --group 16, SIGKILLed inside that
    program, resumes without --group at 16 (not the default 32) and gives the rows of an uninterrupted run."""
    tiny = [a if not a.startswith("replicates=") else "replicates=320" for a in TINY]
    assert cli.main(["run", "juntas", "--quick", "--out", str(tmp_path / "whole"), "--group", "16", *tiny]) == 0
    args = ["run", "juntas", "--quick", "--out", str(tmp_path / "killed"), "--chunk", "32", "--group", "16", *tiny]
    written = helpers.run_killed(args, tmp_path / "killed" / "juntas" / "rows")
    assert 2 <= written < 40
    metadata = json.loads((tmp_path / "killed" / "juntas" / "metadata.json").read_text())
    assert set(metadata["contract"]["groups"].values()) == {16}
    assert cli.main([a for a in args if a not in ("--group", "16")]) == 0
    runs = json.loads((tmp_path / "killed" / "juntas" / "metadata.json").read_text())["runs"]
    assert [set(r["group"].values()) for r in runs] == [{16}, {16}]
    assert _columns(tmp_path / "killed" / "juntas") == _columns(tmp_path / "whole" / "juntas")


@pytest.mark.parametrize("change", ["group", "opt-level", "jax"])
def test_a_resume_under_a_setting_that_can_change_rows_is_refused(tmp_path, monkeypatch, capsys, change):
    study = studies.get("juntas")
    config = runner.configure(study, quick=True, overrides=OVERRIDES)
    runner.run(study, config, str(tmp_path), progress=False, max_trials=5)
    args = ["run", "juntas", "--quick", "--out", str(tmp_path), *TINY]
    if change == "group":
        args += ["--group", "8"]
        named = "group of program"
    elif change == "opt-level":
        monkeypatch.setenv("XLA_FLAGS", os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=1")
        named = "the compiler options: recorded"
    else:
        real = job.environment
        monkeypatch.setattr(job, "environment", lambda: {**real(), "jax": "0.0.1"})
        named = "jax: recorded"
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert "was started with other settings that can change its rows" in err and "--allow-changes" in err
    assert named in err, err
    assert len(reading.read_results(str(tmp_path / "juntas"))) == 5 * 3  # nothing more written


@pytest.mark.parametrize("damage", ["truncated", "fewer-rows", "flipped-byte"])
def test_a_damaged_part_is_found_named_moved_aside_and_its_trials_run_again(tmp_path, reference, capsys, damage):
    study = studies.get("juntas")
    config = runner.configure(study, quick=True, overrides=OVERRIDES)
    directory = Path(runner.run(study, config, str(tmp_path), progress=False, chunk=4))
    part = sorted((directory / "rows").glob("part-*.parquet"))[0]
    data = part.read_bytes()
    if damage == "truncated":
        part.write_bytes(data[: len(data) // 2])
    elif damage == "fewer-rows":  # rows cut out, the part's own record of its rows kept
        import pyarrow.parquet as pq

        table = pq.read_table(part)
        pq.write_table(table.slice(0, table.num_rows - 3).replace_schema_metadata(table.schema.metadata), part)
    else:  # a byte inside the first data page: its checksum no longer matches
        import pyarrow.parquet as pq

        start = pq.ParquetFile(part).metadata.row_group(0).column(0).data_page_offset
        part.write_bytes(data[:start + 20] + bytes([data[start + 20] ^ 0xFF]) + data[start + 21:])
    with pytest.raises(ValueError):
        reading.read_results(str(directory))
    capsys.readouterr()
    assert cli.main(["run", "juntas", "--quick", "--out", str(tmp_path), *TINY]) == 0
    assert f"{part} is damaged" in capsys.readouterr().err
    assert (directory / "damaged" / part.name).exists() and not list((directory / "rows").glob("*.damaged"))
    assert _columns(directory) == _columns(reference)


def _rewrite(part, table, rows=None):
    """Write ``table`` as ``part``, its record of rows set to its own (a consistent part of other rows)."""
    import pyarrow.parquet as pq

    metadata = dict(table.schema.metadata)
    stamp = json.loads(metadata[reading.PART_KEY])
    metadata[reading.PART_KEY] = json.dumps({**stamp, "rows": table.num_rows}).encode()
    pq.write_table(table.replace_schema_metadata(metadata), part)
    return helpers.resealed(part)


def test_a_trial_read_twice_or_short_is_refused_and_rows_apart_are_read_whole(tmp_path, reference):
    """Reading checks each trial's rows across parts: a part copied (its trials twice) and a part missing a row
    of a trial (its record of rows agreeing) are refused, naming a file; a part whose trials' rows are
    interleaved (not as runs write them, yet each trial whole) reads back as the same rows."""
    import pyarrow.parquet as pq

    shutil.copytree(reference, tmp_path / "copy")
    first = sorted((tmp_path / "copy" / "rows").glob("part-*.parquet"))[0]
    table = pq.read_table(first)
    shuffled = table.take(np.random.default_rng(0).permutation(table.num_rows))
    first = _rewrite(first, shuffled)

    def by_trial_and_m(directory):
        t = reading.read_results(str(directory), ordered=False)
        t = t.take(np.lexsort((t["m"], t["replicate"], t["cell"])))
        return {name: t[name].tolist() for name in t.names}

    assert by_trial_and_m(tmp_path / "copy") == by_trial_and_m(reference)
    shutil.copy(first, first.with_name("part-99999999999999999999-0000-copy.parquet"))
    with pytest.raises(ValueError, match=r"part-.*\.parquet: trial \(cell \d+, replicate \d+\) has its rows more than"):
        reading.read_results(str(tmp_path / "copy"))
    first.with_name("part-99999999999999999999-0000-copy.parquet").unlink()
    first = _rewrite(first, table.slice(1))  # the first trial's first row gone
    with pytest.raises(ValueError, match=f"{first.name}: trial .* not all of them"):
        reading.read_results(str(tmp_path / "copy"))


def test_a_metadata_file_saved_with_a_byte_order_mark_is_read(tmp_path, reference, capsys):
    """An editor or spreadsheet that saves metadata.json with a byte-order mark leaves it readable."""
    shutil.copytree(reference, tmp_path / "copy")
    path = tmp_path / "copy" / "metadata.json"
    path.write_text(path.read_text(encoding="utf-8"), encoding="utf-8-sig")
    assert path.read_bytes().startswith(b"\xef\xbb\xbf")
    assert cli.main(["report", str(tmp_path / "copy")]) == 0 and "## Theory" in capsys.readouterr().out
    assert reading.completeness(str(tmp_path / "copy"), reading.read_results(str(tmp_path / "copy")))[0] == 12


def test_one_lock_per_directory_whatever_the_process_count(tmp_path):
    """A single-process run and process 1 of a distributed run cannot both write: process 0 holds the one lock,
    the others only check that it names their run."""
    first = store.Store(str(tmp_path), "juntas")
    config = runner.configure(studies.get("juntas"), quick=True, overrides=OVERRIDES).as_json()
    first.open(config, "aaaa")
    with pytest.raises(ValueError, match="another run .* is writing"):
        store.Store(str(tmp_path), "juntas").open(config, "bbbb")
    with pytest.raises(ValueError, match="is not held by this run"):
        store.Store(str(tmp_path), "juntas", process=1, processes=2).open(config, "bbbb")
    store.Store(str(tmp_path), "juntas", process=1, processes=2).open(config, "aaaa")  # its own run's lock
    first.close()


def test_a_damaged_metadata_file_is_rebuilt_from_the_parts(tmp_path, reference, capsys):
    shutil.copytree(reference, tmp_path / "juntas")
    (tmp_path / "juntas" / "metadata.json").write_text("{ not json")
    assert cli.main(["run", "juntas", "--quick", "--out", str(tmp_path), *TINY]) == 0
    assert "rebuilt from rows/_config.json" in capsys.readouterr().err
    assert _columns(tmp_path / "juntas") == _columns(reference)


def test_a_full_disk_is_one_sentence_and_the_run_resumes_once_space_is_freed(tmp_path, reference):
    """A small tmpfs filled up: the run stops with a sentence saying what to do (no traceback); once space is
    freed, the same command finishes with the rows of an uninterrupted run. Needs root to mount (else skipped)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)],
                                           capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        filler = disk / "filler"
        with open(filler, "wb") as fh:
            try:
                fh.write(b"x" * (4 * 2**20))
            except OSError:
                pass
        os.truncate(filler, max(0, filler.stat().st_size - 12 * 1024))  # 12 KB left: metadata, not every part
        proc = _cli("run", "juntas", "--quick", "--out", str(disk), *TINY, env={"JAXTREES_FLUSH_SECONDS": "0"})
        assert proc.returncode == 1 and "the disk is full" in proc.stderr and "Traceback" not in proc.stderr
        assert "rerun the same command to resume" in proc.stderr
        filler.unlink()
        proc = _cli("run", "juntas", "--quick", "--out", str(disk), *TINY)
        assert proc.returncode == 0, proc.stderr
        assert _columns(disk / "juntas") == _columns(reference)
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True)


def test_four_processes_write_the_rows_of_one_and_resume_after_one_is_killed(tmp_path, reference):
    """jax.distributed on loopback (CPU, gloo), four processes: the rows of one process; process 2 killed
    mid-run (by construction: its writer blocks once its first part is written, JAXTREES_TEST_STOP_AFTER_PARTS,
    so it cannot finish its share before the kill), the other three end with a sentence naming it (no abort)
    within --distributed-timeout, all four rerun: the rows of one process again."""
    def start(out, kill=None):
        with socket.socket() as s:
            s.bind(("localhost", 0))
            port = s.getsockname()[1]
        tiny = [a if not a.startswith("replicates=") else "replicates=48" for a in TINY]
        args = [sys.executable, "-m", "jaxtrees.cli", "run", "juntas", "--quick", "--out", str(out), *tiny, "--chunk",
                "8", "--group", "4", "--coordinator", f"localhost:{port}", "--num-processes", "4",
                "--distributed-timeout", "20", "--process-id"]
        env = {**os.environ, "JAX_PLATFORMS": "cpu", "JAXTREES_CPU_DEVICES": "1", "JAXTREES_FLUSH_SECONDS": "0"}
        stop = {"JAXTREES_TEST_STOP_AFTER_PARTS": "1"}  # the process to kill hangs after its first part
        return [subprocess.Popen([*args, str(i)], env={**env, **(stop if i == kill else {})}, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True) for i in range(4)]

    whole = tmp_path / "whole"
    procs = start(whole)
    outputs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], outputs
    single = tmp_path / "single"
    assert cli.main(["run", "juntas", "--quick", "--out", str(single), "--group", "4",
                     *[a if not a.startswith("replicates=") else "replicates=48" for a in TINY]]) == 0
    assert _columns(whole / "juntas") == _columns(single / "juntas")
    killed = tmp_path / "killed"
    procs = start(killed, kill=2)
    rows = killed / "juntas" / "rows"
    helpers.kill_after_first_part(procs, rows)
    killed_at = time.time()
    ends = [p.communicate(timeout=120) for p in (procs[0], procs[1], procs[3])]  # within the heartbeats' timeout
    assert time.time() - killed_at < 20 + 30, ends
    for p, (_, err) in zip((procs[0], procs[1], procs[3]), ends):  # each survivor: one sentence, no abort
        assert p.returncode == 2 and "process(es) 2 of 4 stopped before the end of the run" in err, err
        assert "Traceback" not in err and "Check failure" not in err, err
    procs[2].communicate()
    procs = start(killed)
    outputs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], outputs
    assert _columns(killed / "juntas") == _columns(single / "juntas")


def test_group_bys_agree_with_a_loop_over_rows():
    """rates, means, split and quantiles on columns agree with plain per-row Python on random tables."""
    from jaxtrees.experiments import table as tables

    rng = np.random.default_rng(0)
    t = Table({"c": rng.choice([0.0, 0.1, 0.2], 500), "k": rng.integers(3, 6, 500),
               "name": np.asarray(rng.choice(["gini", "entropy"], 500), dtype=object),
               "success": rng.integers(0, 2, 500).astype(np.int8), "error": rng.random(500).astype(np.float32)})
    rows = [dict(zip(t.names, values)) for values in zip(*(t[n].tolist() for n in t.names))]
    by = ["name", "c", "k"]
    keys = sorted({tuple(r[b] for b in by) for r in rows})
    rates = tables.rates(t, by, "success")
    assert [tuple(g[b] for b in by) for g in rates] == keys
    for g, key in zip(rates, keys):
        xs = [r["success"] for r in rows if tuple(r[b] for b in by) == key]
        assert (g["trials"], g["successes"]) == (len(xs), sum(xs))
    for g in tables.means(t, by, "error"):
        xs = np.asarray([r["error"] for r in rows if tuple(r[b] for b in by) == tuple(g[b] for b in by)], np.float64)
        assert g["mean"] == pytest.approx(xs.mean(), rel=1e-12) and g["sem"] == pytest.approx(
            xs.std(ddof=1) / np.sqrt(xs.size), rel=1e-9)
    split = tables.split(t, ["k"])
    assert list(split) == [(3,), (4,), (5,)] and sum(map(len, split.values())) == 500
    keys_q, q = tables.group_quantiles(t, ["k"], "error", (0.25, 0.5, 0.75))
    for (k,), row in zip(keys_q, q):
        xs = np.asarray([r["error"] for r in rows if r["k"] == k], np.float64)
        assert row.tolist() == np.quantile(xs, [0.25, 0.5, 0.75], method="inverted_cdf").tolist()
    with pytest.raises(TypeError, match="not iterated row by row"):
        list(t)


def test_columns_given_by_the_cell_act_as_the_columns_they_stand_for():
    """A ByCell column (a parameter read back: nothing stored per row) gives the same values, groups (in any order of
    the ``by`` columns), takes, selections and rows as the materialized column."""
    from jaxtrees.experiments import table as tables

    rng = np.random.default_rng(1)
    cells, size = 7, 400
    per_c, per_name = rng.integers(0, 3, cells), rng.integers(0, 2, cells)
    c_values, names = np.asarray([0.0, 0.1, 0.2]), np.asarray(["entropy", "gini"], dtype=object)
    cell = rng.integers(0, cells, size).astype(np.int32)
    other = {"cell": cell, "m": rng.choice([16, 32, 64], size).astype(np.int32), "success": rng.integers(0, 2, size)}
    lazy = Table({**other, "c": tables.ByCell(c_values, per_c), "name": tables.ByCell(names, per_name)})
    plain = Table({**other, "c": c_values[per_c][cell], "name": names[per_name][cell]})
    for by in (["c"], ["name", "c"], ["m", "c"], ["c", "m", "name"], ["m", "name", "cell"]):
        (a, ka), (b, kb) = tables.groups(lazy, by), tables.groups(plain, by)
        assert ka == kb and ka == sorted(ka) and a.tolist() == b.tolist(), by
        assert tables.rates(lazy, by, "success") == tables.rates(plain, by, "success")
    index = rng.permutation(size)[:150]
    for x, y in ((lazy, plain), (lazy.take(index), plain.take(index)), (lazy.select("c", "m"), plain.select("c", "m")),
                 (lazy.where(m=32), plain.where(m=32)), (lazy.take(index).with_columns(cell=cell[:150]),
                                                          plain.take(index).with_columns(cell=cell[:150]))):
        assert all(x[n].tolist() == y[n].tolist() for n in y.names) and {n: x[3][n] for n in y.names} == y[3]
        assert x.unique("c") == y.unique("c") and x.to_dict().keys() >= y.to_dict().keys()
    assert lazy.select("c", "m").names == ["c", "m", "cell"]  # the cells the column stands on come along
    with pytest.raises(ValueError, match="needs the table's cell column"):
        Table({"c": tables.ByCell(c_values, per_c)})


def test_rows_do_not_depend_on_chunk_or_devices_at_the_studys_own_optimisation_level(tmp_path):
    """The determinism contract at the LLVM level studies compile at (the suite's conftest lowers it to 0 for
    speed): chunk sizes and device counts give identical rows, in fresh processes without that override."""
    flags = " ".join(f for f in os.environ.get("XLA_FLAGS", "").split()
                     if not f.startswith(("--xla_backend_optimization_level", "--xla_force_host_platform_device_count")))
    runs = {"default": ([], "1"), "chunk5": (["--chunk", "5"], "1"), "devices3": ([], "3")}
    for name, (extra, devices) in runs.items():
        proc = _cli("run", "juntas", "--quick", "--out", str(tmp_path / name), *TINY, *extra,
                    env={"XLA_FLAGS": flags, "JAXTREES_CPU_DEVICES": devices, "JAX_PLATFORMS": "cpu"})
        assert proc.returncode == 0, proc.stderr
        contract = json.loads((tmp_path / name / "juntas" / "metadata.json").read_text())["contract"]
        assert contract["compiler_options"] == {runner.OPT_LEVEL_FLAG: studies.get("juntas").cpu_opt_level}
    columns = [_columns(tmp_path / name / "juntas") for name in runs]
    assert columns[0] == columns[1] == columns[2]
