"""Random forests: jaxtrees (all splits' forests in one compiled program) vs a loop of scikit-learn
RandomForestClassifier fits (n_jobs = all cores), on the same binarized data and splits.

Workload (defaults): census binarized (2000 labeled rows, 131 features), --splits = 20 random
splits of --train = 1000 training examples (the rest: test), forests of --trees = 100 Gini trees of
depth <= --depth = 10 with sqrt(n) features per node on bootstrap samples, scored on the test set.
jaxtrees: ``random_forest(trees, depth).fit`` plus the test error, one split after another
(``lax.map``), each split's trees one vmapped batch (one vmap over all 20 x 100 trees is slower:
its [nodes, features] count arrays fall out of cache; docs/benchmarks.md).
scikit-learn: ``RandomForestClassifier(n_estimators=trees, max_depth=depth, max_features="sqrt",
n_jobs=-1)`` and ``score`` on each split, over --sklearn-splits splits, scaled to --splits. Timings
after compilation, best of --reps interleaved rounds. ``--max-features none`` drops feature
bagging on both sides (bagged trees).

The bound (line ``unweighted_trees_ms``): as many trees of the same rule grown on each split's own data (no
bootstrap, the same per-node feature bagging, one vmapped batch per split), and the bootstraps alone; printed with
the forest's time over theirs and the time 10x scikit-learn would need.

The wide fit (lines ``forest_fit_s_5000_columns`` and ``forest_fit_peak_mb_5000_columns``; issue 58): in a fresh
process, ``jaxtrees.RandomForestClassifier(n_estimators=10).fit(X, y)`` on 64 random rows x --wide-columns = 5,000
binary columns, compile included, and the process's peak resident memory (0 skips it). Before issue 58 the program
grew with the columns (a loop unrolled over the words of a node's feature bitset): > 9.5 min and 20 GB at 5,000.

The last line is ``forest_speedup_vs_sklearn: <ratio>``.

    python scripts/bench_forest.py                       # reference workload
    python scripts/bench_forest.py --splits 4 --trees 20 --sklearn-splits 2
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import jax
import numpy as np

from jaxtrees import datasets
from jaxtrees.core.programs import jit
from jaxtrees.core import prng
from jaxtrees.learners.bagging import bootstrap, random_forest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import interleaved_best  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="census", choices=datasets.SHIPPED)
    ap.add_argument("--splits", type=int, default=20)
    ap.add_argument("--train", type=int, default=None, help="training examples per split (default: the seed's)")
    ap.add_argument("--trees", type=int, default=100)
    ap.add_argument("--depth", type=int, default=10)
    ap.add_argument("--max-features", default="sqrt", choices=("sqrt", "none"))
    ap.add_argument("--sklearn-splits", type=int, default=4)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--wide-columns", type=int, default=5000, help="columns of the wide fit (0: skip it)")
    args = ap.parse_args(argv)
    for name in ("splits", "trees", "depth", "sklearn_splits", "reps"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.wide_columns < 0:
        ap.error(f"--wide-columns must be >= 0 (0 skips the wide fit), got {args.wide_columns}")
    from sklearn.ensemble import RandomForestClassifier

    d = datasets.load(args.data)
    train = args.train or d.train_size
    problem = d.problem()
    keys = jax.random.split(jax.random.key(0), args.splits)
    max_features = None if args.max_features == "none" else args.max_features
    forest = random_forest(members=args.trees, max_depth=args.depth, max_features=max_features)

    def split(key):
        return forest.fit(key, problem.train(key, train)).staged_errors(problem.test(key, train))[-1]

    grow = jit(lambda keys: jax.lax.map(split, keys))

    def plain(key):  # the unweighted counting bound: as many trees on the split's data, no bootstrap
        data = problem.train(key, train)
        return jax.vmap(lambda k: forest.base.fit(k, data).feature)(prng.split(key, args.trees))

    def resamples(key):  # the bootstraps alone
        data = problem.train(key, train)
        return jax.vmap(lambda k: bootstrap(k, data)[0].X)(prng.split(key, args.trees))

    parts = {name: jit(lambda keys, f=f: jax.lax.map(f, keys)).lower(keys).compile()
             for name, f in (("plain", plain), ("bootstrap", resamples))}
    started = time.perf_counter()
    grow = grow.lower(keys).compile()
    compile_s = time.perf_counter() - started
    errors = np.asarray(grow(keys))

    orders = [np.asarray(jax.random.permutation(k, len(d.y))) for k in keys[: args.sklearn_splits]]

    def sklearn_loop():
        out = []
        for i, order in enumerate(orders):
            tr, te = order[:train], order[train:]
            clf = RandomForestClassifier(args.trees, max_depth=args.depth, max_features=max_features, n_jobs=-1,
                                         random_state=i)
            out.append(1.0 - clf.fit(d.X[tr], d.y[tr]).score(d.X[te], d.y[te]))
        return np.asarray(out)

    sk_errors = sklearn_loop()
    times = interleaved_best({"jaxtrees": lambda: grow(keys), "sklearn": sklearn_loop,
                              **{name: lambda f=f: f(keys) for name, f in parts.items()}}, args.reps)
    t_jt, t_sk = times["jaxtrees"], times["sklearn"] / args.sklearn_splits * args.splits
    print(f"device: {jax.devices()[0]} ({jax.default_backend()}), jax {jax.__version__}, {os.cpu_count()} cpu cores")
    print(f"workload: {args.data} {d.X.shape[1]} features, {args.splits} splits of {train} train / "
          f"{len(d.y) - train} test, {args.trees} trees of depth <= {args.depth}, max_features {args.max_features}")
    print(f"jaxtrees  {t_jt * 1e3:10.1f} ms  (compile {compile_s:.1f} s)  mean test error {errors.mean():.4f}")
    print(f"sklearn   {t_sk * 1e3:10.1f} ms  ({args.sklearn_splits} splits scaled)  mean test error {sk_errors.mean():.4f}")
    print(f"bound: {args.splits} x {args.trees} trees of the same rule on the splits' own data (no bootstrap) take "
          f"{times['plain'] * 1e3:.1f} ms, the bootstraps alone {times['bootstrap'] * 1e3:.1f} ms: the forest takes "
          f"{t_jt / (times['plain'] + times['bootstrap']):.2f}x their sum; 10x scikit-learn needs {t_sk / 10 * 1e3:.1f} ms")
    print(f"unweighted_trees_ms: {times['plain'] * 1e3:.1f}")
    if args.wide_columns > 0:
        seconds, peak_mb = wide_fit(args.wide_columns)
        print(f"forest_fit_s_{args.wide_columns}_columns: {seconds:.1f}")
        print(f"forest_fit_peak_mb_{args.wide_columns}_columns: {peak_mb:.0f}")
    print(f"forest_speedup_vs_sklearn: {t_sk / t_jt:.2f}")


_WIDE = """
import resource, sys, time
import numpy as np
import jaxtrees as jt
rng = np.random.default_rng(0)
X = rng.integers(0, 2, size=(64, {columns}))
y = X[:, 0] ^ X[:, 1]
started = time.perf_counter()
jt.RandomForestClassifier(n_estimators=10).fit(X, y)
print(time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""


def wide_fit(columns: int):
    """``(seconds, peak MiB)`` of a 10-tree RandomForestClassifier fit on 64 x ``columns`` bits, in a fresh process."""
    out = subprocess.run([sys.executable, "-c", _WIDE.format(columns=columns)], capture_output=True, text=True,
                         check=True).stdout.split()
    return float(out[-2]), float(out[-1])


if __name__ == "__main__":
    main()
