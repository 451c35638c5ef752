"""Horovod per framework: with the model folders' torch.py / tf.py, the only code that imports
torch, tensorflow or horovod.<framework>.

Each framework package (`torch`, `tf`) has the same three modules:

    dist.py    Horovod: init, device pinning, thread count, collectives the worker needs
               (the framework-neutral half is `dist_base.DistBase`)
    data.py    numpy batches -> device tensors, then the model's own `on_device` preprocessing
    train.py   `Trainer`: a model module + distributed optimizer; one optimizer step, evaluation
               into the model's Metric, parameter digests

The networks are single-device code in `hvdbench/models/<name>/torch.py` and `tf.py`.
`hvdbench.train.worker` drives either framework through the same small interface, declared once in
`trainer.py` (`Trainer`, which both trainers subclass: what a trainer that cannot do something gives),
so the measurement logic (timing, epochs, evaluation, events) exists once. A model module's optional
functions are looked up in one place too (`trainer.hooks_of`: torch/hooks.py's `TorchHooks`,
tf/train.py's `TfHooks`).
"""

import contextlib
import ctypes
import importlib
import importlib.util
import os
import sys

from hvdbench.contracts.engines import engines
from hvdbench.errors import ConfigError

PACKAGES = {"torch": "hvdbench.frameworks.torch", "tensorflow": "hvdbench.frameworks.tf"}


def load(framework: str):
    """The framework's `train` module (imports the framework and Horovod: call it in a worker only)."""
    return importlib.import_module(f"{PACKAGES[framework]}.train")


# Horovod is optional: only --engine horovod (and every TensorFlow model) needs it; ddp and fsdp run on
# torch.distributed alone, in a Python that never had Horovod built.
HOROVOD_HOWTO = ("`make setup` builds it into hvdbench's own venv; into an existing Python with torch: "
                 "scripts/build_horovod.sh (README: which set-up to choose)")


def horovod_installed() -> bool:
    """Whether `import horovod` can succeed here, found without importing it (the core stays light)."""
    return importlib.util.find_spec("horovod") is not None


def default_engine(framework: str) -> str:
    """The engine of a run that names none: the first of the registry (horovod, ddp, fsdp, then the
    installed packages' own) that trains `framework` and can start in this Python, so a run follows
    the environment as a sweep's default launcher does (horovodrun where Horovod is installed, else
    torchrun: sweep/build.default_launcher). Where none can start (TensorFlow without Horovod), the
    first that trains the framework, whose refusal says what it needs."""
    able = [engine for engine in engines() if framework in engine.frameworks]
    ready = [engine for engine in able if not engine.needs_horovod or horovod_installed()]
    return (ready or able)[0].name


def require_horovod(what: str = "--engine horovod") -> None:
    """One line naming what needs Horovod and how to get it, where it is not installed."""
    if not horovod_installed():
        raise ConfigError(f"{what} needs Horovod, which is not installed in this Python ({sys.executable}); "
                          f"{HOROVOD_HOWTO}; --engine ddp and fsdp need no Horovod")


# Set by an emulated cluster's launch settings (`hvdbench cluster`): its "nodes" are namespaces of
# one machine, so every rank of the job shares that machine's cores.
SHARED_MACHINE_ENV = "HVDBENCH_SHARED_MACHINE"


def fixed_threads(requested: int, env=os.environ) -> int | None:
    """The math threads the user fixed: --threads, else OMP_NUM_THREADS; None to choose them."""
    if requested > 0:
        return requested
    omp = env.get("OMP_NUM_THREADS", "")
    return int(omp) if omp.isdigit() and int(omp) > 0 else None


