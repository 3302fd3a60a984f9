"""The resume contract: everything besides the seed and a cell's parameters that can change a row's value.

:func:`terms` is recorded in metadata.json and rows/_config.json before a run's first call; a resumed (or grown)
run compares its own terms with the recorded ones (:func:`differences`) and is refused under any difference,
each named in a sentence, unless ``--allow-changes``. The terms: the code (a digest of the package source that runs
trials, and of the study's own module outside the package, its local imports and registered learners included), the
study's declaration, JAX settings, versions, backend, device kind, CPU features, compiler options, XLA_FLAGS. It has
what fingerprints a run for the store and the runner alike: :func:`config_digest`, :func:`environment`,
:func:`version`, :func:`git_commit`, :func:`now` and the damaged part's :data:`WAY_OUT`.
"""

from __future__ import annotations

import ast
import copy
import datetime
import functools
import hashlib
import inspect
import json
import os
import platform
import subprocess
import sys
import sysconfig

#: JAX settings that can change a value a trial computes (a key, a dtype, a rounding, a gradient).
JAX_SETTINGS = ("jax_default_prng_impl", "jax_threefry_partitionable", "jax_random_seed_offset", "jax_enable_x64",
                "jax_default_matmul_precision", "jax_numpy_dtype_promotion", "jax_softmax_custom_jvp",
                "jax_enable_custom_prng", "jax_legacy_prng_key", "jax_threefry_gpu_kernel_lowering")

#: Package modules that never run inside a trial (arguments, figures, reports, progress, reading rows): editing
#: them does not change the source digest (a path ending in "/": the whole folder). Everything else under
#: ``jaxtrees/`` does, data files included.
PRESENTATION = ("cli.py", "cli_help.py", "sklearn.py", "sklearn_base.py", "sklearn_ensembles.py", "experiments/report/",
                "experiments/reporting.py", "experiments/convert.py", "experiments/run/progress.py",
                "experiments/results/legacy.py", "experiments/studies/theory.py", "experiments/studies/verdicts.py",
                "experiments/studies/gd_scaling_report.py", "experiments/studies/gd_scaling_fits.py",
                "experiments/studies/learning_report.py", "experiments/studies/signal_report.py",
                "experiments/studies/counterexamples_report.py", "experiments/studies/compare_report.py",
                "experiments/studies/finite_addressing_theory.py")

_FOLDERS = tuple(p for p in PRESENTATION if p.endswith("/"))

#: CPU features XLA:CPU specializes its code for (vector widths, fused multiply-add): another set can round otherwise.
CPU_FEATURES = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512_bf16",
                "avx512_fp16", "avx512vnni", "amx_tile", "asimd", "sve", "sve2")

#: What each term means, for the refusal's sentence.
NAMES = {"source": "jaxtrees' source (a module that runs trials was edited or upgraded)",
         "study_code": "the study's own code", "declaration": "the study's declaration",
         "cpu_features": "the CPU's vector features", "device_kind": "the device kind", "backend": "the backend",
         "compiler_options": "the compiler options", "xla_flags": "XLA_FLAGS"}


def terms(study, device, compiler_options: dict, xla_flags: str, env: dict) -> dict:
    """This process's contract for ``study`` on ``device`` (versions from ``env``, :func:`~jaxtrees.experiments.contract.
    environment`; JAX's settings, code digests, declaration)."""
    import jax

    return {**{name: env[name] for name in ("jax", "jaxlib", "numpy", "optax")},
            "source": source_digest(), **study_terms(study),
            **{name.removeprefix("jax_"): _setting(jax.config, name) for name in JAX_SETTINGS},
            "backend": jax.default_backend(), "device_kind": device.device_kind,
            "cpu_features": cpu_features() if device.platform == "cpu" else None,
            "compiler_options": compiler_options, "xla_flags": xla_flags}


def study_terms(study) -> dict:
    """The study's part of the contract: its declaration and the digests of its own code outside the package (each
    file's definitions: :func:`_file_digest`; a function of no file, e.g. a notebook cell's: its compiled code),
    the code of the user's registered learners it names included (:func:`learner_code`)."""
    files, loose = learner_code(study)
    code = {}
    for f in sorted(set(study_files(study)) | files):
        code[os.path.basename(f)] = _file_digest(f)
        root = os.path.dirname(f)
        code.update({os.path.relpath(m, root).replace(os.sep, "/"): _file_digest(m) for m in local_imports(f)})
    for f in (study.trial, getattr(study, "check_cell", None), getattr(study, "after", None)):
        if f is not None and _outside(f) and not _file_of(f):
            code[f"{getattr(f, '__qualname__', 'function')} (no file)"] = _code_digest(f)
    return {"declaration": declaration(study), "study_code": {**code, **loose} or None}


