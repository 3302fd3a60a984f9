"""The addressing and agnostic studies' theory (002): Lemma 14's cells, Lemmas 16-17's distance, Theorems 10-11's
floors, on hand-made rows (the studies' runs are in tests/test_runner.py and the notebooks)."""

import math

import numpy as np
import pytest

import helpers

from jaxtrees.experiments.studies import addressing_cells
from jaxtrees.experiments.studies import counterexamples as ce
from jaxtrees.experiments.studies import counterexamples_report as ce_report
from jaxtrees.experiments.studies import theory, verdicts
from jaxtrees.experiments.table import Table


def _cell(**changes):
    return {"code": "block", "k": 10, "c": 7, "s": 0.25, "impurity": "gini", **changes}


def test_the_full_addressing_grid_reaches_a_cell_where_lemma_14_applies_and_the_depth_separates():
    """Issue 57: Lemma 14 holds on the grid only at c = 7 (block), where the target's depth c k^2 + 1 exceeds the 2^k
    horizon for every k <= 9 (k = 8: 449 > 256); k = 10 is the first with both (701 < 1024)."""
    full = ce.ADDRESSING.full
    assert 10 in full["k"] and 7 in full["c"] and "block" in full["code"] and 0.25 in full["s"]
    assert "gini" in full["impurity"]
    for k in range(3, 10):
        assert addressing_cells.target_depth(_cell(k=k)) > 2**k
    assert addressing_cells.target_depth(_cell(k=8)) == 449 and addressing_cells.target_depth(_cell(k=10)) == 701
    for s in full["s"]:  # delta = 0.4 and 0.25: c0 = 4.02, 6.44 <= 7; k0 = 4.29, 5.40 <= 10
        lemma = addressing_cells.lemma14(_cell(s=s))
        assert lemma["applies"] and lemma["c0"] <= 7 and lemma["k0"] <= 10
    ce._addressing_check(_cell())  # n = 700 + 1024 is within the study's bounds
    assert not addressing_cells.lemma14(_cell(impurity="entropy"))["applies"]


def test_lemma14_keeps_its_constants():
    lemma = addressing_cells.lemma14(_cell(k=6))
    assert lemma["c0"] == pytest.approx(math.log(5) / 0.25)
    assert lemma["kappa"] == pytest.approx(4 / 3) and lemma["k0"] == pytest.approx(5.395508, rel=1e-6)
    assert lemma["applies"] and not addressing_cells.lemma14(_cell(k=5))["applies"]


def test_coded_cells_evaluate_the_distance_condition():
    """Issue 57: Lemmas 16-17 need a code distance >= (ln 5 / delta) k; with length c k, c <= 7, no cell meets it
    (Plotkin: d <= c k 2^(k-1) / (2^k - 1)), and the report says so per coded cell."""
    for k in (3, 4, 5, 6):
        lemma = addressing_cells.lemma14(_cell(code="coded", k=k))
        assert lemma["distance"] == addressing_cells.code_distance(k, 7 * k) <= 7 * k * 2 ** (k - 1) / (2**k - 1)
        assert lemma["distance_needed"] == pytest.approx(math.log(5) / 0.25 * k)
        assert not lemma["distance_ok"] and not lemma["applies"]
    report = ce.ADDRESSING.report(_rows([_cell(code="coded", k=4, c=7), _cell(k=4, c=7)]))
    d = addressing_cells.code_distance(4, 28)
    assert f"| coded | 4 | 7 | 0.25 | gini | no (distance {d} < (ln 5 / delta) k = 25.75, k0 = 5.40) |" in report
    assert "| block | 4 | 7 | 0.25 | gini | no (c0 = 6.44, k0 = 5.40) |" in report
    assert f"- [outside] 002 Lemmas 16-17: 1 of the 1 codes of the coded cells: their distance is below (ln 5 / " \
           f"delta) k (k = 4, c = 7, s = 0.25: {d} vs 25.75), so Lemma 17 does not apply there." in report
    # one code, counted once whatever the impurities of its cells
    both = ce.ADDRESSING.report(_rows([_cell(code="coded", k=4, c=7), _cell(code="coded", k=4, c=7,
                                                                          impurity="entropy")]))
    assert "1 of the 1 codes of the coded cells" in both


