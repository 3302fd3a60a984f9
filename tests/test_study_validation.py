"""A study file's declaration mistakes are one sentence naming the study (or file), the parameter and what is
allowed, before anything is written; its name is one safe path component; its syntax error or missing module shows
its own file and line only; a module path the working directory would hold says how to add it."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jaxtrees as jt
from jaxtrees.experiments import loading
from jaxtrees.experiments.study import Study, configure, validation


def _trial(key, params):
    return {"x": params["a"]}


@pytest.mark.parametrize("values, says", [
    ([], "grid parameter 'a' lists no values: give one value or a non-empty list of them"),
    ([1.0, 1.0, 2.0], "grid parameter 'a' lists the value 1.0 more than once: a cell would run twice"),
    ([1, 1.0], "lists the value 1.0 more than once"),
    ([1, "x"], "grid parameter 'a' mixes number (1) and string ('x') values: give values of one type"),
    ([True, 2], "mixes bool (True) and number (2) values"),
    ([[1], [2]], "the value [1] is a list; a grid value must be an int, float, bool or str"),
    ([None], "the value None is a NoneType; a grid value must be an int, float, bool or str"),
])
def test_a_bad_grid_value_is_one_sentence_naming_study_and_parameter(values, says):
    with pytest.raises(ValueError) as e:
        Study("s", _trial, {"a": values}, 2)
    assert str(e.value).startswith("study 's': ") and says in str(e.value) and "\n" not in str(e.value)


def test_the_quick_and_full_grids_share_a_parameter_type():
    with pytest.raises(ValueError, match="mixes number"):
        Study("s", _trial, ({"a": 1}, {"a": "x"}), 2)
    assert Study("s", _trial, ({"a": [1, 2]}, {"a": [1, 2.5, 3]}), 2).full["a"] == [1, 2.5, 3]


@pytest.mark.parametrize("values, says", [
    (lambda cell: None, "values(cell) returned None; it must return a non-empty list"),
    (lambda cell: [], "values(cell) returned []; it must return a non-empty list"),
    (lambda cell: 5, "values(cell) returned 5"),
    (lambda cell: [16, 16, 32], "returned [16, 16, 32]; they must be increasing, each once"),
    (lambda cell: [32, 16], "returned [32, 16]; they must be increasing, each once"),
    (lambda cell: [1, "a"], "its values must all be numbers"),
    (lambda cell: ["lo", "hi"], "its values must all be numbers (the axis column holds numbers"),  # was: refused
    # only once the trials had written a part
    (lambda cell: cell["nope"], "values(cell) raised KeyError: 'nope'"),
    (jt.sample_sizes, "axis 'm': m_min must be <= m_max (the m-grid runs m_min, 2 m_min, ..., m_max), got m_min = "
                      "2048 and m_max = 1024 (in the cell a=1, m_max=1024, m_min=2048)"),
])
def test_a_bad_axis_is_refused_per_cell_before_any_work(values, says):
    study = Study("s", _trial, {"a": 1, "m_min": 2048, "m_max": 1024}, 2, axis=("m", values))
    with pytest.raises(ValueError) as e:
        configure(study)
    assert str(e.value).startswith("study 's': axis 'm'") and says in str(e.value) and "\n" not in str(e.value)


def test_sample_sizes_refuses_an_empty_m_grid():
    assert jt.sample_sizes({"m_min": 16, "m_max": 64}) == [16, 32, 64]
    with pytest.raises(ValueError, match="m_min must be <= m_max .* got m_min = 1024 and m_max = 16"):
        jt.sample_sizes({"m_min": 1024, "m_max": 16})
    with pytest.raises(ValueError, match="m_min must be >= 1"):
        jt.sample_sizes({"m_min": 0, "m_max": 16})


@pytest.mark.parametrize("name", ["../escape", "", ".hidden", "a/b", "a\\b", "x" * 201, 3, None])
def test_a_study_name_that_is_not_one_safe_path_component_is_refused(name):
    with pytest.raises(ValueError, match="is not a safe file name: .* letters, digits, '-', '_' and '.', not "
                                         "starting with '.'"):
        Study(name, _trial, {"a": 1}, 2)


@pytest.mark.parametrize("name", ["my-study", "juntas_2", "v1.2", "A"])
def test_safe_names_pass(name):
    assert validation.study_name(name) == name


def _cli(*args, cwd, env=None):
    return subprocess.run([sys.executable, "-m", "jaxtrees.cli", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "JAX_PLATFORMS": "cpu", **(env or {})}, timeout=300)


STUDY_FILE = """
import jaxtrees as jt

