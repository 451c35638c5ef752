"""The framework-neutral training loop and what it measures, in two modes.

- throughput (`--steps N --warmup-steps W`, on real data or `--synthetic`, which implies it): W
  untimed steps, then N steps between two synchronised points; global samples/s = N x global
  batch / the slowest rank's elapsed time (not rank 0's rate x size).
- time-to-accuracy (`--data` without `--steps`): train, evaluate the model's metric on the whole
  validation split every `eval_every` epochs (or samples), stop when the target is reached in the
  metric's direction (success) or at max_epochs (aborted). time-to-train = run_start -> run_stop,
  as in MLPerf.

    loop = Loop(cfg, dist, trainer, events, fault, ds, global_batch, peak_lr, metric, synthetic)
    measures = loop.throughput()   or   loop.time_to_accuracy()
"""

from __future__ import annotations

import contextlib
import itertools
import math
import time
from dataclasses import field, fields, make_dataclass, replace

from mlperf_logging.mllog import constants as C

from hvdbench.contracts import RunFacts
from hvdbench.errors import DatasetError
from hvdbench.frameworks.trainer import Trainer
from hvdbench.interference import Neighbours
from hvdbench.output import line
from hvdbench.results.records.ranks import summary as rank_summary
from hvdbench.results.records.schema import BUSY_CPUS, MEASURED, RankRow, RunResult
from hvdbench.train.compute_window import ComputeWindow, gpu_identity
from hvdbench.train.schedule import lr_at
from hvdbench.train.warmup import cap as warmup_cap
from hvdbench.train.warmup import least as warmup_least
from hvdbench.train.warmup import settled as warmup_settled

# What one run measured: RunResult's measured columns (declared once, results.records.schema.MEASURED, with
# their defaults) and the evaluations' history (checks.json's `evals`). hvdbench.train.result copies
# the columns into the record.
Measures = make_dataclass("Measures", [
    *((f.name, f.type, field(default=f.default)) for f in fields(RunResult) if f.name in MEASURED),
    ("evals", list, field(default_factory=list)),
    ("compute", dict, field(default_factory=dict)),  # the window's compute figures (train/compute_window.py)
    ("ranks", list, field(default_factory=list)),  # rank 0: every rank's RankRow (RUN/ranks.csv)
    # This process's CPU seconds (every thread's) over the timed window: the host work of its steps,
    # which a shared machine's wall clock hides (benchmarks/bench_train.py --clock cpu).
    ("window_cpu_s", float, field(default=None))])


class Progress:
    """A plain progress line from rank 0 every `interval_s` seconds while a run runs (it goes to a
    pipe or a log under a launcher, so no cursor tricks): steps and epochs done, the rate, the
    last metric, and an ETA to the end of the run.

        [hvdbench] step 240/600 (epoch 2.0/5), 812 samples/s, top1_accuracy 0.8123, 0:31 left
    """

    def __init__(self, dist, total_steps: int, samples_per_step: int, steps_per_epoch: int | None = None,
                 interval_s: float | None = None):
        import os

        self.dist, self.total, self.samples_per_step = dist, total_steps, samples_per_step
        self.steps_per_epoch = steps_per_epoch
        self.interval = interval_s if interval_s is not None else float(os.environ.get("HVDBENCH_PROGRESS_S", 15))
        self.start = time.monotonic()
        self.last: float | None = None  # when the last line was said; None before the first step's
        self.start_step = 0
        self.metric = ""

    def restart(self, step: int) -> None:
        """The rate and ETA count from here (after warm-up, or after an evaluation's pause)."""
        self.start, self.start_step = time.monotonic(), step

    def tick(self, step: int) -> None:
        if self.dist.rank != 0 or self.interval <= 0:
            return
        now = time.monotonic()
        # The first step says so at once: a sweep's status line on a run in flight shows where the
        # run is from its launch.log, and a short run (a throughput window of 13 steps) would
        # otherwise end before its first line. Its rate is no rate yet (the first step builds).
        first = self.last is None
        if not first and now - self.last < self.interval:
            return
        self.last = now
        rate = (step - self.start_step) / max(now - self.start, 1e-9)  # steps per second
        parts = [f"step {step}/{self.total}"]
        if self.steps_per_epoch:
            parts[0] += f" (epoch {step / self.steps_per_epoch:.1f}/{self.total / self.steps_per_epoch:g})"
        if first:
            parts.append("first step done")
        else:
            parts.append(f"{rate * self.samples_per_step:,.0f} samples/s")
        if self.metric:
            parts.append(self.metric)
        if rate > 0 and not first:
            left = int((self.total - step) / rate)
            parts.append(f"at most {left // 60}:{left % 60:02d} left" if self.steps_per_epoch
                         else f"{left // 60}:{left % 60:02d} left")
        say(self.dist, ", ".join(parts))


