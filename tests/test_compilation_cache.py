"""The persistent compilation cache as ``jaxtrees run`` uses it (jaxtrees/experiments/run/xla_cache.py): entries
written whole, an unreadable one skipped and replaced, never an error; what a run loaded and compiled; the
program cache (run/programs.py), whose executables a warm run loads without tracing (same rows), keyed so that
another static value, flag, setting or source compiles."""

import json
import os
import pathlib
import subprocess
import sys
import time
import zlib

import jax
import numpy as np

from jaxtrees.experiments.run import programs, xla_cache

TINY = ["--set", "n=8,10", "--set", "k=2", "--set", "c=0.2", "--set", "impurity=entropy", "--set", "m_min=16",
        "--set", "m_max=64", "--set", "replicates=4", "--no-progress"]


def _entry(payload: bytes) -> bytes:
    """A cache entry as JAX writes one where Python has no zstd: 4 bytes of compile time, then the
    executable, zlib-compressed (the test checks what SafeCache does with bytes, not XLA's)."""
    return zlib.compress(int(3).to_bytes(4, "big") + payload)


def test_an_entry_is_written_whole_and_read_back(tmp_path):
    store = xla_cache.SafeCache(str(tmp_path))
    assert store.get("jit_f-abc") is None
    store.put("jit_f-abc", _entry(b"program"))
    assert store.get("jit_f-abc") == _entry(b"program")
    assert sorted(os.listdir(tmp_path)) == ["jit_f-abc-cache"]  # no temporary left
    store.put("jit_f-abc", _entry(b"again"))  # replaced whole
    assert store.get("jit_f-abc") == _entry(b"again")


