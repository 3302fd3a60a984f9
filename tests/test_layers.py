"""The package's layers hold: no module imports a layer above its own, no import circle, no module over 400 lines.

Bottom to top: core, hypotheses, fourier, targets, problems, datasets, learners, experiments, and
at the top sklearn, cli and the package facade ``jaxtrees/__init__.py`` (which may import
anything). A module may import its own layer and any lower one. Inside experiments/ the floors are, bottom to top:
contract and table; study/; report/; studies/; results/; run/; then loading, reporting, convert and api; inside
results/ and run/ each module has its own rank (:data:`INNER`). Every ``import jaxtrees...`` and
``from jaxtrees... import`` counts, relative or absolute, at module level or inside a function (a
lazy import still runs a higher layer), and so does ``importlib.import_module("jaxtrees...")``.
``from jaxtrees import name`` is the facade unless ``name`` is a subpackage or module of it.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "jaxtrees"

#: Layer of each top-level subpackage or module, bottom (1) to top (9).
LAYERS = {"core": 1, "hypotheses": 2, "fourier": 3, "targets": 4, "problems": 5, "datasets": 6, "learners": 7,
          "experiments": 8, "sklearn": 9, "sklearn_base": 9, "sklearn_ensembles": 9, "cli": 9, "cli_help": 9}
#: Floors inside experiments/, bottom (1) to top (7): a module of experiments/ imports its own floor or lower ones.
FLOORS = {"contract": 1, "table": 1, "study": 2, "report": 3, "studies": 4, "results": 5, "run": 6, "loading": 7,
          "reporting": 7, "convert": 7, "api": 7}
#: Ranks inside a folder of experiments/ where the order matters: a module imports only those before it.
INNER = {"results": ("ending", "writer", "layout", "legacy", "files", "reading", "store"),
         "run": ("progress", "xla_cache", "programs", "keeper", "distributed", "compiled", "workers", "memory",
                 "pacing", "job", "runner")}
#: Modules allowed over :data:`LINE_BUDGET` lines, each with its reason; the list only shrinks.
LONG_MODULES: dict = {
}
LINE_BUDGET = 400
#: Folders that may hold more than :data:`FOLDER_BUDGET` modules: the registries.
REGISTRIES = ("jaxtrees/learners", "jaxtrees/experiments/studies")
FOLDER_BUDGET = 12
#: ``jaxtrees`` itself, the package facade: the top.
FACADE = 9
#: Known upward imports, (file, imported module), each with its reason; a fix removes its entry.
KNOWN: set = set()  # (file, imported module) pairs allowed up the layers, each with its reason


def layer_of(module: str) -> int | None:
    """The layer of a dotted jaxtrees module name; None where it is not placed in :data:`LAYERS`."""
    parts = module.split(".")
    if parts[0] != "jaxtrees":
        raise ValueError(f"not a jaxtrees module: {module}")
    return FACADE if len(parts) == 1 else LAYERS.get(parts[1])


def floor_of(module: str) -> tuple | None:
    """``(floor, inner rank)`` of a module inside experiments/ (the rank 0 where its folder has no order); None
    outside experiments/ or for the experiments package itself."""
    parts = module.split(".")
    if len(parts) < 3 or parts[1] != "experiments":
        return None
    floor = FLOORS.get(parts[2])
    if floor is None:
        return None
    order = INNER.get(parts[2])
    if order is None or len(parts) < 4:
        return floor, 0
    return floor, order.index(parts[3]) + 1 if parts[3] in order else None


def layer_name(module: str) -> str:
    parts = module.split(".")
    return "the facade jaxtrees" if len(parts) == 1 else parts[1]


def _is_module(dotted: str) -> bool:
    """Whether ``jaxtrees.x.y`` names a module or package on disk (not an attribute of one)."""
    path = PACKAGE.joinpath(*dotted.split(".")[1:])
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imported_modules(source: str, module: str, is_package: bool = False):
    """``(line, imported jaxtrees module)`` for every import of jaxtrees in ``source``, the text of
    ``module`` (dotted; ``is_package`` for an ``__init__.py``), wherever it sits in the file."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "jaxtrees":
                    yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            if origin.split(".")[0] != "jaxtrees":
                continue
            for alias in node.names:
                # ``from jaxtrees import targets`` imports the targets package; ``from jaxtrees import Tree``
                # runs (and takes a name from) the facade.
                child = f"{origin}.{alias.name}"
                yield node.lineno, child if alias.name != "*" and _is_module(child) else origin
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
              and node.args[0].value.split(".")[0] == "jaxtrees"):
            yield node.lineno, node.args[0].value


