"""The learner protocol, the data checks every learner shares, and the registry of learners.

A learner is an immutable, hashable configuration (its hyperparameters, closed over like an optax transformation; static
under ``jax.jit``) with one pure method ``learner.fit(key, data) -> hypothesis`` over ONE data set; a batch of data sets
is ``jax.vmap(learner.fit)`` outside (as gymnax batches environments). Its ``access`` says what ``data`` is (a sample,
the population, or membership queries: :class:`Learner`); a problem (:mod:`jaxtrees.problems`) hands each learner the
access it asks for and :func:`jaxtrees.problems.evaluate` scores what comes back, so any learner runs on any problem.
A new learner is one module plus one :func:`register` line in :mod:`jaxtrees.learners`.

>>> import jax
>>> from jaxtrees import learners
>>> learner = learners.get("id3-entropy")
>>> learner.access, isinstance(learner, Learner)
('sample', True)
"""

from __future__ import annotations

import re
import warnings
from typing import Callable, NamedTuple, Protocol, runtime_checkable

import jax.numpy as jnp
import numpy as np

from jaxtrees.core import bits, checks
from jaxtrees.problems import ACCESS


@runtime_checkable
class Learner(Protocol):
    """``fit(key, data) -> Hypothesis`` for one data set; hashable; ``access`` in :data:`ACCESS`.

    What ``data`` is depends on ``access``:

    - ``"sample"``: a :class:`~jaxtrees.core.sampling.Data` set (packed examples, labels, valid
      count, optional weights);
    - ``"population"``: a :class:`~jaxtrees.problems.Population` (the distribution p and the target
      f themselves: exact oracle access, the infinite-sample setting, or fresh examples on demand);
    - ``"query"``: :class:`~jaxtrees.problems.Queries` (membership queries: f at any input the
      learner chooses; the learner's own hyperparameters set its query budget).

    Every learner should pass the conformance checks (``learners.check``, :mod:`~jaxtrees.learners.conformance`);
    tests/test_learner_conformance.py runs them on every registered one with no test edits.
    """

    access: str

    def fit(self, key, data): ...


def check_data(data) -> None:
    """Raise ValueError naming the field if ``data`` is not one well-formed packed data set.

    Shapes are checked always (also under ``jax.jit`` / ``jax.vmap`` at trace time, where they are static and
    per instance): a ValueError naming the field and both shapes. Values (m >= 1, weights finite and >= 0, one
    positive) when they are concrete; traced bad values cannot raise and make :func:`~jaxtrees.learners.greedy.grow`
    return a NaN tree instead (issue 64 item 8).
    """
    if not all(hasattr(data, field) for field in ("X", "y", "valid", "weight")):
        raise ValueError(f"data must be a packed jaxtrees Data (jt.from_arrays(X, y), jt.draw(...)), got "
                         f"{type(data).__name__}")
    X, y, valid = (jnp.asarray(a) for a in (data.X, data.y, data.valid))
    if X.ndim != 2 or X.dtype != jnp.uint32:
        raise ValueError(f"data.X must be uint32[n, W] (one packed row per feature; vmap for a batch), "
                         f"got {X.dtype}{list(X.shape)}")
    n, W = X.shape
    if n < 1 or W < 1:
        raise ValueError(f"data.X must have n >= 1 features and W >= 1 words, got shape {X.shape}")
    for name, a in (("data.y", y), ("data.valid", valid)):
        if a.shape != (W,) or a.dtype != jnp.uint32:
            raise ValueError(f"{name} must be uint32[{W}] to match data.X's W = {W} words (data.X is "
                             f"uint32{list(X.shape)}), got {a.dtype}{list(a.shape)}")
    # numpy on concrete values: jnp would trace them inside jit (data closed over by a jitted function)
    slots = np.unpackbits(np.asarray(valid).view(np.uint8), bitorder="little") if checks.is_concrete(valid) else None
    if slots is not None and not slots.any():
        raise ValueError("data must hold m >= 1 examples (data.valid has no bit set)")
    if data.weight is not None:
        w = jnp.asarray(data.weight)
        if w.shape != (W * bits.WORD_BITS,):
            raise ValueError(f"data.weight must have one entry per bit slot, shape ({W * bits.WORD_BITS},) for "
                             f"data.X's W = {W} words (data.X is uint32{list(X.shape)}; use sampling.with_weights), "
                             f"got {w.shape}")
        checks.nonnegative("data.weight", w)
        if slots is not None and checks.is_concrete(w):
            arr = np.asarray(w, np.float64)
            if not np.any(arr[slots[: arr.size] > 0] > 0):
                raise ValueError("data.weight must give some valid example a positive weight")


def reweighted(learner, data):
    """``fit(key, weight) -> hypothesis``: ``learner.fit(key, data)`` with ``data``'s weights replaced by
    ``weight: float32[32 W]``, for many weightings of one data set (AdaBoost's rounds). A learner with a
    ``reweighted(data)`` method shares the work that does not depend on the weights across the fits."""
    own = getattr(learner, "reweighted", None)
    if own is not None:
        return own(data)
    check_data(data)
    return lambda key, weight: learner.fit(key, data._replace(weight=weight))


# ------------------------------------------------------------------------------------- registry

