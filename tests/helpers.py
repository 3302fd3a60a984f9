"""Shared machinery for the test suite: data-set generators, the batched engine, tree checks.

The engine is compiled once per (batch shape, rule): ``grow_batch`` is module-level so every test
file that imports it shares jax's compilation cache. All batches have exactly ``BATCH`` data sets
(short batches are padded by repeating the last one), so a compiled program is reused for every
batch of the same (n, W) and rule; m varies freely within a word count W = ceil(m / 32).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

import jaxtrees as jt
import reference
from jaxtrees.core import bits

BATCH = 32

#: One jitted, vmapped engine for the whole suite (rule static, one key shared by the batch).
grow_batch = jax.jit(jax.vmap(jt.grow, in_axes=(0, None, None)))
KEY = jax.random.key(0)

#: Lines printed at the end of the pytest run by conftest.pytest_terminal_summary.
REPORT: dict[str, str] = {}


# ----------------------------------------------------------------------------- data sets


def m_range(W: int) -> tuple[int, int]:
    """The sample sizes m with ceil(m / 32) == W, as [low, high]."""
    return 32 * (W - 1) + 1, 32 * W


def size_menu(W: int) -> list[int]:
    """Four sample sizes with word count W: the smallest (m = 1 for W = 1, one bit in the last
    word otherwise), two that are not multiples of 32, and the multiple of 32.

    Few distinct sizes matter: ``jaxtrees.from_arrays`` packs eagerly, and every new (n, m)
    costs jax a compile of its packing ops (~0.2 s), far more than packing itself.
    """
    lo, hi = m_range(W)
    return [lo, lo + 13, hi - 1, hi]


def sizes(rng, W: int, count: int) -> list[int]:
    """``count`` sample sizes cycling through ``size_menu(W)`` in a random order."""
    menu = size_menu(W)
    return [int(m) for m in rng.permutation(np.resize(menu, max(count, len(menu))))[:count]]


def make_X(rng, m: int, n: int, style: str) -> np.ndarray:
    """A binary design matrix [m, n] (int8).

    styles: ``"bernoulli"`` (independent columns, random marginals in [0.1, 0.9]), ``"uniform"``
    (p = 1/2), ``"ties"`` (bernoulli, then some columns replaced by copies or complements of
    others, or by constants: exact gain ties and inadmissible features).
    """
    if style == "uniform":
        p = np.full(n, 0.5)
    else:
        p = rng.uniform(0.1, 0.9, n)
    X = (rng.random((m, n)) < p).astype(np.int8)
    if style == "ties" and n >= 2:
        for j in rng.choice(n, size=max(1, n // 3), replace=False):
            kind = rng.integers(3)
            src = int(rng.integers(n))
            if kind == 0:
                X[:, j] = X[:, src]
            elif kind == 1:
                X[:, j] = 1 - X[:, src]
            else:
                X[:, j] = rng.integers(2)
    return X


def make_y(rng, X: np.ndarray, kind: str) -> np.ndarray:
    """Labels (int8) for X. kinds: ``"random"`` (i.i.d. Bernoulli(q), q ~ U[0.15, 0.85]),
    ``"junta"`` (a random function of 1..3 random columns), ``"noisy"`` (a junta with each
    label flipped with probability 0.15), ``"parity"`` (parity of 1..3 random columns)."""
    m, n = X.shape
    if kind == "random":
        return (rng.random(m) < rng.uniform(0.15, 0.85)).astype(np.int8)
    k = int(rng.integers(1, min(n, 3) + 1))
    J = rng.choice(n, size=k, replace=False)
    if kind == "parity":
        return (X[:, J].sum(axis=1) % 2).astype(np.int8)
    table = rng.integers(0, 2, size=2**k)
    y = table[(X[:, J].astype(np.int64) << np.arange(k)).sum(axis=1)].astype(np.int8)
    if kind == "noisy":
        y ^= (rng.random(m) < 0.15).astype(np.int8)
    elif kind != "junta":
        raise ValueError(kind)
    return y


LABEL_KINDS = ("random", "junta", "noisy", "parity")
X_STYLES = ("bernoulli", "uniform", "ties", "bernoulli")


def datasets(rng, n: int, W: int, count: int, kinds=LABEL_KINDS, styles=X_STYLES):
    """``count`` data sets (X, y) of n features and word count W, cycling label kinds/X styles."""
    out = []
    for i, m in enumerate(sizes(rng, W, count)):
        X = make_X(rng, m, n, styles[(i // len(kinds)) % len(styles)])
        out.append((X, make_y(rng, X, kinds[i % len(kinds)])))
    return out


# ----------------------------------------------------------------------------- engine


def stack(samples):
    """Stack samples along a new leading axis (in numpy: no per-shape eager compiles)."""
    return jax.tree.map(lambda *a: jnp.asarray(np.stack([np.asarray(x) for x in a])), *samples)


def np_sample(X, y) -> jt.Data:
    """``jaxtrees.from_arrays(X, y)`` computed with numpy (``np_pack``).

    The suite packs its thousands of data sets this way: from_arrays packs with eager jax ops,
    which compile once per new (n, m), ~0.2 s each. Equality with from_arrays is asserted on
    every packed shape the suite uses (test_grow_reference.test_from_arrays_equals_numpy_packing).
    """
    X = np.asarray(X)
    return jt.Data(np_pack(X.T.astype(bool)), np_pack(np.asarray(y).astype(bool)), np_pack(np.ones(len(X), bool)))


def grow_many(data, rule: jt.GrowthRule) -> list[jt.Tree]:
    """Grow one tree per data set with ``grow_batch``, in batches of exactly ``BATCH``.

    All data sets must share n and W. Returns numpy trees.
    """
    trees = []
    for start in range(0, len(data), BATCH):
        chunk = data[start:start + BATCH]
        samples = [np_sample(X, y) for X, y in chunk]
        samples += [samples[-1]] * (BATCH - len(samples))
        out = jax.device_get(grow_batch(stack(samples), rule, KEY))
        trees += [jt.Tree(*(np.asarray(a[b]) for a in out)) for b in range(len(chunk))]
    return trees


# ----------------------------------------------------------------------------- comparisons


def assert_matches_reference(tree: jt.Tree, ref: dict, where: str = ""):
    """Feature, label and weight arrays exactly; gain to 1e-5; mean to 1e-6."""
    np.testing.assert_array_equal(tree.feature, ref["feature"], err_msg=f"feature {where}")
    np.testing.assert_array_equal(tree.label, ref["label"], err_msg=f"label {where}")
    np.testing.assert_array_equal(tree.weight, ref["weight"], err_msg=f"weight {where}")
    np.testing.assert_allclose(tree.gain, ref["gain"], rtol=0, atol=1e-5, err_msg=f"gain {where}")
    np.testing.assert_allclose(tree.mean, ref["mean"], rtol=0, atol=1e-6, err_msg=f"mean {where}")


def traverse(tree: jt.Tree, X: np.ndarray) -> np.ndarray:
    """Leaf label of every row of X by walking the heap in plain Python (the test's own predict)."""
    feature = np.asarray(tree.feature)
    label = np.asarray(tree.label)
    out = np.empty(len(X), np.int64)
    for r, x in enumerate(np.asarray(X)):
        node = 0
        while 2 * node + 2 < feature.size and feature[node] >= 0:
            node = 2 * node + 1 + int(x[feature[node]])
        out[r] = label[node]
    return out


def node_rows(tree: jt.Tree, X: np.ndarray) -> dict[int, np.ndarray]:
    """Rows of X reaching every existing node (by the test's own traversal)."""
    feature = np.asarray(tree.feature)
    rows = {0: np.arange(len(X))}
    for i in range(feature.size):
        if i in rows and feature[i] >= 0 and 2 * i + 2 < feature.size:
            r = rows[i]
            rows[2 * i + 1] = r[X[r, feature[i]] == 0]
            rows[2 * i + 2] = r[X[r, feature[i]] == 1]
    return rows


@dataclasses.dataclass
class Tally:
    """Counts of data sets compared with a reference, for the report."""

    compared: int = 0
    filtered: int = 0
    untied: int = 0
    exact_ties: int = 0

    def add(self, ref):
        """Classify one reference result; True if it is compared in the main tests."""
        if reference.ambiguous(ref):
            self.filtered += 1
            return False
        if reference.nontrivial_exact_ties(ref):
            self.exact_ties += 1
            return False
        self.compared += 1
        self.untied += reference.untied(ref)
        return True

    def __iadd__(self, other):
        for f in dataclasses.fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))
        return self

    def __str__(self):
        return (f"{self.compared} compared ({self.untied} with every margin > 1e-4), "
                f"{self.exact_ties} with exact ties between different statistics (compared in the "
                f"exact-tie test), {self.filtered} filtered as float32-ambiguous")


