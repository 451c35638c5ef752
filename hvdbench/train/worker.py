"""What every Horovod process runs: config -> model folder + framework trainer -> loop -> events
-> RunResult.

    horovodrun -np 2 -H localhost:2 --gloo hvdbench train resnet50 --flavor debug --data data/digits --out runs/a
    mpirun -np 2 hvdbench train resnet50 --synthetic --steps 100 --warmup-steps 10 --out runs/b
    srun hvdbench train bert --flavor base --data data/bert_packed --out runs/c

The model comes from its folder (`hvdbench.contracts.get_spec`: network, dataset kind, metric), the
Trainer and `Dist` from `hvdbench.frameworks.<fw>`, the timed loop from `loop.py`, the record from
`result.py`. Nothing here knows which model it runs.

Failures: an error the ranks agree on (bad dataset on any rank) is printed once by rank 0; any
other exception is printed once by the rank that raised it, which then exits at once (no Horovod
shutdown handshake) so that horovodrun/mpirun/srun tear the job down in seconds. A failing rank
other than 0 leaves a note of its error (OUT/.rank-failures/) before it exits, and rank 0 records
the first failure of the job, not its own follow-on one (a peer's connection reset); SIGTERM (torchrun
and mpirun end the other ranks at once when one fails) is a failure rank 0 records too, not a silent
end, and the other ranks leave a note of it. A rank that left no note when rank 0 stopped because a
peer went away is named as the culprit ("rank 1 on n2 stopped without a word (killed: SIGKILL or out of
memory?)"): a SIGKILL runs no Python. Rank 0 writes the record at once and rewrites it as the notes
arrive: mpirun's SIGKILL follows its SIGTERM by a second. A rank still starting after STUCK_START_S
(a rendezvous nobody answers) prints every thread's stack into the run's launch.log once, and waits on.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import platform
import signal
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from mlperf_logging.mllog import constants as C

from hvdbench import frameworks, hardware
from hvdbench.contracts.engines import get_engine
from hvdbench.errors import ConfigError, DatasetError, HvdbenchError
from hvdbench.events import EventLog
from hvdbench.files import atomic_open, atomic_write_text
from hvdbench.launchers.launch_info import SINGLE, detect_launcher, launcher_rank
from hvdbench.launchers.registry import find_launcher, refusal
from hvdbench.output import line
from hvdbench.releases import range_words, torch_tested
from hvdbench.results.records.schema import new_run_id
from hvdbench.results.records.store import HARDWARE_JSON
from hvdbench.topology import Layout
from hvdbench.train import config as config_mod
from hvdbench.train import result as result_mod
from hvdbench.train.faults import Fault
from hvdbench.train.loop import Loop, say
from hvdbench.train.memory import check_device_fits, check_fits, estimate, exact_counts
from hvdbench.train.schedule import scaled_lr


class AgreedError(HvdbenchError):
    """An error every rank knows about (after an allgather); only rank 0 prints it."""


# OUT/.rank-failures/rank<r>.json: a failing rank's own error (or the SIGTERM that stopped it), written
# before it exits, so that rank 0 records the rank that failed first, not its own follow-on error
# (Gloo's "Connection reset by peer" when that rank went away), and names a rank that left none.
# Notes older than this launch's rank 0 are an earlier attempt's.
FAILURE_NOTES = ".rank-failures"
FIRST_FAILURE_WAIT_S = 1.0  # how long rank 0 looks for the other ranks' notes (a slow shared file system)
STOPPED = "ended by SIGTERM: its launcher stopped the job (another rank failed, or a time limit)"
STOPPED_ALONE = "ended by SIGTERM"  # a lone `train`: no launcher, no other rank; whoever sent it knows why
PEER_FAILED = "stopped because another rank failed"  # Horovod's error once a peer is gone
SILENT = "stopped without a word (killed: SIGKILL or out of memory?)"
# A rank's error that follows a peer's end rather than causing it: Horovod's and torch.distributed's
# exception types, and Gloo's tcp transport, which raises a plain RuntimeError (torch 2.13:
# "[.../gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:14737: Connection reset by peer").
PEER_LOST_TYPES = ("HorovodInternalError", "DistError")
PEER_LOST_WORDS = ("Connection reset by peer", "Connection closed by peer")
# A rank that has not said what it runs (its first line, after the rendezvous, the model's build and the
# first compile: seconds for a debug flavor, a minute or two for an MLPerf-size one) this long prints
# every thread's stack to stderr, the run's launch.log, once ("Timeout (0:03:00)!" is faulthandler's
# heading; the rank goes on): where a start that never ends is stuck, before a --timeout or a test ends
# it without a word. faulthandler's own thread: it prints where the stuck call holds the GIL, too.
STUCK_START_S = 180.0
_REPORTING = threading.Lock()  # one report per rank: the main thread's or the SIGTERM watcher's


# --- entry point -----------------------------------------------------------------------------

def main(cfg: config_mod.TrainConfig) -> None:
    """Run the worker and exit the process: 0 for success or aborted, 1 for a failure."""
    state = {"rank": launcher_rank(), "host": platform.node(), "t0": time.time()}
    if not cfg.run_id:
        cfg.run_id = new_run_id()  # rank 0's is the one recorded
    _watch_sigterm(cfg, state)
    faulthandler.dump_traceback_later(STUCK_START_S)  # cancelled once the rank has said what it runs
    try:
        run(cfg, state)
    except AgreedError as e:
        _REPORTING.acquire()  # held until the process is gone: a SIGTERM now changes nothing
        if state["rank"] == 0:
            _report_failure(cfg, state, str(e))
        _exit(1)
    except BaseException as e:  # noqa: BLE001 - every failure ends this rank cleanly and loudly
        _REPORTING.acquire()
        if isinstance(e, KeyboardInterrupt):
            _exit(130)
        if type(e).__name__ == "HorovodInternalError":  # what failed is that rank's note (or its silence)
            message = PEER_FAILED
        elif isinstance(e, HvdbenchError):
            message = str(e)
        else:
            tb = traceback.extract_tb(e.__traceback__)[-1]
            message = f"{type(e).__name__}: {_first_line(e)} (at {Path(tb.filename).name}:{tb.lineno})"
            if os.environ.get("HVDBENCH_DEBUG"):
                traceback.print_exc()
        _report_failure(cfg, state, f"rank {state['rank']} on {state['host']}: {message}", peer_lost(e))
        _exit(1)
    _exit(0)


def peer_lost(e: BaseException) -> bool:
    """Whether `e` is a collective's error for a peer that went away (a follow-on, not a cause)."""
    return (any(c.__name__ in PEER_LOST_TYPES for c in type(e).__mro__)
            or any(words in str(e) for words in PEER_LOST_WORDS))


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _watch_sigterm(cfg, state) -> None:
    """SIGTERM is how launchers end the other ranks when one fails (torchrun and mpirun at once),
    and a rank blocked in a collective runs no Python signal handler before their SIGKILL follows:
    rank 0 left no record. The kernel-level handler writes the signal to a pipe (set_wakeup_fd), and
    a thread waiting on it (collectives let go of the GIL) records the failure: rank 0 the job's
    first one (`_report_failure`), the other ranks a note that they were stopped (not its cause, but
    heard from: a rank with no note is the one that died without a word); then it exits."""
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    signal.signal(signal.SIGTERM, lambda signum, frame: None)  # the watcher acts on it, not the main thread

    def watch() -> None:
        while signal.SIGTERM not in os.read(read_fd, 64):
            pass
        with _REPORTING:
            if state["rank"] == 0:
                alone = state.get("size", 1) == 1 and detect_launcher() == SINGLE
                _report_failure(cfg, state, f"rank 0 on {state['host']}: {STOPPED_ALONE if alone else STOPPED}",
                                follow_on=True)
            else:  # at once: mpirun's SIGKILL follows in a second
                _leave_note(cfg, state, f"rank {state['rank']} on {state['host']}: {STOPPED_ALONE}", time.time(),
                            follow_on=True)
            _exit(1)

    threading.Thread(target=watch, name="hvdbench-sigterm", daemon=True).start()


