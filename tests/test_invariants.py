"""A study's declared invariants (issue 64 item 3; ``check=Checks(cell=, rows=)``): rows whose outputs contradict each other (success without
exact_error <= 1e-6, an error outside [0, 1] or NaN) are refused by the figures and report, naming the invariant,
how many trials break it and the first."""

import types

import numpy as np
import pytest

import jaxtrees as jt
from jaxtrees.experiments import reporting
from jaxtrees.experiments.table import Table

STUDY = types.SimpleNamespace(name="mine", invariants=jt.exact_invariants)


def _rows(error, success):
    size = len(error)
    return Table({"cell": np.arange(size) // 2, "replicate": np.arange(size) % 2, "m": np.full(size, 16),
                  "exact_error": np.asarray(error, np.float32), "success": np.asarray(success, np.int8)})


def test_rows_that_keep_the_invariants_pass():
    reporting.check_invariants(STUDY, _rows([0.0, 1e-6, 0.25, 1.0], [1, 1, 0, 0]), "out/mine")
    reporting.check_invariants(types.SimpleNamespace(name="x", invariants=None), _rows([2.0], [1]), "out/x")


@pytest.mark.parametrize("error, success, said", [
    ([0.0, 0.0, 0.25, 0.0], [1, 0, 0, 1], "1 trial(s) break the study's invariant 'success exactly where exact_error "
                                          "<= 1e-06' (the first: cell 0, replicate 1)"),
    ([0.0, 0.5, 0.25, 2e-6], [1, 1, 0, 1], "2 trial(s) break the study's invariant 'success exactly where"),
    ([0.0, 0.0, np.nan, 0.0], [1, 1, 0, 1], "1 trial(s) break the study's invariant '0 <= exact_error <= 1' (the "
                                            "first: cell 1, replicate 0)"),
    ([0.0, 0.0, 1.5, -0.25], [1, 1, 0, 0], "2 trial(s) break the study's invariant '0 <= exact_error <= 1'"),
])
def test_rows_that_break_one_are_refused_naming_it(error, success, said):
    with pytest.raises(ValueError, match="out/mine: ") as e:
        reporting.check_invariants(STUDY, _rows(error, success), "out/mine")
    assert said in str(e.value) and "no figures or report are made from them" in str(e.value)


def test_an_invariant_that_is_not_one_bool_per_row_is_named():
    bad = types.SimpleNamespace(name="mine", invariants=lambda rows: {"half": np.ones(1, bool)})
    with pytest.raises(ValueError, match=r"invariants\(rows\)\['half'\] must be a bool array of one value per row"):
        reporting.check_invariants(bad, _rows([0.0, 0.0], [1, 1]), "out/mine")


def test_a_run_whose_trial_contradicts_its_invariant_writes_rows_but_no_report(tmp_path):
    """End to end: the trial says success where its exact error is 1/2; the rows are written (resumable, readable),
    the figures and report refused with the invariant named."""
    import jax.numpy as jnp

    def trial(key, params):
        """A trial whose outputs contradict each other."""
        return {"exact_error": jnp.float32(0.5) + 0 * params["c"], "success": jnp.bool_(True)}

    study = jt.Study(name="contradicts", trial=trial, grid={"c": [0.0, 0.1]}, replicates=2,
                     check=jt.Checks(rows=jt.exact_invariants))
    with pytest.raises(ValueError, match="4 trial\\(s\\) break the study's invariant 'success exactly where"):
        jt.run(study, out=str(tmp_path), quick=True)
    assert len(jt.experiments.results.read_results(str(tmp_path / "contradicts"))) == 4
    assert not (tmp_path / "contradicts" / "report.md").exists()
