"""Command line: ``jaxtrees quickstart``."""

from __future__ import annotations

import argparse
import os
import sys
import time


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="jaxtrees", description="Monte Carlo studies of decision-tree learning.")
    sub = ap.add_subparsers(dest="command", required=True)
    q = sub.add_parser("quickstart", help="ID3 success rate vs sample size, uniform vs smoothed (CPU, ~1 min)",
                       description="ID3 success rate vs sample size for random k-juntas and k-parities, "
                                   "uniform vs c-smoothed product distributions. Writes OUT/quickstart.csv "
                                   "and OUT/quickstart.png and prints a table.")
    q.add_argument("--out", default="results", help="output directory (default: results)")
    q.add_argument("--n", type=int, default=16, help="number of features (default 16)")
    q.add_argument("--k", type=int, default=4, help="junta / parity size (default 4)")
    q.add_argument("--c", type=float, default=0.2, help="smoothing: p_i ~ U[1/2 - c, 1/2 + c] (default 0.2)")
    q.add_argument("--trials", type=int, default=400, help="trials per cell (default 400)")
    q.add_argument("--m", type=int, nargs="+", default=[32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384],
                   help="training sample sizes")
    q.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    from jaxtrees import quickstart

    t0 = time.perf_counter()
    try:
        path = quickstart.run(args.out, n=args.n, k=args.k, c=args.c, ms=args.m, trials=args.trials, seed=args.seed)
    except ValueError as e:
        print(f"jaxtrees quickstart: error: {e}", file=sys.stderr)
        return 2
    png = quickstart.plot(path, os.path.join(args.out, "quickstart.png"))
    print()
    print(f"P[test error = 0] over {args.trials} trials per cell (n = {args.n}, k = {args.k}):")
    print(quickstart.table(quickstart.read(path)))
    print(f"\nwrote {path} and {png} in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
