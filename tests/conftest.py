"""pytest configuration for the jaxtrees suite.

The tests directory has no ``__init__.py``: pytest puts it on ``sys.path``, so test modules import
the plain-numpy ``reference`` and the shared ``helpers`` directly. Counts of data sets compared
against the references (``helpers.REPORT``) are printed at the end of the run.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import helpers  # noqa: E402


def pytest_terminal_summary(terminalreporter):
    if helpers.REPORT:
        terminalreporter.section("jaxtrees reference comparisons")
        for name, line in sorted(helpers.REPORT.items()):
            terminalreporter.write_line(f"{name}: {line}")
