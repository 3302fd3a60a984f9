"""A new user's and a reliability engineer's sweep of bad inputs and faults (issue 58), each case in its own
subprocess with a timeout, classified as: clear error, correct result, unclear message, raw traceback, silently
wrong, hang, crash.

Workload: >= 120 cases, tiny sizes (m <= 200, n <= 16, depth <= 3; one run of the juntas study at n = 8, 6
replicates, shared by the results-directory cases; 5,000 columns for the wide-data cases), on the public API
(``import jaxtrees as jt``: grow, draw, targets, distributions, the scikit-learn estimators, learners, fourier,
datasets) and the command line (``jaxtrees run/report/plot/export/convert/list``: bad flags and values, damaged
results directories, signals, environment variables, distributed starts).

How a case is judged. A Python case runs its code after a prelude and reports what it raised, warned and checked:
  - raised, from jaxtrees (or scikit-learn's input validation), and the message names what the case expects
    (a regular expression: the parameter, or the cause) -> clear; from jaxtrees otherwise -> unclear;
    raised inside jax, numpy or Python without a jaxtrees message -> raw traceback;
  - returned: a warning that names the expectation -> clear; ``check(...)`` calls all true -> correct; one false
    -> silently wrong; no checks while the case expects a refusal -> silently wrong (accepted as if fine).
A command-line case: exit 0 is correct where success is expected (silently wrong where a refusal is); a nonzero
exit whose stderr names the expectation with no traceback -> clear, else unclear; "Traceback" -> raw traceback;
killed by a signal, or exit 134 / 139 -> crash; past its timeout -> hang.

    python scripts/sweep_bad_inputs.py                 # every case, 2 at a time; a table of counts, then every
                                                       # case that is not clear or correct
    python scripts/sweep_bad_inputs.py --only cli- --jobs 1 --json sweep.json
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Callable, NamedTuple

PYTHON = sys.executable
CLASSES = ("clear error", "correct result", "unclear message", "raw traceback", "silently wrong", "hang", "crash")

PRELUDE = r'''
import json, sys, traceback, warnings
import numpy as np, jax, jax.numpy as jnp
import jaxtrees as jt
KEY = jax.random.key(0)
_checks = []
def check(cond, what=""):
    _checks.append([bool(cond), what])
def bits(m=64, n=6, seed=0):
    r = np.random.default_rng(seed)
    X = r.integers(0, 2, (m, n))
    return X, (X[:, 0] ^ X[:, 1]).astype(int)
def data(m=64, n=6, seed=0):
    return jt.from_arrays(*bits(m, n, seed))
RULE = jt.GrowthRule(max_depth=2)
'''

WRAP = r'''
_out = {}
with warnings.catch_warnings(record=True) as _w:
    warnings.simplefilter("always")
    try:
        exec(compile(_CODE, "<case>", "exec"), globals())
        _out["raised"] = None
    except BaseException as _e:  # noqa: BLE001
        _tb = traceback.extract_tb(_e.__traceback__)
        _out["raised"] = {"type": type(_e).__name__, "message": str(_e)[:1500],
                          "where": _tb[-1].filename if _tb else "?",
                          "frames": [f.filename for f in _tb]}
_out["warnings"] = [f"{w.category.__name__}: {w.message}"[:600] for w in _w
                    if not issubclass(w.category, (DeprecationWarning, FutureWarning))]
_out["checks"] = _checks
print("@@RESULT@@" + json.dumps(_out), flush=True)
'''


class Case(NamedTuple):
    name: str
    category: str
    kind: str  # "py", "cli" or "custom"
    body: object  # Python code; argv (list); or a callable(workdir) -> (class, detail)
    expect: str | None = None  # regex a clear message contains; None: success expected
    env: dict | None = None
    setup: Callable | None = None  # setup(workdir) before a cli case
    timeout: float = 120.0
    shell: bool = False


CASES: list[Case] = []


def py(name, category, code, expect=None, timeout=120.0):
    CASES.append(Case(name, category, "py", code, expect, timeout=timeout))


def cli(name, category, argv, expect=None, env=None, setup=None, timeout=120.0, shell=False):
    CASES.append(Case(name, category, "cli", argv, expect, env, setup, timeout, shell))


def custom(name, category, fn, timeout=400.0):
    CASES.append(Case(name, category, "custom", fn, timeout=timeout))


# ---------------------------------------------------------------- GrowthRule and grow

py("rule-depth-negative", "out-of-range", "jt.GrowthRule(max_depth=-1)", "max_depth")
py("rule-depth-float", "wrong type", "jt.GrowthRule(max_depth=1.5)", "max_depth")
py("rule-depth-string", "wrong type", "jt.GrowthRule(max_depth='3')", "max_depth")
py("rule-depth-huge", "out-of-range", "jt.grow(data(), jt.GrowthRule(max_depth=10**6))", "max_depth")
py("rule-impurity-typo", "wrong value", "jt.GrowthRule(max_depth=2, impurity='entropyy')", "impurity")
py("rule-tie-break", "wrong value", "jt.GrowthRule(max_depth=2, tie_break='first')", "tie_break")
py("rule-min-split", "out-of-range", "jt.GrowthRule(max_depth=2, min_samples_split=1)", "min_samples_split")
py("rule-min-leaf", "out-of-range", "jt.GrowthRule(max_depth=2, min_samples_leaf=0)", "min_samples_leaf")
py("rule-min-gain-nan", "NaN/inf", "jt.GrowthRule(max_depth=2, min_gain=float('nan'))", "min_gain")
py("rule-tie-tol-negative", "out-of-range", "jt.GrowthRule(max_depth=2, tie_tol=-1)", "tie_tol")
py("rule-max-features-0", "out-of-range", "jt.GrowthRule(max_depth=2, max_features=0)", "max_features")
py("rule-max-features-str", "wrong value", "jt.GrowthRule(max_depth=2, max_features='half')", "max_features")
py("rule-exact-weights-str", "wrong type", "jt.GrowthRule(max_depth=2, exact_weights='yes')", "exact_weights")
py("grow-rule-none", "wrong type", "jt.grow(data(), None)", "rule")
py("grow-numpy-data", "wrong type", "jt.grow(bits()[0], RULE)", "data")
py("grow-depth-above", "out-of-range", "jt.grow(data(), RULE, depth=5)", "depth")
py("grow-depth-negative", "out-of-range", "jt.grow(data(), RULE, depth=-1)", "depth")
py("grow-features-0", "out-of-range", "jt.grow(data(), RULE, features=0)", "features")
py("grow-random-no-key", "missing value", "jt.grow(data(), jt.GrowthRule(max_depth=2, tie_break='random'))", "key")
py("grow-int-key", "wrong type", "jt.grow(data(), jt.GrowthRule(max_depth=2, tie_break='random'), 0)", "key")
py("grow-impurity-unknown", "wrong value", "jt.grow(data(), RULE, impurity='foo')", "impurity")
py("weights-nan", "NaN/inf", "jt.with_weights(data(), np.r_[np.nan, np.ones(63)])", "weight")
py("weights-negative", "out-of-range", "jt.with_weights(data(), -np.ones(64))", "weight")
py("weights-inf", "NaN/inf", "jt.with_weights(data(), np.r_[np.inf, np.ones(63)])", "weight")
py("weights-wrong-length", "wrong shape", "jt.with_weights(data(), np.ones(65))", "weight")
py("weights-2d", "wrong shape", "jt.with_weights(data(), np.ones((64, 1)))", "weight")
py("weights-empty", "empty input", "jt.with_weights(data(), np.ones(0))", "weight")
py("weights-all-zero", "odd scale", """
t = jt.grow(jt.with_weights(data(), np.zeros(64)), RULE)
check((np.asarray(t.feature) == -1).all(), "no example of positive weight: no split")
""", "weight")
py("weights-uniform-1e38", "odd scale", """
X, y = bits(200, 8)
a = jt.grow(jt.with_weights(jt.from_arrays(X, y), np.full(200, 1e38)), jt.GrowthRule(max_depth=3))
b = jt.grow(jt.from_arrays(X, y), jt.GrowthRule(max_depth=3))
check((np.asarray(a.feature) == np.asarray(b.feature)).all(), "the unweighted tree")
""")
py("weights-uniform-1e-40", "odd scale", """
X, y = bits(200, 8)
a = jt.grow(jt.with_weights(jt.from_arrays(X, y), np.full(200, 1e-40)), jt.GrowthRule(max_depth=3))
b = jt.grow(jt.from_arrays(X, y), jt.GrowthRule(max_depth=3))
check((np.asarray(a.feature) == np.asarray(b.feature)).all(), "the unweighted tree")
""")
HEAVY = """
r = np.random.default_rng(0)
X = r.integers(0, 2, (200, 10)); y = X[:, 3] ^ (X[:, 5] & X[:, 7])
w = np.ones(200); w[0] = 1e9
d = jt.from_arrays(X, y)
"""
py("grow-heavy-example", "odd scale", HEAVY + """
t = jt.grow(jt.with_weights(d, w), jt.GrowthRule(max_depth=3, impurity='gini'))
check(float(jt.sample_error(t, d)) == 0.0, "a depth-3 tree fits every example, as scikit-learn's does")
""", "exact_weights")
py("grow-heavy-example-scales", "odd scale", HEAVY + """
rule = jt.GrowthRule(max_depth=3, impurity='gini')
trees = [np.asarray(jt.grow(jt.with_weights(d, w * s), rule).feature) for s in (1e-30, 1e-3, 1.0, 1e20)]
check(all((t == trees[0]).all() for t in trees), "one tree for w and s * w")
check(float(jt.sample_error(jt.grow(jt.with_weights(d, w), rule), d)) == 0.0, "the light examples count")
""", "exact_weights")
py("grow-heavy-example-jit", "traced value", HEAVY + """
t = jax.jit(lambda w: jt.grow(jt.with_weights(d, w), jt.GrowthRule(max_depth=3, impurity='gini')))(w)
check(float(jt.sample_error(t, d)) == 0.0, "the light examples count")
""", "exact_weights")
py("weights-traced-negative", "traced value", """
d = data()
t = jax.jit(lambda w: jt.grow(jt.with_weights(d, w), RULE))(-jnp.ones(64))
check(np.isnan(float(jt.sample_error(t, d))), "flagged as NaN, not a root-only tree")
""")

# ---------------------------------------------------------------- sampling

F8 = "f = jt.random_parity(jax.random.key(1), 8, 2)\n"
py("draw-p-above-1", "out-of-range", F8 + "jt.draw(KEY, jnp.full(8, 1.7), f, 64)", r"\bp\b")
py("draw-p-nan", "NaN/inf", F8 + "jt.draw(KEY, jnp.full(8, jnp.nan), f, 64)", r"\bp\b")
py("draw-p-short", "wrong shape", F8 + "jt.draw(KEY, jnp.full(4, 0.5), f, 64)", r"\bp\b|\bn\b")
py("draw-p-2d", "wrong shape", F8 + "jt.draw(KEY, jnp.full((2, 8), 0.5), f, 64)", r"\bp\b")
py("draw-p-empty", "empty input", F8 + "jt.draw(KEY, jnp.zeros(0), f, 64)", r"\bp\b")
py("draw-m-0", "empty input", F8 + "jt.draw(KEY, jnp.full(8, 0.5), f, 0)", r"\bm\b")
py("draw-m-negative", "out-of-range", F8 + "jt.draw(KEY, jnp.full(8, 0.5), f, -5)", r"\bm\b")
py("draw-m-float", "wrong type", F8 + "jt.draw(KEY, jnp.full(8, 0.5), f, 2.5)", r"\bm\b")
py("draw-m-huge", "out-of-range", F8 + "jt.draw(KEY, jnp.full(8, 0.5), f, 10**13)", r"\bm\b")
py("draw-noise-above-1", "out-of-range", F8 + "jt.draw(KEY, jnp.full(8, 0.5), f, 64, noise=1.5)", "noise")
py("draw-noise-nan", "NaN/inf", F8 + "jt.draw(KEY, jnp.full(8, 0.5), f, 64, noise=float('nan'))", "noise")
py("draw-int-key", "wrong type", F8 + "jt.draw(0, jnp.full(8, 0.5), f, 64)", "key")
py("draw-precision-0", "out-of-range", F8 + "jt.draw(KEY, jnp.full(8, 0.5), f, 64, precision_bits=0)",
   "precision_bits")
py("draw-precision-40", "out-of-range", F8 + "jt.draw(KEY, jnp.full(8, 0.5), f, 64, precision_bits=40)",
   "precision_bits")
py("draw-target-string", "wrong type", "jt.draw(KEY, jnp.full(8, 0.5), 'parity', 64)", "target")
py("draw-traced-p", "traced value", F8 + """
m = jax.jit(lambda q: jt.draw(KEY, jnp.full(8, q), f, 64).m)(1.7)
check(int(m) == 0, "flagged: no examples")
""")
py("draw-traced-noise", "traced value", F8 + """
m = jax.jit(lambda q: jt.draw(KEY, jnp.full(8, 0.5), f, 64, noise=q).m)(-0.2)
check(int(m) == 0, "flagged: no examples")
""")
py("draw-traced-m", "traced value", F8 + "jax.jit(lambda m: jt.draw(KEY, jnp.full(8, 0.5), f, m))(8)", r"\bm\b")
# issue 64 item 8: a tree grown on a flagged sample (bad p, bad k, bad weights) is NaN wherever it is scored
TEST8 = F8 + "test = jt.draw(jax.random.key(2), jnp.full(8, 0.5), f, 256)\n"
py("draw-traced-p-grow", "traced value", TEST8 + """
out = jax.jit(lambda q: (lambda t: (t.weight[0], jt.sample_error(t, test), jt.exact_error(t, jnp.full(8, 0.5), f)))(
    jt.grow(jt.draw(KEY, jnp.full(8, q), f, 64), RULE)))(1.7)
