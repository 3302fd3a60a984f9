"""A study is checked against its grid before the first trial (study/probe.py): ranges, outputs and faults of the
trial are one sentence in the study's terms, and nothing is written."""

import shutil
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxtrees as jt
from jaxtrees import cli
from jaxtrees.core import checks, distributions
from jaxtrees.experiments import studies
from jaxtrees.experiments.study import configure
from jaxtrees.experiments.study.probe import StudyError, probe

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
HEAD = "import jax.numpy as jnp\nimport jaxtrees as jt\n\n\n"


def _file(tmp_path, body: str, grid: str = '{"c": [0.1, 0.2]}', extra: str = "") -> Path:
    path = tmp_path / "mine.py"
    path.write_text(HEAD + textwrap.dedent(body) + f"\n\nSTUDY = jt.Study('qdepth', trial, grid={grid}, replicates=2"
                    f"{extra})\n")
    return path


def _run(path, tmp_path, capsys, *args) -> str:
    out = tmp_path / "out"
    assert cli.main(["run", str(path), "--quick", "--out", str(out), "--no-progress", *args]) == 2
    assert not out.exists()  # the probe runs before the results directory is made
    return capsys.readouterr().err


@pytest.fixture
def own(tmp_path):
    path = tmp_path / "own_study.py"
    shutil.copy(NOTEBOOKS / "own_study.py", path)
    return path


def test_a_smoothed_c_out_of_range_is_refused_before_any_work(own, tmp_path, capsys):
    """Issue 70 item 6: c = 0.6 gave p_i in [-0.1, 1.1], clipped, and plausible numbers."""
    err = _run(own, tmp_path, capsys, "--set", "c=0.1,0.6")
    assert "jaxtrees run: error: study juntas-noise: c = 0.6 is outside [0, 0.5] (jt.distributions.Smoothed's c)" in err
    err = _run(own, tmp_path, capsys, "--set", "eta=0,1.5")
    assert "study juntas-noise: eta = 1.5 is outside [0, 1] (jt.learn_on_prefixes's noise)" in err


def test_the_building_blocks_check_a_concrete_c_and_leave_a_traced_one_alone():
    with pytest.raises(checks.OutOfRange, match=r"c must be in \[0, 0.5\], got 0.6") as e:
        distributions.Smoothed(0.5, 0.6).marginals(jax.random.key(0), 4)
    assert (e.value.name, e.value.value, e.value.interval) == ("c", 0.6, "[0, 0.5]")
    with pytest.raises(checks.OutOfRange, match=r"c must be in \[0, 0.2\]"):
        distributions.Smoothed(jnp.asarray([0.2, 0.5]), 0.3).marginals(jax.random.key(0), 2)
    traced = jax.jit(lambda c: distributions.Smoothed(0.5, c).marginals(jax.random.key(0), 4))(0.6)
    eager = 0.5 + jax.random.uniform(jax.random.key(0), (4,), jnp.float32, -1.0, 1.0) * jnp.float32(0.6)
    np.testing.assert_array_equal(np.asarray(traced), np.asarray(eager))  # the run's arithmetic, unchanged


@pytest.mark.parametrize("name", ["juntas", "trees"])
def test_built_in_studies_pass_the_probe(name):
    study = studies.get(name)
    probe(study, configure(study, quick=True))
    probe(study, configure(study, quick=True))  # a second call for the same study and config is free


OUTPUTS = [
    ("return params['c'], 1.0", "the trial ({file}) returned tuple, not a dict of outputs"),
    ("return {'z': jnp.asarray(params['c']) * 1j}", "output 'z' is complex64; the rows hold numbers and booleans"),
    ("return {'z': 'text'}", "the trial ({file}) returned output 'z' as str, not a numeric or boolean array"),
    ("return {'z': jnp.zeros((3, 2)) + params['c']}", "output 'z' has shape (3, 2) per trial; each output must be a "
                                                      "scalar"),
    ("return {'z': params['cc'] * 2}", "the trial reads params['cc'] at {file}:7, a parameter the grid does not "
                                       "define (the grid's: c)"),
]


@pytest.mark.parametrize("line, said", OUTPUTS)
def test_the_trial_s_outputs_are_checked(tmp_path, capsys, line, said):
    path = _file(tmp_path, f"def trial(key, params):\n    \"Probe.\"\n    {line}\n")
    assert f"study qdepth: {said.format(file=path)}" in _run(path, tmp_path, capsys)


def test_outputs_run_along_the_axis():
    def trial(key, params):
        return {"ok": jnp.zeros(3) + params["c"], "scalar": params["c"], "wrong": jnp.zeros(4)}

    study = jt.Study("axis", trial, grid={"c": [0.1], "m_min": 1, "m_max": 4}, replicates=2,
                     axis=("m", jt.sample_sizes), static=("m_min", "m_max"))
    with pytest.raises(StudyError, match=r"output 'wrong' has shape \(4,\) per trial; each output must be a scalar "
                                         r"or one value per m value \(shape \(3,\)\)"):
        probe(study, configure(study))
