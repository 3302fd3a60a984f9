"""A grid of 10^5 cells: the generic figure and report do work bounded by what they show (issue 72 item 6): the
figure pools the small multiples past figure_spec.MAX_PANELS into one summary panel per output (a line per hue, its
median over the pooled combinations with their range as a band), the report's tables show at most MAX_ROWS lines
and draw bootstrap intervals only for the groups shown, while its statements (the comparison's tally) count all."""

import numpy as np
import pytest

from jaxtrees.experiments.report import figure_spec, generic, generic_figure, generic_report
from jaxtrees.experiments.table import Table

A, B, R = 250, 400, 2  # 10^5 cells, 2 * 10^5 rows


@pytest.fixture(scope="module")
def big():
    rng = np.random.default_rng(0)
    n = A * B * R
    a = np.repeat(np.arange(A, dtype=np.float64), B * R)
    b = np.tile(np.repeat(np.arange(B, dtype=np.int64), R), A)
    u = rng.random(n, dtype=np.float32)
    rows = Table({"study": np.full(n, "big", object), "seed": np.zeros(n, np.int64), "cell": np.arange(n) // R,
                  "replicate": np.arange(n) % R, "a": a, "b": b, "hit": u < a / A, "error": u * (b + 1) / B})
    spec = {"name": "big", "axis": None, "parameters": ["a", "b"], "outputs": {"hit": "bool", "error": "float"}}
    return rows, spec


def test_the_figure_pools_past_max_panels_and_draws_a_bounded_number_of_lines(big):
    rows, spec = big
    fig = generic_figure._figure(rows, spec)
    axes = fig.axes
    assert len(axes) == 2  # one panel per output, not B per output
    for ax in axes:
        assert len(ax.lines) <= figure_spec.MAX_LINES and len(ax.collections) <= figure_spec.MAX_LINES
        assert max(len(line.get_xdata()) for line in ax.lines) == A  # one point per x value
        assert "median over 400 combinations of b (band: their range)" in ax.get_title()
    hit = [line for line in axes[0].lines if line.get_label() == "all"][0]
    assert np.allclose(hit.get_ydata()[[0, -1]], [0, (A - 1) / A], atol=0.1)  # the rate's median over b, per a


def test_a_declared_hue_keeps_its_lines_and_pools_the_rest():
    values = {"b": list(range(400)), "c": [1, 2, 3], "n": [8, 16]}
    assert figure_spec.pooled(["c"], ["b", "n"], values) == (["c"], ["n"], ["b"])
    assert figure_spec.pooled(["c"], ["n"], values) == (["c"], ["n"], [])


def test_the_report_shows_at_most_max_rows_lines_per_table_and_tallies_every_cell(big, monkeypatch):
    rows, spec = big
    drawn = []  # the groups whose bootstrap intervals were asked for
    need = generic.Bootstrapped.need
    monkeypatch.setattr(generic.Bootstrapped, "need", lambda self, index: (drawn.extend(np.atleast_1d(
        np.arange(len(self.count))[index]).tolist()), need(self, index))[1])
    monkeypatch.setattr(generic_report, "MAX_ROWS", 50)
    text = generic_report.report(rows, spec)
    runs, length = [], 0
    for line in text.splitlines() + [""]:
        length = length + 1 if line.startswith("|") else (runs.append(length) or 0) if length else 0
    assert len(runs) >= 3 and max(runs) == 2 + 50  # header, rule, 50 lines
    assert f"The table shows the first 50 of its {A * B:,} groups (every row: `jaxtrees export`)." in text
    assert f"The table shows the first 50 of the {A:,} cells." in text
    tally = text.split("b = 1: higher in ")[1].split(";")[0]  # every cell counted, 50 shown
    assert tally.endswith(f"of {A} cells (95% interval above or below 0), undecided in " + tally.split()[-1])
    assert "the other 383 values of b (no column): higher in " in text
    assert max(line.count("|") for line in text.splitlines()) <= 2 + generic_report.MAX_COLUMNS + 1
    assert 0 < len(set(drawn)) <= 50  # bootstrap intervals drawn for the shown groups only


def test_small_grids_keep_their_eager_bootstrap_and_medians():
    codes = np.array([0, 0, 0, 1, 1, 1, 1], np.int64)
    values = np.array([0.5, 0.1, 0.3, 0.9, 0.2, 0.4, 0.4], np.float32)
    count = np.bincount(codes)
    assert generic._medians(codes, values, count).tolist() == [np.median(values[:3]), np.median(values[3:])]
    eager = generic._bootstrap(codes, values.astype(np.float64), count)
    assert all(isinstance(side, np.ndarray) for side in eager)
    lazy = generic.Bootstrapped(codes, values.astype(np.float64), count).bounds()
    assert 0 <= lazy[0][1] <= lazy[1][1] <= 1 and np.isnan(lazy[0][:]).sum() == 0
