"""The torch implementations of the engines (`--engine`), behind one small interface the Trainer
drives, so the step, the measurement and the evaluation exist once. Each engine's descriptor
(hvdbench/contracts/engines.py) names its class here by import path; a package's own engine may
subclass one of these.

    engine = make_engine("fsdp", dist, cfg)
    net = engine.wrap(model, hooks, meta=False)       # what the step calls: net(batch) -> (loss, stats)
    opt = engine.optimizer(make_optimizer(engine.groups(model, groups), cfg), net)
    with engine.accumulating(net, last=False): loss.backward()
    engine.finish_backward(opt); engine.step(opt, scaler)

- horovod: Horovod's DistributedOptimizer averages the gradients, its allreduces overlapping
  backward; `finish_backward` waits for the ones still out (the exposed communication).
- ddp: torch's DistributedDataParallel; its reducer allreduces gradient buckets from hooks during
  backward, and backward returns only when they are done, so the exposed communication is inside
  backward's time (the Trainer measures it as backward with the reduction minus backward without:
  hvdbench/frameworks/torch/train.py `PhaseTimer`, docs/design.md). BatchNorm statistics stay per
  rank (broadcast_buffers=False) and are averaged for evaluation, as under Horovod.
- fsdp: FSDP2 (`torch.distributed.fsdp.fully_shard`): each of the model's repeated blocks (its
  torch.py's `shard_units`, hooks.py's TorchHooks) and then the whole is sharded over the ranks; parameters are gathered
  for each block's forward and backward, and gradients reduce-scattered so each rank updates its
  own shard (optimizer state sharded too).

The model is wrapped in `LossModule`, whose forward is the model folder's `loss_and_stats`: DDP's
reducer and FSDP's gathering both hang off the root module's forward, and a model's loss may call
its network's parts (a LoRA base's inner model) rather than its forward.
"""

from __future__ import annotations

import contextlib
import inspect

import torch

from hvdbench.contracts import engines as registry

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


class LossModule(torch.nn.Module):
    """`net(batch)` = `module.loss_and_stats(model, batch)`: the one forward every engine wraps."""

    def __init__(self, model, loss_and_stats):
        super().__init__()
        self.model = model
        self._loss_and_stats = loss_and_stats

    def forward(self, batch):
        return self._loss_and_stats(self.model, batch)


def remap_groups(groups: list[dict], before: dict[int, str], after: dict[str, torch.nn.Parameter]) -> list[dict]:
    """The parameter groups a model folder made (param_groups) over the parameters FSDP put in their
    place (fully_shard replaces each by a sharded one): matched by name, every option kept."""
    return [{**g, "params": [after[before[id(p)]] for p in g["params"]]} for g in groups]


def update(opt, scaler) -> None:
    """The optimizer's step, through the fp16 loss scaler when there is one."""
    if scaler:
        scaler.step(opt)
        scaler.update()
    else:
        opt.step()


class HorovodEngine:
    # --channels-last: Horovod refuses the gradients of channels-last weights ("Tensor is required to be
    # contiguous"), so under it only the images and activations are (benchmarks/gpu/README.md); ddp
    # takes them.
    channels_last_weights = False

    def __init__(self, dist, cfg, descriptor: registry.Engine):
        self.dist, self.cfg, self.descriptor = dist, cfg, descriptor

    @property
    def reduces_in_backward(self) -> bool:
        """Whether backward returns with the gradients reduced (the descriptor says; the Trainer's probe asks)."""
        return self.descriptor.reduces_in_backward

    def wrap(self, model, hooks, meta: bool = False):
        return LossModule(model, hooks.loss_and_stats)

    def groups(self, model, groups: list[dict]) -> list[dict]:
        return groups

    def optimizer(self, opt, net):
        return self.dist.distributed_optimizer(opt, net.model, self.cfg.accum_steps, self.cfg.fp16_allreduce)

    def broadcast(self, net, opt) -> None:
        self.dist.broadcast_state(net.model, opt)

    def accumulating(self, net, last: bool):
        return contextlib.nullcontext()  # Horovod counts the backward passes itself

    def finish_backward(self, opt) -> None:
        opt.synchronize()

    def step(self, opt, scaler) -> None:
        with opt.skip_synchronize():  # synchronize() ran in finish_backward
            update(opt, scaler)

    def inner(self, net):
        return net.model

    def full_parameters(self, net):
        """(name, full tensor) for every parameter of the model, in order."""
        for name, p in self.inner(net).named_parameters():
            yield name, p.detach()

    def local_parameters(self, net) -> int:
        return sum(p.numel() for p in self.inner(net).parameters())


