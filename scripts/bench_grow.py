"""Benchmark: batched tree growth vs a scikit-learn loop, on the same data, in one run.

Reference workload (defaults): B = 4096 c-smoothed product distributions (p_i ~ U[0.4, 0.6]),
a random 6-junta each, m = 1024 examples, n = 64 features, max depth 6, entropy.

Times, separately and after compilation (best of --reps):
  sampling  draw marginals, target and packed sample for all B trials (jit + vmap);
  growth    jaxtrees.grow on all B samples (jit + vmap);
  exact     jaxtrees.grow_exact (population growth, exact gains, no sample) on the same B
            distributions and targets;
  sklearn   DecisionTreeClassifier(criterion="entropy", max_depth=D).fit on --sklearn-trials of
            the same data sets (unpacked to float32 arrays beforehand, check_input=False, so the
            loop pays for fitting only), scaled to B.
It also measures a fused AND + popcount + sum over the same number of words the growth counts,
the machine's rate for the counting alone, and checks a few trees against scikit-learn's.

The last line is ``speedup_vs_sklearn: <ratio>`` (growth only). ``--json PATH`` saves the numbers.

    python scripts/bench_grow.py            # reference workload
    python scripts/bench_grow.py --quick    # B = 256, for a smoke run
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxtrees as jt


def best_time(fn, reps):
    jax.block_until_ready(fn())  # compile
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t0)
    return min(times)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--B", type=int, default=4096)
    ap.add_argument("--m", type=int, default=1024)
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--k", type=int, default=6)
    ap.add_argument("--depth", type=int, default=6)
    ap.add_argument("--c", type=float, default=0.1)
    ap.add_argument("--impurity", default="entropy", choices=["entropy", "gini"])
    ap.add_argument("--sklearn-trials", type=int, default=128)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="B = 256, 32 scikit-learn trials, 2 reps")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)
    if args.quick:
        args.B, args.sklearn_trials, args.reps = 256, 32, 2

    from sklearn.tree import DecisionTreeClassifier

    B, m, n, k, D = args.B, args.m, args.n, args.k, args.depth
    family = jt.smoothed(c=args.c)
    rule = jt.GrowthRule(max_depth=D, impurity=args.impurity)

    def problem(key):
        kp, kf, _ = jax.random.split(key, 3)
        return family.marginals(kp, n), jt.random_junta(kf, n, k)

    def make(key):
        p, f = problem(key)
        return jt.draw(jax.random.split(key, 3)[2], p, f, m)

    keys = jax.random.split(jax.random.key(0), B)
    sample_fn = jax.jit(jax.vmap(make))
    grow_fn = jax.jit(jax.vmap(jt.grow, in_axes=(0, None)))
    t_sample = best_time(lambda: sample_fn(keys), args.reps)
    samples = jax.block_until_ready(sample_fn(keys))
    t_grow = best_time(lambda: grow_fn(samples, rule), args.reps)
    trees = grow_fn(samples, rule)
    ps, fs = jax.block_until_ready(jax.jit(jax.vmap(problem))(keys))
    exact_fn = jax.jit(jax.vmap(jt.grow_exact, in_axes=(0, 0, None)))
    t_exact = best_time(lambda: exact_fn(ps, fs, rule), args.reps)

    # Roofline for the counting: words the growth ANDs and popcounts (sibling subtraction:
    # 2^(D-1) node counts of 2 n W words per tree), as one fused kernel of the same shape
    # with no growth logic around it: rows of W words ANDed with n cached feature rows.
    W = jt.bits.n_words(m)
    words = B * 2 ** max(D - 1, 0) * 2 * n * W
    a = jax.random.bits(jax.random.key(1), (words // (n * W), 1, W), jnp.uint32)
    b = jax.random.bits(jax.random.key(2), (1, n, W), jnp.uint32)
    roof = jax.jit(lambda a, b: jt.bits.count(a & b, axis=-1))
    t_roof = best_time(lambda: roof(a, b), args.reps)
    del a

    # scikit-learn on the same data sets, unpacked once (not timed).
    T = min(args.sklearn_trials, B)
    unpack = jax.jit(jax.vmap(lambda s: (jt.bits.unpack(s.X, m).T, jt.bits.unpack(s.y, m))))
    Xs, ys = unpack(jax.tree.map(lambda x: x[:T], samples))
    Xs = [np.asfortranarray(x, dtype=np.float32) for x in np.asarray(Xs)]
    ys = np.asarray(ys).astype(np.float64)
    crit = args.impurity
    t0 = time.perf_counter()
    fitted = [DecisionTreeClassifier(criterion=crit, max_depth=D).fit(Xs[i], ys[i], check_input=False) for i in range(T)]
    t_sk = (time.perf_counter() - t0) / T * B
    t0 = time.perf_counter()
    for i in range(min(T, 32)):
        DecisionTreeClassifier(criterion=crit, max_depth=D).fit(Xs[i], ys[i])
    t_sk_checked = (time.perf_counter() - t0) / min(T, 32) * B

    # Same predictions on the training data (trees may differ where gains tie).
    preds = jax.jit(jax.vmap(jt.predict))(jax.tree.map(lambda x: x[:T], trees), jnp.asarray(np.stack(Xs), jnp.int32))
    agree = float(np.mean([np.array_equal(np.asarray(preds[i]), fitted[i].predict(Xs[i]).astype(int)) for i in range(T)]))

    result = {
        "workload": {"B": B, "m": m, "n": n, "k": k, "max_depth": D, "impurity": crit, "c": args.c,
                     "distribution": f"smoothed(c={args.c}) around 1/2", "target": f"random {k}-junta"},
        "device": str(jax.devices()[0]), "backend": jax.default_backend(), "jax": jax.__version__,
        "cpu": platform.processor() or platform.machine(),
        "sampling_s": t_sample, "growth_s": t_grow,
        "growth_trees_per_s": B / t_grow, "exact_growth_s": t_exact,
        "count_words": words, "growth_words_per_s": words / t_grow,
        "and_popcount_words_per_s": words / t_roof,
        "sklearn_s_scaled": t_sk, "sklearn_with_input_checks_s_scaled": t_sk_checked,
        "sklearn_trials": T, "sklearn_same_predictions": agree,
        "speedup_vs_sklearn": t_sk / t_grow,
    }
    print(f"workload: B={B} m={m} n={n} k={k} depth={D} {crit}, smoothed c={args.c}; device {result['device']}")
    print(f"sampling      {t_sample * 1e3:9.1f} ms   ({B * n * m / t_sample / 1e9:.2f} G bits/s)")
    print(f"growth        {t_grow * 1e3:9.1f} ms   ({B / t_grow:,.0f} trees/s)")
    print(f"exact growth  {t_exact * 1e3:9.1f} ms   ({B / t_exact:,.0f} population trees/s, no sample)")
    print(f"counting      {words / 1e9:.2f} G words: growth {words / t_grow / 1e9:.2f} G words/s overall, "
          f"fused and+popcount alone {words / t_roof / 1e9:.2f} G words/s ({t_roof * 1e3:.1f} ms)")
    print(f"sklearn loop  {t_sk * 1e3:9.1f} ms   (scaled from {T} fits, check_input=False; "
          f"{t_sk_checked * 1e3:.0f} ms with input checks)")
    print(f"same training predictions as sklearn on {agree:.0%} of {T} data sets (ties may differ)")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=2)
    print(f"speedup_vs_sklearn: {result['speedup_vs_sklearn']:.1f}")


if __name__ == "__main__":
    main()
