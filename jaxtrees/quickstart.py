"""The quickstart study: how many examples does ID3 need, uniform vs smoothed?

For each target family (random k-juntas, k-parities) and each distribution (uniform, and
c-smoothed around 1/2: p_i ~ U[1/2 - c, 1/2 + c], 002 Def. 9), ``trials`` independent trials each
draw a distribution, a target on n bits and max(ms) training examples; for every m in ``ms`` an
entropy tree is grown to depth k + 2 on the first m examples (common random numbers across m)
and scored on ``test_m`` fresh examples. A trial succeeds at m when that test error is 0. Theory (000 Thm 1, 2): under smoothing both families are
learnable from poly(n) examples; under the uniform distribution every gain of a parity is 0, so
ID3 cannot find it.

Each trial's key is ``fold_in`` of the root seed with (target, distribution) and the trial
index, so results do not depend on how trials are batched. The whole study is one compiled
program.

    jaxtrees quickstart --out results          # writes results/quickstart.csv and .png
"""

from __future__ import annotations

import csv
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxtrees import _checks, distributions, growth, sampling, targets, tree

TARGETS = ("junta", "parity")
PLURAL = {"junta": "juntas", "parity": "parities"}
FIELDS = ("target", "distribution", "c", "n", "k", "m", "trials", "successes", "success_rate",
          "wilson_low", "wilson_high", "mean_test_error")


def trial(key, c, is_parity, ms, *, n: int, k: int, max_m: int, test_m: int, rule: growth.GrowthRule):
    """One trial; returns the test error at each m in ``ms`` (float32[len(ms)]).

    ``c``, ``is_parity`` and ``ms`` may be traced; ``max_m`` (>= max(ms)) fixes the sample shape.
    """
    kp, kf, ktrain, ktest = jax.random.split(key, 4)
    p = distributions.Smoothed(jnp.float32(0.5), c).marginals(kp, n)
    f = targets.random_junta(kf, n, k)
    parity_table = jnp.asarray([bin(a).count("1") % 2 == 1 for a in range(2**k)])
    f = targets.Junta(f.support, jnp.where(is_parity, parity_table, f.table))
    train = sampling.draw(ktrain, p, f, max_m)
    test = sampling.draw(ktest, p, f, test_m)
    return jax.vmap(lambda m: tree.sample_error(growth.grow(sampling.prefix(train, m), rule), test))(ms)


def trial_keys(root, cell, trials: int):
    """Keys of a grid cell's trials: fold_in of the root with each cell index, then the trial index."""
    for index in cell:
        root = jax.random.fold_in(root, index)
    return jax.vmap(jax.random.fold_in, in_axes=(None, 0))(root, jnp.arange(trials))


def wilson(successes, trials, z=1.96):
    """Wilson score interval for a binomial proportion (95% by default)."""
    phat = successes / trials
    denom = 1 + z**2 / trials
    centre = (phat + z**2 / (2 * trials)) / denom
    half = z * np.sqrt(phat * (1 - phat) / trials + z**2 / (4 * trials**2)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def run(out: str, *, n: int = 16, k: int = 4, c: float = 0.2, ms=(32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384),
        trials: int = 400, test_m: int = 8192, seed: int = 0, verbose: bool = True) -> str:
    """Run the study, writing ``out/quickstart.csv`` (one row per cell, as each finishes)."""
    n = _checks.integer("n", n, low=2, high=4096)
    k = _checks.integer("k", k, low=1, high=min(n, 12))
    c = _checks.real("c", c, low=0.0, high=0.5, low_open=True, high_open=True)
    trials = _checks.integer("trials", trials, low=1)
    test_m = _checks.integer("test_m", test_m, low=1)
    ms = [_checks.integer("m", m, low=1) for m in ms]
    rule = growth.GrowthRule(max_depth=k + 2, impurity="entropy")
    root = jax.random.key(seed)
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "quickstart.csv")
    cells = [(ti, target, di, dist, cc) for ti, target in enumerate(TARGETS)
             for di, (dist, cc) in enumerate((("uniform", 0.0), ("smoothed", c)))]
    run_cells = jax.jit(jax.vmap(jax.vmap(
        lambda key, cc, par: trial(key, cc, par, jnp.asarray(ms), n=n, k=k, max_m=max(ms), test_m=test_m, rule=rule),
        in_axes=(0, None, None))))
    with open(path + ".tmp", "w", newline="") as fh:
        writer = csv.DictWriter(fh, FIELDS)
        writer.writeheader()
        for ti, target, di, dist, cc in cells:
            t0 = time.perf_counter()
            keys = trial_keys(root, (ti, di), trials)[None]
            errors = np.asarray(run_cells(keys, jnp.float32([cc]), jnp.asarray([target == "parity"])))[0]
            for mi, m in enumerate(ms):
                err = errors[:, mi]
                succ = int(np.sum(err == 0))
                lo, hi = wilson(succ, trials)
                writer.writerow(dict(target=target, distribution=dist, c=cc, n=n, k=k, m=m, trials=trials,
                                     successes=succ, success_rate=succ / trials, wilson_low=lo,
                                     wilson_high=hi, mean_test_error=float(np.mean(err))))
            fh.flush()
            if verbose:
                print(f"{target:6s} {dist:8s}: {trials} trials x {len(ms)} sample sizes in "
                      f"{time.perf_counter() - t0:.1f} s", flush=True)
    os.replace(path + ".tmp", path)
    return path


def read(path: str) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def table(rows: list[dict]) -> str:
    """Success rate per (target, distribution) against m, as aligned text."""
    ms = sorted({int(r["m"]) for r in rows})
    series = sorted({(r["target"], r["distribution"]) for r in rows})
    lines = [f"{'target':8s} {'distribution':12s} " + " ".join(f"{m:>6d}" for m in ms)]
    for target, dist in series:
        rate = {int(r["m"]): float(r["success_rate"]) for r in rows if (r["target"], r["distribution"]) == (target, dist)}
        lines.append(f"{target:8s} {dist:12s} " + " ".join(f"{rate.get(m, float('nan')):6.2f}" for m in ms))
    return "\n".join(lines)


def plot(path: str, out_png: str) -> str:
    """Success rate vs m with 95% Wilson bands, one panel per target family."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read(path)
    fig, axes = plt.subplots(1, len(TARGETS), figsize=(11, 4.2), sharey=True, constrained_layout=True)
    for ax, target in zip(axes, TARGETS):
        for dist, colour in (("uniform", "tab:red"), ("smoothed", "tab:blue")):
            sel = sorted((r for r in rows if r["target"] == target and r["distribution"] == dist), key=lambda r: int(r["m"]))
            if not sel:
                continue
            m = [int(r["m"]) for r in sel]
            label = dist if dist == "uniform" else f"smoothed, c = {float(sel[0]['c']):g}"
            ax.plot(m, [float(r["success_rate"]) for r in sel], "o-", color=colour, label=label)
            ax.fill_between(m, [float(r["wilson_low"]) for r in sel], [float(r["wilson_high"]) for r in sel],
                            color=colour, alpha=0.2)
        r0 = rows[0]
        ax.set_xscale("log", base=2)
        ax.set_title(f"random {r0['k']}-{PLURAL[target]}, n = {r0['n']}", fontsize=13)
        ax.set_xlabel("training examples m", fontsize=12)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("P[test error = 0] (95% Wilson band)", fontsize=12)
    axes[0].legend(fontsize=11)
    fig.suptitle("ID3 (entropy, depth k + 2): success rate vs sample size", fontsize=14)
    fig.savefig(out_png, dpi=120)
    plt.close(fig)
    return out_png