def _report_failure(cfg, state, message: str, follow_on: bool = False) -> None:
    """Print this rank's error; every rank but 0 leaves a note of it, and rank 0 records the failure
    the job had first (`job_error`): at once, then again as the other ranks' notes arrive, until
    every rank is heard from or FIRST_FAILURE_WAIT_S has passed. `follow_on`: this rank stopped
    because of another (SIGTERM, a peer's connection lost), so a silent rank is the culprit."""
    line(f"Error: {message}", sys.stderr)
    failed_at = time.time()
    if state["rank"] != 0:
        _leave_note(cfg, state, message, failed_at, follow_on)
        return
    size, hosts = state.get("size", 1), state.get("hosts", [])
    deadline = time.monotonic() + FIRST_FAILURE_WAIT_S
    recorded = None
    while True:
        notes = _read_notes(cfg, state["t0"]) if size > 1 else []
        failure = job_error(message, follow_on, failed_at, notes, size, hosts)
        if failure.error != recorded:  # an atomic rewrite: the record is whole whenever SIGKILL comes
            result_mod.record_failure(cfg, state["t0"], failure.error, state.get("record"))
            recorded = failure.error
        if failure.complete or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    if failure.silent:  # no error of its own was printed: say which rank it was
        line(f"Error: {failure.silent}", sys.stderr)


