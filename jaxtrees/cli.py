"""Command line: ``jaxtrees list | run | plot | report | export | convert``; ``jaxtrees run STUDY --help`` lists the
study's parameters (meaning, quick and full values, static or traced) and its sizes.

Exit codes: 0 success, 2 bad input (unknown study or parameter, value out of range, a results
directory of another configuration), 1 anything unexpected. Before JAX starts, ``run`` sets up JAX's persistent
compilation cache (:func:`_compilation_cache`), one CPU device per core and 512-bit vectors on a CPU with AVX-512
(:mod:`jaxtrees.core.platform`: ``split_cpu``, ``wide_vectors``); the measured effect of each is in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import sys
import time

from jaxtrees.core.platform import split_cpu, wide_vectors


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="jaxtrees", description="Monte Carlo studies of decision-tree learning "
                                 "on product distributions over {0,1}^n.")
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list the built-in studies", description="List the built-in studies.",
                   epilog=STUDY_HELP)

    run = sub.add_parser("run", help="run (or resume) a study, then plot and report it", add_help=False,
                         description="Run a built-in study into OUT/STUDY/ (rows/*.parquet, metadata.json, "
                                     "STUDY.png/.svg, report.md). Rerunning the same command resumes. "
                                     + STUDY_HELP)
    run.add_argument("-h", "--help", action=_RunHelp, help="show this help and, after STUDY, the study's parameters")
    run.add_argument("study", help="a study name from `jaxtrees list`")
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
    run.add_argument("--allow-changes", action="store_true",
                     help="resume although settings that can change rows differ from the recorded ones (group, "
                          "XLA_FLAGS, versions, ...); the run records them as overrides")
    hosts = run.add_argument_group("several processes (jax.distributed; each takes every P-th trial)")
    hosts.add_argument("--distributed", action="store_true",
                       help="call jax.distributed.initialize(), which finds the processes itself under SLURM, "
                            "Open MPI and on Cloud TPU pods")
    hosts.add_argument("--coordinator", metavar="HOST:PORT", help="elsewhere: process 0's address ...")
    hosts.add_argument("--num-processes", type=int, metavar="P", help="... the number of processes ...")
    hosts.add_argument("--process-id", type=int, metavar="I", help="... and this one's index, 0 <= I < P")
    hosts.add_argument("--distributed-timeout", type=int, default=60, metavar="S",
                       help="seconds to wait for the coordinator and every process (default 60)")

    for name, text in (("plot", "figures (PNG and SVG) from a results directory"),
                       ("report", "a markdown report with the key numbers")):
        p = sub.add_parser(name, help=text, description=f"Make {text} (OUT/STUDY written by `jaxtrees run`).")
        p.add_argument("results", help="the study's results directory, e.g. results/juntas")
    export = sub.add_parser("export", help="write a results directory's rows as one CSV file",
                            description="Write the rows of OUT/STUDY as one tidy CSV (sorted by cell and replicate). "
                                        "The rows themselves are Parquet: pandas.read_parquet('OUT/STUDY/rows') reads them.")
    export.add_argument("results", help="the study's results directory, e.g. results/juntas")
    export.add_argument("--csv", metavar="PATH", nargs="?", const="", default="",
                        help="the CSV file to write (default: OUT/STUDY/results.csv)")
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
        print(f"jaxtrees {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        again = " (rerun the same command to resume: every part written is whole)" if args.command == "run" else ""
        print(f"jaxtrees {args.command}: interrupted{again}", file=sys.stderr)
        return 130
    except OSError as e:
        if e.errno not in (errno.ENOSPC, errno.EDQUOT):
            print(f"jaxtrees {args.command}: error: {_os_error(e)}", file=sys.stderr)
            return 1
        where = f" ({e.filename})" if e.filename else ""
        again = "; free some space and rerun the same command to resume (the parts written are whole)" \
            if args.command == "run" else "; free some space and retry"
        print(f"jaxtrees {args.command}: error: the disk is full{where}{again}", file=sys.stderr)
        return 1
    except Exception as e:  # noqa: BLE001 - XLA's out-of-memory error, re-raised as is otherwise
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
    run_handlers()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more can reach it
            pass
    os._exit(code)


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
    from jaxtrees.experiments.studies import STUDIES

    width = max(map(len, STUDIES))
    for name, study in STUDIES.items():
        print(f"{name:{width}s}  {study.description}")
    print(f"\n{STUDY_HELP}")
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
        from jaxtrees.experiments import studies

        try:
            study = studies.get(name)
        except ValueError as e:
            parser.exit(2, f"\njaxtrees run: error: {e}\n")
        print(f"\n{study_help(study)}")
        parser.exit()


def study_help(study) -> str:
    """A study's parameters (meaning, quick and full values, static or traced) and its sizes."""
    lines = [*_wrapped(f"study {study.name}: {study.description}", 2, first=0), "",
             "parameters (--set NAME=VALUE, or NAME=V1,V2,... for a grid; or a JSON --config):"]
    width = max(map(len, [*study.full, "replicates"])) + 4
    for name in study.full:
        meaning = study.meaning(name)
        lines += _wrapped(f"{name:{width - 2}s}{_compiled_as(study, name)}", width)
        lines += _wrapped(meaning, width, first=width) if meaning else []
        lines += _quick_full(_values(study.quick[name]), _values(study.full[name]), width)
    lines += _wrapped(f"{'replicates':{width - 2}s}trials per cell", width)
    lines += _quick_full(study.replicates[0], study.replicates[1], width)
    lines += ["", "size (cells x replicates; one compiled program per combination of the static parameters):"]
    lines += [f"  {label}: {_size(study, quick)}" for label, quick in (("--quick", True), ("full", False))]
    return "\n".join(lines)


