"""One training of :mod:`jaxtrees.learners.sgd`: its configuration, the optimizer and the loop.

:func:`train` is a pure function of a key, a product distribution ``p`` and a target: steps run in
``lax.scan``, and at every record (``eval_every`` steps apart, or on a geometric schedule) the trace
holds the test error, the mean training loss, the first layer's weight share on the support and
||w_t - w_0||_inf, all inside the compiled loop. The optimizer's hyperparameters are arguments.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxtrees.core import bits, checks, prng, sampling
from jaxtrees.core.censored import Censored
from jaxtrees.learners.networks import ENCODINGS, LOSSES, Model, encode, margin_loss, mlp  # noqa: F401
from jaxtrees.learners.sgd_data import _data, _scorer, _test_set

MODES = ("online", "fixed")
MAX_EXACT_N = 20

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
      encoding: ``"pm1"`` or ``"01"`` (docs/gd-notes.md says why not standardized).
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
    budget: Any = None  # int32: the last step the training could record (its step budget)

    @property
    def steps(self) -> Censored:
        """Steps to error <= eps as a censored output: ``steps_to_eps``, or where it was not reached, the budget
        with ``censored`` True (a trial returning ``{"steps": result.steps}`` gets both columns)."""
        censored = self.steps_to_eps < 0
        return Censored(jnp.where(censored, self.budget, self.steps_to_eps), censored)


def train(key, p, target, config: TrainConfig, *, data_key=None, budget=None, init=None, trainable=None,
          **hyperparams) -> Result:
    """Train one network on the product distribution ``p: float32[n]`` labelled by ``target``.

    ``hyperparams`` go to ``optax.inject_hyperparams(config.optimizer)``; they may be traced (for
    ``jax.vmap`` over them) and are range-checked when concrete. The key is split into (init,
    training data, test data); step t of online mode uses ``fold_in(training-data key, t)``, so
    the numbers do not depend on batching. Batch with ``jax.vmap`` (as below) or
    :func:`~jaxtrees.learners.sgd.train_many`.

    ``data_key``, if given, replaces the data keys: (training, test) = ``split(data_key)``.
    Members of a vmapped batch that share ``data_key`` and ``p`` (in_axes None) see the same
    examples (common random numbers, e.g. across seeds and learning rates); vmap then draws
    the inputs once and runs the first layer of all members (of a group, in :func:`~jaxtrees.learners.sgd.train_many`
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
    _check_config(config)
    p = checks.probabilities("p", p)
    if jnp.ndim(p) != 1:
        raise ValueError(f"p must be a 1-d array of marginals (vmap for a batch), got shape {jnp.shape(p)}")
    p = jnp.asarray(p, jnp.float32)
    k_init, k_data, k_test = prng.split(key, 3)
    if data_key is not None:
        k_data, k_test = prng.split(data_key)
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
    k_init, k_data = prng.split(key)

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
    return Result(params, trace, steps_to_eps, jnp.asarray(steps_at, jnp.int32)[-1])


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


def make_optimizer(config: TrainConfig, **hyperparams) -> optax.GradientTransformation:
    """``optax.inject_hyperparams(config.optimizer)(**hyperparams)``, checked (see :class:`TrainConfig`)."""
    _check_hyperparams(config, hyperparams)
    if isinstance(config.optimizer, optax.GradientTransformation):
        return config.optimizer
    return optax.inject_hyperparams(config.optimizer)(**hyperparams)


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

