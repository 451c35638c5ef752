"""Interconnect and storage benchmarks: every figure is printed beside a baseline measured in the same run.

    .venv/bin/python benchmarks/bench_allreduce_io.py                 # about 10 minutes on 2 busy cores
    .venv/bin/python benchmarks/bench_allreduce_io.py --max-bytes 16M --skip-io
    hvdbench cluster up --name bench --nodes 2 --slots 1 --hostfile /tmp/bench.hosts
    .venv/bin/python benchmarks/bench_allreduce_io.py --skip-io --hostfile /tmp/bench.hosts \\
        --launcher-arg=--network-interfaces --launcher-arg=bench-br     # across 2 emulated nodes

1. Allreduce: `horovodrun -np 2 --mpi hvdbench bench allreduce` from 1 MiB to --max-bytes, fp32 and
   fp16. Baseline: raw MPI (mpi4py Allreduce on numpy buffers) timed by the same command on the same
   ranks right after Horovod. Printed: Horovod busbw / MPI busbw at 1, 16 and 256 MiB (busbw =
   algbw x 2(n-1)/n, nccl-tests' definition). fp16's MPI baseline sums with a Python user op.
   Without --hostfile the two ranks share this machine (loopback / shared memory); with it they go
   where the hostfile says (e.g. one per node of `hvdbench cluster up`).
2. Storage: `hvdbench bench io` on `hvdbench prepare digits --size 224` (1,437 real 224 px training
   images, ~216 MB), alone and under horovodrun -np 2. Baseline: a plain sequential h5py read of the
   same shards in the same run. Printed per pass: samples/s of the training reader (batches as
   delivered) and of the reader with CPU decoding to float NCHW, each over h5py's. As root the
   page cache is dropped before every pass (cold reads from storage); otherwise the figures are
   warm (memory) and say so.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
sys.path.insert(0, str(ROOT))

from hvdbench.bench.allreduce_report import CSV_NAME as AR_CSV, AllreduceRow  # noqa: E402
from hvdbench.bench.io import CSV_NAME as IO_CSV, IoRow  # noqa: E402
from hvdbench.results.records.store import read_rows  # noqa: E402

MIB = 1 << 20


def env() -> dict:
    e = dict(os.environ)
    e.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1",
             PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="2", PATH=f"{BIN}{os.pathsep}{e.get('PATH', '')}")
    return e


def launch(args, *command) -> list[str]:
    where = ["--hostfile", args.hostfile] if args.hostfile else ["-H", "localhost:2"]
    return [str(BIN / "horovodrun"), "-np", "2", *where, *args.launcher_arg, "--mpi",
            str(BIN / "hvdbench"), *map(str, command)]


def run(argv: list) -> None:
    argv = [str(a) for a in argv]
    print("$", " ".join(argv), flush=True)
    proc = subprocess.run(argv, env=env(), capture_output=True, text=True, errors="replace")
    if proc.returncode != 0:
        sys.exit(f"failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


def allreduce(args, work: Path) -> None:
    out = work / "allreduce"
    run(launch(args, "bench", "allreduce", "--min-bytes", "1M", "--max-bytes", args.max_bytes, "--out", out))
    rows = read_rows(out / AR_CSV, AllreduceRow)
    r0 = rows[0]
    print(f"\nallreduce, {r0.world_size} ranks, layout {r0.layout} on {r0.hosts} ({r0.controller} controller)")
    print(f"{'dtype':<6}{'size':>9}{'horovod busbw GB/s':>20}{'MPI busbw GB/s':>16}{'horovod/MPI':>13}")
    for dtype in ("fp32", "fp16"):
        for size in (MIB, 16 * MIB, 256 * MIB):
            h = next((r for r in rows if (r.impl, r.dtype, r.bytes) == ("horovod", dtype, size)), None)
            m = next((r for r in rows if (r.impl, r.dtype, r.bytes) == ("mpi", dtype, size)), None)
            if h and m:
                print(f"{dtype:<6}{size // MIB:>6} MiB{h.busbw_gb_s:>20.3f}{m.busbw_gb_s:>16.3f}"
                      f"{h.busbw_gb_s / m.busbw_gb_s:>13.2f}")


def storage(args, work: Path) -> None:
    data = work / "digits224"
    run([str(BIN / "hvdbench"), "prepare", "digits", "--size", "224", "--out", data])
    cold = ["--drop-caches"] if os.geteuid() == 0 else []
    for label, argv in (("alone", [str(BIN / "hvdbench")]), ("2 ranks", launch(args))):
        out = work / f"io-{label.replace(' ', '')}"
        run([*argv, "bench", "io", "--data", data, "--passes", str(args.passes), *cold, "--out", out])
        rows = read_rows(out / IO_CSV, IoRow)
        state = "caches dropped before each pass" if rows[0].caches_dropped else "page cache warm (not root)"
        print(f"\nio {label} ({rows[0].layout}), {rows[0].dataset_samples} samples, "
              f"{rows[0].dataset_bytes / 1e6:.0f} MB, {state}")
        for r in rows:
            if r.impl != "h5py":
                raw = next(x for x in rows if x.impl == "h5py" and x.pass_index == r.pass_index)
                print(f"  pass {r.pass_index}: {r.impl:<13} {r.samples_s:>8,.0f} samples/s ({r.mb_s:,.0f} MB/s), "
                      f"h5py {raw.samples_s:,.0f} samples/s ({raw.mb_s:,.0f} MB/s): ratio {r.vs_h5py:.2f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--max-bytes", default="256M", help="largest allreduce message (default 256M)")
    p.add_argument("--hostfile", help="run the two ranks where this hostfile says (e.g. an emulated cluster)")
    p.add_argument("--launcher-arg", action="append", default=[], help="extra horovodrun argument (repeatable)")
    p.add_argument("--passes", type=int, default=2, help="io passes (default 2)")
    p.add_argument("--skip-io", action="store_true")
    p.add_argument("--skip-allreduce", action="store_true")
    p.add_argument("--workdir", help="keep outputs here (default: a temporary folder)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="hvdbench-bench-") as tmp:
        work = Path(args.workdir or tmp)
        if not args.skip_allreduce:
            allreduce(args, work)
        if not args.skip_io:
            storage(args, work)


if __name__ == "__main__":
    main()
