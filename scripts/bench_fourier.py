"""Fourier transforms and the LMN learner: jaxtrees vs plain numpy, measured side by side.

Workloads (defaults):

  fwht   the uniform Walsh-Hadamard transform of --tables truth tables of n = --table-n
         (64 tables of 2^20 float32 values, 256 MiB): ``jaxtrees.fourier.walsh_hadamard`` on the
         batch vs a plain numpy butterfly (n vectorized passes over each table, a loop over tables).
  lmn    degree-2 LMN (every coefficient f^(S), |S| <= 2: K = 1 + n + C(n, 2) = 2081 at n = 64) on
         --B = 4096 data sets of m = 1024 examples over n = 64 features (c-smoothed marginals,
         c = 0.1, random 2-parities): ``LowDegree(degree=2).fit`` in ``lax.map`` groups of --group
         vmapped data sets (XOR + popcount counting on packed rows) vs numpy loops over data sets
         that unpack the examples and compute the estimates as
           numpy-characters  the textbook algorithm: the m x K character matrix chi_S(x_t), then
                             F @ A / m (the baseline of ``lmn_speedup_vs_numpy``);
           numpy-gram        a degree-2 shortcut: [1 | chi]^T diag(F) [1 | chi] / m, one BLAS
                             product that holds every estimate.
         The numpy loops run on --numpy-trials data sets and are scaled to B; all engines' estimates
         are checked equal on those.

What bounds fwht on a CPU: docs/benchmarks.md ("Profiling scripts/bench_fourier.py").

Timings are after compilation, best of --reps interleaved rounds. The last lines are
``fwht_speedup_vs_numpy: <ratio>`` and ``lmn_speedup_vs_numpy: <ratio>``.

    python scripts/bench_fourier.py             # reference workloads (about a minute on 2 CPU cores)
    python scripts/bench_fourier.py --B 256 --tables 4 --table-n 14
"""

from __future__ import annotations

import argparse
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

import jaxtrees as jt
from jaxtrees.core.programs import jit
from jaxtrees.core import bits
from jaxtrees.fourier import walsh_hadamard
from jaxtrees.hypotheses.polynomial import subsets
from jaxtrees.learners.fourier import LowDegree

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import interleaved_best  # noqa: E402


def numpy_walsh_hadamard(table):
    """The n-pass butterfly on one table ``float32[2^n]`` (the same normalization, 2^-n)."""
    n = table.size.bit_length() - 1
    for i in range(n):
        v = table.reshape(2 ** (n - 1 - i), 2, 2**i)
        table = np.stack([v[:, 0] + v[:, 1], v[:, 0] - v[:, 1]], axis=1).reshape(-1) * np.float32(0.5)
    return table


def numpy_characters(X, F, sets):
    """Textbook LMN: the character matrix A[t, S] = prod_{i in S} (1 - 2 x_ti), then F @ A / m."""
    chi = np.concatenate([1.0 - 2.0 * X, np.ones((X.shape[0], 1), np.float32)], axis=1)
    return F @ np.prod(chi[:, sets], axis=2) / X.shape[0]


def numpy_gram(X, F, rows, cols):
    """Degree 2 by one product: G = [1 | chi]^T diag(F) [1 | chi] / m holds f~(emptyset) at [0, 0],
    f~({i}) at [0, i + 1] and f~({i, j}) at [i + 1, j + 1]; ``rows, cols`` pick them in subsets' order."""
    chi = np.concatenate([np.ones((X.shape[0], 1), np.float32), 1.0 - 2.0 * X], axis=1)
    return ((chi * F[:, None]).T @ chi / X.shape[0])[rows, cols]


