"""torch.distributed for `--engine ddp|fsdp`: the same `Dist` the worker drives under Horovod, over a
torch.distributed process group (Gloo on CPUs; NCCL for the GPUs' tensors, Gloo for host values).

    dist = TorchDist(threads=0)        # under torchrun, horovodrun, mpirun, srun or alone
    dist.rank, dist.size, dist.local_rank, dist.local_size, dist.cross_size, dist.device
    dist.allreduce_sum(np.array([correct, total]))

Every launcher hvdbench has starts it (hvdbench.launchers.launch_info.place reads the rank, world size
and local rank each launcher announces). The rendezvous, where rank 0's TCP store listens:
MASTER_ADDR/MASTER_PORT where the launcher (torchrun) or the user set them, the Slurm step's first
host and a port from the job id under srun, and otherwise agreed through Horovod's collectives,
which start under horovodrun, mpirun and srun alike: Horovod is initialised, rank 0 offers its
address and a free port, every rank takes them, and Horovod is shut down again before training
(nothing of Horovod runs while a ddp/fsdp run trains).
"""

from __future__ import annotations

import datetime
import os
import socket

import numpy as np
import torch
import torch.distributed as tdist

from hvdbench.frameworks import cpu_malloc_settings, cpu_mpi_settings, require_horovod
from hvdbench.frameworks.dist_base import DistBase
from hvdbench.launchers.launch_info import Place, place

# How long a rank waits for the others to join or to reach a collective; a rank that crashed is
# noticed by its launcher, which ends the job (the same as under Horovod).
TIMEOUT = datetime.timedelta(minutes=30)


def torch_versions() -> dict:
    """torch's version; on GPUs also the CUDA it was built with and its NCCL (the hardware record's)."""
    versions = {"torch": torch.__version__.split("+")[0]}
    if torch.cuda.is_available():
        versions.update(cuda=torch.version.cuda, nccl=".".join(map(str, torch.cuda.nccl.version())))
    return versions


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def own_address(here: Place, env=os.environ) -> str:
    """An address of this host the other ranks can reach: the loopback when the whole job is on this
    host, else the host name's address, or (when that is a loopback alias, as /etc/hosts often has
    it) the address this host sends from towards horovodrun's rendezvous server."""
    if here.local_size == here.size:
        return "127.0.0.1"
    name = socket.gethostname()
    try:
        address = socket.gethostbyname(name)
    except OSError:
        address = name
    towards = env.get("HOROVOD_GLOO_RENDEZVOUS_ADDR")
    if address.startswith("127.") and towards:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((towards, 9))  # UDP: no packet is sent; the kernel picks the route's source
            address = s.getsockname()[0]
    return address


def offer_rendezvous(hvd, here: Place) -> tuple[str, int]:
    """Rank 0's (address, free port) on every rank, through a running Horovod's broadcast."""
    offer = (own_address(here), free_port()) if hvd.rank() == 0 else None
    address, port = hvd.broadcast_object(offer, root_rank=0, name="hvdbench.rendezvous")
    return address, int(port)


def agree_rendezvous(here: Place) -> tuple[str, int]:
    """Rank 0's (address, port), agreed through Horovod's collectives (see the module's doc):
    Horovod is started for it and shut down again. Where Horovod is not installed, one line says
    which launchers need none."""
    require_horovod("torch.distributed's rendezvous without MASTER_ADDR/MASTER_PORT (launched by mpirun or "
                    "horovodrun, not torchrun or srun)")
    import horovod.torch as hvd  # optional (see require_horovod): imported only where it is the rendezvous

    cpu_mpi_settings(on_gpu=torch.cuda.is_available())
    hvd.init()
    agreed = offer_rendezvous(hvd, here)
    hvd.shutdown()
    return agreed


class TorchDist(DistBase):
    """The Horovod `Dist`'s attributes and host collectives over torch.distributed."""

    def __init__(self, threads: int = 0, share: int = 0, env=os.environ):
        cpu_malloc_settings(on_gpu=torch.cuda.is_available())
        here = place(env)
        address, port = here.master_addr, here.master_port
        if address is None or port is None:
            address, port = agree_rendezvous(here)
        cuda = torch.cuda.is_available()
        if cuda:
            torch.cuda.set_device(here.local_rank)
            torch.backends.cudnn.benchmark = True
        tdist.init_process_group("cpu:gloo,cuda:nccl" if cuda else "gloo",
                                 init_method=f"tcp://{address}:{port or free_port()}",
                                 rank=here.rank, world_size=here.size, timeout=TIMEOUT)
        # Host values (metric sums, objects) travel over Gloo whatever the devices are.
        self.host_group = tdist.new_group(backend="gloo") if cuda else None
        self.hvd = None
        self._placed(here.rank, here.size, here.local_rank, here.local_size, max(1, here.size // here.local_size),
                     "nccl" if cuda else "gloo", threads, share)
        torch.set_num_threads(self.threads)
        if cuda:
            self.device = torch.device("cuda", here.local_rank)
            self.device_name = torch.cuda.get_device_name(here.local_rank)
        else:
            self.device, self.device_name = torch.device("cpu"), "cpu"
        self.versions = torch_versions()

    def tensor(self, values: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(values)

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        tdist.barrier(group=self.host_group)

    def allgather_object(self, obj) -> list:
        out = [None] * self.size
        tdist.all_gather_object(out, obj, group=self.host_group)
        return out

    def _allreduce(self, values, op) -> np.ndarray:
        t = torch.as_tensor(np.asarray(values, dtype=np.float64)).clone()
        tdist.all_reduce(t, op=op, group=self.host_group)
        return t.numpy()

    def allreduce_sum(self, values) -> np.ndarray:
        return self._allreduce(values, tdist.ReduceOp.SUM)

    def allreduce_max(self, value: float) -> float:
        return float(self._allreduce([value], tdist.ReduceOp.MAX)[0])

    def average_buffers(self, model) -> None:
        """BatchNorm running statistics are per rank (ddp keeps them so, as Horovod does); evaluate
        with their average over ranks."""
        if self.size == 1:
            return
        for b in model.buffers():
            if b.is_floating_point():
                tdist.all_reduce(b, op=tdist.ReduceOp.SUM)
                b.div_(self.size)

    def start_timeline(self, path) -> None:
        raise RuntimeError("Horovod's timeline needs --engine horovod")  # refused up front by validate

    def shutdown(self) -> None:
        tdist.destroy_process_group()
