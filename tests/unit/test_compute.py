"""Compute: FLOPs per sample counted from the networks, the transformer formula, device peaks and MFU,
the NVML energy path where no NVIDIA driver is (this machine), a run's compute columns in the schema,
`bench compute`'s measuring on this CPU, and the report's compute table.

Convention (docs/compute.md): training FLOPs = forward + backward as counted (FlopCounterMode: 2 FLOPs
per multiply-add), which is ~3x forward (MLPerf's and torchtitan's convention); ResNet-50's published
4.09 GMAC forward at 224x224 is 8.18 GFLOP.
"""

import pytest

pytest.importorskip("torch")

import pynvml  # noqa: E402
import torch  # noqa: E402

from hvdbench.contracts import get_spec  # noqa: E402
from hvdbench.frameworks.torch import bench_compute as bcm  # noqa: E402
from hvdbench.frameworks.torch.flops import count, transformer_formula  # noqa: E402
from hvdbench.frameworks.trainer import Trainer  # noqa: E402
from hvdbench.peaks import device_entry, mfu, model_tflops, peak_tflops  # noqa: E402
from hvdbench.results.analyses import efficiency as rc  # noqa: E402
from hvdbench.results.records.schema import ComputeRow, LoadedRun, RunResult  # noqa: E402
from hvdbench.results.records.store import COMPUTE_CSV, append_rows, read_rows, read_runs  # noqa: E402
from hvdbench.results.report.load import load  # noqa: E402
from hvdbench.train import compute_window as tc  # noqa: E402

RESNET50_FORWARD = 2 * 4.089e9  # torchvision's "4.089 GFLOPS" are multiply-adds


def within(value, reference, share=0.02):
    return abs(value / reference - 1) <= share


# --- FLOPs ---------------------------------------------------------------------------------------

def test_resnet50_full_at_224_counts_the_published_forward_and_three_times_it_for_training(torch_one_thread):
    fl = count(get_spec("resnet50"), "full")
    assert within(fl.forward, RESNET50_FORWARD)
    assert within(fl.training, 3 * RESNET50_FORWARD)
    assert fl.training < 3 * fl.forward  # the first convolution computes no input gradient
    assert fl.formula is None  # no transformer formula for a CNN


def test_transformer_formula_is_6n_plus_the_attention_term_not_halved():
    n, layers, width, tokens = 1_000_000, 4, 256, 128
    assert transformer_formula(n, layers, width, tokens) == tokens * (6 * n + 12 * layers * width * tokens)
    halved = transformer_formula(n, layers, width, tokens, causal_halved=True)
    assert halved == tokens * (6 * n + 6 * layers * width * tokens)
    assert transformer_formula(n, layers, width, tokens, embedding=1000) == tokens * (6 * (n - 1000)
                                                                                      + 12 * layers * width * tokens)
    # a frozen base (LoRA) costs forward and activation gradients only: 4 per parameter and token
    assert transformer_formula(10, layers, width, tokens, frozen=n) == tokens * (60 + 4 * n + 12 * layers * width * tokens)


@pytest.mark.parametrize("model,flavor", [("bert", "large"), ("llama31_8b", "full"), ("gpt_oss_20b", "full")])
def test_full_transformers_count_within_2_percent_of_6n_plus_attention_without_allocating(model, flavor,
                                                                                          torch_one_thread):
    fl = count(get_spec(model), flavor)  # 8B parameters on the meta device: nothing allocated
    assert fl.note == ""
    assert within(fl.training, fl.formula), fl.ratio


def test_the_specs_published_flops_are_the_counters(torch_one_thread):
    from hvdbench.contracts import specs

    published = [s for s in specs() if s.published_flops]
    assert {s.name for s in published} >= {"resnet50", "bert", "llama31_8b"}
    for spec in published:
        ref = spec.published_flops
        assert within(count(spec, ref.flavor).training, ref.flops_per_row, 0.001), spec.name