def _compiled_as(study, name) -> str:
    """Whether parameter ``name`` is static (a program per value) or traced, and how."""
    if name in study.branches:
        return "static: each value is a branch of one program (a lax.switch), compiled with the others"
    if name in study.static:
        return "static: each value compiles its own program"
    choices = study.choices.get(name)
    allowed = f"; one of {', '.join(choices)}" if choices else ""
    if name in study.bounds:
        return f"traced{allowed}: one program serves every value up to the largest"
    if name in study.buckets:
        groups: dict = {}
        for value in choices:
            groups.setdefault(study.buckets[name](value), []).append(value)
        return f"traced{allowed}: one program per group of {' | '.join(', '.join(g) for g in groups.values())}"
    return f"traced{allowed}"


def _quick_full(quick, full, indent: int) -> list:
    """A parameter's quick and full values: on one line where they fit, else a line (or more) each."""
    line = f"quick: {quick}    full: {full}"
    if indent + len(line) <= 100:
        return [" " * indent + line]
    return _wrapped(f"quick: {quick}", indent + 7, first=indent) + _wrapped(f"full:  {full}", indent + 7, first=indent)


def _values(value) -> str:
    """A grid's values, comma-separated (``--set NAME=`` takes them without the spaces)."""
    return ", ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


def _wrapped(text: str, indent: int, first: int = 2) -> list:
    """``text`` in lines of at most 100 characters: the first indented by ``first``, the rest by ``indent``."""
    import textwrap

    return textwrap.wrap(text, width=100, initial_indent=" " * first, subsequent_indent=" " * indent,
                         break_on_hyphens=False, break_long_words=False)


def _size(study, quick: bool) -> str:
    """Cells, replicates, trials and compiled programs of a study's quick or full size."""
    from jaxtrees.experiments.study import configure

    try:
        config = configure(study, quick=quick)
        programs = len(study.programs(config))
    except ValueError as e:
        return f"cannot be resolved ({e})"
    cells = len(config.cells())
    return (f"{cells:,} cell{'s' * (cells != 1)} x {config.replicates:,} = {config.trials:,} trials, "
            f"{programs:,} compiled program{'s' * (programs != 1)}")


def _run(args) -> int:
    split_cpu()
    wide_vectors()
    _initialize_distributed(args)
    _backend()
    _compilation_cache()
    import jax

    from jaxtrees.experiments import cache

    with cache.prefetched(_invocation(args), jax.local_devices() if jax.process_count() == 1 else None):
        return _run_study(args)


