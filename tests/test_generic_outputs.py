"""The generic report and figure on what a researcher's own outputs hold: censored step counts (Kaplan-Meier, no mean),
small multiples and their palette, intervals inside [0, 1], comparisons of a condition (Newcombe), errors labelled
exact or estimated, and NaN / inf values counted."""

import matplotlib
import numpy as np
import pytest

from jaxtrees.experiments.report import compare_rates, figure_spec, generic, generic_figure, generic_report, survival
from jaxtrees.experiments.table import Table
from test_generic import section, spec

matplotlib.use("Agg")


def censored_rows():
    """m = 8: steps 1..10 none censored; m = 16: 4 of 10 ran out at the budget 50 (written 50), 6 end at 2..7."""
    steps = np.r_[np.arange(1, 11), np.arange(2, 8), np.full(4, 50)].astype(np.int64)
    return Table({"cell": np.zeros(20, int), "m": np.repeat([8, 16], 10), "steps": steps,
                  "steps_censored": np.r_[np.zeros(16), np.ones(4)].astype(np.int8)})


def test_a_censored_pair_gets_kaplan_meier_quartiles_and_never_a_mean():
    rows = censored_rows()
    outputs = {"steps": "int", "steps_censored": "bool"}
    text = generic_report.report(rows, spec(outputs, parameters=()))
    assert "mean [" not in text.split("## steps")[1] and "## steps_censored" not in text
    table = section(text, "steps")
    curve = survival.kaplan_meier(rows["steps"][10:], rows["steps_censored"][10:].astype(bool))
    assert table[0] == ["8", "0 of 10 (0%)", "5.5", table[0][3], "3 – 8"]  # np.median of 1..10
    assert table[1][:3] == ["16", "4 of 10 (40%)", f"{survival.quantile(curve, 0.5):.4g}"]
    assert table[1][4] == "4 – > 50"  # the upper quartile lies beyond the budget
    fig = generic_figure._figure(rows, spec(outputs, parameters=()))
    assert len(fig.axes) == 2  # the median and the censored share
    assert "censored share" in fig.axes[1].get_ylabel()
    assert "an open end drawn at the budget" in fig.axes[0].get_ylabel()  # the band's top at 50 is "> 50" in report.md


def test_a_median_beyond_the_budget_is_printed_as_such():
    rows = Table({"cell": np.zeros(6, int), "m": np.full(6, 8), "steps": np.array([3, 4, 9, 9, 9, 9]),
                  "steps_censored": np.array([0, 0, 1, 1, 1, 1], np.int8)})
    table = section(generic_report.report(rows, spec({"steps": "int", "steps_censored": "bool"}, parameters=())),
                    "steps")
    assert table == [["8", "4 of 6 (67%)", "> 9", "[4, > 9]", "4 – > 9"]]


def test_nan_times_of_uncensored_trials_are_counted_where_they_are_left_out():
    """Before: left out of the product-limit table without a word (its count then read "1 of 5")."""
    rows = Table({"cell": np.zeros(8, int), "m": np.full(8, 8), "t": np.array([np.nan] * 3 + [1, 2, 3, 4, 9.0]),
                  "t_censored": np.array([0, 0, 0, 0, 0, 0, 0, 1], np.int8)})
    text = generic_report.report(rows, spec({"t": "float", "t_censored": "bool"}, parameters=()))
    assert "t: 3 NaN values of uncensored trials of 8 left out of its product-limit quartiles" in text
    assert section(text, "t")[0][1] == "1 of 5 (20%)"


def grid_rows(seed=0):
    """15 (n, c) combinations by m, an error within [0, 1] (mostly 0) and a success."""
    rng = np.random.default_rng(seed)
    n, c, m = (a.ravel() for a in np.meshgrid([8, 16, 32], [0.0, 0.05, 0.1, 0.2, 0.3], [16, 64, 256], indexing="ij"))
    reps = 12
    n, c, m = np.repeat(n, reps), np.repeat(c, reps), np.repeat(m, reps)
    error = np.where(rng.random(n.size) < 0.8, 0.0, rng.random(n.size) * 0.02)
    return Table({"cell": np.zeros(n.size, int), "n": n, "c": c, "m": m, "error": error,
                  "success": (error == 0).astype(np.int8)})


def test_small_multiples_hold_at_most_six_lines_in_the_okabe_ito_palette():
    rows = grid_rows()
    fig = generic_figure._figure(rows, spec({"error": "float", "success": "bool"}, parameters=("n", "c")))
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert len(axes) == 6 > 2  # an output per row, a panel per n
    for ax in axes:
        lines = [line for line in ax.get_lines() if not line.get_label().startswith("_")]
        assert 0 < len(lines) <= figure_spec.MAX_LINES
        assert {line.get_color() for line in lines} <= set(figure_spec.OKABE_ITO)
        assert len({line.get_marker() for line in lines}) == len(lines)
        assert "n = " in ax.get_title()
    assert axes[0].get_shared_y_axes().joined(axes[0], axes[1])
    assert "\n" not in fig._suptitle.get_text() or len(fig._suptitle.get_text()) < 120
    assert "a toy study" not in fig._suptitle.get_text()  # the description goes to the report