check(all(np.isnan(float(v)) for v in out), "NaN tree and errors, not every bit 1 and a plausible tree")
""")
py("draw-traced-p-vmap", "traced value", TEST8 + """
err = jax.jit(jax.vmap(lambda q: jt.sample_error(jt.grow(jt.draw(KEY, jnp.full(8, q), f, 64), RULE), test)))(
    jnp.array([0.5, jnp.nan, -0.1]))
check(np.isfinite(err[0]) and np.isnan(err[1:]).all(), "NaN only for the bad p")
""")
py("junta-traced-k-grow", "traced value", TEST8 + """
def trial(k):
    g = jt.random_junta(KEY, n=8, k=k, k_max=3)
    t = jt.grow(jt.draw(KEY, jnp.full(8, 0.5), g, 64), RULE)
    return jt.sample_error(t, test), jt.exact_error(t, jnp.full(8, 0.5), f)
check(all(np.isnan(float(v)) for v in jax.jit(trial)(10)), "k = 10 > n: NaN errors, not a 3-junta's tree")
""")
py("grow-traced-weights-negative-in-place", "traced value", """
d = data()
t = jax.jit(lambda w: jt.grow(d._replace(weight=w), RULE))(jnp.ones(64).at[3].set(-1.0))
check(np.isnan(np.asarray(t.weight)).all() and np.isnan(float(jt.sample_error(t, d))), "NaN, not a tree without it")
""")
py("grow-traced-weights-nan-exact", "traced value", """
d = data()
t = jax.jit(lambda w: jt.grow(d._replace(weight=w), jt.GrowthRule(max_depth=2, exact_weights=True)))(
    jnp.ones(64).at[0].set(jnp.nan))