def _invocation(args) -> str:
    """What decides a run's programs on the command line: its study and parameters (the program cache's
    :func:`~jaxtrees.experiments.cache.prefetched` loads the programs its last run used)."""
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
    from jaxtrees.experiments import runner, studies

    study = studies.get(args.study)
    overrides, seed = {}, 0
    if args.config:
        try:
            with open(args.config) as fh:
                overrides = json.load(fh)
        except (OSError, json.JSONDecodeError) as e:
            raise ValueError(f"--config {args.config}: {e}") from None
        if not isinstance(overrides, dict):
            raise ValueError(f"--config {args.config} must hold a JSON object of parameter overrides")
        seed = overrides.pop("seed", seed)
    if not args.out.strip():
        raise ValueError("--out must name a directory (default: results), got an empty value")
    given = {}
    for item in args.set:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"--set needs NAME=VALUE, got {item!r}")
        name = name.strip()
        if name in given:
            raise ValueError(f"--set {name} is given twice ({name}={given[name]} and {name}={value}); give it once, "
                             f"with a comma-separated list for a grid (--set {name}={given[name]},{value})")
        given[name] = overrides[name] = value
    if args.seed is not None:
        seed = args.seed
    config = runner.configure(study, quick=args.quick, overrides=overrides, seed=seed)
    t0 = time.perf_counter()
    _import_figures()
    directory = runner.run(study, config, args.out, chunk=args.chunk, group=args.group,
                           progress=not args.no_progress, allow_changes=args.allow_changes)
    return _after_run(study, directory, t0)


#: The thread importing matplotlib beside a run (:func:`_import_figures`), joined before the figures are drawn.
_FIGURES_IMPORT: list = []


def _import_figures() -> None:
    """Import matplotlib's figure and its PNG and SVG writers on a daemon thread while the run loads or compiles its
    programs and runs its trials, which release the GIL (0.3 s of a warm quick study's 3 s; docs/benchmarks.md):
    on process 0, which draws, once per process."""
    import threading

    import jax

    if _FIGURES_IMPORT or jax.process_index() != 0 or "matplotlib.backends.backend_svg" in sys.modules:
        return

    def work():
        try:
            import matplotlib.backends.backend_agg  # noqa: F401
            import matplotlib.backends.backend_svg  # noqa: F401
            import matplotlib.figure  # noqa: F401
        except Exception:  # noqa: BLE001 - raised again, in full, where the figures import it
            pass

    thread = threading.Thread(target=work, name="jaxtrees-import-matplotlib", daemon=True)
    _FIGURES_IMPORT.append(thread)
    thread.start()


def _figures_imported() -> None:
    """Wait for :func:`_import_figures`'s thread (a figure drawn, or a child forked, while it imports could
    see a half-imported module); an import error there is raised again by the figures' own imports."""
    for thread in _FIGURES_IMPORT:
        thread.join()


#: Seconds the last ``jaxtrees run`` in this process spent after its last trial (scripts/bench_store.py).
LAST_POST_RUN_SECONDS = None


def _after_run(study, directory: str, t0: float) -> int:
    """Figures and report from a finished run's rows (process 0), or why there are none."""
    global LAST_POST_RUN_SECONDS
    import jax

    if jax.process_index() != 0:
        print(f"process {jax.process_index()}: its trials are in {directory}/rows; process 0 writes the figures and report")
        return 0
    from jaxtrees.experiments import store

    metadata = _metadata(directory)
    t1 = time.perf_counter()
    rows = store.read_results(directory, metadata["config"], ordered=False)  # read once, for the figures and the report
    done, total = store.completeness(directory, rows)
    if done < total:
        print(f"run incomplete ({done:,} of {total:,} trials); rerun the same command to resume ({directory})",
              file=sys.stderr)
        return 1
    _figures_imported()
    figures = _plot_files(study, directory, rows)
    print(_write_report(study, directory, rows))
    LAST_POST_RUN_SECONDS = time.perf_counter() - t1
    print(f"wrote {os.path.join(directory, 'rows')} ({len(rows):,} rows), {', '.join(figures)} and "
          f"{os.path.join(directory, 'report.md')} in {time.perf_counter() - t0:.0f} s "
          f"({LAST_POST_RUN_SECONDS:.1f} s after the trials)")
    return 0


