"""The TensorFlow trainer the worker drives: a Keras 3 model, a custom tf.function step whose
gradients go through `hvd.DistributedGradientTape`, one optimizer step at a time.

    dist = init_dist(threads=0)
    trainer = Trainer(cfg, spec.framework_module("tensorflow"), flavor_cfg, data_info, dist)
    trainer.compile(example_batch)                        # traces the step and evaluation graphs
    trainer.train_step([trainer.device_batch(b) for b in micro_batches])
    state = trainer.evaluate(val_loader, spec.metric)     # this rank's metric state

Precision: bf16/fp16 set Keras' mixed policy (float32 variables, low-precision compute); fp16 wraps
the optimizer in Keras' LossScaleOptimizer. Gradient accumulation sums local gradients over the
micro-batches and averages them over ranks once, with the same grouped allreduce the tape uses.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass

import keras
import numpy as np
import tensorflow as tf

from hvdbench.errors import ConfigError
from hvdbench.frameworks.tf.data import DeviceBatches
from hvdbench.frameworks.tf.dist import Dist, backing
from hvdbench.frameworks.trainer import Trainer as TrainerBase
from hvdbench.frameworks.trainer import hooks_of

POLICIES = {"fp32": "float32", "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}

# cfg.optimizer -> the Keras optimizer (a model may bring its own: make_optimizer(cfg)).
OPTIMIZERS = {
    "sgd": lambda cfg: keras.optimizers.SGD(learning_rate=cfg.lr, momentum=cfg.momentum,
                                            weight_decay=cfg.weight_decay or None),
    "adamw": lambda cfg: keras.optimizers.AdamW(learning_rate=cfg.lr, weight_decay=cfg.weight_decay,
                                                epsilon=1e-6),
    "adam": lambda cfg: keras.optimizers.Adam(learning_rate=cfg.lr, epsilon=1e-8),
}


def make_optimizer(cfg):
    if cfg.optimizer not in OPTIMIZERS:
        raise ConfigError(f"optimizer {cfg.optimizer!r} has no TensorFlow implementation here; "
                          f"valid: {', '.join(OPTIMIZERS)}")
    opt = OPTIMIZERS[cfg.optimizer](cfg)
    # No weight decay on biases and BatchNorm parameters (MLPerf's references).
    opt.exclude_from_weight_decay(var_names=["_bn", "bias"])
    return opt


@dataclass(frozen=True)
class TfHooks:
    """A model folder's tf.py as the trainer calls it (hvdbench/contracts/spec.py's TensorFlowModel)."""

    build: Callable  # (flavor_cfg, **info) -> keras.Model
    loss_and_stats: Callable  # (model, batch, training) -> (loss, stats), traced into a tf.function
    on_device: Callable = lambda batch: batch  # traced preprocessing (image normalisation); default: none
    make_optimizer: Callable = make_optimizer  # cfg -> a Keras optimizer

    @classmethod
    def of(cls, module) -> TfHooks:
        return hooks_of(cls, module)


def init_dist(threads: int = 0, share: int = 0, engine: str = "horovod") -> Dist:
    """Horovod's Dist (TensorFlow models train under --engine horovod only: TrainConfig's validate)."""
    return Dist(threads, share)


# What the trainer hands a model's `build` beyond the data's info keys (as the PyTorch trainer does).
RUN_KEYWORDS = {"rank": "rank", "world": "size"}


def run_keywords(build, dist) -> dict:
    """This process's Horovod `rank` and the `world` size, for the ones `build` declares as named
    parameters (hvdbench/contracts/spec.py's TensorFlowModel); a `**kwargs` catch-all does not."""
    declared = inspect.signature(build).parameters
    return {name: getattr(dist, attr) for name, attr in RUN_KEYWORDS.items()
            if name in declared and declared[name].kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                            inspect.Parameter.KEYWORD_ONLY)}


def _graph(fn, specs=None):
    """`fn` as a tf.function traced as written, without AutoGraph. The steps and the models'
    `loss_and_stats` branch on settings (Python values), never on tensors, so AutoGraph's rewriting
    of every function they call, Horovod's included, bought nothing and cost a quarter of a rank's
    start (debug BERT, one rank, two steps with accumulation: 13.1 -> 9.6 CPU-seconds)."""
    return tf.function(fn, input_signature=specs, autograph=False)