class Loop:
    def __init__(self, cfg, dist, trainer: Trainer, events, fault, ds, global_batch, peak_lr, metric=None,
                 synthetic=None, hyperparameters=None, mlperf_samples=None, synthetic_samples=None):
        """`ds`: the opened dataset (None with --synthetic); `metric`: the model's Metric (for
        time-to-accuracy); `synthetic`: one fixed batch on the device (for --synthetic);
        `hyperparameters`: RunFacts -> {MLLOG key: value}, the model's own keys
        (`ModelSpec.mllog_values`), logged once the run is laid out; `mlperf_samples`: a host batch
        -> how many of MLPerf's samples it holds, None where a row is one (DatasetKind.mlperf_samples),
        and `synthetic_samples` that count of the synthetic batch."""
        self.cfg, self.dist, self.trainer, self.events, self.fault = cfg, dist, trainer, events, fault
        self.ds, self.global_batch, self.peak_lr = ds, global_batch, peak_lr
        self.metric, self.synthetic = metric, synthetic
        self.mlperf_samples = mlperf_samples or (lambda batch: None)
        self.synthetic_samples = synthetic_samples
        self.hyperparameters = hyperparameters or (lambda facts: {})
        if fault.compute_delay_s:
            trainer.delay_compute(fault.compute_delay_s)  # (a trainer that cannot refuses, in one line)

    def _log_hyperparameters(self, steps_per_epoch, max_steps: int, warmup_steps: int) -> None:
        facts = RunFacts(self.global_batch, self.peak_lr, steps_per_epoch, max_steps, warmup_steps)
        self.events.hyperparameters(self.hyperparameters(facts))

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
        """(epoch, micro-batches on the device, MLPerf's samples in them or None) for every optimizer
        step, epoch after epoch; the samples counted on the host, before the copy."""
        accum = self.cfg.accum_steps
        for epoch in itertools.count():
            loader.set_epoch(epoch)
            batches = iter(loader)
            try:
                for _ in range(steps_per_epoch):
                    micro, counts = [], []
                    for _ in range(accum):
                        batch = next(batches)
                        counts.append(self.mlperf_samples(batch))
                        micro.append(self.trainer.device_batch(batch))
                    yield epoch, micro, None if None in counts else sum(counts)
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
            fixed = [self.synthetic] * cfg.accum_steps
            count = None if self.synthetic_samples is None else self.synthetic_samples * cfg.accum_steps
            batches = ((0, fixed, count) for _ in itertools.count())
            steps_per_epoch = None
            events.event(C.TRAIN_SAMPLES, 0)
        else:
            loader, steps_per_epoch = self._train_loader()
            batches = self._step_batches(loader, steps_per_epoch)
            events.event(C.TRAIN_SAMPLES, self.ds.num_samples("train"))
        if warmup_least(cfg.warmup_steps, self.trainer.compiles) > cfg.warmup_steps:
            say(dist, "warm-up: 1 step, not --warmup-steps 0: the step is compiled, and its first call "
                      "compiles (timing it would report compilation as throughput)")
            cfg = self.cfg = replace(cfg, warmup_steps=1)
        steps, most = cfg.steps, warmup_cap(cfg.warmup_steps, cfg.warmup_max_steps)
        self._log_hyperparameters(steps_per_epoch, cfg.warmup_steps + steps, cfg.warmup_steps)
        progress = Progress(dist, cfg.warmup_steps + steps, self.global_batch)
        dist.sync()
        events.end(C.INIT_STOP)
        events.start(C.RUN_START)
        times, warm_times, data_s = [], [], 0.0
        counted = 0  # MLPerf's samples in this rank's timed steps (None: the kind counts rows)
        timed = cfg.breakdown and self.trainer.times_phases
        i, warmup = 0, None  # warmup: the step the timed window opened at, once it has
        pending = None  # the next step's batches, when already read (the breakdown's probe used them)
        while warmup is None or i < warmup + steps:
            if warmup is None and self._warmed_up(i, warm_times, most):
                # The timed window opens at a point every rank has reached.
                warmup = i
                progress.total = warmup + steps
                if timed:
                    # Engines that reduce inside backward time a step without the reduction first, on
                    # the batches the next step then trains on (the data stream is not shifted).
                    _, *pending = next(batches)
                    self.trainer.start_timing(pending[0])
                dist.sync()
                window = ComputeWindow(dist, self.trainer)
                t0 = last = time.perf_counter()
                cpu0 = time.process_time()
                watch = Neighbours(dist.device)
                if cfg.horovod_timeline:
                    dist.start_timeline(self._timeline_path())
                progress.restart(i)
            asked = time.perf_counter()
            self.fault.before_read()
            if pending is not None:
                (micro, count), pending = pending, None
            else:
                _, micro, count = next(batches)
            if warmup is not None:
                data_s += time.perf_counter() - asked
                counted = None if counted is None or count is None else counted + count
            # The learning rate ramps over --warmup-steps and then holds (a longer warm-up only waits).
            self._step(i, micro, lr_at(i, self.peak_lr, cfg.warmup_steps, cfg.warmup_steps, self.peak_lr, 1.0))
            if warmup is not None:
                now = time.perf_counter()
                times.append(now - last)
                last = now
            else:
                dist.sync()  # a warm-up step's time includes its device work (GPUs run ahead)
                warm_times.append(time.perf_counter() - asked)
            progress.tick(i + 1)
            i += 1
        dist.sync()
        elapsed = dist.allreduce_max(time.perf_counter() - t0)
        window_cpu_s = time.process_time() - cpu0
        with contextlib.suppress(AttributeError):
            batches.close()
        m = Measures(steps=steps, warmup_steps=warmup, throughput=steps * self.global_batch / elapsed,
                     compute=window.stop(steps * self.global_batch), window_cpu_s=window_cpu_s)
        if counted is not None:  # every rank's kind counts, or none's: one gather after the window
            m.mlperf_samples_per_row = sum(dist.allgather_object(counted)) / (steps * self.global_batch)
        if warmup > cfg.warmup_steps:
            say(dist, f"warm-up: {warmup} steps (step times settled after {warmup} of at most {most}; "
                      f"--warmup-steps {cfg.warmup_steps})" if warmup < most else
                      f"warm-up: {warmup} steps, the most allowed (--warmup-max-steps): step times had not settled")
        self._neighbours(m, watch)
        if cfg.horovod_timeline:
            self._timeline(m, steps)
        m.step_time_mean_s = sum(times) / len(times)
        m.step_time_std_s = std(times)
        if timed:
            phases = self.trainer.stop_timing()
            self._breakdown(m, data_s, phases, steps)
            self._ranks(m, window, times, data_s, phases, steps)
        events.event("tracked_stats", {"throughput": m.throughput}, metadata={"step": warmup + steps})
        events.end(C.RUN_STOP, metadata={"status": "success"})
        say(dist, f"throughput: {m.throughput:,.1f} samples/s ({m.throughput / dist.size:,.1f} per rank), "
                  f"step {1e3 * m.step_time_mean_s:.1f} ± {1e3 * m.step_time_std_s:.1f} ms "
                  f"over {steps} steps after {warmup} warm-up")
        if m.mlperf_samples_per_row is not None:
            say(dist, f"as MLPerf counts: {m.throughput * m.mlperf_samples_per_row:,.1f} sequences/s, "
                      f"{m.mlperf_samples_per_row:.3f} a row")
        if m.compute_s is not None:
            say(dist, "step time: " + ", ".join(f"{name} {1e3 * getattr(m, name + '_s'):.1f} ms" for name in
                                                ("data", "compute", "comm", "update", "other")))
        return m

    def _ranks(self, m: Measures, window: ComputeWindow, times: list[float], data_s: float, phases: dict,
               steps: int) -> None:
        """Every rank's own step, compute, data wait and exchange wait, with its host, local rank
        and device, gathered to rank 0 in one collective after the timed window (none per step);
        rank 0 keeps the rows (RUN/ranks.csv) and their summary in the record."""
        dist = self.dist
        if dist.size < 2:
            return
        gpu_index, gpu_uuid = gpu_identity(window.handle)
        mine = RankRow(rank=dist.rank, host=dist.hostname, local_rank=dist.local_rank,
                       device=str(dist.device_name), gpu_index=gpu_index, gpu_uuid=gpu_uuid,
                       step_s=sum(times) / len(times), compute_s=phases.get("compute", 0.0) / steps,
                       data_s=data_s / steps, comm_s=phases.get("comm", 0.0) / steps)
        rows = dist.allgather_object(mine.to_row())
        if dist.rank != 0:
            return
        m.ranks = [RankRow.from_row({**row, "run_id": self.cfg.run_id}, f"rank {i}'s times")  # rank 0's id is the run's
                   for i, row in enumerate(rows)]
        for key, value in rank_summary(m.ranks).items():
            setattr(m, key, value)
        if m.slowest_compute_ratio is not None:
            say(dist, f"ranks: the slowest, rank {m.slowest_rank} on {m.slowest_host}, computed "
                      f"{1e3 * (m.imbalance_s or 0.0):.1f} ms per step longer than the others' median "
                      f"({m.slowest_compute_ratio:.2f}x)")

    def _warmed_up(self, step: int, warm_times: list[float], most: int) -> bool:
        """Whether warm-up ends before `step`, the same answer on every rank: after --warmup-steps,
        once the step times have settled on every rank (hvdbench.train.warmup), or at the cap.
        The ranks agree with one small collective per step past --warmup-steps (steps are in
        lockstep, so every rank asks at the same step)."""
        if step < self.cfg.warmup_steps:
            return False
        if step >= most:
            return True
        unsettled = 0.0 if warmup_settled(warm_times) else 1.0
        return self.dist.allreduce_max(unsettled) == 0.0

    def _timeline_path(self):
        from pathlib import Path

        return Path(self.cfg.out).absolute() / "timeline.json"

    def _timeline(self, m: Measures, steps: int) -> None:
        """Stop Horovod's timeline; rank 0 (whose Horovod wrote it) summarises it into the record."""
        from hvdbench.train.timeline import summarise

        self.dist.stop_timeline()
        if self.dist.rank == 0:
            for key, value in summarise(self._timeline_path(), steps).items():
                setattr(m, key, value)
            if m.timeline_allreduce_ms is not None:
                say(self.dist, f"timeline: per step {m.timeline_negotiate_ms:.2f} ms negotiating, "
                               f"{m.timeline_allreduce_ms:.2f} ms in allreduce, {m.timeline_cycles_per_step:.2f} "
                               f"cycles of {m.timeline_fused_mib:.2f} MiB fused; {self._timeline_path()}")

    def _neighbours(self, m: Measures, watch: Neighbours) -> None:
        """Record what else ran during the timed window, and say so when it was a lot."""
        busy = watch.stop(self.dist)
        m.other_cpus, m.other_gpu_procs = busy["other_cpus"], busy["other_gpu_procs"]
        if m.other_cpus >= BUSY_CPUS or m.other_gpu_procs:
            say(self.dist, f"warning: the machine was busy while this run was timed: other processes used "
                           f"{m.other_cpus:.1f} cores on average" + (f", {m.other_gpu_procs} other process(es) on "
                                                                     f"the GPUs" if m.other_gpu_procs else "")
                + "; its numbers may not be this layout's")

    @staticmethod
    def _breakdown(m: Measures, data_s: float, phases: dict[str, float], steps: int) -> None:
        """The mean step's phases; `other` is what is left of the step time (the learning-rate
        update, the fault check, progress lines), so the five add up to step_time_mean_s."""
        m.data_s = data_s / steps
        m.compute_s, m.comm_s, m.update_s = (phases.get(k, 0.0) / steps for k in ("compute", "comm", "update"))
        m.other_s = m.step_time_mean_s - (m.data_s + m.compute_s + m.comm_s + m.update_s)

    # --- time to accuracy -------------------------------------------------------------------

    def time_to_accuracy(self) -> Measures:
        cfg, dist, events, ds, metric = self.cfg, self.dist, self.events, self.ds, self.metric
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
        self._log_hyperparameters(steps_per_epoch, max_steps, warmup)

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
        progress = Progress(dist, max_steps, self.global_batch, steps_per_epoch)
        dist.sync()
        events.end(C.INIT_STOP)
        events.start(C.RUN_START)
        window = ComputeWindow(dist, self.trainer)  # the energy to train: run_start -> run_stop
        run_start, eval_s, step = time.time(), 0.0, 0
        watch = Neighbours(dist.device)
        block = block_start(0)
        batches = self._step_batches(loader, steps_per_epoch)
        for epoch, micro, _ in batches:
            if by_epoch and step % steps_per_epoch == 0:
                events.start(C.EPOCH_START, metadata={"epoch_num": epoch + 1})
            self._step(step, micro, lr_at(step, self.peak_lr, warmup, max_steps, cfg.end_lr, cfg.decay_power))
            step += 1
            progress.tick(step)
            if by_epoch and (step % steps_per_epoch == 0 or step == max_steps):
                events.end(C.EPOCH_STOP, metadata={"epoch_num": epoch + 1})
            if step % eval_steps and step < max_steps:
                continue
            dist.sync()
            t_eval = time.time()
            events.end(C.BLOCK_STOP, metadata=block if not by_epoch else
                       {"first_epoch_num": block["first_epoch_num"]})
            events.start(C.EVAL_START, metadata=where(step))
            reduced = metric.reduce(self.trainer.evaluate(val, metric), dist)
            m.final_metric = metric.value(reduced)
            events.end(C.EVAL_STOP, metadata=where(step))
            # MLPerf logs every benchmark's quality as eval_accuracy (an eval loss too).
            events.event(C.EVAL_ACCURACY, metric.logged(m.final_metric), metadata=where(step))
            m.evals.append({"step": step, "epochs": step / steps_per_epoch, "metric": m.final_metric,
                            "samples": metric.samples(reduced)})
            eval_s += time.time() - t_eval
            say(dist, f"epoch {step / steps_per_epoch:.2f}: {metric.name} {m.final_metric:.4f} "
                      f"(target {cfg.target}) after {time.time() - run_start:.1f} s")
            if metric.reached(m.final_metric, cfg.target):
                m.status, m.epochs_to_target = "success", step / steps_per_epoch
                break
            if step >= max_steps:
                break
            progress.metric = f"{metric.name} {m.final_metric:.4f}"
            progress.restart(step)  # the evaluation's pause is not training speed
            block = block_start(step)
        batches.close()
        dist.sync()
        m.compute = window.stop(step * self.global_batch)
        run_stop = time.time()
        events.end(C.RUN_STOP, metadata={"status": m.status, **where(step)})
        m.steps, m.epochs = step, step / steps_per_epoch
        m.time_to_train_s = run_stop - run_start
        m.time_per_epoch_s = (m.time_to_train_s - eval_s) / m.epochs
        self._neighbours(m, watch)
        return m


def std(values) -> float:
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def say(dist, message: str) -> None:
    """A progress line, printed once (by rank 0)."""
    if dist.rank == 0:
        line(f"[hvdbench] {message}")