def _initialize_distributed(args):
    """``jax.distributed.initialize`` before any JAX computation, when asked for."""
    explicit = (args.coordinator, args.num_processes, args.process_id)
    if not args.distributed and all(v is None for v in explicit):
        return
    if any(v is None for v in explicit) and any(v is not None for v in explicit):
        raise ValueError("--coordinator, --num-processes and --process-id go together (or use --distributed alone)")
    if args.num_processes is not None:
        if args.num_processes < 1:
            raise ValueError(f"--num-processes must be >= 1, got {args.num_processes}")
        if not 0 <= args.process_id < args.num_processes:
            raise ValueError(f"--process-id must be in [0, {args.num_processes - 1}], got {args.process_id}")
    timeout = args.distributed_timeout
    if timeout < 1:
        raise ValueError(f"--distributed-timeout must be >= 1 second, got {timeout}")
    if args.num_processes is not None and args.num_processes > 1:
        _rendezvous(args.coordinator, args.num_processes, args.process_id, timeout)
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")  # CPU processes (no effect on GPU / TPU)
    where = f" at {args.coordinator}" if args.coordinator else ""
    try:
        jax.distributed.initialize(*explicit, initialization_timeout=timeout)
    except ValueError as e:
        if args.distributed and "coordinator" in str(e):
            raise ValueError("--distributed found no cluster to join (it reads SLURM, Open MPI and Cloud TPU settings); "
                             "elsewhere give --coordinator HOST:PORT --num-processes P --process-id I") from None
        raise
    except Exception as e:  # noqa: BLE001 - the coordination service's errors
        raise ValueError(f"process {args.process_id} could not join the run{where} within {timeout} s ({e}); check "
                         f"that every process was started with the same --coordinator and --num-processes and its "
                         f"own --process-id, and that HOST:PORT is reachable from each") from None


#: The first line a process sends process 0 in :func:`_rendezvous` (then P and its id).
HELLO = "jaxtrees-rendezvous"


def _rendezvous(address: str, processes: int, process_id: int, timeout: float) -> None:
    """Meet every process at ``address`` before ``jax.distributed.initialize``; ValueError after ``timeout`` s.

    XLA's coordination client ends the process with a C++ abort (SIGABRT, DEADLINE_EXCEEDED) when a peer has not
    registered within the timeout, which Python cannot catch. So process 0 first listens on HOST:PORT itself, the
    others connect and say P and their id; when all are there it says "go", closes the port, and each calls
    ``initialize`` (whose client retries until process 0's coordination service takes the port over)."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"--coordinator must be HOST:PORT, got {address!r}")
    deadline = time.monotonic() + timeout
    if process_id == 0:
        _gather(int(port), address, processes, timeout, deadline)
    else:
        _join(host.strip("[]"), int(port), address, processes, process_id, timeout, deadline)


def _gather(port: int, address: str, processes: int, timeout: float, deadline: float) -> None:
    """Process 0's side of :func:`_rendezvous`: accept the P - 1 others, then tell each to go."""
    import socket

    try:
        server = (socket.create_server(("", port), family=socket.AF_INET6, dualstack_ipv6=True)
                  if socket.has_dualstack_ipv6() else socket.create_server(("", port)))
    except OSError as e:
        raise ValueError(f"process 0 cannot serve the coordinator on port {port} of --coordinator {address} "
                         f"({e.strerror or e}); choose a free port and give every process the same one") from None
    peers: dict = {}
    try:
        with server:
            while len(peers) < processes - 1:
                left = deadline - time.monotonic()
                if left <= 0:
                    missing = sorted(set(range(1, processes)) - set(peers))
                    raise ValueError(
                        f"process 0: process(es) {', '.join(map(str, missing))} of {processes} did not join at "
                        f"{address} within {timeout:g} s (--distributed-timeout); start each with --coordinator "
                        f"{address} --num-processes {processes} and its own --process-id, on hosts that can reach "
                        f"this one")
                server.settimeout(left)
                try:
                    conn, _ = server.accept()
                except TimeoutError:
                    continue
                conn.settimeout(max(0.1, min(5.0, deadline - time.monotonic())))
                try:
                    words = conn.makefile("r").readline().split()
                except OSError:
                    conn.close()
                    continue
                if len(words) != 3 or words[0] != HELLO or not words[1].isdigit() or not words[2].isdigit():
                    conn.close()  # not one of ours (a port scanner, a health check)
                    continue
                theirs, pid = int(words[1]), int(words[2])
                problem = (f"process {pid} was started with --num-processes {theirs}, process 0 with {processes}"
                           if theirs != processes else
                           f"two processes were started with --process-id {pid}" if pid in peers or pid == 0 else "")
                if problem:
                    _say(conn, f"refused {problem}")
                    raise ValueError(f"process 0 at {address}: {problem}; give every process the same "
                                     f"--num-processes and each its own --process-id")
                peers[pid] = conn
            for conn in peers.values():
                _say(conn, "go")
            for conn in peers.values():  # the peers close first, so that the port is free for the coordinator
                try:
                    conn.settimeout(5.0)
                    conn.recv(1)
                except OSError:
                    pass
    finally:
        for conn in peers.values():
            conn.close()


