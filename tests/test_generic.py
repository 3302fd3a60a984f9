"""experiments/report/generic.py, generic_figure.py and generic_report.py:
figures and a report for any study from its rows and declared outputs, checked against
small independent numpy computations (the Wilson interval in closed form, means, medians)."""

import math

import matplotlib
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxtrees.experiments.report import generic, generic_figure, generic_report
from jaxtrees.experiments.table import ByCell, Table

matplotlib.use("Agg")

Z = 1.96


def wilson(k, n):
    """The 95% Wilson score interval in closed form."""
    p = k / n
    centre = (p + Z**2 / (2 * n)) / (1 + Z**2 / n)
    half = Z / (1 + Z**2 / n) * math.sqrt(p * (1 - p) / n + Z**2 / (4 * n**2))
    return max(0.0, centre - half), min(1.0, centre + half)


def spec(outputs, parameters=("a", "b"), axis="m", meanings=None):
    return {"name": "toy", "description": "a toy study", "axis": axis, "parameters": list(parameters), "static": [],
            "outputs": dict(outputs), "meanings": dict(meanings or {})}


def known_rates():
    """Rows of a = 0, 1 (b = 7 throughout) by m = 16, 32, 64: group (a, m) has successes[a][m] of trials[a][m]."""
    successes = {0: {16: 10, 32: 19, 64: 40}, 1: {16: 2, 32: 5, 64: 16}}
    trials = {0: {16: 20, 32: 20, 64: 40}, 1: {16: 10, 32: 10, 64: 20}}
    columns = {"cell": [], "a": [], "m": [], "ok": []}
    for a in successes:
        for m, k in successes[a].items():
            n = trials[a][m]
            columns["cell"] += [a] * n
            columns["a"] += [a] * n
            columns["m"] += [m] * n
            columns["ok"] += [1] * k + [0] * (n - k)
    rows = Table({**{name: np.asarray(v) for name, v in columns.items()}, "b": np.full(len(columns["a"]), 7)})
    return rows.with_columns(ok=rows["ok"].astype(np.int8)), successes, trials


def section(text, title):
    """The markdown table under ``## title`` as lists of cells."""
    part = text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in part.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]


def test_rates_and_wilson_intervals_match_the_closed_form():
    rows, successes, trials = known_rates()
    text = generic_report.report(rows, spec({"ok": "bool"}))
    assert text.startswith("The rate of ok against m, per combination of a, from 120 rows")
    assert "Constant over the rows: b = 7." in text
    table = section(text, "ok")
    expected = []
    for a in successes:
        for m, k in successes[a].items():
            n = trials[a][m]
            low, high = wilson(k, n)
            expected.append([str(a), str(m), f"{k / n:.2f} [{low:.2f}, {high:.2f}]", str(n)])
    assert table == expected
    _, groups = generic.prepared(rows, spec({"ok": "bool"}))
    stats = groups.stats["ok"]
    reference = [wilson(successes[a][m], trials[a][m]) for a, m in groups.keys]
    np.testing.assert_allclose(stats.low, [lo for lo, _ in reference], rtol=1e-12)
    np.testing.assert_allclose(stats.high, [hi for _, hi in reference], rtol=1e-12)


def test_m_for_90_percent_reached_and_not_reached():
    rows, successes, trials = known_rates()
    text = generic_report.report(rows, spec({"ok": "bool"}))
    table = section(text, "ok: m for 90%")
    low = wilson(successes[0][32], trials[0][32])[0]  # a = 0: 0.5, 0.95, 1.0 -> 32
    assert table == [["0", "32", "[32, 64]", f"{low:.2f}"],
                     ["1", "not reached (max rate 0.80 at m = 64)", "[64, > 64]", "—"]]


def test_a_rate_that_falls_back_below_90_percent_is_not_held():
    rows = Table({"cell": np.zeros(40, int), "m": np.repeat([16, 32], 20),
                  "ok": np.r_[np.ones(19), np.zeros(1), np.ones(15), np.zeros(5)].astype(np.int8)})
    table = section(generic_report.report(rows, spec({"ok": "bool"}, parameters=())), "ok: m for 90%")
    assert table == [["not held (rate 0.95 at m = 16, 0.75 at m = 32)", "[16, > 32]", "—"]]


