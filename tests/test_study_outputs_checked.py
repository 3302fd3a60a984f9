"""What a researcher reads about their own study is never silently wrong, and a mistake in a study file is one sentence
before any trial runs (issue 70): an int8 output is reported as an integer (not a rate), a jt.Censored with an integer
flag is read as censored, and an output named like another column, a non-string output name, a traced int beyond
int32 and an inf or nan grid value are refused before anything is written."""

import textwrap

import numpy as np
import pytest

from jaxtrees import cli
from jaxtrees.experiments.results import read_results

HEAD = "import jax\nimport jax.numpy as jnp\nimport jaxtrees as jt\n\n\n"


TRIAL_P = 'def trial(key, params):\n    "P."\n    return {"ok": jax.random.uniform(key) < params["p"]}\n'


def _file(tmp_path, body: str, grid: str, extra: str = "") -> str:
    path = tmp_path / "mine.py"
    path.write_text(HEAD + textwrap.dedent(body) + f"\n\nSTUDY = jt.Study('mine', trial, grid={grid}, replicates=8"
                    f"{extra})\n")
    return str(path)


def _refused(path, tmp_path, capsys, *args) -> str:
    """The one line ``jaxtrees run`` printed refusing ``path`` (exit 2, nothing written)."""
    out = tmp_path / "out"
    assert cli.main(["run", path, "--quick", "--out", str(out), "--no-progress", *args]) == 2
    assert not (out / "mine").exists()
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err, err
    return err


def _report(path, tmp_path) -> tuple[str, object]:
    out = tmp_path / "out"
    assert cli.main(["run", path, "--quick", "--out", str(out), "--no-progress"]) == 0
    return (out / "mine" / "report.md").read_text(), read_results(str(out / "mine"))


def test_an_int8_output_is_an_integer_with_its_mean_not_a_rate(tmp_path):
    path = _file(tmp_path, 'def trial(key, params):\n    "Ints."\n'
                           '    return {"i8": (jax.random.uniform(key) * 100).astype(jnp.int8)}\n', '{"p": [0.2, 0.8]}')
    text, rows = _report(path, tmp_path)
    section = text.split("## i8")[1]
    assert section.lstrip().startswith("Mean of i8") and "Rate of i8" not in text and "Wilson" not in section
    values = np.asarray(rows["i8"])
    assert values.dtype == np.int16 and values.max() > 1  # int8 on disk means bool only
    for p in (0.2, 0.8):
        mean = values[np.asarray(rows["p"]) == p].mean()
        assert f"| {p} | {mean:.4g} [" in section


def test_an_integer_censored_flag_is_read_as_censored_never_averaged(tmp_path):
    path = _file(tmp_path, 'def trial(key, params):\n    "Steps."\n'
                           '    steps = jnp.ceil(jnp.log1p(-jax.random.uniform(key)) / jnp.log1p(-params["q"]))\n'
                           '    steps = steps.astype(jnp.int32)\n'
                           '    flag = (steps > 20).astype(jnp.int32)\n'
                           '    return {"steps": jt.Censored(jnp.minimum(steps, 20), flag)}\n',
                 '{"q": [0.05, 0.3]}')
    text, rows = _report(path, tmp_path)
    assert "Mean of steps" not in text and "## steps_censored" not in text
    assert "The censored share and product-limit quartiles of steps" in text and "steps is censored" in text
    censored = np.asarray(rows["steps_censored"]).astype(bool)
    assert censored.any() and np.all(np.asarray(rows["steps"])[censored] == 20)  # a censored trial's value: the budget
    for q in (0.05, 0.3):
        count = int(censored[np.asarray(rows["q"]) == q].sum())
        assert f"| {q} | {count} of 8 ({100 * count / 8:.0f}%) |" in text


def test_a_float_censored_flag_is_refused_naming_what_is_allowed(tmp_path, capsys):
    path = _file(tmp_path, 'def trial(key, params):\n    "Steps."\n'
                           '    return {"steps": jt.Censored(jnp.int32(3), jnp.float32(0.0))}\n', '{"q": [0.1]}')
    err = _refused(path, tmp_path, capsys)
    assert (f"study mine: the trial ({path}) output 'steps': jt.Censored's `censored` is float32; it must be a "
            f"bool") in err
    assert "or an integer (read as != 0)" in err


@pytest.mark.parametrize("name, what", [("cell", "an id column"), ("replicate", "an id column"),
                                        ("seed", "an id column"), ("study", "an id column"),
                                        ("p", "a grid parameter"), ("m", "the study's axis")])
def test_an_output_named_like_another_column_is_refused(tmp_path, capsys, name, what):
    body = f'def trial(key, params):\n    "Named."\n    return {{"{name}": jax.random.uniform(key, (3,))}}\n'
    path = _file(tmp_path, body, '{"p": [0.2, 0.8]}', extra=', axis=("m", lambda c: [1, 2, 3])')
    err = _refused(path, tmp_path, capsys)
    assert (f"study mine: the trial ({path}) returns an output {name!r}, the name of {what} (a column every row "
            f"already has): rename the output") in err