def math_threads(requested: int, local_size: int, size: int | None = None, env=os.environ,
                 busy_cpus: float = 0.0, share: int = 0) -> int:
    """CPU math threads for one rank: --threads, else OMP_NUM_THREADS, else the free cores shared
    out among the ranks of this machine (two ranks each spinning a thread per core fight for them,
    and oversubscribed OpenMP barriers are slower by orders of magnitude). Those are the
    `local_size` ranks of this host, or all `size` ranks when HVDBENCH_SHARED_MACHINE=1 (an emulated
    cluster). `busy_cpus`: the cores' worth of other processes measured at start (DistBase): a
    neighbour on half a core or more takes that core away, because a lone rank that also spreads its
    threads over the neighbour's core waits at every barrier for the thread the neighbour preempts
    (measured here: 15 ms steps became 660 +- 860 ms). `share` (a sweep's --thread-share): share
    the cores among at least this many ranks, so a layout with fewer ranks per machine gets the
    threads per rank its largest layout gets (a scaling study gives every rank the same resources)."""
    fixed = fixed_threads(requested, env)
    if fixed is not None:
        return fixed
    sharing = max(share, size if env.get(SHARED_MACHINE_ENV) == "1" and size else local_size)
    free = (os.cpu_count() or 1) - round(busy_cpus)
    return max(1, free // sharing)


def cpu_mpi_settings(on_gpu: bool, env=os.environ) -> None:
    """Call before hvd.init(). Training on CPUs, the cores do the math: let Open MPI's progress
    loop yield while it waits instead of spinning on a core a compute thread needs (measured here:
    twice the throughput of two ranks on two cores). GPU runs keep MPI's low-latency polling; a
    value the user set is kept."""
    if not on_gpu:
        env.setdefault("OMPI_MCA_mpi_yield_when_idle", "1")


# glibc's malloc, which PyTorch's CPU allocator calls for every tensor: by default it
# gives memory back to the kernel as soon as a step frees it (blocks above a threshold are mmapped and
# unmapped, and a free heap top above another is trimmed), so every step faults the same pages in
# again: sys time and a slower step. Kept instead (a rank's resident memory stays at its own peak,
# which it reached anyway). mallopt's parameters (malloc.h); 32 MiB is the most glibc takes for the
# mmap threshold on 64 bits.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
MALLOC_SETTINGS = ((M_MMAP_THRESHOLD, 32 << 20), (M_TRIM_THRESHOLD, 1 << 30))
# What a user sets to choose malloc's behaviour themselves: glibc's own variables, or another allocator.
USER_MALLOC_ENV = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_")


def cpu_malloc_settings(on_gpu: bool, env=os.environ) -> bool:
    """Call once a process knows it trains on CPUs (a rank's Dist, `prepare lm-base`): glibc's malloc
    keeps what a step frees for the next step (MALLOC_SETTINGS) instead of returning it to the kernel
    and faulting it in again. Measured by benchmarks/bench_malloc.py (debug flavors, one thread):
    steps 18 % shorter for the Transformer, 24 % for BERT, 4 % for Mask R-CNN, ResNet-50's the same;
    the same peak memory (the Transformer's 0.7 GB). TensorFlow's CPU allocator keeps its own (debug
    BERT's step the same either way), so its Dist does not call this. Left alone on GPUs,
    off glibc, and where the user chose: glibc's MALLOC_*_ variables, a glibc.malloc tunable in
    GLIBC_TUNABLES, or another allocator in LD_PRELOAD (jemalloc, tcmalloc). True where set."""
    chosen = (any(name in env for name in USER_MALLOC_ENV) or "glibc.malloc." in env.get("GLIBC_TUNABLES", "")
              or "malloc" in env.get("LD_PRELOAD", ""))
    if on_gpu or chosen or not _glibc():
        return False
    mallopt = ctypes.CDLL(None).mallopt  # this process's own C library: glibc, checked above
    return all([mallopt(param, value) == 1 for param, value in MALLOC_SETTINGS])


def _glibc() -> bool:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc")
    except (ValueError, OSError, AttributeError):  # no such name here (macOS, musl): not glibc
        return False


# A rank leaves by os._exit (hvdbench.train.worker's _exit: a normal exit would run Horovod's shutdown
# handshake, which waits for peers that may be gone), which skips atexit. What a framework must still
# undo on the way out it registers here, and the worker runs it just before os._exit, whatever the
# rank's status.
_ON_EXIT: list = []


def on_exit(fn):
    """Run fn() as this rank leaves (`frameworks.run_on_exit()`, from the worker's _exit)."""
    _ON_EXIT.append(fn)
    return fn


def run_on_exit() -> None:
    """What `on_exit` registered, in order; a hook that raises is passed over (the rank is leaving)."""
    for fn in _ON_EXIT:
        with contextlib.suppress(Exception):
            fn()
