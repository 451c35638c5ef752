"""What every Horovod process runs: config -> framework trainer -> timed loop -> events -> RunResult.

    horovodrun -np 2 -H localhost:2 --gloo hvdbench train resnet50 --flavor debug --data data/digits --out runs/a
    mpirun -np 2 hvdbench train resnet50 --synthetic --steps 100 --warmup-steps 10 --out runs/b
    srun hvdbench train bert --flavor base --data data/bert_packed --out runs/c

The loop is framework-neutral; `hvdbench.frameworks.<fw>.train` supplies the Trainer (model,
DistributedOptimizer/DistributedGradientTape, evaluation) and `Dist` (Horovod collectives).

Two modes:
- throughput (`--steps N --warmup-steps W`, on real data or `--synthetic`, which implies it): W
  untimed steps, then N steps between two synchronised points; global samples/s = N x global
  batch / the slowest rank's elapsed time (not rank 0's rate x size).
- time-to-accuracy (`--data` without `--steps`): train, evaluate on the whole validation split
  every `eval_every` epochs (or samples), stop at the target (success) or at max_epochs (aborted).
  time-to-train = run_start -> run_stop, as in MLPerf.

Failures: an error the ranks agree on (bad dataset on any rank) is printed once by rank 0; any
other exception is printed once by the rank that raised it, which then exits at once (no Horovod
shutdown handshake) so that horovodrun/mpirun/srun tear the job down in seconds.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import platform
import sys
import time
import traceback
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from mlperf_logging.mllog import constants as C

from hvdbench import config as config_mod
from hvdbench.errors import ConfigError, DatasetError, HvdbenchError
from hvdbench.events import EventLog
from hvdbench.results.schema import RunResult, atomic_write_text, write_result

RANK_VARIABLES = ("HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID")


def launcher_rank(env=os.environ) -> int:
    """This process's rank as the launcher announced it (before Horovod is up); 0 when alone."""
    for name in RANK_VARIABLES:
        if env.get(name, "").isdigit():
            return int(env[name])
    return 0


def detect_launcher(env=os.environ) -> str:
    """Who started us: HVDBENCH_LAUNCHER when a sweep says so; else horovodrun (its Gloo mode sets
    HOROVOD_RANK), mpirun (Open MPI / PMIx / PMI rank variables; `horovodrun --mpi` runs mpirun
    and looks the same), srun (a job step's SLURM_PROCID), or nothing."""
    if env.get("HVDBENCH_LAUNCHER"):
        return env["HVDBENCH_LAUNCHER"]
    if "HOROVOD_RANK" in env or "HOROVOD_GLOO_RENDEZVOUS_ADDR" in env:
        return "horovodrun"
    if "OMPI_COMM_WORLD_RANK" in env or "PMIX_RANK" in env or "PMI_RANK" in env:
        return "mpirun"
    if "SLURM_PROCID" in env and "SLURM_STEP_ID" in env:
        return "srun"
    return "single"


def scaled_lr(cfg, global_batch: int) -> float:
    ratio = global_batch / cfg.lr_base_batch
    factor = {"linear": ratio, "sqrt": math.sqrt(ratio), "none": 1.0}[cfg.lr_scaling]
    return cfg.lr * factor


def lr_at(step: int, peak: float, warmup_steps: int, total_steps: int, end_lr: float, power: float) -> float:
    """Linear warm-up to `peak` over `warmup_steps`, then polynomial decay to `end_lr` at the last step."""
    if step < warmup_steps:
        return peak * (step + 1) / warmup_steps
    if total_steps <= warmup_steps:
        return peak
    done = min(1.0, (step - warmup_steps) / (total_steps - warmup_steps))
    return end_lr + (peak - end_lr) * (1.0 - done) ** power


