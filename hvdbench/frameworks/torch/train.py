"""The PyTorch trainer the worker drives: a model, an engine (Horovod's DistributedOptimizer, DDP or
FSDP2: hvdbench/frameworks/torch/engines.py), one step at a time.

    dist = init_dist(threads=0, engine="horovod")
    trainer = Trainer(cfg, spec.framework_module("torch"), flavor_cfg, data_info, dist)
    trainer.train_step([trainer.device_batch(b) for b in micro_batches])
    state = trainer.evaluate(val_loader, spec.metric)     # this rank's metric state

Precision: bf16/fp16 run the forward pass under autocast; fp16 on CUDA scales the loss
(GradScaler) so small gradients survive, synchronising Horovod's allreduce before the unscale; fp8
swaps the linears for torchao's float8 ones (hvdbench/frameworks/torch/fp8.py) under bf16 autocast.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import time

import torch

from hvdbench.contracts import BUILD_OPTIONS, undeclared_option
from hvdbench.contracts import engines as registry
from hvdbench.errors import ConfigError
from hvdbench.frameworks.torch import fp8
from hvdbench.frameworks.torch.data import DeviceBatches
from hvdbench.frameworks.torch.engines import make_engine
from hvdbench.frameworks.torch.flops import count_once as count_flops
from hvdbench.frameworks.torch.hooks import TorchHooks
from hvdbench.frameworks.trainer import Trainer as TrainerBase

# autocast's dtype per --precision: an fp8 run's linears are torchao's float8 ones, the rest bf16.
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp8": torch.bfloat16}


def compile_regions(net, units, model, mode: str) -> None:
    """--compile: a model folder's `compile_units` (a transformer's decoder layers) one by one, each
    layer's forward compiled in place (regional compilation, torchtitan's: one layer's compile, reused
    by the layers of its shape; the engine's hooks around each layer stay eager); else the wrapper's
    own forward in place (Module.compile), so parameter names, DDP's buckets and FSDP's hooks stay as
    they are. Dynamo compiles on the first step."""
    if units is None:
        net.compile(mode=mode)
        return
    for unit in units(model):
        unit.forward = torch.compile(unit.forward, mode=mode)


def compile_mode(requested: str, device: torch.device) -> str:
    """torch.compile's mode for --compile: `auto` compiles (mode default) on a CUDA GPU only;
    reduce-overhead (CUDA graphs) is refused elsewhere, where torch.compile would quietly compile
    without them and the run would be taken for a CUDA graphs figure."""
    if requested == "reduce-overhead" and device.type != "cuda":
        raise ConfigError(f"--compile reduce-overhead captures the step in CUDA graphs, which need a CUDA GPU; "
                          f"this rank trains on {device.type} (--compile default compiles without them)")
    if requested == "auto":
        return "default" if device.type == "cuda" else "off"
    return requested




def init_dist(threads: int = 0, share: int = 0, engine: str = "horovod"):
    """The Dist the engine's descriptor names (Engine.dist): Horovod's for --engine horovod, a
    torch.distributed process group for ddp/fsdp. Horovod is optional (ddp and fsdp run where it was
    never built), so a Dist's module, and horovod.torch with dist.py, is imported only when its
    engine is asked for (the worker refuses --engine horovod first, in one line, where Horovod is not
    installed)."""
    return registry.load(registry.get_engine(engine).dist)(threads, share)


# What the trainer hands a model's `build` beyond the data's info keys: keyword -> the Dist attribute,
# and the run options a network may take (contracts.BUILD_OPTIONS).
RUN_KEYWORDS = {"rank": "rank", "world": "size"}


def run_keywords(build, dist, cfg=None) -> dict:
    """This process's Horovod `rank` and the `world` size, and the BUILD_OPTIONS (contracts) of `cfg`, for the
    ones `build` declares as named parameters (hvdbench/contracts/spec.py's TorchModel): a model that
    seeds a random stream per rank reads its rank there, not from the launcher. A `**kwargs`
    catch-all does not declare them, so a build that does not ask is called as before; a config
    keyword set away from its default for a build that does not declare it is refused, in one line."""
    declared = inspect.signature(build).parameters
    named = {name for name, p in declared.items()
             if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)}
    refused = undeclared_option(cfg, named) if cfg is not None else None
    if refused:
        raise ConfigError(refused)
    return {**{name: getattr(dist, attr) for name, attr in RUN_KEYWORDS.items() if name in named},
            **{name: getattr(cfg, name) for name in BUILD_OPTIONS if cfg is not None and name in named}}


class PhaseTimer:
    """Seconds spent in each phase of the steps, summed. On a CPU, the host clock at each phase
    boundary. On a GPU the host runs ahead of the device, so its clock would put the compute into
    whatever waits first: CUDA events recorded on the stream at each boundary give the device's
    time instead, and are read once, at the end (no synchronisation per phase)."""

    def __init__(self, device):
        self.cuda = device.type == "cuda"
        self.sums: dict[str, float] = {}
        self.events: list[tuple[str, object, object]] = []
        self.last = None
        self.steps = 0  # the steps timed

    def _now(self):
        if not self.cuda:
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def start(self) -> None:
        self.last = self._now()

    def mark(self, phase: str) -> None:
        now = self._now()
        if self.cuda:
            self.events.append((phase, self.last, now))
        else:
            self.sums[phase] = self.sums.get(phase, 0.0) + (now - self.last)
        self.last = now

    def totals(self) -> dict[str, float]:
        if self.cuda and self.events:
            self.events[-1][2].synchronize()
            for phase, begin, end in self.events:
                self.sums[phase] = self.sums.get(phase, 0.0) + begin.elapsed_time(end) / 1e3
            self.events.clear()
        return dict(self.sums)


class CompileClock:
    """The seconds torch.compile spends compiling (dynamo's tracing with inductor's code generation,
    a backward compiled when it first runs, CUDA graphs recorded) while this clock is entered, from
    dynamo's compile callbacks, which fire for every compile in the process: the trainer enters it
    around its own steps and evaluations only (a bare loop beside it compiles on its own time)."""

    def __init__(self):
        from torch._dynamo.callback import on_compile_end, on_compile_start

        self.seconds = 0.0
        self._entered = 0
        self._open = 0  # compiles under way (a lazy backward's may nest in another's callbacks)
        self._since = None
        on_compile_start(self._start)
        on_compile_end(self._end)

    def __enter__(self):
        self._entered += 1
        return self

    def __exit__(self, *exc):
        self._entered -= 1

    def _start(self, *args) -> None:  # (2.11, 2.13 and 2.15 pass a CallbackArgs; *args takes any)
        if self._entered:
            self._open += 1
            if self._open == 1:
                self._since = time.perf_counter()

    def _end(self, *args) -> None:
        if self._open:
            self._open -= 1
            if self._open == 0:
                self.seconds += time.perf_counter() - self._since


class Trainer(TrainerBase):
    times_phases = True  # start_timing / stop_timing: compute, exposed communication, update

    def __init__(self, cfg, module, flavor_cfg, data_info: dict, dist, meta: bool = False):
        """`module`: the model folder's torch.py, its functions as TorchHooks (build, loss_and_stats,
        and the optional ones' defaults). `build` gets the data's info keys, and `rank` and `world`
        when it declares them (run_keywords). `meta` (fsdp only): build on the meta device and
        materialise each rank's shard (ModelSpec.build_on_meta)."""
        self.cfg, self.flavor_cfg, self.data_info, self.dist = cfg, flavor_cfg, data_info, dist
        self.hooks = hooks = TorchHooks.of(module)
        self.engine = make_engine(cfg.engine, dist, cfg)
        torch.manual_seed(cfg.seed)
        device = dist.device
        why = fp8.refusal(device) if cfg.precision == "fp8" else None
        if why:  # before anything is built
            raise ConfigError(why)
        self.compile_mode = compile_mode(cfg.compile, device)  # (refuses CUDA graphs off a CUDA GPU)
        with torch.device("meta") if meta else contextlib.nullcontext():
            model = hooks.build(flavor_cfg, **data_info, **run_keywords(hooks.build, dist, cfg))
        if not meta:
            model = model.to(device)
        if cfg.precision == "fp8":
            fp8.to_float8(model)  # before the engine wraps it (FSDP then shards the Float8Linears)
        if cfg.channels_last and self.engine.channels_last_weights:
            model = model.to(memory_format=torch.channels_last)  # 4-d weights only; the rest is unchanged
        self.model = model  # the model folder's network (the engine's wrapper is self.net)
        self.device_batch = DeviceBatches(device, hooks.on_device,
                                          channels_last=cfg.channels_last, overlap=cfg.overlap_copies)

        groups = hooks.param_groups(model, cfg)
        self.net = self.engine.wrap(model, hooks, meta=meta)
        if self.compile_mode != "off":
            compile_regions(self.net, hooks.compile_units, model, self.compile_mode)
        opt = hooks.make_optimizer(self.engine.groups(model, groups), cfg)
        self.optimizer = self.engine.optimizer(opt, self.net)
        self.engine.broadcast(self.net, self.optimizer)

        self.autocast = (torch.autocast(device.type, dtype=DTYPES[cfg.precision])
                         if cfg.precision in DTYPES else contextlib.nullcontext())
        self.scaler = (torch.amp.GradScaler("cuda")
                       if cfg.precision == "fp16" and device.type == "cuda" else None)
        self._training = None
        self.timer = None
        self.unsynced_s = None  # ddp/fsdp: one step's forward and backward without the reduction
        self.compute_delay_s = 0.0  # HVDBENCH_INJECT_COMPUTE_DELAY_S (train/faults.py): a slow rank's compute
        # Compiled runs: the seconds spent compiling in this trainer's steps and evaluations.
        self._compiling = CompileClock() if self.compile_mode != "off" or self.optimizer_compiles() else None

    @property
    def compiles(self) -> bool:
        """Whether the step is compiled (its first call compiles: the loop warms up at least once)."""
        return self._compiling is not None

    @property
    def compile_s(self) -> float | None:
        """Seconds torch.compile spent compiling for this trainer so far (None: nothing compiles)."""
        return self._compiling.seconds if self._compiling else None

    def _clock(self):
        return self._compiling or contextlib.nullcontext()

    def delay_compute(self, seconds: float) -> None:
        """Sleep `seconds` before every micro-batch's forward and backward (a slow rank's compute)."""
        self.compute_delay_s = seconds

    def optimizer_compiles(self) -> bool:
        """Whether the optimizer compiles its own update (LAMB with --fused-optimizer)."""
        return any(g.get("compiled") for g in self.optimizer.param_groups)

    def num_parameters(self) -> int:
        """Every parameter of the whole model (what its weights take in memory, unsharded)."""
        return sum(p.numel() for p in self.model.parameters())

    def num_local(self) -> int:
        """The parameters this rank holds: all of them, except under fsdp (its shard)."""
        return self.engine.local_parameters(self.net)

    def num_trainable(self) -> int:
        """The parameters the optimizer updates, whose gradients Horovod averages every step (a LoRA
        run's adapters; all of them for the other models)."""
        return sum(p.numel() for p in self.model.parameters() if p.requires_grad)

    def set_lr(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def _mode(self, training: bool) -> None:
        if self._training is not training:
            self.net.train(training)
            self._training = training

    def start_timing(self, probe: list[dict] | None = None) -> None:
        """Time the phases of every step from now on (`stop_timing` returns the totals). Engines
        that reduce gradients inside backward (ddp, fsdp) first time `probe` (one step's
        micro-batches) without the reduction: that is the step's compute, and what a synchronised
        step takes beyond it is its exposed communication. One rank has no collective to wait for:
        nothing is probed, and its exposed communication is 0 (the difference would be noise: 10.7 ms
        was recorded for a 1-rank ddp run)."""
        if self.engine.reduces_in_backward and probe and self.dist.size > 1:
            self.unsynced_s = self._unsynced_time(probe)
        self.timer = PhaseTimer(self.dist.device)

    def stop_timing(self) -> dict[str, float]:
        timer, self.timer = self.timer, None
        totals = timer.totals() if timer else {}
        if self.unsynced_s is not None and "compute" in totals:
            # compute held forward + backward + the reduction's wait; split it (never below 0: a
            # noisy probe slower than the synchronised steps means nothing was exposed).
            steps = timer.steps
            comm = max(0.0, totals["compute"] - steps * self.unsynced_s)
            totals["compute"] -= comm
            totals["comm"] = totals.get("comm", 0.0) + comm
        return totals

    def _unsynced_time(self, micro_batches: list[dict], rounds: int = 3) -> float:
        """The median time of a step's forward and backward passes with gradient synchronisation off
        (every micro-batch as a non-last one), on every rank at once; the gradients are dropped, so
        the model is unchanged."""
        import statistics

        self._mode(True)
        # The probe's dropout draws must not change the run's: the same seed trains the same model
        # under every engine, probe or not.
        cpu_rng = torch.get_rng_state()
        cuda_rng = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
        times = []
        with self._clock():  # under ddp and fsdp the step without synchronisation compiles once more
            for _ in range(rounds):
                self.dist.sync()
                t0 = time.perf_counter()
                for batch in micro_batches:
                    self._backward(batch, last=False)
                # This rank's own time, read before the ranks meet again: a fast rank's must not
                # include its wait for the slowest (the per-rank times name the straggler from it).
                if self.dist.device.type == "cuda":
                    torch.cuda.synchronize(self.dist.device)
                times.append(time.perf_counter() - t0)
                self.dist.sync()
            # Gradients held back from synchronisation wait inside the engine (fsdp keeps them unsharded,
            # out of the optimizer's reach): one synchronised backward of a zero loss hands them over,
            # and they are dropped with the rest.
            self._backward(micro_batches[0], last=True, zero=True)
        self.optimizer.zero_grad()
        torch.set_rng_state(cpu_rng)
        if cuda_rng is not None:
            torch.cuda.set_rng_state_all(cuda_rng)
        return statistics.median(times)

    def _backward(self, batch: dict, last: bool, micro: int = 1, zero: bool = False) -> None:
        """Forward and backward of one micro-batch, its loss a 1/`micro` share of the step's (or
        nothing, `zero`); the engine reduces gradients after the `last` one only."""
        if self.compute_delay_s:
            time.sleep(self.compute_delay_s)
        with self.engine.accumulating(self.net, last):
            with self.autocast:
                loss, _ = self.net(batch)
            if zero:
                loss = loss * 0
            elif micro > 1:
                loss = loss / micro
            (self.scaler.scale(loss) if self.scaler else loss).backward()

    def train_step(self, micro_batches: list[dict]) -> None:
        """One optimizer step over `accum_steps` micro-batches; the engine averages the summed
        gradients over ranks after the last backward pass (horovod: allreduces that run while
        backward goes on, `finish_backward` waits for the ones still outstanding, the exposed
        communication; ddp/fsdp: inside the last backward)."""
        with self._clock():
            self._train_step(micro_batches)

    def _train_step(self, micro_batches: list[dict]) -> None:
        timer, engine = self.timer, self.engine
        if timer:
            timer.start()
        self._mode(True)
        self.optimizer.zero_grad()
        for i, batch in enumerate(micro_batches):
            self._backward(batch, last=i == len(micro_batches) - 1, micro=len(micro_batches))
        if timer:
            timer.mark("compute")
        engine.finish_backward(self.optimizer)
        if timer:
            timer.mark("comm")
        engine.step(self.optimizer, self.scaler)
        if timer:
            timer.mark("update")
            timer.steps += 1

    @torch.no_grad()
    def evaluate(self, batches, metric):
        """This rank's metric state over `batches` (numpy dicts), ready for `metric.reduce`."""
        self.dist.average_buffers(self.model)
        self._mode(False)
        state = metric.start()
        with self._clock():  # a compiled network compiles once more for evaluation (no gradients)
            for batch in batches:
                if len(batch[next(iter(batch))]) == 0:  # drop_last=False can leave a rank one batch short
                    continue
                with self.autocast:
                    _, stats = self.net(self.device_batch(batch))
                state = metric.update(state, stats)
        return metric.local(state)

    # --- compute figures, read around the timed window (hvdbench.train.compute_window); not part of a step ---

    def flops_per_sample(self, spec, flavor: str, kind) -> float | None:
        """Training FLOPs per sample of this run's network, counted on the meta device for the
        run's data sizes and dataset kind (hvdbench.frameworks.torch.flops), once per network, code and
        library versions (count_once: later runs read the user's cache); None where it cannot be
        counted. The run's random streams are left as they were (a count on the CPU draws its weights)."""
        with torch.random.fork_rng(devices=[]):
            return count_flops(spec, flavor, info=self.data_info, kind=kind).training  # None: not countable

    def reset_peak_memory(self) -> None:
        if self.dist.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.dist.device)

    def peak_memory(self) -> dict[str, float]:
        """GB (1e9 bytes) allocated and reserved at most since reset_peak_memory (GPUs; {} on a CPU)."""
        if self.dist.device.type != "cuda":
            return {}
        return {"mem_allocated_gb": torch.cuda.max_memory_allocated(self.dist.device) / 1e9,
                "mem_reserved_gb": torch.cuda.max_memory_reserved(self.dist.device) / 1e9}

    def param_digest(self) -> str:
        """sha256 of every parameter's bytes, whole (fsdp gathers its shards: every rank calls this),
        in order: equal digests = equal models."""
        h = hashlib.sha256()
        for name, p in self.engine.full_parameters(self.net):
            h.update(name.encode())
            h.update(p.float().cpu().numpy().tobytes())
        return h.hexdigest()

    def parameters_by_name(self) -> dict:
        """Every parameter, whole, as numpy arrays (a collective under fsdp; for comparing engines)."""
        return {name: p.float().cpu().numpy() for name, p in self.engine.full_parameters(self.net)}
