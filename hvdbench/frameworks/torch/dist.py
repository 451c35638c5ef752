"""Horovod for PyTorch: the one place the torch worker touches horovod.torch.

    dist = init(threads=0)        # hvd.init(), pin this rank's GPU, size the CPU thread pool
    opt = dist.distributed_optimizer(opt, model, accum_steps=1, fp16_allreduce=False)
    dist.broadcast_state(model, opt)
    dist.allreduce_sum(np.array([correct, total]))

The worker uses only the attributes and methods of `Dist`; the TensorFlow twin has the same ones
(their common half is `hvdbench.frameworks.dist_base.DistBase`).
"""

from __future__ import annotations

import horovod
import horovod.torch as hvd
import numpy as np
import torch

from hvdbench.frameworks import cpu_malloc_settings, cpu_mpi_settings
from hvdbench.frameworks.dist_base import DistBase
from hvdbench.frameworks.torch.process_group import torch_versions


class Dist(DistBase):
    def __init__(self, threads: int = 0, share: int = 0):
        cpu_mpi_settings(on_gpu=torch.cuda.is_available())
        cpu_malloc_settings(on_gpu=torch.cuda.is_available())
        super().__init__(hvd, threads, share)
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
        self.versions = {**torch_versions(), "horovod": horovod.__version__}

    def tensor(self, values: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(values)

    def sync(self) -> None:
        """A synchronised point: the device has finished its queued work on every rank."""
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        hvd.allreduce(torch.zeros(1), op=hvd.Sum, name="hvdbench.sync")

    # --- training state ----------------------------------------------------------------------

    def distributed_optimizer(self, optimizer, model, accum_steps: int, fp16_allreduce: bool):
        """Gradients are averaged over ranks once per `accum_steps` backward passes."""
        return hvd.DistributedOptimizer(
            optimizer, named_parameters=model.named_parameters(),
            compression=hvd.Compression.fp16 if fp16_allreduce else hvd.Compression.none,
            backward_passes_per_step=accum_steps, op=hvd.Average)

    def broadcast_state(self, model, optimizer) -> None:
        """Every rank starts from rank 0's weights, buffers and optimizer state. A bf16 tensor (a
        LoRA run's frozen base) travels as its int16 bits: Horovod's CPU operations have no bf16,
        and a broadcast copies bits, so the view loses nothing."""
        state = {name: t.view(torch.int16) if t.dtype == torch.bfloat16 else t
                 for name, t in model.state_dict().items()}
        hvd.broadcast_parameters(state, root_rank=0)
        # A new optimizer is the same on every rank; Horovod's broadcast of one without state would
        # first take a step with zero gradients to create it, which weight decay turns into a real
        # update (every weight shrinks by lr x decay, momentum starts non-zero): a run that ddp or
        # fsdp, which take no such step, would not match. Only state there is is broadcast.
        if optimizer.state_dict()["state"]:
            hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    def average_buffers(self, model) -> None:
        """BatchNorm running statistics are per rank; evaluate with their average over ranks."""
        buffers = [b for b in model.buffers() if b.is_floating_point()]
        if buffers and self.size > 1:
            averaged = hvd.grouped_allreduce(buffers, op=hvd.Average, name="hvdbench.buffers")
            for b, avg in zip(buffers, averaged):
                b.copy_(avg)