# --- peaks and MFU ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name,row", [("NVIDIA H100 80GB HBM3", "H100 SXM"), ("NVIDIA H100 PCIe", "H100 PCIe"),
                                      ("NVIDIA H100 NVL", "H100 NVL"), ("NVIDIA A100-SXM4-80GB", "A100 SXM"),
                                      ("NVIDIA A100-PCIE-40GB", "A100 PCIe"), ("NVIDIA H200-SXM-141GB", "H200"),
                                      ("NVIDIA GB200", "GB200"), ("NVIDIA B200", "B200"),
                                      ("AMD Instinct MI300X 192GB HBM3", "MI300X"), ("NVIDIA L40S", "L40S")])
def test_device_names_as_torch_and_mlperf_spell_them_find_their_row(name, row):
    assert device_entry(name).name == row


@pytest.mark.parametrize("name", ["NVIDIA RTX A1000 6GB Laptop GPU", "NVIDIA RTX A1000", "NVIDIA H1000",
                                  "NVIDIA GeForce RTX 4090", "AB200 accelerator"])
def test_a_model_number_inside_a_longer_one_is_not_that_device(name):
    """Issue 57 case 8: 'A100' was found inside 'RTX A1000' and the laptop GPU got an A100's 312 TFLOP/s."""
    assert device_entry(name) is None


def test_peaks_are_dense_per_precision_and_unknown_devices_have_none():
    assert peak_tflops("NVIDIA H100 80GB HBM3", "bf16") == 989.4  # not the 1979 sparse figure
    assert peak_tflops("NVIDIA H100 80GB HBM3", "fp8") == 1978.9
    assert peak_tflops("NVIDIA A100-SXM4-80GB", "fp8") is None  # no fp8 units
    assert peak_tflops("cpu", "fp32") is None


def test_mfu_arithmetic():
    # ResNet-50 at 3,940 img/s on one H100 (issue 37) at 24.3 GFLOP per image: 95.7 TFLOP/s, 9.7 % of bf16
    tflops = model_tflops(24.3e9, 3940.0)
    assert tflops == pytest.approx(95.742)
    assert mfu(tflops, 989.4) == pytest.approx(0.09677, rel=1e-3)
    assert mfu(None, 989.4) is None and mfu(1.0, None) is None and model_tflops(None, 1.0) is None


# --- NVML and the run's window ----------------------------------------------------------------------

def test_without_an_nvidia_driver_nvml_gives_no_handle_and_no_energy():
    with pytest.raises(pynvml.NVMLError):  # this machine has no NVML library: the path taken below
        pynvml.nvmlInit()
    assert tc.nvml_handle(0) is None
    assert tc.energy_mj(None) is None


class _CpuDist:
    device = torch.device("cpu")
    rank, size = 0, 1

    def allgather_object(self, obj):
        return [obj]


def test_a_cpu_window_records_resident_memory_and_leaves_energy_empty():
    figures = tc.ComputeWindow(_CpuDist(), Trainer()).stop(samples=64)  # the base's: no device memory figures
    assert figures["mem_resident_gb"] > 0
    assert not {"energy_j", "energy_j_per_sample", "power_w_per_gpu", "mem_allocated_gb"} & set(figures)


def test_combine_sums_energy_over_gpus_only_when_every_rank_counted():
    ranks = [{"seconds": 2.0, "energy_j": 600.0, "mem_allocated_gb": 10.0, "mem_resident_gb": 3.0},
             {"seconds": 2.0, "energy_j": 800.0, "mem_allocated_gb": 12.0, "mem_resident_gb": 2.0}]
    out = tc.combine(ranks, samples=700)
    assert out["energy_j"] == 1400.0 and out["energy_j_per_sample"] == 2.0
    assert out["power_w_per_gpu"] == 350.0  # (300 W + 400 W) / 2
    assert out["mem_allocated_gb"] == 12.0 and out["mem_resident_gb"] == 3.0
    assert "energy_j" not in tc.combine([ranks[0], {"seconds": 2.0}], samples=700)


