"""The PyTorch trainer the worker drives: a model, Horovod's DistributedOptimizer, one step at a time.

    dist = init_dist(threads=0)
    trainer = Trainer(cfg, flavor_cfg, data_info, dist)
    trainer.train_step([trainer.device_batch(b) for b in micro_batches])
    correct, total = trainer.evaluate(val_loader)        # this rank's counts

Precision: bf16/fp16 run the forward pass under autocast; fp16 on CUDA scales the loss
(GradScaler) so small gradients survive, synchronising Horovod's allreduce before the unscale.
"""

from __future__ import annotations

import contextlib
import hashlib

import torch

from hvdbench.frameworks import model_module
from hvdbench.frameworks.torch.data import DeviceBatches
from hvdbench.frameworks.torch.dist import Dist

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def init_dist(threads: int = 0) -> Dist:
    return Dist(threads)


class Trainer:
    def __init__(self, cfg, flavor_cfg, data_info: dict, dist: Dist):
        self.cfg, self.flavor_cfg, self.data_info, self.dist = cfg, flavor_cfg, data_info, dist
        self.module = model_module("torch", cfg.model)
        torch.manual_seed(cfg.seed)
        device = dist.device
        model = self.module.build(flavor_cfg, **data_info).to(device)
        # On a GPU, images go in channels-last (NHWC): cuDNN then runs its NHWC kernels and every
        # activation stays NHWC. The parameters keep the default layout: Horovod's collectives
        # (broadcast, gradient allreduce) refuse tensors that are not contiguous in it.
        channels_last = device.type == "cuda" and data_info.get("kind") == "images"
        self.model = model
        self.device_batch = DeviceBatches(device, channels_last)

        # No weight decay on biases and BatchNorm/LayerNorm parameters (MLPerf's references).
        decay = [p for p in model.parameters() if p.ndim > 1]
        no_decay = [p for p in model.parameters() if p.ndim <= 1]
        groups = [{"params": decay, "weight_decay": cfg.weight_decay},
                  {"params": no_decay, "weight_decay": 0.0}]
        if cfg.optimizer == "sgd":
            opt = torch.optim.SGD(groups, lr=cfg.lr, momentum=cfg.momentum)
        else:
            opt = torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.999), eps=1e-6)
        self.optimizer = dist.distributed_optimizer(opt, model, cfg.accum_steps, cfg.fp16_allreduce)
        dist.broadcast_state(model, self.optimizer)

        self.autocast = (torch.autocast(device.type, dtype=DTYPES[cfg.precision])
                         if cfg.precision in DTYPES else contextlib.nullcontext())
        self.scaler = (torch.amp.GradScaler("cuda")
                       if cfg.precision == "fp16" and device.type == "cuda" else None)
        self._training = None

    def compile(self, example: dict) -> None:
        """Nothing to prepare ahead in eager PyTorch (the TensorFlow trainer traces its graphs)."""

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    def synthetic_batch(self) -> dict[str, torch.Tensor]:
        """One fixed random batch, moved to the device once and reused every step."""
        gen = torch.Generator().manual_seed(self.cfg.seed + self.dist.rank)
        batch = self.module.synthetic_batch(self.flavor_cfg, self.cfg.batch_per_gpu, gen,
                                            **self.data_info)
        return self.device_batch(batch)

    def set_lr(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def _mode(self, training: bool) -> None:
        if self._training is not training:
            self.model.train(training)
            self._training = training

    def train_step(self, micro_batches: list[dict]) -> None:
        """One optimizer step over `accum_steps` micro-batches; Horovod averages the summed
        gradients over ranks after the last backward pass."""
        self._mode(True)
        self.optimizer.zero_grad()
        for batch in micro_batches:
            with self.autocast:
                loss, _ = self.module.loss_and_stats(self.model, batch)
            if len(micro_batches) > 1:
                loss = loss / len(micro_batches)
            (self.scaler.scale(loss) if self.scaler else loss).backward()
        if self.scaler:
            self.optimizer.synchronize()
            with self.optimizer.skip_synchronize():
                self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()

    @torch.no_grad()
    def evaluate(self, batches) -> tuple[float, float]:
        """This rank's (correct, total) over `batches` (numpy dicts)."""
        self.dist.average_buffers(self.model)
        self._mode(False)
        correct = total = 0
        for batch in batches:
            if len(batch[next(iter(batch))]) == 0:  # drop_last=False can leave a rank one batch short
                continue
            with self.autocast:
                _, stats = self.module.loss_and_stats(self.model, self.device_batch(batch))
            correct += stats["correct"]
            total += stats["total"]
        return float(correct), float(total)

    def param_digest(self) -> str:
        """sha256 of every trainable parameter's bytes, in order: equal digests = equal models."""
        h = hashlib.sha256()
        for name, p in self.model.named_parameters():
            h.update(name.encode())
            h.update(p.detach().float().cpu().numpy().tobytes())
        return h.hexdigest()