def test_no_m_for_90_percent_where_x_is_not_a_sample_size():
    rows, _, _ = known_rates()
    rows = rows.with_columns(depth=rows["m"]).select("cell", "a", "b", "depth", "ok")
    assert "for 90%" not in generic_report.report(rows, spec({"ok": "bool"}, axis="depth"))
    meanings = {"depth": "training examples: the first depth of the sample"}
    text = generic_report.report(rows, spec({"ok": "bool"}, axis="depth", meanings=meanings))
    assert "## ok: depth for 90%" in text


def numeric_rows(nan=0):
    rng = np.random.default_rng(3)
    n = 400
    a, m = rng.choice([0.5, 2.0], n), rng.choice([8, 64, 1024], n)
    size = rng.normal(10 * a + np.log2(m), 2.0, n)
    size[:nan] = np.nan
    return Table({"cell": np.zeros(n, int), "a": a, "b": np.full(n, "gini", dtype=object), "m": m, "size": size,
                  "nodes": rng.integers(0, 9, n)})


@pytest.mark.parametrize("nan", [0, 7])
def test_means_intervals_and_medians_match_numpy(nan):
    rows = numeric_rows(nan)
    text = generic_report.report(rows, spec({"size": "float", "nodes": "int"}))
    a, m, size, nodes = rows["a"], rows["m"], rows["size"], rows["nodes"]
    for name, values in (("size", size), ("nodes", nodes)):
        expected = []
        for av in (0.5, 2.0):
            for mv in (8, 64, 1024):
                v = values[(a == av) & (m == mv)]
                left = [str(np.isnan(v).sum())] if nan and name == "size" else []  # NaN counted per group
                v = v[~np.isnan(v)]
                mean, half = v.mean(), Z * v.std(ddof=1) / math.sqrt(v.size)
                expected.append([f"{av:g}", str(mv), f"{mean:.4g} [{mean - half:.4g}, {mean + half:.4g}]",
                                 f"{np.median(v):.4g}", str(v.size), *left])
        assert section(text, name) == expected
    assert ("size: 7 NaN values of 400 left out of its means and medians (counted per group" in text) == bool(nan)
    assert "nodes: " not in text.split("## ")[0]
    assert "Constant over the rows: b = gini." in text


def test_the_x_without_an_axis_is_the_first_numeric_parameter_that_varies():
    rng = np.random.default_rng(0)
    n = 60
    rows = Table({"cell": np.zeros(n, int), "learner": rng.choice(["cart", "id3"], n), "n": np.full(n, 16),
                  "c": rng.choice([0.0, 0.1, 0.2], n), "k": rng.choice([2, 3], n), "ok": rng.integers(0, 2, n)})
    layout = generic._layout(rows, spec({"ok": "bool"}, parameters=["learner", "n", "c", "k"], axis=None))
    assert (layout.x, layout.numeric, layout.series, layout.constant) == ("c", True, ["learner", "k"], {"n": 16})
    only_names = generic._layout(rows, spec({"ok": "bool"}, parameters=["n", "learner"], axis=None))
    assert (only_names.x, only_names.numeric, only_names.series) == ("learner", False, [])
    nothing = generic._layout(rows.where(learner="cart"), spec({"ok": "bool"}, parameters=["n", "learner"], axis=None))
    assert (nothing.x, nothing.series, nothing.constant) == (None, [], {"n": 16, "learner": "cart"})
    assert "over all rows" in generic_report.report(rows.where(learner="cart"),
                                                    spec({"ok": "bool"}, ["n", "learner"], None))


def test_the_figure_has_one_line_per_combination_and_a_log2_axis_for_powers_of_two():
    rows = numeric_rows()
    rows = rows.with_columns(ok=(rows["size"] > 12).astype(np.int8), b=np.where(rows["nodes"] > 4, "x", "y"))
    fig = generic_figure._figure(rows, spec({"ok": "bool", "size": "float"}, meanings={"m": "training examples: m"}))
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert len(axes) == 2
    for ax in axes:
        labels = [line.get_label() for line in ax.get_lines() if not line.get_label().startswith("_")]
        assert labels == ["a = 0.5, b = x", "a = 0.5, b = y", "a = 2, b = x", "a = 2, b = y"]
        assert ax.get_xscale() == "log" and ax.get_xlabel() == "m: training examples"
    dashed = [line for line in axes[1].get_lines() if line.get_linestyle() == "--"]
    assert len(dashed) == 4  # the medians, each in its series' colour
    assert [d.get_color() for d in dashed] == [line.get_color() for line in axes[1].get_lines()
                                               if not line.get_label().startswith("_")]
    assert len(fig.legends) == 1


