"""AdaBoost with decision stumps: jaxtrees (all splits in one vmapped lax.scan) vs a loop of
scikit-learn AdaBoostClassifier fits, on the same binarized data and splits.

Workload (defaults): census binarized (2000 labeled rows, 131 features), --splits = 20 random
splits of --train = 1000 training examples (the rest: test), --rounds = 250 rounds of stumps.
jaxtrees: ``AdaBoost(Stump(impurity), rounds).fit`` vmapped over the split keys, plus every
round's test error (``staged_errors``). scikit-learn: ``AdaBoostClassifier(DecisionTreeClassifier(
max_depth=1), n_estimators=rounds)`` (SAMME; weighted Gini stumps) on each split, plus
``staged_score`` on its test set, over --sklearn-splits splits, scaled to --splits. The jaxtrees
weak learner defaults to Gini stumps too (``--impurity gini``), so both compute the same
ensembles (tests/test_boosting.py checks it split for split on untied data). Timings after
compilation, best of --reps interleaved rounds.

The d-parity weak learner alone (seed 004 at the OCR sets' size): one ``Parities(d).fit`` (the exact
search, :mod:`jaxtrees.learners.parities`) on random weighted data with n = 403 features and m = 1000
examples, d = 3 and d = 2, and ``LowDegree(degree=2, max_terms=1).fit`` (every set listed) beside the
latter: lines ``parity3_round_n403_m1000_s``, ``parity2_round_n403_m1000_s`` and
``lowdegree2_round_n403_m1000_s`` (seconds per fit, best of --reps, after compilation).

The bound (line ``counting_bound_ms``): the weighted counts alone, the two matrix-vector products per round
over each split's unpacked features (``greedy.weighted_counts``), in a ``lax.scan`` of --rounds rounds whose
weights follow the counts (so nothing is hoisted), vmapped over the splits, the splits' data built too; printed
with its share of jaxtrees' time and the time 300x scikit-learn would need.

The last line is ``adaboost_speedup_vs_sklearn: <ratio>``.

    python scripts/bench_boosting.py                     # reference workload
    python scripts/bench_boosting.py --splits 4 --rounds 50 --sklearn-splits 2
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxtrees as jt
from jaxtrees.core.programs import jit
from jaxtrees import datasets
from jaxtrees.core import bits
from jaxtrees.learners import greedy
from jaxtrees.learners.boosting import AdaBoost
from jaxtrees.learners.parities import Parities

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import interleaved_best  # noqa: E402


#: The parity weak learner's workload: the OCR sets' feature count, their training size.
PARITY_N, PARITY_M = 403, 1000


def parity_rounds(reps):
    """Seconds per fit (best of ``reps``, after compilation) of the d-parity weak learners on random
    weighted data of PARITY_M examples, PARITY_N features: one AdaBoost round's search."""
    rng = np.random.default_rng(0)
    X, y = rng.integers(0, 2, (PARITY_M, PARITY_N)), rng.integers(0, 2, PARITY_M)
    data = jt.with_weights(jt.from_arrays(X, y), rng.uniform(0.1, 2.0, PARITY_M).astype(np.float32))
    key = jax.random.key(0)
    fits = {"parity3": Parities(3), "parity2": Parities(2), "lowdegree2": jt.LowDegree(degree=2, max_terms=1)}
    fits = {name: jit(learner.fit).lower(key, data).compile() for name, learner in fits.items()}
    return interleaved_best({name: functools.partial(fit, key, data) for name, fit in fits.items()}, reps)