def violations(source: str, module: str, path: str, is_package: bool = False) -> list[str]:
    """One message per import in ``source`` of a layer above ``module``'s."""
    own = layer_of(module)
    found = []
    for line, imported in imported_modules(source, module, is_package):
        other = layer_of(imported)
        if other is None or own is None or other > own:
            found.append(f"{path}:{line}: {layer_name(module)} (layer {own}) imports {imported} "
                         f"({layer_name(imported)}, layer {other}): an import up the layers")
    return found


def floor_violations(source: str, module: str, path: str, is_package: bool = False) -> list[str]:
    """One message per import in ``source`` (a module of experiments/) of a floor above ``module``'s, or of a module
    after it in its folder's :data:`INNER` order."""
    own = floor_of(module)
    found = []
    for line, imported in imported_modules(source, module, is_package):
        other = floor_of(imported)
        if own is None or other is None:
            continue
        same_folder = module.split(".")[2] == imported.split(".")[2]
        up = other[0] > own[0] or (same_folder and None not in (own[1], other[1]) and other[1] > own[1] > 0)
        if up or (same_folder and (own[1] is None or other[1] is None)):
            found.append(f"{path}:{line}: {module} imports {imported}: an import up experiments/' floors")
    return found


def package_modules():
    """``(path relative to the repository, dotted name, is_package)`` of every module of jaxtrees."""
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        yield path, ".".join(parts[:-1] if is_package else parts), is_package


def test_every_module_has_a_layer():
    unplaced = [name for _, name, _ in package_modules() if layer_of(name) is None]
    assert not unplaced, f"modules in no layer (add their top-level package to LAYERS): {unplaced}"


def test_no_import_runs_up_a_layer():
    found = []
    for path, name, is_package in package_modules():
        where = str(path.relative_to(PACKAGE.parent))
        found += [m for m in violations(path.read_text(), name, where, is_package)
                  if (where, m.split(" imports ")[1].split()[0]) not in KNOWN]
    assert not found, "\n".join(found)


def test_experiments_floors_hold():
    found = []
    for path, name, is_package in package_modules():
        if name.startswith("jaxtrees.experiments.") and floor_of(name) is None:
            found.append(f"{name}: in no floor of experiments/ (add it to FLOORS or INNER)")
            continue
        found += floor_violations(path.read_text(), name, str(path.relative_to(PACKAGE.parent)), is_package)
    assert not found, "\n".join(found)


def import_graph() -> dict:
    """Module -> the jaxtrees modules it imports (anywhere in its file), each resolved to a module on disk."""
    graph = {}
    for path, name, is_package in package_modules():
        targets = set()
        for _, imported in imported_modules(path.read_text(), name, is_package):
            parts = imported.split(".")
            while len(parts) > 1 and not _is_module(".".join(parts)):
                parts = parts[:-1]
            targets.add(".".join(parts))
        graph[name] = targets - {name}
    return graph


