"""Benchmarks of `hvdbench train` against baselines measured in the same run, alternately.

    .venv/bin/python benchmarks/bench_train.py                    # all three
    .venv/bin/python benchmarks/bench_train.py --only bare --rounds 8 --steps 200
    .venv/bin/python benchmarks/bench_train.py --only bare --engine ddp --clock cpu --batch 8   # a shared machine
    .venv/bin/python benchmarks/bench_train.py --only bare --model llama31_8b --batch 2 --clock cpu

1. bare (np=1): hvdbench's throughput loop (`hvdbench.train.loop.Loop.throughput`: its Trainer, Horovod's
   DistributedOptimizer, synchronised timing) vs a bare PyTorch loop on the same model, batch and
   fixed synthetic batch, alternating in one process -> ratio of step rates (goal >= 0.97). Another
   model (--model, e.g. llama31_8b): the bare loop is its folder's own network, loss and optimizer
   (torch.py), with the same levers, and no engine, phase timing or loop around them.
2. horovod (np=2, `horovodrun -np 2`; --horovod-np): the same hvdbench loop vs Horovod's own synthetic-benchmark
   method re-implemented (a second model with DistributedOptimizer, one fixed batch, timeit over
   groups of batches, img/s = rank 0's mean x size), alternating in one job -> ratio (goal >= 1).
3. data (np=1): `hvdbench train` on real HDF5 data (the built-in digits) vs `--synthetic`, each
   its own process as users run it -> the gap in %.

Alternating inside one process/job means both sides see the same machine, the same moment and
the same process state; the order is swapped every other round (ABBA). Ratios are per round; the
median is reported. Prints a table and writes benchmarks/results/bench_train.json.

The GPU levers (issue 37) apply to both sides of comparison 1 alike: `--compile MODE` (hvdbench's
--compile; the bare loop compiles its model the same way), `--fused-optimizer` (torch's fused SGD
on both), `--channels-last` (images and weights NHWC on both: use `--engine ddp`, as Horovod refuses
channels-last weights). The warm-up (`--warmup`, at least the 3 steps a compile takes) covers the
compile on both sides. `--engine ddp` runs hvdbench's side without Horovod (a one-process group):

    python benchmarks/bench_train.py --only bare --engine ddp --flavor full --batch 256 --precision bf16 \
        --compile default --fused-optimizer --channels-last --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
HVDBENCH = str(BIN / "hvdbench")
HOROVODRUN = str(BIN / "horovodrun")


def env(threads: int) -> dict:
    e = dict(os.environ)
    e.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", TF_CPP_MIN_LOG_LEVEL="2",
             OMP_NUM_THREADS=str(threads), PATH=f"{BIN}{os.pathsep}{e.get('PATH', '')}")
    return e


def call(argv, threads: int) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True, env=env(threads))
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, argv))} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def bench_line(stdout: str) -> dict:
    for line in reversed(stdout.splitlines()):
        if "BENCH " in line:
            return json.loads(line.split("BENCH ", 1)[1])
    raise SystemExit(f"no BENCH line in:\n{stdout[-2000:]}")


# --- comparisons 1 and 2: one process (np=1) or one horovodrun job (np=2) ----------------------

def interleaved(args, np: int, baseline: str) -> dict:
    inner = [sys.executable, __file__, "interleaved", "--baseline", baseline, "--model", args.model,
             "--flavor", args.flavor, "--batch", args.batch,
             "--steps", args.steps, "--warmup", args.warmup, "--threads", args.threads, "--rounds", args.rounds,
             "--precision", args.precision, "--engine", args.engine, "--compile", args.compile, "--clock", args.clock,
             *(["--bare-nhwc-params"] if args.bare_nhwc_params else []),
             *(["--fused-optimizer"] if args.fused_optimizer else []),
             *(["--channels-last"] if args.channels_last else [])]
    argv = inner if baseline == "bare" else [HOROVODRUN, "-np", np, "-H", f"localhost:{np}", f"--{args.controller}", *inner]
    return bench_line(call(argv, args.threads).stdout)


def interleaved_main(a) -> None:
    """Runs inside the measured process(es): hvdbench's loop and the baseline, ABBA."""
    import numpy as np

    from hvdbench import frameworks
    from hvdbench.contracts import get_spec
    from hvdbench.events import EventLog
    from hvdbench.train import config
    from hvdbench.train.faults import Fault
    from hvdbench.train.loop import Loop
    from hvdbench.train.schedule import scaled_lr

    with tempfile.TemporaryDirectory() as tmp:
        cfg = config.resolve({"model": a.model, "flavor": a.flavor, "synthetic": True, "out": tmp,
                              "batch_per_gpu": a.batch, "steps": a.steps, "warmup_steps": a.warmup,
                              "threads": a.threads, "precision": a.precision, "engine": a.engine,
                              "compile": a.compile, "fused_optimizer": a.fused_optimizer,
                              "channels_last": a.channels_last})
    fw = frameworks.load("torch")
    dist = fw.init_dist(a.threads, engine=a.engine)
    spec = get_spec(a.model)
    flavor = spec.flavor(a.flavor)
    info = spec.synthetic_info(flavor)
    trainer = fw.Trainer(cfg, spec.framework_module("torch"), flavor, info, dist)
    synthetic = trainer.device_batch(spec.kinds[0].synthetic(a.batch, info, np.random.default_rng(0)))
    global_batch = a.batch * dist.size
    loop = Loop(cfg, dist, trainer, EventLog(None), Fault(dist.rank, dist.size, env={}),
                None, global_batch, scaled_lr(cfg, global_batch), synthetic=synthetic)
    # The same hyperparameters on both sides: the learning rate changes the values the CPU
    # multiplies (tiny values can be denormal and slow), so it must not differ.
    lr = scaled_lr(cfg, global_batch)
    if a.baseline == "horovod":
        baseline = _horovod_method(a, lr, cfg)
    elif a.model == "resnet50":
        baseline = _bare_loop(a, lr, cfg)
    else:
        baseline = _bare_model_loop(a, lr, cfg, spec, flavor, info, dist)

    hvdbench_side = lambda: loop.throughput().throughput  # noqa: E731
    if a.clock == "cpu" and a.baseline == "bare":
        hvdbench_side, baseline = _loop_per_cpu_second(loop, global_batch), _bare_per_cpu_second(baseline, a)
    ours, theirs = [], []
    for r in range(a.rounds):
        if r % 2 == 0:
            ours.append(hvdbench_side())
            theirs.append(baseline())
        else:
            theirs.append(baseline())
            ours.append(hvdbench_side())
    if dist.rank == 0:
        ratios = [o / t for o, t in zip(ours, theirs)]
        result = {"hvdbench": ours, "baseline": theirs, "ratios": ratios,
                  "median_ratio": float(np.median(ratios)), "size": dist.size}
        if trainer.compile_s is not None:
            result["compile_s"] = {"hvdbench": trainer.compile_s, "baseline": getattr(baseline, "compile_s", None)}
        if hasattr(baseline, "aggregate"):
            result["baseline_aggregate"] = baseline.aggregate
            result["median_ratio_aggregate"] = float(np.median([o / t for o, t in zip(ours, baseline.aggregate)]))
        print("BENCH " + json.dumps(result), flush=True)


