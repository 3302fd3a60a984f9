"""The Theorem 7 panel (signal_report.eps_panel) with a cell whose eps* is 0: left out and said, never drawn at inf."""

import warnings

import matplotlib
import numpy as np

matplotlib.use("Agg")

from matplotlib import pyplot as plt  # noqa: E402

from jaxtrees.experiments.studies import signal_report  # noqa: E402

M = np.asarray([16, 32, 64, 128, 256, 512])


def _cells(eps_of_cell):
    """Smoothed Gini cells (k = 2, n = 8, c by cell) reaching 90% at a cell's own m, with its eps* per trial."""
    rng = np.random.default_rng(0)
    cells = {}
    for i, (c, eps) in enumerate(eps_of_cell):
        success = (np.arange(M.size)[None, :] >= 1 + i) | (rng.random((40, M.size)) < 0.02)
        cells[(2, 8, c, "gini")] = (success.astype(np.int32), {"eps_star": np.full(40, eps)})
    return cells


def _title(eps_of_cell) -> str:
    cells = _cells(eps_of_cell)
    info, inside = signal_report.lipschitz_cells(cells, ("k", "n", "c", "impurity"), "smoothed-base")
    m90 = {cell: float(M[1 + i]) for i, cell in enumerate(cells)}
    fig, ax = plt.subplots()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "divide by zero" on the way
        signal_report.eps_panel(ax, inside, M, m90, info)
    title = ax.get_title()
    xs = np.concatenate([line.get_xdata() for line in ax.get_lines()]).astype(float)
    plt.close(fig)
    assert np.isfinite(xs).all()
    return title


def test_a_cell_whose_eps_star_is_zero_is_left_out_and_said():
    assert "not placed" not in _title([(0.05, 0.2), (0.1, 0.1), (0.2, 0.05)])
    assert "1 cell(s) with median eps* = 0 not placed" in _title([(0.05, 0.2), (0.1, 0.1), (0.2, 0.0)])