def data_sets(key, B, m, n, c):
    def one(key):
        kp, kf, ks = jax.random.split(key, 3)
        return jt.draw(ks, jt.smoothed(c=c).marginals(kp, n), jt.random_parity(kf, n, 2), m)

    return jit(jax.vmap(one))(jax.random.split(key, B))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", type=int, default=64)
    ap.add_argument("--table-n", type=int, default=20)
    ap.add_argument("--B", type=int, default=4096)
    ap.add_argument("--m", type=int, default=1024)
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--c", type=float, default=0.1)
    ap.add_argument("--group", type=int, default=256)
    ap.add_argument("--numpy-trials", type=int, default=32)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args(argv)
    for name in ("tables", "table_n", "B", "m", "n", "group", "numpy_trials", "reps"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.n < 2:
        ap.error(f"--n must be >= 2 (degree-2 LMN), got {args.n}")
    print(f"device: {jax.devices()[0].device_kind} ({jax.default_backend()})")

    # ------------------------------------------------------------------------------- fwht
    tables = jt.fourier.signs(jax.random.bernoulli(jax.random.key(0), 0.5, (args.tables, 2**args.table_n)))
    host_tables = np.asarray(tables)
    same = np.allclose(np.asarray(walsh_hadamard(tables[:1]))[0], numpy_walsh_hadamard(host_tables[0]), atol=1e-5)
    fwht = interleaved_best({"jax": lambda: walsh_hadamard(tables),
                             "numpy": lambda: [numpy_walsh_hadamard(t) for t in host_tables]}, args.reps)
    print(f"fwht: {args.tables} tables of n = {args.table_n}; agree with numpy: {same}")
    print(f"  jaxtrees walsh_hadamard (batch)   {1e3 * fwht['jax']:10.1f} ms")
    print(f"  numpy butterfly (loop of tables)  {1e3 * fwht['numpy']:10.1f} ms")

    # -------------------------------------------------------------------------------- lmn
    B, G, T = args.B, min(args.group, args.B), min(args.numpy_trials, args.B)
    data = data_sets(jax.random.key(1), B, args.m, args.n, args.c)
    learner = LowDegree(degree=2)
    fit = jit(lambda d: jax.lax.map(lambda x: learner.fit(None, x).values, d, batch_size=G))
    estimates = np.asarray(fit(data))
    host = jax.device_get(data)
    sets = subsets(args.n, 2)
    rows, cols = np.where(sets < args.n, sets + 1, 0).T  # padding -> the constant column 0
    samples = []
    for b in range(T):
        X = np.asarray(bits.unpack(host.X[b], args.m)).T.astype(np.float32)
        F = 1.0 - 2.0 * np.asarray(bits.unpack(host.y[b], args.m)).astype(np.float32)
        samples.append((X, F))
    agree = (np.allclose(numpy_characters(*samples[0], sets), estimates[0], atol=1e-5)
             and np.allclose(numpy_gram(*samples[0], rows, cols), estimates[0], atol=1e-5))
    lmn = interleaved_best({
        "jax": lambda: fit(data),
        "characters": lambda: [numpy_characters(X, F, sets) for X, F in samples],
        "gram": lambda: [numpy_gram(X, F, rows, cols) for X, F in samples],
    }, args.reps)
    scale = B / T
    print(f"lmn: degree 2, B = {B} data sets, m = {args.m}, n = {args.n} (K = {len(sets)} coefficients each), "
          f"c = {args.c}, random 2-parities; numpy on {T} data sets, scaled; estimates agree: {agree}")
    for name, seconds in (("jaxtrees LowDegree (lax.map of vmap groups)", lmn["jax"]),
                          ("numpy-characters (m x K matrix, F @ A)", lmn["characters"] * scale),
                          ("numpy-gram (one BLAS product, degree 2 only)", lmn["gram"] * scale)):
        print(f"  {name:45s} {1e3 * seconds:10.1f} ms {B / seconds:12,.0f} data sets/s")
    print(f"lmn_speedup_vs_numpy_gram: {lmn['gram'] * scale / lmn['jax']:.1f}")
    print(f"fwht_speedup_vs_numpy: {fwht['numpy'] / fwht['jax']:.1f}")
    print(f"lmn_speedup_vs_numpy: {lmn['characters'] * scale / lmn['jax']:.1f}")


if __name__ == "__main__":
    main()