def _loop_per_cpu_second(loop, global_batch: int):
    """--clock cpu: hvdbench's side in samples per CPU second of this process (every thread's:
    Horovod's and Gloo's too) over its timed window (the Loop's window_cpu_s), in place of its
    wall-clock rate: on a machine shared with other jobs the wall clock measures the neighbours
    (ratios from 0.25 to 1.9 in one run here), the CPU seconds what each side does per step."""
    def rate() -> float:
        m = loop.throughput()
        return m.steps * global_batch / m.window_cpu_s
    return rate


def _bare_per_cpu_second(bare, a):
    """--clock cpu: a bare loop's rate() (_timed, which records its `cpu_s`) in samples per CPU
    second of its timed steps, as _loop_per_cpu_second counts hvdbench's; its compile_s passed on."""
    def rate() -> float:
        bare()
        rate.compile_s = bare.compile_s
        return a.steps * a.batch / bare.cpu_s

    rate.compile_s = None
    return rate


def _model_and_batch(flavor: str, batch: int, nhwc_params: bool = False):
    """The model and one fixed batch on this rank's device. On a GPU the images are channels-last
    (NHWC, what tensor cores want) and, as in hvdbench's trainer, the parameters keep the default
    layout (Horovod refuses non-contiguous tensors); `nhwc_params` converts them too, which a bare
    loop without Horovod may do. On a CPU everything stays NCHW unless `nhwc_params`
    (--channels-last: images and weights NHWC on any device)."""
    import numpy as np
    import torch

    from hvdbench.contracts import get_spec
    from hvdbench.frameworks.torch.data import DeviceBatches
    from hvdbench.models.resnet50 import torch as resnet

    spec = get_spec("resnet50")
    cfg = spec.flavor(flavor)
    torch.manual_seed(0)
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    model = resnet.build(cfg).to(device)
    if nhwc_params:
        model = model.to(memory_format=torch.channels_last)
    fixed = DeviceBatches(device, resnet.on_device, channels_last=nhwc_params)(
        spec.kinds[0].synthetic(batch, spec.synthetic_info(cfg), np.random.default_rng(0)))
    return model, fixed