def _rows(cells, paths=4, error=0.2, first=-1, memory_first=1):
    """Hand-made addressing rows: ``paths`` per cell along its depths, every error ``error``."""
    columns = {name: [] for name in ("cell", "replicate", "code", "k", "c", "s", "impurity", "depth", "error",
                                     "first_address_depth", "memory_first")}
    for i, cell in enumerate(cells):
        for r in range(paths):
            for d in addressing_cells.depths(cell):
                for name, value in (("cell", i), ("replicate", r), *cell.items(), ("depth", d), ("error", error),
                                    ("first_address_depth", first), ("memory_first", memory_first)):
                    columns[name].append(value)
    return Table({name: np.asarray(v, dtype=object if isinstance(v[0], str) else None) for name, v in columns.items()})


def test_addressing_theory_section_tests_the_floor_and_says_the_rest():
    rows = _rows([_cell(k=8), _cell(k=6), _cell(k=10, impurity="entropy")], error=0.05)
    report = ce.ADDRESSING.report(rows)
    assert helpers.assert_valid_markdown_tables(report) == 1
    # k = 8, delta = 0.25: valid (2^8 / 128 = 2 >= ln 3) and Lemma 14 applies: 6 depths, error 0.05 >= 1/24
    assert ("- [test] 002 Thm 10 (proof, Sec. 4): error of the tree truncated at depth d <= 2^k >= delta / 6 where "
            "Lemma 14 applies and 1 - exp(-2^k delta^2 / 8) >= 2/3: holds in 6 of 6 (cell, depth) points; closest "
            "bound/measured 0.833.") in report
    # k = 6 (invalid) and entropy: outside the hypotheses, not counted
    assert "- [outside] 002 Thm 10 (proof, Sec. 4): the floor delta / 6 at 12 (cell, depth) points: " in report
    assert "- [identity] 002 Lemma 14 (Lemma 17 coded): every memory bit is queried before any addressing bit, on " \
           "the paths of the 2 cells where it applies" in report  # k = 6 and k = 8 (gini)
    assert "- [identity] 002 Thm 3's depth separation: the target's depth (c k^2 + 1, coded c k + 1) is below the " \
           "2^k horizon in the cells where Lemma 14 applies: none in these rows" in report
    separated = ce.ADDRESSING.report(_rows([_cell(k=10)], paths=1))
    assert "block k = 10, c = 7, s = 0.25 (701 < 1024): true by construction" in separated
    low = ce.ADDRESSING.report(_rows([_cell(k=8)], error=0.01))  # the floor can fail: 0.01 < 1/24
    assert "holds in 0 of 6 (cell, depth) points; closest bound/measured 4.17." in low
    assert verdicts.unkinded(report) == verdicts.unkinded(low) == []


def _agnostic_rows(c=7):
    cell = {"k": 5, "c": c, "eps": 1.0, "s": 0.25, "impurity": "gini"}
    depths = addressing_cells.depths(cell)  # 0 .. |A^free| = 16
    n = len(depths)
    error = np.r_[np.full(n, 0.2), np.where(np.asarray(depths) > 4, 0.05, 0.2)]
    return Table({"cell": np.zeros(2 * n, int), "replicate": np.repeat([0, 1], n), "k": np.full(2 * n, 5),
                  "c": np.full(2 * n, c), "eps": np.full(2 * n, 1.0), "s": np.full(2 * n, 0.25),
                  "impurity": np.full(2 * n, "gini", object), "depth": np.tile(depths, 2), "error": error,
                  "first_address_depth": np.repeat([-1, 4], n), "free_first": np.repeat([1, 0], n),
                  "distance_to_junta": np.full(2 * n, 0.4)})


