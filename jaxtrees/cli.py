"""Command line: ``jaxtrees list [--learners] | run | plot | report | export | convert``; STUDY is a built-in name or a
user's file ``study.py[:NAME]`` (or ``package.module:NAME``); ``jaxtrees run STUDY --help`` lists the
study's parameters (meaning, quick and full values, static or traced) and its sizes.

Exit codes: 0 success, 2 bad input (unknown study or parameter, value out of range, a results
directory of another configuration), 1 anything unexpected. Before JAX starts, ``run`` sets up one CPU device per
core and 512-bit vectors on a CPU with AVX-512 (:mod:`jaxtrees.core.platform`), the processes of a distributed run
(:mod:`~jaxtrees.experiments.run.distributed`) and JAX's persistent compilation cache (:mod:`~jaxtrees.experiments.api`,
which runs a study from Python the same way); figures and reports: :mod:`~jaxtrees.experiments.reporting`.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import signal
import sys
import time
import traceback

from jaxtrees.cli_help import study_help
from jaxtrees.core.platform import split_cpu, wide_vectors


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="jaxtrees", description="Monte Carlo studies of decision-tree learning "
                                 "on product distributions over {0,1}^n.")
    sub = ap.add_subparsers(dest="command", required=True)
    listing = sub.add_parser("list", help="list the built-in studies (or the learners)",
                             description="List the built-in studies.", epilog=STUDY_HELP)
    listing.add_argument("--learners", action="store_true",
                         help="list the registered learners: access, the Size fields each reads, cost")
    listing.add_argument("files", nargs="*", metavar="STUDY_FILE",
                         help="with --learners: study files whose own learners (jt.learners.register) to list too")

    run = sub.add_parser("run", help="run (or resume) a study, then plot and report it", add_help=False,
                         description="Run a study (built-in, or your own file) into OUT/STUDY/ (rows/*.parquet, metadata.json, "
                                     "STUDY.png/.svg, report.md). Rerunning the same command resumes. "
                                     + STUDY_HELP)
    run.add_argument("-h", "--help", action=_RunHelp, help="show this help and, after STUDY, the study's parameters")
    run.add_argument("study", help="a study name from `jaxtrees list`, a file path/to/study.py (its one study) or "
                                   "study.py:NAME, or package.module:NAME")
    run.add_argument("--quick", action="store_true", help="the small size (about a minute on a laptop CPU)")
    run.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                     help="override a parameter: one value or a comma-separated list (a grid); also replicates=N")
    run.add_argument("--config", help="a JSON file of parameter overrides (NAME: value or list; replicates; seed)")
    run.add_argument("--out", default="results", help="output directory (default: results)")
    run.add_argument("--seed", type=int, default=None, help="root seed (default 0)")
    run.add_argument("--chunk", type=int, default=None, help="trials per compiled call (results do not depend on it)")
    run.add_argument("--group", type=int, default=None,
                     help="trials vmapped together per device (default: 32 on a CPU, 1024 on a GPU or TPU)")
    run.add_argument("--no-progress", action="store_true", help="no progress line on stderr")
    run.add_argument("--debug", action="store_true",
                     help="on an error, the full traceback too (e.g. of an exception inside your study's trial)")
    run.add_argument("--allow-changes", action="store_true",
                     help="resume although settings that can change rows differ from the recorded ones (group, "
                          "XLA_FLAGS, versions, ...); the run records them as overrides")
    hosts = run.add_argument_group("several processes (jax.distributed; each takes every P-th trial)")
    hosts.add_argument("--distributed", action="store_true",
                       help="find the coordinator, P and this process's index as JAX does under SLURM, Open MPI "
                            "and on Cloud TPU pods")
    hosts.add_argument("--coordinator", metavar="HOST:PORT", help="elsewhere: process 0's address ...")
    hosts.add_argument("--num-processes", type=int, metavar="P", help="... the number of processes ...")
    hosts.add_argument("--process-id", type=int, metavar="I", help="... and this one's index, 0 <= I < P")
    hosts.add_argument("--distributed-timeout", type=int, default=60, metavar="S",
                       help="seconds to wait for the coordinator and every process, and after which a silent "
                            "process counts as dead (default 60)")

    for name, text in (("plot", "figures (PNG and SVG) from a results directory"),
                       ("report", "a markdown report with the key numbers")):
        p = sub.add_parser(name, help=text, description=f"Make {text} (OUT/STUDY written by `jaxtrees run`).")
        p.add_argument("results", help="the study's results directory, e.g. results/juntas")
        p.add_argument("--pool-revisions", action="store_true",
                       help="pool the rows of every revision of the run's contract (runs resumed with "
                            "--allow-changes); by default each revision is shown apart")
    export = sub.add_parser("export", help="write a results directory's rows as one CSV file",
                            description="Write the rows of OUT/STUDY as one tidy CSV (sorted by cell and replicate), "
                                        "read as jaxtrees.experiments.results.read_results('OUT/STUDY') reads them: each "
                                        "part's checksums verified, every trial's rows there once. The rows themselves "
                                        "are Parquet: pandas.read_parquet('OUT/STUDY/rows') reads them too, but verifies "
                                        "no checksum or trial, and pools the rows of every contract revision "
                                        "(--allow-changes).")
    export.add_argument("results", help="the study's results directory, e.g. results/juntas")
    export.add_argument("--csv", metavar="PATH", nargs="?", const="", default="",
                        help="the CSV file to write (default: OUT/STUDY/results.csv; -: standard output)")
    export.add_argument("--partial", action="store_true", help="export an unfinished run's trials (else refused)")
    convert = sub.add_parser("convert", help="convert a results directory of an earlier version (CSV) to Parquet",
                             description="Rewrite the CSV rows (parts/*.csv, results.csv) of an earlier jaxtrees' "
                                         "results directory as Parquet rows/; `jaxtrees run` then resumes into it.")
    convert.add_argument("results", help="the study's results directory, e.g. results/juntas")

    try:
        args = ap.parse_args(argv)
    except BrokenPipeError:  # `jaxtrees run STUDY --help | head -1`: the reader has gone, nothing is wrong
        return _closed_pipe()
    try:
        return _COMMANDS[args.command](args)
    except BrokenPipeError:
        return _closed_pipe()
    except ValueError as e:
        if getattr(args, "debug", False):
            traceback.print_exception(e)
        print(f"jaxtrees {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        again = " (rerun the same command to resume: every part written is whole)" if args.command == "run" else ""
        print(f"jaxtrees {args.command}: interrupted{again}", file=sys.stderr)
        return 128 + getattr(e, "signal", signal.SIGINT)  # 130 for Ctrl-C, 143 for SIGTERM, as a shell reports
    except OSError as e:
        if e.errno not in (errno.ENOSPC, errno.EDQUOT):
            print(f"jaxtrees {args.command}: error: {_os_error(e)}", file=sys.stderr)
            return 1
        where = f" ({e.filename})" if e.filename else ""
        again = "; free some space and rerun the same command to resume (the parts written are whole)" \
            if args.command == "run" else "; free some space and retry"
        print(f"jaxtrees {args.command}: error: the disk is full{where}{again}", file=sys.stderr)
        return 1
    except Exception as e:  # noqa: BLE001 - XLA's out-of-memory error or a dead compile worker, re-raised otherwise
        if type(e).__name__ == "WorkerDied":
            print(f"jaxtrees {args.command}: error: {e}{_address_space()}", file=sys.stderr)
            return 1
        if isinstance(e, ImportError) and "failed to map segment" in str(e):  # a library's turn to be loaded
            print(f"jaxtrees {args.command}: error: out of memory while loading a library ({e}){_address_space()}",
                  file=sys.stderr)
            return 1
        if isinstance(e, MemoryError) or (isinstance(e, RuntimeError) and "can't start new thread" in str(e)):
            e = RuntimeError(f"RESOURCE_EXHAUSTED: {type(e).__name__}: {e}{_address_space()}")
        if "RESOURCE_EXHAUSTED" not in str(e):
            raise
        print(f"jaxtrees {args.command}: error: out of device or host memory ({str(e).splitlines()[0][:200]}); "
              f"rerun with a smaller --group (trials vmapped together) or --chunk (trials per call): the parts "
              f"written are kept and the run resumes", file=sys.stderr)
        return 1


def console() -> None:
    """The ``jaxtrees`` command: :func:`main`, then :func:`exit_now` with its exit code."""
    exit_now(main())


def exit_now(code: int) -> None:
    """End the process with ``code``: the ``atexit`` handlers run and stdout / stderr are flushed, then ``os._exit``
    skips the interpreter's teardown of its modules and of JAX's client (0.3-0.4 s after a study; docs/benchmarks.md).
    A plain ``sys.exit`` where that teardown may matter: a tracer or profiler is set (coverage, cProfile), a
    non-daemon thread is alive, ``atexit`` cannot be run by hand, or ``JAXTREES_FAST_EXIT=0``."""
    import atexit
    import threading

    others = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon and t.is_alive()]
    run_handlers = getattr(atexit, "_run_exitfuncs", None)
    if (os.environ.get("JAXTREES_FAST_EXIT", "1") == "0" or sys.gettrace() is not None
            or sys.getprofile() is not None or others or run_handlers is None):
        sys.exit(code)
    writer = sys.modules.get("jaxtrees.experiments.results.writer")  # imported where a run began
    if writer is not None:
        writer.ending_now()
    run_handlers()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more can reach it
            pass
    os._exit(code)


def _address_space() -> str:
    """"; address space limited to N MB (ulimit -v)" where it is, else ""."""
    from jaxtrees.experiments.run.workers import address_limit

    limit = address_limit()
    return "" if limit is None else f"; address space limited to {limit // 2**20:,} MB (ulimit -v)"


def _os_error(e: OSError) -> str:
    """An OSError in one clause: what failed, on which file."""
    where = f" ({e.filename})" if e.filename else ""
    return f"{e.strerror or e}{where}; check the path and its permissions"


def _closed_pipe() -> int:
    """stdout's reader closed it (``| head``): exit quietly, as a Unix tool does."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass
    return 0


