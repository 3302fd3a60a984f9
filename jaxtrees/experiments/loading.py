"""Finding a study by what a user types: a built-in name, ``path/to/study.py`` (its one study), ``study.py:NAME``,
or ``package.module:NAME``; and again later from what metadata.json recorded (:func:`from_origin`).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
import traceback


def load(what: str):
    """``(study, origin)`` for ``what``; ``origin`` says where it came from, for metadata.json. ValueError naming
    the known studies, the file or module, and what it holds, otherwise."""
    from jaxtrees.experiments import studies

    if what in studies.STUDIES:
        return studies.STUDIES[what], {"builtin": what}
    path, sep, name = what.rpartition(":")
    if not sep or not name.isidentifier():
        path, name = what, ""
    if path.endswith(".py") or os.path.sep in path:
        if not os.path.isfile(path):
            raise ValueError(f"no study file {path} (a study is a built-in name: {', '.join(sorted(studies.STUDIES))}; "
                             f"or a file path/to/study.py, study.py:NAME, or package.module:NAME)")
        path = os.path.abspath(path)
        module = _from_file(path)
        attribute, study = _pick(module, name, path)
        return study, {"file": path, "name": attribute}
    if name:
        module = _from_module(path, what)
        attribute, study = _pick(module, name, path)
        return study, {"module": path, "name": attribute}
    raise ValueError(f"unknown study {what!r}; known studies: {', '.join(sorted(studies.STUDIES))} (or a file "
                     f"path/to/study.py, study.py:NAME, package.module:NAME)")


def from_origin(origin: dict):
    """The study metadata.json's ``origin`` names (:func:`load`'s second value)."""
    if "builtin" in origin:
        return load(origin["builtin"])[0]
    if "file" in origin:
        return _pick(_from_file(origin["file"]), origin["name"], origin["file"])[1]
    return _pick(_from_module(origin["module"], origin["module"]), origin["name"], origin["module"])[1]


def _from_module(path: str, what: str):
    """The module ``path`` (dotted), imported; ValueError saying that the working directory is not searched where
    Python finds no such module, or naming the user's file and line where the module's own code fails."""
    try:
        return importlib.import_module(path)
    except ModuleNotFoundError as e:
        if e.name and (path == e.name or path.startswith(e.name + ".")):
            top, name = path.split(".")[0], what.rpartition(":")[2]
            searched = any(os.path.abspath(p or ".") == os.getcwd() for p in sys.path)
            hint = "" if searched else (f", and `jaxtrees run` does not search the working directory; add it "
                                        f"(PYTHONPATH=. jaxtrees run {what}, where {top}/ or {top}.py lies in .) or "
                                        f"give the file: {path.replace('.', os.path.sep)}.py:{name}")
            raise ValueError(f"cannot import the module {path!r} of {what!r}: Python finds no module {e.name!r} on "
                             f"its path (sys.path){hint}") from None
        raise _failed(e, _module_file(path)) from e
    except Exception as e:  # noqa: BLE001 - the user's module: its fault as its file and line, the traceback its cause
        raise _failed(e, _module_file(path)) from e


def _module_file(path: str) -> str | None:
    """The file of module ``path`` where Python knows it (its spec's origin), None otherwise."""
    try:
        spec = importlib.util.find_spec(path)
    except (ImportError, ValueError):
        return None
    return None if spec is None else spec.origin


def _failed(error: BaseException, path: str | None) -> ValueError:
    """What went wrong importing a study file or module, at the user's file and line only (the loader's frames left
    out; ``--debug`` prints the whole traceback): a syntax error where it lies, else the innermost line of ``path``."""
    if isinstance(error, SyntaxError):
        text = f"\n    {error.text.strip()}" if error.text and error.text.strip() else ""
        return ValueError(f"{error.filename}:{error.lineno}: syntax error: {error.msg}{text}")
    frames = [f for f in traceback.extract_tb(error.__traceback__) if path and f.filename == path]
    where = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else path or "the study's module"
    line = f"\n    {frames[-1].line}" if frames and frames[-1].line else ""
    if isinstance(error, ModuleNotFoundError):
        return ValueError(f"{where}: no module named {error.name!r} (the study imports it: install it, or put it on "
                          f"PYTHONPATH){line}")
    if isinstance(error, ValueError):
        return ValueError(f"{where}: {error}")
    return ValueError(f"{where}: {type(error).__name__}: {error} (--debug shows the traceback){line}")


def _from_file(path: str):
    """The module of the Python file ``path``, imported once per process and contents under a name of its own (a
    second file of the same name does not replace it; an edited file is imported again)."""
    try:
        with open(path, "rb") as fh:
            digest = hashlib.sha1(path.encode() + b"\0" + fh.read()).hexdigest()[:10]
    except OSError as e:
        raise ValueError(f"cannot read the study file {path} ({e.strerror or e})") from None
    stem = "".join(ch if ch.isalnum() else "_" for ch in os.path.splitext(os.path.basename(path))[0])
    name = f"jaxtrees_study_{stem}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ValueError(f"{path} is not a Python file jaxtrees can import")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001 - the user's file: its fault as its file and line, the traceback its cause
        del sys.modules[name]
        raise _failed(e, path) from e
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _pick(module, name: str, where: str):
    """``(attribute, study)``: the module's study called ``name``, or its only one."""
    from jaxtrees.experiments.study import Study

    found = {k: v for k, v in vars(module).items() if isinstance(v, Study) and not k.startswith("_")}
    if name:
        if not isinstance(getattr(module, name, None), Study):
            raise ValueError(f"{where} has no study {name!r}" + (f"; its studies: {', '.join(found)}" if found else ""))
        return name, getattr(module, name)
    if len(found) != 1:
        raise ValueError(f"{where} holds {'no study' if not found else 'the studies ' + ', '.join(found)}: "
                         + ("define one, a jaxtrees.Study at module level" if not found else
                            f"name one, e.g. {where}:{next(iter(found))}"))
    return next(iter(found.items()))
