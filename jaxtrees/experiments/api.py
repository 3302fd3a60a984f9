"""One call that runs a study as ``jaxtrees run`` does (:func:`run`): a built-in name, a user's ``Study``, a file
``study.py[:NAME]`` or ``package.module:NAME``; the CPU split into devices, the program cache, progress, the Parquet
store (resume, growth), figures and report; the rows back as a pyarrow Table.

>>> import jaxtrees as jt                                                  # doctest: +SKIP
>>> rows = jt.run("juntas", out="results", quick=True, set={"k": 3})       # doctest: +SKIP
>>> rows.to_pandas().groupby(["c", "m"]).success.mean()                    # doctest: +SKIP
"""

from __future__ import annotations

import atexit
import json
import os
import sys

from jaxtrees.experiments.results import ending


def run(study, out: str = "results", *, quick: bool = False, set: dict | None = None, config: str | dict | None = None,
        seed: int | None = None, chunk: int | None = None, group: int | None = None, allow_changes: bool = False,
        progress: bool = True, figures: bool = True):
    """Run (or resume, or grow) ``study`` into ``out/NAME/``; return its rows (the current grid's) as a
    ``pyarrow.Table`` (``.to_pandas()``; strings dictionary-encoded, nothing per row in Python).

    ``set``: parameter -> value, list or "a,b,c" (``--set``; also ``replicates``); ``config``: a JSON file's path or
    a dict of the same (``--config``; may hold ``seed``); ``seed``, ``chunk``, ``group``, ``allow_changes``: as
    the command's flags. ``figures``: draw the figures and write report.md (the study's own, else the generic
    ones). The first call in a process sets up the CPU's devices (one per core) when JAX has not started yet."""
    from jaxtrees.experiments import reporting
    from jaxtrees.experiments.run import programs, runner
    from jaxtrees.experiments.study.probe import probe

    atexit.unregister(ending.settle)  # once: no thread or pool of the run left running when the interpreter ends
    atexit.register(ending.settle)
    study, origin = resolve(study)
    prepare()
    overrides, seed = overrides_of(set, config, seed)
    resolved = runner.configure(study, quick=quick, overrides=overrides, seed=seed, called=called(study, origin))
    probe(study, resolved)  # before anything is written: a fault of the trial or its grid is one sentence
    import jax

    key = json.dumps({"study": origin, "quick": quick, "config": resolved.as_json(), "chunk": chunk, "group": group},
                     sort_keys=True, default=str)
    with programs.prefetched(key, jax.local_devices() if jax.process_count() == 1 else None):
        directory = execute(study, origin, resolved, out, chunk=chunk, group=group, progress=progress,
                            allow_changes=allow_changes, figures=figures)
    if figures and jax.process_index() == 0 and reporting.after_run(study, directory) is None:
        raise RuntimeError(f"the run into {directory} is incomplete; call again to resume")
    return rows(directory)


def execute(study, origin: dict, config, out, *, chunk=None, group=None, progress=True, allow_changes=False,
            figures=True) -> str:
    """:func:`~jaxtrees.experiments.run.runner.run` of a resolved ``config``, recording where the study came from
    (matplotlib imported beside it where ``figures``); returns the results directory."""
    from jaxtrees.experiments import reporting
    from jaxtrees.experiments.run import runner

    if not str(out).strip():
        raise ValueError("--out must name a directory (default: results), got an empty value")
    if figures:
        reporting.import_figures()
    return runner.run(study, config, str(out), chunk=chunk, group=group, progress=progress,
                      allow_changes=allow_changes, about=reporting.about(study, origin))


def rows(directory: str):
    """The rows of a results directory (its current grid) as a ``pyarrow.Table``
    (:func:`~jaxtrees.experiments.results.reading.to_arrow`)."""
    from jaxtrees.experiments.results import read_results, reading

    return reading.to_arrow(read_results(directory))


def resolve(study):
    """``(study, origin)``: a ``Study`` (origin: its module's file, or its module) or what :func:`~jaxtrees.
    experiments.loading.load` takes."""
    from jaxtrees.experiments import loading, studies
    from jaxtrees.experiments.study import Study

    if not isinstance(study, Study):
        if not isinstance(study, (str, os.PathLike)):
            raise ValueError(f"study must be a jaxtrees.Study, a built-in study's name or a file path, got "
                             f"{type(study).__name__}")
        return loading.load(os.fspath(study))
    if studies.STUDIES.get(study.name) is study:
        return study, {"builtin": study.name}
    module = sys.modules.get(getattr(study.trial, "__module__", None) or "")
    attribute = next((k for k, v in vars(module).items() if v is study), None) if module is not None else None
    path = getattr(module, "__file__", None)
    if attribute is None:
        return study, {"object": study.name}  # defined in a notebook cell or a function: plot and report fall back
    if path and (module.__name__ == "__main__" or module.__name__.startswith("jaxtrees_study_")):
        return study, {"file": os.path.abspath(path), "name": attribute}
    return study, {"module": module.__name__, "name": attribute}


