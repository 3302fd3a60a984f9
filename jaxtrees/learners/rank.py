"""Ehrenfeucht-Haussler's FIND(S, r) and FINDMIN(S) (seed 003) as a batched array program.

FIND(S, r) returns a decision tree of rank <= r consistent with the sample S if one exists;
FINDMIN(S) runs it for r = 0, 1, ... until it succeeds (:func:`search`, :class:`FindMin`, :func:`find`).
The recursion runs as an explicit-stack machine inside one ``lax.while_loop`` (:func:`_run`), and its
trees equal those of the numpy reference (:mod:`~jaxtrees.learners.rank_reference`) node for node.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxtrees.core import bits, checks, programs
from jaxtrees.core.sampling import Data
from jaxtrees.hypotheses.node_tree import NodeTree
from jaxtrees.learners.base import check_data

#: FIND's invocations allowed per sample (all ranks of a FINDMIN together) before it gives up.
MAX_CALLS = 2**20

# A frame's phases: entered, waiting for its call on S_0^v (then S_1^v), re-executing one side at rank r.
_ENTER, _WAIT0, _WAIT1, _REDO0, _REDO1 = range(5)
# Node columns: the test and children, the label, the node's examples and positive examples.
_FEATURE, _LEFT, _RIGHT, _LABEL, _COUNT, _POSITIVE = range(6)
# Search status.
_RUNNING, _FOUND, _NONE, _BUDGET = range(4)


class Search(NamedTuple):
    """The outcome of :func:`search` on one sample (a batch under ``jax.vmap``).

    ``tree``: the consistent tree found (a majority leaf when none is); ``rank``: the rank bound r
    of the successful FIND(S, r) (for FINDMIN the sample's rank r(S)), -1 if none succeeded;
    ``found``: whether a consistent tree of rank <= max_rank was found; ``exhausted``: the call
    budget ran out first; ``calls``: FIND's invocations, over all ranks tried, counted as the
    reference (:mod:`~jaxtrees.learners.rank_reference`) counts them (Lemma 3 bounds them by
    O((n + 1)^{2r})). The tree equals the reference's node for node.
    """

    tree: NodeTree
    rank: jax.Array
    found: jax.Array
    exhausted: jax.Array
    calls: jax.Array


class _Frame(NamedTuple):
    """One call FIND(S', r) on the machine's stack (int32 scalars; the stack holds them as rows)."""

    rank: jax.Array  # r, its rank bound
    var: jax.Array  # the variable v it tries (-1: none yet)
    phase: jax.Array  # _ENTER, _WAIT0, _WAIT1, _REDO0 or _REDO1
    slot: jax.Array  # its node's slot in the tree
    q0: jax.Array  # the slot of the tree its call on S'_0^v returned (-1: none, or not yet)
    q1: jax.Array  # ... on S'_1^v


def _frame(rank) -> _Frame:
    """A frame about to be entered with rank bound ``rank``."""
    return _Frame(*(jnp.asarray(v, jnp.int32) for v in (rank, -1, _ENTER, -1, -1, -1)))


def _at(frames, i) -> _Frame:
    """Frame ``i`` of the stack ``frames`` (int32[depth, 6]: a frame per row, the fields in ``_Frame``'s order)."""
    return _Frame(*frames[i])


def _set(frames, i, frame: _Frame):
    """The stack with row ``i`` set to ``frame``: one row write per step, not one per field."""
    return frames.at[i].set(jnp.stack(frame))


def _select(flag, a, b):
    return jax.tree.map(lambda x, y: jnp.where(flag, x, y), a, b)


class _Machine(NamedTuple):
    """The stack machine's state for one sample (see :func:`_run`)."""

    frames: jax.Array  # int32[depth, 6]: the call stack, a _Frame per row
    masks: jax.Array  # uint32[depth, W]: each frame's sample as a bitset
    top: jax.Array  # the top frame's index (-1: the root returned)
    ret: jax.Array  # the slot the last returning call found (-1: it failed)
    nodes: jax.Array  # int32[C, 6]: the tree's nodes (feature, left, right, label, examples, positive examples)
    ptr: jax.Array  # the next free slot
    calls: jax.Array  # FIND's invocations so far
    bound: jax.Array  # the rank bound of the root's current FIND
    status: jax.Array  # _RUNNING, _FOUND, _NONE or _BUDGET


def capacity(n: int, m: int, max_rank: int) -> int:
    """Slots that any partial tree of FIND(S, r <= max_rank) fits in: min(2 L(n, r) - 1, 2 m - 1)
    with L(n, r) = sum_{i <= r} C(n, i) (Lemma 1's bound on the leaves of a reduced rank-r tree).

    The partial tree on the machine's stack (:func:`_run`) is a reduced tree of rank <= r whose
    leaves hold disjoint nonempty samples, so min(2 L(n, r) - 1, 2 m - 1) slots suffice (Lemma 1)."""
    leaves = sum(math.comb(n, i) for i in range(min(max_rank, n) + 1))
    return max(1, min(2 * leaves - 1, 2 * m - 1))


def sample_bound(n: int, r: int, eps: float, delta: float) -> float:
    """Theorem 2's sample size: (1/eps) ((e n / r)^r ln(8n) + ln(1/delta)) examples make every
    consistent hypothesis of rank <= r eps-accurate with probability >= 1 - delta (n >= r >= 1)."""
    n = checks.integer("n", n, low=1)
    r = checks.integer("r", r, low=1, high=n)
    eps = checks.real("eps", eps, low=0.0, high=1.0, low_open=True, high_open=True)
    delta = checks.real("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
    return ((math.e * n / r) ** r * math.log(8 * n) + math.log(1 / delta)) / eps


def search(data: Data, max_rank: int, *, min_rank: int = 0, max_calls: int = MAX_CALLS) -> Search:
    """FIND(S, r) for r = ``min_rank``, ..., ``max_rank`` until one succeeds: FINDMIN(S) with
    ``min_rank=0``, FIND(S, r) with ``min_rank = max_rank = r``. One packed sample; vmap for a batch.

    FIND(S, r) returns a decision tree of rank <= r consistent with the sample S if one exists
    (Lemma 1's rank: 0 at a leaf; max(r0, r1) if r0 != r1, else r0 + 1), trying the informative
    variables in index order, with step 3's re-execution at rank r when exactly one of the two calls
    at rank r - 1 fails (the paper's procedure, stated in full in
    :func:`jaxtrees.learners.rank_reference.find`). FINDMIN(S) runs FIND(S, r) for r = 0, 1, ... until
    it succeeds, so its tree has the sample's rank r(S) (Theorem 1); by Theorem 2, m >=
    (1/eps) ((e n / r)^r ln(8n) + ln(1/delta)) examples of a rank-r target make its error <= eps with
    probability >= 1 - delta (:func:`sample_bound`).

    Examples with weight 0 are not in S; other weights are ignored (consistency does not weigh).
    A sample with one x labelled both ways has no consistent tree: then :attr:`Search.found` is False
    and the tree is a single leaf with the majority label.

    ``max_calls`` bounds FIND's invocations (Lemma 3 allows O(m (n + 1)^{2r}) time): the search
    stops at the first step that brings them to ``max_calls`` or more (a rank-1 step counts up to
    2n calls at once), with ``found = False, exhausted = True``. Ranks above n count as n: a sample with
    a consistent tree has one of rank <= n, and FIND(S, r) returns the same tree for every r >= n.

    >>> import jax, jax.numpy as jnp
    >>> from jaxtrees.core import sampling
    >>> data = sampling.from_arrays([[0, 0], [0, 1], [1, 0], [1, 1]], [0, 1, 1, 0])   # XOR: rank 2
    >>> s = search(data, max_rank=2)
    >>> int(s.rank), bool(s.found), int(s.calls), s.tree.feature[: int(s.tree.size)].tolist()
    (2, True, 13, [0, 1, -1, -1, 1, -1, -1])
    >>> bool(search(data, min_rank=1, max_rank=1).found)                               # FIND(S, 1)
    False
    """
    return FindMin(max_rank, min_rank, max_calls).search(data)


@programs.holds_programs
@functools.lru_cache(maxsize=16)  # each value holds its compiled programs
def _searcher(min_rank: int, max_rank: int, max_calls: int):
    """``jit(search)`` for one sample whose batching rule runs :func:`_run` on the whole batch.

    ``jax.vmap`` of a ``while_loop`` whose condition differs between lanes selects, every step,
    between the old and the new state of every lane (a copy of all the node tables); here the
    loop runs over the batch with ``any(running)`` and a finished lane's step writes nothing.
    """
    @jax.custom_batching.custom_vmap
    def one(data):
        return jax.tree.map(lambda a: a[0], _run(jax.tree.map(lambda a: a[None], data), min_rank, max_rank, max_calls))

    @one.def_vmap
    def batched(axis_size, in_batched, data):
        data = jax.tree.map(lambda a, b: a if b else jnp.broadcast_to(a, (axis_size,) + a.shape), data, in_batched[0])
        out = _run(data, min_rank, max_rank, max_calls)
        return out, jax.tree.map(lambda _: True, out)

    return jax.jit(one)


def _run(data: Data, min_rank: int, max_rank: int, max_calls: int) -> Search:
    """FINDMIN on a batch of samples (leading axis): one ``while_loop`` over the batch.

    The recursion runs as an explicit-stack machine (:class:`_Machine`): a frame (:class:`_Frame`)
    holds its sample as a bitset (``uint32[W]``: AND with a feature row or its complement restricts
    it), its rank bound, the variable it is trying, its phase and the results of its calls; each step
    advances the top frame by one event (enter, a call returned, a re-execution returned). Under
    ``jax.vmap`` every lane steps until the last one is done (:func:`_searcher`). The tree is a
    :class:`~jaxtrees.hypotheses.node_tree.NodeTree`: a frame takes the next free slot when it is
    entered and a failing frame frees its slot and everything allocated after it, so slot 0 is the
    root and the nodes in use are exactly the returned tree; :func:`capacity` slots suffice.
    """
    n, W = data.X.shape[-2:]
    C = capacity(n, bits.WORD_BITS * W, max_rank)
    D = n + 2  # every nested call fixes one more variable (frames 0..n), and one spare slot
    index = jnp.arange(n)

    def first(flags):
        """The lowest index where ``flags`` holds, or -1."""
        return jnp.where(jnp.any(flags), jnp.argmax(flags), -1).astype(jnp.int32)

    def leaf_row(positives, total):
        return jnp.stack([jnp.int32(-1), -1, -1, (2 * positives > total).astype(jnp.int32), total, positives])

    def step(s: _Machine, X, y, words) -> _Machine:
        active = s.status == _RUNNING
        top, ptr = s.top, s.ptr
        f = _at(s.frames, top)
        mask = s.masks[top]
        rank, var, phase = f.rank, f.var, f.phase

        # The top frame's sample, split on every variable: S_1^v has ones[v] examples, ones_y[v] positive.
        # One count of [mask; mask & y] against [X; all ones] (the last column: m and pos), over the
        # words that hold the sample.
        c = bits.count_and(jnp.stack([mask, mask & y])[:, None, :], X[None], words)  # [2, n + 1]
        ones, ones_y, m, pos = c[0, :n], c[1, :n], c[0, n], c[1, n]
        X = X[:n]
        zeros, zeros_y = m - ones, pos - ones_y
        informative = (ones > 0) & (ones < m)
        pure0 = informative & ((zeros_y == 0) | (zeros_y == zeros))
        pure1 = informative & ((ones_y == 0) | (ones_y == ones))

        entering = active & (phase == _ENTER)
        pure = (pos == 0) | (pos == m)
        # Rank 1: the calls FIND(S_b^v, 0) succeed iff S_b^v is pure, so the loop over v up to the
        # first variable with a pure side is one step (its 2 calls per variable are counted).
        bulk = entering & ~pure & (rank == 1)
        v1 = first(pure0 | pure1)
        tried = jnp.sum((informative & ((index <= v1) | (v1 < 0))).astype(jnp.int32))
        leaf0, leaf1 = pure0[jnp.maximum(v1, 0)], pure1[jnp.maximum(v1, 0)]
        bulk_both = bulk & (v1 >= 0) & leaf0 & leaf1
        bulk_one = bulk & (v1 >= 0) & (leaf0 != leaf1)

        # Returns from calls: WAIT0 / REDO0 receive Q0, WAIT1 / REDO1 receive Q1.
        q0 = jnp.where((phase == _WAIT0) | (phase == _REDO0), s.ret, f.q0)
        q1 = jnp.where((phase == _WAIT1) | (phase == _REDO1), s.ret, f.q1)
        q0 = jnp.where(bulk_one, jnp.where(leaf0, ptr + 1, -1), jnp.where(bulk_both, ptr + 1, q0))
        q1 = jnp.where(bulk_one, jnp.where(leaf1, ptr + 1, -1), jnp.where(bulk_both, ptr + 2, q1))
        both = (q0 >= 0) & (q1 >= 0)
        after_pair = active & (phase == _WAIT1)
        neither = after_pair & (q0 < 0) & (q1 < 0)

        # What this step does: return a slot (>= 0) or none (-1), or push a call.
        new_var = jnp.where(entering, jnp.where(bulk, v1, first(informative)),
                            jnp.where(neither, first(informative & (index > var)), var))
        redone = active & ((phase == _REDO0) | (phase == _REDO1))
        succeed = (entering & pure) | bulk_both | ((after_pair | redone) & both)
        push_next = ((entering & ~pure & (rank >= 2)) | neither) & (new_var >= 0)
        push_one = active & (phase == _WAIT0)
        redo = (after_pair & ((q0 >= 0) != (q1 >= 0))) | bulk_one
        push = push_next | push_one | redo
        fail = active & ~succeed & ~push
        own = jnp.where(entering, ptr, f.slot)

        # The call pushed: its side of the split and its rank bound.
        v = jnp.maximum(new_var, 0)
        right = push_one | (redo & (q1 < 0))
        child_mask = mask & jnp.where(right, X[v], ~X[v])
        child_rank = jnp.where(redo, rank, rank - 1)
        next_phase = jnp.where(push_next, _WAIT0, jnp.where(push_one, _WAIT1, jnp.where(q0 < 0, _REDO0, _REDO1)))
        updated = _Frame(rank, new_var, next_phase, own, jnp.where(push_next, -1, q0), jnp.where(push_next, -1, q1))
        frames = _set(s.frames, top, _select(push, updated, f))
        masks = s.masks.at[top + 1].set(jnp.where(push, child_mask, s.masks[top + 1]))
        frames = _set(frames, top + 1, _select(push, _frame(child_rank), _at(frames, top + 1)))

        # Node writes, one scatter: this frame's node (its label and counts on entering; its test and
        # children on success) and the pure leaves of a rank-1 step.
        kept_row = s.nodes[own]
        label = jnp.where(entering, (2 * pos > m).astype(jnp.int32), kept_row[_LABEL])
        counts = jnp.where(entering, jnp.stack([m, pos]), kept_row[_COUNT:])
        test = jnp.where(succeed & ~(entering & pure), jnp.stack([new_var, q0, q1]), -1)
        rows = jnp.stack([jnp.concatenate([test, label[None], counts]), leaf_row(zeros_y[v], zeros[v]),
                          leaf_row(ones_y[v], ones[v])])
        targets = jnp.stack([jnp.where(entering | succeed, own, C), jnp.where(bulk_one | bulk_both, q0, C),
                             jnp.where(bulk_one | bulk_both, q1, C)])
        targets = jnp.where(targets >= 0, targets, C)
        nodes = s.nodes.at[targets].set(rows, mode="drop")
        ptr = jnp.where(fail, own, jnp.where(entering, ptr + 1 + bulk_one + 2 * bulk_both, ptr))

        # Pop on return; at the root, FINDMIN moves on to the next rank or stops.
        new_top = jnp.where(push, top + 1, top - 1)
        result = jnp.where(succeed, own, -1)
        calls = s.calls + entering.astype(jnp.int32) + jnp.where(bulk, 2 * tried, 0)
        root_done = active & (new_top < 0)
        retry = root_done & (result < 0) & (s.bound < max_rank)
        bound = s.bound + retry.astype(jnp.int32)
        frames = _set(frames, 0, _select(retry, _frame(bound), _at(frames, 0)))
        status = jnp.where(root_done & (result >= 0), _FOUND, jnp.where(root_done & ~retry, _NONE, _RUNNING))
        status = jnp.where((status == _RUNNING) & (calls >= max_calls) & ~retry, _BUDGET, status)
        kept = lambda new, old: jnp.where(active, new, old)  # noqa: E731  (a finished lane writes nothing)
        return _Machine(frames, masks, kept(jnp.where(retry, 0, new_top), s.top), kept(result, s.ret), nodes,
                        kept(jnp.where(retry, 0, ptr), s.ptr), kept(calls, s.calls), kept(bound, s.bound),
                        kept(status, s.status))

    def start(valid, weight) -> _Machine:
        sample = valid if weight is None else valid & bits.pack(weight > 0)
        frames = _set(jnp.zeros((D, len(_Frame._fields)), jnp.int32), 0, _frame(min_rank))
        return _Machine(frames, jnp.zeros((D, W), jnp.uint32).at[0].set(sample), top=jnp.int32(0), ret=jnp.int32(-1),
                        nodes=jnp.full((C, 6), -1, jnp.int32).at[:, _COUNT:].set(0),
                        ptr=jnp.int32(0), calls=jnp.int32(0), bound=jnp.int32(min_rank), status=jnp.int32(_RUNNING))

    s = jax.vmap(start)(data.valid, data.weight)
    X = jnp.concatenate([data.X, jnp.full(data.X.shape[:-2] + (1, W), bits.ALL_ONES)], axis=-2)  # [B, n + 1, W]
    # The words up to the batch's last valid one: a prefix of a sample counts only its own words.
    words = jnp.max(jnp.where(data.valid != 0, jnp.arange(1, W + 1, dtype=jnp.int32), 0))
    s = jax.lax.while_loop(lambda s: jnp.any(s.status == _RUNNING),
                           lambda s: jax.vmap(step, in_axes=(0, 0, 0, None))(s, X, data.y, words), s)
    return jax.vmap(_finish)(s)


def _finish(s: _Machine) -> Search:
    """The search's result from the machine's final state (one sample)."""
    C = s.nodes.shape[0]
    found = s.status == _FOUND
    size = jnp.where(found, s.ptr, 1)
    used = jnp.arange(C) < size
    nodes = jnp.where(used[:, None], s.nodes, jnp.array([-1, -1, -1, 0, 0, 0], jnp.int32))
    # Without a tree, slot 0 is a leaf labelled by the sample's majority (set on entering the root).
    nodes = nodes.at[0, :_LABEL].set(jnp.where(found, nodes[0, :_LABEL], -1))
    feature, left, right, label, count, positive = (nodes[:, c] for c in range(6))
    internal = feature >= 0
    parent = jnp.full((C,), -1, jnp.int32)
    for child in (left, right):  # each node's parent: one scatter of the children's slots
        parent = parent.at[jnp.where(internal, child, C)].set(jnp.arange(C, dtype=jnp.int32), mode="drop")
    weight = count.astype(jnp.float32)
    mean = positive.astype(jnp.float32) / jnp.maximum(weight, 1.0)
    tree = NodeTree(feature, left, right, parent, jnp.where(used, label, 0), weight, mean, size)
    return Search(tree, jnp.where(found, s.bound, -1), found, s.status == _BUDGET, s.calls)


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class FindMin:
    """The learner FINDMIN: ``fit(key, data) -> NodeTree``, a consistent tree of the least rank
    r(S) <= ``max_rank`` (trying r = ``min_rank``, ..., ``max_rank``); :func:`find` (r) is FIND(S, r).
    The key is not read. Without a consistent tree within the ranks and ``max_calls`` (see
    :func:`search`), the tree is the sample's majority leaf."""

    max_rank: int
    min_rank: int = 0
    max_calls: int = MAX_CALLS
    access = "sample"

    def __post_init__(self):
        checks.integer("max_rank", self.max_rank, low=0)
        checks.integer("min_rank", self.min_rank, low=0, high=self.max_rank)
        checks.integer("max_calls", self.max_calls, low=1, high=2**31 - 1)

    def fit(self, key, data: Data) -> NodeTree:
        return self.search(data).tree

    def search(self, data: Data) -> Search:
        """The whole :class:`Search` (rank, found, calls) for one sample."""
        check_data(data)
        return _searcher(min(self.min_rank, data.n), min(self.max_rank, data.n), self.max_calls)(data)


def find(rank: int, max_calls: int = MAX_CALLS) -> FindMin:
    """The learner FIND(S, r): a consistent tree of rank <= r, or the majority leaf if none exists."""
    return FindMin(max_rank=rank, min_rank=rank, max_calls=max_calls)