def test_fill_gives_tflops_and_mfu_from_the_device_and_precision():
    record = RunResult(devices="NVIDIA H100 80GB HBM3", precision="bf16", throughput_per_gpu=3940.0,
                       flops_per_sample=24.3e9)
    tc.fill(record, {"mem_allocated_gb": 20.0})
    assert record.peak_tflops == 989.4
    assert record.model_tflops_per_gpu == pytest.approx(95.742)
    assert record.mfu == pytest.approx(95.742 / 989.4)
    cpu = RunResult(devices="cpu", precision="fp32", throughput_per_gpu=100.0, flops_per_sample=1e9)
    tc.fill(cpu, {})
    assert cpu.model_tflops_per_gpu == pytest.approx(0.1) and cpu.mfu is None and cpu.peak_tflops is None
    tta = RunResult(devices="NVIDIA A100-SXM4-80GB", precision="bf16", mode="time_to_accuracy", flops_per_sample=1e12,
                    steps=100, global_batch=64, world_size=2, epochs=2.0, time_per_epoch_s=8.0)
    tc.fill(tta, {})
    assert tta.model_tflops_per_gpu == pytest.approx(200.0)  # 6,400 samples in 16 s on 2 GPUs: 200/s each
    assert tta.mfu == pytest.approx(200 / 312)


# --- schema -------------------------------------------------------------------------------------------

def test_compute_columns_round_trip_and_a_schema_5_store_still_reads(tmp_path):
    record = RunResult(run_id="r1", model="resnet50", flops_per_sample=24.3e9, model_tflops_per_gpu=95.7,
                       mfu=0.0967, mem_allocated_gb=20.5, energy_j=None, layout="1x1")
    append_rows(tmp_path / "runs.csv", [record])
    [back] = read_runs(tmp_path / "runs.csv")
    assert back.flops_per_sample == 24.3e9 and back.mfu == 0.0967 and back.energy_j is None
    old = {**{k: v for k, v in record.to_row().items() if k not in RunResult.added_since(5)}, "schema_version": "5"}
    assert RunResult.from_row(old).flops_per_sample is None


# --- bench compute on this CPU --------------------------------------------------------------------------

def test_bench_compute_times_what_the_cpu_has_and_says_why_not_the_rest(torch_one_thread):
    opts = bcm.ComputeOptions(out="", dtypes=["fp32", "bf16", "tf32", "fp8"], size=64, copy_bytes=1 << 20,
                              budget_s=0.01, max_iters=3)
    rows = {(r["op"], r["dtype"]): r for r in bcm.measure(opts, torch.device("cpu"), "cpu", lambda: None)}
    assert rows["matmul", "fp32"]["tflops"] > 0 and rows["matmul", "bf16"]["tflops"] > 0
    assert rows["matmul", "tf32"].get("tflops") is None and "CPU" in rows["matmul", "tf32"]["note"]
    assert rows["matmul", "fp8"].get("tflops") is None
    assert rows["copy", "fp32"]["gb_s"] > 0 and rows["copy", "fp32"]["size"] == 1 << 20


def test_an_emulated_precision_gets_a_smaller_matrix():
    assert bcm.fitted_size(0.0001, 2048, 1.0) == 2048  # a fast probe: the full size
    slow = bcm.fitted_size(0.5, 2048, 1.0)  # ~100x slower: 256 * (0.25 / 0.5)^(1/3) = 203 -> 192
    assert slow == 192 and slow % 64 == 0


# --- the report ------------------------------------------------------------------------------------------

def _run(layout="1x1", **kw):
    base = dict(run_id=f"r-{layout}", sweep="s", model="resnet50", flavor="debug", framework="torch", engine="horovod",
                precision="fp32", layout=layout, world_size=1, nodes=1, gpus_per_node=1, devices="cpu",
                throughput=100.0, throughput_per_gpu=100.0, flops_per_sample=1e10, model_tflops_per_gpu=1.0,
                mem_resident_gb=0.8, mem_estimate_gb=0.6)
    return LoadedRun(**{**base, **kw})


