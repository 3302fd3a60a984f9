"""Execute the notebooks at their small size and store what they print and draw, so that GitHub
and Colab show every figure without running anything.

    python scripts/run_notebooks.py                          # every notebook in notebooks/, in place
    python scripts/run_notebooks.py notebooks/rank.ipynb     # some
    python scripts/run_notebooks.py --out DIR                # executed copies in DIR; the sources stay

Each notebook runs in a fresh Python process with ``JAXTREES_NOTEBOOK_SMALL=1`` (the notebooks'
small size, as CI runs them) and ``MPLBACKEND=Agg``, in a temporary working directory. A notebook
that fails is reported with its cell and traceback, and left as it was.

Why not nbconvert / nbclient: they are not dependencies of jaxtrees (nor of its test extra) and
need a Jupyter kernel (ipykernel, pyzmq, jupyter_client). The notebooks use nothing of IPython's
but ``%pip`` in the install cell (skipped here: jaxtrees is installed) and inline figures, so this
script runs each notebook's code cells in order in one namespace, as tests/test_notebooks.py always
ran them, and stores what Jupyter would store: stdout / stderr as stream outputs, the value of a
cell's last expression (text/plain, unless the cell ends with ``;``), and each matplotlib figure
as a PNG (``bbox_inches="tight"``, as IPython's inline backend does; 256 colours, which keeps a
notebook at 100-200 KiB) where the cell calls ``plt.show()`` or, for figures still open, at the
cell's end; figures are then closed.

Where the package installs from is said once, in pyproject.toml (``[project.urls] Repository``):
this script rewrites every notebook's install cell and Colab badge from it before running, and
tests/test_notebooks.py checks that the notebooks and the README agree with it. The notebook's
metadata keeps a hash of its code cells (``jaxtrees.code_sha256``), so that a test can tell when
code was edited without its outputs being regenerated.
"""

from __future__ import annotations

import argparse
import ast
import base64
import contextlib
import hashlib
import io
import json
import linecache
import os
import re
import subprocess
import sys
import tempfile
import time
import tokenize
import tomllib
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
#: The install cell's first line (the second is :func:`install_line`).
INSTALL_COMMENT = "# Colab: install jaxtrees (a local run from a clone with `pip install -e .` can skip this cell)"
BADGE = re.compile(r"https://colab\.research\.google\.com/github/[^)\s]*?/notebooks/[\w.-]+\.ipynb")


def repository() -> str:
    """The package's GitHub address, from pyproject.toml's ``[project.urls] Repository``."""
    with open(ROOT / "pyproject.toml", "rb") as fh:
        return tomllib.load(fh)["project"]["urls"]["Repository"].rstrip("/")


def requirement() -> str:
    """pip's requirement for jaxtrees from :func:`repository` (``jaxtrees @ git+https://...``)."""
    return f"jaxtrees @ git+{repository()}"


def install_line() -> str:
    """The notebooks' install command (run as ``%pip``)."""
    return f'pip install -q "{requirement()}"'


def colab_link(name: str) -> str:
    """The Colab address of ``notebooks/NAME`` on the repository's main branch."""
    path = repository().removeprefix("https://github.com/")
    return f"https://colab.research.google.com/github/{path}/blob/main/notebooks/{name}"


def source(cell) -> str:
    return "".join(cell["source"])


def code_sha256(notebook: dict) -> str:
    """A hash of the notebook's code cells (what its outputs depend on; markdown is left out)."""
    code = [source(c) for c in notebook["cells"] if c["cell_type"] == "code"]
    return hashlib.sha256(json.dumps(code).encode()).hexdigest()


def with_install_cell(notebook: dict, name: str) -> dict:
    """The notebook with its first code cell and Colab badge pointing at :func:`repository`."""
    cells = notebook["cells"]
    code = next(c for c in cells if c["cell_type"] == "code")
    if "pip install" not in source(code):
        raise ValueError(f"{name}: the first code cell must install jaxtrees (pip install), got {source(code)!r}")
    code["source"] = _lines(f"{INSTALL_COMMENT}\n%{install_line()}")
    first = next(c for c in cells if c["cell_type"] == "markdown")
    if not BADGE.search(source(first)):
        raise ValueError(f"{name}: the first markdown cell must hold the Colab badge ({colab_link(name)})")
    first["source"] = _lines(BADGE.sub(colab_link(name), source(first)))
    return notebook


def dumps(notebook: dict) -> str:
    """The notebook as Jupyter writes it (nbformat's JSON layout)."""
    return json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def _lines(text: str) -> list:
    return text.splitlines(keepends=True)


# ----------------------------------------------------------------------------- one notebook, in this process


class _Outputs:
    """A cell's outputs as nbformat stores them; streams that follow each other are merged."""

    def __init__(self):
        self.items = []

    def stream(self, name: str, text: str):
        if self.items and self.items[-1].get("name") == name:
            self.items[-1]["text"] += text
        else:
            self.items.append({"output_type": "stream", "name": name, "text": text})

    def figures(self):
        """Every open matplotlib figure as a PNG display, then closed."""
        import matplotlib.pyplot as plt

        for number in plt.get_fignums():
            figure = plt.figure(number)
            png = io.BytesIO()
            figure.savefig(png, format="png", bbox_inches="tight")
            self.items.append({"output_type": "display_data", "metadata": {},
                               "data": {"image/png": base64.b64encode(compact_png(png.getvalue())).decode() + "\n",
                                        "text/plain": [repr(figure)]}})
        plt.close("all")

    def value(self, value, count: int):
        self.items.append({"output_type": "execute_result", "execution_count": count, "metadata": {},
                           "data": {"text/plain": _lines(repr(value))}})

    def final(self) -> list:
        for item in self.items:
            if item["output_type"] == "stream":
                item["text"] = _lines(item["text"])
        return self.items


