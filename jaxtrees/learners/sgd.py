"""Gradient descent on juntas: many small networks trained at once (000 Sec. 1.3, Open Question 1).

One training is a pure function of a key, a product distribution ``p: float32[n]`` and a target
(:mod:`jaxtrees.targets`); batch it with ``jax.vmap`` over keys, distributions, targets and
hyperparameters, and compile once with ``jax.jit``:

- models are (init, apply) pairs of pure functions (:func:`mlp`): ``init(key, n) -> params``,
  ``apply(params, x) -> logits``, x the encoded inputs ``[..., n]``; an ensemble is ``vmap(init)``;
- losses are functions of the margin z = s f(x), s = 2y - 1 in {-1, +1} for labels y in {0, 1}:
  hinge max(0, 1 - z), logistic log(1 + e^{-z}), square (1 - z)^2 = (f(x) - s)^2; the network
  predicts 1 iff f(x) > 0, for every loss;
- the optimizer is any optax factory (``optax.sgd``, ``optax.adamw``, ``optax.chain`` inside a
  lambda, ...) wrapped in ``optax.inject_hyperparams``: its hyperparameters are arguments of
  :func:`train` (``learning_rate=0.1``), so they can be traced and differ per batch member;
- steps run in ``lax.scan``; every ``eval_every`` = K steps (a scan of scans; or on a geometric
  schedule, ``records_per_doubling``) the trace records the
  test error, the mean training loss since the previous record, the share of first-layer weight mass
  on the target's support and ||w_t - w_0||_inf, all without leaving the compiled loop.

Data. ``mode="online"``: a fresh batch x ~ prod_i Bernoulli(p_i) at every step (Barak et al. 2022,
"Hidden progress in deep learning"); ``mode="fixed"``: m examples drawn once, shuffled every epoch
(an epoch is m // batch_size steps; the remainder of each shuffle is skipped). The test error is
exact, sum_x Pr_p[x] 1[pred(x) != f(x)] over all 2^n inputs, when n <= ``exact_max_n``, else the
error on ``test_size`` fresh examples drawn once per training (the same set at every record).

Encoding. The network sees x in {0,1}^n (``encoding="01"``) or 2x - 1 in {-1,+1}^n (``"pm1"``).
Per-coordinate standardization (x_i - p_i) / sqrt(p_i (1 - p_i)) is deliberately not offered:
it maps the parity chi_J to the p-biased character prod_{j in J} (x_j - p_j)/sigma_j, which is
orthogonal to every function of fewer than k of the coordinates of J under p, exactly as the
uniform-case parity is: it erases the low-degree correlation E_p[f(x) x_j] != 0 that smoothing
creates (the signal ID3 exploits in 000) and makes the problem as hard as the uniform one. A
constant shift is harmless: the first layer's bias can absorb it.

>>> import jax, optax
>>> from jaxtrees import targets
>>> cfg = TrainConfig(mlp(16), loss="hinge", optimizer=optax.sgd, steps=40, batch_size=8,
...                   eval_every=20)
>>> f = targets.parity([0, 1], n=6)
>>> p = jax.numpy.full((6,), 0.5)
>>> run = jax.jit(jax.vmap(lambda key, lr: train(key, p, f, cfg, learning_rate=lr)))
>>> out = run(jax.random.split(jax.random.key(0), 3), jax.numpy.array([0.01, 0.1, 0.3]))
>>> out.trace.test_error.shape, cfg.record_steps.tolist()
((3, 2), [20, 40])
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, PartitionSpec

from jaxtrees.core import bits, checks, prng, programs, sampling
from jaxtrees.learners.base import check_data

ACTIVATIONS = {"relu": jax.nn.relu, "gelu": jax.nn.gelu, "tanh": jnp.tanh}
INITS = ("auto", "he", "lecun", "glorot")
LOSSES = ("hinge", "logistic", "square")
ENCODINGS = ("pm1", "01")
MODES = ("online", "fixed")
MAX_EXACT_N = 20
EVAL_CHUNK = 1024  # test inputs per forward pass when scoring (bounds memory under vmap)
#: Members per ``lax.map`` step of :func:`train_many` on a CPU device (cache-sized, the study
#: runner's group). bench_gd's workload, 128 members per core, idle 2-core CPU, us per member-step
#: in groups of 8 / 32 / 64 against one vmap: 3.83 / 3.81 / 3.83 vs 3.90 independent, 3.23 / 2.75 /
#: 2.83 vs 3.23 with a shared data stream.
CPU_GROUP = 32

# Ranges of the common optax hyperparameters, checked when their values are concrete.
HYPERPARAMETER_RANGES = {
    "learning_rate": dict(low=0.0, low_open=True),
    "weight_decay": dict(low=0.0),
    "momentum": dict(low=0.0, high=1.0, high_open=True),
    "b1": dict(low=0.0, high=1.0, high_open=True),
    "b2": dict(low=0.0, high=1.0, high_open=True),
    "eps": dict(low=0.0),
    "decay": dict(low=0.0, high=1.0),
}


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
        keys = jax.random.split(key, len(sizes) - 1)
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
    x = jnp.asarray(x).astype(dtype)
    return 2.0 * x - 1.0 if encoding == "pm1" else x


# --------------------------------------------------------------------------------------- training


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """What one training does; hashable and static under ``jax.jit`` / ``jax.vmap``.

    Attributes:
      model: a :class:`Model`, e.g. ``mlp(100)``.
      loss: ``"hinge"``, ``"logistic"`` or ``"square"`` (see :func:`margin_loss`).
      optimizer: an optax factory whose keyword arguments (``learning_rate``, ...) are passed to
        :func:`train` and injected with ``optax.inject_hyperparams``; or a ready
        ``optax.GradientTransformation`` (then :func:`train` takes no hyperparameters).
      steps: S >= 1 optimizer steps.
      batch_size: examples per step (>= 1).
      eval_every: K; the trace records at steps K, 2K, ..., S (K must divide S).
      records_per_doubling: None (records every K steps), or r >= 1: records at geometrically
        spaced steps, r per doubling of the step count: the gap after step t is
        K max(1, floor(t (2^(1/r) - 1) / K)) steps (the last record is at S). The step
        resolution is then 2^(1/r) - 1 relative, and a budget of S steps takes about
        r log2(S / (K r)) + 1.5 r records instead of S / K (each record scores the test set).
      mode: ``"online"`` (fresh examples every step) or ``"fixed"`` (``m`` examples, epochs).
      m: training-set size in fixed mode (>= batch_size); must be None online.
      encoding: ``"pm1"`` or ``"01"`` (see the module docstring for why not standardized).
      test_size: fresh test examples when n > exact_max_n.
      exact_max_n: exact test error over all 2^n inputs when n <= exact_max_n (<= 20; 0 never).
      eps: ``steps_to_eps`` is the first recorded step with test error <= eps.
      precision_bits: None: inputs drawn as float32 uniforms compared with p (one 32-bit random
        word per input bit); b in 1..31: exact draws from p rounded to multiples of 2^-b
        (:func:`jaxtrees.core.sampling.packed_bernoulli`: b random words per 32 input bits, so
        32 / b times fewer random words; b = 1 for uniform inputs). The training batches, the
        fixed sample and the test sample all come from ``quantize(p, b)``, and the exact test
        error weighs inputs by it.
      stop_at_eps: stop at the first record with test error <= eps: later records are NaN and
        ``params`` are those of that record. The records a member does make, and
        ``steps_to_eps``, are unchanged; the remaining steps are saved (under vmap a batch runs
        until its last member stops or the budget ends).
      record_row_norms: the trace also holds ``row_norms: float32[E, n]``, the Euclidean norm
        ||W1[i, :]||_2 of each input coordinate's first-layer weights at every record.
    """

    model: Model
    loss: str = "hinge"
    optimizer: Any = optax.sgd
    steps: int = 10_000
    batch_size: int = 32
    eval_every: int = 100
    mode: str = "online"
    m: int | None = None
    encoding: str = "pm1"
    test_size: int = 8192
    exact_max_n: int = 13
    eps: float = 0.0
    precision_bits: int | None = None
    records_per_doubling: int | None = None
    stop_at_eps: bool = False
    record_row_norms: bool = False

    def __post_init__(self):
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731
        if not isinstance(self.model, Model):
            raise ValueError(f"model must be a jaxtrees.learners.sgd.Model (e.g. mlp(100)), got {type(self.model).__name__}")
        checks.choice("loss", self.loss, LOSSES)
        if not (isinstance(self.optimizer, optax.GradientTransformation) or callable(self.optimizer)):
            raise ValueError(f"optimizer must be an optax factory or GradientTransformation, got {self.optimizer!r}")
        set_("steps", checks.integer("steps", self.steps, low=1))
        set_("batch_size", checks.integer("batch_size", self.batch_size, low=1))
        set_("eval_every", checks.integer("eval_every", self.eval_every, low=1, high=self.steps))
        if self.steps % self.eval_every:
            raise ValueError(f"eval_every must divide steps = {self.steps}, got {self.eval_every}")
        checks.choice("mode", self.mode, MODES)
        if self.mode == "fixed":
            if self.m is None:
                raise ValueError("m (the training-set size) is required with mode='fixed'")
            set_("m", checks.integer("m", self.m, low=self.batch_size))
        elif self.m is not None:
            raise ValueError(f"m must be None with mode='online' (fresh examples every step), got {self.m!r}")
        checks.choice("encoding", self.encoding, ENCODINGS)
        set_("test_size", checks.integer("test_size", self.test_size, low=1))
        set_("exact_max_n", checks.integer("exact_max_n", self.exact_max_n, low=0, high=MAX_EXACT_N))
        set_("eps", checks.real("eps", self.eps, low=0.0, high=1.0))
        if self.precision_bits is not None:
            set_("precision_bits", checks.integer("precision_bits", self.precision_bits, low=1,
                                                  high=sampling.MAX_PRECISION_BITS))
        if self.records_per_doubling is not None:
            set_("records_per_doubling", checks.integer("records_per_doubling", self.records_per_doubling, low=1,
                                                        high=2**20))
        for name in ("stop_at_eps", "record_row_norms"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")

    @property
    def record_steps(self) -> np.ndarray:
        """The steps at which the trace records: K, 2K, ..., S, or the geometric schedule of
        ``records_per_doubling``.

        >>> TrainConfig(mlp(4), steps=200, eval_every=10, records_per_doubling=2).record_steps.tolist()
        [10, 20, 30, 40, 50, 70, 90, 120, 160, 200]
        """
        K, S, r = self.eval_every, self.steps, self.records_per_doubling
        if r is None:
            return np.arange(K, S + 1, K)
        steps = [K]
        while steps[-1] < S:
            steps.append(min(S, steps[-1] + K * max(1, int(steps[-1] * (2.0 ** (1.0 / r) - 1.0)) // K)))
        return np.asarray(steps)


class Trace(NamedTuple):
    """Metrics recorded at ``config.record_steps`` (each ``float32[E]``, E records; NaN after an early
    stop, see ``TrainConfig.stop_at_eps``)."""

    test_error: jax.Array  # exact or on the test sample
    train_loss: jax.Array  # mean minibatch loss over the steps since the previous record
    support_share: jax.Array  # sum_{i in J} ||W1[i]||_1 / sum_i ||W1[i]||_1 (NaN without a support)
    drift: jax.Array  # ||w_t - w_0||_inf over all parameters ("hidden progress")
    row_norms: Any = None  # float32[E, n]: ||W1[i, :]||_2 per coordinate (record_row_norms only)


class Result(NamedTuple):
    params: Any  # the final parameters
    trace: Trace
    steps_to_eps: jax.Array  # int32: first recorded step with test_error <= eps, -1 if none


@jax.tree_util.register_pytree_node_class
class Network:
    """A trained network as a hypothesis: predicts 1 iff its logit is > 0 (``exact = False``:
    scored on test data). Also carries the training trace and ``steps_to_eps``."""

    exact = False

    def __init__(self, model: Model, encoding: str, result: Result):
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


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class SGD:
    """The learner: one network trained by :func:`train` (``config.mode="online"``: population
    access, fresh examples every step) or :func:`train_on` (``"fixed"``: sample access, the
    given data set). ``hyperparams`` are the optimizer's, as ``(name, value)`` pairs so the
    learner stays hashable: ``SGD(config, (("learning_rate", 0.1),))``.
    ``fit(key, data) -> Network`` equals ``train(key, p, f, config, **hyperparams)``.
    """

    config: TrainConfig
    hyperparams: tuple = ()

    def __post_init__(self):
        _check_config(self.config)
        _check_hyperparams(self.config, dict(self.hyperparams))

    @property
    def access(self) -> str:
        return "population" if self.config.mode == "online" else "sample"

    def fit(self, key, data) -> Network:
        hyperparams = dict(self.hyperparams)
        if self.access == "population":
            result = train(key, data.p, data.target, self.config, **hyperparams)
        else:
            check_data(data)
            result = train_on(key, data, self.config, **hyperparams)
        return Network(self.config.model, self.config.encoding, result)


def train(key, p, target, config: TrainConfig, *, data_key=None, budget=None, init=None, trainable=None,
          **hyperparams) -> Result:
    """Train one network on the product distribution ``p: float32[n]`` labelled by ``target``.

    ``hyperparams`` go to ``optax.inject_hyperparams(config.optimizer)``; they may be traced (for
    ``jax.vmap`` over them) and are range-checked when concrete. The key is split into (init,
    training data, test data); step t of online mode uses ``fold_in(training-data key, t)``, so
    the numbers do not depend on batching. Batch with ``jax.vmap`` (see the module docstring) or
    :func:`train_many`.

    ``data_key``, if given, replaces the data keys: (training, test) = ``split(data_key)``.
    Members of a vmapped batch that share ``data_key`` and ``p`` (in_axes None) see the same
    examples (common random numbers, e.g. across seeds and learning rates); vmap then draws
    the inputs once and runs the first layer of all members (of a group, in :func:`train_many`
    on a CPU) as one matmul ``[batch, n] @ [n, members * width]`` instead of many small ones
    (see scripts/bench_gd.py).

    ``budget``, if given, is a step budget B (a multiple of K in [K, ``config.steps``], may be traced:
    one program serves every budget): the records are those of ``dataclasses.replace(config,
    steps=B)`` (:func:`record_steps`: the schedule up to B, then B), the later records are not made
    (NaN, as after an early stop) and the training ends at B. The same numbers as a training
    compiled for B steps.

    ``init``, if given, replaces ``config.model.init``: ``init(key, n) -> params`` with the
    model's structure and shapes (it may close over traced values, e.g. a scheme chosen by index).
    ``trainable``, if given, is a pytree of the parameters' structure whose leaves are booleans
    (Python or traced scalars): a leaf that is False keeps its initial value (its updates are
    zeroed), e.g. an output bias that stays 0.
    """
    _check_config(config)
    p = checks.probabilities("p", p)
    if jnp.ndim(p) != 1:
        raise ValueError(f"p must be a 1-d array of marginals (vmap for a batch), got shape {jnp.shape(p)}")
    p = jnp.asarray(p, jnp.float32)
    k_init, k_data, k_test = jax.random.split(key, 3)
    if data_key is not None:
        k_data, k_test = jax.random.split(data_key)
    next_batch, data0 = _data(k_data, p, target, config)
    score = _scorer(*_test_set(k_test, p, target, config), config)
    return _descend(k_init, p.shape[0], next_batch, data0, score, target.support_mask(p.shape[0]), config,
                    hyperparams, budget=budget, init=init, trainable=trainable)


def train_on(key, data, config: TrainConfig, **hyperparams) -> Result:
    """Train one network on a fixed packed data set (:class:`~jaxtrees.core.sampling.Data`).

    Each step draws ``batch_size`` examples with replacement, with probability proportional to
    ``data.weight`` (uniform over the valid examples without weights); ``config.mode`` and
    ``config.m`` are not used. No distribution is known, so the trace's ``test_error`` is the
    (weighted) error on ``data`` itself, and ``support_share`` is NaN.
    """
    _check_config(config)
    slots = data.valid.shape[-1] * bits.WORD_BITS
    X = bits.unpack(data.X, slots).T  # [S, n]
    y = bits.unpack(data.y, slots).astype(jnp.int32)
    valid = bits.unpack(data.valid, slots)
    w = jnp.where(valid, 1.0 if data.weight is None else data.weight.astype(jnp.float32), 0.0)
    w = w / jnp.sum(w)
    k_init, k_data = jax.random.split(key)

    def next_batch(state, t):
        idx = jax.random.choice(jax.random.fold_in(k_data, t), slots, (config.batch_size,), p=w)
        return X[idx], y[idx], state

    n = X.shape[-1]
    return _descend(k_init, n, next_batch, (), _scorer(X, y, w, config), None, config, hyperparams)


def record_steps(config: TrainConfig, budget=None):
    """The steps of a training's records under a step ``budget`` B (see :func:`train`):
    ``min(config.record_steps, B)``, an int32 array (traced where B is); records past the first at B
    are not made. ``budget=None``: ``config.record_steps`` itself (a NumPy array).

    >>> cfg = TrainConfig(mlp(4), steps=200, eval_every=10, records_per_doubling=2)
    >>> record_steps(cfg, 100).tolist()  # the records of steps=100: [10, 20, 30, 40, 50, 70, 90, 100]
    [10, 20, 30, 40, 50, 70, 90, 100, 100, 100]
    """
    if budget is None:
        return config.record_steps
    if checks.is_concrete(budget):
        B = checks.integer("budget", np.asarray(budget).item(), low=config.eval_every, high=config.steps)
        if B % config.eval_every:
            raise ValueError(f"budget must be a multiple of eval_every = {config.eval_every}, got {B}")
    return jnp.minimum(jnp.asarray(config.record_steps, jnp.int32), jnp.asarray(budget, jnp.int32))


def _frozen(updates, trainable):
    """``updates`` with the leaves whose ``trainable`` flag is False set to 0."""
    if trainable is None:
        return updates
    return jax.tree.map(lambda u, t: u if t is True else jnp.where(t, u, jnp.zeros_like(u)), updates, trainable)


def _descend(k_init, n, next_batch, data0, score, mask, config, hyperparams, budget=None, init=None,
             trainable=None) -> Result:
    """The training loop shared by :func:`train` and :func:`train_on`."""
    opt = make_optimizer(config, **hyperparams)
    model, phi, K = config.model, margin_loss(config.loss), config.eval_every
    E = config.record_steps.size
    static_blocks = np.diff(config.record_steps, prepend=0) // K  # K-step blocks before each record
    steps_at = record_steps(config, budget)
    blocks = np.diff(steps_at, prepend=0) // K if budget is None else jnp.diff(steps_at, prepend=0) // K
    made = None if budget is None else jnp.sum(jnp.asarray(config.record_steps, jnp.int32) < steps_at[-1]) + 1
    params0 = (model.init if init is None else init)(k_init, n)
    opt_state0 = opt.init(params0)

    def loss_on(params, x, y):
        logits = model.apply(params, encode(x, config.encoding, params[0].w.dtype))
        return jnp.mean(phi((2.0 * y.astype(logits.dtype) - 1.0) * logits))

    def step(carry, t):
        params, opt_state, data, loss_sum = carry
        x, y, data = next_batch(data, t)
        loss, grads = jax.value_and_grad(loss_on)(params, x, y)
        updates, opt_state = opt.update(grads, opt_state, params)
        updates = _frozen(updates, trainable)
        return (optax.apply_updates(params, updates), opt_state, data, loss_sum + loss), None

    def block(carry, start):  # K steps from step ``start``
        return jax.lax.scan(step, carry, start + jnp.arange(K, dtype=jnp.int32))[0]

    def record(carry, e):
        params, opt_state, data = carry
        zero = jnp.zeros((), jnp.float32)
        start = jnp.asarray(steps_at - blocks * K, jnp.int32)[e]
        if static_blocks.max() == 1:  # a budget's blocks are at most the full schedule's
            count = K
            params, opt_state, data, loss_sum = block((params, opt_state, data, zero), start)
        else:  # a traced number of blocks (geometric records)
            count = jnp.asarray(blocks, jnp.int32)[e] * K
            params, opt_state, data, loss_sum = jax.lax.fori_loop(
                0, count // K, lambda b, c: block(c, start + b * K), (params, opt_state, data, zero))
        w1 = jnp.sum(jnp.abs(params[0].w), axis=-1)
        share = jnp.sum(jnp.where(mask, w1, 0.0)) / jnp.sum(w1) if mask is not None else jnp.float32(jnp.nan)
        drift = jnp.max(jnp.stack([jnp.max(jnp.abs(a - b)) for a, b in zip(jax.tree.leaves(params),
                                                                            jax.tree.leaves(params0))]))
        norms = jnp.sqrt(jnp.sum(jnp.square(params[0].w), axis=-1)) if config.record_row_norms else None
        return (params, opt_state, data), Trace(score(params), loss_sum / count, share, drift, norms)

    state0 = (params0, opt_state0, data0)
    if config.stop_at_eps or budget is not None:
        eps = config.eps if config.stop_at_eps else None
        (params, _, _), trace = _records_until_eps(record, state0, E, eps, E if made is None else made)
    else:
        (params, _, _), trace = jax.lax.scan(record, state0, jnp.arange(E, dtype=jnp.int32))
    hit = trace.test_error <= config.eps
    steps_to_eps = jnp.where(jnp.any(hit), jnp.asarray(steps_at, jnp.int32)[jnp.argmax(hit)], -1)
    return Result(params, trace, steps_to_eps)


def _records_until_eps(record, state0, E: int, eps: float | None, limit):
    """``lax.scan(record, state0, arange(E))`` that stops after the first record with test error
    <= eps (never where eps is None) or after ``limit`` records (a ``lax.while_loop``); the records
    not made are NaN."""
    shapes = jax.eval_shape(record, state0, jnp.int32(0))[1]
    trace0 = jax.tree.map(lambda a: jnp.full((E,) + a.shape, jnp.nan, a.dtype), shapes)

    def not_done(carry):
        _, e, done, _ = carry
        return (e < limit) & ~done

    def body(carry):
        state, e, _, trace = carry
        state, rec = record(state, e)
        trace = jax.tree.map(lambda buf, v: jax.lax.dynamic_update_index_in_dim(buf, v, e, 0), trace, rec)
        return state, e + 1, jnp.bool_(False) if eps is None else rec.test_error <= eps, trace

    state, _, _, trace = jax.lax.while_loop(not_done, body, (state0, jnp.int32(0), jnp.bool_(False), trace0))
    return state, trace


def train_many(keys, p, target, config: TrainConfig, *, data_key=None, group: int | None = None,
               **hyperparams) -> Result:
    """``jax.jit(jax.vmap(train))`` over a leading batch axis B, with checks on concrete values.

    With several local devices (GPUs, or a CPU split into one device per core as ``jaxtrees run``
    does) and B a multiple of their number, the members are sharded over them (``shard_map``):
    each device trains B / D members (on a 2-core CPU, 2 devices train 1.8x faster than one).
    On a CPU each device trains its members in groups of ``group`` (default :data:`CPU_GROUP`)
    vmapped per ``lax.map`` step, as the study runner runs trials: a group's activations and
    weights stay in the core's cache through all its steps (one vmap over 128 members makes
    about 14 passes per step over 1.5 MB arrays: activations, first-layer weights and their
    gradient; scripts/bench_gd.py times both). Elsewhere
    ``group=None`` is one vmap (on a CPU: ``group >= B``). The numbers are those of :func:`train`
    up to the float32 rounding of batched matmuls (1e-5 relative in the tests) either way; a
    group that does not divide a device's members is made smaller where a divisor of at least
    half of it exists (a remainder compiles the training a second time).

    ``keys: key[B]``; ``p``: ``float32[B, n]`` or one ``float32[n]`` for all; ``target``: a batch
    of targets (leaves with a leading B axis, e.g. ``vmap(random_parity)``) or one target;
    each hyperparameter: an array ``[B]`` or a scalar for all; ``data_key``: None, one key shared
    by all members (common random numbers, see :func:`train`) or ``key[B]``. Equals a loop of
    :func:`train`. The compiled program is cached per (config, shapes, group).
    """
    _check_config(config)
    keys = jnp.asarray(keys)
    if keys.ndim != 1:
        raise ValueError(f"keys must be a 1-d array of B keys (jax.random.split(key, B)), got shape {keys.shape}")
    B = keys.shape[0]
    p_arr = np.asarray(p, np.float64)
    if p_arr.ndim not in (1, 2) or (p_arr.ndim == 2 and p_arr.shape[0] != B):
        raise ValueError(f"p must have shape (n,) or (B, n) = ({B}, n), got {p_arr.shape}")
    checks.probabilities("p", p_arr.reshape(-1))
    p_axis = 0 if p_arr.ndim == 2 else None
    t_axis = 0 if _target_batched(target) else None
    if t_axis == 0 and jax.tree.leaves(target)[0].shape[0] != B:
        raise ValueError(f"a batch of targets must have B = {B} members, got {jax.tree.leaves(target)[0].shape[0]}")
    names = tuple(sorted(hyperparams))
    hp_axes = []
    for name in names:
        v = np.asarray(hyperparams[name])
        if v.ndim > 1 or (v.ndim == 1 and v.shape[0] != B):
            raise ValueError(f"{name} must be a scalar or have shape ({B},), got {v.shape}")
        hp_axes.append(0 if v.ndim == 1 else None)
    _check_hyperparams(config, hyperparams)
    d_axis = None
    if data_key is not None:
        data_key = jnp.asarray(data_key)
        if data_key.ndim > 1 or (data_key.ndim == 1 and data_key.shape[0] != B):
            raise ValueError(f"data_key must be one key or B = {B} keys, got shape {data_key.shape}")
        d_axis = 0 if data_key.ndim == 1 else None
    devices = jax.local_devices()
    shards = len(devices) if B % len(devices) == 0 else 1
    if group is None and devices[0].platform == "cpu":
        group = CPU_GROUP
    if group is not None:
        group = checks.integer("group", group, low=1)
        group = _balanced(B // shards, group)
    fn = _batched_train(config, names, data_key is not None, (0, p_axis, t_axis, d_axis) + tuple(hp_axes), shards,
                        group)
    return fn(keys, jnp.asarray(p, jnp.float32), target, data_key,
              *(jnp.asarray(hyperparams[n], jnp.float32) for n in names))


def make_optimizer(config: TrainConfig, **hyperparams) -> optax.GradientTransformation:
    """``optax.inject_hyperparams(config.optimizer)(**hyperparams)``, checked (see :class:`TrainConfig`)."""
    _check_hyperparams(config, hyperparams)
    if isinstance(config.optimizer, optax.GradientTransformation):
        return config.optimizer
    return optax.inject_hyperparams(config.optimizer)(**hyperparams)


# -------------------------------------------------------------------------------------- internals


@programs.holds_programs
@functools.lru_cache(maxsize=16)  # each value holds its compiled programs
def _batched_train(config, names, with_data_key, in_axes, shards: int, group: int | None):
    def one(key, p, target, data_key, *values):
        return train(key, p, target, config, data_key=data_key if with_data_key else None,
                     **dict(zip(names, values)))

    batched = jax.vmap(one, in_axes=in_axes) if group is None else _in_groups(one, in_axes, group)
    if shards == 1:
        return jax.jit(batched)
    mesh = Mesh(np.asarray(jax.local_devices()[:shards]), ("members",))
    specs = tuple(PartitionSpec() if axis is None else PartitionSpec("members") for axis in in_axes)
    return jax.jit(jax.shard_map(batched, mesh=mesh, in_specs=specs, out_specs=PartitionSpec("members"),
                                 check_vma=False))


def _balanced(members: int, group: int) -> int | None:
    """None (one vmap) if ``group`` >= members; else the largest divisor of ``members`` that is
    <= group and >= group / 2 (no remainder to compile), or ``group`` itself."""
    if group >= members:
        return None
    return next((d for d in range(group, (group + 1) // 2 - 1, -1) if members % d == 0), group)


def _in_groups(one, in_axes, group: int):
    """``vmap(one, in_axes)`` computed as ``lax.map`` over groups of ``group`` members: the
    arguments with axis 0 are mapped, the others (a shared p, target or data key) closed over."""
    def batched(*args):
        def member(mapped):
            it = iter(mapped)
            return one(*(next(it) if axis == 0 else arg for arg, axis in zip(args, in_axes)))

        return jax.lax.map(member, tuple(arg for arg, axis in zip(args, in_axes) if axis == 0), batch_size=group)

    return batched


def _target_batched(target) -> bool:
    return len(target.batch_shape) > 0


def _check_config(config):
    if not isinstance(config, TrainConfig):
        raise ValueError(f"config must be a TrainConfig, got {type(config).__name__}")


def _check_hyperparams(config, hyperparams):
    if isinstance(config.optimizer, optax.GradientTransformation):
        if hyperparams:
            raise ValueError(f"optimizer is a ready GradientTransformation and takes no hyperparameters, "
                             f"got {sorted(hyperparams)}; pass a factory such as optax.sgd instead")
        return
    try:
        inspect.signature(config.optimizer).bind(**hyperparams)
    except TypeError as err:
        name = getattr(config.optimizer, "__name__", repr(config.optimizer))
        raise ValueError(f"bad hyperparameters {sorted(hyperparams)} for optimizer {name}: {err}") from None
    except ValueError:  # no signature available (a builtin): let optax report
        pass
    for name, value in hyperparams.items():
        if callable(value) or not checks.is_concrete(value):
            continue
        arr = np.asarray(value, np.float64)
        rng = HYPERPARAMETER_RANGES.get(name)
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name} must be finite, got {value!r}")
        if rng is not None:
            bad = checks._outside(arr, rng.get("low"), rng.get("high"), rng.get("low_open", False),
                                   rng.get("high_open", False))
            if np.any(bad):
                interval = checks._interval(rng.get("low"), rng.get("high"), rng.get("low_open", False),
                                             rng.get("high_open", False))
                if arr.ndim == 0:
                    raise ValueError(f"{name} must be in {interval}, got {float(arr):g}")
                i = int(np.argmax(bad.ravel()))
                raise ValueError(f"{name} must be in {interval}; {name}[{i}] = {arr.ravel()[i]:g}")


def inputs(key, p, rows: int, precision_bits: int | None = None):
    """``bool[rows, n]``: rows i.i.d. x ~ prod_i Bernoulli(p_i), as :class:`TrainConfig` draws them.

    ``precision_bits=None``: ``uniform[rows, n] < p``; b: exact Bernoulli(quantize(p, b)) from
    bit-packed draws (b random words per 32 examples of a coordinate), unpacked.

    >>> x = inputs(jax.random.key(0), jnp.array([0.0, 0.5, 1.0]), 64, precision_bits=1)
    >>> x.shape, x[:, 0].any().item(), x[:, 2].all().item()
    ((64, 3), False, True)
    """
    if precision_bits is None:
        n = p.shape[-1]
        if jax.default_backend() != "cpu" or not prng.fusible(key) or rows * n >= prng.MAX_WORDS:
            return prng.uniform(key, (rows, n)) < p
        # The same words, drawn feature-major: XLA:CPU vectorizes a loop over the rows (the last
        # axis here) where a [rows, n] loop with n = 30 ran 4x slower per word; packed along the
        # rows (a reduction, so the draw is made once) and unpacked. Takes a third off a step of
        # scripts/bench_gd.py's workload on a CPU.
        index = jnp.arange(rows, dtype=jnp.uint32)[None, :] * np.uint32(n) + jnp.arange(n, dtype=jnp.uint32)[:, None]
        return bits.unpack(bits.pack(prng.uniform_at(key, index) < p[:, None]), rows).T
    packed = sampling.packed_bernoulli(key, p, rows, precision_bits=precision_bits)  # [n, ceil(rows / 32)]
    return bits.unpack(packed, rows).T


def _marginals(p, config):
    """The marginals the draws follow: p, or p on the 2^-b grid."""
    return p if config.precision_bits is None else sampling.quantize(p, config.precision_bits)


def _data(key, p, target, config):
    """(next_batch(data, t) -> (x, y, data), data0) for the configured mode."""
    b = config.batch_size
    if config.mode == "online":
        def next_batch(data, t):
            x = inputs(prng.fold_in(key, t), p, b, config.precision_bits)
            return x, target(x), data

        return next_batch, ()
    m = config.m
    k_sample, k_shuffle = jax.random.split(key)
    X = inputs(k_sample, p, m, config.precision_bits)
    Y = target(X)
    per_epoch = m // b
    if per_epoch == 1 and b == m:  # full-batch gradient descent: no shuffling needed
        return (lambda data, t: (X, Y, data)), ()

    def next_batch(perm, t):
        pos = t % per_epoch
        perm = jax.lax.cond(pos == 0, lambda: jax.random.permutation(jax.random.fold_in(k_shuffle, t // per_epoch), m),
                            lambda: perm)
        idx = jax.lax.dynamic_slice_in_dim(perm, pos * b, b)
        return X[idx], Y[idx], perm

    return next_batch, jnp.arange(m, dtype=jnp.int32)


def _test_set(key, p, target, config):
    """``(X, y, w)``: all 2^n inputs with their probabilities when n <= ``exact_max_n``, else
    ``test_size`` fresh examples of weight 1 / test_size."""
    n = p.shape[0]
    if n <= config.exact_max_n:
        X = jnp.asarray((np.arange(2**n)[:, None] >> np.arange(n)) & 1, bool)  # [2^n, n]
        q = _marginals(p, config)
        w = jnp.prod(jnp.where(X, q, 1.0 - q), axis=-1)
    else:
        X = inputs(key, p, config.test_size, config.precision_bits)
        w = jnp.full((config.test_size,), 1.0 / config.test_size, jnp.float32)
    return X, target(X), w


def _scorer(X, y, w, config):
    """``score(params) -> float32``: sum of ``w`` over the rows of ``X`` the network mislabels."""
    model = config.model
    rows, n = X.shape
    chunk = min(rows, EVAL_CHUNK)
    pad = -rows % chunk
    X = jnp.pad(X, ((0, pad), (0, 0))).reshape(-1, chunk, n)
    y = jnp.pad(y, (0, pad)).reshape(-1, chunk)
    w = jnp.pad(w, (0, pad)).reshape(-1, chunk)

    def score(params):
        def body(total, batch):
            xb, yb, wb = batch
            wrong = (model.apply(params, encode(xb, config.encoding, params[0].w.dtype)) > 0) != (yb == 1)
            return total + jnp.sum(jnp.where(wrong, wb, 0.0)), None

        total, _ = jax.lax.scan(body, jnp.zeros((), jnp.float32), (X, y, w))
        return total

    return score
