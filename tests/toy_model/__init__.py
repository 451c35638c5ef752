"""A toy model living outside hvdbench: a small MLP learning a generated regression task.

It is the worked example of docs/adding-a-model.md and the proof, in the tests, that a model is
one folder plus one registry line. Registered with an entry point (no hvdbench file changes):

    [project.entry-points."hvdbench.models"]
    toy = "toy_model"

    hvdbench prepare synthetic --like toy_regression --samples 4096 --out data/toy
    horovodrun -np 2 -H localhost:2 --gloo hvdbench train toy --data data/toy --out runs/toy
"""

from dataclasses import dataclass

from hvdbench.contracts import ModelSpec, eval_loss
from toy_model.data import REGRESSION


@dataclass(frozen=True)
class ToyConfig:
    hidden: int = 64  # units of each of the two hidden layers
    features: int = 8  # inputs per sample (synthetic data; a dataset's manifest gives its own)


FLAVORS = {"debug": ToyConfig(), "full": ToyConfig(hidden=1024, features=256)}

SPEC = ModelSpec(
    name="toy",
    flavors=FLAVORS,
    default_flavor="debug",
    frameworks=("torch",),
    kinds=(REGRESSION,),
    # Mean squared error on the validation split; lower is better. The data's noise alone scores
    # 0.01 (its variance); predicting the mean scores ~0.9.
    metric=eval_loss("eval_mse"),
    mlperf_target=0.05,
    defaults={
        # Adam at 3e-3 for a global batch of 64, grown linearly with the batch.
        "batch_per_gpu": 32,
        "optimizer": "adam",
        "lr": 3e-3,
        "lr_base_batch": 64,
        "lr_scaling": "linear",
        "warmup_epochs": 0.0,
        "end_lr": 1e-4,
        "decay_power": 1.0,
        "weight_decay": 0.0,
        "max_epochs": 20.0,
        "eval_every": 1.0,
        "eval_unit": "epochs",
    },
    parameters={"debug": 8 * 64 + 64 + 64 * 64 + 64 + 64 + 1},
)