check(np.isnan(np.asarray(t.mean)).all() and np.isnan(float(jt.sample_error(t, d))), "NaN tree with exact_weights")
""")
py("grow-traced-int-weights-negative", "traced value", """
d = data()
t = jax.jit(lambda w: jt.grow(d._replace(weight=w), RULE))(jnp.ones(64, jnp.int32).at[5].set(-2))
check(np.isnan(float(jt.sample_error(t, d))), "NaN tree for a negative count")
""")
py("grow-weights-negative-in-place", "out-of-range", "jt.grow(data()._replace(weight=-jnp.ones(64)), RULE)",
   "data.weight")
py("grow-no-examples", "empty input", "d = data(); jt.grow(d._replace(valid=0 * d.valid), RULE)", r"m >= 1")
py("grow-y-short", "wrong shape", "d = data(100); jt.grow(d._replace(y=d.y[:1]), RULE)",
   r"data\.y must be uint32\[4\].*uint32\[6, 4\].*uint32\[1\]")
py("grow-y-short-jit", "wrong shape", "d = data(100); jax.jit(lambda d: jt.grow(d, RULE))(d._replace(y=d.y[:1]))",
   r"data\.y must be uint32\[4\].*uint32\[6, 4\].*uint32\[1\]")
py("grow-weight-short-jit", "wrong shape",
   "d = data(100); jax.jit(lambda d: jt.grow(d, RULE))(d._replace(weight=jnp.ones(64)))",
   r"data\.weight .*\(128,\).*uint32\[6, 4\].*\(64,\)")
py("from-arrays-1d", "wrong shape", "jt.from_arrays(np.array([0, 1, 1]), np.array([0, 1, 1]))", r"\bX\b")
py("from-arrays-nonbinary", "wrong value", "jt.from_arrays(np.array([[0, 2], [1, 1]]), np.array([0, 1]))",
   r"\bX\b")
py("from-arrays-empty", "empty input", "jt.from_arrays(np.zeros((0, 5)), np.zeros(0))", r"\bX\b")
py("from-arrays-y-shape", "wrong shape", "jt.from_arrays(np.zeros((4, 2)), np.zeros(3))", r"\by\b")
py("from-arrays-nan", "NaN/inf", "jt.from_arrays(np.array([[0, np.nan], [1, 1]]), np.array([0, 1]))", r"\bX\b")
py("from-arrays-strings", "wrong type", "jt.from_arrays(np.array([['a', 'b'], ['b', 'a']]), np.array([0, 1]))",
   r"\bX\b")
py("from-arrays-y-nonbinary", "wrong value", "jt.from_arrays(np.zeros((2, 2)), np.array([0, 3]))", r"\by\b")
py("from-arrays-floats", "odd dtype", """
d = jt.from_arrays(np.array([[0.0, 1.0], [1.0, 1.0]]), np.array([0.0, 1.0]))
check(int(d.m) == 2, "two examples")
""")
py("prefix-negative", "out-of-range", "jt.prefix(data(), -1)", r"\bm\b")
py("prefix-too-long", "out-of-range", "jt.prefix(data(), 1000)", r"\bm\b")
py("quantize-bits-0", "out-of-range", "jt.quantize(jnp.full(4, 0.5), 0)", "precision_bits")
py("packed-bernoulli-m-0", "empty input", "jt.packed_bernoulli(KEY, jnp.full(4, 0.5), 0)", r"\bm\b")

# ---------------------------------------------------------------- targets

py("junta-k-above-n", "out-of-range", "jt.random_junta(KEY, n=4, k=6)", r"\bk\b")
py("junta-n-0", "out-of-range", "jt.random_junta(KEY, n=0, k=0)", r"\bn\b")
py("junta-k-negative", "out-of-range", "jt.random_junta(KEY, n=8, k=-1)", r"\bk\b")
py("junta-k-float", "wrong type", "jt.random_junta(KEY, n=8, k=2.5)", r"\bk\b")
py("junta-k-max-below-k", "out-of-range", "jt.random_junta(KEY, n=8, k=5, k_max=3)", r"\bk\b|k_max")
py("junta-traced-k", "traced value", """
ok = jax.jit(lambda k: jt.random_junta(KEY, n=8, k=k, k_max=8).in_range())(10)
check(not bool(ok), "flagged out of range")
""")
py("parity-k-above-n", "out-of-range", "jt.random_parity(KEY, 4, 6)", r"\bk\b")
py("parity-traced-k", "traced value", """
f = jax.jit(lambda k: jt.random_parity(KEY, 8, k, k_max=8))(12)
check(not bool(f.in_range()), "flagged out of range")
""")
py("junta-support-duplicate", "wrong value", "jt.junta(np.array([1, 1]), np.array([0, 1, 1, 0]), 8)", "support")
py("junta-support-out-of-range", "out-of-range", "jt.junta(np.array([0, 9]), np.array([0, 1, 1, 0]), 8)",
   "support")
py("junta-table-length", "wrong shape", "jt.junta(np.array([0, 1]), np.array([0, 1, 1]), 8)", "table")
py("junta-table-nonbinary", "wrong value", "jt.junta(np.array([0, 1]), np.array([0, 2, 1, 0]), 8)", "table")
py("parity-support-out-of-range", "out-of-range", "jt.parity(np.array([0, 12]), 8)", "support")
py("parity-support-negative", "out-of-range", "jt.parity(np.array([-1, 2]), 8)", "support")
py("random-tree-d-above-n", "out-of-range", "jt.random_tree(KEY, 3, 5)", r"\bd\b")
py("random-tree-d-negative", "out-of-range", "jt.random_tree(KEY, 8, -1)", r"\bd\b")
py("decision-tree-feature-out-of-range", "out-of-range",
   "jt.decision_tree(np.array([9, -1, -1]), np.array([0, 0, 0, 1]), 8)", "feature")
py("addressing-c-0", "out-of-range", "jt.addressing(0, 2)", r"\bc\b")
py("addressing-k-huge", "out-of-range", "jt.addressing(2, 40)", r"\bk\b")
py("decision-list-length-0", "out-of-range", "jt.random_decision_list(KEY, 8, 0)", "length")
py("rank-tree-r-above-n", "out-of-range", "jt.random_rank_tree(KEY, 4, 9)", r"\br\b")
py("agnostic-eps-2", "out-of-range", "jt.agnostic_addressing(KEY, jt.addressing(2, 2), 2.0)", "eps")
py("random-code-impossible", "out-of-range", "jt.random_code(0, 2, 4, min_distance=10)", "min_distance|distance")
py("support-mask-small-n", "out-of-range", "jt.support_mask(jt.parity(np.array([0, 7]), 8), 4)", r"\bn\b")
py("features-used-small-n", "out-of-range", """
t = jt.grow(data(64, 6), RULE)
used = jt.features_used(t, 1)
check(int(np.asarray(used).sum()) == int((np.asarray(t.feature) >= 0).sum() > 0), "every tested feature kept")
""", r"\bn\b")
py("exact-error-p-shape", "wrong shape", """
f = jt.parity(np.array([0, 7]), 8); t = jt.grow(jt.draw(KEY, jnp.full(8, 0.5), f, 64), RULE)
jt.exact_error(t, jnp.full(3, 0.5), f)""", r"\bp\b|\bn\b")
py("error-by-depth-p-2", "out-of-range", """
f = jt.random_junta(KEY, 8, 2); t = jt.grow(jt.draw(KEY, jnp.full(8, 0.5), f, 64), RULE)
jt.error_by_depth(t, jnp.full(8, 2.0), f)""", r"\bp\b")
py("truncate-negative", "out-of-range", "jt.truncate(jt.grow(data(), RULE), -1)", "depth_limit")
py("predict-short-x", "wrong shape", """
t = jt.grow(data(64, 6), RULE)
jt.predict(t, jnp.zeros(1, bool))""", r"\bx\b|features|shape")

# ---------------------------------------------------------------- distributions

py("smoothed-c-negative", "out-of-range", "jt.smoothed(c=-0.1)", r"\bc\b")
py("smoothed-c-above-half", "out-of-range", "jt.smoothed(c=0.7)", r"\bc\b")
py("smoothed-c-nan", "NaN/inf", "jt.smoothed(c=float('nan'))", r"\bc\b")
py("smoothed-p-hat-2", "out-of-range", "jt.smoothed(c=0.1, p_hat=2.0)", "p_hat")
py("alpha-c-alpha-negative", "out-of-range", "jt.alpha_c(alpha=-0.1, c=0.1)", "alpha")
py("product-p-above-1", "out-of-range", "jt.product(np.array([1.5, 0.5]))", r"\bp\b")
py("marginals-n-0", "out-of-range", "jt.smoothed(c=0.1).marginals(KEY, 0)", r"\bn\b")
py("marginals-n-float", "wrong type", "jt.uniform().marginals(KEY, 2.5)", r"\bn\b")
py("marginals-batch-0", "out-of-range", "jt.marginals(jt.uniform(), KEY, 4, batch=0)", "batch")
py("smoothed-traced-c", "traced value", "jax.jit(lambda c: jt.smoothed(c=c))(0.1)", "plain Python number")
py("product-traced-p", "traced value", """
p = jax.jit(lambda q: jt.product(jnp.full(4, q)).marginals(KEY, 4))(1.5)
check(bool(jnp.isnan(p).all()), "flagged (NaN), not p = 1.5")
""", r"\bp\b")

# ---------------------------------------------------------------- scikit-learn estimators

SK = "X, y = bits(64, 6)\n"
py("sk-depth-negative", "out-of-range", SK + "jt.DecisionTreeClassifier(max_depth=-1).fit(X, y)", "max_depth")
py("sk-x-nan", "NaN/inf", SK + "X = X.astype(float); X[0, 0] = np.nan\njt.DecisionTreeClassifier().fit(X, y)",
   "NaN")
py("sk-x-inf", "NaN/inf", SK + "X = X.astype(float); X[0, 0] = np.inf\njt.DecisionTreeClassifier().fit(X, y)",
   "infinity|inf")
py("sk-x-empty", "empty input", "jt.DecisionTreeClassifier().fit(np.zeros((0, 3)), np.zeros(0))",
   "0 sample|sample")
py("sk-three-classes", "wrong value", SK + "jt.DecisionTreeClassifier().fit(X, np.arange(64) % 3)", "classes")
py("sk-y-continuous", "wrong value", SK + "jt.DecisionTreeClassifier().fit(X, np.linspace(0, 1, 64))",
   "continuous|classes|label")
py("sk-weight-negative", "out-of-range", SK + "jt.DecisionTreeClassifier().fit(X, y, sample_weight=-np.ones(64))",
   "weight")
py("sk-weight-nan", "NaN/inf", SK + "jt.DecisionTreeClassifier().fit(X, y, sample_weight=np.r_[np.nan, np.ones(63)])",
   "weight|NaN")
py("sk-weight-all-zero", "odd scale", SK + "jt.DecisionTreeClassifier().fit(X, y, sample_weight=np.zeros(64))",
   "weight")
py("sk-weight-heavy", "odd scale", HEAVY + """
c = jt.DecisionTreeClassifier(impurity='gini', max_depth=3).fit(X, y, sample_weight=w)
check(c.score(X, y) == 1.0, "scikit-learn scores 1.0")
""")
py("sk-weight-1e-40", "odd scale", SK + """
a = jt.DecisionTreeClassifier(max_depth=3).fit(X, y, sample_weight=np.full(64, 1e-40))
check(a.score(X, y) == 1.0, "the unweighted tree")
""")
py("sk-predict-unfitted", "missing value", SK + "jt.DecisionTreeClassifier().predict(X)", "fitted|fit")
py("sk-predict-features", "wrong shape", SK + "c = jt.DecisionTreeClassifier().fit(X, y)\nc.predict(X[:, :3])",
   "features")
py("sk-x-1d", "wrong shape", "jt.DecisionTreeClassifier().fit(np.array([0, 1, 1]), np.array([0, 1, 1]))",
   "2D|2-d|reshape")
py("sk-x-strings", "wrong type", "jt.DecisionTreeClassifier().fit(np.array([['a'], ['b']]), np.array([0, 1]))",
   "string|float|convert")
py("sk-threshold-nan", "NaN/inf", SK + "jt.DecisionTreeClassifier(threshold=float('nan')).fit(X, y)", "threshold")
py("sk-impurity-bogus", "wrong value", SK + "jt.DecisionTreeClassifier(impurity='bogus').fit(X, y)", "impurity")
py("sk-random-state-negative", "out-of-range",
   SK + "jt.DecisionTreeClassifier(tie_break='random', random_state=-1).fit(X, y)", "random_state")
py("sk-one-class", "odd input", SK + """
c = jt.DecisionTreeClassifier().fit(X, np.zeros(64, int))
check((c.predict(X) == 0).all(), "the one class")
""")
py("sk-one-sample", "odd input", """
c = jt.DecisionTreeClassifier().fit(np.array([[0, 1]]), np.array([1]))
check(c.predict(np.array([[1, 1]]))[0] == 1, "the one label")
""")
py("sk-nonbinary-features", "odd dtype", """
X = np.random.default_rng(0).random((64, 4)); y = (X[:, 0] > 0.5).astype(int)
c = jt.DecisionTreeClassifier(max_depth=2).fit(X, y)
check(c.score(X, y) == 1.0, "binarized at 0.5")
""", "binar")
py("sk-wide-5000", "wide data", """
r = np.random.default_rng(0); X = r.integers(0, 2, (64, 5000)); y = X[:, 17]
check(jt.DecisionTreeClassifier(max_depth=3).fit(X, y).score(X, y) == 1.0, "fits feature 17")
""", timeout=240)
py("sk-forest-wide-5000", "wide data", """
r = np.random.default_rng(0); X = r.integers(0, 2, (64, 5000)); y = X[:, 17]
check(jt.RandomForestClassifier(n_estimators=10).fit(X, y).score(X, y) > 0.5, "fits")
""", timeout=240)
py("sk-lowdegree-degree-0", "out-of-range", SK + "jt.LowDegreeClassifier(degree=0).fit(X, y)", "degree")
py("sk-lowdegree-coef-1.5", "out-of-range", SK + "jt.LowDegreeClassifier(coef_threshold=1.5).fit(X, y)",
   "coef_threshold")
py("sk-lowdegree-basis", "wrong value", SK + "jt.LowDegreeClassifier(basis='fourier').fit(X, y)", "basis")
py("sk-lowdegree-terms-0", "out-of-range", SK + "jt.LowDegreeClassifier(max_terms=0).fit(X, y)", "max_terms")
py("sk-findmin-rank-negative", "out-of-range", SK + "jt.FindMinClassifier(max_rank=-1).fit(X, y)", "max_rank")
py("sk-findmin-calls-0", "out-of-range", SK + "jt.FindMinClassifier(max_calls=0).fit(X, y)", "max_calls")
py("sk-adaboost-learner", "wrong value", SK + "jt.AdaBoostClassifier(weak_learner='trees').fit(X, y)",
   "weak_learner")
py("sk-adaboost-rounds-0", "out-of-range", SK + "jt.AdaBoostClassifier(n_estimators=0).fit(X, y)", "n_estimators")
py("sk-adaboost-degree-5", "out-of-range",
   SK + "jt.AdaBoostClassifier(weak_learner='parities', degree=5).fit(X, y)", "degree")
py("sk-adaboost-weights-1e-30", "odd scale", SK + """
a = jt.AdaBoostClassifier(n_estimators=10).fit(X, y).predict(X)
b = jt.AdaBoostClassifier(n_estimators=10).fit(X, y, sample_weight=np.full(64, 1e-30)).predict(X)
check((a == b).all(), "the same predictions")
""")
py("sk-forest-estimators-0", "out-of-range", SK + "jt.RandomForestClassifier(n_estimators=0).fit(X, y)",
   "n_estimators")
py("sk-forest-max-features", "wrong value", SK + "jt.RandomForestClassifier(max_features='all').fit(X, y)",
   "max_features")
py("sk-forest-one-class", "odd input", SK + """
c = jt.RandomForestClassifier(n_estimators=3).fit(X, np.ones(64, int))
check((c.predict(X) == 1).all(), "the one class")
""", timeout=300)
py("sk-forest-weights-1e38", "odd scale", SK + """
forest = lambda: jt.RandomForestClassifier(n_estimators=3, max_depth=4, random_state=1)
a = forest().fit(X, y).predict(X)
b = forest().fit(X, y, sample_weight=np.full(64, 1e38)).predict(X)
check((a == b).all(), "the same predictions")
""", timeout=300)

# ---------------------------------------------------------------- learners, problems

py("adaboost-rounds-0", "out-of-range", "jt.AdaBoost(jt.Stump(), rounds=0)", "rounds")
py("adaboost-weak-string", "wrong type", "jt.AdaBoost('stump')", "weak")
py("bagging-members-0", "out-of-range", "jt.Bagging(jt.Stump(), members=0)", "members")
py("bagging-vote", "wrong value", "jt.Bagging(jt.Stump(), vote='max')", "vote")
py("best-first-leaves-0", "out-of-range", "jt.BestFirstTree(RULE, max_leaves=0)", "max_leaves")
py("findmin-rank-negative", "out-of-range", "jt.FindMin(max_rank=-1)", "max_rank")
py("parities-degree-0", "out-of-range", "jt.Parities(degree=0)", "degree")
py("lowdegree-basis", "wrong value", "jt.LowDegree(basis='x')", "basis")
py("sparse-l1-negative", "out-of-range", "jt.SparseRecovery(l1=-1.0)", "l1")
py("km-theta-0", "out-of-range", "jt.KushilevitzMansour(theta=0.0)", "theta")
py("stump-impurity", "wrong value", "jt.Stump(impurity='foo')", "impurity")
py("fit-evaluate-m-0", "empty input", """
problem = jt.Synthetic(jnp.full(8, 0.5), jt.random_junta(KEY, 8, 2))
jt.fit_and_evaluate(KEY, jt.GreedyTree(RULE), problem, 0)""", r"\bm\b")
py("greedy-fit-wrong-type", "wrong type", "jt.GreedyTree(RULE).fit(KEY, 'data')", "data")
py("learners-get-unknown", "wrong value", "jt.learners.get('nope')", "nope|learner")
py("synthetic-p-above-1", "out-of-range", """
problem = jt.Synthetic(jnp.full(8, 1.5), jt.random_junta(KEY, 8, 2))
jt.fit_and_evaluate(KEY, jt.GreedyTree(RULE), problem, 64)""", r"\bp\b")
py("data-set-mismatch", "wrong shape", "jt.data_set(np.zeros((4, 3)), np.zeros(5))", r"\by\b")

# ---------------------------------------------------------------- fourier

py("wht-length-3", "wrong shape", "jt.fourier.walsh_hadamard(jnp.ones(3))", "power of two|length|values")
py("wht-empty", "empty input", "jt.fourier.walsh_hadamard(jnp.ones(0))", "power of two|length|values|empty")
py("spectrum-small-n", "out-of-range", "jt.fourier.spectrum(jt.parity(np.array([0, 7]), 8), 4)", r"\bn\b")
py("spectrum-p-out-of-range", "out-of-range",
   "jt.fourier.spectrum(jt.parity(np.array([0, 1]), 4), 4, p=jnp.full(4, 1.5))", r"\bp\b")

# ---------------------------------------------------------------- data sets

py("datasets-unknown", "wrong value", "jt.datasets.load('iris')", "iris|name")
py("datasets-ocr-no-path", "missing value", "jt.datasets.load('ocr17')", "path")
py("datasets-missing-path", "missing file", "jt.datasets.load('census', path='/nonexistent/dir')",
   "/nonexistent/dir")
py("datasets-ecoli-class", "wrong value", "jt.datasets.load('ecoli', ecoli_positive=('zz',))", "zz")
py("datasets-corrupt-file", "damaged file", """
import os, shutil, tempfile
d = tempfile.mkdtemp()
for s in ('names', 'train', 'test'):
    open(os.path.join(d, f'census.{s}.gz'), 'wb').write(b'not gzip at all')