def test_report_compute_table_from_runs_and_the_measured_peak(tmp_path):
    append_rows(tmp_path / "runs.csv", [_run()])
    append_rows(tmp_path / COMPUTE_CSV, [
        ComputeRow(run_id="b1", rank=r, device="cpu", op="matmul", dtype="fp32", tflops=t, layout="1x1")
        for r, t in ((0, 2.0), (1, 4.0))])
    loaded = load([tmp_path])  # runs.csv, and bench_compute.csv's median per layout, device and precision
    rows = rc.compute_rows(loaded.runs, loaded.peaks)
    [row] = rows
    assert row.model_tflops_per_gpu == 1.0 and row.mfu is None  # no datasheet peak for a CPU
    assert row.measured_peak_tflops == 3.0 and row.mfu_measured == pytest.approx(1 / 3)
    assert row.mem_resident_gb == 0.8 and row.energy_j_per_sample is None
    text = rc.markdown(rows)
    assert "## Compute" in text and "33.3" in text
    written = rc.write(rows, tmp_path / "report", ("csv",))
    assert written[0].read_text().splitlines()[0].startswith("system,model")


def test_published_logs_get_mfu_from_hvdbenchs_count_and_the_accelerators_bf16_peak():
    from hvdbench.results.mllog.record import MllogRun

    run = MllogRun(run_id="x", sweep="mllog:v4", model="resnet", world_size=8, nodes=1, gpus_per_node=8,
                   layout="1x8", devices="NVIDIA dgx", mode="time_to_accuracy", trained=40.0,
                   trained_unit="epochs", train_s=900.0, accelerator="NVIDIA H100-SXM5-80GB")
    flops, rate, peak, note = rc._published(run)
    assert rate == pytest.approx(40 * 1_281_167 / 900 / 8)  # ImageNet epochs: ~7,117 img/s per GPU
    assert peak == 989.4 and "bf16" in note
    [row] = rc.compute_rows([run])
    assert row.mfu == pytest.approx(flops * rate / 1e12 / 989.4)


def _judges_trained() -> int:
    from hvdbench.models.stable_diffusion import torch as sd

    return sd.train_judge.cache_info().misses


@pytest.mark.parametrize("model", ["flux1", "stable_diffusion"])
def test_a_debug_flavor_on_images_is_counted_on_its_images(model):
    """Flux.1's and Stable Diffusion's debug flavors train on the digits (the images kind, their
    second): the run names its kind, and the count builds the images' samples, not the latents' (a
    KeyError that failed the runs)."""
    spec = get_spec(model)
    trained = _judges_trained()
    fl = count(spec, "debug", info={"num_classes": 10, "image_size": 8}, kind=spec.kind("images"))
    assert fl.training and fl.training > 0
    # Stable Diffusion's judge is no part of the step: the count (on fake tensors) trains none, which
    # would take ~40 CPU-seconds and leave a fake judge in the process's cache for its real runs.
    assert _judges_trained() == trained
    # The latents' samples for the images' sizes cannot be made: the count says so, and fails nothing.
    wrong = count(spec, "debug", info={"num_classes": 10, "image_size": 8})
    assert wrong.training is None and wrong.note.startswith(f"not countable: no {spec.kinds[0].name} samples")


def test_bench_flops_names_what_it_cannot_count():
    from hvdbench.errors import ConfigError
    from hvdbench.frameworks.torch.flops import flops_rows

    with pytest.raises(ConfigError, match="ncf has no flavor 'large'; valid: full, debug"):
        flops_rows(["ncf"], ["large"])
    with pytest.raises(ConfigError, match="no model has flavor nosuch"):
        flops_rows((), ["nosuch"])
    [row] = flops_rows(["deepseekv3_671b"])
    assert row["note"] == "spec only: no PyTorch network" and row["training_gflop"] == ""


def test_an_uninitialised_nvml_call_reads_as_no_energy():
    assert tc.energy_mj(object()) is None  # pynvml raises NVMLError (library not loaded): empty, not 0


