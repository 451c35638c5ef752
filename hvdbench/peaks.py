"""Datasheet peaks of accelerators per precision, dense (not the 2:4-sparse figures datasheets print
first), in TFLOP/s per GPU, with their sources; and MFU against them.

    peak_tflops("NVIDIA H100 80GB HBM3", "bf16")   # 989.4  (H100 SXM, dense bf16)
    device_entry("NVIDIA H200-SXM-141GB")           # the H200 row (an MLPerf systems JSON's name)
    mfu(tflops_per_gpu=400.0, peak=989.4)           # 0.404

A device name is matched by the patterns of its row (torch.cuda.get_device_name, nvidia-smi and
MLPerf systems JSONs spell them differently); a CPU, or a GPU not in the table, has no datasheet
peak: its MFU against the datasheet is left empty (`bench compute` measures a peak on any device).

Precisions: fp32 is the non-tensor-core rate (what torch runs with TF32 off), tf32/bf16/fp16/fp8
the tensor-core (matrix-core) rates. A run trained in bf16 autocast is compared with the bf16 peak;
a published fp8 or fp4 submission can exceed that bf16 peak, so its MFU says which peak it assumes.
Part of the library's low floor: imports nothing of hvdbench but errors (train/, bench/ and results/
all read it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8")

NVIDIA_A100 = "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"
NVIDIA_H100 = "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"
NVIDIA_H200 = "https://www.nvidia.com/en-us/data-center/h200/"
NVIDIA_HGX_B200 = "https://www.nvidia.com/en-us/data-center/hgx/"
NVIDIA_GB200 = "https://www.nvidia.com/en-us/data-center/gb200-nvl72/"
NVIDIA_GB300 = "https://www.nvidia.com/en-us/data-center/gb300-nvl72/"
NVIDIA_L40S = "https://www.nvidia.com/en-us/data-center/l40s/"
NVIDIA_V100 = "https://images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf"
AMD_MI300X = "https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html"
AMD_MI355X = "https://www.amd.com/en/products/accelerators/instinct/mi350/mi355x.html"
TORCHTITAN = "https://github.com/pytorch/torchtitan/blob/main/torchtitan/tools/utils.py (get_peak_flops)"


@dataclass(frozen=True)
class Device:
    name: str  # the row's name, e.g. "H100 SXM"
    patterns: tuple[str, ...]  # regular expressions (case-insensitive) over a device's reported name
    tflops: dict[str, float] = field(default_factory=dict)  # precision -> dense TFLOP/s per GPU
    source: str = ""
    note: str = ""


def _token(model: str) -> str:
    """A pattern for a model number standing as a word of a device name: not inside a longer one
    ('NVIDIA RTX A1000 6GB Laptop GPU' is no A100; 'GB200' holds no B200), letters or a dash after it
    allowed ('A100-SXM4-40GB', 'H100 NVL')."""
    return rf"(?<![A-Za-z0-9])(?:{model})(?![A-Za-z0-9])"


# Order matters: the first row whose pattern matches wins (H100 NVL and PCIe before plain H100,
# GB200 before B200).
DEVICES = (
    Device("V100 SXM2", (_token("V100"),), {"fp32": 15.7, "fp16": 125.0}, NVIDIA_V100, "no bf16, tf32 or fp8 units"),
    Device("A100 SXM", (_token("A100") + r"(?!.*PCI)",), {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0},
           NVIDIA_A100, "no fp8 units"),
    Device("A100 PCIe", (_token("A100") + r".*PCI",), {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0}, NVIDIA_A100),
    Device("H100 NVL", (_token("H100") + r".*NVL",), {"fp32": 60.0, "tf32": 417.5, "bf16": 835.0, "fp16": 835.0, "fp8": 1670.0},
           NVIDIA_H100),
    Device("H100 PCIe", (_token("H100") + r".*PCI",), {"fp32": 51.2, "tf32": 378.0, "bf16": 756.0, "fp16": 756.0, "fp8": 1513.0},
           NVIDIA_H100),
    Device("H100 SXM", (_token("H100"), _token("GH200")), {"fp32": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4,
                                              "fp8": 1978.9}, NVIDIA_H100,
           "torch names the SXM part 'NVIDIA H100 80GB HBM3'; GH200's GPU has the same rates"),
    Device("H200", (_token("H200"),), {"fp32": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9},
           NVIDIA_H200, "the H100 SXM's compute with more, faster memory"),
    Device("GB300", (_token("GB300"), _token("B300")), {"tf32": 1250.0, "bf16": 2500.0, "fp16": 2500.0, "fp8": 5000.0},
           NVIDIA_GB300, "NVL72 figures / 72; dgxc-benchmarking uses 2450 (bf16) and 4900 (fp8)"),
    Device("GB200", (_token("GB200"),), {"tf32": 1250.0, "bf16": 2500.0, "fp16": 2500.0, "fp8": 5000.0}, NVIDIA_GB200,
           "NVL72 figures / 72; dgxc-benchmarking uses 2450 (bf16) and 4900 (fp8)"),
    Device("B200", (_token("B200"),), {"fp32": 75.0, "tf32": 1125.0, "bf16": 2250.0, "fp16": 2250.0, "fp8": 4500.0},
           NVIDIA_HGX_B200, "HGX B200 figures / 8"),
    Device("L40S", (_token("L40S"),), {"fp32": 91.6, "tf32": 183.0, "bf16": 362.1, "fp16": 362.1, "fp8": 733.0},
           NVIDIA_L40S),
    Device("MI355X", (_token("MI355X?"),), {"fp32": 157.3, "bf16": 2516.6, "fp16": 2516.6, "fp8": 5033.2},
           AMD_MI355X, "no tf32"),
    Device("MI300X", (_token("MI300X"), _token("MI325X")), {"fp32": 163.4, "tf32": 653.7, "bf16": 1307.4, "fp16": 1307.4,
                                              "fp8": 2614.9}, AMD_MI300X, "fp32: matrix cores; MI325X: same rates"),
)


def device_entry(device_name: str) -> Device | None:
    """The table's row for a reported device name, or None (a CPU, an unknown accelerator)."""
    for device in DEVICES:
        if any(re.search(p, device_name or "", re.IGNORECASE) for p in device.patterns):
            return device
    return None


