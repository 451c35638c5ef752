"""Published MLPerf Training rates per GPU (v4.0-v6.0), with their sources, as `peaks.py` keeps
datasheet peaks; and a run's per-GPU rate as a share of the one published for its accelerator and
benchmark ("is my number good?").

    rate = published_rate("NVIDIA H200", "llama31_8b", "full")   # MLPerf v5.1, 64x H200
    rate.per_sample                         # 1.416 sequences/s per GPU (11,598 tokens/s / 8,192)
    share, ref = compare("NVIDIA H200", "llama31_8b", "full", samples_per_s_per_gpu=0.708)
    # 0.5, "MLPerf Training v5.1, 64x H200, precision not stated: 11,598 tokens/s per GPU"

Each row is one submission's figure per GPU (its throughput over its GPUs, derived from its logs in
the research notes this table was taken from: ../shared/COMPUTE.md); only rows with a round, a
system size and a source are kept. The accelerator is matched as `peaks.device_entry` matches it.
A run is compared only at the flavor the benchmark trains (a debug or one-GPU flavor is another
network), and in hvdbench's unit: samples (a sequence, a row, an image) per second per GPU, a
published rate in tokens divided by the tokens of a sample, one in BERT's packed sequences by the
sequences a row of the run held (its record's mlperf_samples_per_row: ~2 on packed rows, 1 unpacked),
or ~2 where the run did not count them. A published fp8 rate beside a bf16 run is said so
in the reference text: the precision is part of the answer.

The report's compute section calls `compare` (or reads the record's `published_share` and
`published_ref`, which the trainer fills: hvdbench/train/compute.py). Imports nothing of hvdbench
but peaks (the library's low floor).
"""

from __future__ import annotations

from dataclasses import dataclass

from hvdbench.peaks import device_entry

MLPERF_V40 = "https://github.com/mlcommons/training_results_v4.0 (the submissions' result logs)"
MLPERF_V50 = "https://github.com/mlcommons/training_results_v5.0 (the submissions' result logs)"
MLPERF_V51 = "https://github.com/mlcommons/training_results_v5.1 (the submissions' result logs)"
MLPERF_V60 = "https://github.com/mlcommons/training_results_v6.0 (the submissions' result logs)"
LLAMA_TOKENS = 8192  # llama31_8b's sample: one 8,192-token sequence
# BERT's sample in hvdbench is a 512-token row; MLPerf counts the sequences packed ~2 to a row (as
# bert's published_flops takes a sequence as half a row): a row is taken as 2 published sequences.
BERT_SEQUENCES_PER_ROW = 2


@dataclass(frozen=True)
class PublishedRate:
    benchmark: str  # MLPerf's name (ModelSpec.benchmark)
    flavor: str  # the hvdbench flavor that trains the benchmark's network
    accelerator: str  # a peaks.DEVICES row's name
    round: str  # MLPerf Training round, e.g. "v5.1"
    system: str  # who submitted what, e.g. "NVIDIA 64x H100-SXM"
    precision: str  # the submission's matmul precision ("" where the source does not say)
    rate: float  # per GPU, in `unit`
    unit: str  # e.g. "tokens/s"
    units_per_sample: float  # how many `unit`s one hvdbench sample is (tokens of a sequence; 1)
    source: str
    # The rate counts MLPerf's samples where a row may hold several (BERT's packed sequences): a run that
    # counted what its rows held (mlperf_samples_per_row) is compared with that, not units_per_sample.
    counts_rows_samples: bool = False

    @property
    def per_sample(self) -> float:
        """The rate in hvdbench's samples per second per GPU."""
        return self.rate / self.units_per_sample

    def describe(self) -> str:
        precision = f", {self.precision}" if self.precision else ", precision not stated"
        return f"MLPerf Training {self.round}, {self.system}{precision}: {self.rate:,.0f} {self.unit} per GPU"


# Newest round first: the first row matching an accelerator and benchmark wins. A rate with "~" in
# the notes was published as about that figure; ranges over several submissions keep their highest.
RATES = (
    PublishedRate("llama31_8b", "full", "H100 SXM", "v6.0", "128x H100", "", 11660, "tokens/s",
                  LLAMA_TOKENS, MLPERF_V60),
    PublishedRate("llama31_8b", "full", "H200", "v5.1", "64x H200", "", 11598, "tokens/s", LLAMA_TOKENS, MLPERF_V51),
    PublishedRate("llama31_8b", "full", "GB300", "v5.1", "8x GB300", "", 47268, "tokens/s", LLAMA_TOKENS,
                  MLPERF_V51),
    PublishedRate("llama31_8b", "full", "B200", "v5.1", "8x B200", "nvfp4", 36300, "tokens/s", LLAMA_TOKENS,
                  MLPERF_V51),
    PublishedRate("llama31_8b", "full", "H100 SXM", "v5.1", "64x H100-SXM", "fp8", 11369, "tokens/s",
                  LLAMA_TOKENS, MLPERF_V51),
    PublishedRate("bert", "large", "H200", "v4.0/v5.0", "NVIDIA 8x H200 (1,025-1,040 over its submissions)", "fp8",
                  1040, "sequences/s", BERT_SEQUENCES_PER_ROW, MLPERF_V50, counts_rows_samples=True),
    PublishedRate("bert", "large", "H100 SXM", "v4.0/v5.0", "NVIDIA 8x H100", "fp8", 949, "sequences/s",
                  BERT_SEQUENCES_PER_ROW, MLPERF_V40, counts_rows_samples=True),
    PublishedRate("resnet", "full", "H100 SXM", "v4.0", "8x H100", "", 6900, "images/s", 1, MLPERF_V40),
)


def published_rate(device_name: str, benchmark: str, flavor: str) -> PublishedRate | None:
    """The newest published per-GPU rate of `benchmark` on the accelerator `device_name` names, for
    a run of `flavor` (None: no published rate, another accelerator, or a flavor that is not the
    benchmark's network)."""
    device = device_entry(device_name)
    if device is None:
        return None
    return next((r for r in RATES if r.accelerator == device.name and r.benchmark == benchmark
                 and r.flavor == flavor), None)


def compare(device_name: str, benchmark: str, flavor: str, samples_per_s_per_gpu: float | None,
            mlperf_samples_per_row: float | None = None) -> tuple[float | None, str]:
    """(the run's per-GPU rate / the published one, the published figure's round, system and
    precision), or (None, "") where there is nothing to compare. `mlperf_samples_per_row`: MLPerf's
    samples the run's rows held (its record's; packed BERT's sequences a row), where it counted them."""
    ref = published_rate(device_name, benchmark, flavor)
    if ref is None or not samples_per_s_per_gpu:
        return None, ""
    if ref.counts_rows_samples and mlperf_samples_per_row:
        return samples_per_s_per_gpu * mlperf_samples_per_row / ref.rate, ref.describe()
    return samples_per_s_per_gpu / ref.per_sample, ref.describe()


def markdown_table() -> str:
    """The table as Markdown (docs)."""
    lines = ["| benchmark | accelerator | round | system | precision | per GPU | source |",
             "|---|---|---|---|---|---:|---|"]
    for r in RATES:
        lines.append(f"| {r.benchmark} | {r.accelerator} | {r.round} | {r.system} | {r.precision or '–'} | "
                     f"{r.rate:,.0f} {r.unit} | {r.source} |")
    return "\n".join(lines)
