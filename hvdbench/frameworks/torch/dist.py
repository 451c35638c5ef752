"""Horovod for PyTorch: the one place the torch worker touches horovod.torch.

    dist = init(threads=0)        # hvd.init(), pin this rank's GPU, size the CPU thread pool
    opt = dist.distributed_optimizer(opt, model, accum_steps=1, fp16_allreduce=False)
    dist.broadcast_state(model, opt)
    dist.allreduce_sum(np.array([correct, total]))

The worker uses only the attributes and methods of `Dist`; the TensorFlow twin has the same ones.
"""

from __future__ import annotations

import socket

import horovod
import horovod.torch as hvd
import numpy as np
import torch

from hvdbench.frameworks import cpu_mpi_settings, math_threads


class Dist:
    def __init__(self, threads: int = 0):
        cpu_mpi_settings(on_gpu=torch.cuda.is_available())
        hvd.init()
        self.rank, self.size = hvd.rank(), hvd.size()
        self.local_rank, self.local_size = hvd.local_rank(), hvd.local_size()
        self.cross_size = hvd.cross_size()
        self.controller = "mpi" if hvd.mpi_enabled() else "gloo" if hvd.gloo_enabled() else ""
        # Two ranks sharing a CPU must not each start one thread per core (they would fight).
        self.threads = math_threads(threads, self.local_size, self.size)
        torch.set_num_threads(self.threads)
        if torch.cuda.is_available():
            torch.cuda.set_device(self.local_rank)
            # Every step has the same shapes: let cuDNN time its algorithms once and keep the fastest
            # (what MLPerf's PyTorch references do).
            torch.backends.cudnn.benchmark = True
            self.device = torch.device("cuda", self.local_rank)
            self.device_name = torch.cuda.get_device_name(self.local_rank)
        else:
            self.device = torch.device("cpu")
            self.device_name = "cpu"
        self.hostname = socket.gethostname()
        self.versions = {"torch": torch.__version__.split("+")[0], "horovod": horovod.__version__}

    # --- collectives the worker needs --------------------------------------------------------

    def allgather_object(self, obj) -> list:
        # A fixed name: Horovod otherwise names the op after the object's type, and ranks sending
        # different types (an error string on one, None on the others) would wait forever.
        return hvd.allgather_object(obj, name="hvdbench.allgather_object")

    def allreduce_sum(self, values: np.ndarray) -> np.ndarray:
        t = torch.as_tensor(np.asarray(values, dtype=np.float64))
        return hvd.allreduce(t, op=hvd.Sum, name="hvdbench.sum").numpy()

    def allreduce_max(self, value: float) -> float:
        t = torch.tensor([value], dtype=torch.float64)
        return float(hvd.allreduce(t, op=hvd.Max, name="hvdbench.max")[0])

    def sync(self) -> None:
        """A synchronised point: the device has finished its queued work on every rank."""
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        hvd.allreduce(torch.zeros(1), op=hvd.Sum, name="hvdbench.sync")

    def shutdown(self) -> None:
        hvd.shutdown()

    # --- training state ----------------------------------------------------------------------

    def distributed_optimizer(self, optimizer, model, accum_steps: int, fp16_allreduce: bool):
        """Gradients are averaged over ranks once per `accum_steps` backward passes."""
        return hvd.DistributedOptimizer(
            optimizer, named_parameters=model.named_parameters(),
            compression=hvd.Compression.fp16 if fp16_allreduce else hvd.Compression.none,
            backward_passes_per_step=accum_steps, op=hvd.Average)

    def broadcast_state(self, model, optimizer) -> None:
        """Every rank starts from rank 0's weights, buffers and optimizer state."""
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    def average_buffers(self, model) -> None:
        """BatchNorm running statistics are per rank; evaluate with their average over ranks."""
        buffers = [b for b in model.buffers() if b.is_floating_point()]
        if buffers and self.size > 1:
            averaged = hvd.grouped_allreduce(buffers, op=hvd.Average, name="hvdbench.buffers")
            for b, avg in zip(buffers, averaged):
                b.copy_(avg)