@dataclass(frozen=True)
class Note:
    """What a rank other than 0 left in OUT/.rank-failures/rank<r>.json when it stopped."""
    rank: int
    time: float
    message: str  # "rank 1 on n2: RuntimeError: ..." or "rank 1 on n2: ended by SIGTERM"
    follow_on: bool = False  # stopped because of another rank (SIGTERM, a lost peer): not a cause


@dataclass(frozen=True)
class JobFailure:
    error: str  # the record's error line
    silent: str = ""  # "rank 1 on n2 stopped without a word (...)": the ranks that left no note
    complete: bool = False  # nothing more to wait for: a cause found, or every rank heard from


def job_error(own: str, follow_on: bool, failed_at: float, notes: list[Note], size: int,
              hosts: list[str]) -> JobFailure:
    """Rank 0's record of a failed job, from its own error `own` and the other ranks' `notes` (this
    launch's): the earliest cause noted before rank 0 failed, then `own`; else, when rank 0 stopped
    because of another rank, the ranks that left no note (`hosts`: each rank's, once known) and what
    stopped the ones that did; else `own`.

        rank 1 on n2 stopped without a word (killed: SIGKILL or out of memory?); then rank 0 on n1:
        ended by SIGTERM: its launcher stopped the job (...); ranks 2, 3: ended by SIGTERM"""
    causes = sorted((n.time, n.message) for n in notes if not n.follow_on and n.time <= failed_at)
    if causes:
        return JobFailure(f"{causes[0][1]}; then {own}", complete=True)
    heard = {n.rank for n in notes}
    unheard = [r for r in range(1, size) if r not in heard]
    if not follow_on:
        return JobFailure(own, complete=not unheard)
    silent = (", ".join(f"rank {r}" + (f" on {hosts[r]}" if r < len(hosts) else "") for r in unheard)
              + f" {SILENT}") if unheard else ""
    stopped: dict[str, list[int]] = {}  # what stopped the others, with their ranks
    for n in sorted(notes, key=lambda n: n.rank):
        stopped.setdefault(n.message.split(": ", 1)[-1], []).append(n.rank)
    others = [f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}: {why}"
              for why, ranks in stopped.items()]
    return JobFailure("; ".join([f"{silent}; then {own}" if silent else own, *others]), silent, not unheard)


def _leave_note(cfg, state, message: str, failed_at: float, follow_on: bool = False) -> None:
    if cfg.out:
        with contextlib.suppress(OSError):  # best effort: the error line printed is what matters
            notes = Path(cfg.out) / FAILURE_NOTES
            notes.mkdir(parents=True, exist_ok=True)
            atomic_write_text(notes / f"rank{state['rank']}.json",
                              json.dumps({"time": failed_at, "message": message, "follow_on": follow_on}))


def _read_notes(cfg, t0: float) -> list[Note]:
    """The notes the other ranks left in this launch (not before rank 0 started: an earlier attempt's)."""
    notes = []
    for path in (Path(cfg.out) / FAILURE_NOTES).glob("rank*.json") if cfg.out else []:
        with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
            note = json.loads(path.read_text())
            note = Note(int(path.stem.removeprefix("rank")), float(note["time"]), str(note["message"]),
                        bool(note.get("follow_on", False)))
            if note.time >= t0:
                notes.append(note)
    return notes


def _exit(code: int) -> None:
    """Leave now. A normal interpreter exit would run Horovod's shutdown handshake, which waits for
    peers that may be dead or stuck; the launcher needs this rank gone to end the job. atexit's
    hooks are skipped with it: what a framework must still undo it registered with
    `frameworks.on_exit`."""
    frameworks.run_on_exit()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


