"""Benchmark suite: growth, end-to-end trials, population growth, scaling, memory and roofline, in one run.

Reference workload (defaults): B = 4096 trials (65536 on a GPU or TPU), each with c-smoothed marginals (c = 0.1, p_i ~
U[0.4, 0.6]), a random 6-junta, m = 1024 examples on n = 64 features, max depth 6, entropy.
All timings are after compilation, best of --reps; the same data sets feed every engine.

How jaxtrees runs here: ``programs.jit(lambda xs: jax.lax.map(f, xs, batch_size=G))`` with f the
single-trial function and G = --group trials vmapped per step, by default the study runner's
group (``runner.group_size``: 32 on a CPU, 1024 on a GPU or TPU). One ``jax.vmap`` over all B trials computes the same values but keeps every
intermediate of all B trials alive at once (fresh pages on every call on a CPU, out of cache;
docs/benchmarks.md); it is still timed and reported ("one vmap").

Sections:
  growth       growth only, on the same B packed samples:
                 jaxtrees   ``jt.grow`` (bit-packed AND + popcount counts), in groups of G
                            and as one vmap over B;
                 onehot     a straightforward jitted JAX formulation written below: X as float
                            [m, n], node membership one-hot [m, L], counts by matmul, vmapped
                            (``lax.map`` in batches of --onehot-batch trees to bound memory);
                 sklearn    DecisionTreeClassifier(criterion="entropy", max_depth=D).fit with
                            check_input=False on --sklearn-trials of the data sets (unpacked to
                            float32 beforehand, not timed), scaled to B.
  end to end   distribution + sample + grow + score, per trial, scaled to B trials:
                 jaxtrees   the studies' trial: p ``quantize``d to 2^-16, the exact dyadic
                            sampler ``precision_bits=16``, growth, exact score ``jt.exact_error``
                            against the quantized p (the headline); also the default float
                            sampler, and the headline trial as one vmap over B;
                 numpy+sk   numpy (np.random.default_rng): p, a random 6-junta, rng.random((m, n))
                            < p, the scikit-learn fit, and its error *estimated* on a fresh numpy
                            test sample of --test-m = 8192 examples (ours is exact, sklearn's is
                            sampled), over --sklearn-trials trials, scaled to B.
  population   ``jt.grow_exact`` (exact gains, no sample) on the same B distributions and targets.
  scaling      jaxtrees growth time at a base (B, m, n, depth) and with each doubled in turn;
               exponent = log2(t_doubled / t_base).
  memory       device memory stats if the backend has them (``memory_stats()``), else host peak
               RSS; and --big-B = 65536 end-to-end trials run in chunks of --chunk = 4096 in a
               fresh subprocess (its time and peak).
  roofline     the words the counting ANDs and popcounts, B 2^(D-1) 2 n W (sibling subtraction),
               and the rate of the counting alone: per trial, 2^D node masks AND n feature rows,
               popcount, sum (no tree logic, no sibling bookkeeping), timed in groups of G and as
               one fused op over all B; the faster is the roofline.

Prints the device, jax version, a table; ``--json PATH`` writes the numbers. The last three lines
are ``growth_speedup_vs_sklearn: <ratio>``, ``end_to_end_speedup_vs_numpy_sklearn: <ratio>`` and
``compile_e2e_n<n>_k<k>_s: <seconds>``: compiling the end-to-end program (sample, grow, exact
error) afresh.

    python scripts/bench.py            # reference workload (a few minutes on 2 CPU cores)
    python scripts/bench.py --quick    # B = 512, smaller memory run
    python scripts/bench.py --group 128 --skip scaling,memory
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import subprocess
import sys
import time

from jaxtrees.core.platform import wide_vectors

wide_vectors()  # before JAX starts: 512-bit vectors on an AVX-512 CPU, as ``jaxtrees run`` (scripts importing this too)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxtrees as jt  # noqa: E402
from jaxtrees.core import programs  # noqa: E402
from jaxtrees.core.programs import jit  # noqa: E402
from jaxtrees.experiments.run import runner  # noqa: E402
from jaxtrees.experiments.study.trials import PRECISION_BITS  # noqa: E402


def best_time(fn, reps):
    """Best of ``reps`` timed calls after one call that compiles and warms up."""
    jax.block_until_ready(fn())
    return interleaved_best({"fn": fn}, reps)["fn"]


def interleaved_best(thunks, rounds, block=1):
    """Best time of each thunk over ``rounds`` rounds that run every thunk ``block`` times in turn
    (so slow drifts of the machine's speed hit all thunks alike)."""
    best = {name: math.inf for name in thunks}
    for _ in range(rounds):
        for name, thunk in thunks.items():
            for _ in range(block):
                t0 = time.perf_counter()
                jax.block_until_ready(thunk())
                best[name] = min(best[name], time.perf_counter() - t0)
    return best


def temp_bytes(jitted, *args):
    """Temporary buffer bytes of a jitted function's compiled program (nan if not reported)."""
    analysis = jitted.lower(*args).compile().memory_analysis()
    return float(getattr(analysis, "temp_size_in_bytes", math.nan)) if analysis is not None else math.nan


def memory():
    """Peak memory: (source, bytes). Device stats when the backend offers them, else host peak RSS."""
    try:
        stats = jax.devices()[0].memory_stats()
    except Exception:  # noqa: BLE001 - backends without the API
        stats = None
    if stats and "peak_bytes_in_use" in stats:
        return "device peak_bytes_in_use", int(stats["peak_bytes_in_use"])
    try:  # VmHWM is this process image's own peak (ru_maxrss keeps the parent's peak across fork+exec)
        with open("/proc/self/status") as fh:
            kib = next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))
        return "host peak RSS (VmHWM)", kib * 1024
    except (OSError, StopIteration, ValueError):
        scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss is KiB on Linux, bytes on macOS
        return "host peak RSS", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


