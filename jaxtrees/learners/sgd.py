"""Gradient descent on juntas: many small networks trained at once (000 Sec. 1.3, Open Question 1).

:func:`train` trains one network (a pure function: batch it with ``jax.vmap``, compile it with
``jax.jit``); :func:`train_many` trains a batch, sharded over the local devices and grouped on a CPU;
:class:`SGD` is the learner. The pieces live in :mod:`~jaxtrees.learners.networks` (models, losses),
:mod:`~jaxtrees.learners.sgd_data` (examples, test error) and :mod:`~jaxtrees.learners.sgd_train` (the
loop); every name is re-exported here. Design notes (data modes, why no standardization): docs/gd-notes.md.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, PartitionSpec

from jaxtrees.core import checks, programs
from jaxtrees.learners.base import check_data
from jaxtrees.learners.networks import (ACTIVATIONS, ENCODINGS, INITS, LOSSES, Dense, Model, Network,  # noqa: F401
                                        _matmul_bwd, _matmul_fwd, _mlp, encode, loss_fn, margin_loss, matmul, mlp)
from jaxtrees.learners.sgd_data import EVAL_CHUNK, _data, _marginals, _scorer, _test_set, inputs  # noqa: F401
from jaxtrees.learners.sgd_train import (HYPERPARAMETER_RANGES, MAX_EXACT_N, MODES, Result, Trace,  # noqa: F401
                                         TrainConfig, _check_config, _check_hyperparams, _descend, _frozen,
                                         _records_until_eps, make_optimizer, record_steps, train, train_on)

#: Members per ``lax.map`` step of :func:`train_many` on a CPU device (cache-sized, the study
#: runner's group). bench_gd's workload, 128 members per core, idle 2-core CPU, us per member-step
#: in groups of 8 / 32 / 64 against one vmap: 3.83 / 3.81 / 3.83 vs 3.90 independent, 3.23 / 2.75 /
#: 2.83 vs 3.23 with a shared data stream.
CPU_GROUP = 32


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


# -------------------------------------------------------------------------------------- internals


@programs.holds_programs
@functools.lru_cache(maxsize=16)  # each value holds its compiled programs
def _batched_train(config, names, with_data_key, in_axes, shards: int, group: int | None):
    def one(key, p, target, data_key, *values):
        return train(key, p, target, config, data_key=data_key if with_data_key else None,
                     **dict(zip(names, values)))

    batched = jax.vmap(one, in_axes=in_axes) if group is None else _in_groups(one, in_axes, group)
    if shards == 1:
        return programs.jit(batched)
    mesh = Mesh(np.asarray(jax.local_devices()[:shards]), ("members",))
    specs = tuple(PartitionSpec() if axis is None else PartitionSpec("members") for axis in in_axes)
    return programs.jit(jax.shard_map(batched, mesh=mesh, in_specs=specs, out_specs=PartitionSpec("members"),
                                 check_vma=False))


def _balanced(members: int, group: int) -> int | None:
    """None (one vmap) if ``group`` >= members; else the largest divisor of ``members`` that is
    <= group and >= group / 2 (no remainder to compile), or ``group`` itself.

    >>> _balanced(100, 32), _balanced(16, 32)
    (25, None)
    """
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