def _plain_step(model, opt, x, y, precision: str):
    """One SGD step as plain PyTorch code writes it, under autocast as the trainer applies it
    (the trainer's precision names; fp32: no autocast)."""
    import contextlib

    import torch
    import torch.nn.functional as F

    from hvdbench.frameworks.torch.train import DTYPES

    autocast = (torch.autocast(x.device.type, dtype=DTYPES[precision]) if precision in DTYPES
                else contextlib.nullcontext())

    def step():
        opt.zero_grad()
        with autocast:
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    return step


def _synchronize() -> None:
    """GPU work is queued: wait for it before reading a clock (a no-op on the CPU)."""
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _bare_loop(a, lr, cfg):
    """The plainest PyTorch training loop on its own copy of the model: fixed batch, SGD."""
    import torch

    model, batch = _model_and_batch(a.flavor, a.batch, nhwc_params=a.bare_nhwc_params or a.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay,
                          **({"fused": True} if a.fused_optimizer else {}))
    model.train()
    if a.compile != "off":
        model.compile(mode=a.compile)
    return _timed(a, _plain_step(model, opt, batch["images"], batch["labels"], a.precision), samples=a.batch)


def _timed(a, step, samples: int):
    """A bare loop's rate(): `a.warmup` steps (its compile's seconds counted as the trainer counts its
    own, from dynamo's callbacks), then `a.steps` timed ones; samples per wall second, and its CPU
    seconds in them (`cpu_s`, for --clock cpu)."""
    import contextlib

    from hvdbench.frameworks.torch.train import CompileClock

    clock = CompileClock() if a.compile != "off" else contextlib.nullcontext()

    def rate() -> float:
        with clock:
            for _ in range(a.warmup):
                step()
        rate.compile_s = getattr(clock, "seconds", None)
        _synchronize()
        t0, cpu0 = time.perf_counter(), time.process_time()
        for _ in range(a.steps):
            step()
        _synchronize()
        rate.cpu_s = time.process_time() - cpu0
        return a.steps * samples / (time.perf_counter() - t0)

    rate.compile_s = None
    return rate


def _bare_model_loop(a, lr, cfg, spec, flavor, info, dist):
    """Another model's plainest loop (--model): its folder's network, loss, parameter groups and
    optimizer (torch.py's build, loss_and_stats, param_groups, make_optimizer: the model's own code,
    as hvdbench's trainer calls it), on its own copy, one fixed batch, without an engine, the
    trainer's phase timing or its loop; the same levers (--compile of its compile_units one by one,
    or the whole step; --fused-optimizer; the model's activation checkpointing and chunked loss,
    which cfg carries)."""
    import contextlib

    import numpy as np
    import torch

    from hvdbench.frameworks.torch import train
    from hvdbench.frameworks.torch.data import DeviceBatches
    from hvdbench.frameworks.torch.hooks import TorchHooks

    hooks = TorchHooks.of(spec.framework_module("torch"))
    torch.manual_seed(0)
    model = hooks.build(flavor, **info, **train.run_keywords(hooks.build, dist, cfg)).to(dist.device)
    opt = hooks.make_optimizer(hooks.param_groups(model, cfg), cfg)
    for group in opt.param_groups:
        group["lr"] = lr
    batch = DeviceBatches(dist.device, hooks.on_device)(
        spec.kinds[0].synthetic(a.batch, info, np.random.default_rng(0)))
    forward = hooks.loss_and_stats
    if a.compile != "off":
        units = hooks.compile_units
        if units is None:
            forward = torch.compile(forward, mode=a.compile)
        for unit in units(model) if units else ():
            unit.forward = torch.compile(unit.forward, mode=a.compile)
    autocast = (torch.autocast(dist.device.type, dtype=train.DTYPES[a.precision]) if a.precision in train.DTYPES
                else contextlib.nullcontext())
    model.train()

    def step():
        opt.zero_grad()
        with autocast:
            loss, _ = forward(model, batch)
        loss.backward()
        opt.step()

    return _timed(a, step, samples=a.batch)