jt.datasets.load('census', path=d)""", "census")

# ---------------------------------------------------------------- the command line

TINY = ["--quick", "--set", "n=8", "--set", "k=2", "--set", "c=0,0.2", "--set", "m_min=16", "--set", "m_max=64",
        "--set", "replicates=6", "--no-progress"]
RUN = ["run", "juntas", "--out", "{work}/out", *TINY]


def _with(argv, **replace):
    """RUN with one --set NAME=VALUE replaced (or added)."""
    out, seen = list(argv), set()
    for i, a in enumerate(out):
        name = a.partition("=")[0]
        if name in replace and i and out[i - 1] == "--set":
            out[i] = f"{name}={replace[name]}"
            seen.add(name)
    for name in set(replace) - seen:
        out += ["--set", f"{name}={replace[name]}"]
    return out


cli("cli-no-args", "bad flags", [], "required|usage")
cli("cli-unknown-command", "bad flags", ["bogus"], "invalid choice")
cli("cli-unknown-study", "wrong value", ["run", "nosuchstudy", "--out", "{work}/out"], "nosuchstudy")
cli("cli-set-not-a-number", "wrong type", _with(RUN, n="abc"), r"\bn\b")
cli("cli-set-negative", "out-of-range", _with(RUN, n="-4"), r"\bn\b")
cli("cli-set-unknown", "wrong value", _with(RUN, bogus="3"), "bogus")
cli("cli-set-no-equals", "bad flags", [*RUN, "--set", "n"], "NAME=VALUE")
cli("cli-set-twice", "bad flags", [*RUN, "--set", "n=16"], "twice")
cli("cli-seed-negative", "out-of-range", [*RUN, "--seed", "-1"], "seed")
cli("cli-seed-text", "wrong type", [*RUN, "--seed", "abc"], "seed")
cli("cli-chunk-0", "out-of-range", [*RUN, "--chunk", "0"], "chunk")
cli("cli-group-negative", "out-of-range", [*RUN, "--group", "-1"], "group")
cli("cli-config-missing", "missing file", [*RUN, "--config", "{work}/nope.json"], "nope.json")
cli("cli-config-bad-json", "damaged file", [*RUN, "--config", "{work}/bad.json"], "bad.json",
    setup=lambda w: open(os.path.join(w, "bad.json"), "w").write("{n: 3"))
cli("cli-config-list", "wrong type", [*RUN, "--config", "{work}/list.json"], "JSON object",
    setup=lambda w: open(os.path.join(w, "list.json"), "w").write("[1, 2]"))
cli("cli-config-bad-value", "out-of-range",
    ["run", "juntas", "--out", "{work}/out", "--quick", "--set", "n=8", "--no-progress", "--config", "{work}/c.json"],
    r"\bc\b",
    setup=lambda w: open(os.path.join(w, "c.json"), "w").write('{"c": 7}'))
cli("cli-out-empty", "empty input", ["run", "juntas", "--out", "", *TINY], "--out")
cli("cli-out-is-a-file", "bad results directory", ["run", "juntas", "--out", "{work}/file", *TINY], "file",
    setup=lambda w: open(os.path.join(w, "file"), "w").write("x"))
cli("cli-out-unwritable", "bad results directory", ["run", "juntas", "--out", "/proc/jaxtrees", *TINY],
    "/proc/jaxtrees")
cli("cli-replicates-0", "out-of-range", _with(RUN, replicates="0"), "replicates")
cli("cli-m-min-above-max", "out-of-range", _with(RUN, m_min="64", m_max="16"), "m_min|m_max")
cli("cli-c-above-half", "out-of-range", _with(RUN, c="2"), r"\bc\b")
cli("cli-c-nan", "NaN/inf", _with(RUN, c="nan"), r"\bc\b")
cli("cli-k-above-n", "out-of-range", _with(RUN, k="20"), r"\bk\b")
cli("cli-n-huge", "out-of-range", _with(RUN, n="1000000000"), r"\bn\b")
cli("cli-coordinator-alone", "bad flags", [*RUN, "--coordinator", "localhost:1"], "go together")
cli("cli-num-processes-0", "out-of-range",
    [*RUN, "--coordinator", "localhost:1", "--num-processes", "0", "--process-id", "0"], "num-processes")
cli("cli-process-id-out-of-range", "out-of-range",
    [*RUN, "--coordinator", "localhost:1", "--num-processes", "2", "--process-id", "5"], "process-id")
cli("cli-coordinator-bad-address", "wrong value",
    [*RUN, "--coordinator", "nocolon", "--num-processes", "2", "--process-id", "1", "--distributed-timeout", "1"],
    "HOST:PORT")
cli("cli-distributed-timeout-0", "out-of-range",
    [*RUN, "--coordinator", "localhost:1", "--num-processes", "2", "--process-id", "1", "--distributed-timeout", "0"],
    "distributed-timeout")
cli("cli-distributed-no-cluster", "distributed", [*RUN, "--distributed"], "--coordinator")
cli("cli-peer-no-coordinator", "distributed",
    [*RUN, "--coordinator", "localhost:{port}", "--num-processes", "2", "--process-id", "1",
     "--distributed-timeout", "3"], "no coordinator")
cli("cli-coordinator-peers-missing", "distributed",
    [*RUN, "--coordinator", "localhost:{port}", "--num-processes", "2", "--process-id", "0",
     "--distributed-timeout", "3"], r"process\(es\) 1|peers|did not join")
cli("cli-report-missing-dir", "bad results directory", ["report", "{work}/nope"], "metadata.json")
cli("cli-report-empty-dir", "bad results directory", ["report", "{work}"], "metadata.json")
cli("cli-plot-a-file", "bad results directory", ["plot", "{work}/file"], "file",
    setup=lambda w: open(os.path.join(w, "file"), "w").write("x"))
cli("cli-convert-missing", "bad results directory", ["convert", "{work}/nope"], "nope")
cli("cli-export-missing", "bad results directory", ["export", "{work}/nope"], "nope")
cli("cli-backend-cuda", "environment", RUN, "JAX_PLATFORMS=cuda", env={"JAX_PLATFORMS": "cuda"})
cli("cli-backend-foo", "environment", RUN, "JAX_PLATFORMS=foo", env={"JAX_PLATFORMS": "foo"})
cli("cli-cpu-devices-text", "environment", RUN, "JAXTREES_CPU_DEVICES", env={"JAXTREES_CPU_DEVICES": "abc"})
cli("cli-compile-workers-bogus", "environment", RUN, "JAXTREES_COMPILE_WORKERS",
    env={"JAXTREES_COMPILE_WORKERS": "bogus"})
cli("cli-flush-seconds-text", "environment", RUN, "JAXTREES_FLUSH_SECONDS", env={"JAXTREES_FLUSH_SECONDS": "abc"})
cli("cli-list-head", "closed pipe", f"{PYTHON} -m jaxtrees.cli list | head -1", None, shell=True)
cli("cli-help-head", "closed pipe", f"{PYTHON} -m jaxtrees.cli run juntas --help | head -1", None, shell=True)


def _results(work: str) -> str:
    """A copy of the shared tiny juntas run in ``work``; its path."""
    target = os.path.join(work, "r", "juntas")
    shutil.copytree(BASE["dir"], target)
    return target


def _damage(fn):
    def setup(work):
        fn(_results(work))
    setup.uses_base = True
    return setup


_results.uses_base = True


def _corrupt_metadata(d):
    open(os.path.join(d, "metadata.json"), "w").write("{not json")


def _no_runs(d):
    m = json.load(open(os.path.join(d, "metadata.json")))
    json.dump({**m, "runs": []}, open(os.path.join(d, "metadata.json"), "w"))


def _bom(d):
    text = open(os.path.join(d, "metadata.json"), encoding="utf-8").read()
    open(os.path.join(d, "metadata.json"), "w", encoding="utf-8-sig").write(text)


def _drop_column(d):
    import glob

    import pyarrow.parquet as pq

    for part in glob.glob(os.path.join(d, "rows", "part-*.parquet")):
        pq.write_table(pq.read_table(part).drop_columns(["support_recovered"]), part)


def _truncate_part(d):
    import glob

    part = sorted(glob.glob(os.path.join(d, "rows", "part-*.parquet")))[0]
    data = open(part, "rb").read()
    open(part, "wb").write(data[: len(data) // 2])


def _no_rows(d):
    shutil.rmtree(os.path.join(d, "rows"))


def _lock_dir(d):
    lock = os.path.join(d, ".lock")
    if os.path.exists(lock):
        os.remove(lock)
    os.mkdir(lock)


R = "{work}/r/juntas"
cli("dir-report-ok", "results directory", ["report", R], None, setup=_results)
cli("dir-corrupt-metadata", "damaged file", ["report", R], "metadata.json", setup=_damage(_corrupt_metadata))
cli("dir-no-runs", "damaged file", ["report", R], "records no run", setup=_damage(_no_runs))
cli("dir-metadata-bom", "damaged file", ["report", R], None, setup=_damage(_bom))  # read past the mark
cli("dir-missing-column", "damaged file", ["report", R], "lack a column", setup=_damage(_drop_column))
cli("dir-truncated-part", "damaged file", ["report", R], r"part-\d+|parquet|damaged|cannot read",
    setup=_damage(_truncate_part))
cli("dir-no-rows", "damaged file", ["report", R], "rows|incomplete", setup=_damage(_no_rows))
cli("dir-plot-missing-column", "damaged file", ["plot", R], None, setup=_damage(_drop_column))  # not a plotted one
cli("dir-export-csv-missing-parent", "bad results directory", ["export", R, "--csv", "{work}/no/such/x.csv"],
    "no/such", setup=_results)
cli("dir-convert-parquet", "results directory", ["convert", R], "CSV|nothing to convert|already",
    setup=_results)
cli("dir-lock-is-directory", "damaged file", ["run", "juntas", "--out", "{work}/r", *TINY], "is a directory",
    setup=_damage(_lock_dir))
cli("dir-another-config", "results directory", _with(["run", "juntas", "--out", "{work}/r", *TINY], k="3"),
    "another|differ|k", setup=_results)
cli("dir-rerun-finished", "results directory", ["run", "juntas", "--out", "{work}/r", *TINY], None, setup=_results)


def _signal_case(sig, want_rc):
    def run(work):
        args = [PYTHON, "-m", "jaxtrees.cli", "run", "juntas", "--out", os.path.join(work, "out"), "--chunk", "32",
                *[a if not a.startswith("replicates=") else "replicates=320" for a in TINY]]
        env = {**os.environ, "JAXTREES_FLUSH_SECONDS": "0", **ENV}
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        rows = os.path.join(work, "out", "juntas", "rows")
        deadline = time.time() + 200
        while time.time() < deadline and proc.poll() is None and not (
                os.path.isdir(rows) and any(f.startswith("part-") for f in os.listdir(rows))):
            time.sleep(0.02)
        proc.send_signal(sig)
        try:
            _, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            return "hang", f"no exit 120 s after {sig.name}"
        if proc.returncode == 0:
            return "correct result", f"finished before {sig.name} reached it"
        if proc.returncode in (134, 139) or (proc.returncode < 0 and proc.returncode != -sig):
            return "crash", f"exit {proc.returncode}: {_tail(err)}"
        if "Traceback" in err:
            return "raw traceback", _tail(err)
        again = subprocess.run(args, capture_output=True, text=True, env=env, timeout=200)
        if again.returncode != 0:
            return "silently wrong", f"the rerun failed (exit {again.returncode}): {_tail(again.stderr)}"
        if proc.returncode not in want_rc:
            return "unclear message", f"exit {proc.returncode}: {_tail(err)}"
        return "correct result", f"exit {proc.returncode}, the rerun resumed"
    return run


custom("signal-sigint", "signal", _signal_case(signal.SIGINT, (130,)))
custom("signal-sigterm", "signal", _signal_case(signal.SIGTERM, (-signal.SIGTERM, 128 + signal.SIGTERM)))
custom("signal-sigkill", "signal", _signal_case(signal.SIGKILL, (-signal.SIGKILL,)))

# ---------------------------------------------------------------- running and judging

BASE: dict = {}
ENV: dict = {}


def _tail(text: str, n: int = 300) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return (lines[-1] if lines else "")[:n]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _judge_py(case: Case, proc) -> tuple[str, str]:
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("@@RESULT@@")), None)
    if line is None:
        return "crash", f"exit {proc.returncode}, no result: {_tail(proc.stderr)}"
    out = json.loads(line[len("@@RESULT@@"):])
    raised, warned, checks = out["raised"], out["warnings"], out["checks"]
    pattern = re.compile(case.expect, re.I) if case.expect else None
    if raised is not None:
        message = f"{raised['type']}: {raised['message']}"
        ours = any("/jaxtrees/" in f for f in raised["frames"][-3:]) or "sklearn/utils" in raised["where"] or (
            raised["type"] in ("ValueError", "TypeError") and "/jaxtrees/" in raised["where"])
        origin = "jaxtrees" in raised["where"] or "sklearn/utils" in raised["where"]
        if pattern is not None and pattern.search(raised["message"]) and (origin or ours) \
                and raised["type"] in ("ValueError", "TypeError", "NotFittedError", "FileNotFoundError",
                                       "KeyError", "LookupError"):
            return "clear error", message
        if checks and all(ok for ok, _ in checks) and pattern is None:
            return "correct result", message
        if origin:
            return "unclear message", f"{message}  [at {raised['where']}]"
        return "raw traceback", f"{message}  [at {raised['where']}]"
    if pattern is not None and any(pattern.search(w) for w in warned):
        return "clear error", "warned: " + next(w for w in warned if pattern.search(w))
    failed = [what for ok, what in checks if not ok]
    if failed:
        return "silently wrong", "check failed: " + "; ".join(failed) + (f"  (warnings: {warned})" if warned else "")
    if checks:
        return "correct result", "checks passed" + (f" (warned: {warned[0]})" if warned else "")
    if pattern is not None:
        return "silently wrong", "accepted with no error or warning" + (f" (warnings: {warned})" if warned else "")
    return "correct result", "ran"


def _judge_cli(case: Case, proc) -> tuple[str, str]:
    err = proc.stderr
    if proc.returncode in (134, 139) or proc.returncode < 0:
        return "crash", f"exit {proc.returncode}: {_tail(err)}"
    if "Traceback" in err:
        return "raw traceback", _tail(err)
    if proc.returncode == 0:
        if case.expect is None:
            return "correct result", _tail(proc.stdout, 120)
        return "silently wrong", f"exit 0: {_tail(proc.stdout, 200)}"
    if case.expect is None:
        return "unclear message", f"exit {proc.returncode}: {_tail(err)}"
    errors = [ln for ln in err.splitlines() if "error" in ln.lower()] or err.splitlines()
    if re.search(case.expect, err, re.I):
        return "clear error", _tail("\n".join(errors))
    return "unclear message", f"exit {proc.returncode}: {_tail(err)}"


def run_case(case: Case, root: str) -> dict:
    work = tempfile.mkdtemp(prefix=case.name + "-", dir=root)
    started = time.monotonic()
    try:
        if case.kind == "custom":
            outcome, detail = case.body(work)
        else:
            if case.setup:
                case.setup(work)
            env = {**os.environ, **ENV, **(case.env or {})}
            if case.kind == "py":
                argv = [PYTHON, "-c", PRELUDE + f"\n_CODE = {case.body!r}\n" + WRAP]
            elif case.shell:
                argv = case.body
            else:
                port = str(_free_port())
                argv = [PYTHON, "-m", "jaxtrees.cli",
                        *[a.replace("{work}", work).replace("{port}", port) for a in case.body]]
            try:
                proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=case.timeout,
                                      shell=case.shell, cwd=work)
            except subprocess.TimeoutExpired:
                outcome, detail = "hang", f"no exit after {case.timeout:.0f} s"
            else:
                outcome, detail = (_judge_py if case.kind == "py" else _judge_cli)(case, proc)
    except Exception as e:  # noqa: BLE001 - the sweep's own setup failing is reported, not raised
        outcome, detail = "crash", f"sweep setup failed: {type(e).__name__}: {e}"
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {"name": case.name, "category": case.category, "class": outcome, "detail": detail,
            "seconds": round(time.monotonic() - started, 1)}


def _base_run(root: str) -> None:
    """The tiny juntas run the results-directory cases copy."""
    out = os.path.join(root, "base")
    proc = subprocess.run([PYTHON, "-m", "jaxtrees.cli", "run", "juntas", "--out", out, *TINY],
                          capture_output=True, text=True, env={**os.environ, **ENV}, timeout=600)
    if proc.returncode != 0:
        sys.exit(f"the base run failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    BASE["dir"] = os.path.join(out, "juntas")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="", help="run the cases whose name contains one of these comma-separated texts")
    ap.add_argument("--jobs", type=int, default=2, help="cases run at once (default 2)")
    ap.add_argument("--json", help="write every case's outcome here")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    args = ap.parse_args(argv)
    cases = [c for c in CASES if any(part in c.name for part in args.only.split(","))]
    if args.list:
        for c in cases:
            print(f"{c.name:40s} {c.category}")
        print(f"{len(cases)} cases")
        return 0
    root = tempfile.mkdtemp(prefix="jaxtrees-sweep-")
    ENV["JAXTREES_CACHE_DIR"] = os.path.join(root, "xla-cache")  # one cache for the sweep, never the user's
    started = time.monotonic()
    cpu0 = os.times()
    if any(c.kind == "custom" or getattr(c.setup, "uses_base", False) for c in cases):
        _base_run(root)
    results = []
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        futures = {pool.submit(run_case, c, root): c for c in cases}
        for future in concurrent.futures.as_completed(futures):
            r = future.result()
            results.append(r)
            print(f"[{len(results):3d}/{len(cases)}] {r['class']:15s} {r['name']} ({r['seconds']} s)", flush=True)
    shutil.rmtree(root, ignore_errors=True)
    cpu = os.times()
    order = {c.name: i for i, c in enumerate(cases)}
    results.sort(key=lambda r: order[r["name"]])
    counts = {k: sum(r["class"] == k for r in results) for k in CLASSES}
    print(f"\n{len(results)} cases in {time.monotonic() - started:.0f} s wall, "
          f"{cpu.children_user + cpu.children_system - cpu0.children_user - cpu0.children_system:.0f} s CPU in "
          f"the subprocesses (load {os.getloadavg()[0]:.1f})\n")
    print("| class | cases |\n|---|---|")
    for k in CLASSES:
        print(f"| {k} | {counts[k]} |")
    bad = [r for r in results if r["class"] not in ("clear error", "correct result")]
    print(f"\n{len(bad)} case(s) neither clear nor correct:")
    for r in bad:
        print(f"  {r['class']:15s} {r['name']} [{r['category']}]: {r['detail'][:400]}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"counts": counts, "cases": results}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
