"""A researcher's own study, first class: run from a file (CLI) or from Python, --help, generic figures and report,
plot / report with the file gone, a changed study refused, a grid that grows, two processes."""

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import jaxtrees as jt
from jaxtrees import cli
from jaxtrees.experiments.results import reading

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
TINY = ["--quick", "--set", "m_max=64", "--set", "replicates=4", "--no-progress"]


@pytest.fixture
def study_file(tmp_path):
    """A copy of notebooks/own_study.py, free to edit or move."""
    path = tmp_path / "src" / "own_study.py"
    path.parent.mkdir()
    shutil.copy(NOTEBOOKS / "own_study.py", path)
    return path


def _rows(directory) -> dict:
    rows = reading.read_results(str(directory))
    keys = zip(*(np.asarray(rows[n]).tolist() for n in ("eta", "replicate", "m")))
    return dict(zip(keys, zip(*(np.asarray(rows[n]).tolist() for n in ("success", "exact_error")))))


def test_the_own_study_file_is_short():
    """At most 25 lines of code: blank lines, comments and the module's docstring aside."""
    import ast

    text = (NOTEBOOKS / "own_study.py").read_text()
    docstring = ast.parse(text).body[0]
    lines = text.splitlines()[docstring.end_lineno:]
    code = [line for line in lines if line.strip() and not line.strip().startswith("#")]
    assert 10 <= len(code) <= 25, len(code)