def _join(host: str, port: int, address: str, processes: int, process_id: int, timeout: float,
          deadline: float) -> None:
    """Process I's side of :func:`_rendezvous`: reach process 0, say who it is, wait for "go"."""
    import socket

    while True:
        try:
            with socket.create_connection((host, port), timeout=2) as conn:
                conn.sendall(f"{HELLO} {processes} {process_id}\n".encode())
                conn.settimeout(max(0.1, deadline - time.monotonic()))
                try:
                    reply = conn.makefile("r").readline().strip()
                except TimeoutError:
                    raise ValueError(f"process {process_id}: the coordinator at {address} is up but not every process "
                                     f"joined within {timeout:g} s (--distributed-timeout); start the others with "
                                     f"the same --coordinator and --num-processes {processes}") from None
            if reply == "go":
                return
            if reply.startswith("refused "):
                raise ValueError(f"process {process_id}: the coordinator at {address} refused it: "
                                 f"{reply.removeprefix('refused ')}")
            raise ValueError(f"process {process_id}: the coordinator at {address} gave up waiting for the other "
                             f"processes (see process 0's message)" if not reply else
                             f"process {process_id}: {address} answered {reply[:60]!r}, not a jaxtrees process 0; "
                             f"check the address")
        except OSError as e:
            if time.monotonic() >= deadline:
                raise ValueError(f"process {process_id}: no coordinator at {address} after {timeout:g} s "
                                 f"({e.strerror or e}); start process 0 with --coordinator {address} on that host "
                                 f"(it serves the coordinator), or check the address and that the port is "
                                 f"reachable") from None
            time.sleep(0.5)


def _say(conn, line: str) -> None:
    """Send one line to a peer, ignoring a peer that has gone."""
    try:
        conn.sendall(f"{line}\n".encode())
    except OSError:
        pass


def _plot(args) -> int:
    study, directory = _study_of(args.results)
    for path in _plot_files(study, directory):
        print(path)
    return 0


def _report(args) -> int:
    study, directory = _study_of(args.results)
    print(_write_report(study, directory))
    return 0


def _export(args) -> int:
    from jaxtrees.experiments import store

    _metadata(args.results)
    folder = os.path.dirname(os.path.abspath(args.csv)) if args.csv else None
    if folder and not os.path.isdir(folder):
        raise ValueError(f"--csv {args.csv}: the directory {folder} does not exist; create it or choose another path")
    print(store.export_csv(args.results, args.csv or None))
    return 0


def _convert(args) -> int:
    from jaxtrees.experiments import legacy

    print(legacy.convert(args.results))
    return 0


def _study_of(directory: str):
    from jaxtrees.experiments import studies

    return studies.get(_metadata(directory)["config"]["study"]), directory


def _metadata(directory: str) -> dict:
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
    except ValueError as e:
        if "records no run" in str(e):
            raise
        raise ValueError(f"cannot read {path} ({type(e).__name__}: {e}); delete that file and rerun `jaxtrees run` "
                         f"with the same arguments: it is rebuilt from rows/_config.json") from None
    except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
        raise ValueError(f"cannot read {path} ({type(e).__name__}: {e}); delete that file and rerun `jaxtrees run` "
                         f"with the same arguments: it is rebuilt from rows/_config.json") from None
    return metadata


def _plot_files(study, directory, rows=None):
    from jaxtrees.experiments import store

    if rows is None:
        rows = store.read_results(directory, _metadata(directory)["config"])
    try:
        return study.plot(rows, os.path.join(directory, study.name))
    except KeyError as e:
        raise ValueError(_lacking(directory, study, e)) from None
    except OSError as e:
        raise ValueError(f"cannot write the figures {study.name}.png / .svg in {directory}: {e.strerror}") from None


