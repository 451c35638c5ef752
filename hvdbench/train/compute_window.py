"""How far a run's compute was from the hardware: model TFLOP/s per GPU and MFU, peak memory per
rank, and (NVIDIA GPUs) the energy NVML counted, over the run's timed window.

    window = ComputeWindow(dist, trainer)     # every rank, where the timed window opens
    ...                                       # the timed steps (or run_start -> run_stop)
    figures = window.stop(samples)            # every rank (one gather); the same dict everywhere
    fill(record, figures)                     # rank 0: the RunResult's compute columns

Memory: the trainer's GPU peaks since the window opened (torch.cuda.max_memory_allocated and
max_memory_reserved, reset at its start), and the process's resident peak on any device
(`ru_maxrss`, which cannot be reset: the whole process's life). The most any rank held is recorded.

Energy: NVML's `nvmlDeviceGetTotalEnergyConsumption` (millijoules since the driver loaded; Volta
and newer), read at the window's start and end on each rank's GPU (package nvidia-ml-py, module
pynvml). It covers the GPUs only, not the hosts, fans or network (MLPerf Training Power measures
whole nodes at the wall). No NVML (no NVIDIA driver: a CPU machine), no GPU, or a GPU without the
counter: the energy columns are empty, never 0. Two ranks on one GPU would both count it: each
rank's GPU is counted once (by its local rank's index).
"""

from __future__ import annotations

import os
import resource
import sys
import time

from hvdbench.contracts import get_spec, model_names
from hvdbench.frameworks.trainer import Trainer
from hvdbench.peaks import mfu, model_tflops, peak_precision, peak_tflops
from hvdbench.published import compare

try:  # nvidia-ml-py; an install without it still trains, without energy figures
    import pynvml
except ImportError:  # pragma: no cover - a dependency of hvdbench
    pynvml = None


def nvml_handle(index: int, env=os.environ):
    """The NVML handle of the CUDA device `index` as this process numbers it (CUDA_VISIBLE_DEVICES
    renumbers devices: its index or GPU-uuid entry names NVML's), or None where NVML cannot be used
    (no library, no driver, no such device)."""
    if pynvml is None:
        return None
    try:
        pynvml.nvmlInit()
        visible = [v.strip() for v in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
        if index < len(visible):
            if visible[index].isdigit():
                return pynvml.nvmlDeviceGetHandleByIndex(int(visible[index]))
            return pynvml.nvmlDeviceGetHandleByUUID(visible[index])
        return pynvml.nvmlDeviceGetHandleByIndex(index)
    except pynvml.NVMLError:
        return None


def energy_mj(handle) -> int | None:
    """The GPU's energy counter (mJ), or None (no handle, or no counter before Volta)."""
    if handle is None:
        return None
    try:
        return int(pynvml.nvmlDeviceGetTotalEnergyConsumption(handle))
    except pynvml.NVMLError:
        return None


def gpu_identity(handle) -> tuple[int | None, str]:
    """NVML's index and UUID of a GPU (the per-rank times name the device a straggler ran on), or
    (None, "") where NVML has no handle for it."""
    if handle is None:
        return None, ""
    try:
        uuid = pynvml.nvmlDeviceGetUUID(handle)
        return int(pynvml.nvmlDeviceGetIndex(handle)), uuid.decode() if isinstance(uuid, bytes) else str(uuid)
    except pynvml.NVMLError:
        return None, ""


def resident_peak_gb() -> float:
    """This process's peak resident set, GB (ru_maxrss is kB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak * (1 if sys.platform == "darwin" else 1024) / 1e9


class ComputeWindow:
    """The compute figures of one timed window on every rank (see the module's docstring)."""

    def __init__(self, dist, trainer: Trainer, env=os.environ):
        self.dist, self.trainer = dist, trainer
        device = dist.device  # None: the framework places its ops (TensorFlow), no GPU of ours to read
        cuda = device is not None and device.type == "cuda"
        self.handle = nvml_handle(device.index or 0, env) if cuda else None
        trainer.reset_peak_memory()
        self.start_mj = energy_mj(self.handle)
        self.t0 = time.perf_counter()

    def stop(self, samples: int) -> dict:
        """Every rank's figures gathered and combined (`combine`); `samples`: trained in the window,
        all ranks together."""
        end_mj = energy_mj(self.handle)
        seconds = time.perf_counter() - self.t0
        mine = {"seconds": seconds, "mem_resident_gb": resident_peak_gb(), **self.trainer.peak_memory()}
        if self.start_mj is not None and end_mj is not None:
            mine["energy_j"] = (end_mj - self.start_mj) / 1e3
        return combine(self.dist.allgather_object(mine), samples)


def combine(ranks: list[dict], samples: int) -> dict:
    """One window's figures from every rank's: memory the most any rank held; energy summed over the
    GPUs, per sample, and the mean power per GPU. Energy only when every rank had the counter
    (a sum over some GPUs would read as the whole job's)."""
    out = {}
    for key in ("mem_allocated_gb", "mem_reserved_gb", "mem_resident_gb"):
        values = [r[key] for r in ranks if r.get(key) is not None]
        if values:
            out[key] = max(values)
    if ranks and all(r.get("energy_j") is not None for r in ranks):
        total = sum(r["energy_j"] for r in ranks)
        out["energy_j"] = total
        out["energy_j_per_sample"] = total / samples if samples else None
        out["power_w_per_gpu"] = sum(r["energy_j"] / r["seconds"] for r in ranks if r["seconds"] > 0) / len(ranks)
    return out


def fill(record, figures: dict) -> None:
    """The record's compute columns: the window's figures, and model TFLOP/s per GPU and MFU from
    its flops_per_sample (set before the loop), its samples/s per GPU (a time-to-accuracy run's: what
    it trained over its training time) and device (its first)."""
    for key, value in figures.items():
        setattr(record, key, value)
    device = record.devices.split(";")[0] if record.devices else ""
    record.peak_tflops = peak_tflops(device, peak_precision(record.precision))  # fp8 runs: the bf16 peak
    rate = record.throughput_per_gpu
    if rate is None and record.time_per_epoch_s and record.epochs and record.world_size:
        # time to accuracy: the samples trained over the time spent training (evaluations left out)
        rate = record.steps * record.global_batch / (record.time_per_epoch_s * record.epochs) / record.world_size
    record.model_tflops_per_gpu = model_tflops(record.flops_per_sample, rate)
    record.mfu = mfu(record.model_tflops_per_gpu, record.peak_tflops)
    # Beside MLPerf's published rate for this accelerator and benchmark (hvdbench.published), if any.
    benchmark = get_spec(record.model).benchmark if record.model in model_names() else ""
    record.published_share, record.published_ref = compare(device, benchmark, record.flavor, rate,
                                                           record.mlperf_samples_per_row)
