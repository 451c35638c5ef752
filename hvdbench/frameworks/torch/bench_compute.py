"""`hvdbench bench compute`'s measuring half: what each rank's device can do, timed with torch.

    hvdbench bench compute --out results/demo                       # alone: this machine's device
    horovodrun -np 2 -H localhost:2 --gloo hvdbench bench compute --out results/demo
    torchrun --standalone --nproc-per-node 1 -m hvdbench bench compute --out results/gpu

Per rank, at once on every rank (ranks sharing a machine contend for it as their training does):
a dense n x n x n matrix product per precision (fp32 with TF32 off, tf32, bf16, fp16, and fp8 through
torch._scaled_mm where the GPU has fp8 units: 2 n^3 FLOPs each), and a large device-to-device copy
(bytes read + written per second, the memory bandwidth). Each op is timed once, then repeated to
fill its time budget; on a GPU between device synchronisations. The ranks meet over
torch.distributed (process_group.TorchDist: any launcher, or none), so no Horovod is needed (the
GPU machines run torchrun). The rows, table and CSV are hvdbench.bench.compute_report's.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

import psutil
import torch

from hvdbench.bench import compute_report as bc
from hvdbench.bench import defaults as D
from hvdbench.bench.rows import run_identity
from hvdbench.errors import ConfigError
from hvdbench.frameworks.torch.process_group import TorchDist
from hvdbench.peaks import peak_tflops
from hvdbench.results.records.schema import ComputeRow
from hvdbench.launchers.launch_info import detect_launcher
from hvdbench.topology import Layout

TORCH_DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass
class ComputeOptions:
    out: str
    dtypes: list[str]
    size: int = 0  # matmul n; 0: D.MATMUL_N for the device
    copy_bytes: int = 0  # 0: D.COPY_BYTES for the device
    budget_s: float = D.COMPUTE_BUDGET_S
    max_iters: int = D.COMPUTE_MAX_ITERS
    threads: int = 0  # CPU math threads per rank, as `train --threads` (0: cores / local ranks)
    thread_share: int = 0  # as `train --thread-share` (a sweep gives its runs')


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_op(op, device: torch.device, budget_s: float, max_iters: int) -> tuple[float, int]:
    """(seconds per call, timed calls): one untimed call (allocations, kernel choice), one timed to
    size the run, then as many as fill `budget_s` (at least 2, at most `max_iters`)."""
    op()
    _sync(device)
    t0 = time.perf_counter()
    op()
    _sync(device)
    once = time.perf_counter() - t0
    iters = int(max(2, min(max_iters, budget_s / max(once, 1e-9))))
    t0 = time.perf_counter()
    for _ in range(iters):
        op()
    _sync(device)
    return (time.perf_counter() - t0) / iters, iters


def unavailable(dtype: str, device: torch.device) -> str:
    """Why `dtype`'s matrix product cannot be timed on `device` ('' when it can)."""
    if device.type != "cuda":
        if dtype == "tf32":
            return "no TF32 on a CPU"
        if dtype == "fp8":
            return "no fp8 matrix product on a CPU"
        return ""
    if dtype == "fp8" and torch.cuda.get_device_capability(device) < (8, 9):
        return "no fp8 units before compute capability 8.9 (Ada, Hopper)"
    if dtype == "bf16" and not torch.cuda.is_bf16_supported():
        return "no bf16 on this GPU"
    return ""


def matmul_op(dtype: str, n: int, device: torch.device):
    """A callable doing one n x n x n product in `dtype` on `device`."""
    if dtype == "fp8":
        a = torch.randn(n, n, device=device).to(torch.float8_e4m3fn)
        b = torch.randn(n, n, device=device).to(torch.float8_e4m3fn).t()  # column-major, as _scaled_mm needs
        one = torch.ones((), device=device)
        return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    a = torch.randn(n, n, device=device, dtype=TORCH_DTYPES[dtype])
    b = torch.randn(n, n, device=device, dtype=TORCH_DTYPES[dtype])
    return lambda: torch.mm(a, b)


@contextlib.contextmanager
def tf32(on: bool):
    """TF32 for float32 products on or off (hvdbench's training leaves it off: fp32 is fp32)."""
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = on
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


PROBE_N = 256  # the small product that sizes the real one


