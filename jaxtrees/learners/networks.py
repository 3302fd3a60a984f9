"""The networks of :mod:`jaxtrees.learners.sgd`: models as pure (init, apply) pairs, margin losses, encodings.

:func:`mlp` builds a fully connected ReLU / GELU / tanh network; :func:`matmul` is its hidden
layers' product (a faster weight gradient on a CPU); :func:`loss_fn` maps labels in {0, 1} to
margins; :class:`Network` is a trained one as a hypothesis. See docs/gd-notes.md for the choices.
"""

from __future__ import annotations

import functools
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxtrees.core import bits, checks, prng

ACTIVATIONS = {"relu": jax.nn.relu, "gelu": jax.nn.gelu, "tanh": jnp.tanh}
INITS = ("auto", "he", "lecun", "glorot")
LOSSES = ("hinge", "logistic", "square")
ENCODINGS = ("pm1", "01")


# ----------------------------------------------------------------------------------------- models


class Dense(NamedTuple):
    """One affine layer: x @ w + b, ``w: [fan_in, fan_out]``, ``b: [fan_out]``."""

    w: jax.Array
    b: jax.Array


class Model(NamedTuple):
    """A model as two pure functions: ``init(key, n) -> params``, ``apply(params, x) -> logits``.

    ``x: float[..., n]`` (already encoded), logits ``float[...]``. The trace's weight-mass metric
    reads the first layer as ``params[0].w: [n, width]``.
    """

    init: Callable
    apply: Callable


def mlp(widths=100, depth: int | None = None, activation: str = "relu", init: str = "auto") -> Model:
    """A fully connected network n -> widths[0] -> ... -> widths[-1] -> 1.

    ``widths``: a tuple of hidden widths (``()`` is a linear model), or an int repeated ``depth``
    times (default 1). ``activation``: ``"relu"``, ``"gelu"`` or ``"tanh"``. ``init``: weights
    N(0, g / fan_in) with g = 2 (``"he"``) or 1 (``"lecun"``), or N(0, 2 / (fan_in + fan_out))
    (``"glorot"``); ``"auto"`` is He for ReLU and LeCun otherwise. The output layer, which feeds
    no nonlinearity, is LeCun (Glorot under ``"glorot"``); biases start at 0.

    >>> net = mlp(8, depth=2, activation="tanh")
    >>> params = net.init(jax.random.key(0), 5)
    >>> [layer.w.shape for layer in params], net.apply(params, jnp.ones((3, 5))).shape
    ([(5, 8), (8, 8), (8, 1)], (3,))
    """
    if isinstance(widths, (int, np.integer)) and not isinstance(widths, bool):
        depth = 1 if depth is None else checks.integer("depth", depth, low=0)
        widths = (widths,) * depth
    elif depth is not None:
        raise ValueError(f"depth is only used with an int width, got widths={widths!r}")
    if not isinstance(widths, (tuple, list)):
        raise ValueError(f"widths must be an int or a tuple of ints, got {widths!r}")
    widths = tuple(checks.integer(f"widths[{i}]", w, low=1) for i, w in enumerate(widths))
    checks.choice("activation", activation, ACTIVATIONS)
    checks.choice("init", init, INITS)
    return _mlp(widths, activation, init)


@functools.lru_cache(maxsize=256)
def _mlp(widths: tuple, activation: str, init: str) -> Model:
    """One Model per configuration, so equal configurations are equal (and hash equal) and
    share compiled programs."""
    act = ACTIVATIONS[activation]
    scheme = ("he" if activation == "relu" else "lecun") if init == "auto" else init

    def init_fn(key, n: int):
        sizes = (n,) + widths + (1,)
        keys = prng.split(key, len(sizes) - 1)
        layers = []
        for i, (k, fan_in, fan_out) in enumerate(zip(keys, sizes[:-1], sizes[1:])):
            s = scheme if i < len(widths) else ("glorot" if scheme == "glorot" else "lecun")
            var = 2.0 / (fan_in + fan_out) if s == "glorot" else (2.0 if s == "he" else 1.0) / fan_in
            w = jnp.sqrt(var).astype(jnp.float32) * jax.random.normal(k, (fan_in, fan_out), jnp.float32)
            layers.append(Dense(w, jnp.zeros((fan_out,), jnp.float32)))
        return tuple(layers)

    def apply_fn(params, x):
        h = jnp.asarray(x).astype(params[0].w.dtype)
        for layer in params[:-1]:
            h = act(matmul(h, layer.w) + layer.b)
        return (h @ params[-1].w + params[-1].b)[..., 0]

    return Model(init_fn, apply_fn)