def n_words(m: int) -> int:
    return bits.n_words(m)


# ----------------------------------------------------------------------------- numpy bit layout


def np_pack(b) -> np.ndarray:
    """numpy version of the documented layout: bool[..., m] -> uint32[..., ceil(m/32)], bit b of
    word w is element 32 w + b, bits past m zero. Independent of jaxtrees.core.bits."""
    b = np.asarray(b).astype(np.uint64)
    m = b.shape[-1]
    W = -(-m // 32)
    b = np.pad(b, [(0, 0)] * (b.ndim - 1) + [(0, 32 * W - m)])
    words = b.reshape(b.shape[:-1] + (W, 32)) << np.arange(32, dtype=np.uint64)
    return words.sum(axis=-1).astype(np.uint32)


def np_unpack(words, m: int) -> np.ndarray:
    """Inverse of np_pack: uint32[..., W] -> bool[..., m]."""
    words = np.asarray(words, np.uint32)
    b = (words[..., None] >> np.arange(32, dtype=np.uint32)) & np.uint32(1)
    return b.reshape(words.shape[:-1] + (-1,))[..., :m].astype(bool)


def assert_valid_markdown_tables(text: str) -> int:
    """Every GitHub-markdown table in ``text`` renders: a header row, a ``|---|`` delimiter row with
    as many columns, and body rows with exactly that many cells (unescaped ``|`` separate cells).
    Returns the number of tables."""
    import re

    def cells(line):
        return [c for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]

    lines, tables, i = text.splitlines(), 0, 0
    while i < len(lines):
        if lines[i].startswith("|") and i + 1 < len(lines) and re.fullmatch(r"\|(---\|)+", lines[i + 1]):
            width = len(cells(lines[i]))
            assert len(cells(lines[i + 1])) == width, f"delimiter row of {lines[i]!r}"
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                assert len(cells(lines[i])) == width, f"row {lines[i]!r} has not {width} cells"
                i += 1
            tables += 1
        else:
            assert not lines[i].startswith("|"), f"table row outside a table: {lines[i]!r}"
            i += 1
    return tables


def run_killed(args: list[str], rows_dir, env: dict | None = None, parts: int = 2) -> int:
    """Start ``jaxtrees ARGS`` (a part per call) and SIGKILL it once ``parts`` parts are in ``rows_dir``; the
    parts then written. Fails if the run finished first."""
    import os
    import signal
    import subprocess
    import sys
    import time

    proc = subprocess.Popen([sys.executable, "-m", "jaxtrees.cli", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env={**os.environ, "JAXTREES_FLUSH_SECONDS": "0", **(env or {})})
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if rows_dir.exists() and len(list(rows_dir.glob("part-*.parquet"))) >= parts:
            break
        time.sleep(0.01)
    alive = proc.poll() is None
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert alive, "the run finished before it could be killed"
    return len(list(rows_dir.glob("part-*.parquet")))


def kill_after_first_part(procs: list, rows_dir, pid: int = 2) -> None:
    """SIGKILL process ``pid`` of a distributed run (held after its first part by JAXTREES_TEST_STOP_AFTER_PARTS=1)
    once that part is in ``rows_dir``: mid-run by construction; fails if it ended first."""
    import signal
    import time

    deadline = time.time() + 300  # a bound only: the process waits, blocked, for the kill
    mine = f"{pid:04d}"
    while time.time() < deadline and not any(n.name.split("-")[2] == mine for n in rows_dir.glob("part-*.parquet")):
        assert procs[pid].poll() is None, procs[pid].communicate()
        time.sleep(0.05)
    assert procs[pid].poll() is None  # mid-run: its first part written, the rest of its share not
    procs[pid].send_signal(signal.SIGKILL)


def resealed(part):
    """A part rewritten in place (a test's deliberate change) renamed to carry its new whole-file CRC-32, so that the
    store's deeper checks, not the checksum, judge it; returns its new path."""
    import re
    import zlib
    from pathlib import Path

    part = Path(part)
    name = re.sub(r"-c[0-9a-f]{8}\.parquet$", f"-c{zlib.crc32(part.read_bytes()):08x}.parquet", part.name)
    return part.rename(part.with_name(name))