def local_imports(path: str) -> list[str]:
    """The files of the modules that the file ``path`` imports, directly or through each other, that lie in its folder
    or below it (a helper beside a study file): not jaxtrees', nor installed ones (site-packages), nor the standard
    library. Only modules imported by now are found (a study file's are, once it is loaded); relative imports not."""
    root, seen, todo = os.path.dirname(os.path.abspath(path)), set(), [os.path.abspath(path)]
    while todo:
        try:
            with open(todo.pop(), "rb") as fh:
                tree = ast.parse(fh.read())
        except (OSError, SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            from_ = isinstance(node, ast.ImportFrom) and not node.level and node.module
            wanted = [a.name for a in node.names] if isinstance(node, ast.Import) else [
                node.module, *(f"{node.module}.{a.name}" for a in node.names)] if from_ else []
            for file in (getattr(sys.modules.get(name), "__file__", None) or "" for name in wanted):
                file = os.path.abspath(file) if file.endswith(".py") else ""
                if file.startswith(root + os.sep) and file not in seen and not file.startswith(_NOT_LOCAL) and not \
                        set(file.split(os.sep)) & {"site-packages", "dist-packages"}:
                    seen.add(file)
                    todo.append(file)
    return sorted(seen)


_NOT_LOCAL = tuple(p + os.sep for p in (os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                         os.path.abspath(sysconfig.get_paths()["stdlib"])))


def learner_code(study) -> tuple[set, dict]:
    """``(files, loose)`` of the user's registered learners that the study's grid or choices name (a string value,
    as ``compare.with_learners`` lists them): the files of each factory and of the classes and functions it names
    (a registered ``Half`` and its ``fit``), and ``{"learner NAME (no file)": digest}`` where they have none."""
    from jaxtrees.learners import base as learner_base  # heavy (JAX); the layer below experiments

    grids, knobs = getattr(study, "grid", ()), getattr(study, "compile", None)
    values = [*(grids if isinstance(grids, tuple) else (grids,)), getattr(knobs, "choices", {})]
    said = {v for grid in values if isinstance(grid, dict) for vs in grid.values()
            for v in (vs if isinstance(vs, (list, tuple)) else (vs,)) if isinstance(v, str)}
    files, loose = set(), {}
    for name in sorted(said & set(learner_base.names())):
        factory = learner_base.entry(name).factory
        if not _outside(factory):
            continue
        for f in (factory, *_named_by(factory)):
            if _file_of(f):
                files.add(_file_of(f))
            else:
                loose.setdefault(f"learner {name} (no file)", []).append(_code_digest(f))
    return files, {name: hashlib.sha256(" ".join(d).encode()).hexdigest()[:16] for name, d in loose.items()}


def _named_by(f) -> list:
    """The user's classes and functions (outside jaxtrees) that function ``f`` names among its globals; a class's
    functions stand for a class of no file (a notebook cell's)."""
    f = getattr(f, "func", f)  # a functools.partial: its function
    code, scope = getattr(f, "__code__", None), getattr(f, "__globals__", {})
    if code is None:
        return []
    names, stack = set(), [code]
    while stack:
        c = stack.pop()
        names.update(c.co_names)
        stack += [k for k in c.co_consts if inspect.iscode(k)]
    out = []
    for name in sorted(names):
        obj = scope.get(name)
        if (inspect.isclass(obj) or inspect.isfunction(obj)) and _outside(obj):
            out += [obj] if _file_of(obj) or not inspect.isclass(obj) else [
                v for v in vars(obj).values() if inspect.isfunction(v)]
    return out


def _code_digest(f) -> str:
    """A digest of a function's bytecode and constants (nested functions' too)."""
    code, digest = getattr(inspect.unwrap(f), "__code__", None), hashlib.sha256()

    def add(c):
        constants = [k for k in c.co_consts if not inspect.iscode(k)]
        digest.update(c.co_code + repr(constants).encode() + repr(c.co_names).encode())
        for k in c.co_consts:
            if inspect.iscode(k):
                add(k)

    if code is not None:
        add(code)
    return digest.hexdigest()[:16]


def _setting(config, name: str):
    value = getattr(config, name, None)
    return value if isinstance(value, (bool, int, float, str, type(None))) else str(value)


def declaration(study) -> dict:
    """What of the study's declaration decides its rows besides the code and the grid's values: the study's
    ``declaration()`` where it has one, else the same read from its attributes."""
    if hasattr(study, "declaration"):
        return study.declaration()
    name = lambda f: None if f is None else f"{f.__module__}.{f.__qualname__}"  # noqa: E731
    return {"parameters": sorted(study.full), "static": sorted(study.static), "shared": sorted(study.shared),
            "axis": None if study.axis is None else study.axis.name, "uniform": sorted(study.uniform),
            "bounds": sorted(study.bounds), "choices": {k: list(v) for k, v in sorted(study.choices.items())},
            "buckets": sorted(study.buckets), "branches": list(study.branches), "after": name(study.after),
            "cpu_opt_level": study.cpu_opt_level, "level_loop": study.level_loop}


#: The jaxtrees package's directory (its files are in :func:`source_digest`).
PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _file_of(f) -> str | None:
    """The existing source file of function ``f`` (its module's for a partial), else None (a notebook cell)."""
    try:
        path = inspect.getsourcefile(inspect.unwrap(f))
    except TypeError:  # a builtin or a functools.partial: its module's file
        path = getattr(sys.modules.get(getattr(f, "__module__", "") or ""), "__file__", None)
    return os.path.abspath(path) if path and os.path.isfile(path) else None


def _outside(f) -> bool:
    """Whether ``f`` is not jaxtrees' own (a user's function, in a file or not)."""
    path = _file_of(f)
    module = getattr(f, "__module__", "") or ""
    return not (path.startswith(PACKAGE + os.sep) if path else module.split(".")[0] == "jaxtrees")


def study_files(study) -> list[str]:
    """The source files of the study's own functions that lie outside the jaxtrees package (a user's study)."""
    return sorted({_file_of(f) for f in (study.trial, getattr(study, "check_cell", None), getattr(study, "after", None))
                   if f is not None and _file_of(f) and _outside(f)})


def _file_digest(path: str) -> dict:
    """What in a study file can change a row: a digest of each top-level definition's syntax tree by name (comments,
    docstrings and formatting left out; statements that define no name: "(module code)"; imports: "(imports)"). A
    file that does not parse: its bytes, as "(source)". Read each time: a study file may be edited between runs."""
    with open(path, "rb") as fh:
        data = fh.read()
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        return {"(source)": hashlib.sha256(data).hexdigest()[:16]}
    digests: dict = {}
    for node in tree.body:
        if _docstring(node):
            continue
        text = ast.dump(_without_docstrings(node), include_attributes=False).encode()
        for name in _defines(node):
            digests.setdefault(name, hashlib.sha256()).update(text)
    return {name: h.hexdigest()[:16] for name, h in sorted(digests.items())}


def _docstring(node) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _without_docstrings(node):
    """A copy of ``node`` without the docstrings of the functions and classes in it."""
    node = copy.deepcopy(node)
    for inner in ast.walk(node):
        if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and inner.body and \
                _docstring(inner.body[0]):
            inner.body = inner.body[1:] or [ast.Pass()]
    return node


def _defines(node) -> list[str]:
    """The top-level names a statement defines (its digest is filed under each)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return ["(imports)"]
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
        node, (ast.AnnAssign, ast.AugAssign)) else []
    names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    return names or ["(module code)"]


def code_changes(recorded, now) -> str:
    """What differs between two study-code terms, by file and definition: "qdepth.py: trial (edited), CAP (added)"."""
    recorded, now, out = recorded or {}, now or {}, []
    for name in sorted(set(recorded) | set(now)):
        old, new = recorded.get(name), now.get(name)
        if old == new:
            continue
        if not isinstance(old, dict) or not isinstance(new, dict):
            out.append(f"{name}" + ("" if old and new else " (added)" if new else " (removed)"))
            continue
        changed = [f"{d} ({'edited' if d in old and d in new else 'added' if d in new else 'removed'})"
                   for d in sorted(set(old) | set(new)) if old.get(d) != new.get(d)]
        out.append(f"{name}: {', '.join(changed)}")
    return "; ".join(out)


@functools.lru_cache(maxsize=1)
def source_digest() -> str:
    """A digest of every file of the installed jaxtrees package but :data:`PRESENTATION` (about 10 ms)."""
    root, digest = PACKAGE, hashlib.sha256()
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            path = os.path.join(folder, name)
            relative = os.path.relpath(path, root).replace(os.sep, "/")
            if relative in PRESENTATION or relative.startswith(_FOLDERS) or name.endswith((".pyc", ".pyo")):
                continue
            with open(path, "rb") as fh:
                digest.update(relative.encode() + b"\0" + hashlib.sha256(fh.read()).digest())
    return digest.hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def cpu_features() -> str:
    """The host CPU's :data:`CPU_FEATURES` (from /proc/cpuinfo), space-separated; "unknown" where unreadable."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith(("flags", "Features")):
                    have = set(line.partition(":")[2].split())
                    return " ".join(f for f in CPU_FEATURES if f in have)
    except OSError:
        pass
    return f"unknown ({platform.machine()})"


def differences(recorded: dict, now: dict, words: tuple = ("recorded", "now")) -> list[str]:
    """One clause per term that differs between a recorded contract and this run's (groups aside): what it is,
    recorded and now (``words``: how the two are named); a term the recorded contract lacks (an earlier version's)
    counts as a difference."""
    was, is_ = words
    out = []
    for key in sorted(set(recorded) | set(now)):
        if key == "groups" or recorded.get(key) == now.get(key):
            continue
        if key not in recorded:
            out.append(f"{NAMES.get(key, key)}: not recorded by the run that started the directory (an earlier "
                       f"jaxtrees), now {_short(now[key])}")
        elif key == "declaration" and isinstance(recorded[key], dict) and isinstance(now.get(key), dict):
            out += [f"the study's {field}: {was} {_short(recorded[key].get(field))}, {is_} "
                    f"{_short(now[key].get(field))}" for field in sorted(set(recorded[key]) | set(now[key]))
                    if recorded[key].get(field) != now[key].get(field)]
        elif key == "study_code":
            out.append(f"the study's own code was edited ({code_changes(recorded[key], now[key])})")
        else:
            out.append(f"{NAMES.get(key, key.replace('_', ' '))}: {was} {_short(recorded[key])}, {is_} "
                       f"{_short(now.get(key))}")
    return out


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def group_changes(recorded: dict, groups: dict, words: tuple = ("recorded", "now")) -> list[str]:
    """The programs whose vmapped group differs from the recorded one (the group is part of the arithmetic)."""
    return [f"the group of program {name}: {words[0]} {g}, {words[1]} {groups[name]}"
            for name, g in (recorded.get("groups") or {}).items() if name in groups and groups[name] != g]


#: What a damaged or doubled part asks the user to do.
WAY_OUT = ("move the file out of rows/ (its trials then run again), or delete the results directory to "
           "start over")


def config_digest(config: dict) -> str:
    """A short digest of the configuration, stamped on every part."""
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]