def test_help_lists_the_study_s_parameters(study_file, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["run", str(study_file), "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "study juntas-noise: ID3 on c-smoothed 3-juntas" in out
    assert "label noise: each training label is flipped with probability eta" in out and "m_max" in out


def test_a_run_writes_rows_figures_and_a_generic_report_that_survive_the_file(study_file, tmp_path, capsys):
    out = tmp_path / "out"
    assert cli.main(["run", str(study_file), "--out", str(out), *TINY]) == 0
    directory = out / "juntas-noise"
    assert list((directory / "rows").glob("part-*.parquet"))
    assert (directory / "juntas-noise.png").read_bytes()[:4] == b"\x89PNG"
    assert "<svg" in (directory / "juntas-noise.svg").read_text()
    report = (directory / "report.md").read_text()
    assert "95%" in report and "m for 90%" in report and "Cost per compiled program" in report
    metadata = json.loads((directory / "metadata.json").read_text())
    assert metadata["study"]["source"] == {"file": str(study_file), "name": "STUDY"}
    study_file.rename(tmp_path / "elsewhere.py")
    capsys.readouterr()
    assert cli.main(["plot", str(directory)]) == 0 and cli.main(["report", str(directory)]) == 0
    captured = capsys.readouterr()
    assert "cannot import the study 'juntas-noise'" in captured.err and "generic" in captured.err
    assert "m for 90%" in captured.out


def test_a_changed_trial_or_declaration_is_refused_naming_it_and_allowed_on_request(study_file, tmp_path, capsys):
    args = ["run", str(study_file), "--out", str(tmp_path), *TINY]
    assert cli.main(args) == 0
    text = study_file.read_text()
    study_file.write_text(text.replace("error <= 1e-6", "error <= 1e-5"))
    capsys.readouterr()
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert "own code was edited (own_study.py: trial (edited))" in err and "Traceback" not in err
    study_file.write_text(text.replace('static=("m_min", "m_max"),', 'static=("m_min", "m_max"), shared=("eta",),'))
    assert cli.main(args) == 2
    assert "the study's shared: recorded [], now ['eta']" in capsys.readouterr().err
    assert cli.main([*args, "--allow-changes"]) == 0
    runs = json.loads((tmp_path / "juntas-noise" / "metadata.json").read_text())["runs"]
    assert any("the study's shared" in change for change in runs[-1]["overrides"])


def test_a_declared_figure_layout_and_condition_shape_the_figure_and_the_report(study_file, tmp_path):
    """Study(plot=jt.figure(...), condition=...): panels by c, lines by eta; the report compares eta's values; both
    kept in metadata.json, so `jaxtrees report` without the file compares the same way."""
    text = study_file.read_text().replace('    static=("m_min", "m_max"),', '    static=("m_min", "m_max"), condition="eta",\n'
                                          '    plot=jt.figure(x="m", hue="eta", col="c"),')
    study_file.write_text(text)
    assert cli.main(["run", str(study_file), "--out", str(tmp_path), *TINY, "--set", "c=0.1,0.2"]) == 0
    directory = tmp_path / "juntas-noise"
    spec = json.loads((directory / "metadata.json").read_text())["study"]["spec"]
    assert spec["condition"] == "eta" and spec["figure"] == {"x": "m", "hue": ["eta"], "col": ["c"], "outputs": None}
    report = (directory / "report.md").read_text()
    assert "success: by eta" in report
    study_file.unlink()
    assert cli.main(["report", str(directory)]) == 0
    assert "success: by eta" in (directory / "report.md").read_text()


def test_a_comment_or_docstring_edit_resumes_with_nothing_rerun(study_file, tmp_path, capsys):
    args = ["run", str(study_file), "--out", str(tmp_path), *TINY]
    assert cli.main(args) == 0
    parts = sorted(p.name for p in (tmp_path / "juntas-noise" / "rows").glob("part-*.parquet"))
    text = study_file.read_text()
    study_file.write_text(text.replace("N, K = 16, 3  # input bits, the junta's size", "# reworded\nN, K = 16, 3")
                          .replace('"""Your own question', '"""Reworded: your own question'))
    capsys.readouterr()
    assert cli.main(args) == 0
    assert sorted(p.name for p in (tmp_path / "juntas-noise" / "rows").glob("part-*.parquet")) == parts


def test_more_replicates_keep_the_first_rows_and_add_new_ones(study_file, tmp_path):
    args = ["run", str(study_file), "--out", str(tmp_path), "--quick", "--set", "m_max=64", "--no-progress"]
    assert cli.main([*args, "--set", "replicates=4"]) == 0
    first = _rows(tmp_path / "juntas-noise")
    assert cli.main([*args, "--set", "replicates=8"]) == 0
    both = _rows(tmp_path / "juntas-noise")
    assert {k: v for k, v in both.items() if k[1] < 4} == first and len(both) == 2 * len(first)
    assert cli.main([*args, "--set", "replicates=8", "--set", "eta=0,0.05,0.1,0.2"]) == 0
    grown = _rows(tmp_path / "juntas-noise")
    assert {k: v for k, v in grown.items() if k[0] != 0.2} == both and len(grown) == len(both) * 4 // 3


def test_jt_run_from_python_returns_the_rows_as_arrow(study_file, tmp_path):
    rows = jt.run(str(study_file), out=str(tmp_path), quick=True, set={"m_max": 64, "replicates": 4}, progress=False)
    frame = rows.to_pandas()
    assert len(frame) == 3 * 4 * 3 and set(frame["eta"]) == {0.0, 0.05, 0.1}
    assert frame.groupby("eta")["success"].mean().shape == (3,)
    assert (tmp_path / "juntas-noise" / "report.md").exists()


def test_two_processes_write_the_rows_of_one(study_file, tmp_path):
    with socket.socket() as s:
        s.bind(("localhost", 0))
        port = s.getsockname()[1]
    base = [sys.executable, "-m", "jaxtrees.cli", "run", str(study_file), *TINY]
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    assert subprocess.run([*base, "--out", str(tmp_path / "one")], env=env, capture_output=True).returncode == 0
    procs = [subprocess.Popen([*base, "--out", str(tmp_path / "two"), "--coordinator", f"localhost:{port}",
                               "--num-processes", "2", "--process-id", str(i)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(2)]
    outputs = [proc.communicate(timeout=300) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], outputs
    assert _rows(tmp_path / "two" / "juntas-noise") == _rows(tmp_path / "one" / "juntas-noise")


def test_list_learners_names_each_learner_s_size_fields_and_cost(capsys):
    assert cli.main(["list", "--learners"]) == 0
    out = capsys.readouterr().out
    assert "Size fields read" in out and "id3-entropy" in out and "lmn-k" in out
    assert len([line for line in out.splitlines() if line.split() and line.split()[0] in jt.learners.names()]) == \
        len(jt.learners.names())


def test_a_study_is_found_by_file_by_name_or_refused_with_the_way(study_file, tmp_path):
    from jaxtrees.experiments import loading

    study, origin = loading.load(f"{study_file}:STUDY")
    assert study.name == "juntas-noise" and origin == {"file": str(study_file), "name": "STUDY"}
    assert loading.load("juntas")[1] == {"builtin": "juntas"}
    with pytest.raises(ValueError, match="has no study 'OTHER'; its studies: STUDY"):
        loading.load(f"{study_file}:OTHER")
    with pytest.raises(ValueError, match="unknown study 'nope'; known studies: .*or a file"):
        loading.load("nope")
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    with pytest.raises(ValueError, match="holds no study"):
        loading.load(str(empty))


NAMESAKE = '''
import jax
import jaxtrees as jt


def trial(key, params):
    return {"u": jax.random.uniform(key) * params["a"]}


STUDY = jt.Study(name="juntas", trial=trial, grid={"a": [1.0, 2.0]}, replicates=3)
'''


def test_a_study_named_as_a_built_in_is_read_reported_and_counted_as_its_own(tmp_path, capsys):
    """A user's study called "juntas" (no m axis, one row per trial): its rows are read, reported, exported and
    counted by its own layout (before: the built-in juntas' sample-size axis was looked up by the name, and the
    report ended in KeyError 'm_min')."""
    path = tmp_path / "namesake.py"
    path.write_text(NAMESAKE)
    out = tmp_path / "out"
    assert cli.main(["run", str(path), "--out", str(out), "--no-progress"]) == 0
    directory = out / "juntas"
    rows = reading.read_results(str(directory))
    assert len(rows) == 2 * 3 and sorted(set(np.asarray(rows["a"]).tolist())) == [1.0, 2.0]
    assert reading.completeness(str(directory), rows) == (6, 6)
    assert "u" in (directory / "report.md").read_text()
    assert cli.main(["export", str(directory)]) == 0
    assert len((directory / "results.csv").read_text().splitlines()) == 1 + 6
    assert reading.completeness(str(directory), rows.take(np.arange(3))) == (3, 6)  # a part of them: those trials
