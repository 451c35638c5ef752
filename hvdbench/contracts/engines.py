"""The engines (`--engine NAME`): how the ranks train together, each one descriptor in one registry.

    from hvdbench.contracts.engines import get_engine, engine_names
    engine = get_engine("fsdp")       # unknown names: ConfigError listing the valid ones
    engine.shards_state               # True: weights, gradients and optimizer state divided by the ranks
    engine_names()                    # ['horovod', 'ddp', 'fsdp', ...the installed packages' own]

A descriptor holds what every layer asks of an engine without importing a framework (the sweep,
train's checks, the memory estimate, the report), and names its implementation by import path
("module:attribute"), loaded only where a rank trains (hvdbench/frameworks/torch/train.py). Code
outside this file asks the descriptor, never compares an engine's name.

A built-in engine is its descriptor here plus one line of BUILT_IN; a package outside hvdbench
registers its own with an entry point in the `hvdbench.engines` group, `<name> = <module>:<attribute
holding its Engine>`, e.g. in its pyproject.toml (docs/adding-an-engine.md walks through one):

    [project.entry-points."hvdbench.engines"]
    toyddp = "toy_engine:ENGINE"
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from hvdbench.errors import ConfigError
from hvdbench.installed import Registry, entry_points_of

ENTRY_POINT_GROUP = "hvdbench.engines"
FUSION_BUFFER = 64 << 20  # HOROVOD_FUSION_THRESHOLD's default: the bytes Horovod's fusion buffer holds


@dataclass(frozen=True)
class Engine:
    """One engine's framework-free facts. The defaults are a torch.distributed data-parallel
    engine (what ddp is); a new engine names what differs."""

    name: str
    summary: str  # what it is, in a few words (`hvdbench env`, the docs)
    # "module:Class" of its torch engine (the interface of hvdbench/frameworks/torch/engines.py: wrap,
    # groups, optimizer, broadcast, accumulating, finish_backward, step, inner, full_parameters,
    # local_parameters), constructed as Class(dist, cfg, engine)
    torch: str
    # "module:Class" of the Dist its ranks start (Class(threads, share)): a torch.distributed process
    # group under any launcher, or Horovod's
    dist: str = "hvdbench.frameworks.torch.process_group:TorchDist"
    frameworks: tuple[str, ...] = ("torch",)  # the frameworks whose trainer implements it
    # Its ranks start Horovod: it needs Horovod installed and a launcher whose ranks can start it
    # (hvdbench/launchers/registry.py `refusal`).
    needs_horovod: bool = False
    # Weights, gradients and optimizer state divided over the ranks: the memory estimate divides them,
    # a model the spec builds on the meta device is built so (ModelSpec.build_on_meta), and its
    # parameters are sharded tensors (torch's fused SGD has no rule for them).
    shards_state: bool = False
    # Gradients reduce inside backward (DDP's hooks, FSDP's reduce-scatter): the trainer measures the
    # exposed communication as backward with synchronisation minus backward without. Else the engine
    # waits for them in a phase of its own (Horovod's synchronize()).
    reduces_in_backward: bool = True
    # A rank's compute holds waits for the other ranks (FSDP's parameter all-gathers): the report names
    # no straggler from its per-rank compute and charges no imbalance apart from communication.
    compute_waits_for_peers: bool = False
    buffer_bytes: int = 0  # memory beyond the state each rank holds for the reduction (Horovod's fusion buffer)
    # TrainConfig fields only this engine takes; set away from their defaults under another engine they
    # are refused (train/config.py ENGINE_OPTIONS says each one's refusal).
    options: tuple[str, ...] = ()


HOROVOD = Engine(
    "horovod", "Horovod's DistributedOptimizer (its allreduces overlap backward)",
    torch="hvdbench.frameworks.torch.engines:HorovodEngine", dist="hvdbench.frameworks.torch.dist:Dist",
    frameworks=("torch", "tensorflow"), needs_horovod=True, reduces_in_backward=False, buffer_bytes=FUSION_BUFFER,
    options=("horovod_timeline",))
DDP = Engine("ddp", "torch DistributedDataParallel", torch="hvdbench.frameworks.torch.engines:DdpEngine")
FSDP = Engine(
    "fsdp", "torch FSDP2 (parameters, gradients and optimizer state sharded over the ranks)",
    torch="hvdbench.frameworks.torch.engines:FsdpEngine", shards_state=True, compute_waits_for_peers=True,
    options=("fsdp_offload", "fsdp_reshard_after_forward"))

# One line per built-in engine, in the order the report compares them (the first that ran is the
# others' reference: hvdbench/results/analyses/engines.py).
BUILT_IN = (
    HOROVOD,
    DDP,
    FSDP,
)


def _load() -> dict[str, Engine]:
    """The built-in engines, then those of installed packages (a built-in name cannot be taken over)."""
    found = {}
    for ep in entry_points_of(ENTRY_POINT_GROUP):
        if ep.name in found or any(e.name == ep.name for e in BUILT_IN):
            continue
        try:
            engine = ep.load()
        except (ImportError, AttributeError) as e:
            raise ConfigError(f"engine {ep.name!r}: its entry point {ep.value!r} does not load ({e})") from None
        if not isinstance(engine, Engine) or engine.name != ep.name:
            raise ConfigError(f"engine {ep.name!r}: {ep.value} is not an Engine(name={ep.name!r}, ...)")
        found[ep.name] = engine
    return {**{e.name: e for e in BUILT_IN}, **found}


ENGINES: Registry[Engine] = Registry("engine", _load)
engines, engine_names, find_engine, get_engine = ENGINES.all, ENGINES.names, ENGINES.find, ENGINES.get


def waits_for_peers(name: str) -> bool:
    """Whether a run under engine `name` has per-rank compute that holds waits for the other ranks
    (Engine.compute_waits_for_peers); False for an engine this install does not have."""
    engine = find_engine(name)
    return bool(engine and engine.compute_waits_for_peers)


def load(reference: str):
    """The object a "module:attribute" reference names (an engine's torch class or Dist), imported now."""
    module, _, attribute = reference.partition(":")
    return getattr(importlib.import_module(module), attribute)
