"""Weighted growth: jaxtrees with per-example weights vs scikit-learn's ``sample_weight``, and the
two ways to count weighted examples, measured side by side.

Workload (defaults): B = 1024 data sets, each with c-smoothed marginals (c = 0.1), a random
6-junta, m = 1024 examples on n = 64 features, weights u ~ U(0, 1] (float32, AdaBoost-like),
max depth 6, Gini. The same data sets and weights feed every engine; timings are after
compilation, best of --reps interleaved rounds.

Sections:
  growth     jaxtrees ``jt.grow`` on weighted data (float weights: one matmul per level over the
             unpacked node masks), in ``lax.map`` groups of --group vmapped data sets; the same data
             unweighted (popcounts) for scale; scikit-learn ``DecisionTreeClassifier(criterion="gini",
             max_depth=D).fit(X, y, sample_weight=u, check_input=False)`` on --sklearn-trials data
             sets, scaled to B.
  counting   the formulation choice, on integer weights (bagging's bootstrap counts <= 2^b - 1):
             the weighted counts of the 2^D - 1 node masks of one full tree per data set, [w1 | w1y],
               matmul      unpack the masks, multiply by u, one float32 matmul against X^T (the
                           library's choice);
               bitsliced   u in b bit planes S_j (bitsets), w1 = sum_j 2^j popcount(M & S_j & X_i):
                           b popcount passes, exact in integers;
             both give the same integers (checked).

Prints a table; the last line is ``weighted_growth_speedup_vs_sklearn: <ratio>``.

    python scripts/bench_weighted.py           # reference workload (about a minute on 2 CPU cores)
    python scripts/bench_weighted.py --B 256 --sklearn-trials 16
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
from jaxtrees.learners.greedy import weighted_counts

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import interleaved_best  # noqa: E402


def data_sets(key, B, m, n, k, c):
    def one(key):
        kp, kf, ks, ku = jax.random.split(key, 4)
        p = jt.smoothed(c=c).marginals(kp, n)
        data = jt.draw(ks, p, jt.random_junta(kf, n, k), m)
        u = 1.0 - jax.random.uniform(ku, (m,))  # (0, 1]
        return jt.with_weights(data, u)

    return jit(jax.vmap(one))(jax.random.split(key, B))


def matmul_counts(masks, X, y, u):
    """[w1 | w1y] of node masks ``[L, W]`` with float weights ``u[S]``: the library's formulation."""
    slots = u.shape[-1]
    Xf = bits.unpack(X, slots).astype(jnp.float32)
    mu = bits.unpack(masks, slots).astype(jnp.float32) * u
    both = jnp.concatenate([mu, mu * bits.unpack(y, slots).astype(jnp.float32)])
    return weighted_counts(Xf, both).astype(jnp.int32)