def circles(graph: dict) -> list[list[str]]:
    """The import circles of ``graph``: its strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circle():
    graph = {name: targets for name, targets in import_graph().items() if name != "jaxtrees"}  # the facade: the top
    found = circles(graph)
    assert not found, f"import circles: {found}"


def test_circle_finder_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_module_over_the_line_budget():
    over = {str(path.relative_to(PACKAGE.parent)): len(path.read_text().splitlines())
            for path, _, _ in package_modules()}
    over = {path: lines for path, lines in over.items() if lines > LINE_BUDGET and path not in LONG_MODULES}
    assert not over, f"modules over {LINE_BUDGET} lines (split them by responsibility): {over}"
    stale = [path for path in LONG_MODULES if not (PACKAGE.parent / path).is_file()
             or len((PACKAGE.parent / path).read_text().splitlines()) <= LINE_BUDGET]
    assert not stale, f"LONG_MODULES entries no longer needed (remove them): {stale}"


def test_no_folder_over_the_module_budget():
    found = {}
    for folder in sorted({path.parent for path in PACKAGE.rglob("*.py")}):
        where = str(folder.relative_to(PACKAGE.parent))
        modules = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
        if where not in REGISTRIES and len(modules) > FOLDER_BUDGET:
            found[where] = len(modules)
    assert not found, f"folders of more than {FOLDER_BUDGET} modules (split them by concern): {found}"


@pytest.mark.parametrize("module, is_package, source, expected", [
    # Lazy (in a function) and at module level, absolute and relative.
    ("jaxtrees.learners.greedy", False, "import jax\n\ndef f():\n    from jaxtrees.experiments.run import runner\n",
     "jaxtrees/learners/greedy.py:4: learners (layer 7) imports jaxtrees.experiments.run.runner (experiments, layer 8)"),
    ("jaxtrees.hypotheses.tree", False, "from ..fourier import spectra\n",
     "jaxtrees/hypotheses/tree.py:1: hypotheses (layer 2) imports jaxtrees.fourier.spectra (fourier, layer 3)"),
    ("jaxtrees.fourier", True, "from .. import targets\n",
     "jaxtrees/fourier/__init__.py:1: fourier (layer 3) imports jaxtrees.targets (targets, layer 4)"),
    ("jaxtrees.core.bits", False, "import jaxtrees.problems\n",
     "jaxtrees/core/bits.py:1: core (layer 1) imports jaxtrees.problems (problems, layer 5)"),
    # A name from the facade runs the facade, the top layer.
    ("jaxtrees.targets.base", False, "from jaxtrees import Tree\n",
     "jaxtrees/targets/base.py:1: targets (layer 4) imports jaxtrees (the facade jaxtrees, layer 9)"),
    ("jaxtrees.datasets", True, "import importlib\nimportlib.import_module('jaxtrees.learners.sgd')\n",
     "jaxtrees/datasets/__init__.py:2: datasets (layer 6) imports jaxtrees.learners.sgd (learners, layer 7)"),
])
def test_checker_catches_an_upward_import(module, is_package, source, expected):
    path = module.replace(".", "/") + ("/__init__.py" if is_package else ".py")
    found = violations(source, module, path, is_package)
    assert [m.split(": an import")[0] for m in found] == [expected]


@pytest.mark.parametrize("module, source", [
    ("jaxtrees.experiments.run.runner", "from jaxtrees.learners import greedy\nfrom jaxtrees import targets\n"),
    ("jaxtrees.learners.greedy", "from jaxtrees.learners.growth import GrowthRule\nimport numpy, jax.numpy\n"),
    ("jaxtrees.fourier.spectra", "def f():\n    from ..hypotheses.tree import Tree\n    from . import transforms\n"),
    ("jaxtrees.sklearn", "from jaxtrees import experiments, Tree\n"),
    ("jaxtrees", "from jaxtrees.experiments import studies\n"),
])
def test_checker_allows_own_and_lower_layers(module, source):
    assert violations(source, module, "x.py", module == "jaxtrees") == []


def test_scripts_take_platform_setup_from_the_core_layer():
    """The benchmark scripts set up CPU devices and vector width with :mod:`jaxtrees.core.platform`,
    not through the command line module (the top layer)."""
    scripts = PACKAGE.parent / "scripts"
    found = []
    for path in sorted(scripts.glob("*.py")):
        for line, imported in imported_modules(path.read_text(), "scripts." + path.stem):
            if imported == "jaxtrees.cli" and any(name in path.read_text().splitlines()[line - 1]
                                                  for name in ("split_cpu", "wide_vectors", "_has_avx512")):
                found.append(f"scripts/{path.name}:{line}")
    assert not found, f"platform helpers taken from jaxtrees.cli (use jaxtrees.core.platform): {found}"
