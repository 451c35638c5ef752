"""Dataset batches (dicts of numpy arrays) to torch tensors on the training device.

Images arrive as uint8 NHWC (a quarter of float32's bytes to copy) and are normalised on the device
to float NCHW with ImageNet's channel mean and deviation; every other field keeps its dtype.
"""

from __future__ import annotations

import numpy as np
import torch

MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
STD = (0.229 * 255, 0.224 * 255, 0.225 * 255)


class DeviceBatches:
    def __init__(self, device: torch.device, channels_last: bool = False):
        self.device = device
        self.channels_last = channels_last
        self.mean = torch.tensor(MEAN, device=device).view(1, 3, 1, 1)
        self.std = torch.tensor(STD, device=device).view(1, 3, 1, 1)
        self.pin = device.type == "cuda"

    def __call__(self, batch: dict) -> dict[str, torch.Tensor]:
        out = {}
        for name, value in batch.items():
            t = torch.from_numpy(value) if isinstance(value, np.ndarray) else value
            if self.pin and not t.is_pinned():
                t = t.pin_memory()
            t = t.to(self.device, non_blocking=self.pin)
            out[name] = self.images(t) if name == "images" else t
        return out

    def images(self, x: torch.Tensor) -> torch.Tensor:
        x = x.permute(0, 3, 1, 2).float().sub_(self.mean).div_(self.std)
        # NHWC in memory is what tensor cores want; NCHW-contiguous is what the CPU kernels want.
        return x.contiguous(memory_format=torch.channels_last if self.channels_last
                            else torch.contiguous_format)
