"""Faults of a researcher's study in the study's language (issue 70 item 10): a traced value where a Python one is
needed names Study(static=...), an unknown --set names the file's --help, an exception in the trial names its
file:line and cell (--debug: the traceback), and nothing is written."""

import textwrap

from jaxtrees import cli

HEAD = "import jax.numpy as jnp\nimport jaxtrees as jt\n\n\n"


def _file(tmp_path, body: str, grid: str) -> str:
    path = tmp_path / "mine.py"
    path.write_text(HEAD + textwrap.dedent(body) + f"\n\nSTUDY = jt.Study('qdepth', trial, grid={grid}, replicates=2)\n")
    return str(path)


def _run(path, tmp_path, capsys, *args) -> str:
    out = tmp_path / "out"
    assert cli.main(["run", path, "--quick", "--out", str(out), "--no-progress", *args]) == 2
    assert not out.exists()
    return capsys.readouterr().err


def test_a_shape_from_a_traced_parameter_names_static(tmp_path, capsys):
    path = _file(tmp_path, 'def trial(key, params):\n    "Needs n."\n    return {"s": jnp.zeros(params["n"]).sum()}\n',
                 '{"n": [4, 8], "c": 0.1}')
    err = _run(path, tmp_path, capsys)
    assert (f'study qdepth: the trial needs `n` as a Python value (it sets a shape or a loop, or is range-checked) at '
            f'{path}:7: declare Study(static=("n", ...))') in err
    assert "static_argnames" not in err and "functools.partial" not in err


def test_a_traced_c_where_smoothed_needs_a_number_names_static(tmp_path, capsys):
    path = _file(tmp_path, 'def trial(key, params):\n    "Smoothed."\n'
                           '    return {"s": jt.smoothed(c=params["c"]).marginals(key, 8).sum()}\n', '{"c": [0.1, 0.2]}')
    err = _run(path, tmp_path, capsys)
    assert 'study qdepth: jt.smoothed needs `c` as a Python value' in err
    assert f'at {path}:7: declare Study(static=("c", ...))' in err


def test_an_unknown_set_on_a_file_suggests_the_file_s_help(tmp_path, capsys):
    path = _file(tmp_path, 'def trial(key, params):\n    "C."\n    return {"s": params["c"]}\n', '{"c": [0.1]}')
    err = _run(path, tmp_path, capsys, "--set", "cc=1")
    assert f"unknown parameter 'cc' for study 'qdepth'; known: c, replicates (`jaxtrees run {path} --help`" in err


def test_an_exception_in_the_trial_is_one_paragraph_and_debug_shows_the_traceback(tmp_path, capsys):
    path = _file(tmp_path, 'def trial(key, params):\n    "Raises."\n    return {"s": len(params["c"])}\n',
                 '{"c": [0.1, 0.2]}')
    err = _run(path, tmp_path, capsys)
    assert err.count("\n") == 1 and "Traceback" not in err
    assert (f"jaxtrees run: error: study qdepth: the trial raised TypeError: len() of unsized object at {path}:7 "
            f"(in the cell c=0.1); `jaxtrees run ... --debug` shows the full traceback") in err
    err = _run(path, tmp_path, capsys, "--debug")
    assert "Traceback (most recent call last)" in err and f'File "{path}", line 7, in trial' in err
    assert err.rstrip().splitlines()[-1].startswith("jaxtrees run: error: study qdepth: the trial raised TypeError")


def test_a_fixed_file_then_runs(tmp_path, capsys):
    """Nothing of the refused run stands in the way of the fixed one."""
    path = _file(tmp_path, 'def trial(key, params):\n    "C."\n    return {"s": params["cc"] * 2}\n', '{"c": [0.1]}')
    _run(path, tmp_path, capsys)
    _file(tmp_path, 'def trial(key, params):\n    "C."\n    return {"s": params["c"] * 2}\n', '{"c": [0.1]}')
    assert cli.main(["run", path, "--quick", "--out", str(tmp_path / "out"), "--no-progress"]) == 0