def test_plot_writes_png_and_svg(tmp_path):
    rows, _, _ = known_rates()
    paths = generic_figure.plot(rows, str(tmp_path / "toy"), spec({"ok": "bool"}))
    assert paths == [str(tmp_path / "toy.png"), str(tmp_path / "toy.svg")]
    assert (tmp_path / "toy.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = (tmp_path / "toy.svg").read_text()
    assert svg.rstrip().endswith("</svg>") and "a = 0" in svg and "a = 1" in svg


def test_a_categorical_x_gets_a_tick_per_value(tmp_path):
    rows = Table({"cell": np.zeros(6, int), "learner": np.array(["id3", "cart", "id3", "cart", "forest", "id3"],
                                                                 dtype=object), "depth": [1.0, 2, 3, 4, 5, np.nan]})
    fig = generic_figure._figure(rows, spec({"depth": "float"}, parameters=["learner"], axis=None))
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["cart", "forest", "id3"]
    text = generic_report.report(rows, spec({"depth": "float"}, parameters=["learner"], axis=None))
    assert section(text, "depth") == [["cart", "3 [1.04, 4.96]", "3", "2", "0"],
                                      ["forest", "5 [one value]", "5", "1", "0"], ["id3", "2 [0.04, 3.96]", "2", "2", "1"]]


def test_a_group_whose_values_are_all_nan_is_counted_not_drawn():
    rows = Table({"cell": np.zeros(4, int), "m": [8, 8, 16, 16], "err": [np.nan, np.nan, 1.0, 3.0]})
    text = generic_report.report(rows, spec({"err": "float"}, parameters=()))
    assert section(text, "err") == [["8", "—", "—", "0", "2"], ["16", "2 [0.04, 3.96]", "2", "2", "0"]]
    assert "err: 2 NaN values of 4 left out" in text
    fig = generic_figure._figure(rows, spec({"err": "float"}, parameters=()))
    assert list(fig.axes[0].get_lines()[0].get_xdata()) == [16.0]


def test_errors():
    rows, _, _ = known_rates()
    with pytest.raises(KeyError, match="'success'"):
        generic_report.report(rows, spec({"success": "bool"}))
    with pytest.raises(KeyError, match="'success'"):
        generic_figure.plot(rows, "/nonexistent/x", spec({"ok": "bool", "success": "bool"}))
    with pytest.raises(ValueError, match="no rows"):
        generic_report.report(rows.take(np.zeros(0, int)), spec({"ok": "bool"}))


def test_parameters_as_cell_columns_as_a_store_reads_them():
    """A stored table's parameters are ByCell columns: the same numbers as plain columns."""
    rows, _, _ = known_rates()
    cells = Table({"cell": rows["cell"], "a": ByCell([0, 1], [0, 1]), "b": ByCell([7], [0, 0]), "m": rows["m"],
                   "ok": rows["ok"]})
    assert generic_report.report(cells, spec({"ok": "bool"})) == generic_report.report(rows, spec({"ok": "bool"}))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.sampled_from(["p", "q"]), st.sampled_from([4, 8, 16]),
                          st.booleans()), min_size=1, max_size=60))
def test_rates_equal_the_mean_per_group(trials):
    a, b, m, ok = (np.asarray(column) for column in zip(*trials))
    rows = Table({"cell": np.zeros(len(a), int), "a": a, "b": b.astype(object), "m": m, "ok": ok.astype(np.int8)})
    layout, groups = generic.prepared(rows, spec({"ok": "bool"}))
    by = {"a": a, "b": b, "m": m}
    names = [*layout.series, layout.x]
    for key, rate, count in zip(groups.keys, groups.stats["ok"].centre, groups.stats["ok"].count):
        mask = np.logical_and.reduce([by[name] == value for name, value in zip(names, key)])
        assert count == mask.sum() and rate == np.mean(ok[mask])
