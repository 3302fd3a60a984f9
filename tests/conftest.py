"""pytest configuration for the jaxtrees suite.

The tests directory has no ``__init__.py``: pytest puts it on ``sys.path``, so test modules import
the plain-numpy ``reference`` and the shared ``helpers`` directly. Counts of data sets compared
against the references (``helpers.REPORT``) are printed at the end of the run.

Compile time: the suite compiles hundreds of small programs and runs each on tiny data, so XLA's
LLVM optimization level is lowered to 0 (``XLA_FLAGS``, set here before jax is imported and
inherited by the CLI subprocesses): 34% less wall time for tests/test_population.py on 2 cores.
Every property tested (results independent of batching, chunking and devices; equality with the
numpy reference and scikit-learn) must hold at any optimization level. Set XLA_FLAGS with an
``--xla_backend_optimization_level`` of your own to test at another level.

The README's command runs the suite in pytest-xdist workers, one per core (``-n auto``): most of
the suite's time is compilation, which is single-threaded, so one process would leave cores idle. JAX's GPU
memory preallocation is off for the suite, so that several workers can share one GPU.

The README's command leaves out two tiers, both run by CI (.ci/run): ``slow`` (full-size checks,
marked in the tests) and ``long`` (the tests listed in tests/long.txt: each took >= 6 s, together
about 70% of the suite's time; ``pytest -m long`` runs them).

The CLI's persistent compilation cache is off for the suite (``JAXTREES_CACHE_DIR`` empty), so
that every run compiles what it tests, and so is its split of the CPU into one device per core
(``JAXTREES_CPU_DEVICES=1``: ``cli.main`` called in a test process must not change that process's
devices); tests/test_runner.py turns each on where it tests it. Programs compile on threads of the test
process (``JAXTREES_COMPILE_WORKERS=threads``, as before workers; "auto" would start worker processes for each run of
two or more programs); tests/test_compile_workers.py tests the workers. The CLI's vector width for XLA's
CPU code (``jaxtrees.core.platform.wide_vectors``: 512 bits on AVX-512) is set here for the whole suite, so that
tests run what ``jaxtrees run`` runs and the test process and its CLI subprocesses agree.

Compiled programs: every program XLA:CPU compiles stays mapped while a jit cache holds it (for a
module-level ``jax.jit``, the life of the process), about 3 memory maps per kernel and several
MB each. Run in one process (no ``-n``), the suite's programs reached the kernel's limit on maps
(``vm.max_map_count``, 65,530) at 70% and XLA's compiler segfaulted. After each test, if the
process holds more than a quarter of that limit in maps, ``jaxtrees.core.programs.release``
drops every cached program (``jax.clear_caches()``); later tests recompile what they use again.
The terminal summary gives the number of releases and the peak maps; ``JAXTREES_PROGRAMS_LOG=path``
appends one line per test (node id, maps, resident MB, whether it released).
"""

import os
import sys

if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0").strip()

os.environ.setdefault("JAXTREES_CACHE_DIR", "")
os.environ.setdefault("JAXTREES_CPU_DEVICES", "1")
os.environ.setdefault("JAXTREES_COMPILE_WORKERS", "threads")
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

from jaxtrees.core.platform import wide_vectors  # noqa: E402  (sets XLA_FLAGS; JAX has not started its backend)

wide_vectors()

sys.path.insert(0, os.path.dirname(__file__))

import helpers  # noqa: E402
import pytest  # noqa: E402

from jaxtrees.core import programs  # noqa: E402

