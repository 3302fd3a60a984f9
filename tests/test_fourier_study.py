"""The ``fourier`` study: its trial against the learners called directly, and its headline, LMN
(degree k), the Lasso and KM (queries) recovering uniform k-parities that ID3 does not, in the
rows and in the report."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxtrees.core import sampling
from jaxtrees.experiments import runner, studies
from jaxtrees.experiments.studies import fourier
from jaxtrees.fourier import spectra
from jaxtrees.hypotheses.base import sample_error

PARAMS = {"target": "parity", "n": 8, "k": 3, "c": 0.0, "impurity": "entropy", "theta": 0.1, "l1": 0.05, "test_m": 1024,
          "m_min": 128, "m_max": 512}  # 3 grid points: one compiled Lasso and one KM serve them all


def test_trial_matches_the_learners_fitted_directly():
    key = jax.random.key(3)
    out = jax.jit(lambda k: fourier._trial(k, PARAMS))(key)
    keys = fourier.trial_keys(key, "distribution", "target", "sample")
    f = fourier.TARGETS["parity"](keys["target"], 8, 3)
    p = jnp.full((8,), 0.5)
    sample = sampling.draw(keys["sample"], p, f, 512, precision_bits=fourier.PRECISION_BITS)
    test = sampling.draw(jax.random.fold_in(keys["sample"], 1), p, f, 1024, precision_bits=fourier.PRECISION_BITS)
    data = sampling.prefix(sample, 128)  # m = 128 is the first point of the grid 128, 256, 512
    h = fourier.lmn(8, 3, 0.1).fit(None, data)
    assert float(out["lmn_error"][0]) == pytest.approx(float(sample_error(h, test)))
    assert float(out["lmn_error"][-1]) == 0.0 and bool(out["lmn_success"][-1])
    h = fourier.sparse(8, 3, 0.05).fit(None, sampling.head(sample, 128))  # the Lasso on the first 128 examples
    assert float(out["sparse_error"][0]) == pytest.approx(float(sample_error(h, test)))
    km = fourier.km(8, 3, 0.1, 128)  # KM at the same grid point: 128 query triples per level
    h = km.fit(jax.random.fold_in(keys["sample"], 3), fourier.Queries(f, 8))
    assert float(out["km_error"][0]) == pytest.approx(float(sample_error(h, test)))
    assert int(out["km_queries"][0]) == km.queries(8) == 17 * 128 and km.frontier == 64
    assert float(out["target_l1"]) == pytest.approx(1.0) and int(out["target_degree"]) == 3
    assert np.all(np.asarray(out["tree_l1"]) <= np.asarray(out["tree_leaves"]) + 1e-4)
    assert np.all(np.asarray(out["tree_degree"]) <= np.asarray(out["tree_depth"]))
    assert float(spectra.l1(spectra.spectrum(f, 8))) == pytest.approx(float(out["target_l1"]))


def test_lmn_lasso_and_km_learn_uniform_parities_that_id3_does_not(tmp_path):
    config = runner.configure(studies.get("fourier"), quick=True, overrides={k: v for k, v in PARAMS.items()},
                              seed=0, replicates=32)
    path = runner.run(studies.get("fourier"), config, str(tmp_path), progress=False)
    rows = runner.read_results(path)
    top = rows.where(m=512)
    assert len(top) == 32
    lmn, id3, km, lasso = (top[f"{name}_success"].mean() for name in ("lmn", "id3", "km", "sparse"))
    assert lmn >= 0.9 and km >= 0.9 and lasso >= 0.9 and id3 <= 0.2, (lmn, km, lasso, id3)
    report = studies.get("fourier").report(rows)
    line = next(line for line in report.splitlines() if line.startswith("| parity | 8 | 3 | 0.1 | 0.05 | 0.0 |"))
    assert all(f"| {rate:.2f} [" in line for rate in (lmn, id3, km, lasso))
