"""Horovod for TensorFlow 2 / Keras 3: the one place the TF worker touches horovod.tensorflow.

    dist = init(threads=0)     # hvd.init(), pin this rank's GPU, size the thread pools
    dist.broadcast_variables(model.variables + optimizer.variables)
    tape = dist.gradient_tape(tape, fp16_allreduce=False)

Keras 3 variables are not tf.Variables (they have no `.ref()`, which Horovod calls); Horovod gets
the backing tf.Variable of each (`v.value`), the optimizer still updates the Keras variables.
Same attributes and collectives as the PyTorch `Dist`, so the worker drives either.
"""

from __future__ import annotations

import socket

import horovod
import horovod.tensorflow as hvd
import numpy as np
import tensorflow as tf

from hvdbench.frameworks import cpu_mpi_settings, math_threads


def backing(variables) -> list:
    """The tf.Variable behind each Keras 3 variable (what Horovod can handle)."""
    return [v.value if hasattr(v, "value") and not isinstance(v, tf.Variable) else v for v in variables]


class Dist:
    def __init__(self, threads: int = 0):
        cpu_mpi_settings(on_gpu=bool(tf.config.list_physical_devices("GPU")))
        hvd.init()
        self.rank, self.size = hvd.rank(), hvd.size()
        self.local_rank, self.local_size = hvd.local_rank(), hvd.local_size()
        self.cross_size = hvd.cross_size()
        self.controller = "mpi" if hvd.mpi_enabled() else "gloo" if hvd.gloo_enabled() else ""
        # Thread pools must be sized before TensorFlow's runtime starts (the first op).
        self.threads = math_threads(threads, self.local_size, self.size)
        tf.config.threading.set_intra_op_parallelism_threads(self.threads)
        tf.config.threading.set_inter_op_parallelism_threads(min(2, self.threads))
        gpus = tf.config.list_physical_devices("GPU")
        if gpus:
            gpu = gpus[self.local_rank % len(gpus)]
            tf.config.set_visible_devices(gpu, "GPU")
            tf.config.experimental.set_memory_growth(gpu, True)
            self.device_name = tf.config.experimental.get_device_details(gpu).get("device_name", gpu.name)
        else:
            self.device_name = "cpu"
        self.hostname = socket.gethostname()
        self.versions = {"tensorflow": tf.__version__, "keras": _keras_version(), "horovod": horovod.__version__}

    def allgather_object(self, obj) -> list:
        # A fixed name: Horovod otherwise names the op after the object's type, and ranks sending
        # different types (an error string on one, None on the others) would wait forever.
        return hvd.allgather_object(obj, name="hvdbench.allgather_object")

    def allreduce_sum(self, values) -> np.ndarray:
        t = tf.constant(np.asarray(values, dtype=np.float64))
        return hvd.allreduce(t, op=hvd.Sum, name="hvdbench.sum").numpy()

    def allreduce_max(self, value: float) -> float:
        t = tf.constant([value], dtype=tf.float64)
        return float(hvd.allreduce(t, op=hvd.Max, name="hvdbench.max").numpy()[0])

    def sync(self) -> None:
        """A synchronised point. Eager ops run in order and the allreduce's result is read back on
        the host, so the device has finished what was queued before it."""
        hvd.allreduce(tf.zeros([1]), op=hvd.Sum, name="hvdbench.sync").numpy()

    def shutdown(self) -> None:
        hvd.shutdown()

    # --- training state ----------------------------------------------------------------------

    def gradient_tape(self, tape, fp16_allreduce: bool):
        return hvd.DistributedGradientTape(
            tape, compression=hvd.Compression.fp16 if fp16_allreduce else hvd.Compression.none)

    def allreduce_gradients(self, grads, fp16_allreduce: bool):
        """What DistributedGradientTape does to its gradients, for gradients summed by hand
        (gradient accumulation): average over ranks, optionally compressed to fp16 on the wire."""
        return hvd.grouped_allreduce(
            grads, op=hvd.Average,
            compression=hvd.Compression.fp16 if fp16_allreduce else hvd.Compression.none)

    def broadcast_variables(self, variables) -> None:
        hvd.broadcast_variables(backing(variables), root_rank=0)

    def average_variables(self, variables) -> None:
        """BatchNorm moving statistics are per rank; evaluate with their average over ranks."""
        variables = [v for v in variables if "float" in str(v.dtype)]
        if variables and self.size > 1:
            averaged = hvd.grouped_allreduce([tf.convert_to_tensor(v) for v in variables], op=hvd.Average)
            for v, avg in zip(variables, averaged):
                v.assign(avg)


def _keras_version() -> str:
    import keras

    return keras.__version__
