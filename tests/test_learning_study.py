"""The parity and juntas studies' exact signal (000 Theorem 7's eps* and p_min) and their Theory sections."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxtrees import targets
from jaxtrees.experiments.studies import learning, learning_report, signal, theory
from jaxtrees.experiments.table import Table


def _brute(table, support, p):
    """eps* and p_min by enumeration: every restriction w of the support, every free i, over {0,1}^K."""
    K = len(support)
    ps = np.asarray(p, np.float64)[support]
    a = (np.arange(2**K)[:, None] >> np.arange(K)) & 1
    best = np.inf
    for w in itertools.product((0, 1, None), repeat=K):
        ok = np.all([(a[:, j] == w[j]) if w[j] is not None else np.ones(2**K, bool) for j in range(K)], axis=0)
        if len(set(np.asarray(table)[ok].tolist())) < 2:
            continue
        weight = np.prod(np.where(a == 1, ps, 1 - ps), axis=1) * ok
        weight /= weight.sum()
        mu = weight @ table
        signal = 0.0
        for i in (j for j in range(K) if w[j] is None):
            mu1 = (weight * (a[:, i] == 1)) @ table / (weight * (a[:, i] == 1)).sum()
            signal = max(signal, abs(ps[i] * (mu1 - mu)))
        best = min(best, signal)
    return best, np.prod(np.minimum(ps, 1 - ps))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_restriction_signal_equals_enumeration(seed):
    rng = np.random.default_rng(seed)
    n, k = 7, 3
    p = jnp.asarray(rng.uniform(0.3, 0.7, n), jnp.float32)
    f = jax.jit(targets.random_junta, static_argnums=(1, 2))(jax.random.key(seed), n, k)
    eps, p_min = jax.jit(signal.restriction_signal)(f, p)
    want_eps, want_p = _brute(np.asarray(f.table, np.float64), np.asarray(f.support), p)
    assert float(eps) == pytest.approx(want_eps, rel=1e-4) and float(p_min) == pytest.approx(want_p, rel=1e-5)
    padded = jax.jit(lambda key: targets.random_junta(key, n, k, k_max=5))(jax.random.key(seed))  # the same function: the same signal
    assert np.allclose(jax.jit(signal.restriction_signal)(padded, p), (eps, p_min), rtol=1e-5)


def test_parity_signal_is_lemma_9s_exact_covariance():
    # chi_{0,1,3}, p = (0.6, 0.3, ., 0.9): the full support free gives max_j p_j (1 - p_j) prod |2 p_i - 1| = 0.0768
    # (theory.parity_covariance), every other restriction more (e.g. x_3 fixed: 0.24 * 0.4 = 0.096); p_min = 0.4 * 0.3
    # * 0.1 = 0.012.
    p = jnp.asarray([0.6, 0.3, 0.5, 0.9, 0.55, 0.45], jnp.float32)
    eps, p_min = signal.restriction_signal(targets.parity(jnp.asarray([0, 1, 3]), 6), p)
    assert float(eps) == pytest.approx(0.0768, rel=1e-5) and float(p_min) == pytest.approx(0.012, rel=1e-5)
    assert float(eps) == pytest.approx(theory.parity_covariance(np.asarray(p), [1, 1, 0, 1, 0, 0]).max(), rel=1e-5)
    # the uniform distribution: a parity's every restriction leaving two or more bits free has signal 0
    assert float(signal.restriction_signal(targets.parity(jnp.asarray([0, 1, 3]), 6), jnp.full(6, 0.5))[0]) == 0.0


def _junta_rows(c=(0.1, 0.2), replicates=8, seed=0):
    """Hand-made juntas rows: n = 16, k = 2, per c; eps* spread over [1e-3, 3e-2]; success from m = 64 (c = 0.2) or
    256 (c = 0.1)."""
    rng = np.random.default_rng(seed)
    ms = [16, 64, 256, 1024]
    cells = [(cc, r, m) for cc in c for r in range(replicates) for m in ms]
    cc, r, m = (np.asarray(v) for v in zip(*cells))
    eps = np.repeat(np.geomspace(1e-3, 3e-2, replicates), len(ms))
    eps = np.tile(eps, len(c))
    success = m >= np.where(cc == 0.2, 64, 256)
    size = len(cells)
    return Table({"cell": np.searchsorted(np.asarray(c), cc), "replicate": r, "n": np.full(size, 16),
                  "k": np.full(size, 2), "impurity": np.full(size, "entropy", object), "c": cc, "m": m,
                  "success": success.astype(int), "exact_error": np.where(success, 0.0, 0.1),
                  "support_recovered": success.astype(int), "eps_star": eps, "p_min": np.full(size, 0.16)})


def _gini(rows):
    return rows.with_columns(impurity=np.full(len(rows), "gini", object))


def test_juntas_theory_section_and_signal_figure(tmp_path):
    """Issue 65: Lemma 11 uncapped (vacuous here), 000's Lipschitz theorems by their form on Gini cells only."""
    rows = _junta_rows()
    part = learning.JUNTAS.report(rows).split("## Theory")[1]
    # Lemma 11 with the union over 3^2 restrictions, alpha = 1/2 - c, uncapped: at c = 0.2, t = 3e-2 (the largest,
    # P = 1): 9 * 100 * sqrt(0.03 / 0.18) = 367; at c = 0.1, t = 1e-3 (P = 1/8): 9 * 400 * sqrt(1e-3 / 0.32) * 8 = 1610
    assert "- [vacuous] 000 Lemma 11, union over the 3^k restrictions: P[eps* <= t] <= 3^k (2/c)^k sqrt(t / (2 " \
           "alpha^2)), alpha = 1/2 - c, uncapped: bound / measured " in part and "1.61e+03 over 16 smoothed trials: " \
           "vacuous at this size." in part
    assert "- [outside] 000 Thms 7, 12: the 2 entropy cells: entropy is not Lipschitz" in part
    assert "[form]" not in part  # entropy only: no count, no fit of a Lipschitz theorem
    assert "no smoothed Gini cell in these rows (the default grids have them; `--set impurity=entropy,gini` with a " \
           "c > 0 adds them)." in part
    gini = learning.JUNTAS.report(_gini(rows)).split("## Theory")[1]
    # Theorem 12: m90 = 256 at 1/c = 10, 64 at 1/c = 5: exponent ln 4 / ln 2 = 2, every resample alike; the bound's own
    # exponent between c = 0.1 and 0.2 (alpha = 0.4, 0.3), c^-16 alpha^-12: 16 - 12 log2(4/3) = 11.0
    # the bound's exponent (<= 11) lies beyond the largest slope this grid can show (6): [vacuous]
    assert "- [vacuous] 000 Thm 12: m ~ B^k beta^-2 gamma^2 c^(-8k)" in gini
    assert ("n = 16, k = 2 (8k = 16): 2 [2, 2] against <= 11: beyond the slopes the grid can show (its largest 6), so "
            "no measurement here could contradict it.") in gini
    # Theorem 7: both cells have the same eps* (the same spread): no fit against 1/eps*
    assert "- [form] 000 Thm 7: " in gini and "2 of 2 Gini cells reaching 90%: no fit" in gini and "[outside]" not in gini
    files = learning.JUNTAS.plot(rows, str(tmp_path / "juntas"))
    assert str(tmp_path / "juntas_signal.png") in files
    old = Table({name: rows[name] for name in rows.names if name not in ("eps_star", "p_min")})
    assert "## Theory" not in learning.JUNTAS.report(old)  # rows of an earlier run: no signal, no section