#: Releases of compiled programs after a test (``programs.release_if_crowded``), and the peak maps seen.
PROGRAMS = {"releases": 0, "peak_maps": 0, "threshold": int(programs.MAP_SHARE * programs.map_limit())}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """After a test's teardown: release every cached compiled program if the process is crowded."""
    yield
    maps = programs.map_count()
    if maps is not None:
        PROGRAMS["peak_maps"] = max(PROGRAMS["peak_maps"], maps)
    released = programs.release_if_crowded(PROGRAMS["threshold"])
    PROGRAMS["releases"] += released
    if os.environ.get("JAXTREES_PROGRAMS_LOG"):  # one line per test: maps, resident MB, released
        with open(os.environ["JAXTREES_PROGRAMS_LOG"], "a") as log:
            log.write(f"{item.nodeid}\t{maps}\t{(programs.resident_bytes() or 0) >> 20}\t{int(released)}\n")


#: The node ids of the ``long`` tier (tests/long.txt).
LONG = frozenset(line.strip() for line in open(os.path.join(os.path.dirname(__file__), "long.txt"))
                 if line.strip() and not line.startswith("#"))


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects
def pytest_collection_modifyitems(config, items):
    """Mark the tests listed in tests/long.txt ``long``; refuse a listed test of a collected file that is gone."""
    ids = {item.nodeid for item in items}
    for item in items:
        if item.nodeid in LONG:
            item.add_marker(pytest.mark.long)
    # Whole files (no node ids named, no --lf dropping passed tests): each listed test of theirs must exist.
    if not config.getoption("lf", False) and not any("::" in arg for arg in config.args):
        files = {nodeid.split("::")[0] for nodeid in ids}
        gone = sorted(nodeid for nodeid in LONG - ids if nodeid.split("::")[0] in files)
        if gone:
            raise pytest.UsageError(f"tests/long.txt lists tests that were not collected (renamed?): {gone}")


def pytest_sessionfinish(session):
    """Under pytest-xdist (``-n``), a worker hands its reference comparison counts to the controller."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["jaxtrees_report"] = dict(helpers.REPORT)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """pytest-xdist's controller: gather each worker's counts for the summary."""
    helpers.REPORT.update(getattr(node, "workeroutput", {}).get("jaxtrees_report", {}))


def pytest_terminal_summary(terminalreporter):
    if PROGRAMS["peak_maps"]:  # this process ran tests (not an xdist controller)
        terminalreporter.write_line(
            f"compiled programs: released {PROGRAMS['releases']} time(s) past {PROGRAMS['threshold']} memory maps; "
            f"peak {PROGRAMS['peak_maps']} maps")
    if helpers.REPORT:
        terminalreporter.section("jaxtrees reference comparisons")
        for name, line in sorted(helpers.REPORT.items()):
            terminalreporter.write_line(f"{name}: {line}")


@pytest.fixture
def unclipped_figures(monkeypatch):
    """Record every figure a study saves; at teardown, check that each was saved, that nothing
    drawn (titles, labels, tick labels, the legend) reaches outside the canvas (the tight bounding
    box of the drawn artists lies inside the figure), and that no two labelled series of a panel
    share colour, marker and line style."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from jaxtrees.experiments.report import saving

    figures = []
    save = saving.save

    def recording_save(fig, stem):
        figures.append(fig)
        return save(fig, stem)

    monkeypatch.setattr(saving, "save", recording_save)
    yield figures
    assert figures, "no figure was saved"
    for fig in figures:
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        drawn, page = fig.get_tightbbox(canvas.get_renderer()), fig.bbox_inches
        tol = 1 / fig.dpi  # one pixel
        assert (drawn.x0 >= page.x0 - tol and drawn.y0 >= page.y0 - tol and drawn.x1 <= page.x1 + tol
                and drawn.y1 <= page.y1 + tol), f"drawn area {drawn} reaches outside the figure {page}"
        for ax in fig.axes:
            styles = [(line.get_color() if isinstance(line.get_color(), str) else tuple(line.get_color()),
                       line.get_marker(), line.get_linestyle())
                      for line in ax.get_lines() if not line.get_label().startswith("_")]
            assert len(styles) == len(set(styles)), f"two series look alike on {ax.get_title()!r}: {styles}"
