"""The registry lookup: a model's spec and a dataset kind by name, from the one registry list
(`hvdbench/models/__init__.py`, read by name: no model folder is imported until it is asked for)
and the entry points of installed packages.

    from hvdbench.contracts import get_spec, get_kind
    spec = get_spec("resnet50")          # unknown names: ConfigError listing the valid ones
    cfg = spec.flavor("debug")           # the flavor's dataclass config
    kind = get_kind("images")            # a dataset kind, by the name its manifests carry

A package outside hvdbench registers its own with an entry point in the `hvdbench.models` group,
`<name> = <module that defines SPEC>`, e.g. in its pyproject.toml:

    [project.entry-points."hvdbench.models"]
    toy = "toy_model"
"""

from __future__ import annotations

import importlib
from functools import lru_cache

from hvdbench.contracts.kinds import DatasetKind
from hvdbench.contracts.spec import ModelSpec
from hvdbench.errors import ConfigError
from hvdbench.installed import entry_points_of

ENTRY_POINT_GROUP = "hvdbench.models"
REGISTRY_MODULE = "hvdbench.models"  # its REGISTRY: name -> module defining SPEC


@lru_cache(maxsize=1)
def _modules() -> dict[str, str]:
    """Built-in models and those of installed packages (a built-in name cannot be taken over)."""
    found = {ep.name: ep.value for ep in entry_points_of(ENTRY_POINT_GROUP)}
    return {**found, **importlib.import_module(REGISTRY_MODULE).REGISTRY}


def model_names() -> list[str]:
    return sorted(_modules())


@lru_cache(maxsize=None)
def get_spec(name: str) -> ModelSpec:
    modules = _modules()
    if name not in modules:
        raise ConfigError(f"unknown model {name!r}; valid: {', '.join(model_names())}")
    module = importlib.import_module(modules[name])
    spec = getattr(module, "SPEC", None)
    if not isinstance(spec, ModelSpec) or spec.name != name:
        raise ConfigError(f"model {name!r}: {modules[name]} does not define SPEC = ModelSpec(name={name!r}, ...)")
    # Where torch.py / tf.py are: the spec's own package.
    object.__setattr__(spec, "package", module.__name__)
    return spec


def specs() -> list[ModelSpec]:
    return [get_spec(name) for name in model_names()]


def kind_names() -> list[str]:
    return sorted({k.name for spec in specs() for k in spec.kinds})


def get_kind(name: str) -> DatasetKind:
    """The dataset kind a manifest names (shared kinds are one object, listed by several models)."""
    for spec in specs():
        for kind in spec.kinds:
            if kind.name == name:
                return kind
    raise ConfigError(f"unknown dataset kind {name!r}; valid: {', '.join(kind_names())}")


def expected_parameters(model: str, flavor: str) -> int | None:
    """The exact parameter count a model's flavor is known to have (None when not recorded)."""
    try:
        return get_spec(model).parameters.get(flavor)
    except ConfigError:
        return None


def eval_interval(benchmark: str, batch: float) -> float | None:
    """The samples MLPerf's rules put between two evaluations of `benchmark` at global batch `batch`,
    where they grow with the batch (ModelSpec.mlperf_eval_interval); None where the interval is fixed
    or hvdbench has no model for the benchmark."""
    for spec in specs():
        if spec.benchmark == benchmark and spec.mlperf_eval_interval is not None:
            return spec.mlperf_eval_interval(batch)
    return None


def counts_samples(benchmark: str) -> bool:
    """Whether the MLPerf benchmark evaluates every N samples (its `epoch_num` is then a sample
    count, as in MLPerf BERT's logs); False for benchmarks hvdbench has no model for."""
    for spec in specs():
        if spec.benchmark == benchmark:
            return spec.defaults.get("eval_unit") == "samples"
    return False
