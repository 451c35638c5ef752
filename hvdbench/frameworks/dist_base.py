"""The framework-neutral half of `Dist`, shared by `frameworks/torch/dist.py` and `tf/dist.py`:
Horovod's init, the attributes the worker reads, and the collectives on host values.

    dist = Dist(threads=0)                  # a subclass: hvd.init(), device, thread pools
    dist.rank, dist.size, dist.local_size, dist.cross_size, dist.controller, dist.hostname, dist.device
    dist.allgather_object(obj)              # every rank's obj, in rank order
    dist.allreduce_sum(np.array([3.0, 4.0]))
"""

from __future__ import annotations

import socket
import time

import numpy as np

from hvdbench.frameworks import fixed_threads, math_threads
from hvdbench.interference import Neighbours


class DistBase:
    # Whether the start measures the neighbours with a collective before sizing the thread pools:
    # TensorFlow must size its pools before its first op, and Horovod's collectives are ops there.
    MEASURE_NEIGHBOURS = True
    # This rank's torch.device (the PyTorch Dists set it); None where the framework places its ops
    # itself (TensorFlow). device_name: the accelerator's name, or "cpu" (every Dist sets it).
    device = None
    device_name = "cpu"

    def __init__(self, hvd, threads: int = 0, share: int = 0):
        """`hvd`: horovod.torch or horovod.tensorflow, already imported by the subclass."""
        self.hvd = hvd
        hvd.init()
        self._placed(hvd.rank(), hvd.size(), hvd.local_rank(), hvd.local_size(), hvd.cross_size(),
                     "mpi" if hvd.mpi_enabled() else "gloo" if hvd.gloo_enabled() else "", threads, share)

    def _placed(self, rank: int, size: int, local_rank: int, local_size: int, cross_size: int, controller: str,
                threads: int, share: int) -> None:
        """The job's shape, once the collectives are up, and this rank's math threads."""
        self.rank, self.size, self.local_rank, self.local_size = rank, size, local_rank, local_size
        self.cross_size, self.controller = cross_size, controller
        # Two ranks sharing a CPU must not each start one thread per core (they would fight), nor a
        # rank take the core a neighbour is using.
        self.busy_cpus = (self._neighbours_at_start()
                          if fixed_threads(threads) is None and self.MEASURE_NEIGHBOURS else None)
        self.threads = math_threads(threads, self.local_size, self.size, busy_cpus=self.busy_cpus or 0.0,
                                    share=share)
        self.hostname = socket.gethostname()

    def _neighbours_at_start(self, window_s: float = 0.1) -> float:
        """Cores' worth of other processes on the busiest of the job's machines, measured while
        every rank sleeps (a collective: all ranks start the window together)."""
        self.allgather_object(None)
        watch = Neighbours()
        time.sleep(window_s)
        return watch.stop(self)["other_cpus"]

    def start_timeline(self, path) -> None:
        """Horovod's timeline from now on, into `path` (rank 0 writes it; needs
        HOROVOD_TIMELINE=DYNAMIC before init, which the worker sets for --horovod-timeline)."""
        self.hvd.start_timeline(str(path), mark_cycles=True)

    def stop_timeline(self) -> None:
        self.hvd.stop_timeline()

    def tensor(self, values: np.ndarray):
        """A host tensor of the framework holding `values`."""
        raise NotImplementedError

    def allgather_object(self, obj) -> list:
        # A fixed name: Horovod otherwise names the op after the object's type, and ranks sending
        # different types (an error string on one, None on the others) would wait forever.
        return self.hvd.allgather_object(obj, name="hvdbench.allgather_object")

    def allreduce_sum(self, values) -> np.ndarray:
        t = self.tensor(np.asarray(values, dtype=np.float64))
        return np.asarray(self.hvd.allreduce(t, op=self.hvd.Sum, name="hvdbench.sum").numpy())

    def allreduce_max(self, value: float) -> float:
        t = self.tensor(np.array([value], dtype=np.float64))
        return float(self.hvd.allreduce(t, op=self.hvd.Max, name="hvdbench.max").numpy()[0])

    def shutdown(self) -> None:
        self.hvd.shutdown()
