"""What a run leaves besides its rows: figures, report.md (with the run's cost table) and what metadata.json says of
the study (:func:`about`: where it came from, its generic spec), for any study: its own ``plot`` and ``report``
where it has them, else the generic ones (:mod:`~jaxtrees.experiments.report.generic`), which also serve a directory whose
study can no longer be imported.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time

import numpy as np

#: The thread importing matplotlib beside a run (:func:`import_figures`), joined before the figures are drawn.
_IMPORTING: list = []


def import_figures() -> None:
    """Import matplotlib's figure and its PNG and SVG writers on a daemon thread while the run loads or compiles its
    programs and runs its trials, which release the GIL (0.3 s of a warm quick study's 3 s; docs/benchmarks.md):
    on process 0, which draws, once per process."""
    import threading

    import jax

    if _IMPORTING or jax.process_index() != 0 or "matplotlib.backends.backend_svg" in sys.modules:
        return

    def work():
        try:
            import matplotlib.backends.backend_agg  # noqa: F401
            import matplotlib.backends.backend_svg  # noqa: F401
            import matplotlib.figure  # noqa: F401
        except Exception:  # noqa: BLE001 - raised again, in full, where the figures import it
            pass

    thread = threading.Thread(target=work, name="jaxtrees-import-matplotlib", daemon=True)
    _IMPORTING.append(thread)
    thread.start()


def figures_imported() -> None:
    """Wait for :func:`import_figures`'s thread (a figure drawn, or a child forked, while it imports could
    see a half-imported module); an import error there is raised again by the figures' own imports."""
    for thread in _IMPORTING:
        thread.join()


def metadata(directory: str) -> dict:
    """``directory/metadata.json``; ValueError saying what is wrong and what to do."""
    path = os.path.join(directory, "metadata.json")
    if not os.path.exists(path):
        rebuild = (" (its rows/_config.json remains: rerun `jaxtrees run` with the same arguments to rebuild it)"
                   if os.path.exists(os.path.join(directory, "rows", "_config.json")) else "")
        raise ValueError(f"{directory} is not a results directory (no metadata.json){rebuild}; "
                         f"pass OUT/STUDY as written by `jaxtrees run`")
    try:
        with open(path, encoding="utf-8-sig") as fh:  # a byte-order mark is read past
            metadata = json.load(fh)
        metadata["config"]["study"]
        if not metadata.get("runs"):
            raise ValueError(f"{path} records no run yet; rerun `jaxtrees run` with the same arguments (it resumes)")
        metadata["runs"][-1]["environment"]
    except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
        if "records no run" in str(e):
            raise
        raise ValueError(f"cannot read {path} ({type(e).__name__}: {e}); {_rebuild_advice(directory)}") from None
    return metadata


def _rebuild_advice(directory: str) -> str:
    """What to do about a damaged metadata.json: rerun (it is rebuilt from rows/_config.json), where that remains."""
    manifest = os.path.join(directory, "rows", "_config.json")
    try:
        with open(manifest, encoding="utf-8-sig") as fh:
            json.load(fh)["config"]["study"]
    except (OSError, ValueError, KeyError, TypeError):
        return "and no readable rows/_config.json to rebuild it from: choose another --out, or delete the directory"
    return "delete that file and rerun `jaxtrees run` with the same arguments: it is rebuilt from rows/_config.json"


def spec(study) -> dict:
    """The study's generic spec (:mod:`~jaxtrees.experiments.report.generic`) but its outputs, which the rows say."""
    params = list(study.full)
    return {"name": study.name, "description": study.description.rstrip("."), "axis": None if study.axis is None else study.axis.name,
            "parameters": params, "static": [p for p in params if p in study.static],
            "meanings": {**{p: study.meaning(p) for p in params if study.meaning(p)}, **dict(study.columns)},
            "condition": study.condition, "figure": None if callable(study.plot) or study.plot is None else {
                "x": study.plot.x, "hue": list(study.plot.hue), "col": list(study.plot.col),
                "outputs": None if study.plot.outputs is None else list(study.plot.outputs)}}


def about(study, origin: dict) -> dict:
    """What metadata.json records of the study: where it came from (``origin``: ``{"builtin": NAME}``, ``{"file":
    PATH, "name": NAME}`` or ``{"module": MODULE, "name": NAME}``) and its generic spec."""
    return {"source": origin, "spec": spec(study)}


def with_outputs(spec_: dict, rows) -> dict:
    """``spec_`` with its ``outputs`` read off the rows: every column but the ids, parameters and axis; int8 ones
    (how bools are written) as "bool"."""
    from jaxtrees.experiments.study import ID_COLUMNS

    skip = {*ID_COLUMNS, *spec_["parameters"], spec_.get("axis")}
    kinds = {}
    for name in rows.names:
        if name not in skip:
            dtype = np.asarray(rows[name][:1]).dtype
            kinds[name] = "bool" if dtype in (np.int8, np.bool_) else "int" if dtype.kind in "iu" else "float"
    return {**spec_, "outputs": kinds}


