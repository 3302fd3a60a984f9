"""Benchmark: Bernoulli sampling, float compare vs exact dyadic bits, and the raw PRNG rates, in one run.

Reference workload (defaults, as scripts/bench.py): B = 4096 trials, each drawing c-smoothed
marginals (p_i ~ U[0.4, 0.6]), a random 6-junta and a packed sample of m = 1024 examples on
n = 64 features (``jt.draw``, jit + vmap over B keys).

Rows, timed interleaved (every configuration once per round, best of --reps rounds, so load from
other processes hits all alike):
  prng      ``jax.random.bits`` alone, G uint32/s, for the threefry2x32, rbg and unsafe_rbg key
            implementations: B * 8 * n * W words as the vmapped workload draws them (B keys);
            and ``jaxtrees.core.prng.bits`` for threefry keys (the same words, written to memory here;
            inside the sampler they are consumed where they are made).
  draw      G Bernoulli bits/s = B * n * m / time for the default path (one float uniform per bit)
            and for ``precision_bits=b`` (b random words per 32 bits, both words of b/2 Threefry
            hashes; marginals rounded to 2^-b).
The last line is ``sampling_speedup_b8: <ratio>`` (threefry, precision_bits=8 vs default).

    python scripts/bench_sampling.py            # reference workload
    python scripts/bench_sampling.py --quick    # B = 256
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import jax
import jax.numpy as jnp

import jaxtrees as jt
from jaxtrees.core.programs import jit

IMPLS = ("threefry2x32", "rbg", "unsafe_rbg")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--B", type=int, default=4096)
    ap.add_argument("--m", type=int, default=1024)
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--k", type=int, default=6)
    ap.add_argument("--c", type=float, default=0.1)
    ap.add_argument("--precisions", default="8,12,16,23", help="precision_bits values (threefry)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="B = 256, 2 reps")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)
    if args.quick:
        args.B, args.reps = 256, 2
    B, m, n, k = args.B, args.m, args.n, args.k
    W = jt.bits.n_words(m)
    family = jt.smoothed(c=args.c)

    def draw_fn(precision_bits):
        def make(key):
            kp, kf, ks = jax.random.split(key, 3)
            return jt.draw(ks, family.marginals(kp, n), jt.random_junta(kf, n, k), m,
                           precision_bits=precision_bits)
        return jit(jax.vmap(make))

    words = B * 8 * n * W
    configs = {}  # name -> (thunk, kind, amount)
    for impl in IMPLS:
        keys = jax.random.split(jax.random.key(0, impl=impl), B)
        bits_fn = jit(jax.vmap(lambda kk: jax.random.bits(kk, (8, n, W), jnp.uint32)))
        configs[f"prng {impl}"] = (lambda f=bits_fn, kk=keys: f(kk), "uint32", words)
        if jt.prng.fusible(keys[0]):  # the same words from jaxtrees.core.prng (unrolled, fusible threefry)
            ours = jit(jax.vmap(lambda kk: jt.prng.bits(kk, (8, n, W))))
            configs[f"prng {impl} jaxtrees.prng"] = (lambda f=ours, kk=keys: f(kk), "uint32", words)
    precisions = [None] + [int(b) for b in args.precisions.split(",") if b]
    for impl in IMPLS[:2]:
        keys = jax.random.split(jax.random.key(0, impl=impl), B)
        for b in (precisions if impl == "threefry2x32" else [None, 8]):
            fn = draw_fn(b)
            configs[f"draw {impl} precision_bits={b}"] = (lambda f=fn, kk=keys: f(kk), "bits", B * n * m)

    for thunk, _, _ in configs.values():  # compile and warm up
        jax.block_until_ready(thunk())
    best = {name: float("inf") for name in configs}
    for _ in range(args.reps):
        for name, (thunk, _, _) in configs.items():
            t0 = time.perf_counter()
            jax.block_until_ready(thunk())
            best[name] = min(best[name], time.perf_counter() - t0)

    device = str(jax.devices()[0])
    print(f"workload: B={B} m={m} n={n} (B*n*m = {B * n * m / 1e9:.3f} G bits), smoothed c={args.c}, "
          f"random {k}-junta; device {device} ({jax.default_backend()}, "
          f"{platform.processor() or platform.machine()}), jax {jax.__version__}, best of {args.reps}")
    rows = []
    for name, (_, kind, amount) in configs.items():
        t = best[name]
        rate = amount / t / 1e9
        extra = ""
        if kind == "bits":
            b = name.split("=")[-1]
            wpw = 32 if b == "None" else int(b)
            bias = "float uniform < p" if b == "None" else f"|p - quantize(p)| <= 2^-{int(b) + 1}"
            extra = f"  {wpw:2d} words / 32 bits, {bias}"
        print(f"{name:<38s} {t * 1e3:9.1f} ms  {rate:7.3f} G {kind}/s{extra}")
        rows.append({"name": name, "seconds": t, "amount": amount, "unit": kind, "G_per_s": rate})

    base = best["draw threefry2x32 precision_bits=None"]
    speedup = base / best["draw threefry2x32 precision_bits=8"] if 8 in precisions else float("nan")
    result = {"workload": {"B": B, "m": m, "n": n, "k": k, "c": args.c},
              "device": device, "backend": jax.default_backend(), "jax": jax.__version__,
              "cpu": platform.processor() or platform.machine(), "reps": args.reps,
              "rows": rows, "sampling_speedup_b8": speedup}
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=2)
    print(f"sampling_speedup_b8: {speedup:.2f}")


if __name__ == "__main__":
    main()