class _GpuDist:
    device = torch.device("cuda", 1)  # this rank's GPU (no CUDA call is made for it)
    rank, size = 0, 1

    def allgather_object(self, obj):
        return [obj]


def test_the_gpu_path_maps_the_visible_device_and_reads_the_counter_twice(monkeypatch):
    """NVML cannot run here: its four calls are stood in for with what they return on a GPU machine
    (a handle; the energy counter in mJ since the driver loaded, an int), to test what hvdbench does
    with them: CUDA_VISIBLE_DEVICES=2,3 makes cuda:1 NVML's device 3; mJ -> J over the window."""
    readings = iter([5_000_000, 5_350_000])
    asked = []
    monkeypatch.setattr(pynvml, "nvmlInit", lambda: None)
    monkeypatch.setattr(pynvml, "nvmlDeviceGetHandleByIndex", lambda i: asked.append(i) or f"gpu{i}")
    monkeypatch.setattr(pynvml, "nvmlDeviceGetTotalEnergyConsumption", lambda handle: next(readings))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    figures = tc.ComputeWindow(_GpuDist(), Trainer()).stop(samples=700)
    assert asked == [3]
    assert figures["energy_j"] == 350.0 and figures["energy_j_per_sample"] == 0.5
    assert figures["power_w_per_gpu"] > 0


def test_the_waterfall_names_its_compute_parts_mfu():
    from hvdbench.results.stats.aggregate import build_tables
    from hvdbench.results.analyses.waterfall import markdown, waterfall_rows

    parts = dict(step_time_mean_s=0.1, data_s=0.0, compute_s=0.08, comm_s=0.01, update_s=0.01, other_s=0.0)
    runs = [_run("1x1", devices="NVIDIA H100 80GB HBM3", peak_tflops=989.4, mfu=0.2, **parts),
            _run("1x2", world_size=2, gpus_per_node=2, throughput=180.0, throughput_per_gpu=90.0,
                 devices="NVIDIA H100 80GB HBM3", peak_tflops=989.4, mfu=0.18, **parts)]
    falls = waterfall_rows(runs, build_tables(runs).scaling, compute=rc.compute_rows(runs))
    [fall] = falls
    assert fall.layout == "1x2" and fall.compute_mfu == pytest.approx(1.0 / 989.4)  # 1 TFLOP/s per GPU
    assert f"(MFU {100 * fall.compute_mfu:.1f} %)" in markdown(falls)


def test_compute_png_is_readable_on_cpus():
    """Issue 50: one horizontal bar per row, labels naming what differs (a throughput and a
    time-to-accuracy sweep of one model apart), per rank and no 'MFU' on CPUs, and the devices/hosts
    subtitle every plot has."""
    runs = [_run(layout, hosts="node1", **kw) for layout in ("1x1", "1x2")
            for kw in ({}, {"mode": "time_to_accuracy", "run_id": f"t-{layout}"})]
    runs += [_run(f"1x{g}", run_id=f"r-1x{g}", hosts="node1") for g in range(3, 13)]
    rows = rc.compute_rows(runs)
    fig = rc.figure(rows)
    left = fig.axes[0]
    labels = [t.get_text() for t in left.get_yticklabels()]
    assert len(labels) == len(rows) == 14 and len(set(labels)) == 14  # none under another's label
    assert "throughput · 1x1" in labels and "time to accuracy · 1x1" in labels
    assert all(t.get_rotation() == 0 for t in left.get_yticklabels())  # a line each, none slanted
    assert "per rank" in left.get_xlabel() and "GPU" not in left.get_xlabel() and "MFU" not in left.get_xlabel()
    title = fig._suptitle.get_text()
    assert "devices: CPUs (no GPU)" in title and "host: node1" in title and "1 run(s) per bar" in title
    assert "| TFLOP/s/rank |" in rc.markdown(rows) and "W/rank" in rc.markdown(rows)
    gpu = rc.figure(rc.compute_rows([_run(devices="NVIDIA H100 80GB HBM3", peak_tflops=989.0)]))
    assert "per GPU (MFU beside each bar)" in gpu.axes[0].get_xlabel()