class Fault:
    """HVDBENCH_INJECT_FAULT=crash|hang on rank HVDBENCH_INJECT_FAULT_RANK (default: the last) at
    training step HVDBENCH_INJECT_FAULT_STEP (default 2; steps count from 0, warm-up included)."""

    def __init__(self, rank: int, size: int, env=os.environ):
        self.kind = env.get("HVDBENCH_INJECT_FAULT", "")
        if self.kind not in ("", "crash", "hang"):
            raise ConfigError(f"HVDBENCH_INJECT_FAULT={self.kind!r}: use crash or hang")
        try:
            target_rank = int(env.get("HVDBENCH_INJECT_FAULT_RANK", size - 1))
            self.step = int(env.get("HVDBENCH_INJECT_FAULT_STEP", 2))
        except ValueError:
            raise ConfigError("HVDBENCH_INJECT_FAULT_RANK and _STEP must be integers") from None
        self.armed = bool(self.kind) and target_rank == rank

    def check(self, step: int) -> None:
        if self.armed and step == self.step:
            if self.kind == "crash":
                raise RuntimeError("injected fault")
            while True:  # "hang": what a deadlocked or stuck rank looks like to the launcher
                time.sleep(3600)


class AgreedError(HvdbenchError):
    """An error every rank knows about (after an allgather); only rank 0 prints it."""


@dataclass
class Measures:
    status: str = "success"
    steps: int = 0
    warmup_steps: int = 0
    throughput: float | None = None
    step_time_mean_s: float | None = None
    step_time_std_s: float | None = None
    final_metric: float | None = None
    epochs: float | None = None
    epochs_to_target: float | None = None
    time_per_epoch_s: float | None = None
    time_to_train_s: float | None = None
    evals: list = field(default_factory=list)


# --- entry point -----------------------------------------------------------------------------

def main(cfg: config_mod.TrainConfig) -> None:
    """Run the worker and exit the process: 0 for success or aborted, 1 for a failure."""
    state = {"rank": launcher_rank(), "host": platform.node(), "t0": time.time()}
    if not cfg.run_id:
        cfg.run_id = new_run_id()  # rank 0's is the one recorded
    try:
        run(cfg, state)
    except AgreedError as e:
        if state["rank"] == 0:
            _report_failure(cfg, state, str(e))
        _exit(1)
    except BaseException as e:  # noqa: BLE001 - every failure ends this rank cleanly and loudly
        if isinstance(e, KeyboardInterrupt):
            _exit(130)
        if type(e).__name__ == "HorovodInternalError":
            message = "stopped because another rank failed (see its error above)"
        elif isinstance(e, HvdbenchError):
            message = str(e)
        else:
            tb = traceback.extract_tb(e.__traceback__)[-1]
            message = f"{type(e).__name__}: {_first_line(e)} (at {Path(tb.filename).name}:{tb.lineno})"
            if os.environ.get("HVDBENCH_DEBUG"):
                traceback.print_exc()
        _report_failure(cfg, state, f"rank {state['rank']} on {state['host']}: {message}")
        _exit(1)
    _exit(0)


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _report_failure(cfg, state, message: str) -> None:
    print(f"Error: {message}", file=sys.stderr, flush=True)
    if state["rank"] == 0 and cfg.out and not _finished(Path(cfg.out)):
        with contextlib.suppress(Exception):  # best effort: the error line above is what matters
            record = _identity(cfg, state)
            record.status, record.error = "failed", message
            record.wall_s = time.time() - state["t0"]
            write_result(Path(cfg.out) / "result.json", record, cfg.to_dict())


