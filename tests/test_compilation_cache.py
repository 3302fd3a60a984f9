"""The persistent compilation cache as ``jaxtrees run`` uses it (jaxtrees/experiments/cache.py): entries
written whole, an unreadable one skipped and replaced, never an error; what a run loaded and compiled."""

import json
import os
import subprocess
import sys
import zlib

from jaxtrees.experiments import cache

TINY = ["--set", "n=8,10", "--set", "k=2", "--set", "c=0.2", "--set", "m_min=16", "--set", "m_max=64",
        "--set", "replicates=4", "--no-progress"]


def _entry(payload: bytes) -> bytes:
    """A cache entry as JAX writes one where Python has no zstd: 4 bytes of compile time, then the
    executable, zlib-compressed (the test checks what SafeCache does with bytes, not XLA's)."""
    return zlib.compress(int(3).to_bytes(4, "big") + payload)


def test_an_entry_is_written_whole_and_read_back(tmp_path):
    store = cache.SafeCache(str(tmp_path))
    assert store.get("jit_f-abc") is None
    store.put("jit_f-abc", _entry(b"program"))
    assert store.get("jit_f-abc") == _entry(b"program")
    assert sorted(os.listdir(tmp_path)) == ["jit_f-abc-cache"]  # no temporary left
    store.put("jit_f-abc", _entry(b"again"))  # replaced whole
    assert store.get("jit_f-abc") == _entry(b"again")


def test_an_unreadable_entry_is_skipped_and_removed(tmp_path):
    """A damaged or truncated entry reads as missing (JAX then compiles and puts the program again)."""
    store = cache.SafeCache(str(tmp_path))
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
    (tmp_path / f"{cache.TEMPORARY}{dead.pid}-1-jit_f-abc").write_bytes(b"half")
    (tmp_path / f"{cache.TEMPORARY}{os.getpid()}-1-jit_g-abc").write_bytes(b"being written")
    cache._remove_orphans(str(tmp_path))
    assert os.listdir(tmp_path) == [f"{cache.TEMPORARY}{os.getpid()}-1-jit_g-abc"]


def test_describe_says_where_and_how_large(tmp_path):
    assert cache.describe(str(tmp_path)) == f"{tmp_path}: 0 programs, 0.0 MB"
    (tmp_path / "jit_f-a-cache").write_bytes(b"x" * 2**20)
    (tmp_path / "jit_g-b-cache").write_bytes(b"x" * 2**19)
    (tmp_path / f"{cache.TEMPORARY}1-1-jit_h-c").write_bytes(b"x" * 2**20)  # not an entry yet
    assert cache.describe(str(tmp_path)) == f"{tmp_path}: 2 programs, 1.5 MB"


def _run(out, env):
    proc = subprocess.run([sys.executable, "-m", "jaxtrees.cli", "run", "juntas", "--quick", "--out", str(out), *TINY],
                          env={**os.environ, **env}, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    metadata = json.loads((out / "juntas" / "metadata.json").read_text())
    return proc, metadata["runs"][-1]["compiled_or_loaded"], (out / "juntas" / "rows")


def _rows(directory):
    from jaxtrees.experiments.store import read_results

    table = read_results(str(directory.parent))
    return [dict(zip(table.names, values)) for values in zip(*(table[n].tolist() for n in table.names))]


def test_a_damaged_cache_entry_is_compiled_again_with_the_same_rows(tmp_path):
    """Every entry of a filled cache damaged (one truncated, the others garbled): the next run compiles
    those programs, says nothing of an error, writes the same rows and puts whole entries back, which the
    run after it loads."""
    env = {"JAXTREES_CACHE_DIR": str(tmp_path / "cache")}
    _, how, rows = _run(tmp_path / "a", env)
    assert set(how.values()) == {"compiled"} and len(how) == 2
    reference = _rows(rows)
    entries = sorted((tmp_path / "cache").glob("*-cache"))
    assert entries
    for i, path in enumerate(entries):
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2] if i == 0 else bytes(b ^ 0x5A for b in data))
    proc, how, rows = _run(tmp_path / "b", env)
    assert set(how.values()) == {"compiled"}, how
    assert "Error" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert _rows(rows) == reference
    _, how, rows = _run(tmp_path / "c", env)
    assert set(how.values()) == {"loaded"}, how
    assert _rows(rows) == reference
    assert not list((tmp_path / "cache").glob(cache.TEMPORARY + "*"))
