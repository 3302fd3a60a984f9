"""The study runner and the command line: reproducibility, resumption, errors, every built-in study."""

import dataclasses
import json
import os
import platform
import re
import socket
import subprocess
import sys
import types
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

import helpers

from jaxtrees import cli
from jaxtrees.core import platform as cpu_platform
from jaxtrees.experiments import studies
from jaxtrees.experiments.run import compiled, job, runner
from jaxtrees.experiments.study import Compile, Study

ROOT = Path(__file__).resolve().parents[1]
TINY_JUNTAS = ["--set", "n=8", "--set", "k=2", "--set", "c=0,0.2", "--set", "impurity=entropy", "--set", "m_min=16",
               "--set", "m_max=64", "--set", "replicates=6", "--no-progress"]
TINY = {
    "juntas": TINY_JUNTAS,
    "parity": ["--set", "log2_n=3", "--set", "c=0,0.2", "--set", "impurity=gini", "--set", "m_min=32",
               "--set", "m_max=64", "--set", "replicates=4", "--no-progress"],
    "trees": ["--set", "log2_n=3", "--set", "c=0.2", "--set", "m_min=32", "--set", "m_max=64",
              "--set", "replicates=4", "--no-progress"],
    "addressing": ["--set", "k=2,3", "--set", "c=1", "--set", "impurity=gini", "--set", "replicates=4", "--no-progress"],
    "fourier": ["--set", "target=parity,tree", "--set", "n=6", "--set", "k=2", "--set", "c=0,0.2", "--set", "m_min=16",
                "--set", "m_max=64", "--set", "test_m=256", "--set", "replicates=4", "--no-progress"],
    "agnostic": ["--set", "k=4", "--set", "c=1", "--set", "eps=1", "--set", "replicates=4", "--no-progress"],
    "boosting": ["--set", "data=heart", "--set", "rounds=6", "--set", "forest_depth=3", "--set", "replicates=2",
                 "--no-progress"],
    "compare": ["--set", "learner=id3-gini,findmin", "--set", "family=parity,rank", "--set", "n=6",
                "--set", "c=0,0.2", "--set", "m_max=64", "--set", "test_m=256", "--set", "replicates=3", "--no-progress"],
    "rank": ["--set", "target=rank,junta", "--set", "n=6", "--set", "k=2", "--set", "c=0,0.2", "--set", "m_min=16",
             "--set", "m_max=64", "--set", "id3_depth=3", "--set", "max_rank=2", "--set", "replicates=4",
             "--no-progress"],
}


def _tiny(**values) -> list[str]:
    """TINY_JUNTAS with the given --set values replaced (a repeated --set is refused)."""
    return [f"{a.partition('=')[0]}={values[a.partition('=')[0]]}" if a.partition("=")[0] in values else a
            for a in TINY_JUNTAS]


def _rows(path):
    """A results directory's rows (``OUT/STUDY``, or a path inside it), as a list of row dicts (tests only)."""
    path = Path(path)
    directory = path if (path / "metadata.json").exists() or (path / "rows").exists() else path.parent
    table = runner.read_results(str(directory))
    nan = lambda v: "nan" if isinstance(v, float) and v != v else v  # noqa: E731 (NaN equal to NaN in comparisons)
    return [dict(zip(table.names, map(nan, values))) for values in zip(*(table[n].tolist() for n in table.names))]


def assert_same_rows_across_groups(rows, expected):
    """Rows of runs with different groups (trials vmapped per step): equal on a CPU, byte for byte. On a
    GPU the group changes how XLA compiles a trial's program, and floats may round apart (an H100 gave
    exact_error 1 ulp apart for groups 64 and 1024): float columns agree to 1e-6 relative, every other
    column exactly."""
    if jax.default_backend() == "cpu":
        assert rows == expected
        return
    assert len(rows) == len(expected)
    for row, want in zip(rows, expected):
        assert row.keys() == want.keys()
        for key in row:
            if row[key] != want[key]:
                try:
                    got, value = float(row[key]), float(want[key])
                except ValueError:
                    assert row[key] == want[key], key  # not a number: equal as text
                else:
                    assert got == pytest.approx(value, rel=1e-6, abs=1e-12), key


def _cli(*args, env=None, **kwargs):
    return subprocess.run([sys.executable, "-m", "jaxtrees.cli", *args], env={**os.environ, **(env or {})},
                          capture_output=True, text=True, **kwargs)


@pytest.fixture(scope="module")
def reference_file(tmp_path_factory):
    """The tiny juntas study, run once in this process with the default chunk size: its directory."""
    out = tmp_path_factory.mktemp("reference")
    assert cli.main(["run", "juntas", "--quick", "--out", str(out), *TINY_JUNTAS]) == 0
    return out / "juntas"


@pytest.fixture(scope="module")
def reference(reference_file):
    return _rows(reference_file)


def test_rows_are_complete_and_tidy(reference):
    assert len(reference) == 2 * 6 * 3  # cells (c) x replicates x m-grid (16, 32, 64)
    keys = [(r["cell"], r["replicate"], r["m"]) for r in reference]
    assert len(set(keys)) == len(keys)
    assert {r["m"] for r in reference} == {16, 32, 64}
    for r in reference:
        assert r["study"] == "juntas" and r["seed"] == 0
        assert r["exact_error"] >= 0 and r["success"] in (0, 1)


def test_chunk_size_does_not_change_results(tmp_path, reference):
    assert cli.main(["run", "juntas", "--quick", "--out", str(tmp_path), "--chunk", "5", *TINY_JUNTAS]) == 0
    assert _rows(tmp_path / "juntas") == reference