def environment() -> dict:
    """Versions, git commit, host, devices, command line and XLA_FLAGS, for the metadata file."""
    import jax
    import numpy as np

    devices = jax.devices()
    return {
        "jaxtrees": version("jaxtrees"), "git_commit": git_commit(), "jax": jax.__version__,
        **{name: version(name) for name in ("jaxlib", "optax", "matplotlib", "pyarrow")},
        "numpy": np.__version__, "python": platform.python_version(), "platform": platform.platform(),
        "host": platform.node(), "command": sys.argv, "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "backend": jax.default_backend(), "devices": [str(d) for d in devices],
        "device_kind": devices[0].device_kind, "local_device_count": jax.local_device_count(),
        "process_index": jax.process_index(), "process_count": jax.process_count(),
    }


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def git_commit():
    """The commit of the checkout jaxtrees runs from (with "+dirty" for local changes), else None."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True,
                                timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True, timeout=5, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("+dirty" if dirty else "")


def version(package: str) -> str:
    """The installed version of ``package``; "unknown" where its metadata cannot be read."""
    try:
        from importlib.metadata import version as installed

        return installed(package)
    except Exception:  # noqa: BLE001 - metadata only
        return "unknown"


__all__ = ["JAX_SETTINGS", "PRESENTATION", "terms", "declaration", "differences", "group_changes", "source_digest",
           "cpu_features", "study_files", "WAY_OUT", "config_digest", "environment", "now",
           "git_commit", "version"]