def study_of(directory: str):
    """``(study or None, spec)`` of a results directory: its study imported from where metadata.json says it came
    from; None (with a note on stderr) where it cannot be, the generic figures and report then serving."""
    from jaxtrees.experiments import loading

    recorded = metadata(directory)
    config, told = recorded["config"], recorded.get("study") or {}
    source = told.get("source") or {"builtin": config["study"]}
    try:
        study = loading.from_origin(source)
    except Exception as e:  # noqa: BLE001 - any failure to import a user's code: the generic figures serve
        where = source.get("file") or source.get("module") or source.get("builtin")
        print(f"jaxtrees: note: cannot import the study {config['study']!r} from {where} ({type(e).__name__}: "
              f"{str(e)[:200]}); the generic figures and report, from its rows and metadata.json (the study's declared "
              f"invariants, if any, unchecked)", file=sys.stderr)
        fallback = {"name": config["study"], "description": "", "axis": None, "parameters": sorted(config["grid"]),
                    "static": [], "meanings": {}}
        return None, told.get("spec") or fallback
    return study, spec(study)


def check_invariants(study, rows, directory: str) -> None:
    """ValueError where the rows break one of the study's ``invariants``: which, in how many trials, the first."""
    if study is None or study.invariants is None:
        return
    try:
        holds = study.invariants(rows)
    except KeyError as e:
        raise ValueError(_lacking(directory, study.name, e)) from None
    for statement, ok in holds.items():
        ok = np.asarray(ok)
        if ok.shape != (len(rows),) or ok.dtype != bool:
            raise ValueError(f"study {study.name!r}: invariants(rows)[{statement!r}] must be a bool array of one value "
                             f"per row ({len(rows):,}), got {ok.dtype} of shape {ok.shape}")
        if not ok.all():
            bad = np.flatnonzero(~ok)
            cells, replicates = np.asarray(rows["cell"])[bad], np.asarray(rows["replicate"])[bad]
            trials = np.unique(cells.astype(np.int64) * (int(replicates.max()) + 1) + replicates).size
            raise ValueError(f"{directory}: {trials:,} trial(s) break the study's invariant {statement!r} (the first: "
                             f"cell {cells[0]}, replicate {replicates[0]}): their outputs contradict each other (a bug "
                             f"in the trial, or rows edited by hand), so no figures or report are made from them")


def by_revision(rows) -> dict:
    """Revision -> its rows, where ``rows`` (as :func:`~jaxtrees.experiments.results.read_results` returns them) come
    from more than one revision of the run's contract (a resume with ``--allow-changes``); else {}."""
    revision = getattr(rows, "revision", None)
    if revision is None:
        return {}
    return {int(r): rows.take(np.flatnonzero(revision == r)) for r in np.unique(revision)}


def revision_lines(recorded: dict, present) -> list[str]:
    """One sentence per revision in ``present``: the first contract, or what its override changed (metadata.json's
    ``revisions``)."""
    changes = {r["revision"]: r for r in recorded.get("revisions") or []}
    lines = []
    for r in sorted(present):
        if r == 0 or r not in changes:
            lines.append(f"revision {r}: the contract the directory was started with")
        else:
            lines.append(f"revision {r} (`--allow-changes`, run started {changes[r].get('started', '?')}): "
                         + "; ".join(changes[r].get("changes", [])))
    return lines


def plot_files(study, directory: str, rows=None, spec_: dict | None = None, pool: bool = False) -> list[str]:
    """The study's figures (PNG and SVG) in ``directory``: its own ``plot``, else the generic one; rows of several
    revisions of the contract (:func:`by_revision`), unless ``pool``, one figure per revision, STUDY-revision-N (the
    pooled STUDY.png and .svg removed)."""
    from jaxtrees.experiments.results import reading

    if rows is None:  # (rows given: :func:`after_run` has checked them)
        rows = reading.read_results(directory, metadata(directory)["config"])
        check_invariants(study, rows, directory)
    spec_ = spec_ or spec(study)
    stem = os.path.join(directory, spec_["name"])
    revisions = {} if pool else by_revision(rows)
    if not revisions:
        return _figures(study, directory, rows, spec_, stem)
    for old in (f"{stem}.png", f"{stem}.svg"):
        if os.path.exists(old):
            os.remove(old)
    print(f"jaxtrees: note: {directory}'s rows come from {len(revisions)} revisions of its contract (--allow-changes): "
          f"one figure per revision ({os.path.basename(stem)}-revision-N; --pool-revisions draws them as one)",
          file=sys.stderr)
    return [path for r, part in revisions.items() for path in _figures(study, directory, part, spec_,
                                                                         f"{stem}-revision-{r}")]