#: Where a study's parameters are listed (``jaxtrees list`` and ``jaxtrees run --help`` say it).
STUDY_HELP = ("`jaxtrees run STUDY --help` lists STUDY's parameters (meaning, quick and full values, static or "
              "traced) and its size (trials, compiled programs).")


def _list(args) -> int:
    if args.files and not args.learners:
        raise ValueError("jaxtrees list STUDY_FILE lists a file's learners: add --learners (`jaxtrees run FILE --help` "
                         "lists its study's parameters)")
    if args.learners:
        from jaxtrees import learners
        from jaxtrees.experiments import loading

        for path in args.files:  # importing a study file registers its learners
            loading.load(path)
        print(learners.describe())
        return 0
    from jaxtrees.experiments.studies import STUDIES

    width = max(map(len, STUDIES))
    for name, study in STUDIES.items():
        print(f"{name:{width}s}  {study.description}")
    print(f"\n{STUDY_HELP} Your own study: `jaxtrees run path/to/study.py` (docs/studies.md).")
    return 0


class _RunHelp(argparse.Action):
    """``run``'s -h / --help: the usual options, then, when STUDY came before it, the study's parameters."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        parser.print_help()
        name = getattr(namespace, "study", None)
        if name is None:
            parser.exit()
        from jaxtrees.experiments import loading

        try:
            study = loading.load(name)[0]
        except ValueError as e:
            parser.exit(2, f"\njaxtrees run: error: {e}\n")
        print(f"\n{study_help(study)}")
        parser.exit()


def _run(args) -> int:
    split_cpu()
    wide_vectors()
    from jaxtrees.experiments import api
    from jaxtrees.experiments.run import distributed

    distributed.initialize(args)
    api.backend()
    api.compilation_cache()
    import jax

    from jaxtrees.experiments.run import programs

    with programs.prefetched(_invocation(args), jax.local_devices() if jax.process_count() == 1 else None):
        return _run_study(args)


def _invocation(args) -> str:
    """What decides a run's programs on the command line: its study and parameters (the program cache's
    :func:`~jaxtrees.experiments.run.programs.prefetched` loads the programs its last run used)."""
    config = None
    if args.config:
        import hashlib

        try:
            with open(args.config, "rb") as fh:
                config = hashlib.sha256(fh.read()).hexdigest()
        except OSError:
            pass
    return json.dumps({"study": args.study, "quick": args.quick, "set": args.set, "config": config, "seed": args.seed,
                       "chunk": args.chunk, "group": args.group}, sort_keys=True)


def _run_study(args) -> int:
    from jaxtrees.experiments import api
    from jaxtrees.experiments.run import runner
    from jaxtrees.experiments.study.probe import probe

    study, origin = api.resolve(args.study)
    given = {}
    for item in args.set:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"--set needs NAME=VALUE, got {item!r}")
        name = name.strip()
        if name in given:
            raise ValueError(f"--set {name} is given twice ({name}={given[name]} and {name}={value}); give it once, "
                             f"with a comma-separated list for a grid (--set {name}={given[name]},{value})")
        given[name] = value
    overrides, seed = api.overrides_of(given, args.config, args.seed)
    config = runner.configure(study, quick=args.quick, overrides=overrides, seed=seed,
                              called=args.study if "builtin" not in origin else None)
    probe(study, config)  # before anything is written: a fault of the trial or its grid is one sentence
    t0 = time.perf_counter()
    directory = api.execute(study, origin, config, args.out, chunk=args.chunk, group=args.group,
                            progress=not args.no_progress, allow_changes=args.allow_changes)
    return _after_run(study, directory, t0)


def _after_run(study, directory: str, t0: float) -> int:
    """Figures and report from a finished run's rows (process 0), or why there are none."""
    import jax

    from jaxtrees.experiments import reporting

    if jax.process_index() != 0:
        print(f"process {jax.process_index()}: its trials are in {directory}/rows; process 0 writes the figures and report")
        return 0
    done = reporting.after_run(study, directory)
    if done is None:
        return 1
    rows, figures, text = done
    print(text)
    print(f"wrote {os.path.join(directory, 'rows')} ({len(rows):,} rows), {', '.join(figures)} and "
          f"{os.path.join(directory, 'report.md')} in {time.perf_counter() - t0:.0f} s "
          f"({reporting.LAST_POST_RUN_SECONDS:.1f} s after the trials)")
    return 0


def _plot(args) -> int:
    from jaxtrees.experiments import reporting

    study, spec = reporting.study_of(args.results)
    for path in reporting.plot_files(study, args.results, spec_=spec, pool=args.pool_revisions):
        print(path)
    return 0


def _report(args) -> int:
    from jaxtrees.experiments import reporting

    study, spec = reporting.study_of(args.results)
    print(reporting.write_report(study, args.results, spec_=spec, pool=args.pool_revisions))
    return 0


def _export(args) -> int:
    from jaxtrees.experiments import reporting
    from jaxtrees.experiments.results import export_csv

    reporting.metadata(args.results)
    folder = os.path.dirname(os.path.abspath(args.csv)) if args.csv and args.csv != "-" else None
    if folder and not os.path.isdir(folder):
        raise ValueError(f"--csv {args.csv}: the directory {folder} does not exist; create it or choose another path")
    path = export_csv(args.results, args.csv or None, partial=args.partial)
    if path != "-":
        print(path)
    return 0


def _convert(args) -> int:
    from jaxtrees.experiments import convert

    print(convert.convert(args.results))
    return 0


_COMMANDS = {"list": _list, "run": _run, "plot": _plot, "report": _report, "export": _export, "convert": _convert}


if __name__ == "__main__":
    console()
