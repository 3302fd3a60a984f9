"""Benchmark: B networks trained at once (jit + vmap) vs a Python loop of the same jitted training.

Reference workload (defaults): B = 256 independent members, each with its own key, its own
c-smoothed product distribution (c = 0.1, p_i ~ U[0.4, 0.6]) on n = 30 bits and its own random
2-parity; a width-100 ReLU MLP (He init), online mode (a fresh batch of 32 every step), SGD with
learning rate 0.1, hinge loss, S = 1000 steps, one record at the end (test error on 1024 fresh
examples). Matmul work per member-step: 4 b n h + 6 b h flops (layer 1 forward and weight
gradient, layer 2 forward, weight and input gradient), ~0.40 MFLOP.

Times, after compilation (best of --reps):
  loop      jax.jit(train) called for each member in turn on the default device (same keys,
            same numbers);
  vmapped   jaxtrees.learners.sgd.train_many (jax.jit(jax.vmap(train))) on all B members, sharded
            over the local devices (on a CPU, one per core: ``jaxtrees.core.platform.split_cpu``), each
            device's members in ``lax.map`` groups of ``sgd.CPU_GROUP`` on a CPU (one vmap elsewhere);
  one vmap  the same with one vmap over each device's members (``group=B``), the layout before
            groups;
  shared    the same, but members share one distribution and one data stream (``data_key``,
            common random numbers) and differ in init seed and target: vmap draws each batch
            once per group and runs the first layer of its G members as one [b, n] @ [n, G h]
            matmul;
  packed    vmapped, with inputs drawn bit-packed (``TrainConfig(precision_bits=8)``: exact draws
            from p rounded to multiples of 2^-8, 8 random words per 32 inputs instead of 32);
and, to see what bounds the vmapped program, in the same run:
  matmul    a plain 1024^3 float32 matmul (the machine's dense rate);
  bmm       the workload's batched layer-1 matmuls alone ([B, b, n] @ [B, n, h], and the
            weight gradient [B, n, b] @ [B, b, h] from a stored x^T, as ``sgd.matmul`` runs
            it), S times in a scan, on one device;
  rng       the online batches alone, as the training draws them (``sgd.inputs`` at
            ``prng.fold_in(key, t)``): B x S draws of [b, n] inputs, on one device.

What bounds the vmapped program on a CPU, measured op by op: docs/benchmarks.md ("Profiling scripts/bench_gd.py").

The last two lines are ``shared_speedup_vs_loop: <ratio>`` (loop time / shared-stream time) and
``speedup_vs_loop: <ratio>`` (loop time / vmapped time, independent members).

    python scripts/bench_gd.py            # reference workload
    python scripts/bench_gd.py --quick    # S = 200, 1 rep
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import time

from jaxtrees.core.platform import split_cpu, wide_vectors

split_cpu()  # before JAX starts: one CPU device per core, as ``jaxtrees run`` (JAXTREES_CPU_DEVICES=1: off)
wide_vectors()  # and 512-bit vectors on an AVX-512 CPU

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from jaxtrees.core import distributions, prng  # noqa: E402
from jaxtrees.core.programs import jit  # noqa: E402
from jaxtrees.learners import sgd  # noqa: E402
from jaxtrees import targets  # noqa: E402


CPU_SECONDS = {}  # process CPU time (user + system) of the best run, per timed function


def best_time(fn, reps, name=None):
    """Best wall time of ``reps`` runs after a warm-up; records that run's CPU time under ``name``.

    On a shared machine the CPU seconds are the steadier figure: other processes inflate wall
    time, not this process's CPU time.
    """
    jax.block_until_ready(fn())  # compile and warm up
    best = (float("inf"), 0.0)
    for _ in range(reps):
        c0, t0 = os.times(), time.perf_counter()
        jax.block_until_ready(fn())
        t, c1 = time.perf_counter() - t0, os.times()
        best = min(best, (t, (c1.user - c0.user) + (c1.system - c0.system)))
    if name:
        CPU_SECONDS[name] = best[1]
    return best[0]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--B", type=int, default=256)
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--k", type=int, default=2)
    ap.add_argument("--width", type=int, default=100)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--c", type=float, default=0.1)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="S = 200 steps, 1 rep")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)
    if args.quick:
        args.steps, args.reps = 200, 1

    B, n, h, b, S = args.B, args.n, args.width, args.batch, args.steps
    cfg = sgd.TrainConfig(sgd.mlp(h, activation="relu"), loss="hinge", steps=S, batch_size=b, eval_every=S,
                         exact_max_n=0, test_size=1024)
    keys = jax.random.split(jax.random.key(0), B)
    p = distributions.marginals(distributions.smoothed(c=args.c), jax.random.key(1), n, batch=B)
    f = jax.vmap(lambda key: targets.random_parity(key, n, args.k))(jax.random.split(jax.random.key(2), B))
    lr = jnp.full((B,), args.lr, jnp.float32)
    flops = B * S * (4 * b * n * h + 6 * b * h)

    # Loop of the same jitted single training (dispatched back to back, blocked once at the end).
    single = jit(lambda key, p, f, lr: sgd.train(key, p, f, cfg, learning_rate=lr))
    members = [(keys[i], p[i], jax.tree.map(lambda x: x[i], f), lr[i]) for i in range(B)]
    t_loop = best_time(lambda: [single(*m) for m in members], args.reps, "loop")
    t_vmap = best_time(lambda: sgd.train_many(keys, p, f, cfg, learning_rate=lr), args.reps, "vmapped")
    t_one_vmap = best_time(lambda: sgd.train_many(keys, p, f, cfg, group=B, learning_rate=lr), args.reps, "one vmap")
    t_single = best_time(lambda: single(*members[0]), max(args.reps, 3))

    batched = sgd.train_many(keys, p, f, cfg, learning_rate=lr)
    check = single(*members[0])
    same = all(np.allclose(np.asarray(a)[0], np.asarray(c), rtol=1e-5, atol=1e-6)
               for a, c in zip(jax.tree.leaves(batched), jax.tree.leaves(check)))

    packed_cfg = dataclasses.replace(cfg, precision_bits=8)
    t_packed = best_time(lambda: sgd.train_many(keys, p, f, packed_cfg, learning_rate=lr), args.reps, "packed")

    # Shared distribution and data stream (common random numbers).
    data_key = jax.random.key(3)
    t_shared = best_time(lambda: sgd.train_many(keys, p[0], f, cfg, data_key=data_key, learning_rate=lr),
                         args.reps, "shared")

    # What bounds it: a large matmul, the batched layer-1 matmuls alone, the RNG alone.
    A = jax.random.normal(jax.random.key(4), (1024, 1024), jnp.float32)
    mm = jit(lambda a: a @ a)
    t_mm = best_time(lambda: mm(A), max(args.reps, 3))
    X = jax.random.normal(jax.random.key(5), (B, b, n), jnp.float32)
    XT = jnp.swapaxes(X, 1, 2)
    W = jax.random.normal(jax.random.key(6), (B, n, h), jnp.float32)

    @jit
    def bmm(X, XT, W):
        def body(W, _):
            Z = jnp.einsum("bin,bnh->bih", X, W)
            return W - 1e-6 * jnp.einsum("bni,bih->bnh", XT, Z), None  # forward + weight gradient
        return jax.lax.scan(body, W, None, length=S)[0]

    t_bmm = best_time(lambda: bmm(X, XT, W), args.reps)

    @jit
    def rng(keys, p):
        def body(count, t):
            x = jax.vmap(lambda k, p: sgd.inputs(prng.fold_in(k, t), p, b))(keys, p)
            return count + jnp.sum(x), None
        return jax.lax.scan(body, jnp.zeros((), jnp.int32), jnp.arange(S))[0]

    t_rng = best_time(lambda: rng(keys, p), args.reps)

    result = {
        "workload": {"B": B, "n": n, "k": args.k, "width": h, "activation": "relu", "batch": b, "steps": S,
                     "optimizer": f"sgd(lr={args.lr})", "loss": "hinge", "mode": "online",
                     "distribution": f"smoothed(c={args.c}) around 1/2, one per member",
                     "target": f"random {args.k}-parity per member", "matmul_flops": flops},
        "device": str(jax.devices()[0]), "backend": jax.default_backend(), "jax": jax.__version__,
        "local_devices": jax.local_device_count(),
        "cpu": platform.processor() or platform.machine(), "cpu_count": os.cpu_count(),
        "loop_s": t_loop, "vmapped_s": t_vmap, "one_vmap_s": t_one_vmap, "cpu_group": sgd.CPU_GROUP,
        "shared_data_vmapped_s": t_shared, "single_s": t_single,
        "packed_inputs_vmapped_s": t_packed,
        "loop_gflops": flops / t_loop / 1e9, "vmapped_gflops": flops / t_vmap / 1e9,
        "shared_gflops": flops / t_shared / 1e9,
        "matmul_1024_gflops": 2 * 1024**3 / t_mm / 1e9,
        "bmm_layer1_s": t_bmm, "bmm_layer1_gflops": B * S * 4 * b * n * h / t_bmm / 1e9,
        "rng_s": t_rng, "vmapped_equals_single": bool(same), "cpu_s": dict(CPU_SECONDS),
        # os.times() counts 10 ms ticks and no GPU time: no ratio below 50 ms of CPU time
        "speedup_vs_loop_cpu_time": (CPU_SECONDS["loop"] / CPU_SECONDS["vmapped"]
                                     if CPU_SECONDS["vmapped"] >= 0.05 else None),
        "speedup_vs_loop": t_loop / t_vmap,
    }
    us = lambda t: t / (B * S) * 1e6  # noqa: E731  microseconds per member-step
    print(f"workload: B={B} width-{h} ReLU MLP, n={n}, random {args.k}-parity, smoothed c={args.c}, online "
          f"batch {b}, SGD lr={args.lr}, hinge, S={S} steps; {jax.local_device_count()} x {jax.default_backend()} "
          f"device(s) ({os.cpu_count()} cores), jax {jax.__version__}")
    print(f"loop of jit(train)   {t_loop:8.3f} s   {us(t_loop):6.2f} us/member-step  "
          f"{result['loop_gflops']:6.1f} GFLOP/s   (one training alone: {t_single * 1e3:.1f} ms)")
    print(f"vmapped train_many   {t_vmap:8.3f} s   {us(t_vmap):6.2f} us/member-step  "
          f"{result['vmapped_gflops']:6.1f} GFLOP/s   (member 0 equals the single run: {same})")
    print(f"  one vmap per device {t_one_vmap:8.3f} s   {us(t_one_vmap):6.2f} us/member-step  "
          f"{flops / t_one_vmap / 1e9:6.1f} GFLOP/s   ({t_loop / t_one_vmap:.2f}x the loop; groups of "
          f"{sgd.CPU_GROUP if jax.default_backend() == 'cpu' else B}: {t_one_vmap / t_vmap:.2f}x faster)")
    print(f"  shared data stream {t_shared:8.3f} s   {us(t_shared):6.2f} us/member-step  "
          f"{result['shared_gflops']:6.1f} GFLOP/s   ({t_loop / t_shared:.2f}x the loop)")
    print(f"  packed inputs (b=8) {t_packed:8.3f} s   {us(t_packed):6.2f} us/member-step  "
          f"{flops / t_packed / 1e9:6.1f} GFLOP/s   ({t_loop / t_packed:.2f}x the loop)")
    print(f"CPU seconds: loop {CPU_SECONDS['loop']:.3f} ({CPU_SECONDS['loop'] / t_loop:.2f} cores busy), "
          f"vmapped {CPU_SECONDS['vmapped']:.3f} ({CPU_SECONDS['vmapped'] / t_vmap:.2f} cores), shared "
          f"{CPU_SECONDS['shared']:.3f}; speedup by CPU time "
          f"{'n/a' if result['speedup_vs_loop_cpu_time'] is None else format(result['speedup_vs_loop_cpu_time'], '.2f')}")
    print(f"plain 1024^3 matmul                                    {result['matmul_1024_gflops']:6.1f} GFLOP/s")
    print(f"batched layer-1 matmuls alone {t_bmm:8.3f} s ({t_bmm / t_vmap:.0%} of vmapped) "
          f"{result['bmm_layer1_gflops']:6.1f} GFLOP/s")
    print(f"online batches alone          {t_rng:8.3f} s ({t_rng / t_vmap:.0%} of vmapped)")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=2)
    print(f"shared_speedup_vs_loop: {t_loop / t_shared:.2f}")
    print(f"speedup_vs_loop: {result['speedup_vs_loop']:.2f}")


if __name__ == "__main__":
    main()