class DdpEngine(HorovodEngine):
    channels_last_weights = True

    def wrap(self, model, hooks, meta: bool = False):
        from torch.nn.parallel import DistributedDataParallel

        device = self.dist.device
        loss_module = LossModule(model.to(device), hooks.loss_and_stats)
        if self.dist.size == 1:
            # Nothing to reduce, as Horovod's DistributedOptimizer registers no hooks at one rank: the
            # reducer's hooks and one-rank allreduces took 15 % more CPU per step than a bare loop
            # (ResNet-50 debug, batch 8; benchmarks/bench_train.py --clock cpu), and compiled, DDP
            # splits the graph at its buckets.
            return loss_module
        # Per-rank BatchNorm statistics, averaged for evaluation, as Horovod's runs have them (DDP's
        # default would broadcast rank 0's before every forward: traffic Horovod has not); rank 0's
        # are copied once at the start, as Horovod's broadcast does. torch >= 2.13 says so with
        # forward_sync_buffers=False (its constructor still copies them); before it (2.11, 2.12)
        # broadcast_buffers=False also skips that copy, so it is done here.
        if "forward_sync_buffers" in inspect.signature(DistributedDataParallel.__init__).parameters:
            buffers = {"forward_sync_buffers": False}
        else:
            buffers = {"broadcast_buffers": False}
            broadcast_from_rank0(loss_module, parameters=False)
        net = DistributedDataParallel(
            loss_module, device_ids=[device.index] if device.type == "cuda" else None,
            gradient_as_bucket_view=True, **buffers)
        if self.cfg.fp16_allreduce:
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

            net.register_comm_hook(None, default_hooks.fp16_compress_hook)
        return net  # DDP broadcasts rank 0's parameters and buffers when it is built

    def optimizer(self, opt, net):
        return opt

    def broadcast(self, net, opt) -> None:
        """Done by DistributedDataParallel's constructor; every optimizer starts empty."""

    def accumulating(self, net, last: bool):
        return contextlib.nullcontext() if last or self.dist.size == 1 else net.no_sync()

    def finish_backward(self, opt) -> None:
        """Backward returned after the reducer's last allreduce."""

    def step(self, opt, scaler) -> None:
        update(opt, scaler)

    def inner(self, net):
        return net.model if self.dist.size == 1 else net.module.model


class FsdpEngine(DdpEngine):
    # fully_shard refuses them too ("FSDP does not support non-contiguous parameters yet", torch 2.13)
    channels_last_weights = False

    def wrap(self, model, hooks, meta: bool = False):
        """Shard `model` (built whole from the seed, or on the meta device when `meta`): its units
        first, then the root; a whole-built model starts from rank 0's values on every rank."""
        from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard

        device, cfg = self.dist.device, self.cfg
        net = LossModule(model if meta else model.to(device), hooks.loss_and_stats)
        if not meta:
            broadcast_from_rank0(net)
        self._names = {id(p): name for name, p in model.named_parameters()}
        # bf16 runs compute in bf16 and reduce gradients in fp32 (MLPerf's FSDP recipes); fp16 on
        # the wire when asked (--fp16-allreduce), as Horovod's compression does.
        # fp8 runs keep bf16 parameters too (their linears cast to float8 inside the matmul: torchao).
        bf16 = cfg.precision in ("bf16", "fp8")
        policy = MixedPrecisionPolicy(
            param_dtype=torch.bfloat16 if bf16 else None,
            reduce_dtype=torch.float16 if cfg.fp16_allreduce else torch.float32 if bf16 else None)
        options = {"mp_policy": policy, "reshard_after_forward": cfg.fsdp_reshard_after_forward,
                   **({"offload_policy": CPUOffloadPolicy()} if cfg.fsdp_offload else {})}
        for unit in hooks.shard_units(model):
            fully_shard(unit, **options)
        fully_shard(net, **options)
        if meta:
            net.to_empty(device="cpu" if cfg.fsdp_offload else device)
            with torch.no_grad():
                hooks.init_weights(model)
        return net

    def groups(self, model, groups: list[dict]) -> list[dict]:
        return remap_groups(groups, self._names, dict(model.named_parameters()))

    def accumulating(self, net, last: bool):
        net.set_requires_gradient_sync(last)
        return contextlib.nullcontext()

    def inner(self, net):
        return net.model

    def full_parameters(self, net):
        """Each parameter gathered whole (a collective: every rank calls it, in the same order)."""
        for name, p in net.model.named_parameters():
            yield name, p.detach().full_tensor() if hasattr(p, "full_tensor") else p.detach()

    def local_parameters(self, net) -> int:
        return sum((p.to_local() if hasattr(p, "to_local") else p).numel() for p in net.model.parameters())


def broadcast_from_rank0(net, parameters: bool = True) -> None:
    """Every parameter (unless not `parameters`) and buffer from rank 0 (what DDP's constructor and
    Horovod's broadcast_parameters do), so a model whose build draws per rank still starts equal."""
    import torch.distributed as tdist

    if tdist.get_world_size() == 1:
        return
    with torch.no_grad():
        for t in [*(net.parameters() if parameters else ()), *net.buffers()]:
            tdist.broadcast(t.data, src=0)


def make_engine(name: str, dist, cfg):
    """The torch engine `--engine name` trains with: the class its descriptor names."""
    descriptor = registry.get_engine(name)
    return registry.load(descriptor.torch)(dist, cfg, descriptor)
