"""Figures written whole: the SVG drawn in a forked child beside the PNG, its errors raised here."""

import errno
import os
import signal

import numpy as np
import pytest

from jaxtrees.experiments.report import saving, summary


def _figure():
    fig, axes = summary.figure(2)
    for ax in axes:
        ax.plot([16, 64, 256], [0.1, 0.5, 0.9], label="a curve")
        summary.panel(ax, "a panel", "m")
    return fig


@pytest.mark.parametrize("fork", ["1", "0"])
def test_a_figure_is_written_as_png_and_svg_forked_or_not(tmp_path, monkeypatch, fork):
    monkeypatch.setenv("JAXTREES_FIGURE_FORK", fork)
    paths = saving.save(_figure(), str(tmp_path / "f"))
    assert paths == [str(tmp_path / "f.png"), str(tmp_path / "f.svg")]
    assert (tmp_path / "f.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = (tmp_path / "f.svg").read_text()
    assert svg.rstrip().endswith("</svg>")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.png", "f.svg"]  # no temporary file left


def test_the_childs_error_is_raised_here_as_it_was(tmp_path, monkeypatch):
    """A full disk in the forked SVG writer is the OSError (errno and all) of an in-process write."""
    write = saving._write

    def full(fig, path, options):
        if path.endswith(".svg"):
            raise OSError(errno.ENOSPC, "No space left on device", path)
        write(fig, path, options)

    monkeypatch.setattr(saving, "_write", full)
    monkeypatch.setenv("JAXTREES_FIGURE_FORK", "1")
    with pytest.raises(OSError) as raised:
        saving.save(_figure(), str(tmp_path / "f"))
    assert raised.value.errno == errno.ENOSPC and raised.value.filename == str(tmp_path / "f.svg")


def test_a_child_killed_without_a_word_has_its_file_written_here(tmp_path, monkeypatch):
    parent, write = os.getpid(), saving._write

    def killed_in_the_child(fig, path, options):
        if os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
        write(fig, path, options)

    monkeypatch.setattr(saving, "_write", killed_in_the_child)
    monkeypatch.setenv("JAXTREES_FIGURE_FORK", "1")
    saving.save(_figure(), str(tmp_path / "f"))
    assert (tmp_path / "f.svg").read_text().rstrip().endswith("</svg>")


def test_figures_drawn_side_by_side_give_their_paths_in_order_and_raise_a_childs_error(tmp_path, monkeypatch):
    monkeypatch.setenv("JAXTREES_FIGURE_FORK", "1")

    def draw(name):
        return saving.save(_figure(), str(tmp_path / name))

    def broken():
        raise ValueError("no such column")

    assert saving.side_by_side(lambda: draw("a"), lambda: draw("b")) == [
        str(tmp_path / f"{n}.{e}") for n in "ab" for e in ("png", "svg")]
    assert all((tmp_path / f"{n}.svg").read_text().rstrip().endswith("</svg>") for n in "ab")
    with pytest.raises(RuntimeError, match="drawing a figure failed: ValueError: no such column"):
        saving.side_by_side(lambda: draw("c"), broken)


@pytest.mark.parametrize("fork", ["1", "0"])
def test_work_while_drawing_runs_once_between_the_first_figure_and_the_children(tmp_path, monkeypatch, fork):
    """``while_drawing(work)``: with a forked child, ``work`` runs here after the first figure and before the child
    is joined (a run's report written while its figures draw); without one, when its result is asked for; once."""
    monkeypatch.setenv("JAXTREES_FIGURE_FORK", fork)
    order = []

    def draw(name):
        order.append(name)
        return saving.save(_figure(), str(tmp_path / name))

    def work():
        order.append("work")
        return len(order)

    with saving.while_drawing(work) as done:
        paths = saving.side_by_side(lambda: draw("a"), lambda: draw("b"))
        assert saving.side_by_side(lambda: draw("c"), lambda: draw("d"))  # the work is done once
    assert paths == [str(tmp_path / f"{n}.{e}") for n in "ab" for e in ("png", "svg")]
    forked = fork == "1" and os.cpu_count() > 1
    assert done() == (2 if forked else 5) and order.count("work") == 1  # children's draws are not in this process
    assert order == (["a", "work", "c"] if forked else ["a", "b", "c", "d", "work"])
    assert saving._MEANWHILE == []


def test_symlog_and_log_ticks_are_plain_text(tmp_path):
    """Tick labels of log and symlog axes are plain text, not mathtext (a quarter of a figure's drawing time)."""
    fig, (ax, bx) = summary.figure(2)
    ax.plot([0, 1, 4, 64], [0.5, 0.4, 0.3, 0.2])
    ax.set_xscale("symlog", base=2, linthresh=1)
    bx.plot([16, 1024], [1e-5, 1e-1])
    summary.panel(bx, "log", "m")
    bx.set_yscale("log")
    saving.save(fig, str(tmp_path / "f"))
    labels = [t.get_text() for a in (ax, bx) for t in (*a.get_xticklabels(), *a.get_yticklabels())]
    assert labels and not [label for label in labels if "$" in label]
    assert {"4", "64"} <= {t.get_text() for t in ax.get_xticklabels()}


def test_a_symlog_axis_of_many_powers_labels_every_other_one(tmp_path):
    """Depths 0 .. 1024 on a base-2 symlog axis: labelled 0, 1, 4, 16, ..., 1024, not all eleven powers (whose labels
    ran together, "5121024"); eight powers or fewer keep every one."""
    fig, (wide, narrow) = summary.figure(2)
    wide.plot([0, 1, 64, 1024], [0.5, 0.4, 0.3, 0.2])
    narrow.plot([0, 1, 4, 64], [0.5, 0.4, 0.3, 0.2])
    for ax in (wide, narrow):
        ax.set_xscale("symlog", base=2, linthresh=1)
        ax.set_xlim(0, None)
    saving.save(fig, str(tmp_path / "f"))
    shown = [float(t.get_text()) for t in wide.get_xticklabels() if t.get_text()]
    assert shown == [0, 1, 4, 16, 64, 256, 1024]
    assert {1, 2, 4, 8, 16, 32, 64} <= {float(t.get_text()) for t in narrow.get_xticklabels() if t.get_text()}


def test_a_log_axis_of_two_decades_or_more_has_minor_ticks_at_2_and_5(tmp_path):
    fig, (wide, narrow) = summary.figure(2)
    wide.plot([1, 1e6], [1, 2])
    narrow.plot([10, 50], [1, 2])
    for ax in (wide, narrow):
        ax.set_xscale("log")
    saving.save(fig, str(tmp_path / "f"))
    inside = [x for x in wide.xaxis.get_minorticklocs() if 1 < x < 1e6]
    assert inside and {round(x / 10 ** int(np.floor(np.log10(x)))) for x in inside} == {2, 5}
    assert {round(x) for x in narrow.xaxis.get_minorticklocs() if 10 < x < 50} == {20, 30, 40}  # under two decades: all
