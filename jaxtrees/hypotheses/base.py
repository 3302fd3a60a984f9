"""The hypothesis protocol: what a learner returns.

A hypothesis is a pytree (a batch of hypotheses is one with a leading axis) that labels inputs,
packed or plain. Where the math allows, it also has its exact error under a product
distribution and a target (``exact = True``: trees, stumps); otherwise (``exact = False``:
networks, ensembles) it is scored on a test sample, and every result says which
(:func:`jaxtrees.problems.evaluate`).

>>> import jax.numpy as jnp
>>> from jaxtrees.core import sampling
>>> from jaxtrees.hypotheses.tree import stump
>>> h = stump(feature=0)                       # x_0 ? 1 : 0
>>> data = sampling.from_arrays([[0, 1], [1, 0], [1, 1]], [0, 1, 0])
>>> isinstance(h, Hypothesis), round(float(sample_error(h, data)), 4)
(True, 0.3333)
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from jaxtrees.core import bits


@runtime_checkable
class Hypothesis(Protocol):
    """h: {0,1}^n -> {0,1} as a pytree.

    - ``h.predict(x)``: plain inputs ``x: {0,1}[..., n]`` -> ``int32[...]``;
    - ``h.predict_bits(X)``: packed inputs ``X: uint32[n, W]`` -> packed labels ``uint32[W]``;
    - ``h.exact``: a class-level bool; when True, ``h.exact_error(p, target)`` is
      Pr_{x ~ p}[h(x) != f(x)] computed exactly from the target's oracle (no test sample).
    """

    exact: bool

    def predict(self, x): ...

    def predict_bits(self, X): ...


def sample_error(hypothesis: Hypothesis, data):
    """Fraction of ``data``'s examples that ``hypothesis`` mislabels (float32; weighted by
    ``data.weight`` when the data carries weights)."""
    wrong = (hypothesis.predict_bits(data.X) ^ data.y) & data.valid
    if data.weight is None:
        return bits.count(wrong) / bits.count(data.valid)
    w = data.weight
    return (bits.unpack(wrong, w.shape[-1]) * w).sum() / (bits.unpack(data.valid, w.shape[-1]) * w).sum()