def test_a_censored_flag_column_named_like_a_parameter_is_refused(tmp_path, capsys):
    path = _file(tmp_path, 'def trial(key, params):\n    "Named."\n'
                           '    return {"t": jt.Censored(jnp.int32(3), jnp.bool_(False))}\n', '{"t_censored": [1, 2]}')
    assert "returns an output 't_censored', the name of a grid parameter" in _refused(path, tmp_path, capsys)


def test_a_non_string_output_name_is_refused_naming_it(tmp_path, capsys):
    path = _file(tmp_path, 'def trial(key, params):\n    "Int key."\n    return {1: jax.random.uniform(key)}\n',
                 '{"p": [0.2]}')
    err = _refused(path, tmp_path, capsys)
    assert f"study mine: the trial ({path}) returns an output keyed 1 (int); output names are strings" in err


def test_a_traced_int_beyond_int32_is_refused_naming_its_range_and_static(tmp_path, capsys):
    path = _file(tmp_path, 'def trial(key, params):\n    "Big."\n    return {"nv": params["n"] + 0}\n',
                 '{"n": [2**40, 2**40 + 1]}')
    err = _refused(path, tmp_path, capsys)
    assert (f"study mine: grid parameter 'n' = {2**40} is outside int32's range [-2147483648, 2147483647], which a "
            f"traced parameter takes: give values within it, or declare Study(static=('n', ...))") in err


def test_a_traced_float_beyond_float32_is_refused(tmp_path, capsys):
    path = _file(tmp_path, 'def trial(key, params):\n    "Big."\n    return {"v": params["x"] * 1.0}\n',
                 '{"x": [1.0, 1e40]}')
    err = _refused(path, tmp_path, capsys)
    assert ("study mine: grid parameter 'x' = 1e+40 is outside float32's range [-3.402823466e+38, "
            "3.402823466e+38]") in err


@pytest.mark.parametrize("value", ["inf,0.5", "nan", "-inf"])
def test_an_inf_or_nan_set_value_is_refused_before_any_work(tmp_path, capsys, value):
    path = _file(tmp_path, TRIAL_P, '{"p": [0.2, 0.8]}')
    err = _refused(path, tmp_path, capsys, "--set", f"p={value}")
    shown = {"inf,0.5": "inf", "nan": "nan", "-inf": "-inf"}[value]
    assert f"study 'mine': parameter 'p' lists the value {shown}: a grid value must be a finite number" in err


def test_an_inf_grid_value_is_refused_in_the_study_file(tmp_path, capsys):
    path = _file(tmp_path, TRIAL_P, '{"p": [float("inf"), 0.5]}')
    err = _refused(path, tmp_path, capsys)
    assert "study 'mine': grid parameter 'p' lists the value inf: a grid value must be a finite number" in err


def test_two_grid_values_of_one_float32_are_refused_unless_static(tmp_path, capsys):
    """0.1 and 0.1000000001: two cells, two keys, one float32 seen by the trial (before: run, and the report printed
    two rows labelled 0.1); declared static, each is passed as itself."""
    body = 'def trial(key, params):\n    "P."\n    return {"ok": jax.random.uniform(key) < params["p"]}\n'
    path = _file(tmp_path, body, '{"p": [0.1, 0.1000000001]}')
    err = _refused(path, tmp_path, capsys)
    assert ("study mine: grid parameter 'p' lists 0.1 and 0.1000000001, which are one float32 (the type a traced "
            "parameter takes), so their cells would run one value") in err
    static = _file(tmp_path, body, '{"p": [0.1, 0.1000000001]}', ', static=("p",)')
    assert cli.main(["run", static, "--quick", "--out", str(tmp_path / "out"), "--no-progress"]) == 0


def test_a_bfloat16_output_is_told_to_be_cast(tmp_path, capsys):
    body = 'def trial(key, params):\n    "B."\n    return {"y": jax.random.uniform(key).astype(jnp.bfloat16)}\n'
    path = _file(tmp_path, body, '{"p": [0.5]}')
    err = _refused(path, tmp_path, capsys)  # before: "the rows hold ... (float, int, bool)", bfloat16 being a float
    assert "output 'y' is bfloat16; the rows hold numbers and booleans (float16/32/64, int, bool), not bfloat16" in err
    assert "return it as float32 ('y': x.astype(jnp.float32))" in err


def test_an_output_of_an_empty_name_is_refused(tmp_path, capsys):
    body = 'def trial(key, params):\n    "E."\n    return {"": jax.random.uniform(key)}\n'
    err = _refused(_file(tmp_path, body, '{"p": [0.5]}'), tmp_path, capsys)  # before: a report section "## "
    assert "returns an output named ''; an output's name names its column: give it a word" in err
