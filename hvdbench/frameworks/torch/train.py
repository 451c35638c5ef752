"""The PyTorch trainer the worker drives: a model, Horovod's DistributedOptimizer, one step at a time.

    dist = init_dist(threads=0)
    trainer = Trainer(cfg, spec.framework_module("torch"), flavor_cfg, data_info, dist)
    trainer.train_step([trainer.device_batch(b) for b in micro_batches])
    state = trainer.evaluate(val_loader, spec.metric)     # this rank's metric state

Precision: bf16/fp16 run the forward pass under autocast; fp16 on CUDA scales the loss
(GradScaler) so small gradients survive, synchronising Horovod's allreduce before the unscale.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import time

import torch

from hvdbench.errors import ConfigError
from hvdbench.frameworks.torch.data import DeviceBatches
from hvdbench.frameworks.torch.dist import Dist

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}

# cfg.optimizer -> the optimizer over parameter groups (a model may bring its own: make_optimizer).
OPTIMIZERS = {
    "sgd": lambda groups, cfg: torch.optim.SGD(groups, lr=cfg.lr, momentum=cfg.momentum),
    "adamw": lambda groups, cfg: torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.999), eps=1e-6),
    "adam": lambda groups, cfg: torch.optim.Adam(groups, lr=cfg.lr, betas=(0.9, 0.999), eps=1e-8),
}


def init_dist(threads: int = 0, share: int = 0) -> Dist:
    return Dist(threads, share)


# What the trainer hands a model's `build` beyond the data's info keys: keyword -> the Dist attribute.
RUN_KEYWORDS = {"rank": "rank", "world": "size"}


def run_keywords(build, dist) -> dict:
    """This process's Horovod `rank` and the `world` size, for the ones `build` declares as named
    parameters (hvdbench/contracts/spec.py's TorchModel): a model that seeds a random stream per rank
    reads its rank there, not from the launcher. A `**kwargs` catch-all does not declare them, so a
    build that does not ask is called as before."""
    declared = inspect.signature(build).parameters
    return {name: getattr(dist, attr) for name, attr in RUN_KEYWORDS.items()
            if name in declared and declared[name].kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                            inspect.Parameter.KEYWORD_ONLY)}


def param_groups(model, cfg) -> list[dict]:
    """No weight decay on biases and BatchNorm/LayerNorm parameters (MLPerf's references); frozen
    parameters (a LoRA base) are left out."""
    params = [p for p in model.parameters() if p.requires_grad]
    return [{"params": [p for p in params if p.ndim > 1], "weight_decay": cfg.weight_decay},
            {"params": [p for p in params if p.ndim <= 1], "weight_decay": 0.0}]


def make_optimizer(groups: list[dict], cfg):
    if cfg.optimizer not in OPTIMIZERS:
        raise ConfigError(f"optimizer {cfg.optimizer!r} has no PyTorch implementation here; "
                          f"valid: {', '.join(OPTIMIZERS)}")
    return OPTIMIZERS[cfg.optimizer](groups, cfg)


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


class Trainer:
    def __init__(self, cfg, module, flavor_cfg, data_info: dict, dist: Dist):
        """`module`: the model folder's torch.py (build, loss_and_stats, optional on_device,
        param_groups, make_optimizer). `build` gets the data's info keys, and `rank` and `world`
        when it declares them (run_keywords)."""
        self.cfg, self.flavor_cfg, self.data_info, self.dist = cfg, flavor_cfg, data_info, dist
        self.module = module
        torch.manual_seed(cfg.seed)
        device = dist.device
        model = module.build(flavor_cfg, **data_info, **run_keywords(module.build, dist)).to(device)
        self.model = model
        self.device_batch = DeviceBatches(device, getattr(module, "on_device", None))

        groups = getattr(module, "param_groups", param_groups)(model, cfg)
        opt = getattr(module, "make_optimizer", make_optimizer)(groups, cfg)
        self.optimizer = dist.distributed_optimizer(opt, model, cfg.accum_steps, cfg.fp16_allreduce)
        dist.broadcast_state(model, self.optimizer)

        self.autocast = (torch.autocast(device.type, dtype=DTYPES[cfg.precision])
                         if cfg.precision in DTYPES else contextlib.nullcontext())
        self.scaler = (torch.amp.GradScaler("cuda")
                       if cfg.precision == "fp16" and device.type == "cuda" else None)
        self._training = None
        self.timer = None

    def compile(self, example: dict) -> None:
        """Nothing to prepare ahead in eager PyTorch (the TensorFlow trainer traces its graphs)."""

    def num_parameters(self) -> int:
        """Every parameter (what the model's weights take in memory)."""
        return sum(p.numel() for p in self.model.parameters())

    def num_trainable(self) -> int:
        """The parameters the optimizer updates, whose gradients Horovod averages every step (a LoRA
        run's adapters; all of them for the other models)."""
        return sum(p.numel() for p in self.model.parameters() if p.requires_grad)

    def set_lr(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def _mode(self, training: bool) -> None:
        if self._training is not training:
            self.model.train(training)
            self._training = training

    def start_timing(self) -> None:
        """Time the phases of every step from now on (`stop_timing` returns the totals)."""
        self.timer = PhaseTimer(self.dist.device)

    def stop_timing(self) -> dict[str, float]:
        timer, self.timer = self.timer, None
        return timer.totals() if timer else {}

    def train_step(self, micro_batches: list[dict]) -> None:
        """One optimizer step over `accum_steps` micro-batches; Horovod averages the summed
        gradients over ranks after the last backward pass. Its allreduces run while backward goes
        on; `synchronize()` waits for the ones still outstanding (the exposed communication) and
        the update then runs without synchronising again (what `optimizer.step()` does in one)."""
        timer = self.timer
        if timer:
            timer.start()
        self._mode(True)
        self.optimizer.zero_grad()
        for batch in micro_batches:
            with self.autocast:
                loss, _ = self.module.loss_and_stats(self.model, batch)
            if len(micro_batches) > 1:
                loss = loss / len(micro_batches)
            (self.scaler.scale(loss) if self.scaler else loss).backward()
        if timer:
            timer.mark("compute")
        self.optimizer.synchronize()
        if timer:
            timer.mark("comm")
        with self.optimizer.skip_synchronize():
            if self.scaler:
                self.scaler.step(self.optimizer)
                self.scaler.update()
            else:
                self.optimizer.step()
        if timer:
            timer.mark("update")

    @torch.no_grad()
    def evaluate(self, batches, metric):
        """This rank's metric state over `batches` (numpy dicts), ready for `metric.reduce`."""
        self.dist.average_buffers(self.model)
        self._mode(False)
        state = metric.start()
        for batch in batches:
            if len(batch[next(iter(batch))]) == 0:  # drop_last=False can leave a rank one batch short
                continue
            with self.autocast:
                _, stats = self.module.loss_and_stats(self.model, self.device_batch(batch))
            state = metric.update(state, stats)
        return metric.local(state)

    def param_digest(self) -> str:
        """sha256 of every trainable parameter's bytes, in order: equal digests = equal models."""
        h = hashlib.sha256()
        for name, p in self.model.named_parameters():
            h.update(name.encode())
            h.update(p.detach().float().cpu().numpy().tobytes())
        return h.hexdigest()