def _figures(study, directory: str, rows, spec_: dict, stem: str) -> list[str]:
    from jaxtrees.experiments.report import figure_spec, generic_figure

    try:
        if study is not None and callable(study.plot):
            return study.plot(rows, stem)
        layout = spec_.get("figure")  # the study's figure spec (jt.figure), recorded: it serves without the file too
        return generic_figure.plot(rows, stem, with_outputs(spec_, rows),
                                   figure=None if layout is None else figure_spec.figure(**layout))
    except KeyError as e:
        raise ValueError(_lacking(directory, spec_["name"], e)) from None
    except OSError as e:
        raise ValueError(f"cannot write the figures {spec_['name']}.png / .svg in {directory}: {e.strerror}") from None


def write_report(study, directory: str, rows=None, spec_: dict | None = None, pool: bool = False) -> str:
    """The report's text, also written to ``directory/report.md`` (a warning if it cannot be); rows of several
    revisions of the contract (:func:`by_revision`) open it with a banner naming the overrides, and (unless
    ``pool``) are reported one revision at a time."""
    from jaxtrees.experiments.results import files, reading

    recorded = metadata(directory)
    if rows is None:
        rows = reading.read_results(directory, recorded["config"])
        check_invariants(study, rows, directory)
    spec_ = spec_ or spec(study)
    done, total = reading.completeness(directory, rows)
    incomplete = "" if done == total else (
        f"**incomplete: {done} of {total} trials** (rerun `jaxtrees run` with the same arguments to resume).\n\n")
    outside = getattr(rows, "outside", 0)
    outside = (f"{outside:,} rows in rows/ lie outside the current grid (values or replicates since removed): kept, "
               f"left out here.\n\n") if outside else ""
    config = recorded["config"]
    env = recorded["runs"][-1]["environment"]
    seconds = sum(r.get("seconds", 0.0) for r in recorded["runs"])
    compiling = sum(sum(r.get("compile_seconds", {}).values()) for r in recorded["runs"])
    # programs compile ahead on background threads: the waits are what compiling added to the runs' time
    waiting = sum(sum(r.get("compile_wait_seconds", r.get("compile_seconds", {})).values()) for r in recorded["runs"])
    description = f"{spec_['description'].rstrip('.')}.\n\n" if spec_.get("description") else ""
    text = (f"# jaxtrees study `{spec_['name']}`\n\n{description}{incomplete}{outside}"
            f"Seed {config['seed']}, {config['replicates']} replicates per cell, {len(rows)} rows, "
            f"{'quick' if config['quick'] else 'full'} size; grid: "
            + ", ".join(f"{k} = {v}" for k, v in sorted(config["grid"].items()))
            + f". jaxtrees {env['jaxtrees']}, jax {env['jax']} on {env['local_device_count']} x "
              f"{env['device_kind']} ({env['backend']}); {seconds:.0f} s in all, {waiting:.0f} s of it waiting for "
              f"compiles ({compiling:.0f} s of compiling on background threads).\n\n"
            + _revised(study, directory, rows, spec_, recorded, pool) + cost_table(recorded))
    path = os.path.join(directory, "report.md")
    try:
        files.write_atomic(path, text)
    except OSError as e:
        print(f"jaxtrees: warning: cannot write {path} ({e.strerror}); the report is printed only", file=sys.stderr)
    return text


def _revised(study, directory: str, rows, spec_: dict, recorded: dict, pool: bool) -> str:
    """The study's report of the rows: one section per revision of the contract, under a banner, unless ``pool``."""
    revisions = by_revision(rows)
    if not revisions:
        return _body(study, directory, rows, spec_)
    lines = revision_lines(recorded, revisions)
    banner = (f"**Rows of {len(revisions)} revisions of the contract** (a run resumed with `--allow-changes` under "
              f"changes that can change rows, recorded as overrides in metadata.json):\n\n"
              + "".join(f"- {line} ({len(part):,} rows)\n" for line, part in zip(lines, revisions.values()))
              + ("\nThey are pooled below (`--pool-revisions`).\n\n" if pool else
                 "\nEach revision is reported apart below (`jaxtrees report --pool-revisions` pools them).\n\n"))
    if pool:
        return banner + _body(study, directory, rows, spec_)
    sections = []
    for line, part in zip(lines, revisions.values()):
        try:
            body = _body(study, directory, part, spec_)
        except Exception as e:  # noqa: BLE001 - a study's report may need rows of every cell
            body = (f"(no report from this revision's rows alone: {type(e).__name__}: {str(e)[:200]})\n")
        body = re.sub(r"^(#+ )", r"#\1", body, flags=re.MULTILINE)  # the study's headings one level down
        sections.append(f"## {line[0].upper()}{line[1:]}\n\n{len(part):,} rows.\n\n{body}")
    return banner + "\n\n".join(sections)


