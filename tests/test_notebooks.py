"""The notebooks run top to bottom (at their small size), are committed with the outputs of their
code (figures visible on GitHub without running them), install from the one address in
pyproject.toml, and open in Colab."""

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
#: A committed notebook's size bound (80-160 KiB each with their figures as 256-colour PNGs).
MAX_BYTES = 320 * 1024
REGENERATE = "python scripts/run_notebooks.py"


def _script():
    spec = importlib.util.spec_from_file_location("run_notebooks", ROOT / "scripts" / "run_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RUN = _script()


def _cells(path, kind):
    return ["".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == kind]


def _images(notebook):
    """Per code cell, the number of PNG figures among its outputs."""
    return [sum("image/png" in o.get("data", {}) for o in c["outputs"]) for c in notebook["cells"]
            if c["cell_type"] == "code"]


def test_every_study_family_has_a_notebook():
    assert {p.stem for p in NOTEBOOKS} >= {"sample_complexity", "counterexamples", "gradient_descent", "fourier",
                                           "boosting", "rank", "compare", "gd_scaling"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_has_colab_badge_and_install_cell_from_the_one_address(path):
    first = _cells(path, "markdown")[0]
    assert "colab-badge.svg" in first and f"]({RUN.colab_link(path.name)})" in first
    assert _cells(path, "code")[0] == f"{RUN.INSTALL_COMMENT}\n%{RUN.install_line()}", (
        f"{path.name}: rewrite its install cell with {REGENERATE} {path.relative_to(ROOT)}")
    text = path.read_text()
    addresses = set(re.findall(r"https://github\.com/[\w.-]+/[\w.-]+", text))
    assert addresses <= {RUN.repository()}, f"{path.name} names another address: {addresses}"


def test_the_readme_installs_from_the_address_the_notebooks_use():
    readme = (ROOT / "README.md").read_text()
    assert f'pip install "{RUN.requirement()}"' in readme
    assert set(re.findall(r"https://github\.com/[\w.-]+/[\w.-]+", readme)) <= {RUN.repository()}
    assert REGENERATE in readme


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_notebook_holds_the_outputs_of_its_code(path):
    """Executed top to bottom at the small size by scripts/run_notebooks.py, after its code last
    changed: counts 1..N, no error, figures as PNG, a reasonable size."""
    notebook = json.loads(path.read_text())
    hint = f"{path.name}: regenerate its outputs with {REGENERATE} {path.relative_to(ROOT)}"
    assert notebook["metadata"].get("jaxtrees", {}).get("code_sha256") == RUN.code_sha256(notebook), hint
    code = [c for c in notebook["cells"] if c["cell_type"] == "code"]
    assert [c["execution_count"] for c in code] == list(range(1, len(code) + 1)), hint
    assert not [o for c in code for o in c["outputs"] if o["output_type"] == "error"], hint
    assert sum(_images(notebook)) >= 1, hint
    assert path.stat().st_size <= MAX_BYTES, f"{path.name}: {path.stat().st_size / 1024:.0f} KiB"


def test_the_executor_stores_what_jupyter_shows(tmp_path):
    """Streams, a last expression's value (not after ``;``), figures at plt.show() and at a cell's end,
    magic lines skipped; a failing cell is named."""
    cell = lambda text: {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": text}
    notebook = {"cells": [cell("%pip install nothing\nimport matplotlib.pyplot as plt\nx = 41"),
                          cell("print('hi')\nplt.plot([1, 2]); plt.show()\nprint('after')\nx + 1"),
                          cell("plt.figure(); plt.plot([2, 1])\nx + 1;  # silent")], "metadata": {}}
    executed = RUN.execute(notebook, "demo.ipynb")
    first, second, third = (c["outputs"] for c in executed["cells"])
    assert first == []
    assert [o["output_type"] for o in second] == ["stream", "display_data", "stream", "execute_result"]
    assert second[0]["text"] == ["hi\n"] and second[3]["data"]["text/plain"] == ["42"]
    assert second[1]["data"]["image/png"].startswith("iVBOR")  # base64 of a PNG
    assert [o["output_type"] for o in third] == ["display_data"]
    assert [c["execution_count"] for c in executed["cells"]] == [1, 2, 3]
    assert executed["metadata"]["jaxtrees"]["code_sha256"] == RUN.code_sha256(executed)
    with pytest.raises(RuntimeError, match=r"demo\.ipynb: cell 0 failed:(.|\n)*ZeroDivisionError"):
        RUN.execute({"cells": [cell("1 / 0")], "metadata": {}}, "demo.ipynb")


# Every notebook runs at its small size under the slow marker (7 to 70 s each on 2 cores; .ci/run runs them
# after the default command), through the script that writes the committed outputs.
@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path, tmp_path):
    """Every code cell, in order, in a fresh interpreter (magic lines skipped: the package is
    installed already); it draws the figures the committed outputs show."""
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "run_notebooks.py"), "--out", str(tmp_path),
                           str(path)], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    executed = json.loads((tmp_path / path.name).read_text())
    assert _images(executed) == _images(json.loads(path.read_text())), f"regenerate with {REGENERATE} {path}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_names_exist(path):
    """Every cell compiles, and every ``jt.X``, ``runner.X`` and ``studies.X`` a notebook uses
    exists (a renamed function breaks the notebook here, without running it)."""
    import ast

    import jaxtrees
    from jaxtrees.experiments import studies
    from jaxtrees.experiments.run import runner

    modules = {"jt": jaxtrees, "runner": runner, "studies": studies}
    for cell in _cells(path, "code"):
        code = "\n".join(line for line in cell.splitlines() if not line.lstrip().startswith(("%", "!")))
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
                assert hasattr(modules[node.value.id], node.attr), f"{node.value.id}.{node.attr} in {path.name}"