def peak_tflops(device_name: str, precision: str) -> float | None:
    """The dense datasheet peak of `device_name` in `precision` (TFLOP/s per GPU), or None. A run's
    fp32 on an NVIDIA GPU is compared with the fp32 (non-tensor-core) rate: hvdbench leaves TF32 off."""
    device = device_entry(device_name)
    value = device.tflops.get(precision) if device else None
    return value or None


# The peak a run's MFU is measured against, by the run's --precision: an fp8 run (float8 linears, the
# rest in bf16) against the bf16 peak, as torchtitan and MLPerf's fp8 figures count it, so its MFU
# can pass 100 %.
MFU_PEAK = {"fp8": "bf16"}


def peak_precision(run_precision: str) -> str:
    """The precision of the peak a run trained in `run_precision` is compared with."""
    return MFU_PEAK.get(run_precision, run_precision)


def mfu(tflops_per_gpu: float | None, peak: float | None) -> float | None:
    """Model FLOPs utilisation: achieved model TFLOP/s per GPU / the peak (a fraction), None when
    either is unknown."""
    if tflops_per_gpu is None or not peak:
        return None
    return tflops_per_gpu / peak


def model_tflops(flops_per_sample: float | None, samples_per_s_per_gpu: float | None) -> float | None:
    """Model TFLOP/s per GPU: training FLOPs per sample x samples/s per GPU / 1e12 (torchtitan's
    `flops_per_token x tps / 1e12`, per sample)."""
    if flops_per_sample is None or samples_per_s_per_gpu is None:
        return None
    return flops_per_sample * samples_per_s_per_gpu / 1e12


def markdown_table() -> str:
    """The table as Markdown (docs and `hvdbench bench compute --peaks`)."""
    lines = ["| device | " + " | ".join(PRECISIONS) + " | source | note |",
             "|---|" + "---:|" * len(PRECISIONS) + "---|---|"]
    for d in DEVICES:
        cells = [f"{d.tflops[p]:g}" if d.tflops.get(p) else "–" for p in PRECISIONS]
        lines.append(f"| {d.name} | " + " | ".join(cells) + f" | {d.source} | {d.note} |")
    return "\n".join(lines)
