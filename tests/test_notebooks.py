"""The notebooks run top to bottom (at their small size) and open in Colab."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _cells(path, kind):
    return ["".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == kind]


def test_every_study_family_has_a_notebook():
    assert {p.stem for p in NOTEBOOKS} >= {"sample_complexity", "counterexamples", "gradient_descent", "fourier",
                                           "boosting", "rank", "compare", "gd_scaling"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_has_colab_badge_and_install_cell(path):
    first = _cells(path, "markdown")[0]
    assert "colab-badge.svg" in first and f"/blob/main/notebooks/{path.name})" in first
    assert _cells(path, "code")[0].lstrip("# \n").find("pip install") >= 0


# Every notebook runs at its small size under the slow marker (7 to 62 s each on 2 cores; .ci/run runs them
# after the default command); every notebook's names are checked by test_notebook_names_exist by default.
@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path, tmp_path):
    """Every code cell, in order, in a fresh interpreter (shell and magic lines skipped: the
    package is installed already)."""
    code = "\n\n".join("\n".join(line for line in cell.splitlines() if not line.lstrip().startswith(("%", "!")))
                       for cell in _cells(path, "code"))
    script = tmp_path / f"{path.stem}.py"
    script.write_text(code)
    env = {**os.environ, "JAXTREES_NOTEBOOK_SMALL": "1", "MPLBACKEND": "Agg"}
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_names_exist(path):
    """Every cell compiles, and every ``jt.X``, ``runner.X`` and ``studies.X`` a notebook uses
    exists (a renamed function breaks the notebook here, without running it)."""
    import ast

    import jaxtrees
    from jaxtrees.experiments import runner, studies

    modules = {"jt": jaxtrees, "runner": runner, "studies": studies}
    for cell in _cells(path, "code"):
        code = "\n".join(line for line in cell.splitlines() if not line.lstrip().startswith(("%", "!")))
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
                assert hasattr(modules[node.value.id], node.attr), f"{node.value.id}.{node.attr} in {path.name}"