def test_agnostic_theory_section_gates_on_c0_and_names_the_lemmas_of_the_block_target():
    """Issue 65: the block f_{c,k} needs Lemma 12 (c >= c0), not the paper's Lemma 16 for f_{c,k,S}; Lemma 14 for f_pi
    needs k >= k0 (5 < 5.40 here)."""
    assert addressing_cells.depths({"k": 5, "c": 7, "eps": 1.0, "s": 0.25, "impurity": "gini"})[-1] == 16
    report = ce.AGNOSTIC.report(_agnostic_rows())
    assert "- [identity] 002 Thm 11's proof (Sec. 6), with Lemma 12 for the block f_{c,k} (the paper: Lemma 16 for " \
           "f_{c,k,S}): a path that has queried no addressing bit has error min(mu_d, 1 - mu_d) >= 1/8, in the 1 cell " \
           "with c >= c0 = ln 5 / delta" in report and "1 of 2 paths have queried no addressing bit; smallest error " \
           "0.2 against the floor 1/8" in report
    # the distance to the junta, within 2x of |A^free| (2^-k + 5^-k): a [test] that can fail
    assert "- [test] 002 Thm 11's proof (Sec. 6), with Lemma 12 for the block f_{c,k}: Pr[f_pi != g] <= |A^free| " \
           "(2^-k + 5^-k) (< eps) for the nearby junta g: holds in 2 of 2 paths of the 1 cell with c >= c0; closest " \
           "bound/measured 1.26." in report
    assert "- [outside] 002 Lemma 14 for f_pi: 1 of the 1 cells: it needs Gini" in report
    assert "Lemma 16 /" not in report and "Lemma 17 (Lemma 14" not in report
    near = ce.AGNOSTIC.report(_agnostic_rows(c=5))  # c0 = ln 5 / 0.25 = 6.44 > 5: the address is not near uniform
    assert "- [outside] 002 Thm 11's proof (Sec. 6): the 1/8 floor and the distance bound in the 1 cell with c < c0 " \
           "= ln 5 / delta: Lemma 12 (the address near uniform) needs c >= c0." in near and "[identity] 002 Thm 11" \
        not in near
    assert verdicts.unkinded(report) == verdicts.unkinded(near) == []


def test_the_agnostic_trials_floor_and_distance_are_identities_where_c_reaches_c0():
    """002 Thm 11's proof with Lemma 12 (c = 7 >= c0 = 6.44, k = 5): every path's error is >= 1/8 until its first
    addressing query, and Pr[f_pi != g] <= |A^free| (2^-k + 5^-k) = 16 (1/32 + 1/3125) < eps = 1."""
    import jax

    params = {"k": 5, "c": 7, "eps": 1.0, "s": 0.25, "impurity": "gini"}
    out = jax.jit(jax.vmap(lambda key: ce._agnostic_trial(key, params)))(jax.random.split(jax.random.key(1), 4))
    depths = np.asarray(addressing_cells.depths(params))
    first = np.asarray(out["first_address_depth"])[:, None]
    clean = (first < 0) | (first >= depths[None])
    assert clean.any() and np.all(np.asarray(out["error"])[clean] >= 1 / 8 - 1e-6)
    assert np.all(np.abs(np.asarray(out["distance_to_junta"])) <= 16 * (2.0**-5 + 5.0**-5) + 1e-6)


def test_overlays_are_drawn(tmp_path):
    rows = _rows([_cell(k=8), _cell(k=10)], paths=2)
    files = ce.ADDRESSING.plot(rows, str(tmp_path / "addressing"))
    assert files and all(tmp_path.joinpath(f.rsplit("/", 1)[1]).exists() for f in files)
    from matplotlib.figure import Figure

    ax = Figure().subplots()
    ce_report.addressing_overlay(ax, _cell(k=8), "C0", 256)
    ce_report.addressing_overlay(ax, _cell(k=6), "C1", 64)
    segments = ax.collections  # the floors: solid where valid (k = 8), dotted where not (k = 6)
    assert [c.get_linestyle()[0][1] is None for c in segments] == [True, False]
    # the horizons 2^k (256, 64) and the targets' depths c k^2 + 1 (449, 253)
    assert sorted(line.get_xdata()[0] for line in ax.get_lines()) == [64, 253, 256, 449]
    assert theory.theorem10_floor(0.25) == pytest.approx(ax.collections[0].get_segments()[0][0][1])