def test_a_declared_layout_is_kept():
    rows = grid_rows()
    declared = figure_spec.figure(x="m", hue="n", col="c", outputs="success")
    fig = generic_figure._figure(rows, spec({"error": "float", "success": "bool"}, parameters=("n", "c")), declared)
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert len(axes) == 5 and all(len([x for x in ax.get_lines() if x.get_label()[0] != "_"]) == 3 for ax in axes)
    with pytest.raises(Exception):
        declared.x = "n"  # frozen


def test_the_mean_interval_of_an_error_stays_within_zero_and_one():
    rows = grid_rows(1)
    _, groups = generic.prepared(rows, spec({"error": "float"}, parameters=("n", "c")))
    stats = groups.stats["error"]
    assert stats.bounded and np.nanmin(stats.low) >= 0 and np.nanmax(stats.high) <= 1
    normal = stats.centre - 1.96 * 0.01  # the normal approximation would cross 0 for these skewed errors
    assert (normal < 0).any()
    text = generic_report.report(rows, spec({"error": "float"}, parameters=("n", "c")))
    assert "percentile bootstrap" in text


def test_the_condition_is_compared_with_newcombe_intervals():
    rows = grid_rows()
    text = generic_report.report(rows, spec({"success": "bool"}, parameters=("n", "c")), condition="c")
    table = section(text, "success: by c")
    assert len(table) == 9 and len(table[0]) == 2 + 4  # per (n, m): c = 0.05, ..., 0.3 minus c = 0
    ok, n, c, m = rows["success"], rows["n"], rows["c"], rows["m"]
    first = (n == 8) & (m == 16)
    k1, k0 = ok[first & (c == 0.05)].sum(), ok[first & (c == 0.0)].sum()
    d, low, high = compare_rates.difference(k1, 12, k0, 12)
    assert table[0][2] == f"{d:+.2f} [{low:+.2f}, {high:+.2f}]"
    assert "c = 0.05: higher in" in text
    assert "## success: by n" in generic_report.report(rows, spec({"success": "bool"}, parameters=("n", "c")))
    with pytest.raises(ValueError, match="condition 'eta'"):
        generic_report.report(rows, spec({"success": "bool"}, parameters=("n", "c")), condition="eta")
    one = rows.take(np.flatnonzero(np.asarray(rows["c"]) == 0.1))  # a --quick grid of one c (before: ValueError)
    text = generic_report.report(one, spec({"success": "bool"}, parameters=("n", "c")), condition="c")
    assert "The condition c takes one value in these rows (c = 0.1): no comparison of its values." in text
    assert "## success: by" not in text and "## success" in text


def test_estimated_errors_are_labelled_and_their_success_flagged():
    rows = grid_rows()
    rows = rows.with_columns(exact=np.zeros(len(rows), np.int8), test_points=np.full(len(rows), 1000))
    outputs = {"error": "float", "success": "bool", "exact": "bool", "test_points": "int"}
    text = generic_report.report(rows, spec(outputs, parameters=("n", "c")))
    assert "Errors: estimated on 1,000 test points." in text
    assert ("(success) is decided on the 1,000 test points, not the distribution: the true error lies within about "
            "+/-0.043 (95%, Hoeffding; below 3/1,000 = 0.003 where no test point was missed)") in text
    assert "means 0 mistakes" not in text  # before: said of any success-like bool, whatever its threshold
    assert "## exact" not in text and "## test_points" not in text
    fig = generic_figure._figure(rows, spec(outputs, parameters=("n", "c")))
    assert any("estimated on 1,000 test points" in ax.get_title() for ax in fig.axes)
    exact = rows.with_columns(exact=np.ones(len(rows), np.int8))
    text = generic_report.report(exact, spec(outputs, parameters=("n", "c")))
    assert "Errors: exact." in text and "never exact success" not in text


def test_nan_and_inf_are_counted_not_dropped():
    rows = Table({"cell": np.zeros(6, int), "m": [8, 8, 8, 16, 16, 16],
                  "size": [1.0, np.inf, np.nan, 2.0, 4.0, -np.inf]})
    text = generic_report.report(rows, spec({"size": "float"}, parameters=()))
    assert "size: 1 NaN and 2 inf values of 6 left out" in text
    assert section(text, "size") == [["8", "1 [one value]", "1", "1", "2"], ["16", "3 [1.04, 4.96]", "3", "2", "1"]]