# --- the run ---------------------------------------------------------------------------------

def run(cfg: config_mod.TrainConfig, state: dict) -> None:
    from hvdbench.contracts import get_spec

    spec = get_spec(cfg.model)
    flavor_cfg = spec.flavor(cfg.flavor)
    engine = get_engine(cfg.engine)
    try:  # before the ranks meet: every rank fails the same way (one argv, one install), rank 0 says it
        refused = refusal(engine, find_launcher(detect_launcher()))
        if refused:
            raise ConfigError(refused)
        if engine.needs_horovod:  # TensorFlow's models too: Horovod is their only engine
            frameworks.require_horovod(f"--engine {engine.name} ({cfg.framework})")
        fw = frameworks.load(cfg.framework)
        if cfg.horovod_timeline:  # read by Horovod's init: the timeline is then started and stopped by the loop
            os.environ["HOROVOD_TIMELINE"] = "DYNAMIC"
        dist = fw.init_dist(cfg.threads, cfg.thread_share, cfg.engine)
    except ConfigError as e:
        raise AgreedError(str(e)) from None
    state["rank"], state["size"] = dist.rank, dist.size
    fault = Fault(dist.rank, dist.size)
    ds, kind, info = _preflight(cfg, spec, flavor_cfg, dist)
    out = Path(cfg.out)
    if dist.rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        config_mod.save_yaml(out / "config.yaml", cfg)
    events = EventLog(out / "mllog.txt" if dist.rank == 0 else None)
    events.start(C.INIT_START)

    _check_precision_on_cpu(cfg, spec, dist)
    _check_torch_release(dist)
    # A run that cannot fit in host memory is refused with the batch or flavor that would, instead of
    # the kernel killing a rank mid-step: before building the model when the spec has the flavor's
    # exact parameter counts (a 7B base takes a minute to build), else with the built model's.
    counts = exact_counts(spec, cfg.flavor)
    if counts:
        _check_host_memory(cfg, spec, dist, *counts)
    meta = engine.shards_state and (cfg.flavor or spec.default_flavor) in spec.build_on_meta
    trainer = fw.Trainer(cfg, spec.framework_module(cfg.framework), flavor_cfg, info, dist,
                         **({"meta": True} if meta else {}))
    if not counts:
        trained = trainer.num_trainable()
        _check_host_memory(cfg, spec, dist, trained, trainer.num_parameters() - trained)
    # One sample with the dataset's fields, shapes and dtypes (TensorFlow traces its graphs on it).
    rng = np.random.default_rng([cfg.seed, dist.rank])
    trainer.compile(kind.synthetic(1, info, rng) if ds is None else _example_batch(ds))
    # --synthetic: one fixed random batch, moved to the device once and reused every step.
    host = kind.synthetic(cfg.batch_per_gpu, info, rng) if ds is None else None
    synthetic = trainer.device_batch(host) if ds is None else None
    state["hosts"] = [str(h) for h in dist.allgather_object(dist.hostname)]  # each rank's: a failure names them
    hosts = _unique(state["hosts"])
    devices = _unique(dist.allgather_object(dist.device_name))
    # The hardware behind the numbers, each host's once (its first rank reads it, before the timing).
    machines = dist.allgather_object({**hardware.host_record(), "hostname": dist.hostname, "versions": dist.versions}
                                     if dist.local_rank == 0 else None)
    if dist.rank == 0:
        atomic_write_text(out / HARDWARE_JSON, json.dumps({m["hostname"]: m for m in machines if m}, indent=2) + "\n")
    global_batch = cfg.batch_per_gpu * cfg.accum_steps * dist.size
    peak_lr = scaled_lr(cfg, global_batch)
    layout = str(Layout(dist.cross_size, dist.local_size))
    local = trainer.num_local()
    say(dist, f"{cfg.model}/{cfg.flavor} {cfg.framework} {cfg.precision} {cfg.engine}: {dist.size} rank(s) "
              f"({layout}, {dist.controller}), {trainer.num_parameters():,} parameters"
              + (f" ({trainer.num_trainable():,} trained)" if trainer.num_trainable() != trainer.num_parameters()
                 else "") + (f", {local:,} on this rank" if local != trainer.num_parameters() else "")
              + f", global batch {global_batch}, "
              f"peak lr {peak_lr:.4g}, {kind.name} data {'synthetic' if cfg.synthetic else cfg.data}, "
              f"{dist.threads} math thread(s) per rank"
              + (f" ({dist.busy_cpus:.1f} cores busy with other processes at start)"
                 if dist.busy_cpus and dist.busy_cpus >= 0.5 else ""))
    faulthandler.cancel_dump_traceback_later()  # started (STUCK_START_S)

    _log_run_facts(events, cfg, spec, dist, layout, devices[0], global_batch, peak_lr)
    record = result_mod.identity(cfg, state["t0"])
    result_mod.describe_job(record, dist, hosts, devices, trainer.num_trainable(),
                            dist.allgather_object(local))
    state["record"] = record  # a failure from here on is recorded with the job's layout and devices
    if dist.rank == 0:
        _count_compute(record, cfg, spec, kind, trainer, dist)
    loop = Loop(cfg, dist, trainer, events, fault, ds, global_batch, peak_lr, spec.metric, synthetic,
                hyperparameters=lambda facts: spec.mllog_values(cfg, facts), mlperf_samples=kind.mlperf_samples,
                synthetic_samples=None if host is None else kind.mlperf_samples(host))
    measures = loop.throughput() if cfg.mode == "throughput" else loop.time_to_accuracy()
    measures.compile_s = trainer.compile_s  # None: nothing compiled (the TensorFlow trainer's graphs are traced)
    if measures.compile_s is not None:
        say(dist, f"compile: {measures.compile_s:.1f} s (torch.compile, in the warm-up: not in the throughput)")

    digests = dist.allgather_object(trainer.param_digest())
    if cfg.save_parameters:
        _save_parameters(trainer, dist, out / "parameters.npz")
    if dist.rank == 0:
        result_mod.finish(record, cfg, measures, spec.metric.name, out, digests, state["t0"], dist)
    events.close()
    dist.shutdown()


