"""Framework-neutral model specs: flavors, metric, MLPerf target, default hyperparameters.

A spec is data. The framework code that builds the network lives in
`hvdbench/frameworks/<fw>/models/<name>.py` and is imported only inside a worker.

    from hvdbench.models import get_spec
    spec = get_spec("resnet50")          # unknown names: ConfigError listing the valid ones
    cfg = spec.flavor("debug")           # the flavor's dataclass config
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

from hvdbench.errors import ConfigError

# name -> module under hvdbench.models that defines SPEC. Imported lazily (specs are cheap, but
# this keeps `hvdbench --help` from touching them at all).
REGISTRY = {
    "resnet50": "hvdbench.models.resnet50",
    "bert": "hvdbench.models.bert",
}


@dataclass(frozen=True)
class ModelSpec:
    name: str
    flavors: dict[str, Any]  # flavor name -> dataclass instance (the network's size)
    default_flavor: str
    frameworks: tuple[str, ...]  # "torch", "tensorflow"
    data_kinds: tuple[str, ...]  # dataset kinds it trains on: "images", "bert", "bert_packed"
    metric_name: str  # e.g. "top1_accuracy", "masked_lm_accuracy"
    mlperf_target: float  # MLPerf's quality target for the full-size flavors
    flavor_targets: dict[str, float] = field(default_factory=dict)  # e.g. debug on built-in data
    defaults: dict[str, Any] = field(default_factory=dict)  # batch_per_gpu, lr, warmup_epochs, ...

    def flavor(self, name: str | None) -> Any:
        name = name or self.default_flavor
        if name not in self.flavors:
            raise ConfigError(f"model {self.name} has no flavor {name!r}; valid: {', '.join(self.flavors)}")
        return self.flavors[name]

    def target(self, flavor: str | None) -> float:
        return self.flavor_targets.get(flavor or self.default_flavor, self.mlperf_target)


def model_names() -> list[str]:
    return sorted(REGISTRY)


def get_spec(name: str) -> ModelSpec:
    if name not in REGISTRY:
        raise ConfigError(f"unknown model {name!r}; valid: {', '.join(model_names())}")
    return importlib.import_module(REGISTRY[name]).SPEC