def test_an_unreadable_entry_is_skipped_and_removed(tmp_path):
    """A damaged or truncated entry reads as missing (JAX then compiles and puts the program again)."""
    store = xla_cache.SafeCache(str(tmp_path))
    whole = _entry(b"x" * 1000)
    for name, damaged in (("truncated", whole[: len(whole) // 2]), ("garbled", b"\x00" * 64), ("empty", b"")):
        (tmp_path / f"{name}-cache").write_bytes(damaged)
        assert store.get(name) is None, name
        assert not (tmp_path / f"{name}-cache").exists(), name
        store.put(name, whole)
        assert store.get(name) == whole


def test_a_dead_writers_temporaries_are_removed_and_a_live_ones_kept(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / f"{xla_cache.TEMPORARY}{dead.pid}-1-jit_f-abc").write_bytes(b"half")
    (tmp_path / f"{xla_cache.TEMPORARY}{os.getpid()}-1-jit_g-abc").write_bytes(b"being written")
    xla_cache._remove_orphans(str(tmp_path))
    assert os.listdir(tmp_path) == [f"{xla_cache.TEMPORARY}{os.getpid()}-1-jit_g-abc"]


def test_describe_says_where_and_how_large(tmp_path, monkeypatch):
    monkeypatch.delenv("JAXTREES_CACHE_MAX_MB", raising=False)
    assert programs.describe(str(tmp_path)) == f"{tmp_path}: 0 programs, 0.0 MB; bound 2,048 MB (JAXTREES_CACHE_MAX_MB)"
    (tmp_path / "jit_f-a-cache").write_bytes(b"x" * 2**20)
    (tmp_path / "jit_g-b-cache").write_bytes(b"x" * 2**19)
    (tmp_path / f"{xla_cache.TEMPORARY}1-1-jit_h-c").write_bytes(b"x" * 2**20)  # not an entry yet
    monkeypatch.setenv("JAXTREES_CACHE_MAX_MB", "0")
    assert programs.describe(str(tmp_path)) == f"{tmp_path}: 2 programs, 1.5 MB; no size bound (JAXTREES_CACHE_MAX_MB)"


def _run(out, env):
    proc = subprocess.run([sys.executable, "-m", "jaxtrees.cli", "run", "juntas", "--quick", "--out", str(out), *TINY],
                          env={**os.environ, **env}, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    metadata = json.loads((out / "juntas" / "metadata.json").read_text())
    return proc, metadata["runs"][-1]["compiled_or_loaded"], (out / "juntas" / "rows")


def _rows(directory):
    from jaxtrees.experiments.results import read_results

    table = read_results(str(directory.parent))
    return [dict(zip(table.names, values)) for values in zip(*(table[n].tolist() for n in table.names))]


def test_a_damaged_cache_entry_is_compiled_again_with_the_same_rows(tmp_path):
    """Every entry of a filled cache damaged (one truncated, the others garbled), JAX's and the program
    cache's: the next run compiles those programs, says nothing of an error, writes the same rows and puts
    whole entries back, which the run after it loads."""
    env = {"JAXTREES_CACHE_DIR": str(tmp_path / "cache")}
    _, how, rows = _run(tmp_path / "a", env)
    assert set(how.values()) == {"compiled"} and len(how) == 2
    reference = _rows(rows)
    program_dir = tmp_path / "cache" / "programs"
    entries = sorted((tmp_path / "cache").glob("*-cache")) + sorted(program_dir.glob("*.program"))
    assert len(entries) == 4
    entries += sorted(program_dir.glob("recent-*.json"))  # the programs the run used, for the next to load ahead
    assert len(entries) == 5
    for i, path in enumerate(entries):
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2] if i % 2 == 0 else bytes(b ^ 0x5A for b in data))
    proc, how, rows = _run(tmp_path / "b", env)
    assert set(how.values()) == {"compiled"}, how
    assert "Error" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert _rows(rows) == reference
    _, how, rows = _run(tmp_path / "c", env)
    assert set(how.values()) == {"loaded"}, how
    assert _rows(rows) == reference
    assert not list((tmp_path / "cache").glob(xla_cache.TEMPORARY + "*"))
    assert not list((tmp_path / "cache" / "programs").glob(xla_cache.TEMPORARY + "*"))


#: A run in a fresh process, the cache on (argv: cache, out, overrides): the traces JAX reported and what
#: the run says of each program. The source digest is pinned (a shared working tree may change between runs;
#: the key's digest is tested on its own below).
DRIVER = """
import json, sys
from jax import monitoring
traces, counting = [], []
monitoring.register_event_duration_secs_listener(lambda event, duration, **_: traces.append(event)
                                                 if counting and event == "/jax/core/compile/jaxpr_trace_duration" else None)
from jaxtrees.experiments import studies
from jaxtrees.experiments.run import programs, runner, xla_cache
programs._digest[:] = ["pinned"]  # the package's source as the cold run saw it: others may edit this tree meanwhile
xla_cache.use(sys.argv[1])
study = studies.get("juntas")
config = runner.configure(study, quick=True, overrides=json.loads(sys.argv[3]))
from jaxtrees.experiments.study.probe import probe
probe(study, config)  # the grid's check traces the trial abstractly (once per study and config): not the run's
counting.append(True)
directory = runner.run(study, config, sys.argv[2], progress=False)
how = json.load(open(directory + "/metadata.json"))["runs"][-1]["compiled_or_loaded"]
print(json.dumps({"traces": len(traces), "how": {json.loads(k)["n"]: v for k, v in how.items()}}))
"""

GRID = {"n": "8,10", "k": 2, "c": 0.2, "impurity": "entropy", "m_min": 16, "m_max": 64, "replicates": 4}


def _traced_run(cache_dir, out, workers="threads", **change):
    """:data:`DRIVER` in a fresh process: ``(traces in the run's process, {n: how}, rows)``."""
    proc = subprocess.run([sys.executable, "-c", DRIVER, str(cache_dir), str(out), json.dumps({**GRID, **change})],
                          env={**os.environ, "JAXTREES_COMPILE_WORKERS": workers}, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.splitlines()[-1])
    return result["traces"], {int(n): how for n, how in result["how"].items()}, _rows(out / "juntas" / "rows")


def test_a_warm_run_loads_its_programs_without_tracing_them_and_another_static_value_compiles(tmp_path):
    """Cold: both programs traced and compiled; warm: loaded from the program cache, nothing traced, the
    same rows; n = 12 in place of 10 (another static value, another key): n = 8 loaded, n = 12 traced and
    compiled, its rows those of a run without the cache."""
    traces, how, cold = _traced_run(tmp_path / "cache", tmp_path / "cold")
    assert traces >= 2 and how == {8: "compiled", 10: "compiled"}
    assert len(list((tmp_path / "cache" / xla_cache.PROGRAMS).glob("*.program"))) == 2
    traces, how, warm = _traced_run(tmp_path / "cache", tmp_path / "warm")
    assert traces == 0 and how == {8: "loaded", 10: "loaded"}
    assert warm == cold and len(cold) == 2 * 4 * 3
    traces, how, changed = _traced_run(tmp_path / "cache", tmp_path / "changed", n="8,12")
    assert traces >= 1 and how == {8: "loaded", 12: "compiled"}
    assert [r for r in changed if r["n"] == 8] == [r for r in cold if r["n"] == 8]


#: :data:`DRIVER` for a study file (argv: cache, out, overrides, file): its programs keyed by its own code.
FILE_DRIVER = DRIVER.replace('study = studies.get("juntas")', 'from jaxtrees.experiments import loading\n'
                             'study = loading.load(sys.argv[4])[0]').replace('json.loads(k)["n"]', 'k')


def test_a_study_file_s_programs_load_for_a_new_traced_value_and_compile_after_an_edit(tmp_path):
    """A user's study file is cached like a built-in study: a new traced grid value (c) and more replicates load
    its programs; an edit of its trial compiles again; a comment does not."""
    source = pathlib.Path(__file__).resolve().parent.parent / "notebooks" / "own_study.py"
    study_file = tmp_path / "own_study.py"
    study_file.write_text(source.read_text())
    grid = {"c": 0.1, "eta": 0.0, "m_min": 16, "m_max": 64, "replicates": 4}

    def run(out, **change):
        proc = subprocess.run([sys.executable, "-c", FILE_DRIVER, str(tmp_path / "cache"), str(tmp_path / out),
                               json.dumps({**grid, **change}), str(study_file)],
                              env={**os.environ, "JAXTREES_COMPILE_WORKERS": "threads"}, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        result = json.loads(proc.stdout.splitlines()[-1])
        return result["traces"], set(result["how"].values())

    assert run("a")[1] == {"compiled"}
    assert run("a", c="0.1,0.2", replicates=6) == (0, {"loaded"})
    study_file.write_text(source.read_text().replace("N, K = 16, 3  # input bits", "N, K = 16, 3  # the bits"))
    assert run("b")[1] == {"loaded"}
    study_file.write_text(source.read_text().replace("error <= 1e-6", "error <= 1e-5"))
    assert run("c")[1] == {"compiled"}


def _executable(scale=2.0):
    """A freshly compiled program (this process, the cache off) and its serialized form."""
    from jax.experimental import serialize_executable

    executable = jax.jit(lambda x: x * scale + 1).lower(np.ones(4, np.float32)).compile()
    return executable, serialize_executable.serialize(executable)


def test_a_program_entry_loads_and_a_damaged_foreign_or_missing_one_is_none(tmp_path):
    store, devices = programs.Programs(str(tmp_path)), jax.local_devices()[:1]
    executable, serialized = _executable()
    assert store.load("a" * 64, devices) is None  # missing
    assert store.save("a" * 64, *serialized)
    os.utime(store.path("a" * 64), (1, 1))
    loaded = store.load("a" * 64, devices)
    assert os.path.getmtime(store.path("a" * 64)) > time.time() - 60  # a load records the entry's use
    np.testing.assert_array_equal(np.asarray(loaded(np.arange(4, dtype=np.float32))), [1, 3, 5, 7])
    assert os.listdir(tmp_path) == [os.path.basename(store.path("a" * 64))]  # no temporary left
    os.replace(store.path("a" * 64), store.path("b" * 64))  # another key's entry under this name: foreign
    assert store.load("b" * 64, devices) is None and not store.has("b" * 64)
    for damage in (lambda d: d[: len(d) // 2], lambda d: d[:-1] + bytes([d[-1] ^ 1]), lambda d: b""):
        store.save("c" * 64, *serialized)
        with open(store.path("c" * 64), "rb") as fh:
            data = fh.read()
        with open(store.path("c" * 64), "wb") as fh:
            fh.write(damage(data))
        assert store.load("c" * 64, devices) is None and not store.has("c" * 64)  # removed: compiled again


def test_saving_removes_the_entries_of_another_source_left_a_day(tmp_path, monkeypatch):
    store, (_, serialized) = programs.Programs(str(tmp_path)), _executable()
    monkeypatch.setattr(programs, "_digest", ["old source"])
    for key in ("a" * 64, "b" * 64):
        store.save(key, *serialized)
    stale = time.time() - programs.STALE_SECONDS - 60
    os.utime(store.path("a" * 64), (stale, stale))  # another source's, a day old: removed
    monkeypatch.setattr(programs, "_digest", ["new source"])
    store.save("c" * 64, *serialized)
    os.utime(store.path("c" * 64), (stale, stale))  # this source's: kept however old
    store.save("d" * 64, *serialized)
    assert sorted(os.listdir(tmp_path)) == ["new source"[:12] + "-" + "c" * 64 + ".program",
                                            "new source"[:12] + "-" + "d" * 64 + ".program",
                                            "old source"[:12] + "-" + "b" * 64 + ".program"]  # b: written lately


def test_a_programs_key_changes_with_what_can_change_its_executable(monkeypatch):
    devices = jax.local_devices()[:1]
    parts = {"study": "juntas", "static": {"n": 8}, "seed": 0, "group": 4, "inputs": ["tree", [[4], "uint32"]],
             "loop_chunk": None, "options": None}
    key = programs.program_key(parts, devices)
    assert key == programs.program_key(dict(parts), devices) and len(key) == 64
    for change in ({"static": {"n": 10}}, {"seed": 1}, {"group": 8}, {"options": {"xla_backend_optimization_level": 1}},
                   {"inputs": ["tree", [[8], "uint32"]]}, {"loop_chunk": 2}):
        assert programs.program_key({**parts, **change}, devices) != key, change
    monkeypatch.setenv("XLA_FLAGS", os.environ.get("XLA_FLAGS", "") + " --xla_cpu_enable_fast_math=true")
    assert programs.program_key(parts, devices) != key
    monkeypatch.setenv("XLA_FLAGS", os.environ.get("XLA_FLAGS", "").replace(" --xla_cpu_enable_fast_math=true", ""))
    assert programs.program_key(parts, devices) == key
    monkeypatch.setattr(programs, "_digest", ["another source"])
    assert programs.program_key(parts, devices) != key
    monkeypatch.undo()
    precision = jax.config.jax_default_matmul_precision
    try:
        jax.config.update("jax_default_matmul_precision", "highest")
        assert programs.program_key(parts, devices) != key
    finally:
        jax.config.update("jax_default_matmul_precision", precision)
    assert programs.program_key(parts, devices) == key


def test_describe_counts_the_programs_ready_to_load_and_the_damaged_and_foreign_apart(tmp_path, monkeypatch):
    """Ready: this source's entries whose header, length and key check out (nothing loaded); damaged: this source's
    others (removed when a run saves); another source's: left to their day (:data:`programs.STALE_SECONDS`)."""
    monkeypatch.setenv("JAXTREES_CACHE_MAX_MB", "100")
    (tmp_path / "jit_f-a-cache").write_bytes(b"x" * 2**20)
    store = programs.Programs(str(tmp_path / xla_cache.PROGRAMS))
    store.save("a" * 64, os.urandom(2**21), None, None)  # an entry as a run writes it (the payload's bytes aside)
    for key in ("b" * 64, "c" * 64, "d" * 64):
        store.save(key, b"small", None, None)
    damaged = pathlib.Path(store.path("b" * 64))
    damaged.write_bytes(damaged.read_bytes()[:-1])  # truncated
    os.replace(store.path("c" * 64), store.path("e" * 64))  # another key's entry under this name
    os.replace(store.path("d" * 64), store.path("d" * 64).replace(programs.program_source_digest()[:12], "0" * 12))
    assert programs.describe(str(tmp_path)) == (
        f"{tmp_path}: 1 program, 1.0 MB; 1 ready to load without tracing, 2.0 MB; 2 damaged, 0.0 MB, removed at the "
        "next save; 1 of another source, 0.0 MB; bound 100 MB (JAXTREES_CACHE_MAX_MB)")
    store.save("f" * 64, b"small", None, None)
    kept = sorted(p.name[13:-len(".program")] for p in (tmp_path / xla_cache.PROGRAMS).glob("*.program"))
    assert kept == ["a" * 64, "d" * 64, "f" * 64]


def test_the_bound_is_taken_from_the_environment(monkeypatch):
    import pytest

    monkeypatch.delenv("JAXTREES_CACHE_MAX_MB", raising=False)
    assert xla_cache.limit() == 2048 * 2**20
    for value, bound in (("0", None), ("", None), (" ", None), ("1.5", int(1.5 * 2**20)), ("300", 300 * 2**20)):
        monkeypatch.setenv("JAXTREES_CACHE_MAX_MB", value)
        assert xla_cache.limit() == bound, value
    for value in ("lots", "-1", "nan"):
        monkeypatch.setenv("JAXTREES_CACHE_MAX_MB", value)
        with pytest.warns(UserWarning, match="JAXTREES_CACHE_MAX_MB"):
            assert xla_cache.limit() == 2048 * 2**20


def _entries(root, sizes: dict, age: float = 3600.0):
    """Fake entries under ``root``, ``{name: size}`` ("X.program" in programs/, others JAX's), the first in
    ``sizes`` used longest ago (``age`` seconds and more), each later one a second after it."""
    (root / xla_cache.PROGRAMS).mkdir(parents=True, exist_ok=True)
    now = time.time()
    for i, (name, size) in enumerate(sizes.items()):
        path = root / xla_cache.PROGRAMS / name if name.endswith(".program") else root / name
        path.write_bytes(b"x" * size)
        used = now - age - len(sizes) + i
        os.utime(path, (used, used))


def _names(root) -> list[str]:
    return sorted([p.name for p in root.iterdir() if p.is_file()] + os.listdir(root / xla_cache.PROGRAMS))


def test_eviction_removes_the_least_recently_used_entries_down_to_nine_tenths_of_the_bound(tmp_path, monkeypatch):
    """Each file by its own last use, JAX's entries and program entries alike, JAX's ``-atime`` file with its entry;
    nothing where the entries fit; ``$JAXTREES_CACHE_MAX_MB`` is the default bound."""
    sizes = {"jit_a-1-cache": 300, "s-b.program": 100, "jit_c-2-cache": 100, "s-d.program": 200, "jit_e-3-cache": 100,
             "s-f.program": 200}
    _entries(tmp_path, sizes)
    (tmp_path / "jit_a-1-atime").write_bytes(b"12345678")
    (tmp_path / "notes.txt").write_bytes(b"x" * 5000)  # not an entry: neither counted nor removed
    assert xla_cache.evict(str(tmp_path), 1000) == (0, 0)
    assert xla_cache.evict(str(tmp_path), None) == (0, 0)  # the default bound, 2 GB
    monkeypatch.setenv("JAXTREES_CACHE_MAX_MB", str(600 / 2**20))  # 1000 bytes over 600: down to 540
    assert xla_cache.evict(str(tmp_path)) == (3, 500)  # a, b, c
    assert _names(tmp_path) == ["jit_e-3-cache", "notes.txt", "s-d.program", "s-f.program"]
    os.utime(tmp_path / xla_cache.PROGRAMS / "s-d.program", (time.time() - 1000,) * 2)  # used since: now the newest
    assert xla_cache.evict(str(tmp_path), 400) == (2, 300)  # 500 over 400: down to 360; e, then f
    assert _names(tmp_path) == ["notes.txt", "s-d.program"]


def test_a_save_past_the_bound_evicts_and_a_load_records_the_use(tmp_path, monkeypatch):
    """JAX's entries (``SafeCache``) and program entries: the write that passes the bound evicts the least recently
    used; an entry read back is used now, so another goes first."""
    store = xla_cache.SafeCache(str(tmp_path))
    _entries(tmp_path, {"jit_a-1-cache": 4000, "jit_b-2-cache": 4000})
    store.put("jit_c-3", _entry(b"c"))
    os.utime(tmp_path / "jit_c-3-cache", (time.time() - 7200,) * 2)  # the oldest of the three
    assert store.get("jit_c-3") is not None  # used now
    monkeypatch.setenv("JAXTREES_CACHE_MAX_MB", str(9000 / 2**20))
    xla_cache.trim(str(tmp_path), force=True)  # as use() does: the entries fit
    assert len(list(tmp_path.glob("*-cache"))) == 3
    store.put("jit_d-4", os.urandom(2000))
    assert sorted(p.name for p in tmp_path.glob("*-cache")) == ["jit_b-2-cache", "jit_c-3-cache", "jit_d-4-cache"]
    program_store = programs.Programs(str(tmp_path / xla_cache.PROGRAMS))
    program_store.save("e" * 64, os.urandom(3000), None, None)  # inside the cache: bounded with it
    assert sorted(p.name for p in tmp_path.glob("*-cache")) == ["jit_c-3-cache", "jit_d-4-cache"]
    assert program_store.has("e" * 64)


def test_temporaries_and_entries_used_lately_are_never_evicted(tmp_path):
    """A concurrent run's temporaries (being written) and the entries it loaded or wrote in the last
    :data:`xla_cache.KEEP_SECONDS` stay, the bound passed; older entries go."""
    _entries(tmp_path, {"jit_a-1-cache": 100, "s-b.program": 100})
    _entries(tmp_path, {"jit_c-2-cache": 100, "s-d.program": 100}, age=xla_cache.KEEP_SECONDS - 60)
    for folder in (tmp_path, tmp_path / xla_cache.PROGRAMS):
        (folder / f"{xla_cache.TEMPORARY}{os.getpid()}-1-key").write_bytes(b"x" * 10_000)
    assert xla_cache.evict(str(tmp_path), 1) == (2, 200)
    assert _names(tmp_path) == [f"{xla_cache.TEMPORARY}{os.getpid()}-1-key"] * 2 + ["jit_c-2-cache", "s-d.program"]


def test_eviction_takes_entries_removed_meanwhile_as_gone(tmp_path, monkeypatch):
    """Two runs sharing the directory: entries another process removed (or replaced with a fresh one) between the
    listing and the removal are skipped, never an error, and count as gone."""
    _entries(tmp_path, {f"jit_{i}-{i}-cache": 100 for i in range(6)})
    listing = xla_cache._entries

    def racing(directory):
        found = listing(directory)
        os.remove(tmp_path / "jit_0-0-cache")  # the other run evicted these two
        os.remove(tmp_path / "jit_2-2-cache")
        os.utime(tmp_path / "jit_1-1-cache")  # and loaded this one
        return found

    monkeypatch.setattr(xla_cache, "_entries", racing)
    assert xla_cache.evict(str(tmp_path), 350) == (1, 100)  # 600 over 350: 0 gone, 1 kept, 2 gone, 3 removed: 300 left
    assert sorted(p.name for p in tmp_path.glob("*-cache")) == ["jit_1-1-cache", "jit_4-4-cache", "jit_5-5-cache"]
    monkeypatch.setattr(xla_cache, "_entries", listing)
    assert xla_cache.evict(str(tmp_path / "missing"), 1) == (0, 0)
    vanished = tmp_path / f"{programs.program_source_digest()[:12]}-{'a' * 64}.program"
    assert programs._kind(str(vanished)) == "gone"  # describe skips it


def test_clear_empties_the_cache_but_a_live_writers_temporaries_and_other_files(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    _entries(tmp_path, {"jit_a-1-cache": 100, "s-b.program": 200}, age=0)
    (tmp_path / "jit_a-1-atime").write_bytes(b"12345678")
    (tmp_path / xla_cache.PROGRAMS / "recent-abc.json").write_bytes(b"{}")
    (tmp_path / xla_cache.PROGRAMS / f"{xla_cache.TEMPORARY}{dead.pid}-1-key").write_bytes(b"x" * 50)
    (tmp_path / f"{xla_cache.TEMPORARY}{os.getpid()}-1-key").write_bytes(b"x" * 50)
    (tmp_path / "notes.txt").write_bytes(b"mine")
    assert xla_cache.clear(str(tmp_path)) == (5, 100 + 200 + 8 + 2 + 50)
    assert _names(tmp_path) == [f"{xla_cache.TEMPORARY}{os.getpid()}-1-key", "notes.txt"]
    assert xla_cache.clear(str(tmp_path)) == (0, 0) and xla_cache.clear(str(tmp_path / "missing")) == (0, 0)


def test_prefetched_loads_the_programs_the_last_run_used_beside_the_start(tmp_path, monkeypatch):
    """A run's keys are remembered per invocation; the next run of it loads them on a thread that ends with the
    run, and :meth:`Programs.load` takes them (loaded once); a missing entry, other devices or another invocation
    load as without it."""
    import threading

    store, devices = programs.Programs(str(tmp_path)), jax.local_devices()[:1]
    monkeypatch.setattr(programs, "programs", lambda: store)
    _, serialized = _executable(3.0)
    with programs.prefetched("run A", devices):  # nothing remembered yet: the run saves a program
        assert store.save("a" * 64, *serialized)
    assert store.recent(programs.run_key("run A", devices)) == ["a" * 64] and store.recent(programs.run_key("run B", devices)) == []
    loads = []
    plain = programs.Programs._load
    monkeypatch.setattr(programs.Programs, "_load", lambda self, key, d: loads.append(key) or plain(self, key, d))
    with programs.prefetched("run A", devices):
        executable = store.load("a" * 64, devices)
        assert store.load("a" * 64, devices) is not None  # taken once; a second load reads the entry
    np.testing.assert_array_equal(np.asarray(executable(np.arange(4, dtype=np.float32))), [1, 4, 7, 10])
    assert loads == ["a" * 64] * 2 and not programs._ahead
    assert not [t for t in threading.enumerate() if t.name == "jaxtrees-prefetch"]
    loads.clear()
    with programs.prefetched("run A", devices):  # loaded ahead, never asked for: dropped
        pass
    assert loads == ["a" * 64] and not programs._ahead and store.recent(programs.run_key("run A", devices)) == ["a" * 64]
    os.remove(store.path("a" * 64))
    with programs.prefetched("run A", devices):  # the entry gone: None, and the run compiles and saves another
        assert store.load("a" * 64, devices) is None
        store.save("b" * 64, *serialized)
    assert store.recent(programs.run_key("run A", devices)) == ["b" * 64]
    with programs.prefetched("run A", None):  # no devices (several processes): nothing ahead, nothing remembered
        assert store.load("b" * 64, devices) is not None
    assert store.recent(programs.run_key("run A", devices)) == ["b" * 64]
    with open(store._recent_path(programs.run_key("run A", devices)), "w") as fh:
        fh.write("{not json")
    assert store.recent(programs.run_key("run A", devices)) == []
    with programs.prefetched("run A", devices):  # a damaged record is no record
        assert store.load("b" * 64, devices) is not None
    assert store.recent(programs.run_key("run A", devices)) == ["b" * 64]