@jax.custom_vjp
def matmul(x, w):
    """``x @ w`` whose weight gradient x^T g reads a materialized x^T (the hidden layers of :func:`mlp`).

    Plain autodiff makes the weight gradient a product that contracts x's leading (batch) axis,
    which XLA:CPU runs as a transposed-operand GEMM at half speed (2.6 against 1.3 us per
    [30, 32] x [32, 100] product, one core); XLA folds an explicit transpose back into the
    product, so x^T is formed behind ``lax.optimization_barrier``. On scripts/bench_gd.py's
    workload this takes 7-8% off a training step. Same values as ``x @ w`` and its gradients,
    up to float32 summation order.

    >>> float(jax.grad(lambda w: matmul(jnp.ones((2, 3)), w).sum())(jnp.ones((3, 1))).sum())
    6.0
    """
    return x @ w


def _matmul_fwd(x, w):
    return x @ w, (x, w)


def _matmul_bwd(residuals, g):
    x, w = residuals
    xt = jax.lax.optimization_barrier(x.reshape(-1, x.shape[-1]).T)  # [n, rows]: leading axes contracted
    return g @ w.T, xt @ g.reshape(-1, g.shape[-1])


matmul.defvjp(_matmul_fwd, _matmul_bwd)


# ----------------------------------------------------------------------------------------- losses


def margin_loss(name: str) -> Callable:
    """phi(z) for the margin z = s f(x): hinge max(0, 1 - z), logistic log(1 + e^-z), square (1 - z)^2."""
    checks.choice("loss", name, LOSSES)
    if name == "hinge":
        return lambda z: jax.nn.relu(1.0 - z)
    if name == "logistic":
        return lambda z: jax.nn.softplus(-z)
    return lambda z: jnp.square(1.0 - z)


def loss_fn(name: str) -> Callable:
    """``(logits, y) -> per-example loss``, labels ``y`` in {0, 1} mapped to s = 2y - 1 in {-1, +1}.

    >>> loss_fn("hinge")(jnp.array([2.0, 0.5, 0.5]), jnp.array([1, 1, 0])).tolist()
    [0.0, 0.5, 1.5]
    """
    phi = margin_loss(name)

    def loss(logits, y):
        s = 2.0 * jnp.asarray(y).astype(logits.dtype) - 1.0
        return phi(s * logits)

    return loss



def encode(x, encoding: str = "pm1", dtype=jnp.float32):
    """Encode ``x: {0,1}[..., n]`` as 2x - 1 in {-1,+1} (``"pm1"``) or as x itself (``"01"``)."""
    # Not standardized per coordinate, (x_i - p_i) / sigma_i: that erases the degree-1 signal smoothing
    # creates (docs/gd-notes.md); a constant shift is harmless (the first layer's bias absorbs it).
    x = jnp.asarray(x).astype(dtype)
    return 2.0 * x - 1.0 if encoding == "pm1" else x


# ------------------------------------------------------------------------------------ hypotheses


@jax.tree_util.register_pytree_node_class
class Network:
    """A trained network as a hypothesis: predicts 1 iff its logit is > 0 (``exact = False``:
    scored on test data). Also carries the training trace and ``steps_to_eps``."""

    exact = False

    def __init__(self, model: Model, encoding: str, result):
        self.model, self.encoding, self.result = model, encoding, result

    def tree_flatten(self):
        return (self.result,), (self.model, self.encoding)

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*aux, *children)

    def predict(self, x):
        params = self.result.params
        return (self.model.apply(params, encode(x, self.encoding, params[0].w.dtype)) > 0).astype(jnp.int32)

    def predict_bits(self, X):
        return bits.pack(self.predict(bits.unpack(X, X.shape[-1] * bits.WORD_BITS).T) == 1)
