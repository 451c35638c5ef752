"""Horovod for TensorFlow 2 / Keras 3: the one place the TF worker touches horovod.tensorflow.

    dist = init(threads=0)     # hvd.init(), pin this rank's GPU, size the thread pools
    dist.broadcast_variables(model.variables + optimizer.variables)
    tape = dist.gradient_tape(tape, fp16_allreduce=False)

Keras 3 variables are not tf.Variables (they have no `.ref()`, which Horovod calls); Horovod gets
the backing tf.Variable of each (`v.value`), the optimizer still updates the Keras variables.
Same attributes and collectives as the PyTorch `Dist`, so the worker drives either.
"""

from __future__ import annotations

import contextlib
import os
import sys

import horovod
import horovod.tensorflow as hvd
import numpy as np
import tensorflow as tf

from hvdbench.frameworks import cpu_mpi_settings, on_exit
from hvdbench.frameworks.dist_base import DistBase

# The name autograph (tensorflow/python/autograph/pyct/loader.py) gives the module it writes for each
# function it converts, one .py file in the temp folder, registered in sys.modules under that name.
AUTOGRAPH_PREFIX = "__autograph_generated_file"


@on_exit
def remove_autograph_files() -> None:
    """Delete the files autograph wrote for this process. It leaves their removal to atexit, which a
    rank's os._exit skips: every TensorFlow run left them in the temp folder (7 for the debug
    ResNet-50's 2 ranks and 2 steps)."""
    for name, module in list(sys.modules.items()):
        if not name.startswith(AUTOGRAPH_PREFIX):
            continue
        path = getattr(module, "__file__", None)
        if path and os.path.basename(path).startswith(AUTOGRAPH_PREFIX):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)  # the name itself (a link's target is never touched)


def backing(variables) -> list:
    """The tf.Variable behind each Keras 3 variable (what Horovod can handle)."""
    return [v.value if hasattr(v, "value") and not isinstance(v, tf.Variable) else v for v in variables]


class Dist(DistBase):
    # The thread pools below must be sized before TensorFlow's first op, which the start's
    # neighbour measurement (a Horovod collective) would be: TF runs keep the plain core share.
    MEASURE_NEIGHBOURS = False

    def __init__(self, threads: int = 0, share: int = 0):
        cpu_mpi_settings(on_gpu=bool(tf.config.list_physical_devices("GPU")))
        super().__init__(hvd, threads, share)
        # Thread pools must be sized before TensorFlow's runtime starts (the first op).
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
        self.versions = {"tensorflow": tf.__version__, "keras": _keras_version(), "horovod": horovod.__version__}

    def tensor(self, values: np.ndarray) -> tf.Tensor:
        return tf.constant(values)

    def sync(self) -> None:
        """A synchronised point. Eager ops run in order and the allreduce's result is read back on
        the host, so the device has finished what was queued before it."""
        hvd.allreduce(tf.zeros([1]), op=hvd.Sum, name="hvdbench.sync").numpy()

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