def called(study, origin: dict) -> str:
    """What a user types for the study whose origin is ``origin``: its file (``FILE:NAME`` where the file holds
    several), ``module:NAME``, or its name."""
    if "file" in origin:
        return origin["file"]
    if "module" in origin:
        return f"{origin['module']}:{origin['name']}"
    return study.name


def overrides_of(given: dict | None, config, seed: int | None):
    """``(overrides, seed)`` from ``set``, a ``config`` file or dict, and ``seed`` (``set`` and ``seed`` win)."""
    overrides, root = {}, 0
    if isinstance(config, (str, os.PathLike)):
        path = config
        try:
            with open(config) as fh:
                config = json.load(fh)
        except (OSError, json.JSONDecodeError) as e:
            raise ValueError(f"--config {os.fspath(config)}: {e}") from None
        if not isinstance(config, dict):
            raise ValueError(f"--config {os.fspath(path)} must hold a JSON object of parameter overrides")
    if config is not None:
        if not isinstance(config, dict):
            raise ValueError(f"config must be a dict or a JSON file's path, got {type(config).__name__}")
        overrides = dict(config)
        root = overrides.pop("seed", root)
    overrides.update(given or {})
    return overrides, root if seed is None else seed


def prepare() -> None:
    """Before a process's first run: one CPU device per core and wide vectors (only while JAX has not started its
    backend), the backend checked, JAX's persistent compilation cache at ``$JAXTREES_CACHE_DIR``."""
    from jaxtrees.core.platform import split_cpu, wide_vectors

    if not _backend_started():
        split_cpu()
        wide_vectors()
    backend()
    compilation_cache()


def _backend_started() -> bool:
    try:
        from jax._src import xla_bridge

        return bool(getattr(xla_bridge, "_backends", {}))
    except ImportError:  # pragma: no cover - a jax without that module: assume started, change nothing
        return True


def backend() -> None:
    """Start JAX's backend now, so that a JAX_PLATFORMS this machine lacks is one sentence, not a traceback."""
    import jax

    try:
        jax.devices()
    except (RuntimeError, AssertionError, ValueError) as e:
        wanted = os.environ.get("JAX_PLATFORMS", "")
        raise ValueError(f"JAX cannot start the backend{f' JAX_PLATFORMS={wanted}' if wanted else ''} here "
                         f"({(str(e).strip().splitlines() or [type(e).__name__])[0][:200]}); unset JAX_PLATFORMS (or set it "
                         f"to cpu), or install the jax build for that accelerator") from None


def compilation_cache() -> None:
    """Point JAX's persistent compilation cache at ``$JAXTREES_CACHE_DIR`` (once per process) and say on stderr
    where it is and how large (:mod:`jaxtrees.experiments.run.xla_cache`).

    The default is ``~/.cache/jaxtrees/xla``, or under ``$XDG_CACHE_HOME``; an empty value turns it off. A rerun, a
    resumed run, or a run of the same static groups with other dynamic values (e.g. another c) loads its programs
    instead of compiling them, with the same results (every program is kept, however fast it compiled). An entry
    that cannot be read is compiled again and replaced, never an error; one of another jax version or device is
    never read (its key differs). A directory that cannot be made is a warning: the run compiles every program.
    """
    default = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "jaxtrees", "xla")
    directory = os.environ.get("JAXTREES_CACHE_DIR", default)
    if not directory:
        return
    from jaxtrees.experiments.run import programs, xla_cache

    try:
        directory = xla_cache.use(directory)
    except OSError as e:
        print(f"jaxtrees run: warning: cannot use the compilation cache {directory} ({e.strerror or e}); every program "
              f"is compiled (JAXTREES_CACHE_DIR sets the cache, empty: off)", file=sys.stderr)
        return
    print(f"jaxtrees run: compilation cache {programs.describe(directory)}; JAXTREES_CACHE_DIR sets it (empty: off)",
          file=sys.stderr)