# --- the straightforward formulation: float one-hot membership and matmul counts -------------

def onehot_grow(X, y, depth):
    """Level-wise entropy growth on X: float32[m, n], y: float32[m]. Returns feature: int32[2^D - 1]
    (heap order, -1 = leaf). Node membership is one-hot [m, L]; all counts are matmuls."""
    m, n = X.shape
    node = jnp.zeros(m, jnp.int32)  # index within the level
    alive = jnp.ones(m, X.dtype)  # 0 once the example's node became a leaf
    Xy = X * y[:, None]
    features = []

    def H(a, w):  # entropy of a Bernoulli(a / w), times w
        return -(jax.scipy.special.xlogy(a, a / jnp.maximum(w, 1)) +
                 jax.scipy.special.xlogy(w - a, (w - a) / jnp.maximum(w, 1)))

    for level in range(depth):
        L = 2 ** level
        M = (node[:, None] == jnp.arange(L)[None, :]).astype(X.dtype) * alive[:, None]  # [m, L]
        w, wy = M.sum(0), M.T @ y  # [L]
        w1, w1y = M.T @ X, M.T @ Xy  # [L, n]
        w0, w0y = w[:, None] - w1, wy[:, None] - w1y
        gain = H(wy, w)[:, None] - H(w1y, w1) - H(w0y, w0)
        gain = jnp.where((w1 > 0) & (w0 > 0), gain, -jnp.inf)
        f = jnp.argmax(gain, axis=1)
        split = (jnp.max(gain, axis=1) > 1e-6) & (wy > 0) & (wy < w)
        features.append(jnp.where(split, f, -1))
        go = jnp.take_along_axis(X, f[node][:, None], axis=1)[:, 0]
        alive = alive * split[node]
        node = 2 * node + go.astype(jnp.int32)
    return jnp.concatenate(features)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--B", type=int, default=None, help="trials (default: 4096 on a CPU, 65536 on a GPU / TPU)")
    ap.add_argument("--m", type=int, default=1024)
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--k", type=int, default=6)
    ap.add_argument("--depth", type=int, default=6)
    ap.add_argument("--c", type=float, default=0.1)
    ap.add_argument("--precision-bits", type=int, default=16)
    ap.add_argument("--sklearn-trials", type=int, default=128)
    ap.add_argument("--test-m", type=int, default=8192, help="numpy test sample scoring sklearn's trees")
    ap.add_argument("--onehot-batch", type=int, default=256)
    ap.add_argument("--group", type=int, default=None,
                    help="trials vmapped per lax.map step (default: the study runner's, 32 on a CPU, 1024 on a GPU / TPU)")
    ap.add_argument("--scale-B", type=int, default=None, help="scaling base B (default: B)")
    ap.add_argument("--big-B", type=int, default=65536)
    ap.add_argument("--chunk", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--quick", action="store_true",
                    help="B = 512, 32 scikit-learn trials, big-B = 8192 in chunks of 1024, 2 reps")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--skip", default="", help="comma-separated sections to leave out: scaling, memory (smoke tests)")
    ap.add_argument("--chunked-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    accelerator = jax.devices()[0].platform != "cpu"
    args.B = args.B or (65536 if accelerator else 4096)
    args.group = args.group or runner.group_size(jax.devices()[0])
    if args.quick:
        args.B, args.sklearn_trials, args.reps, args.big_B, args.chunk = 512, 32, 2, 8192, 1024
    for name in ("B", "m", "n", "k", "depth", "group", "reps", "sklearn_trials", "test_m", "big_B", "chunk"):
        low = 0 if name == "depth" else 1
        if getattr(args, name) < low:
            ap.error(f"--{name.replace('_', '-')} must be >= {low}, got {getattr(args, name)}")

    B, m, n, k, D = args.B, args.m, args.n, args.k, args.depth
    started_at = time.perf_counter()

    def stage(name):
        """Progress on stderr: the section starting and the seconds since the start (compiles included)."""
        print(f"[{time.perf_counter() - started_at:6.1f} s] {name}", file=sys.stderr, flush=True)

    family = jt.smoothed(c=args.c)
    rule = jt.GrowthRule(max_depth=D, impurity="entropy")

    def problem(key, n=n):
        kp, kf, _ = jax.random.split(key, 3)
        return family.marginals(kp, n), jt.random_junta(kf, n, k)

    def make(key, n=n, m=m):
        p, f = problem(key, n)
        return jt.draw(jax.random.split(key, 3)[2], p, f, m)

    def trial(key, precision_bits=None):
        p, f = problem(key)
        if precision_bits is not None:
            p = jt.quantize(p, precision_bits)
        s = jt.draw(jax.random.split(key, 3)[2], p, f, m, precision_bits=precision_bits)
        return jt.exact_error(jt.grow(s, rule), p, f)

    G = min(args.group, B)

    def batched(fn):
        """All trials in one compiled call: ``lax.map`` over groups of G vmapped trials."""
        return jit(lambda xs: jax.lax.map(fn, xs, batch_size=G))

    trials_fn = batched(lambda kk: trial(kk, args.precision_bits))

    if args.chunked_only:  # memory section, run in a fresh process for a clean peak
        base = memory()[1]
        chunks = jax.random.split(jax.random.key(7), args.big_B).reshape(-1, args.chunk)
        jax.block_until_ready(trials_fn(chunks[0]))  # compile
        t0 = time.perf_counter()
        errs = [np.asarray(trials_fn(c)) for c in chunks]
        t = time.perf_counter() - t0
        src, peak = memory()
        print(json.dumps({"time_s": t, "source": src, "peak_bytes": peak, "after_import_bytes": base,
                          "mean_error": float(np.mean(np.concatenate(errs)))}))
        return

    from sklearn.tree import DecisionTreeClassifier

    res = {"workload": {"B": B, "m": m, "n": n, "k": k, "max_depth": D, "impurity": "entropy", "c": args.c,
                        "distribution": f"smoothed(c={args.c}) around 1/2", "target": f"random {k}-junta"},
           "device": str(jax.devices()[0]), "device_kind": jax.devices()[0].device_kind,
           "backend": jax.default_backend(), "jax": jax.__version__, "n_devices": jax.device_count(),
           "cpu": platform.processor() or platform.machine(), "cpu_count": os.cpu_count(),
           "loadavg_at_start": os.getloadavg(), "xla_flags": os.environ.get("XLA_FLAGS", ""),
           "compiler_options": programs.compiler_options()}
    keys = jax.random.split(jax.random.key(0), B)
    stage(f"growth: sampling and compiling (B = {B}, groups of {G})")

    # --- growth only ------------------------------------------------------------------------
    grow_compiled = {}  # rule -> compiled grouped growth

    def grow_fn(s, r):
        if r not in grow_compiled:
            grow_compiled[r] = batched(lambda x: jt.grow(x, r))
        return grow_compiled[r](s)

    sample_base = jit(jax.vmap(make))
    samples = jax.block_until_ready(sample_base(keys))
    trees = grow_fn(samples, rule)
    grow_vmap = jit(jax.vmap(lambda s: jt.grow(s, rule)))
    jax.block_until_ready(grow_vmap(samples))
    temp_vmap = temp_bytes(grow_vmap, samples)
    temp_grouped = temp_bytes(grow_compiled[rule], samples)

    # --- roofline, timed interleaved with growth -------------------------------------------
    stage("growth and roofline: timing")
    W = jt.bits.n_words(m)
    rows_per_trial = 2 ** max(D, 1)  # 2^(D-1) counted nodes, each with and without the labels
    words = B * rows_per_trial * n * W
    masks = jax.random.bits(jax.random.key(1), (B, rows_per_trial, W), jnp.uint32)
    roof_grouped = batched(lambda mx: jt.bits.count_and(mx[0][:, None, :], mx[1][None, :, :]))
    roof_whole = jit(lambda a, b: jt.bits.count_and(a[:, :, None, :], b[:, None, :, :]))
    jax.block_until_ready((roof_grouped((masks, samples.X)), roof_whole(masks, samples.X)))
    times = interleaved_best({"grow": lambda: grow_fn(samples, rule), "grow_vmap": lambda: grow_vmap(samples),
                              "roof_grouped": lambda: roof_grouped((masks, samples.X)),
                              "roof_whole": lambda: roof_whole(masks, samples.X)}, args.reps)
    t_grow, t_grow_vmap, t_roof_grouped, t_roof_whole = (
        times[name] for name in ("grow", "grow_vmap", "roof_grouped", "roof_whole"))
    t_roof = min(t_roof_grouped, t_roof_whole)
    del masks

    def onehot_one(s):
        return onehot_grow(jt.bits.unpack(s.X, m).T.astype(jnp.float32),
                           jt.bits.unpack(s.y, m).astype(jnp.float32), D)

    stage("growth: one-hot matmul")
    onehot_fn = jit(lambda s: jax.lax.map(onehot_one, s, batch_size=min(args.onehot_batch, B)))
    t_onehot = best_time(lambda: onehot_fn(samples), min(args.reps, 2))  # ~100x slower: 2 suffice
    oh_features = onehot_fn(samples)
    oh_root_agree = float(jnp.mean(oh_features[:, 0] == trees.feature[:, 0]))

    T = min(args.sklearn_trials, B)
    stage(f"growth: scikit-learn, {T} fits")
    unpack = jit(jax.vmap(lambda s: (jt.bits.unpack(s.X, m).T, jt.bits.unpack(s.y, m))))
    Xs, ys = unpack(jax.tree.map(lambda x: x[:T], samples))
    Xs = [np.asfortranarray(x, dtype=np.float32) for x in np.asarray(Xs)]
    ys = np.asarray(ys).astype(np.float64)
    t0 = time.perf_counter()
    fitted = [DecisionTreeClassifier(criterion="entropy", max_depth=D).fit(Xs[i], ys[i], check_input=False)
              for i in range(T)]
    t_sk = (time.perf_counter() - t0) / T * B
    preds = jit(jax.vmap(jt.predict))(jax.tree.map(lambda x: x[:T], trees), jnp.asarray(np.stack(Xs), jnp.int32))
    sk_agree = float(np.mean([np.array_equal(np.asarray(preds[i]), fitted[i].predict(Xs[i]).astype(int))
                              for i in range(T)]))
    del Xs, ys, fitted, preds
    res["growth"] = {"jaxtrees_s": t_grow, "group": G, "jaxtrees_one_vmap_s": t_grow_vmap,
                     "temp_bytes_one_vmap": temp_vmap, "temp_bytes_grouped": temp_grouped,
                     "onehot_matmul_s": t_onehot, "sklearn_s_scaled": t_sk,
                     "sklearn_trials": T, "jaxtrees_trees_per_s": B / t_grow,
                     "sklearn_same_training_predictions": sk_agree, "onehot_same_root_feature": oh_root_agree}

    # --- end to end ---------------------------------------------------------------------------
    stage("end to end: compiling and timing")
    pb = args.precision_bits
    trials_float = batched(trial)
    trials_vmap = jit(jax.vmap(lambda kk: trial(kk, pb)))
    started = time.perf_counter()  # a fresh jit of the same program: its compile time, not a cache hit
    batched(lambda kk: trial(kk, pb)).lower(keys).compile()
    t_compile_e2e = time.perf_counter() - started
    err_jt = float(jnp.mean(trials_fn(keys)))
    err_float = float(jnp.mean(trials_float(keys)))
    jax.block_until_ready(trials_vmap(keys))
    times = interleaved_best({"e2e": lambda: trials_fn(keys), "float": lambda: trials_float(keys),
                              "vmap": lambda: trials_vmap(keys)}, args.reps)
    t_e2e, t_e2e_float, t_e2e_vmap = times["e2e"], times["float"], times["vmap"]

    def numpy_trial(seed):
        rng = np.random.default_rng(seed)
        p = 0.5 + rng.uniform(-args.c, args.c, n)
        support = rng.choice(n, k, replace=False)
        table = rng.random(2 ** k) < 0.5
        weights = 1 << np.arange(k)
        X = rng.random((m, n)) < p
        y = table[X[:, support].astype(np.int64) @ weights]
        tree = DecisionTreeClassifier(criterion="entropy", max_depth=D).fit(
            np.asfortranarray(X, dtype=np.float32), y.astype(np.float64), check_input=False)
        Xt = rng.random((args.test_m, n)) < p
        yt = table[Xt[:, support].astype(np.int64) @ weights]
        return float(np.mean(tree.predict(Xt.astype(np.float32)) != yt))

    stage(f"end to end: numpy + scikit-learn, {T} trials")
    numpy_trial(0)  # warm up
    t0 = time.perf_counter()
    err_sk = float(np.mean([numpy_trial(i) for i in range(T)]))
    t_e2e_sk = (time.perf_counter() - t0) / T * B
    res["end_to_end"] = {"jaxtrees_s": t_e2e, "precision_bits": pb, "jaxtrees_float_sampler_s": t_e2e_float,
                         "jaxtrees_one_vmap_s": t_e2e_vmap,
                         "numpy_sklearn_s_scaled": t_e2e_sk, "numpy_sklearn_trials": T,
                         "numpy_test_m": args.test_m, "jaxtrees_mean_exact_error": err_jt,
                         "jaxtrees_float_sampler_mean_exact_error": err_float,
                         "numpy_sklearn_mean_sampled_error": err_sk,
                         "trials_per_s_jaxtrees": B / t_e2e, "compile_s": t_compile_e2e}

    # --- population growth --------------------------------------------------------------------
    stage("population growth")
    ps, fs = jax.block_until_ready(jit(jax.vmap(problem))(keys))
    exact_fn = batched(lambda pf: jt.grow_exact(pf[0], pf[1], rule))
    t_pop = best_time(lambda: exact_fn((ps, fs)), args.reps)
    res["population"] = {"grow_exact_s": t_pop, "trees_per_s": B / t_pop}

    res["roofline"] = {"count_words": words, "and_popcount_s": t_roof, "and_popcount_grouped_s": t_roof_grouped,
                       "and_popcount_one_op_s": t_roof_whole, "and_popcount_words_per_s": words / t_roof,
                       "growth_words_per_s": words / t_grow, "growth_over_roofline_time": t_grow / t_roof}
    mem_src, mem_peak = memory()

    # --- scaling ------------------------------------------------------------------------------
    sB = args.scale_B or B
    base = {"B": sB, "m": m, "n": n, "depth": D}

    def growth_case(B_, m_, n_, D_):
        """A thunk growing trees on fresh data of this shape (compiled and warmed up)."""
        r = jt.GrowthRule(max_depth=D_, impurity="entropy")
        if (B_, m_, n_) == (B, m, n):
            s = samples  # the reference data, already drawn
        elif (m_, n_) == (m, n) and B_ % B == 0:  # e.g. B_ = 2B: draws of the compiled reference sampler
            kk = jax.random.split(jax.random.key(3), B_).reshape(-1, B, *keys.shape[1:])
            s = jax.tree.map(lambda *xs: jnp.concatenate(xs), *[sample_base(q) for q in kk])
        else:
            kk = jax.random.split(jax.random.key(3), B_)
            s = jit(jax.vmap(lambda q: make(q, n_, m_)))(kk)
        jax.block_until_ready(grow_fn(s, r))  # compile
        return lambda: grow_fn(s, r)

    skip = {x.strip() for x in args.skip.split(",") if x.strip()}
    scaling = {"base": base}
    if "scaling" not in skip:
        stage("scaling")
        cases = {"base": dict(base)}
        for name in ("B", "m", "n", "depth"):
            cases[name] = dict(base)
            cases[name][name] = 2 * base[name] if name != "depth" else base[name] + 1
        thunks = {name: growth_case(c["B"], c["m"], c["n"], c["depth"]) for name, c in cases.items()}
        # Blocks of reps per case (alternating cases run by run slowed the small base case by
        # ~50% here: the larger cases' data evict it), two rounds.
        times = interleaved_best(thunks, 2, block=args.reps)
        scaling["base_s"] = times["base"]
        for name in ("B", "m", "n", "depth"):
            scaling[name] = {"value": cases[name][name], "s": times[name],
                             "exponent": math.log2(times[name] / times["base"])}
    res["scaling"] = scaling

    # --- memory -------------------------------------------------------------------------------
    cmd = [sys.executable, os.path.abspath(__file__), "--chunked-only", "--B", str(B), "--m", str(m), "--n", str(n),
           "--k", str(k), "--depth", str(D), "--c", str(args.c), "--big-B", str(args.big_B), "--chunk", str(args.chunk),
           "--group", str(args.group), "--precision-bits", str(args.precision_bits)]
    if "memory" in skip:
        chunked = {"time_s": float("nan"), "source": mem_src, "peak_bytes": 0, "after_import_bytes": 0}
    else:
        stage(f"memory: {args.big_B} trials in chunks of {args.chunk}, a fresh process")
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
        chunked = json.loads(out)
    res["memory"] = {"source": mem_src, "peak_bytes_this_process": mem_peak,
                     "chunked": {"B": args.big_B, "chunk": args.chunk, **chunked}}

    # --- table --------------------------------------------------------------------------------
    MB = 2 ** 20
    rows = [
        ("growth", f"jaxtrees grow (groups of {G})", t_grow, f"temporaries {temp_grouped / MB:.1f} MiB"),
        ("growth", "jaxtrees grow (one vmap)", t_grow_vmap, f"temporaries {temp_vmap / MB:.1f} MiB"),
        ("growth", "one-hot matmul JAX (jit)", t_onehot, f"same root feature {oh_root_agree:.0%}"),
        ("growth", "sklearn loop", t_sk, f"{T} fits scaled; same train predictions {sk_agree:.0%}"),
        ("end to end", f"jaxtrees precision_bits={pb}", t_e2e,
         f"exact error {err_jt:.4f}" + ("; the studies' sampler" if pb == PRECISION_BITS else "")),
        ("end to end", "jaxtrees float sampler", t_e2e_float, f"exact error {err_float:.4f}"),
        ("end to end", f"jaxtrees precision_bits={pb} one vmap", t_e2e_vmap, ""),
        ("end to end", "numpy + sklearn loop", t_e2e_sk,
         f"{T} trials scaled; sampled error ({args.test_m} test) {err_sk:.4f}"),
        ("population", "jaxtrees grow_exact", t_pop, "no sampling"),
        ("roofline", "counting only, one op", t_roof_whole,
         f"{words / 1e9:.2f} G words, {words / t_roof_whole / 1e9:.2f} G words/s"),
        ("roofline", f"counting only, groups of {G}", t_roof_grouped,
         f"{words / t_roof_grouped / 1e9:.2f} G words/s"),
    ]
    print(f"workload: B={B} m={m} n={n} k={k} depth={D} entropy, smoothed c={args.c}, random {k}-juntas")
    print(f"device: {res['device']} ({res['backend']}, {res['device_kind']}), jax {jax.__version__}, "
          f"{os.cpu_count()} cpus, load {res['loadavg_at_start'][0]:.2f} at start; XLA_FLAGS={res['xla_flags']!r}, "
          f"compiler options {res['compiler_options']}")
    print(f"{'section':<11} {'engine':<30} {'time ms':>10} {'per s':>10}  note")
    for sec, eng, t, note in rows:
        print(f"{sec:<11} {eng:<30} {t * 1e3:10.1f} {B / t:10.0f}  {note}")
    print(f"growth: {words / t_grow / 1e9:.2f} G words/s vs and+popcount {words / t_roof / 1e9:.2f} G words/s "
          f"-> {t_grow / t_roof:.1f}x from the roofline; one-hot matmul {t_onehot / t_grow:.1f}x slower than jaxtrees")
    print(f"one vmap over all B instead of groups of {G}: growth {t_grow_vmap / t_grow:.2f}x, "
          f"end to end {t_e2e_vmap / t_e2e:.2f}x the time (temporaries {temp_vmap / MB:.0f} vs "
          f"{temp_grouped / MB:.1f} MiB)")
    print(f"scaling (base B={sB} m={m} n={n} depth={D}, {scaling.get('base_s', math.nan) * 1e3:.1f} ms): " + ", ".join(
        f"{name}{' x2' if name != 'depth' else '+1'} -> {scaling[name]['exponent']:.2f}"
        for name in ("B", "m", "n", "depth") if name in scaling) + "  (exponent log2(t2/t1))")
    print(f"memory: {mem_src} {mem_peak / MB:.0f} MiB (this process, reference run); "
          f"B={args.big_B} end to end in chunks of {args.chunk}: {chunked['time_s']:.1f} s "
          f"({args.big_B / chunked['time_s']:,.0f} trials/s), peak {chunked['peak_bytes'] / MB:.0f} MiB "
          f"({chunked['after_import_bytes'] / MB:.0f} MiB after import)")
    res["growth_speedup_vs_sklearn"] = t_sk / t_grow
    res["end_to_end_speedup_vs_numpy_sklearn"] = t_e2e_sk / t_e2e
    res["loadavg_at_end"] = os.getloadavg()
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(res, fh, indent=2)
    print(f"growth_speedup_vs_sklearn: {res['growth_speedup_vs_sklearn']:.1f}")
    print(f"end_to_end_speedup_vs_numpy_sklearn: {res['end_to_end_speedup_vs_numpy_sklearn']:.1f}")
    print(f"compile_e2e_n{n}_k{k}_s: {t_compile_e2e:.1f}")


if __name__ == "__main__":
    main()