class Size(NamedTuple):
    """The problem a registered learner is configured for: a study's cell (``n``, ``k``, ``m`` and the
    learner settings it varies) or, by default, the conformance suite's small problems. Each
    factory reads the fields it needs; the defaults leave every registered learner something to learn
    on the ``compare`` study's target families at n = 8, k = 2, and a sizing that may leave a learner
    nothing warns (:class:`SizingWarning`, naming the field)."""

    n: int = 8  # input bits
    k: int = 1  # the target's size: the Fourier degree, FIND's rank, the parity learner's degree
    m: int = 96  # examples per trial (a query learner: query triples per level)
    depth: int = 3  # tree depth
    rounds: int = 8  # boosting rounds, ensemble members
    theta: float = 0.1  # the Fourier learners' coefficient threshold (<= 2^(-k/2) up to k = 6: coefficient_floor)
    l1: float = 0.05  # the Lasso's penalty
    max_rank: int = 8  # FINDMIN's largest rank (every rank of n <= 8 bits; max_calls bounds the search)
    max_calls: int = 2**20  # FIND's invocations per sample
    width: int = 16  # the network's hidden width
    lr: float = 0.1  # the network's learning rate
    steps: int = 40  # the network's training steps


class SizingWarning(UserWarning):
    """A registered learner's sizing may leave it nothing to learn on targets of the size asked for."""


def coefficient_floor(k: int) -> float:
    """2^(-k/2): the largest |Fourier coefficient| every k-junta is sure to have (Parseval over its 2^k sets;
    a bent function's are all this size), so a threshold above it may keep none.

    >>> coefficient_floor(2), round(coefficient_floor(5), 3)  # majority of 5 has none above 0.375
    (0.5, 0.177)
    """
    return 2.0 ** (-k / 2)


def warn_sizing(name: str, field: str, value, why: str, stacklevel: int = 5) -> None:
    """Warn (:class:`SizingWarning`) that the registered learner ``name``'s Size ``field`` = ``value`` ``why``;
    ``stacklevel`` points at the caller of :func:`get` from a helper called by a factory."""
    warnings.warn(f"learner {name!r}: Size {field} = {value!r} {why}", SizingWarning, stacklevel=stacklevel)


class Entry(NamedTuple):
    """A registered learner: its factory and what :func:`register` was told about it (None: not told)."""

    factory: Callable[[Size], Learner]
    about: str | None = None  # what it is, one line
    cost: str | None = None  # its cost per fit, one line


_REGISTRY: dict[str, Entry] = {}


def register(name: str, factory: Callable[[Size], Learner], *, about: str | None = None,
             cost: str | None = None) -> None:
    """Register a learner under ``name``: ``factory(size)`` returns its configuration for a
    :class:`Size` (studies pass their cell's; the conformance suite the defaults). Factories import
    lazily, so a registered learner costs nothing until it is asked for. ``about`` (what it is) and
    ``cost`` (per fit), one line each, describe it in ``learners.info`` and ``jaxtrees list --learners``. A name
    registered from outside jaxtrees may be registered again (a notebook cell run twice): the new entry replaces it.
    ``name``: letters, digits, '-' and '_' (a ``--set learner=a,b`` list splits at commas); ``factory``: a callable."""
    if not isinstance(name, str) or not re.fullmatch(r"[\w-]+", name):
        raise ValueError(f"name must be a non-empty str of letters, digits, '-' and '_' (no spaces or commas: "
                         f"`--set learner=a,b` splits at commas), got {name!r}")
    if not callable(factory):
        raise ValueError(f"factory must be callable (factory(size) returns the learner for a learners.Size), got "
                         f"{factory!r}")
    if name in _REGISTRY and _builtin(_REGISTRY[name].factory):
        raise ValueError(f"a learner named {name!r} is already registered (a built-in one: choose another name)")
    for field, text in (("about", about), ("cost", cost)):
        if text is not None and (not isinstance(text, str) or "\n" in text):
            raise ValueError(f"{field} must be one line of text, got {text!r}")
    _REGISTRY[name] = Entry(factory, about, cost)


def _builtin(factory) -> bool:
    """Whether ``factory`` is jaxtrees' own (defined in the package), not a user's."""
    return (getattr(factory, "__module__", "") or "").split(".")[0] == "jaxtrees"


def unregister(name: str) -> None:
    """Remove the registered learner ``name`` (to register a changed one under the same name)."""
    entry(name)
    del _REGISTRY[name]


def entry(name: str) -> Entry:
    """The registry's :class:`Entry` for ``name`` (a ValueError naming the registered ones if there is none)."""
    if name not in _REGISTRY:
        raise ValueError(f"unknown learner {name!r}; registered: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name]


def get(name: str, size: Size = Size()) -> Learner:
    """The registered learner ``name`` configured for ``size`` (a fresh configuration from its factory)."""
    return entry(name).factory(size)


def names() -> list[str]:
    """The registered learners' names, sorted."""
    return sorted(_REGISTRY)


class _Recording(Size):
    """A :class:`Size` that records the fields read from it (``read``); the values are the size's."""

    def __getattribute__(self, name):
        if name in Size._fields:
            object.__getattribute__(self, "__dict__").setdefault("read", set()).add(name)
        return super().__getattribute__(name)


def fields_read(factory: Callable[[Size], Learner], size: Size = Size()) -> tuple[tuple[str, ...], Learner]:
    """``(the Size fields factory(size) reads, sorted; the learner it returns)``, found by recording the reads
    (a field read by unpacking the tuple is not seen)."""
    recording = _Recording(*size)
    learner = factory(recording)
    return tuple(sorted(recording.__dict__.get("read", ()))), learner
