"""FINDMIN (seed 003): the batched stack machine vs the plain recursive numpy reference in a loop.

Workload (defaults): --batch = 1024 samples of --m = 256 uniform examples on --n = 16 variables,
each labelled by its own random rank-2 tree (``random_rank_tree(key, n, r=2, length=3)``: 16
leaves, depth 6). jaxtrees: ``FindMin(max_rank=3).search`` vmapped over the samples (one
``while_loop`` over the batch: jaxtrees.learners.rank). Reference:
``jaxtrees.learners.rank_reference.findmin`` on --reference-samples of them, scaled to the batch.
The batch is split over the devices (``shard_map``; on a CPU one device per core, as ``jaxtrees run``
splits it), each running its share in its own loop.
Both return the same trees (checked here on the reference's samples, and in tests/test_rank.py).
Timings after compilation, best of --reps interleaved rounds.

Where the time goes: one step of the machine advances one frame of every lane; each step counts
the frame's sample against every variable (2 n W AND + popcounts, W = m / 32) and writes a few
rows; a rank-1 frame settles all its rank-0 calls in that one step. Lanes finish at different
steps, so the batch runs as long as its slowest lane (the mean and maximum calls per sample are
printed).

The last lines are ``findmin_speedup_vs_reference: <ratio>`` and ``findmin_ms_1024: <ms>`` (milliseconds per
1024 samples, issue 37's measure).

    python scripts/bench_rank.py                     # reference workload
    python scripts/bench_rank.py --batch 128 --reference-samples 16 --reps 1
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

from jaxtrees.core.platform import split_cpu

split_cpu()  # before JAX starts: one CPU device per core, as ``jaxtrees run`` (JAXTREES_CPU_DEVICES=1: off)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, PartitionSpec  # noqa: E402

import jaxtrees as jt  # noqa: E402
from jaxtrees.core.programs import jit  # noqa: E402
from jaxtrees.learners import rank, rank_reference  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import interleaved_best  # noqa: E402


def nested(t, slot=0):
    """One NodeTree (host) as the reference's nested tuples."""
    f = int(t.feature[slot])
    return int(t.label[slot]) if f < 0 else (f, nested(t, int(t.left[slot])), nested(t, int(t.right[slot])))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--m", type=int, default=256)
    ap.add_argument("--rank", type=int, default=2, help="rank of the targets")
    ap.add_argument("--length", type=int, default=3, help="spine length of the targets")
    ap.add_argument("--max-rank", type=int, default=3)
    ap.add_argument("--reference-samples", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args(argv)
    for name in ("batch", "n", "m", "rank", "length", "reference_samples", "reps"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.rank * args.length > args.n:
        ap.error(f"--rank x --length must be <= --n (the targets' depth), got {args.rank} x {args.length}")
    if not args.rank <= args.max_rank <= args.n:
        ap.error(f"--max-rank must be in [--rank, --n] = [{args.rank}, {args.n}], got {args.max_rank}")

    def sample(key):
        f = jt.random_rank_tree(jax.random.fold_in(key, 0), args.n, args.rank, args.length)
        return jt.draw(jax.random.fold_in(key, 1), jnp.full((args.n,), 0.5), f, args.m)

    keys = jax.random.split(jax.random.key(0), args.batch)
    data = jax.block_until_ready(jit(jax.vmap(sample))(keys))
    learner = rank.FindMin(max_rank=args.max_rank)
    devices = jax.devices()[:math.gcd(args.batch, jax.device_count())]  # each its share of the batch, its own loop
    mesh, spec = Mesh(devices, ("batch",)), PartitionSpec("batch")
    run = jit(jax.shard_map(jax.vmap(learner.search), mesh=mesh, in_specs=spec, out_specs=spec, check_vma=False))
    started = time.perf_counter()
    run = run.lower(data).compile()
    compile_s = time.perf_counter() - started
    out = jax.device_get(run(data))

    k = min(args.reference_samples, args.batch)
    unpack = jit(jax.vmap(lambda X, y: (jt.bits.unpack(X, args.m).T, jt.bits.unpack(y, args.m))))
    X, y = (np.asarray(a) for a in unpack(data.X[:k], data.y[:k]))

    def reference_loop():
        return [rank_reference.findmin(X[b], y[b], max_rank=args.max_rank) for b in range(k)]

    for b, (tree, r) in enumerate(reference_loop()):  # the same trees
        assert tree == nested(jax.tree.map(lambda a: a[b], out.tree)) and r == int(out.rank[b]), b
    times = interleaved_best({"jaxtrees": lambda: run(data), "reference": reference_loop}, args.reps)
    t_jt, t_ref = times["jaxtrees"], times["reference"] / k * args.batch
    calls = np.asarray(out.calls)
    print(f"device: {len(devices)} x {jax.devices()[0].device_kind} ({jax.default_backend()}), jax {jax.__version__}")
    print(f"workload: {args.batch} samples, m = {args.m}, n = {args.n}, random rank-{args.rank} trees "
          f"(spines of {args.length}), FINDMIN up to rank {args.max_rank}; r(S) found: "
          f"{dict(zip(*np.unique(out.rank, return_counts=True)))}")
    print(f"calls per sample: mean {calls.mean():.0f}, max {calls.max()}")
    print(f"jaxtrees   {t_jt * 1e3:10.1f} ms  (compile {compile_s:.1f} s; {args.batch / t_jt:,.0f} samples/s)")
    print(f"reference  {t_ref * 1e3:10.1f} ms  ({k} samples scaled; {calls[:k].sum() / (t_ref / args.batch * k):,.0f} "
          "calls/s)")
    print(f"findmin_speedup_vs_reference: {t_ref / t_jt:.1f}")
    print(f"findmin_ms_1024: {t_jt / args.batch * 1024 * 1e3:.1f}")


if __name__ == "__main__":
    main()