# fp16 on a CPU against fp32, step time of the debug flavors on --synthetic data (AMD EPYC, 2
# cores, avx512_bf16, no fp16 math units; torch 2.13, TensorFlow 2.21): autocast runs most ops
# emulated or converted. torch: ncf 3.6x, resnet50 4.2x, bert 8.3x, ssd 10x, retinanet 12x,
# transformer 18x (maskrcnn 2.0x, stable_diffusion 7.0x, llama2_lora 13x); Keras: resnet50 1.2x.
FP16_ON_CPU_SLOWER = {"torch": "2-18x", "tensorflow": "1.2x"}


def _check_torch_release(dist) -> None:
    """Warn once (rank 0) where this torch is outside the tested range (releases.TESTED_TORCH), or
    no version at all; the record's versions keep it, and the report warns of its runs again."""
    version = dist.versions.get("torch")
    if version and not torch_tested(version):
        say(dist, f"warning: PyTorch {range_words(version)}")


def _check_precision_on_cpu(cfg, spec, dist) -> None:
    """On a CPU: refuse a precision the model cannot train in there (ModelSpec.unsupported_on_cpu),
    before building it; warn once that fp16 runs, but slowly, on a CPU. Every rank agrees."""
    if dist.device_name != "cpu":
        return
    if cfg.fsdp_offload:
        raise AgreedError("--fsdp-offload moves fsdp's shards from the GPUs to host memory; a CPU run keeps them "
                          "there already: leave it out")
    why = spec.unsupported_on_cpu.get(cfg.precision)
    if why:
        others = " or ".join(p for p in ("bf16", "fp32") if p not in spec.unsupported_on_cpu)
        raise AgreedError(f"{spec.name} cannot train in {cfg.precision} on the CPU: {why}; "
                          + (f"use --precision {others}" if others else "train it on a GPU"))
    if cfg.precision == "fp16":
        slower = FP16_ON_CPU_SLOWER.get(cfg.framework, "several times")
        say(dist, f"warning: fp16 on a CPU runs most ops emulated: the debug flavors measured {slower} slower "
                  f"than in fp32 ({cfg.framework}); --precision bf16 or fp32 runs faster here")