def _body(study, directory: str, rows, spec_: dict) -> str:
    from jaxtrees.experiments.report import generic_report

    try:
        if study is not None and study.report is not None:
            return study.report(rows)
        return generic_report.report(rows, with_outputs(spec_, rows), condition=spec_.get("condition"))
    except KeyError as e:
        raise ValueError(_lacking(directory, spec_["name"], e)) from None


def _lacking(directory: str, name: str, error: KeyError) -> str:
    return (f"{directory}: the rows lack a column the {name} study's figures and report need "
            f"({error.args[0] if error.args else error}); were they written by another version? Rerun "
            f"`jaxtrees run` into a new --out")


#: Seconds the last :func:`after_run` in this process spent after the run's last trial (scripts/bench_store.py).
LAST_POST_RUN_SECONDS = None


def after_run(study, directory: str):
    """``(rows, figure paths, report text)`` of a finished run (process 0), or None where the run is incomplete
    (said on stderr)."""
    global LAST_POST_RUN_SECONDS
    from jaxtrees.experiments.report import saving
    from jaxtrees.experiments.results import reading

    t1 = time.perf_counter()
    rows = reading.read_results(directory, metadata(directory)["config"], ordered=False)  # once, for both
    _release_arrow_memory()
    done, total = reading.completeness(directory, rows)
    if done < total:
        print(f"run incomplete ({done:,} of {total:,} trials); rerun the same command to resume ({directory})",
              file=sys.stderr)
        return None
    check_invariants(study, rows, directory)  # once, for both
    figures_imported()
    with saving.while_drawing(lambda: write_report(study, directory, rows)) as report:
        figures = plot_files(study, directory, rows)  # the report is written while its forked children draw
    text = report()
    LAST_POST_RUN_SECONDS = time.perf_counter() - t1
    return rows, figures, text


def _release_arrow_memory() -> None:
    """Hand back to the OS the memory Arrow's pool keeps from reading the parts (its buffers are freed once their
    columns are NumPy arrays; mimalloc kept ~340 MB of them at 10^7 rows, on top of the figures' and report's peak)."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()


def cost_table(metadata) -> str:
    """Markdown: per compiled program (static group) of every run, its trials, compile and run seconds, and how each
    run got it: "compiled" by XLA or "loaded" from the persistent compilation cache, with its seconds."""
    from jaxtrees.experiments.report import summary

    groups = {}
    for run in metadata["runs"]:
        env = run["environment"]
        for name, trials in run.get("trials_run", {}).items():
            g = groups.setdefault(name, {"trials": 0, "seconds": 0.0, "compile": 0.0, "how": []})
            g["trials"] += trials
            g["seconds"] += run["run_seconds"][name]
            g["compile"] += run["compile_seconds"].get(name, 0.0)
            how = run.get("compiled_or_loaded", {}).get(name)  # runs of earlier versions did not record it
            if how is not None:
                g["how"].append(f"{how} {run['compile_seconds'].get(name, 0.0):.1f} s")
            g["device"] = f"{env['local_device_count']} x {env['device_kind']}"
    if not groups:
        return ""
    static = [json.loads(name) for name in groups]
    params = sorted({k for g in static for k in g})
    varying = [k for k in params if len({json.dumps(g.get(k)) for g in static}) > 1]  # the others are in the grid line
    table = [[g.get(k, "") for k in varying]
             + [v["trials"], f"{v['compile']:.1f}", ", ".join(v["how"]) or "-", f"{v['seconds']:.1f}",
                f"{v['trials'] / v['seconds']:,.3g}" if v["seconds"] > 0 else "-", v["device"]]
             for g, v in zip(static, groups.values())]
    return ("\n\n### Cost per compiled program\n\nOne program per combination of the static parameters (a study's "
            "branches share one); "
            "seconds summed over the runs (wall time on the host; a program compiles on a background thread while "
            "earlier ones run, so compile s overlap other rows' run s; trials are run in whole "
            "vmapped groups, so a program with fewer trials than a group pays for a full group). Each run either "
            "compiled a program (on a background thread or in a worker process) or loaded it from the cache "
            "(`JAXTREES_CACHE_DIR`: a program it saved is loaded without tracing).\n\n"
            + summary.markdown_table([*varying, "trials", "compile s", "compiled / loaded", "run s", "trials/s", "device"],
                                     table) + "\n")