def counting_only(problem, train: int, rounds: int):
    """``keys -> float32[splits, rounds]``: each split's data and its weighted counts, ``rounds`` times, as
    AdaBoost's stumps count them (``greedy.weighted_counts`` of the weights and the weights times y), the weights
    moved each round by a feature the counts choose, as a stump's round moves them."""

    def split(key):
        data = problem.train(key, train)
        Xf, yf = greedy.dense(data)
        u = bits.unpack_float(data.valid, Xf.shape[-1])

        def round_(u, _):
            c = greedy.weighted_counts(Xf, jnp.stack([u, u * yf]))  # [2, n]: what a stump's gains are made of
            j = jnp.argmax(jnp.abs(2.0 * c[1] - c[0]))
            u = u * jnp.exp(0.1 * (2.0 * Xf[j] - 1.0))
            return u / jnp.sum(u), c[0, j]

        return jax.lax.scan(round_, u / jnp.sum(u), None, length=rounds)[1]

    return jax.vmap(split)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="census", choices=datasets.SHIPPED)
    ap.add_argument("--splits", type=int, default=20)
    ap.add_argument("--train", type=int, default=None, help="training examples per split (default: the seed's)")
    ap.add_argument("--rounds", type=int, default=250)
    ap.add_argument("--impurity", default="gini", help="the stumps' criterion (gini: as scikit-learn; error: Alg. 1)")
    ap.add_argument("--sklearn-splits", type=int, default=4)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args(argv)
    for name in ("splits", "rounds", "sklearn_splits", "reps"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    from sklearn.ensemble import AdaBoostClassifier
    from sklearn.tree import DecisionTreeClassifier

    d = datasets.load(args.data)
    train = args.train or d.train_size
    problem = d.problem()
    keys = jax.random.split(jax.random.key(0), args.splits)
    booster = AdaBoost(jt.Stump(impurity=args.impurity), rounds=args.rounds)

    def split(key):
        H = booster.fit(key, problem.train(key, train))
        return H.staged_errors(problem.test(key, train))

    boost = jit(jax.vmap(split))
    started = time.perf_counter()
    boost = boost.lower(keys).compile()
    compile_s = time.perf_counter() - started
    errors = np.asarray(boost(keys))

    orders = [np.asarray(jax.random.permutation(k, len(d.y))) for k in keys[: args.sklearn_splits]]

    def sklearn_loop():
        out = []
        for order in orders:
            tr, te = order[:train], order[train:]
            clf = AdaBoostClassifier(DecisionTreeClassifier(max_depth=1), n_estimators=args.rounds, random_state=0)
            clf.fit(d.X[tr], d.y[tr])
            out.append([1.0 - s for s in clf.staged_score(d.X[te], d.y[te])][-1])
        return np.asarray(out)

    counts = jit(counting_only(problem, train, args.rounds)).lower(keys).compile()
    sk_errors = sklearn_loop()
    times = interleaved_best({"jaxtrees": lambda: boost(keys), "sklearn": sklearn_loop,
                              "counts": lambda: counts(keys)}, args.reps)
    t_jt, t_sk = times["jaxtrees"], times["sklearn"] / args.sklearn_splits * args.splits
    print(f"device: {jax.devices()[0]} ({jax.default_backend()}), jax {jax.__version__}")
    print(f"workload: {args.data} {d.X.shape[1]} features, {args.splits} splits of {train} train / "
          f"{len(d.y) - train} test, {args.rounds} rounds of {args.impurity} stumps")
    print(f"jaxtrees  {t_jt * 1e3:10.1f} ms  (compile {compile_s:.1f} s)  final test error {errors[:, -1].mean():.4f}"
          f" (first {args.sklearn_splits} splits {errors[: args.sklearn_splits, -1].mean():.4f})")
    print(f"sklearn   {t_sk * 1e3:10.1f} ms  ({args.sklearn_splits} splits scaled)  final test error "
          f"{sk_errors.mean():.4f}")
    print(f"bound: the weighted counts alone (2 matrix-vector products per round over {d.X.shape[1]} x {train}, "
          f"{args.rounds} rounds x {args.splits} splits, with the splits' data) take {times['counts'] * 1e3:.1f} ms, "
          f"{times['counts'] / t_jt:.0%} of jaxtrees' time; 300x scikit-learn needs {t_sk / 300 * 1e3:.1f} ms in all")
    print(f"counting_bound_ms: {times['counts'] * 1e3:.1f}")
    for name, seconds in parity_rounds(args.reps).items():
        print(f"{name}_round_n{PARITY_N}_m{PARITY_M}_s: {seconds:.4f}")
    print(f"adaboost_speedup_vs_sklearn: {t_sk / t_jt:.1f}")


if __name__ == "__main__":
    main()
