"""Dataset batches (dicts of numpy arrays) to torch tensors on the training device.

    to_device = DeviceBatches(torch.device("cuda", 0), resnet.on_device, channels_last=True, overlap=True)
    batch = to_device({"images": uint8_nhwc, "labels": y})

Every field keeps its dtype on the way (images cross as uint8, a quarter of float32's bytes); the
model's own `on_device(batch, device)` (e.g. ResNet's normalisation) then runs on the device.
On a GPU the host copies go through pinned memory without blocking the host; with `overlap`
(--overlap-copies) they run on a side stream, so a batch's copy proceeds while the kernels the host
queued before it (the step before) still run, and the compute stream waits for it only where the
batch is first used. `channels_last` (--channels-last) lays every 4-d floating tensor the model
folder's on_device returns (images) out NHWC.
"""

from __future__ import annotations

import numpy as np
import torch


class DeviceBatches:
    def __init__(self, device: torch.device, on_device=None, channels_last: bool = False, overlap: bool = False):
        self.device = device
        self.on_device = on_device
        self.pin = device.type == "cuda"
        self.channels_last = channels_last
        self.stream = torch.cuda.Stream(device) if overlap and self.pin else None

    def __call__(self, batch: dict) -> dict[str, torch.Tensor]:
        host = {}
        for name, value in batch.items():
            t = torch.from_numpy(value) if isinstance(value, np.ndarray) else value
            host[name] = t.pin_memory() if self.pin and not t.is_pinned() else t
        if self.stream is None:
            out = {name: t.to(self.device, non_blocking=self.pin) for name, t in host.items()}
        else:
            compute = torch.cuda.current_stream(self.device)
            with torch.cuda.stream(self.stream):
                out = {name: t.to(self.device, non_blocking=True) for name, t in host.items()}
            compute.wait_stream(self.stream)
            for t in out.values():
                # Made on the side stream, used on the compute stream: the allocator must not hand
                # the memory to the next copy before the step that reads it is done.
                t.record_stream(compute)
        out = self.on_device(out, self.device) if self.on_device else out
        if self.channels_last:
            out = {name: t.contiguous(memory_format=torch.channels_last)
                   if t.dim() == 4 and t.is_floating_point() else t for name, t in out.items()}
        return out
