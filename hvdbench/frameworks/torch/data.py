"""Dataset batches (dicts of numpy arrays) to torch tensors on the training device.

Every field keeps its dtype on the way (images cross as uint8, a quarter of float32's bytes); the
model's own `on_device(batch, device)` (e.g. ResNet's normalisation) then runs on the device.
"""

from __future__ import annotations

import numpy as np
import torch


class DeviceBatches:
    def __init__(self, device: torch.device, on_device=None):
        self.device = device
        self.on_device = on_device
        self.pin = device.type == "cuda"

    def __call__(self, batch: dict) -> dict[str, torch.Tensor]:
        out = {}
        for name, value in batch.items():
            t = torch.from_numpy(value) if isinstance(value, np.ndarray) else value
            if self.pin and not t.is_pinned():
                t = t.pin_memory()
            out[name] = t.to(self.device, non_blocking=self.pin)
        return self.on_device(out, self.device) if self.on_device else out