def _exit(code: int) -> None:
    """Leave now. A normal interpreter exit would run Horovod's shutdown handshake, which waits for
    peers that may be dead or stuck; the launcher needs this rank gone to end the job."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


# --- the run ---------------------------------------------------------------------------------

def run(cfg: config_mod.TrainConfig, state: dict) -> None:
    from hvdbench import frameworks
    from hvdbench.models import get_spec

    spec = get_spec(cfg.model)
    flavor_cfg = spec.flavor(cfg.flavor)
    if detect_launcher() != "single":
        # A rank started over ssh (horovodrun's Gloo controller) is not signalled when its launcher
        # is ended: ask the kernel to end it with its parent. Not for a lone process: nohup works.
        from hvdbench.launchers.runner import die_with_parent
        die_with_parent()
    fw = frameworks.load(cfg.framework)
    dist = fw.init_dist(cfg.threads)
    state["rank"] = dist.rank
    fault = Fault(dist.rank, dist.size)
    ds = _preflight(cfg, spec, dist)
    out = Path(cfg.out)
    if dist.rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        config_mod.save_yaml(out / "config.yaml", cfg)
    events = EventLog(out / "mllog.txt" if dist.rank == 0 else None)
    events.start(C.INIT_START)

    kind = ds.kind if ds else spec.data_kinds[0]
    # The kind travels with the sizes: on GPUs the torch trainer feeds images channels-last.
    data_info = {"kind": kind, **(ds.data_info if ds else {})}
    trainer = fw.Trainer(cfg, flavor_cfg, data_info, dist)
    trainer.compile(_example_batch(ds))
    hosts = _unique(dist.allgather_object(dist.hostname))
    devices = _unique(dist.allgather_object(dist.device_name))
    world = dist.size
    global_batch = cfg.batch_per_gpu * cfg.accum_steps * world
    peak_lr = scaled_lr(cfg, global_batch)
    layout = f"{dist.cross_size}x{dist.local_size}"
    _say(dist, f"{cfg.model}/{cfg.flavor} {cfg.framework} {cfg.precision}: {world} rank(s) ({layout}, "
               f"{dist.controller}), {trainer.num_parameters():,} parameters, global batch {global_batch}, "
               f"peak lr {peak_lr:.4g}, {kind} data {'synthetic' if cfg.synthetic else cfg.data}")

    _log_run_facts(events, cfg, dist, layout, devices[0], global_batch, peak_lr)
    record = _identity(cfg, state)
    record.world_size, record.global_batch = world, global_batch
    record.nodes, record.gpus_per_node, record.layout = dist.cross_size, dist.local_size, layout
    record.scale = "up" if dist.cross_size == 1 else "out"
    record.controller = dist.controller
    record.parameters = trainer.num_parameters()
    record.hosts, record.devices = ";".join(hosts), ";".join(devices)
    record.versions = ";".join(f"{k}={v}" for k, v in
                               {"python": platform.python_version(), **dist.versions}.items())
    loop = Loop(cfg, dist, trainer, events, fault, ds, global_batch, peak_lr)
    measures = loop.throughput() if cfg.mode == "throughput" else loop.time_to_accuracy(spec)

    digests = dist.allgather_object(trainer.param_digest())
    if dist.rank == 0:
        for name in ("status", "steps", "warmup_steps", "throughput", "step_time_mean_s",
                     "step_time_std_s", "final_metric", "epochs", "epochs_to_target",
                     "time_per_epoch_s", "time_to_train_s"):
            setattr(record, name, getattr(measures, name))
        if measures.throughput is not None:
            record.throughput_per_gpu = measures.throughput / world
        record.metric_name = spec.metric_name
        record.target = cfg.target if cfg.mode == "time_to_accuracy" else None
        record.wall_s = time.time() - state["t0"]
        # What every rank ended with: equal digests mean Horovod kept the replicas identical.
        checks = {"param_digests": digests, "params_identical": len(set(digests)) == 1,
                  "evals": measures.evals}
        atomic_write_text(out / "checks.json", _json(checks))
        write_result(out / "result.json", record, cfg.to_dict())
        _summarise(dist, record, out, checks["params_identical"])
    events.close()
    dist.shutdown()


def _log_run_facts(events, cfg, dist, layout, device, global_batch, peak_lr) -> None:
    """The MLPerf header of the event log: submission, scale and hyperparameters."""
    events.submission(cfg.model, cfg.submission.org, cfg.submission.platform or f"{layout} {device}",
                      cfg.submission.division, cfg.submission.status)
    events.event(C.CACHE_CLEAR, False)  # hvdbench does not drop the page cache
    # What MLPerf's result summarizer reads for the system's scale.
    events.event("number_of_nodes", dist.cross_size)
    events.event("accelerators_per_node", dist.local_size)
    events.hyperparameters({
        C.SEED: cfg.seed, C.GLOBAL_BATCH_SIZE: global_batch,
        C.GRADIENT_ACCUMULATION_STEPS: cfg.accum_steps, C.OPT_NAME: cfg.optimizer,
        C.OPT_BASE_LR: peak_lr, C.OPT_LR_WARMUP_EPOCHS: cfg.warmup_epochs,
        "opt_end_learning_rate": cfg.end_lr, "opt_learning_rate_decay_poly_power": cfg.decay_power,
        "opt_weight_decay": cfg.weight_decay, "opt_momentum": cfg.momentum,
    })


def _preflight(cfg, spec, dist):
    """Open the dataset on every rank and check the output directory on rank 0, then agree on
    the outcome: a dataset missing on one node fails the whole job at once, with one message
    naming the rank and host. Returns the dataset (None for synthetic data)."""
    from hvdbench.data.readers import open_dataset

    ds, error = None, None
    try:
        if dist.rank == 0:
            _check_out(Path(cfg.out))
        if not cfg.synthetic:
            ds = open_dataset(cfg.data)
            if ds.kind not in spec.data_kinds:
                raise DatasetError(f"{cfg.data}: a {ds.kind!r} dataset; {spec.name} trains on "
                                   f"{', '.join(spec.data_kinds)}")
    except HvdbenchError as e:
        error = f"rank {dist.rank} on {dist.hostname}: {e}"
    errors = [e for e in dist.allgather_object(error) if e]
    if errors:
        more = f" (and {len(errors) - 1} more rank(s))" if len(errors) > 1 else ""
        raise AgreedError(errors[0] + more)
    return ds


def _finished(out: Path) -> str | None:
    """The status of a finished run recorded in `out` (success/aborted), else None."""
    import json

    try:
        status = json.loads((out / "result.json").read_text()).get("status")
    except (OSError, ValueError, AttributeError):
        return None
    return status if status in ("success", "aborted") else None


def _check_out(out: Path) -> None:
    """A finished run's record is never overwritten (a failed one may be, by its rerun)."""
    status = _finished(out)
    if status:
        raise ConfigError(f"{out / 'result.json'} holds a finished run ({status}); choose another --out")
    with contextlib.suppress(FileNotFoundError):  # the log of the failed attempt being rerun
        (out / "mllog.txt").unlink()