def compact_png(png: bytes) -> bytes:
    """The PNG on white in 256 colours (Pillow, which matplotlib needs): the notebooks' figures of
    resampled study plots took 2-4x fewer bytes (218 KiB -> 65 KiB), and looked the same."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGBA")
    image = Image.alpha_composite(Image.new("RGBA", image.size, "white"), image).convert("RGB")
    out = io.BytesIO()
    image.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(out, "PNG", optimize=True)
    return out.getvalue()


class _Stream(io.TextIOBase):
    """sys.stdout / sys.stderr for a cell: writes go to its outputs (not a terminal)."""

    def __init__(self, outputs: _Outputs, name: str):
        self.outputs, self.name = outputs, name

    def write(self, text):
        self.outputs.stream(self.name, text)
        return len(text)

    def isatty(self):
        return False


def _silent(code: str) -> bool:
    """True when the cell's last token (comments aside) is ``;``: IPython then shows no value."""
    tokens = [t for t in tokenize.generate_tokens(io.StringIO(code).readline)
              if t.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.ENDMARKER,
                                tokenize.INDENT, tokenize.DEDENT)]
    return bool(tokens) and tokens[-1].string == ";"


def run_cell(code: str, namespace: dict, filename: str, outputs: _Outputs, count: int):
    """Execute one cell as IPython would (magic and shell lines skipped), its outputs into ``outputs``."""
    import matplotlib.pyplot as plt

    code = "\n".join(line for line in code.splitlines() if not line.lstrip().startswith(("%", "!")))
    linecache.cache[filename] = (len(code), None, _lines(code), filename)  # tracebacks show the cell's lines
    tree = ast.parse(code, filename)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    show, plt.show = plt.show, lambda *args, **kwargs: outputs.figures()
    try:
        with contextlib.redirect_stdout(_Stream(outputs, "stdout")), contextlib.redirect_stderr(_Stream(outputs, "stderr")):
            exec(compile(tree, filename, "exec"), namespace)
            value = None if last is None else eval(compile(ast.Expression(last.value), filename, "eval"), namespace)
    finally:
        plt.show = show
    if value is not None and not _silent(code):
        outputs.value(value, count)
    outputs.figures()


def execute(notebook: dict, name: str) -> dict:
    """Run every code cell in order; the notebook with outputs and execution counts. A failing cell
    raises RuntimeError naming the cell, with its traceback."""
    namespace = {"__name__": "__main__"}
    count = 0
    for index, cell in enumerate(notebook["cells"]):
        cell.setdefault("id", f"cell-{index}")
        if cell["cell_type"] != "code":
            continue
        count += 1
        outputs = _Outputs()
        try:
            run_cell(source(cell), namespace, f"<{name} cell {index}>", outputs, count)
        except BaseException:
            raise RuntimeError(f"{name}: cell {index} failed:\n{traceback.format_exc()}") from None
        cell["execution_count"], cell["outputs"] = count, outputs.final()
    notebook.setdefault("metadata", {})["jaxtrees"] = {"code_sha256": code_sha256(notebook), "size": "small"}
    return notebook


def _child(path: Path, out: Path) -> int:
    """The ``--child`` process: execute ``path`` into ``out`` (nothing written on failure)."""
    notebook = with_install_cell(json.loads(path.read_text()), path.name)
    try:
        executed = execute(notebook, path.name)
    except RuntimeError as e:
        print(e, file=sys.stderr)
        return 1
    out.write_text(dumps(executed))
    return 0


# ----------------------------------------------------------------------------- every notebook, one process each


def run(path: Path, out: Path, timeout: float) -> tuple[bool, str]:
    """Execute ``path`` in a fresh process at the small size into ``out``: (ok, what to report)."""
    env = {**os.environ, "JAXTREES_NOTEBOOK_SMALL": "1", "MPLBACKEND": "Agg"}
    with tempfile.TemporaryDirectory() as cwd:
        start = time.perf_counter()
        try:
            proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", str(path.resolve()),
                                   str(out.resolve())], cwd=cwd, env=env, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            return False, f"{path.name}: not done after {timeout:.0f} s (--timeout)"
    if proc.returncode != 0:
        return False, proc.stderr[-6000:]
    return True, f"{out} ({out.stat().st_size / 1024:,.0f} KiB, {time.perf_counter() - start:.0f} s)"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("notebooks", nargs="*", type=Path, help="notebooks to run (default: every notebooks/*.ipynb)")
    ap.add_argument("--out", type=Path, help="write the executed notebooks here (default: in place)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per notebook (default 900)")
    ap.add_argument("--child", nargs=2, type=Path, metavar=("NOTEBOOK", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return _child(*args.child)
    paths = args.notebooks or sorted(NOTEBOOKS.glob("*.ipynb"))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    failed = 0
    for path in paths:
        target = args.out / path.name if args.out else path
        with tempfile.TemporaryDirectory() as tmp:  # the source is replaced only by a complete run
            ok, text = run(path, Path(tmp) / path.name, args.timeout)
            if ok:
                target.write_text((Path(tmp) / path.name).read_text())
                text = text.replace(str(Path(tmp) / path.name), str(target))
        print(text if ok else f"FAILED {text}", flush=True)
        failed += not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
