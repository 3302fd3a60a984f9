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

import jax.numpy as jnp

from jaxtrees.core import bits, checks


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


def target_mean(target, p, fixed, values):
    """mu = E[f(x) | x_j = v_j for fixed j] alone, all that exact scoring needs: ``target.mean`` where the
    target has that cheaper oracle (``means`` adds mu1, one more conditional mean per variable), else
    ``target.means(p, fixed, values)[0]``."""
    own = getattr(target, "mean", None)
    return own(p, fixed, values) if callable(own) else target.means(p, fixed, values)[0]


def sample_error(hypothesis: Hypothesis, data):
    """Fraction of ``data``'s examples that ``hypothesis`` mislabels (float32; weighted by
    ``data.weight`` when the data carries weights). NaN for a tree grown on flagged data (its root weight NaN:
    traced bad weights or values, issue 58), whatever data it is scored on."""
    wrong = (hypothesis.predict_bits(data.X) ^ data.y) & data.valid
    if data.weight is None:
        error = bits.count(wrong) / bits.count(data.valid)
    else:
        w = data.weight
        error = (bits.unpack(wrong, w.shape[-1]) * w).sum() / (bits.unpack(data.valid, w.shape[-1]) * w).sum()
    return flag_nan_root(hypothesis, error)


def flag_nan_root(hypothesis, value):
    """``value``, or NaN where ``hypothesis`` is a tree whose root weight is NaN (grown on flagged data)."""
    weight = getattr(hypothesis, "weight", None)
    if weight is None or jnp.ndim(weight) < 1:
        return value
    return jnp.where(jnp.isnan(weight[..., 0]), jnp.nan, value)


class TreeMethods:
    """The hypothesis methods of both tree layouts, written once (heap
    :class:`~jaxtrees.hypotheses.tree.Tree`, node-list :class:`~jaxtrees.hypotheses.node_tree.NodeTree`).

    Mixed into a NamedTuple of the layout's arrays (``class Tree(TreeMethods, _Arrays)``); each
    method checks the inputs' n against the features the tree tests, then calls the function of
    the same name in the layout's module, the class attribute ``_layout`` (its jitted ``leaf``,
    ``predict``, ``predict_bits`` and its ``exact_error``).
    """

    __slots__ = ()

    #: The error under a product distribution and a target is computed exactly (``exact_error``).
    exact = True

    def predict(self, x):
        """Labels ``int32[...]`` for plain inputs ``x: {0,1}[..., n]``."""
        checks.same_n("x", jnp.shape(x)[-1], self, "the tree")
        return self._layout.predict(self, x)

    def predict_bits(self, X):
        """Packed labels ``uint32[W]`` for packed inputs ``X: uint32[n, W]``."""
        checks.same_n("X", jnp.shape(X)[-2], self, "the tree")
        return self._layout.predict_bits(self, X)

    def probability(self, x):
        """``float32[...]``: the mean training label of the leaf each plain input reaches (an
        estimate of Pr[y = 1 | x]; what random forests average)."""
        return self.mean[self._layout.leaf(self, x)]

    def exact_error(self, p, target):
        """Pr_{x ~ p}[h(x) != f(x)] under the product distribution ``p`` and the target, exactly (NaN for a tree
        grown on flagged data, as :func:`sample_error`)."""
        return flag_nan_root(self, self._layout.exact_error(self, p, target))