def _write_report(study, directory, rows=None) -> str:
    """The report's text, also written to ``directory/report.md`` (a warning if it cannot be)."""
    from jaxtrees.experiments import store

    metadata = _metadata(directory)
    if rows is None:
        rows = store.read_results(directory, metadata["config"])
    done, total = store.completeness(directory, rows)
    incomplete = "" if done == total else (
        f"**incomplete: {done} of {total} trials** (rerun `jaxtrees run` with the same arguments to resume).\n\n")
    config = metadata["config"]
    env = metadata["runs"][-1]["environment"]
    seconds = sum(r.get("seconds", 0.0) for r in metadata["runs"])
    compiling = sum(sum(r.get("compile_seconds", {}).values()) for r in metadata["runs"])
    # programs compile ahead on background threads: the waits are what compiling added to the runs' time
    waiting = sum(sum(r.get("compile_wait_seconds", r.get("compile_seconds", {})).values()) for r in metadata["runs"])
    text = (f"# jaxtrees study `{study.name}`\n\n{study.description}.\n\n{incomplete}"
            f"Seed {config['seed']}, {config['replicates']} replicates per cell, {len(rows)} rows, "
            f"{'quick' if config['quick'] else 'full'} size; grid: "
            + ", ".join(f"{k} = {v}" for k, v in sorted(config["grid"].items()))
            + f". jaxtrees {env['jaxtrees']}, jax {env['jax']} on {env['local_device_count']} x "
              f"{env['device_kind']} ({env['backend']}); {seconds:.0f} s in all, {waiting:.0f} s of it waiting for "
              f"compiles ({compiling:.0f} s of compiling on background threads).\n\n"
            + _study_report(study, directory, rows) + _cost_table(metadata))
    path = os.path.join(directory, "report.md")
    try:
        store.write_atomic(path, text)
    except OSError as e:
        print(f"jaxtrees: warning: cannot write {path} ({e.strerror}); the report is printed only", file=sys.stderr)
    return text


def _study_report(study, directory, rows) -> str:
    try:
        return study.report(rows)
    except KeyError as e:
        raise ValueError(_lacking(directory, study, e)) from None


def _lacking(directory, study, error: KeyError) -> str:
    return (f"{directory}: the rows lack a column the {study.name} study's figures and report need "
            f"({error.args[0] if error.args else error}); were they written by another version? Rerun "
            f"`jaxtrees run` into a new --out")


def _backend() -> None:
    """Start JAX's backend now, so that a JAX_PLATFORMS this machine lacks is one sentence, not a traceback."""
    import jax

    try:
        jax.devices()
    except (RuntimeError, AssertionError, ValueError) as e:
        wanted = os.environ.get("JAX_PLATFORMS", "")
        raise ValueError(f"JAX cannot start the backend{f' JAX_PLATFORMS={wanted}' if wanted else ''} here "
                         f"({(str(e).strip().splitlines() or [type(e).__name__])[0][:200]}); unset JAX_PLATFORMS (or set it "
                         f"to cpu), or install the jax build for that accelerator") from None


def _compilation_cache() -> None:
    """Point JAX's persistent compilation cache at ``$JAXTREES_CACHE_DIR`` and say on stderr where it is and how
    large (:mod:`jaxtrees.experiments.cache`).

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
    from jaxtrees.experiments import cache

    try:
        directory = cache.use(directory)
    except OSError as e:
        print(f"jaxtrees run: warning: cannot use the compilation cache {directory} ({e.strerror or e}); every program "
              f"is compiled (JAXTREES_CACHE_DIR sets the cache, empty: off)", file=sys.stderr)
        return
    print(f"jaxtrees run: compilation cache {cache.describe(directory)} (JAXTREES_CACHE_DIR; empty: off)",
          file=sys.stderr)


def _cost_table(metadata) -> str:
    """Markdown: per compiled program (static group) of every run, its trials, compile and run seconds, and how each
    run got it: "compiled" by XLA or "loaded" from the persistent compilation cache, with its seconds."""
    from jaxtrees.experiments import summary

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


_COMMANDS = {"list": _list, "run": _run, "plot": _plot, "report": _report, "export": _export, "convert": _convert}


if __name__ == "__main__":
    console()