def fitted_size(seconds_at_probe: float, target: int, budget_s: float) -> int:
    """The n (a multiple of 64, at most `target`) whose product takes about a quarter of the budget,
    from one PROBE_N product's time (time grows as n^3): an emulated precision (fp16 on most CPUs runs
    ~100x slower than fp32) gets a smaller matrix instead of minutes per call."""
    if seconds_at_probe <= 0:
        return target
    n = PROBE_N * (budget_s / 4 / seconds_at_probe) ** (1 / 3)
    return int(max(64, min(target, n // 64 * 64)))


def free_bytes(device: torch.device, ranks_here: int = 1) -> int:
    """Memory one rank may take: the GPU's free memory, or the host's available memory shared by
    the `ranks_here` ranks on it."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    return psutil.virtual_memory().available // max(1, ranks_here)


def measure(opts: ComputeOptions, device: torch.device, device_name: str, barrier, ranks_here: int = 1) -> list[dict]:
    """This rank's figures: one dict per (op, dtype), the ComputeRow fields a rank knows."""
    kind = "cuda" if device.type == "cuda" else "cpu"
    n = opts.size or D.MATMUL_N[kind]
    nbytes = opts.copy_bytes or D.COPY_BYTES[kind]
    free = free_bytes(device, ranks_here)
    if 2 * nbytes > free:  # the source and its copy: refused in one line, not the allocator's traceback
        raise ConfigError(f"--copy-bytes {nbytes}: the copy needs {2 * nbytes / 1e9:.3g} GB (source and destination) "
                          f"and each rank here has {free / 1e9:.3g} GB free on {device_name}; give a smaller "
                          "--copy-bytes")
    found = []
    for dtype in opts.dtypes:
        barrier()
        why = unavailable(dtype, device)
        row = {"op": "matmul", "dtype": dtype, "size": n, "note": why,
               "peak_tflops": peak_tflops(device_name, dtype)}
        if not why:
            try:
                with tf32(dtype == "tf32"):
                    size = n
                    if not opts.size:  # the default size shrinks where one product would take long
                        probe, _ = time_op(matmul_op(dtype, PROBE_N, device), device, 0.0, 2)
                        size = fitted_size(probe, n, opts.budget_s)
                    seconds, iters = time_op(matmul_op(dtype, size, device), device, opts.budget_s, opts.max_iters)
                row.update(size=size, time_mean_s=seconds, iters=iters, tflops=2 * size ** 3 / seconds / 1e12)
            except (RuntimeError, TypeError) as e:  # a kernel this build or device lacks
                row["note"] = f"not timed: {str(e).splitlines()[0][:160]}"
        found.append(row)
        if device.type == "cuda":
            torch.cuda.empty_cache()
    barrier()
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=device).fill_(1.0)
    dst = torch.empty_like(src)
    seconds, iters = time_op(lambda: dst.copy_(src), device, opts.budget_s, opts.max_iters)
    found.append({"op": "copy", "dtype": "fp32", "size": src.numel() * 4, "time_mean_s": seconds, "iters": iters,
                  "gb_s": 2 * src.numel() * 4 / seconds / 1e9, "note": "bytes read + written"})
    return found


def main(opts: ComputeOptions, say=print) -> list[ComputeRow]:
    """Every rank measures its device; rank 0 prints the table and appends OUT/bench_compute.csv."""
    dist = TorchDist(threads=opts.threads, share=opts.thread_share)
    try:
        run_id, started = run_identity()
        run_id, started = dist.allgather_object((run_id, started))[0]
        mine = measure(opts, dist.device, dist.device_name, dist.sync, dist.local_size)
        gathered = dist.allgather_object((dist.rank, dist.hostname, dist.device_name, mine))
        hosts = ";".join(dict.fromkeys(h for _, h, _, _ in gathered))
        layout = {"world_size": dist.size, "nodes": dist.cross_size, "gpus_per_node": dist.local_size,
                  "layout": str(Layout(dist.cross_size, dist.local_size)),
                  "scale": "up" if dist.cross_size == 1 else "out", "hosts": hosts,
                  "controller": dist.controller, "launcher": detect_launcher()}
        rows = [bc.row(run_id, started, rank, host, device, figures, layout)
                for rank, host, device, measured in gathered for figures in measured]
        written = None
        if dist.rank == 0:
            for line in bc.render_table(rows).splitlines():
                say(line.rstrip())
            written = bc.write_outputs(rows, opts.out)
        dist.sync()
    finally:
        dist.shutdown()
    if written:
        for path in written:
            say(f"wrote {path}")
    return rows