class Loop:
    """The framework-neutral training loop and its measurements."""

    def __init__(self, cfg, dist, trainer, events, fault, ds, global_batch, peak_lr):
        self.cfg, self.dist, self.trainer, self.events, self.fault = cfg, dist, trainer, events, fault
        self.ds, self.global_batch, self.peak_lr = ds, global_batch, peak_lr

    def _train_loader(self):
        cfg, dist = self.cfg, self.dist
        loader = self.ds.loader("train", cfg.batch_per_gpu, rank=dist.rank, size=dist.size,
                                seed=cfg.seed, shuffle=True, drop_last=True, prefetch=cfg.prefetch)
        steps_per_epoch = len(loader) // cfg.accum_steps
        if steps_per_epoch == 0:
            raise DatasetError(f"{cfg.data}: {self.ds.num_samples('train')} training samples are fewer "
                               f"than one global batch of {self.global_batch}")
        return loader, steps_per_epoch

    def _step_batches(self, loader, steps_per_epoch):
        """(epoch, micro-batches on the device) for every optimizer step, epoch after epoch."""
        accum = self.cfg.accum_steps
        for epoch in itertools.count():
            loader.set_epoch(epoch)
            batches = iter(loader)
            try:
                for _ in range(steps_per_epoch):
                    yield epoch, [self.trainer.device_batch(next(batches)) for _ in range(accum)]
            finally:
                batches.close()

    def _step(self, step: int, micro_batches, lr: float) -> None:
        self.fault.check(step)
        self.trainer.set_lr(lr)
        self.trainer.train_step(micro_batches)

    # --- throughput ------------------------------------------------------------------------

    def throughput(self) -> Measures:
        cfg, dist, events = self.cfg, self.dist, self.events
        if cfg.synthetic:
            fixed = [self.trainer.synthetic_batch()] * cfg.accum_steps
            batches = ((0, fixed) for _ in itertools.count())
            events.event(C.TRAIN_SAMPLES, 0)
        else:
            loader, steps_per_epoch = self._train_loader()
            batches = self._step_batches(loader, steps_per_epoch)
            events.event(C.TRAIN_SAMPLES, self.ds.num_samples("train"))
        warmup, steps = cfg.warmup_steps, cfg.steps
        dist.sync()
        events.end(C.INIT_STOP)
        events.start(C.RUN_START)
        times = []
        for i in range(warmup + steps):
            if i == warmup:  # the timed window opens at a point every rank has reached
                dist.sync()
                t0 = last = time.perf_counter()
            _, micro = next(batches)
            self._step(i, micro, lr_at(i, self.peak_lr, warmup, warmup + steps, self.peak_lr, 1.0))
            if i >= warmup:
                now = time.perf_counter()
                times.append(now - last)
                last = now
        dist.sync()
        elapsed = dist.allreduce_max(time.perf_counter() - t0)
        with contextlib.suppress(AttributeError):
            batches.close()
        m = Measures(steps=steps, warmup_steps=warmup, throughput=steps * self.global_batch / elapsed)
        m.step_time_mean_s = sum(times) / len(times)
        m.step_time_std_s = _std(times)
        events.event("tracked_stats", {"throughput": m.throughput}, metadata={"step": warmup + steps})
        events.end(C.RUN_STOP, metadata={"status": "success"})
        _say(dist, f"throughput: {m.throughput:,.1f} samples/s ({m.throughput / dist.size:,.1f} per rank), "
                   f"step {1e3 * m.step_time_mean_s:.1f} ± {1e3 * m.step_time_std_s:.1f} ms "
                   f"over {steps} steps after {warmup} warm-up")
        return m

    # --- time to accuracy -------------------------------------------------------------------

    def time_to_accuracy(self, spec) -> Measures:
        cfg, dist, events, ds = self.cfg, self.dist, self.events, self.ds
        loader, steps_per_epoch = self._train_loader()
        val = ds.loader("val", cfg.eval_batch_per_gpu, rank=dist.rank, size=dist.size, seed=cfg.seed,
                        shuffle=False, drop_last=False, prefetch=cfg.prefetch)
        by_epoch = cfg.eval_unit == "epochs"
        max_steps = math.ceil(cfg.max_epochs * steps_per_epoch)
        eval_steps = (int(cfg.eval_every) * steps_per_epoch if by_epoch
                      else max(1, math.ceil(cfg.eval_every / self.global_batch)))
        warmup = round(cfg.warmup_epochs * steps_per_epoch)
        events.event(C.TRAIN_SAMPLES, ds.num_samples("train"))
        events.event(C.EVAL_SAMPLES, ds.num_samples("val"))
        events.event("opt_learning_rate_warmup_steps", warmup)
        events.event("opt_learning_rate_training_steps", max_steps)

        def where(step):  # MLPerf metadata: epochs for ResNet, samples for BERT
            if by_epoch:
                return {"epoch_num": step // steps_per_epoch}
            return {"epoch_num": step * self.global_batch, "samples_count": step * self.global_batch}

        def block_start(step):
            meta = ({"first_epoch_num": step // steps_per_epoch + 1, "epoch_count": int(cfg.eval_every)}
                    if by_epoch else {"samples_count": step * self.global_batch})
            events.start(C.BLOCK_START, metadata=meta)
            return meta

        m = Measures(status="aborted")
        dist.sync()
        events.end(C.INIT_STOP)
        events.start(C.RUN_START)
        run_start, eval_s, step = time.time(), 0.0, 0
        block = block_start(0)
        batches = self._step_batches(loader, steps_per_epoch)
        for epoch, micro in batches:
            if by_epoch and step % steps_per_epoch == 0:
                events.start(C.EPOCH_START, metadata={"epoch_num": epoch + 1})
            self._step(step, micro, lr_at(step, self.peak_lr, warmup, max_steps, cfg.end_lr, cfg.decay_power))
            step += 1
            if by_epoch and (step % steps_per_epoch == 0 or step == max_steps):
                events.end(C.EPOCH_STOP, metadata={"epoch_num": epoch + 1})
            if step % eval_steps and step < max_steps:
                continue
            dist.sync()
            t_eval = time.time()
            events.end(C.BLOCK_STOP, metadata=block if not by_epoch else
                       {"first_epoch_num": block["first_epoch_num"]})
            events.start(C.EVAL_START, metadata=where(step))
            correct, total = dist.allreduce_sum([*self.trainer.evaluate(val)])
            m.final_metric = correct / max(total, 1.0)
            events.end(C.EVAL_STOP, metadata=where(step))
            events.event(C.EVAL_ACCURACY, m.final_metric, metadata=where(step))
            m.evals.append({"step": step, "epochs": step / steps_per_epoch, "metric": m.final_metric,
                            "samples": int(total)})
            eval_s += time.time() - t_eval
            _say(dist, f"epoch {step / steps_per_epoch:.2f}: {spec.metric_name} {m.final_metric:.4f} "
                       f"(target {cfg.target}) after {time.time() - run_start:.1f} s")
            if m.final_metric >= cfg.target:
                m.status, m.epochs_to_target = "success", step / steps_per_epoch
                break
            if step >= max_steps:
                break
            block = block_start(step)
        batches.close()
        run_stop = time.time()
        events.end(C.RUN_STOP, metadata={"status": m.status, **where(step)})
        m.steps, m.epochs = step, step / steps_per_epoch
        m.time_to_train_s = run_stop - run_start
        m.time_per_epoch_s = (m.time_to_train_s - eval_s) / m.epochs
        return m


# --- small helpers ---------------------------------------------------------------------------

def _identity(cfg, state) -> RunResult:
    return RunResult(
        run_id=cfg.run_id, sweep=cfg.sweep_name, repeat=cfg.repeat, model=cfg.model,
        flavor=cfg.flavor, framework=cfg.framework, precision=cfg.precision, mode=cfg.mode,
        dataset="synthetic" if cfg.synthetic else str(cfg.data), batch_per_gpu=cfg.batch_per_gpu,
        accum_steps=cfg.accum_steps, steps=cfg.steps, warmup_steps=cfg.warmup_steps,
        launcher=detect_launcher(), started_at=datetime.fromtimestamp(state["t0"], timezone.utc)
        .isoformat(timespec="seconds"))


def new_run_id() -> str:
    return f"{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"


def _example_batch(ds) -> dict | None:
    """A one-sample batch with the dataset's fields, shapes and dtypes (for tracing graphs)."""
    import numpy as np

    if ds is None:
        return None
    return {name: np.zeros((1, *spec["shape"]), spec["dtype"]) for name, spec in ds.fields.items()}


def _unique(items) -> list[str]:
    return list(dict.fromkeys(str(i) for i in items))


def _std(values) -> float:
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def _json(data) -> str:
    import json

    return json.dumps(data, indent=2) + "\n"


def _say(dist, message: str) -> None:
    if dist.rank == 0:
        print(f"[hvdbench] {message}", flush=True)


def _summarise(dist, record: RunResult, out: Path, identical: bool) -> None:
    if record.mode == "time_to_accuracy":
        _say(dist, f"{record.status}: {record.metric_name} {record.final_metric:.4f} (target {record.target}) "
                   f"after {record.epochs:g} epochs, time-to-train {record.time_to_train_s:.1f} s, "
                   f"{record.time_per_epoch_s:.2f} s/epoch")
    _say(dist, f"parameters identical on all {record.world_size} ranks: {identical}; "
               f"result: {out / 'result.json'}")