def test_parity_theory_section_lemma_9_and_theorem_10s_form():
    rows = _gini(_junta_rows())
    size = len(rows)
    rows = Table({**{n: rows[n] for n in ("cell", "replicate", "c", "m", "success", "exact_error", "p_min",
                                          "eps_star", "impurity")},
                  "log2_n": np.full(size, 4), "alpha": np.full(size, 0.05)})
    part = learning.PARITY.report(rows).split("## Theory")[1]
    assert "- [identity] 000 Lemma 9: eps* > alpha^2 (2c)^(k-1) for p_j in (alpha, 1 - alpha), |p_j - 1/2| >= c" in part
    # Theorem 10 as derived, at a fixed alpha: exponent 4k - 4 = 12 of 1/c; measured 2
    # over c = 0.1, 0.2 on this m grid no exponent above 6 can show: 12 is beyond it, so the line is [vacuous]
    assert "- [vacuous] 000 Thm 10: " in part and "2 of 2 cells at n = 16, alpha = 0.05 (as printed: 20): 2 [2, 2] " \
        "against <= 12: beyond the slopes the grid can show (its largest 6)" in part
    other = learning.PARITY.report(rows.with_columns(impurity=np.full(size, "kearns_mansour", object)))
    assert "- [outside] 000 Thms 7, 10: the 2 Kearns-Mansour cells: Kearns-Mansour is not Lipschitz" in other


def test_parity_signal_figure_draws_m90_against_1_over_c_and_ln_n(tmp_path):
    rows = _junta_rows()
    size = len(rows)
    rows = Table({**{n: rows[n] for n in ("cell", "replicate", "c", "m", "success", "exact_error", "p_min",
                                          "eps_star")},
                  "log2_n": np.full(size, 4), "alpha": np.full(size, 0.05), "impurity": rows["impurity"]})
    files = learning_report.signal_plot(rows, str(tmp_path / "parity_signal"), ["log2_n", "impurity", "alpha", "c"],
                                        "parity")
    assert (tmp_path / "parity_signal.png").stat().st_size > 5000 and len(files) == 2