def trial(key, params):
    return {{"x": params["a"] + 0.0}}

STUDY = jt.Study({name!r}, trial, {{"a": {values!r}}}, 2)
"""


@pytest.mark.parametrize("name, values", [("../escape", [1.0, 2.0]), ("", [1.0, 2.0]), ("s", [1.0, 1.0, 2.0])])
def test_a_bad_study_file_is_one_sentence_and_writes_nothing(tmp_path, name, values):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "study.py").write_text(STUDY_FILE.format(name=name, values=values))
    out = tmp_path / "run" / "out"
    proc = _cli("run", "study.py", "--quick", "--out", str(out), "--no-progress", cwd=tmp_path / "run")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    error = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert len(error) == 1 and "study.py:7: " in error[0]
    assert sorted(os.listdir(tmp_path)) == ["run"] and sorted(os.listdir(tmp_path / "run")) == ["study.py"]


@pytest.mark.parametrize("source, says", [
    ("import jaxtrees as jt\nx = (\n", "study.py:2: syntax error: '(' was never closed\n    x = ("),
    ("import jaxtrees as jt\nimport no_such_module_here\n",
     "study.py:2: no module named 'no_such_module_here' (the study imports it: install it, or put it on PYTHONPATH)"),
    ("import jaxtrees as jt\n\n1 / 0\n", "study.py:3: ZeroDivisionError: division by zero (--debug shows the "
                                        "traceback)"),
])
def test_a_study_file_that_fails_to_import_shows_its_own_file_and_line(tmp_path, source, says):
    path = tmp_path / "study.py"
    path.write_text(source)
    with pytest.raises(ValueError) as e:
        loading.load(str(path))
    assert says in str(e.value) and "importlib" not in str(e.value)
    assert e.value.__cause__ is not None  # --debug prints it


def test_a_module_path_not_on_sys_path_says_the_working_directory_is_not_searched(tmp_path, monkeypatch):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "mod.py").write_text(textwrap.dedent(STUDY_FILE.format(name="ok", values=[1.0, 2.0])))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if os.path.abspath(p or ".") != str(tmp_path)])
    with pytest.raises(ValueError) as e:
        loading.load("pkg.mod:STUDY")
    assert ("Python finds no module 'pkg' on its path (sys.path), and `jaxtrees run` does not search the working "
            "directory; add it (PYTHONPATH=. jaxtrees run pkg.mod:STUDY") in str(e.value)
    assert f"give the file: pkg{os.path.sep}mod.py:STUDY" in str(e.value)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert loading.load("pkg.mod:STUDY")[0].name == "ok"


def test_the_shipped_example_refuses_m_min_above_m_max_in_a_sentence(tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = _cli("run", os.path.join(root, "notebooks", "own_study.py"), "--quick", "--set", "m_min=2048", "--out",
                str(tmp_path / "out"), "--no-progress", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "IndexError" not in proc.stderr
    assert "study 'juntas-noise': axis 'm': m_min must be <= m_max" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_numpy_scalars_in_overrides_are_their_python_values():
    """jt.run(set={"p": np.float64(0.4)}) was refused as "p must be float, got np.float64(0.4)"."""
    study = Study("s", _trial, {"a": [1, 2], "p": [0.5], "on": [True]}, 2)
    config = configure(study, overrides={"p": np.float64(0.4), "a": [np.int64(3), np.int32(4)], "on": np.bool_(False)})
    assert config.grid == {"a": [3, 4], "p": [0.4], "on": [False]}
    assert [type(v) for v in (*config.grid["a"], *config.grid["p"], *config.grid["on"])] == [int, int, float, bool]