def _horovod_method(a, lr, cfg, per_iter: int = 10):
    """Horovod's pytorch_synthetic_benchmark.py: DistributedOptimizer, broadcast, one fixed batch,
    timeit over `per_iter` batches, img/s = mean over iterations on rank 0, x size for the total
    (its "Total img/sec on N GPU(s)" line)."""
    import timeit

    import horovod.torch as hvd
    import numpy as np
    import torch

    model, batch = _model_and_batch(a.flavor, a.batch)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
    # Its own names, so its allreduces never meet hvdbench's model's in Horovod's caches.
    named = [(f"horovod_method.{n}", p) for n, p in model.named_parameters()]
    opt = hvd.DistributedOptimizer(opt, named_parameters=named)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    model.train()
    step = _plain_step(model, opt, batch["images"], batch["labels"], a.precision)

    def timed_batches() -> None:  # on a GPU, a timed group ends when its queued work has run
        for _ in range(per_iter):
            step()
        _synchronize()

    def rate() -> float:
        timeit.timeit(step, number=a.warmup)
        _synchronize()
        iters = max(1, a.steps // per_iter)
        times = [timeit.timeit(timed_batches, number=1) for _ in range(iters)]
        # Also the same samples over the total time: the mean of per-iteration rates is higher
        # whenever iteration times vary (a busy machine), whatever the loop.
        rate.aggregate.append(a.batch * per_iter * iters * hvd.size() / sum(times))
        return float(np.mean([a.batch * per_iter / t for t in times])) * hvd.size()

    rate.aggregate = []
    return rate


# --- comparison 3: real data vs synthetic, as users run it -------------------------------------

def hvdbench_rate(args, tmp: Path, name: str, data: str | None = None) -> float:
    out = tmp / name
    call([HVDBENCH, "train", "resnet50", "--flavor", args.flavor, "--batch-per-gpu", args.batch,
          "--steps", args.steps, "--warmup-steps", args.warmup, "--threads", args.threads, "--out", out,
          *(["--data", data] if data else ["--synthetic"])], args.threads)
    return json.loads((out / "result.json").read_text())["throughput"]


def data_gap(args, tmp: Path) -> dict:
    digits = tmp / "digits"
    call([HVDBENCH, "prepare", "digits", "--out", digits, "--size", "16"], args.threads)
    real, synthetic = [], []
    for r in range(args.rounds):
        first, second = (real, synthetic) if r % 2 == 0 else (synthetic, real)
        for side in (first, second):
            side.append(hvdbench_rate(args, tmp, f"{'real' if side is real else 'syn'}{r}",
                                      data=str(digits) if side is real else None))
        print(f"  data round {r + 1}: real {real[-1]:,.1f}  synthetic {synthetic[-1]:,.1f}", flush=True)
    ratios = [a / b for a, b in zip(real, synthetic)]
    return {"real": real, "synthetic": synthetic, "ratios": ratios,
            "gap_percent": 100 * (1 - statistics.median(ratios))}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description="hvdbench train benchmarks")
    p.add_argument("--only", choices=["bare", "horovod", "data"], action="append")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--model", default="resnet50",
                   help="Comparison 1's model (another than resnet50: its folder's own loss and optimizer in the "
                        "bare loop, e.g. llama31_8b).")
    p.add_argument("--flavor", default="debug")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="fp32")
    p.add_argument("--bare-nhwc-params", action="store_true",
                   help="GPU: the bare loop also keeps its parameters channels-last (hvdbench cannot: Horovod "
                        "needs contiguous tensors), to measure what that costs.")
    p.add_argument("--engine", choices=["horovod", "ddp"], default="horovod",
                   help="hvdbench's engine in comparison 1 (ddp: no Horovod needed).")
    p.add_argument("--compile", choices=["off", "default", "max-autotune", "reduce-overhead"], default="off",
                   help="torch.compile both sides of comparison 1 in this mode.")
    p.add_argument("--fused-optimizer", action="store_true", help="torch's fused SGD on both sides of comparison 1.")
    p.add_argument("--channels-last", action="store_true",
                   help="Images and weights channels-last on both sides of comparison 1 (with --engine ddp).")
    p.add_argument("--controller", choices=["gloo", "mpi"], default="gloo")
    p.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                   help="Comparison 1's rates per wall-clock second of the timed steps (wall), or per CPU second "
                        "of the process in them (cpu: a machine shared with other jobs; bare loop only).")
    p.add_argument("--horovod-np", type=int, default=2, help="Ranks of comparison 2 (1 on a one-GPU machine).")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "bench_train.json")
    args = p.parse_args(argv)
    only = args.only or ["bare", "horovod", "data"]
    results = {"settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
               "cpu_count": os.cpu_count(), "load_avg_start": os.getloadavg()}
    if "bare" in only:
        results["bare"] = interleaved(args, np=1, baseline="bare")
        _show("1. hvdbench np=1 vs bare PyTorch loop, one process (samples/s)", results["bare"], "bare")
    if "horovod" in only:
        results["horovod"] = interleaved(args, np=args.horovod_np, baseline="horovod")
        _show(f"2. hvdbench np={args.horovod_np} vs Horovod's synthetic-benchmark method, one {args.controller} job "
              "(samples/s)",
              results["horovod"], "horovod's method")
    if "data" in only:
        print("3. hvdbench train np=1 on real HDF5 digits vs --synthetic (samples/s)")
        with tempfile.TemporaryDirectory() as tmp:
            results["data"] = data_gap(args, Path(tmp))
    results["load_avg_end"] = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print("\nsummary (median over rounds):")
    if "bare" in results:
        print(f"  hvdbench / bare PyTorch, np=1:     {results['bare']['median_ratio']:.3f}  (goal >= 0.97)")
    if "horovod" in results:
        print(f"  hvdbench / Horovod's method, np={args.horovod_np}: {results['horovod']['median_ratio']:.3f}  (goal >= 1); "
              f"over the same total time: {results['horovod']['median_ratio_aggregate']:.3f}")
    if "data" in results:
        print(f"  real HDF5 vs synthetic gap, np=1:  {results['data']['gap_percent']:.1f} %")
    print(f"  load average {results['load_avg_start'][0]:.1f} -> {results['load_avg_end'][0]:.1f}; "
          f"written: {args.out}")


def _show(title: str, r: dict, label: str) -> None:
    print(title)
    for i, (a, b, q) in enumerate(zip(r["hvdbench"], r["baseline"], r["ratios"])):
        print(f"  round {i + 1}: hvdbench {a:,.1f}  {label} {b:,.1f}  ratio {q:.3f}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "interleaved":
        q = argparse.ArgumentParser()
        q.add_argument("mode")
        q.add_argument("--baseline", choices=["bare", "horovod"], required=True)
        for name, default in (("--flavor", "debug"), ("--batch", 32), ("--steps", 100), ("--warmup", 10),
                              ("--threads", 1), ("--rounds", 6), ("--precision", "fp32"), ("--engine", "horovod"),
                              ("--compile", "off"), ("--clock", "wall"), ("--model", "resnet50")):
            q.add_argument(name, type=type(default), default=default)
        for flag in ("--bare-nhwc-params", "--fused-optimizer", "--channels-last"):
            q.add_argument(flag, action="store_true")
        interleaved_main(q.parse_args())
    else:
        main()