def test_eight_devices_give_identical_rows(tmp_path, reference):
    """The batch axis sharded over 8 virtual CPU devices: the same rows as on 1 device."""
    proc = _cli("run", "juntas", "--quick", "--out", str(tmp_path), *TINY_JUNTAS,
                env={"XLA_FLAGS": os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8",
                     "JAX_PLATFORMS": "cpu"})
    assert proc.returncode == 0, proc.stderr
    metadata = json.loads((tmp_path / "juntas" / "metadata.json").read_text())
    assert metadata["runs"][-1]["environment"]["local_device_count"] == 8
    assert all(size % (8 * runner.GROUP) == 0 for size in metadata["runs"][-1]["chunk"].values())
    assert _rows(tmp_path / "juntas") == reference


def test_run_splits_the_cpu_into_one_device_per_core_with_identical_rows(tmp_path, reference):
    """``jaxtrees run`` (JAXTREES_CPU_DEVICES unset) shards over one CPU device per core; 3 devices
    when asked; the rows stay those of one device. A bad count is refused before any work."""
    env = {k: v for k, v in os.environ.items() if k != "JAXTREES_CPU_DEVICES"}
    for name, devices in (("default", len(os.sched_getaffinity(0))), ("three", 3)):
        out = tmp_path / name
        extra = {"JAXTREES_CPU_DEVICES": "3"} if name == "three" else {}
        proc = subprocess.run([sys.executable, "-m", "jaxtrees.cli", "run", "juntas", "--quick", "--out", str(out),
                               *TINY_JUNTAS], env={**env, "JAX_PLATFORMS": "cpu", **extra}, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        metadata = json.loads((out / "juntas" / "metadata.json").read_text())
        assert metadata["runs"][-1]["environment"]["local_device_count"] == devices
        assert _rows(out / "juntas") == reference
    proc = _cli("run", "juntas", "--quick", "--out", str(tmp_path / "bad"), env={"JAXTREES_CPU_DEVICES": "0"})
    assert proc.returncode == 2 and "JAXTREES_CPU_DEVICES must be an integer >= 1" in proc.stderr
    assert not (tmp_path / "bad").exists()


def test_wide_vectors_sets_the_width_unless_xla_flags_does(monkeypatch):
    for env, avx512, expected in ((None, True, "512"), (None, False, None), ("128", False, "128"), ("256", True, "256")):
        monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=0")
        if env is None:
            monkeypatch.delenv("JAXTREES_CPU_VECTOR_WIDTH", raising=False)
        else:
            monkeypatch.setenv("JAXTREES_CPU_VECTOR_WIDTH", env)
        monkeypatch.setattr(cpu_platform, "_has_avx512", lambda: avx512)
        cpu_platform.wide_vectors()
        widths = re.findall(r"--xla_cpu_prefer_vector_width=(\d+)", os.environ["XLA_FLAGS"])
        assert widths == ([] if expected is None else [expected]), (env, avx512)
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_prefer_vector_width=256")
    monkeypatch.setenv("JAXTREES_CPU_VECTOR_WIDTH", "512")
    cpu_platform.wide_vectors()
    assert os.environ["XLA_FLAGS"] == "--xla_cpu_prefer_vector_width=256"  # the user's XLA_FLAGS wins
    monkeypatch.setenv("XLA_FLAGS", "")
    monkeypatch.setenv("JAXTREES_CPU_VECTOR_WIDTH", "1024")
    with pytest.raises(ValueError, match="JAXTREES_CPU_VECTOR_WIDTH must be 128, 256 or 512"):
        cpu_platform.wide_vectors()


def test_the_vector_width_leaves_the_rows_alone(tmp_path, reference):
    """The suite runs at the CLI's width (conftest); a run at another width writes the same rows
    and records its XLA_FLAGS. A bad width is refused before any work."""
    width = re.search(r"--xla_cpu_prefer_vector_width=(\d+)", os.environ["XLA_FLAGS"])
    other = "256" if width is None or width.group(1) == "512" else "512"
    flags = re.sub(r"\s*--xla_cpu_prefer_vector_width=\d+", "", os.environ["XLA_FLAGS"])
    proc = _cli("run", "juntas", "--quick", "--out", str(tmp_path / "other"), *TINY_JUNTAS,
                env={"XLA_FLAGS": flags, "JAXTREES_CPU_VECTOR_WIDTH": other})
    assert proc.returncode == 0, proc.stderr
    metadata = json.loads((tmp_path / "other" / "juntas" / "metadata.json").read_text())
    assert f"--xla_cpu_prefer_vector_width={other}" in metadata["runs"][-1]["environment"]["xla_flags"]
    assert _rows(tmp_path / "other" / "juntas") == reference
    proc = _cli("run", "juntas", "--quick", "--out", str(tmp_path / "bad"), env={"XLA_FLAGS": flags,
                                                                                "JAXTREES_CPU_VECTOR_WIDTH": "wide"})
    assert proc.returncode == 2 and "JAXTREES_CPU_VECTOR_WIDTH must be 128, 256 or 512" in proc.stderr
    assert not (tmp_path / "bad").exists()


def test_two_processes_write_the_same_results_as_one_byte_for_byte(tmp_path, reference_file):
    """jax.distributed on loopback (CPU, gloo): two processes take alternate trials and write their
    own parts; after a barrier process 0 writes metadata.json (one run entry), the figures and the report."""
    with socket.socket() as s:
        s.bind(("localhost", 0))
        port = s.getsockname()[1]
    args = [sys.executable, "-m", "jaxtrees.cli", "run", "juntas", "--quick", "--out", str(tmp_path), *TINY_JUNTAS,
            "--coordinator", f"localhost:{port}", "--num-processes", "2", "--process-id"]
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    procs = [subprocess.Popen([*args, str(i)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(2)]
    outputs = [proc.communicate(timeout=300) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], outputs
    directory = tmp_path / "juntas"
    assert _rows(directory) == _rows(reference_file)
    assert "process 1: its trials are in" in outputs[1][0] and "wrote" in outputs[0][0]
    metadata = json.loads((directory / "metadata.json").read_text())
    assert len(metadata["runs"]) == 1 and metadata["runs"][0]["environment"]["process_count"] == 2
    assert {path.name.split("-")[2] for path in (directory / "rows").glob("part-*.parquet")} == {"0000", "0001"}


@pytest.mark.parametrize("flags, match", [
    (["--coordinator", "localhost:1"], "--coordinator, --num-processes and --process-id go together"),
    (["--coordinator", "localhost:1", "--num-processes", "2", "--process-id", "2"], r"--process-id must be in \[0, 1\]"),
    (["--coordinator", "localhost:1", "--num-processes", "0", "--process-id", "0"], "--num-processes must be >= 1"),
])
def test_bad_process_flags_exit_2(tmp_path, capsys, flags, match):
    assert cli.main(["run", "juntas", "--quick", "--out", str(tmp_path), *TINY_JUNTAS, *flags]) == 2
    assert re.search(match, capsys.readouterr().err)


def test_progress_rate_and_eta_leave_out_compile_time(monkeypatch, capsys):
    from jaxtrees.experiments.run import progress

    now = [0.0]
    monkeypatch.setattr(progress.time, "perf_counter", lambda: now[0])
    monkeypatch.setattr(progress.sys.stderr, "isatty", lambda: False)
    bar = progress.Progress("demo", total=300)
    bar.phase("compiling n=8")
    now[0] = 10.0  # 10 s of compiling
    bar.phase("running")
    now[0] = 12.0  # then 100 trials in 2 s
    bar.update(100)
    lines = capsys.readouterr().err.splitlines()
    assert lines[-1] == "demo: 100/300 trials  50 trials/s  elapsed 12 s (compile 10 s)  ETA 4 s  [running]"
    assert bar.compiling == 10.0


def test_eta_counts_the_programs_still_to_compile(monkeypatch, capsys):
    from jaxtrees.experiments.run import progress

    now = [0.0]
    monkeypatch.setattr(progress.time, "perf_counter", lambda: now[0])
    monkeypatch.setattr(progress.sys.stderr, "isatty", lambda: False)
    bar = progress.Progress("demo", total=300, programs=3)
    bar.phase("compiling n=8")
    assert bar.eta() == float("inf")  # nothing compiled yet: unknown
    now[0] = 10.0
    bar.compiled(10.0)
    now[0] = 12.0  # 100 trials in 2 s; two programs left at 10 s each
    bar.update(100)
    assert bar.eta() == pytest.approx(200 / 50 + 2 * 10)
    bar.phase("compiling n=16")
    now[0] = 15.0  # 3 s into the second compile
    assert bar.eta() == pytest.approx(4 + 2 * 10 - 3)
    lines = capsys.readouterr().err.splitlines()
    assert lines[-1] == ("demo: 100/300 trials  50 trials/s  elapsed 12 s (compile 10 s, 1/3 programs)  ETA 24 s  "
                         "[compiling n=16]")


def test_traced_grid_values_share_a_program_and_keep_their_rows(tmp_path):
    """juntas over k = 2, 3 and two impurities: one program (k and the impurity traced, groups packed
    by their values, whatever the chunk and group); each cell's rows are those of a run of that cell
    alone where the bound is the same (k = 3), and the same successes where it is not (k = 2)."""
    grid = ["--set", "n=8", "--set", "k=2,3", "--set", "impurity=entropy,gini", "--set", "c=0.2", "--set", "m_min=16",
            "--set", "m_max=64", "--set", "replicates=5", "--no-progress"]
    assert cli.main(["run", "juntas", "--quick", "--out", str(tmp_path / "all"), *grid]) == 0
    metadata = json.loads((tmp_path / "all" / "juntas" / "metadata.json").read_text())
    assert list(metadata["runs"][-1]["compile_seconds"]) == [
        '{"impurity_choices": ["entropy", "gini"], "k_max": 3, "m_max": 64, "m_min": 16, "n": 8}']
    rows = _rows(tmp_path / "all" / "juntas")
    assert cli.main(["run", "juntas", "--quick", "--out", str(tmp_path / "mixed"), *grid, "--group", "4",
                     "--chunk", "8"]) == 0
    mixed = _rows(tmp_path / "mixed" / "juntas")  # another group: another program, floats within the contract
    floats = ("exact_error", "eps_star", "p_min")
    assert [{c: v for c, v in r.items() if c not in floats} for r in mixed] == \
        [{c: v for c, v in r.items() if c not in floats} for r in rows]
    for name in floats:
        assert [r[name] for r in mixed] == pytest.approx([r[name] for r in rows], rel=1e-6, abs=1e-7)
    strip = lambda r: {k: v for k, v in r.items() if k != "cell"}  # noqa: E731
    for k in ("2", "3"):
        for impurity in ("entropy", "gini"):
            out = tmp_path / f"{k}-{impurity}"
            alone = [*grid, "--set", f"k={k}", "--set", f"impurity={impurity}"]
            alone = [a for i, a in enumerate(alone) if a not in ("k=2,3", "impurity=entropy,gini")
                     and not (a == "--set" and alone[i + 1] in ("k=2,3", "impurity=entropy,gini"))]
            assert cli.main(["run", "juntas", "--quick", "--out", str(out), *alone]) == 0
            single = [strip(r) for r in _rows(out / "juntas")]
            mine = [strip(r) for r in rows if r["k"] == int(k) and r["impurity"] == impurity]
            if k == "3":  # across programs: floats within the contract's 1e-6
                assert [{c: v for c, v in r.items() if c not in floats} for r in mine] == \
                    [{c: v for c, v in r.items() if c not in floats} for r in single]
                for name in floats:
                    assert [r[name] for r in mine] == pytest.approx([r[name] for r in single], rel=1e-6)
            else:
                exact = lambda rs: [{c: v for c, v in r.items() if c not in floats} for r in rs]  # noqa: E731
                assert exact(mine) == exact(single)
                for name in floats:
                    assert [float(r[name]) for r in mine] == pytest.approx(
                        [float(r[name]) for r in single], rel=1e-6, abs=1e-7)


def test_group_size_by_platform_and_memory():
    cpu = jax.local_devices(backend="cpu")[0]
    gpu = types.SimpleNamespace(platform="gpu", memory_stats=lambda: {"bytes_limit": 80 * 2**30})
    assert runner.group_size(cpu) == runner.GROUP == 32 and runner.group_size(gpu) == runner.ACCELERATOR_GROUP
    assert runner.memory_budget(gpu) == 20 * 2**30 and runner.memory_budget(cpu) == runner.MEMORY_BUDGET
    assert runner.group_size(gpu, bytes_per_trial=2**25) == 512  # 1024 x 32 MiB > 20 GiB: halved once
    assert runner.group_size(gpu, bytes_per_trial=2**40) == runner.GROUP  # never below a CPU's group
    assert runner.group_size(gpu, group=7) == 7
    assert runner.group_size(cpu, working_set=runner.CPU_CACHE_BUDGET // 32) == 32  # fits: kept
    assert runner.group_size(cpu, working_set=runner.CPU_CACHE_BUDGET // 3) == 2  # halved until 2 x fits
    assert runner.group_size(cpu, working_set=2**40) == 1  # never below one trial
    assert runner.group_size(gpu, working_set=2**40) == runner.ACCELERATOR_GROUP  # a CPU's cache only
    with pytest.raises(ValueError, match=r"group must be in \[1, 65536\]"):
        runner.group_size(cpu, group=0)


def test_a_given_group_is_recorded_and_a_resumed_run_keeps_it(tmp_path, reference):
    """--group 64 on this CPU gives the same rows as the default 32 (not guaranteed in general: the
    group is part of the arithmetic, so metadata records it and a resumed run keeps it)."""
    study = studies.get("juntas")
    config = runner.configure(study, quick=True,
                              overrides={"n": 8, "k": 2, "c": "0,0.2", "impurity": "entropy", "m_min": 16, "m_max": 64,
                                         "replicates": 6})
    results = runner.run(study, config, str(tmp_path), group=64, progress=False, max_trials=5)
    runner.run(study, config, str(tmp_path), progress=False)
    metadata = json.loads((tmp_path / "juntas" / "metadata.json").read_text())
    assert [set(run["group"].values()) for run in metadata["runs"]] == [{64}, {64}]
    assert_same_rows_across_groups(_rows(results), reference)


def test_a_resumed_run_under_other_compiler_options_is_refused_or_recorded(tmp_path, reference, monkeypatch):
    """Compiler options change a program's arithmetic (LLVM -O1 rounds some of these rows' errors 1 ulp apart
    from -O2): a resume under other options is refused, naming them; ``allow_changes`` resumes and records it."""
    study = studies.get("juntas")
    config = runner.configure(study, quick=True,
                              overrides={"n": 8, "k": 2, "c": "0,0.2", "impurity": "entropy", "m_min": 16, "m_max": 64,
                                         "replicates": 6})
    first = runner.compiler_options(study, jax.devices()[0])  # the reference's
    runner.run(study, config, str(tmp_path), progress=False, max_trials=5)
    monkeypatch.setattr(job, "compiler_options", lambda study, device: {runner.OPT_LEVEL_FLAG: 1})
    with pytest.raises(runner.Changed, match="the compiler options: recorded"):
        runner.run(study, config, str(tmp_path), progress=False)
    metadata = json.loads((tmp_path / "juntas" / "metadata.json").read_text())
    assert len(metadata["runs"]) == 1 and metadata["contract"]["compiler_options"] == first
    runner.run(study, config, str(tmp_path), progress=False, allow_changes=True)
    metadata = json.loads((tmp_path / "juntas" / "metadata.json").read_text())
    assert [o.split(":")[0] for o in metadata["runs"][-1]["overrides"]] == ["the compiler options"]
    assert metadata["contract"]["compiler_options"] == {runner.OPT_LEVEL_FLAG: 1}


def test_a_killed_run_keeps_the_timings_of_its_finished_programs(tmp_path, monkeypatch):
    """metadata.json is rewritten after every compiled program: killed while compiling the second
    of two programs (n = 8, 10), the run's entry has the first program's compile and run seconds."""
    study = studies.get("juntas")
    config = runner.configure(study, quick=True, overrides={"n": "8,10", "k": 2, "c": 0.2, "impurity": "entropy",
                                                            "m_min": 16, "m_max": 64, "replicates": 2})
    compile_ = compiled.build
    calls = []

    def killed_on_the_second(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return compile_(*args, **kwargs)

    monkeypatch.setattr(compiled, "build", killed_on_the_second)
    with pytest.raises(KeyboardInterrupt):  # one compile thread: the second build is the second program's
        runner.run(study, config, str(tmp_path), progress=False, compile_threads=1)
    run = json.loads((tmp_path / "juntas" / "metadata.json").read_text())["runs"][-1]
    assert len(run["compile_seconds"]) == len(run["run_seconds"]) == 1 and run["trials_run"] == {
        name: 2 for name in run["run_seconds"]}
    assert "finished" not in run and run["seconds"] > 0


def test_programs_compiled_ahead_give_the_rows_of_one_at_a_time(tmp_path):
    """Three programs (n = 8, 10, 12) compiled one ahead or all at once on background threads: the same
    rows; each program's compile seconds (its thread's) and the run's wait for it are recorded."""
    study = studies.get("juntas")
    config = runner.configure(study, quick=True, overrides={"n": "8,10,12", "k": 2, "c": 0.2, "impurity": "entropy",
                                                            "m_min": 16, "m_max": 64, "replicates": 3})
    rows = []
    for threads in (1, 3):
        out = tmp_path / str(threads)
        rows.append(_rows(runner.run(study, config, str(out), progress=False, compile_threads=threads)))
        run = json.loads((out / "juntas" / "metadata.json").read_text())["runs"][-1]
        assert list(run["compile_wait_seconds"]) == list(run["compile_seconds"]) == list(run["run_seconds"])
        assert len(run["compile_seconds"]) == 3 and all(s > 0 for s in run["compile_seconds"].values())
    assert rows[0] == rows[1] and len(rows[0]) == 3 * 3 * 3
    with pytest.raises(ValueError, match=r"compile_threads must be in \[1, 64\]"):
        runner.run(study, config, str(tmp_path / "bad"), progress=False, compile_threads=0)


def test_a_program_that_fails_to_compile_raises_after_the_earlier_ones_ran(tmp_path, monkeypatch):
    """An error while tracing the second of two programs (on its background thread) is raised in the
    run when that program's turn comes, after the first program's rows are written."""
    study = studies.get("juntas")
    config = runner.configure(study, quick=True, overrides={"n": "8,10", "k": 2, "c": 0.2, "impurity": "entropy",
                                                            "m_min": 16, "m_max": 64, "replicates": 2})
    compile_ = compiled.build

    def fails_for_n10(study_, static, *args, **kwargs):
        if static["n"] == 10:
            raise ValueError("no program for n = 10")
        return compile_(study_, static, *args, **kwargs)

    monkeypatch.setattr(compiled, "build", fails_for_n10)
    with pytest.raises(ValueError, match="no program for n = 10"):
        runner.run(study, config, str(tmp_path), progress=False, compile_threads=2)
    assert len(runner.read_results(str(tmp_path / "juntas"))) == 2 * 3  # n = 8: 2 trials x the m-grid (16, 32, 64)


def test_branches_of_one_program_give_the_rows_of_a_program_each(tmp_path):
    """Study.branches: the addressing study's k and c are branches of one program (a lax.switch on the
    group's branch); its rows are those of one program per (k, c), byte for byte."""
    study = studies.get("addressing")
    assert study.branches == ("k", "c", "code")
    config = runner.configure(study, quick=True, overrides={"k": "3,4", "c": "1,2", "impurity": "gini,entropy"},
                              replicates=3)
    separate = dataclasses.replace(study, compile=dataclasses.replace(study.compile, branches=()))
    assert len(study.programs(config)) == 1 and len(separate.programs(config)) == 4
    assert sorted(study.programs(config)[0]["branches"]) == [(3, 1, "block"), (3, 2, "block"), (4, 1, "block"),
                                                             (4, 2, "block")]
    rows = [_rows(runner.run(s, config, str(tmp_path / str(i)), progress=False)) for i, s in enumerate((study, separate))]
    assert rows[0] == rows[1] and len(rows[0]) == 4 * 2 * 3 * 6


def test_branches_must_be_static_and_share_their_output_shapes(tmp_path):
    def trial(key, params):
        return {"x": jnp.zeros((), jnp.float32 if params["n"] == 2 else jnp.int32)}  # a dtype that differs

    study = Study(name="shapes", trial=trial, grid={"n": [2, 3]}, replicates=2, static=("n",),
                  compile=Compile(branches=("n",)))
    with pytest.raises(ValueError, match=r"outputs differ between the branches \{'n': \(2, 3\)\}"):
        runner.run(study, runner.configure(study, quick=True), str(tmp_path), progress=False)
    with pytest.raises(ValueError, match=r"branches \['n'\] must be static"):
        dataclasses.replace(study, static=())


def test_after_runs_once_outside_the_branches_and_gives_the_rows_of_the_inline_trial(tmp_path):
    """Study.after: the trial's outputs of every branch (padded to one shape) go through ``after`` once,
    with the trial's key and the non-branch parameters; the rows are those of a trial doing it inline."""
    seen = []

    def head(key, params):
        n = params["n"]
        x = jnp.zeros(4).at[:n].set(jax.random.uniform(key, (n,)))  # padded to the largest n
        return {"x": x, "n": jnp.int32(n), "first": x[0]}

    def after(key, params, out):
        seen.append(sorted(params))
        x, n = out.pop("x"), out.pop("n")
        total = jnp.sum(jnp.where(jnp.arange(4) < n, x, 0.0))
        return out | {"total": total, "scaled": x[1] * params["scale"], "u": jax.random.uniform(jax.random.fold_in(key, 1))}

    def inline(key, params):
        return after(key, {"scale": params["scale"]}, head(key, params))

    common = dict(grid=({"n": [2, 3, 4], "scale": [1.0, 2.0]}, {"n": [2, 3, 4], "scale": [1.0]}), static=("n",),
                  replicates=3)
    split = Study(name="after", trial=head, compile=Compile(branches=("n",), after=after), **common)
    alone = Study(name="after", trial=inline, **common)
    config = runner.configure(split, quick=True)
    assert len(split.programs(config)) == 1 and len(alone.programs(config)) == 3
    rows = [_rows(runner.run(s, config, str(tmp_path / str(i)), progress=False)) for i, s in enumerate((split, alone))]
    assert rows[0] == rows[1] and len(rows[0]) == 3 * 2 * 3
    assert seen and all(s == ["scale"] for s in seen)  # without the branch parameter n (run and probe alike)
    seen.clear()
    runner.run(split, runner.configure(split, quick=True, overrides={"n": 3}), str(tmp_path / "one"), progress=False)
    assert seen and all(s == ["scale"] for s in seen)  # a program of one branch passes the same parameters


def test_partial_run_then_resume(tmp_path, reference):
    study = studies.get("juntas")
    overrides = {"n": 8, "k": 2, "c": "0,0.2", "impurity": "entropy", "m_min": 16, "m_max": 64, "replicates": 6}
    config = runner.configure(study, quick=True, overrides=overrides)
    results = runner.run(study, config, str(tmp_path), chunk=4, progress=False, max_trials=5)
    assert len(runner.read_results(results)) == 5 * 3  # 5 of 12 trials done
    runner.run(study, config, str(tmp_path), chunk=4, progress=False)
    assert _rows(results) == reference


def test_killed_run_resumes_with_every_row_once(tmp_path):
    """SIGKILL a run (32 trials per chunk, the smallest) once chunks are on disk; the same command finishes it
    with every row exactly once, equal to an uninterrupted run."""
    tiny = _tiny(replicates=320)  # 640 trials: 20 chunks of 32
    assert cli.main(["run", "juntas", "--quick", "--out", str(tmp_path / "whole"), *tiny]) == 0
    whole = _rows(tmp_path / "whole" / "juntas")
    args = ["run", "juntas", "--quick", "--out", str(tmp_path / "killed"), "--chunk", "1", "--group", "32", *tiny]
    written = helpers.run_killed(args, tmp_path / "killed" / "juntas" / "rows")
    assert 2 <= written < 20
    assert cli.main(args) == 0
    assert_same_rows_across_groups(_rows(tmp_path / "killed" / "juntas"), whole)
    metadata = json.loads((tmp_path / "killed" / "juntas" / "metadata.json").read_text())
    assert len(metadata["runs"]) == 2 and metadata["runs"][-1]["trials"] == 640 - 32 * written


def test_seed_changes_rows_and_rows_depend_only_on_their_cell(tmp_path, reference):
    """Another seed gives other rows; dropping a cell from the grid leaves the other's rows as they were."""
    assert cli.main(["run", "juntas", "--quick", "--out", str(tmp_path / "a"), *TINY_JUNTAS, "--seed", "1"]) == 0
    other = _rows(tmp_path / "a" / "juntas")
    assert [r["exact_error"] for r in other] != [r["exact_error"] for r in reference]
    assert cli.main(["run", "juntas", "--quick", "--out", str(tmp_path / "b"), *_tiny(c=0.2)]) == 0
    only = _rows(tmp_path / "b" / "juntas")
    same = [r for r in reference if r["c"] == 0.2]
    drop = ("cell",)
    assert [{k: v for k, v in r.items() if k not in drop} for r in only] == \
           [{k: v for k, v in r.items() if k not in drop} for r in same]


@pytest.mark.parametrize("name", sorted(TINY))
def test_every_study_runs_plots_and_reports(tmp_path, capsys, unclipped_figures, name):
    assert cli.main(["run", name, "--quick", "--out", str(tmp_path), *TINY[name]]) == 0
    directory = tmp_path / name
    assert (directory / f"{name}.png").stat().st_size > 10_000
    assert (directory / f"{name}.svg").exists()
    report = (directory / "report.md").read_text()
    assert report.startswith(f"# jaxtrees study `{name}`") and "|---|" in report
    assert helpers.assert_valid_markdown_tables(report) >= 1
    columns = json.loads((directory / "metadata.json").read_text())["columns"]
    assert set(runner.read_results(str(directory)).names) <= set(columns), "every column is described in metadata.json"
    capsys.readouterr()
    assert cli.main(["report", str(directory)]) == 0
    assert capsys.readouterr().out.strip() == report.strip()
    assert cli.main(["plot", str(directory)]) == 0


def test_a_rerun_loads_its_programs_from_the_compilation_cache(tmp_path):
    """With JAXTREES_CACHE_DIR set, the first run fills the cache and compiles, a second run into another
    directory loads every program (metadata, the report's cost table and the progress line say which) and
    writes the same rows; each run names the cache and its size on stderr."""
    env = {"JAXTREES_CACHE_DIR": str(tmp_path / "cache")}
    pairs = zip(TINY["rank"][:-1:2], TINY["rank"][1::2])  # ("--set", "name=value"), then --no-progress
    tiny = [a for flag, value in pairs if not value.startswith(("target=", "c=")) for a in (flag, value)]
    for out in ("a", "b"):
        proc = _cli("run", "rank", "--quick", "--out", str(tmp_path / out), *tiny, "--set", "target=rank",
                    "--set", "c=0", env=env)
        assert proc.returncode == 0, proc.stderr
        size = re.search(rf"compilation cache {re.escape(str(tmp_path / 'cache'))}: (\d+) programs?, [\d.]+ MB", proc.stderr)
        assert size and (int(size.group(1)) == 0) == (out == "a"), proc.stderr  # empty, then the first run's
        run = json.loads((tmp_path / out / "rank" / "metadata.json").read_text())["runs"][-1]
        how = "compiled" if out == "a" else "loaded"
        assert set(run["compiled_or_loaded"].values()) == {how}, run["compiled_or_loaded"]
        assert list(run["compiled_or_loaded"]) == list(run["compile_seconds"])
        assert f", {how} in " in proc.stderr  # the progress line: "[running k=..., loaded in 0.3 s]"
        assert f"| {how} " in (tmp_path / out / "rank" / "report.md").read_text()
    assert any((tmp_path / "cache").iterdir())
    assert _rows(tmp_path / "a" / "rank") == _rows(tmp_path / "b" / "rank")


@pytest.mark.parametrize("name", sorted(studies.STUDIES))
def test_every_studys_quick_and_full_sizes_pass_its_checks(name):
    """Each size's every cell passes the study's parameter checks (a full size that cannot start
    is found here, not after a user's install)."""
    for quick in (True, False):
        assert runner.configure(studies.get(name), quick=quick, overrides={}, seed=0).cells()


def test_list_names_every_study(capsys):
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    for name in studies.STUDIES:
        assert name in out


@pytest.mark.parametrize("args, message", [
    (["run", "nope"], "unknown study 'nope'"),
    (["run", "juntas", "--set", "depth=3"], "unknown parameter 'depth'"),
    (["run", "juntas", "--set", "k=0"], "k must be in [1, 12]"),
    (["run", "juntas", "--set", "k=x"], "k must be int"),
    (["run", "juntas", "--set", "c=0.6"], "c must be in [0, 0.5)"),
    (["run", "juntas", "--set", "m_max=1000"], "powers of two"),
    (["run", "juntas", "--set", "replicates=0"], "replicates must be"),
    (["run", "juntas", "--set", "k"], "NAME=VALUE"),
    (["run", "agnostic", "--set", "k=3", "--set", "eps=0.25"], "eps = 0.25"),
    (["run", "addressing", "--set", "code=gray"], "code must be one of"),
    (["run", "juntas", "--set", "c=0.1,0.10"], "lists the value 0.1 more than once"),
    (["run", "juntas", "--set", "replicates=50000000"], "replicates must be in [1, "),
    (["run", "juntas", "--set", "replicates=5e7"], "replicates must be int"),
    (["report", "/nonexistent"], "not a results directory"),
])
def test_bad_input_exits_2_with_a_clear_message(tmp_path, capsys, args, message):
    assert cli.main([*args, "--out", str(tmp_path)] if args[0] == "run" else args) == 2
    assert message in capsys.readouterr().err


def test_other_config_in_same_directory_is_refused(tmp_path, capsys):
    assert cli.main(["run", "juntas", "--quick", "--out", str(tmp_path), *TINY_JUNTAS]) == 0
    assert cli.main(["run", "juntas", "--quick", "--out", str(tmp_path), *TINY_JUNTAS, "--seed", "5"]) == 2
    assert "another configuration" in capsys.readouterr().err


def test_config_file(tmp_path):
    config = tmp_path / "grid.json"
    config.write_text(json.dumps({"n": 8, "k": 2, "c": [0.2], "impurity": "entropy", "m_min": 16, "m_max": 32, "replicates": 2, "seed": 3}))
    assert cli.main(["run", "juntas", "--config", str(config), "--out", str(tmp_path), "--no-progress"]) == 0
    rows = _rows(tmp_path / "juntas")
    assert len(rows) == 2 * 2 and {r["seed"] for r in rows} == {3}


def test_values_are_coerced_to_the_parameter_type():
    """"c": 0 from a JSON file and c=0 from --set are the same cell (the same keys)."""
    study = studies.get("juntas")
    from_json = runner.configure(study, quick=True, overrides={"c": [0, 0.2], "k": 3})
    from_cli = runner.configure(study, quick=True, overrides={"c": "0,0.2", "k": "3"})
    assert from_json == from_cli and from_json.grid["c"] == [0.0, 0.2]
    assert [runner.cell_hash(c) for c in from_json.cells()] == [runner.cell_hash(c) for c in from_cli.cells()]
    with pytest.raises(ValueError, match="k must be int"):
        runner.configure(study, quick=True, overrides={"k": 2.5})


def test_figures_wrap_panels_and_repeat_the_y_label(tmp_path):
    """Six panels: two rows of PANELS_PER_ROW = 4 columns, two hidden slots, the y label of the
    first panel repeated on the second row's first panel; PNG and SVG written."""
    from jaxtrees.experiments.report import saving, summary

    fig, axes = summary.figure(6)
    assert len(axes) == 6 and len(fig.axes) == 8 and sum(ax.get_visible() for ax in fig.axes) == 6
    axes[0].set_ylabel("P[success]")
    row_starts = [ax for ax in axes if ax.get_subplotspec().is_first_col()]
    paths = saving.save(fig, str(tmp_path / "six"))
    assert [ax.get_ylabel() for ax in row_starts] == ["P[success]", "P[success]"]
    assert all(os.path.getsize(p) > 0 for p in paths)


def test_split_groups_rows_in_natural_cell_order():
    from jaxtrees.experiments import table as tables

    rows = tables.Table.from_rows([{"c": c, "k": k} for c, k in [("0.2", "10"), ("0.05", "3"), ("0.2", "3"),
                                                                   ("0.05", "3")]])
    parts = tables.split(rows, ["c", "k"])
    assert list(parts) == [(0.05, 3), (0.2, 3), (0.2, 10)]
    assert [len(p) for p in parts.values()] == [2, 1, 1]
    assert tables.cells(rows, ["k"]) == [(3,), (10,)]


def test_a_second_writer_is_refused_while_the_first_holds_the_lock(tmp_path, capsys):
    """Two runs into one --out would each write every row: the second is refused (exit 2) while the
    first holds the directory's lock, and runs (resuming) once the lock is released."""
    from jaxtrees.experiments.results.store import Store

    config = runner.configure(studies.get("juntas"), quick=True,
                              overrides={"n": 8, "k": 2, "c": "0,0.2", "impurity": "entropy", "m_min": 16, "m_max": 64,
                                         "replicates": 6})
    first = Store(str(tmp_path), "juntas")
    first.open(config.as_json())
    assert cli.main(["run", "juntas", "--quick", "--out", str(tmp_path), *TINY_JUNTAS]) == 2
    assert f"another run (host {platform.node()}, pid {os.getpid()}, run " in capsys.readouterr().err
    first.close()
    assert cli.main(["run", "juntas", "--quick", "--out", str(tmp_path), *TINY_JUNTAS]) == 0
    rows = _rows(tmp_path / "juntas")
    assert len(rows) == len({(r["cell"], r["replicate"], r["m"]) for r in rows}) == 2 * 6 * 3


def test_a_killed_runs_temporaries_are_removed_and_a_partial_report_says_so(tmp_path, capsys):
    study = studies.get("juntas")
    config = runner.configure(study, quick=True,
                              overrides={"n": 8, "k": 2, "c": "0,0.2", "impurity": "entropy", "m_min": 16, "m_max": 64,
                                         "replicates": 6})
    directory = tmp_path / "juntas"
    (directory / "rows").mkdir(parents=True)
    leftovers = [directory / "metadata.json.p4242.tmp", directory / "report.md.p4242.tmp",
                 directory / "rows" / ".p0-part-x.parquet.tmp"]
    another_process = directory / "rows" / ".p1-part-y.parquet.tmp"  # process 1's, perhaps still writing
    for path in [*leftovers, another_process]:
        path.write_text("half a file")
    runner.run(study, config, str(tmp_path), chunk=4, progress=False, max_trials=5)
    assert not any(path.exists() for path in leftovers) and another_process.exists()
    assert cli.main(["report", str(directory)]) == 0
    assert "**incomplete: 5 of 12 trials**" in capsys.readouterr().out
    runner.run(study, config, str(tmp_path), chunk=4, progress=False)
    assert cli.main(["report", str(directory)]) == 0
    assert "incomplete" not in capsys.readouterr().out


def test_out_that_is_a_file_is_a_clear_error(tmp_path, capsys):
    target = tmp_path / "a-file"
    target.write_text("")
    assert cli.main(["run", "juntas", "--quick", "--out", str(target), *TINY_JUNTAS]) == 2
    assert "out: cannot write the results directory" in capsys.readouterr().err


def test_a_rounded_chunk_is_announced_and_metadata_describes_the_run(tmp_path, capsys):
    args = [a for a in TINY_JUNTAS if a != "--no-progress"]
    assert cli.main(["run", "juntas", "--quick", "--out", str(tmp_path), "--chunk", "5", *args]) == 0
    err = capsys.readouterr().err
    assert f"chunk 5 rounded up to {runner.group_size(jax.local_devices()[0])}" in err  # 32 on a CPU
    assert "[compiling impurity_choices=entropy, k_max=2, m_max=64, m_min=16, n=8]" in err and "[done]" in err
    metadata = json.loads((tmp_path / "juntas" / "metadata.json").read_text())
    run = metadata["runs"][-1]
    env = run["environment"]
    for field in ("git_commit", "optax", "matplotlib", "host", "command", "device_kind"):
        assert field in env, field
    assert env["git_commit"] is None or len(env["git_commit"].split("+")[0]) == 40
    assert list(run["compile_seconds"].values())[0] > 0


def test_study_figures_leave_the_callers_backend_and_rcparams_alone(tmp_path):
    """A notebook's inline backend must survive a study's plot (summary.figure used to force Agg)."""
    code = ("import matplotlib; matplotlib.use('pdf'); size = matplotlib.rcParams['font.size']\n"
            "from jaxtrees.experiments import studies\n"
            "rows = [dict(study='juntas', n='8', k='2', c=c, impurity='entropy', m=m, success=s, cell='0',\n"
            "             replicate='0', exact_error='0', support_recovered='1')\n"
            "        for c in ('0.0', '0.2') for m in ('16', '32') for s in ('0', '1')]\n"
            f"studies.get('juntas').plot(rows, {str(tmp_path / 'j')!r})\n"
            "print(matplotlib.get_backend(), matplotlib.rcParams['font.size'] == size)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={k: v for k, v in os.environ.items() if k != "MPLBACKEND"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["pdf", "True"]
    assert (tmp_path / "j.png").stat().st_size > 10_000


GPU = types.SimpleNamespace(platform="gpu", device_kind="a GPU")


def test_gpu_programs_compile_without_the_fusion_autotuner(monkeypatch):
    """On a GPU every program (the runner's, the benchmarks' ``programs.jit``) turns XLA's fusion autotuner
    off, which compiled reduce fusions through Triton for minutes; CPU programs keep their options."""
    from jaxtrees.core import programs

    monkeypatch.delenv("XLA_FLAGS", raising=False)
    off = {programs.FUSION_AUTOTUNER: False}
    assert programs.compiler_options(GPU) == off  # this jaxlib's XLA knows the option
    assert programs.compiler_options(jax.devices("cpu")[0]) is None
    study = studies.get("juntas")
    assert runner.compiler_options(study, GPU) == off
    assert runner.compiler_options(study, jax.devices("cpu")[0]) == {runner.OPT_LEVEL_FLAG: study.cpu_opt_level}
    monkeypatch.setenv("XLA_FLAGS", f"--{programs.FUSION_AUTOTUNER}=true")  # the user's flag wins
    assert programs.compiler_options(GPU) is None and runner.compiler_options(study, GPU) is None


def test_compiler_options_an_xla_does_not_know_are_left_out():
    from jaxtrees.core import programs

    assert programs._accepted(((programs.FUSION_AUTOTUNER, False),))
    assert not programs._accepted((("xla_gpu_no_such_option_in_any_xla", False),))
    assert int(programs.jit(lambda x: x + 1)(jnp.int32(1))) == 2  # CPU: jax.jit without options