def bitsliced_counts(masks, X, y, counts, b):
    """The same with integer weights ``counts[S] < 2^b`` in b bit planes: b popcount passes."""
    planes = bits.pack(((counts[None, :] >> jnp.arange(b)[:, None]) & 1).astype(bool))  # [b, W]
    both = jnp.concatenate([masks, masks & y])  # [2L, W]
    total = jnp.zeros((both.shape[0], X.shape[0]), jnp.int32)
    for j in range(b):
        total = total + (bits.count_and((both & planes[j])[:, None, :], X[None, :, :]) << j)
    return total


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--B", type=int, default=1024)
    ap.add_argument("--m", type=int, default=1024)
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--k", type=int, default=6)
    ap.add_argument("--depth", type=int, default=6)
    ap.add_argument("--c", type=float, default=0.1)
    ap.add_argument("--group", type=int, default=64)
    ap.add_argument("--bits", type=int, default=4, help="bit planes of the integer weights (counts < 2^bits)")
    ap.add_argument("--sklearn-trials", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args(argv)
    for name in ("B", "m", "n", "k", "depth", "group", "bits", "sklearn_trials", "reps"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    B, G = args.B, min(args.group, args.B)
    print(f"device: {jax.devices()[0].device_kind} ({jax.default_backend()}); workload: B = {B} data sets, "
          f"m = {args.m}, n = {args.n}, random {args.k}-juntas, c = {args.c}, depth {args.depth}, Gini, "
          f"weights U(0, 1]")
    data = data_sets(jax.random.key(0), B, args.m, args.n, args.k, args.c)
    rule = jt.GrowthRule(max_depth=args.depth, impurity="gini", exact_weights=False)  # the fast counting, timed
    grow = jit(lambda d: jax.lax.map(lambda x: jt.grow(x, rule), d, batch_size=G))
    unweighted = data._replace(weight=None)

    # counting: the node masks of each data set's weighted tree, all levels, as one [L, W] array
    trees = grow(data)
    masks = jit(jax.vmap(lambda t, d: _node_masks(t, d.X, d.valid)))(trees, data)
    counts = jax.random.randint(jax.random.key(1), data.weight.shape, 0, 2**args.bits)
    counts = jnp.where(data.weight > 0, counts, 0)
    mm = jit(lambda M, d, c: jax.lax.map(lambda a: matmul_counts(a[0], a[1].X, a[1].y, a[2].astype(jnp.float32)),
                                          (M, d, c), batch_size=G))
    bs = jit(lambda M, d, c: jax.lax.map(lambda a: bitsliced_counts(a[0], a[1].X, a[1].y, a[2], args.bits),
                                          (M, d, c), batch_size=G))
    same = bool(jnp.all(mm(masks, data, counts) == bs(masks, data, counts)))

    thunks = {"grow weighted": lambda: grow(data), "grow unweighted": lambda: grow(unweighted),
              "count matmul": lambda: mm(masks, data, counts), "count bitsliced": lambda: bs(masks, data, counts)}
    for thunk in thunks.values():
        jax.block_until_ready(thunk())
    best = interleaved_best(thunks, args.reps)

    from sklearn.tree import DecisionTreeClassifier

    T = min(args.sklearn_trials, B)
    host = jax.device_get(data)
    sets = []
    for b in range(T):
        X = np.asarray(bits.unpack(host.X[b], args.m)).T.astype(np.float32)
        y = np.asarray(bits.unpack(host.y[b], args.m)).astype(np.int64)
        sets.append((X, y, np.asarray(host.weight[b][: args.m], np.float64)))

    def sklearn_loop():
        for X, y, u in sets:
            DecisionTreeClassifier(criterion="gini", max_depth=args.depth).fit(X, y, sample_weight=u, check_input=False)

    sk = interleaved_best({"sk": sklearn_loop}, args.reps)["sk"] * B / T

    rows = [("growth", "jaxtrees weighted (float weights, matmul counts)", best["grow weighted"]),
            ("growth", "jaxtrees unweighted (popcounts), same data", best["grow unweighted"]),
            ("growth", f"scikit-learn sample_weight loop ({T} fits, scaled)", sk),
            ("counting", "matmul over unpacked node masks", best["count matmul"]),
            ("counting", f"bit-sliced popcounts, b = {args.bits}", best["count bitsliced"])]
    print(f"{'section':10s} {'engine':55s} {'ms':>10s} {'data sets/s':>12s}")
    for section, engine, seconds in rows:
        print(f"{section:10s} {engine:55s} {1e3 * seconds:10.1f} {B / seconds:12,.0f}")
    print(f"counting formulations agree on integer weights: {same}")
    print(f"bitsliced_over_matmul_time: {best['count bitsliced'] / best['count matmul']:.2f}")
    print(f"weighted_over_unweighted_time: {best['grow weighted'] / best['grow unweighted']:.2f}")
    print(f"weighted_growth_speedup_vs_sklearn: {sk / best['grow weighted']:.1f}")


def _node_masks(tree, X, valid):
    """``uint32[2^D - 1, W]``: the example bitset of every internal heap slot (0 where absent)."""
    masks, out = valid[None], []
    for level in range(tree.max_depth):
        lo, hi = 2**level - 1, 2 ** (level + 1) - 1
        f = tree.feature[lo:hi]
        right = jnp.where((f >= 0)[:, None], masks & X[jnp.maximum(f, 0)], jnp.uint32(0))
        left = jnp.where((f >= 0)[:, None], masks & ~right, jnp.uint32(0))
        out.append(masks)
        masks = jt.hypotheses.tree.interleave(left, right)
    return jnp.concatenate(out)


if __name__ == "__main__":
    main()