class Trainer(TrainerBase):
    def __init__(self, cfg, module, flavor_cfg, data_info: dict, dist: Dist):
        """`module`: the model folder's tf.py, its functions as TfHooks (build, loss_and_stats, and
        the optional ones' defaults)."""
        self.cfg, self.flavor_cfg, self.data_info, self.dist = cfg, flavor_cfg, data_info, dist
        self.hooks = hooks = TfHooks.of(module)
        keras.utils.set_random_seed(cfg.seed)
        keras.mixed_precision.set_global_policy(POLICIES[cfg.precision])
        self.model = hooks.build(flavor_cfg, **data_info, **run_keywords(hooks.build, dist))
        self.device_batch = DeviceBatches()
        # The model's preprocessing (e.g. image normalisation) runs inside the traced graphs.
        self._on_device = hooks.on_device

        opt = hooks.make_optimizer(cfg)
        if cfg.precision == "fp16":
            opt = keras.optimizers.LossScaleOptimizer(opt)
        opt.build(self.model.trainable_variables)
        self.optimizer = opt
        # Every rank starts from rank 0's weights, BN statistics and optimizer slots.
        dist.broadcast_variables(self.model.variables + list(opt.variables))

        if cfg.accum_steps > 1:
            self._sums = [tf.Variable(tf.zeros(v.shape, tf.float32), trainable=False)
                          for v in self.model.trainable_variables]
            self._apply_sums = _graph(self._apply_sums_fn)

    def compile(self, example: dict) -> None:
        """Trace the graphs the run calls now, before the clock starts (MLPerf counts compilation as
        initialisation), from a one-sample numpy batch of the dataset's fields: the step (with
        accumulation, its two halves: every optimizer step takes accum_steps micro-batches), and
        the evaluation where the run evaluates (time-to-accuracy). A graph the run never calls is
        never traced (debug BERT, one rank, 8 throughput steps with accumulation: 16.8 -> 14.2
        CPU-seconds, medians of 4 runs each, interleaved).
        The batch dimension is left open, so the validation split's shorter last batch does not
        trigger a second trace."""
        specs = [{name: tf.TensorSpec([None, *t.shape[1:]], t.dtype)
                  for name, t in self.device_batch(example).items()}]
        self._train = _graph(self._train_fn, specs)
        self._eval = _graph(self._eval_fn, specs)
        if self.cfg.accum_steps > 1:
            self._accumulate = _graph(self._accumulate_fn, specs)
            traced = [self._accumulate, self._apply_sums]
        else:
            traced = [self._train]
        if self.cfg.mode == "time_to_accuracy":
            traced.append(self._eval)
        for fn in traced:
            fn.get_concrete_function()

    def num_parameters(self) -> int:
        return int(sum(np.prod(v.shape) for v in self.model.trainable_variables))

    def num_trainable(self) -> int:
        """The trained parameters (here every parameter: no TensorFlow model freezes any)."""
        return int(sum(np.prod(v.shape) for v in self.model.trainable_variables))

    def set_lr(self, lr: float) -> None:
        self.optimizer.learning_rate.assign(lr)

    # --- one optimizer step ------------------------------------------------------------------

    def _scaled(self, loss):
        return self.optimizer.scale_loss(loss) if self.cfg.precision == "fp16" else loss

    def _train_fn(self, batch):
        variables = self.model.trainable_variables
        with tf.GradientTape() as tape:
            loss, _ = self.hooks.loss_and_stats(self.model, self._on_device(batch), training=True)
            loss = self._scaled(loss)
        tape = self.dist.gradient_tape(tape, self.cfg.fp16_allreduce)
        grads = tape.gradient(loss, backing(variables))
        self.optimizer.apply(grads, variables)

    def _accumulate_fn(self, batch):
        variables = self.model.trainable_variables
        with tf.GradientTape() as tape:
            loss, _ = self.hooks.loss_and_stats(self.model, self._on_device(batch), training=True)
            loss = self._scaled(loss) / self.cfg.accum_steps
        for total, g in zip(self._sums, tape.gradient(loss, backing(variables))):
            total.assign_add(tf.cast(g, tf.float32))

    def _apply_sums_fn(self):
        variables = self.model.trainable_variables
        grads = self.dist.allreduce_gradients([tf.convert_to_tensor(s) for s in self._sums],
                                              self.cfg.fp16_allreduce)
        self.optimizer.apply([tf.cast(g, v.dtype) for g, v in zip(grads, variables)], variables)
        for s in self._sums:
            s.assign(tf.zeros_like(s))

    def train_step(self, micro_batches: list[dict]) -> None:
        if len(micro_batches) == 1:
            self._train(micro_batches[0])
            return
        for batch in micro_batches:
            self._accumulate(batch)
        self._apply_sums()

    # --- evaluation --------------------------------------------------------------------------

    def _eval_fn(self, batch):
        _, stats = self.hooks.loss_and_stats(self.model, self._on_device(batch), training=False)
        return stats

    def evaluate(self, batches, metric):
        """This rank's metric state over `batches` (numpy dicts), ready for `metric.reduce`."""
        self.dist.average_variables(self.model.non_trainable_variables)
        state = metric.start()
        for batch in batches:
            if len(batch[next(iter(batch))]) == 0:  # drop_last=False can leave a rank one batch short
                continue
            state = metric.update(state, self._eval(self.device_batch(batch)))
        return metric.local(state)

    def param_digest(self) -> str:
        """sha256 of every trainable variable's bytes, in order: equal digests = equal models."""
        h = hashlib.sha256()
        for v in self.model.trainable_variables:
            h.update(v.path.encode())
            h.update(np.asarray(v.numpy(), dtype=np.float32).tobytes())
        return h.hexdigest()
