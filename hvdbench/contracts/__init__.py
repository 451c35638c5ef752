"""The contracts every layer shares about models (the ground floor: imports nothing of hvdbench
but errors and output): what a model folder provides and how it is found by name.

    from hvdbench.contracts import ModelSpec, DatasetKind, Metric, get_spec, get_kind
"""

from hvdbench.contracts.kinds import DatasetKind
from hvdbench.contracts.metrics import GatheredMetric, Metric, RatioMetric, accuracy, eval_loss
from hvdbench.contracts.registry import (
    ENTRY_POINT_GROUP,
    counts_samples,
    eval_interval,
    expected_parameters,
    get_kind,
    get_spec,
    kind_names,
    model_names,
    specs,
)
from hvdbench.contracts.spec import (
    BUILD_OPTIONS,
    FRAMEWORK_MODULES,
    MllogValue,
    ModelSpec,
    PublishedFlops,
    RunFacts,
    TensorFlowModel,
    TorchModel,
    only_with,
    undeclared_option,
)

__all__ = [
    "DatasetKind", "GatheredMetric", "Metric", "RatioMetric", "accuracy", "eval_loss", "ENTRY_POINT_GROUP",
    "counts_samples", "eval_interval", "expected_parameters", "get_kind", "get_spec", "kind_names", "model_names",
    "specs",
    "BUILD_OPTIONS", "FRAMEWORK_MODULES", "MllogValue", "ModelSpec", "PublishedFlops", "RunFacts", "TensorFlowModel",
    "TorchModel", "only_with", "undeclared_option",
]
