"""--precision fp8: the linear layers' matmuls in float8 through torchao (an optional extra:
`pip install 'hvdbench[fp8]'`), the rest of the step under bf16 autocast, as torchtitan trains it.

    why = refusal(torch.device("cuda", 0))    # None, or one line saying why fp8 cannot run here
    converted = to_float8(model)              # how many nn.Linear became torchao's Float8Linear

Float8 tensor cores exist from CUDA compute capability 8.9 (Ada, Hopper, Blackwell); elsewhere the
run is refused before it builds anything. torchao's Float8Linear keeps its weights in the run's
dtype and casts weights, inputs and output gradients to float8 inside each matmul with dynamic
(per-tensor) scales, so the optimizer, FSDP's sharding and checkpoints see ordinary parameters.
A run's MFU is still measured against the bf16 peak (hvdbench/peaks.py's `peak_precision`).
"""

from __future__ import annotations

import importlib.util

import torch

MIN_CAPABILITY = (8, 9)  # float8 tensor cores: Ada (8.9), Hopper (9.0), Blackwell (10.x, 12.x)


def refusal(device: torch.device) -> str | None:
    """Why fp8 cannot train on `device` (one line), or None where it can."""
    if device.type != "cuda":
        return (f"--precision fp8: float8 matmuls need a CUDA GPU of compute capability >= "
                f"{MIN_CAPABILITY[0]}.{MIN_CAPABILITY[1]}; this run is on {device.type}")
    capability = torch.cuda.get_device_capability(device)
    if capability < MIN_CAPABILITY:
        return (f"--precision fp8: {torch.cuda.get_device_name(device)} has compute capability "
                f"{capability[0]}.{capability[1]}; float8 matmuls need >= {MIN_CAPABILITY[0]}.{MIN_CAPABILITY[1]}")
    if importlib.util.find_spec("torchao") is None:
        return "--precision fp8 needs torchao: pip install 'hvdbench[fp8]'"
    return None


def converts(module: torch.nn.Module, name: str) -> bool:
    """Which linears train in float8 (torchtitan's rule): not the output layer (`lm_head`, whose
    logits the loss wants precise), and only both of whose sizes are multiples of 16 (the float8
    matmul's alignment)."""
    return (isinstance(module, torch.nn.Linear) and name.split(".")[-1] != "lm_head"
            and module.in_features % 16 == 0 and module.out_features % 16 == 0)


def to_float8(model: torch.nn.Module) -> int:
    """Swap `model`'s linears that `converts` for torchao's Float8Linear (dynamic scaling, in place,
    before an engine wraps it); the number swapped."""
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    convert_to_float8_training(model, config=Float8LinearConfig(), module_filter_fn=converts)
    return sum(type(m).__name__ == "Float8Linear" for m in model.modules())