def _check_host_memory(cfg, spec, dist, trained: int, frozen: int) -> None:
    """On a CPU: refuse a run whose memory estimate exceeds this rank's share (memory.check_fits); on
    a GPU, one whose weights, gradients and optimizer state leave too little of it (check_device_fits:
    a 70B base under horovod or ddp, or under fsdp over too few GPUs). Every rank computes the same
    estimate; rank 0 says it. (The ranks of an emulated cluster all share this machine's memory.)"""
    from hvdbench import frameworks

    try:
        if dist.device_name != "cpu":
            import torch

            if torch.cuda.is_available():
                check_device_fits(spec, cfg, dist.size, torch.cuda.get_device_properties(dist.local_rank).total_memory,
                                  dist.device_name, trained, frozen)
            return
        sharing = dist.size if os.environ.get(frameworks.SHARED_MACHINE_ENV) == "1" else dist.local_size
        check_fits(spec, cfg, sharing, trained, frozen=frozen, ranks=dist.size)
    except ConfigError as e:
        raise AgreedError(str(e)) from None


def _count_compute(record, cfg, spec, kind, trainer, dist) -> None:
    """The record's FLOPs per sample (counted on the meta device: no step of the run is spent) and
    train/memory.py's estimate of one rank's memory, beside which the run's peak is recorded."""
    record.flops_per_sample = trainer.flops_per_sample(spec, cfg.flavor, kind)  # None: not counted
    trained = trainer.num_trainable()
    est = estimate(spec, cfg, (trained, trainer.num_parameters() - trained), dist.size)
    record.mem_estimate_gb = est.total / 1e9


def _save_parameters(trainer, dist, path: Path) -> None:
    """Every parameter, whole, by name (every rank takes part: fsdp gathers its shards); rank 0 writes."""
    arrays = trainer.parameters_by_name()
    if dist.rank == 0:
        with atomic_open(path, "wb") as f:
            np.savez(f, **arrays)


def _log_run_facts(events, cfg, spec, dist, layout, device, global_batch, peak_lr) -> None:
    """The MLPerf header of the event log: submission, scale and the common hyperparameters (the
    model's own, `ModelSpec.mllog_hyperparameters`, are logged by the loop, which knows the
    schedule's steps)."""
    events.submission(spec.benchmark, cfg.submission.org, cfg.submission.platform or f"{layout} {device}",
                      cfg.submission.division, cfg.submission.status)
    events.event(C.CACHE_CLEAR, False)  # hvdbench does not drop the page cache
    # What MLPerf's result summarizer reads for the system's scale.
    events.event("number_of_nodes", dist.cross_size)
    events.event("accelerators_per_node", dist.local_size)
    events.hyperparameters({
        C.SEED: cfg.seed, C.GLOBAL_BATCH_SIZE: global_batch,
        C.GRADIENT_ACCUMULATION_STEPS: cfg.accum_steps, C.OPT_NAME: cfg.optimizer,
        C.OPT_BASE_LR: peak_lr,
    })


def _preflight(cfg, spec, flavor_cfg, dist):
    """Open the dataset on every rank and check the output directory on rank 0, then agree on
    the outcome: a dataset missing on one node fails the whole job at once, with one message
    naming the rank and host. Returns (dataset or None for synthetic data, its kind, the data
    sizes the model is built for)."""
    from hvdbench.data.readers import open_dataset

    found, error = (None, spec.kinds[0], None), None
    try:
        if dist.rank == 0:
            result_mod.check_out(Path(cfg.out))
        if cfg.synthetic:
            kind = spec.synthetic_kind(cfg.synthetic_kind)
            found = (None, kind, spec.synthetic_info(flavor_cfg, kind))
        else:
            ds = open_dataset(cfg.data)
            if ds.kind not in spec.data_kinds:
                raise DatasetError(f"{cfg.data}: a {ds.kind!r} dataset; {spec.name} trains on "
                                   f"{', '.join(spec.data_kinds)}")
            found = (ds, spec.kind(ds.kind), ds.data_info)
    except HvdbenchError as e:
        error = f"rank {dist.rank} on {dist.hostname}: {e}"
    errors = [e for e in dist.allgather_object(error) if e]
    if errors:
        more = f" (and {len(errors) - 1} more rank(s))" if len(errors) > 1 else ""
        raise AgreedError(errors[0] + more)
    return found


def _example_batch(ds) -> dict:
    """A one-sample batch with the dataset's fields, shapes and dtypes (for tracing graphs)."""
    return {name: np.zeros((1, *spec["shape"]), spec["dtype"]) for name, spec in ds.fields.items()}


def _unique(items) -> list[str]:
    return list(dict.fromkeys(str(i) for i in items))