def test_the_compute_table_puts_each_run_beside_mlperfs_published_rate():
    """Issue 46 item 5: the record's share of the published per-GPU rate with its round, system and
    precision; a record without one (before schema 7) compared by the report; and where nothing was
    published, the accelerator and benchmark that have no rate."""
    h200 = dict(model="bert", flavor="large", devices="NVIDIA H200", mem_resident_gb=None, flops_per_sample=1e12)
    recorded = _run("1x1", **h200, published_share=0.5, published_ref="MLPerf Training v4.0/v5.0, x, fp8")
    older = _run("1x2", **h200, world_size=2, throughput_per_gpu=400.0, mlperf_samples_per_row=1.95)
    cpu = _run("1x4", run_id="c", world_size=4)
    debug = _run("2x1", model="bert", flavor="debug", devices="NVIDIA H200", run_id="d")
    rows = {r.layout: r for r in rc.compute_rows([recorded, older, cpu, debug])}
    assert (rows["1x1"].published_share, rows["1x1"].published_ref) == (0.5, recorded.published_ref)
    assert rows["1x2"].published_share == pytest.approx(400 * 1.95 / 1040)
    assert rows["1x2"].published_ref.startswith("MLPerf Training v4.0/v5.0, NVIDIA 8x H200")
    assert rows["1x2"].mlperf_samples_per_row == 1.95 and "1.95 sequences a row: 780.0 sequences/s per GPU" in \
        rows["1x2"].note
    assert (rows["1x4"].published_share, rows["1x4"].published_ref) == (None, "no published rate for cpu/resnet (debug flavor)")
    assert rows["2x1"].published_ref == "no published rate for H200/bert (debug flavor)"
    text = rc.markdown(list(rows.values()))
    assert "% of published" in text and "| 50.0 | MLPerf Training v4.0/v5.0, x, fp8" in text
    assert "no published rate for cpu/resnet" in text


def test_a_runs_count_is_counted_once_and_read_back_while_the_code_and_network_are_the_same(tmp_path, monkeypatch):
    from hvdbench.frameworks.torch import flops

    monkeypatch.setenv("HVDBENCH_CACHE", str(tmp_path))
    spec = get_spec("resnet50")
    info = {"num_classes": 10, "image_size": 16}
    first = flops.count_once(spec, "debug", info)
    assert first == count(spec, "debug", info) and first.training > 0
    (stored,) = (tmp_path / "flops").iterdir()
    # Read back: what the file holds is the answer (here edited, to see that it is read).
    stored.write_text(stored.read_text().replace(f'"training": {first.training}', '"training": 1.0'))
    assert flops.count_once(spec, "debug", info).training == 1.0
    # Another size of data, or another hvdbench source, is counted anew.
    assert flops.count_once(spec, "debug", {**info, "image_size": 8}).training not in (1.0, first.training)
    monkeypatch.setattr(flops, "_code_version", lambda: {"hvdbench_source": "changed"})
    assert flops.count_once(spec, "debug", info) == first


def test_compute_rows_of_one_model_in_two_modes_and_batches_say_which_is_which():
    # issue 58: a model's throughput and time-to-accuracy runs at two batches read as duplicate rows
    runs = [_run(run_id="t", mode="throughput", batch_per_gpu=16),
            _run(run_id="a", mode="time_to_accuracy", batch_per_gpu=32, accum_steps=2)]
    rows = rc.compute_rows(runs)
    assert len(rows) == 2
    table = [line for line in rc.markdown(rows).splitlines() if line.startswith("| ")]
    header = [c.strip() for c in table[0].strip("|").split("|")]
    cells = [dict(zip(header, (c.strip() for c in line.strip("|").split("|")))) for line in table[1:]]
    assert [(c["mode"], c["batch/rank"], c["layout"]) for c in cells] == [
        ("throughput", "16", "1x1"), ("time to accuracy", "32 x 2 accum", "1x1")]