def test_the_trials_gini_gains_respect_lemma_14s_bounds():
    """002 Lemma 14's proof at k = 6, c = 7, s = 1/4 (kappa = 4/3): every free memory bit's Gini gain >= 2^-12 / (16/3)
    = 4.578e-5, every addressing bit's <= 4/3 * 0.4^12 = 2.237e-5, at every recorded depth before the first
    addressing query (depths 0, 8, 16, 32, 48 < 64); NaN at depth 64 (the restriction holds all 2^k memory bits)."""
    import jax

    params = _cell(k=6)
    out = jax.jit(lambda key: ce._addressing_trial(key, params))(jax.random.key(0))
    memory, addr = np.asarray(out["memory_gain_min"]), np.asarray(out["address_gain_max"])
    assert int(out["first_address_depth"]) == 64 and bool(out["memory_first"])
    assert np.all(np.isfinite(memory[:-1])) and np.isnan(memory[-1]) and np.isnan(addr[-1])
    assert np.all(memory[:-1] >= 4.578e-5) and np.all(addr[:-1] <= 2.237e-5)
    assert np.all(memory[:-1] > addr[:-1])
    rows = _rows([params], paths=1)
    rows = rows.with_columns(memory_gain_min=np.asarray(memory, np.float64), address_gain_max=np.asarray(addr,
                                                                                                             np.float64))
    report = ce.ADDRESSING.report(rows)
    assert "- [identity] 002 Lemma 14's proof (Gini gains, Lemma 8's kappa): under a memory-only restriction of " \
           "size < 2^k every free memory bit's gain >= 2^(-2k) / (4 kappa) and every addressing bit's <= kappa " \
           "(2/5)^(2k)" in report


def test_gains_figure(tmp_path):
    rows = _rows([_cell(k=6), _cell(k=8)], paths=2)
    size = len(rows)
    rows = rows.with_columns(memory_gain_min=np.full(size, 1e-4), address_gain_max=np.full(size, 1e-8))
    files = ce_report.gains_plot(rows, str(tmp_path / "addressing_gains"))
    assert (tmp_path / "addressing_gains.png").stat().st_size > 5000 and len(files) == 2


def test_gini_gain_closed_form():
    """The trial's Gini gain 4 q (mu1 - mu)^2 / (1 - q) is G(mu) - q G(mu1) - (1 - q) G(mu0) for G(t) = 4 t (1 - t),
    mu = q mu1 + (1 - q) mu0 (e.g. q = 0.3, mu1 = 0.9, mu0 = 0.2: mu = 0.41, G: 0.9676 - 0.3 * 0.36 - 0.7 * 0.64 =
    0.4116 = 4 * 0.3 * 0.7 * 0.49)."""
    q, mu1, mu0 = 0.3, 0.9, 0.2
    mu = q * mu1 + (1 - q) * mu0
    G = lambda t: 4 * t * (1 - t)  # noqa: E731
    assert G(mu) - q * G(mu1) - (1 - q) * G(mu0) == pytest.approx(0.4116)
    assert 4 * q * (mu1 - mu) ** 2 / (1 - q) == pytest.approx(0.4116)


def test_the_agnostic_distance_test_fails_where_f_pi_is_far_from_its_junta():
    """Pr[f_pi != g] = 0.9 on every path, above |A^free| (2^-k + 5^-k) = 16 (1/32 + 1/3125) = 0.505: the [test]
    counts the violations."""
    rows = _agnostic_rows()
    far = ce.AGNOSTIC.report(rows.with_columns(distance_to_junta=np.full(len(rows), 0.9)))
    assert "for the nearby junta g: holds in 0 of 2 paths of the 1 cell with c >= c0" in far
