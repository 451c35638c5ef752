"""The hardware record (hvdbench/hardware.py): this machine's (CPU, interfaces, no GPU) complete with
the GPU fields empty; `nvidia-smi --query-gpu` and `nvidia-smi topo -m` parsed from captured text;
InfiniBand and Ethernet rates read from a sysfs tree; a missing tool is an empty field.

The multi-GPU nvidia-smi texts below are written from NVIDIA's documented formats (nvidia-smi's --query-gpu csv
with noheader,nounits; `topo -m`'s tab-separated matrix and legends, as a DGX H100 and a PCIe server
print them), not captured here (the lent machines have one GPU); captured/ holds a real one-GPU H200's
output, as benchmarks/gpu/stack.sh captured it.
"""

import re
from pathlib import Path

from hvdbench import hardware

QUERY_GPU = """0, NVIDIA H100 80GB HBM3, 81559, 550.54.15, 00000000:18:00.0
1, NVIDIA H100 80GB HBM3, 81559, 550.54.15, 00000000:2A:00.0
"""

TOPO_NVLINK = (
    "\tGPU0\tGPU1\tGPU2\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    "GPU0\t X \tNV18\tNV18\tPXB\tSYS\t0-55,112-167\t0\t\tN/A\n"
    "GPU1\tNV18\t X \tNV18\tSYS\tPXB\t0-55,112-167\t0\t\tN/A\n"
    "GPU2\tNV18\tNV18\t X \tSYS\tSYS\t56-111,168-223\t1\t\tN/A\n"
    "NIC0\tPXB\tSYS\tSYS\t X \tSYS\t\t\t\t\n"
    "NIC1\tSYS\tPXB\tSYS\tSYS\t X \t\t\t\t\n"
    "\nLegend:\n\n  X    = Self\n  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes\n"
    "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)\n"
    "  NV#  = Connection traversing a bonded set of # NVLinks\n\nNIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_1\n\n")

# The same format without its tabs (a copy pasted from a terminal): runs of spaces.
TOPO_PCIE = """        GPU0    GPU1    CPU Affinity    NUMA Affinity   GPU NUMA ID
GPU0     X      PHB     0-31    0               N/A
GPU1    PHB      X      0-31    0               N/A

Legend:

  X    = Self
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
"""


def test_this_machines_record_is_complete_and_its_gpu_fields_empty():
    record = hardware.host_record()
    cpu = record["cpu"]
    assert cpu["model"] and cpu["cores"] >= 1 and cpu["logical"] >= cpu["cores"] and cpu["sockets"] >= 1
    up = [n for n in record["nics"] if n["kind"] == "ethernet" and n["state"] == "up"]
    assert up and all(n["driver"] for n in up)  # this machine's NIC, with its kernel driver
    assert all(n["name"] != "lo" for n in record["nics"])
    assert record["inter_node_link"].startswith(f"Ethernet {max(up, key=lambda n: n['speed_mbps'] or 0)['name']} (")
    assert (record["gpus"], record["driver"], record["gpu_topology"]) == ([], "", {})  # no GPU here
    assert record["intra_node_link"] == "CPU ranks on one host (Gloo over loopback)"


def test_a_missing_nvidia_smi_leaves_the_gpu_fields_empty(tmp_path):
    record = hardware.host_record(smi=str(tmp_path / "nvidia-smi"))  # not there: no error
    assert (record["gpus"], record["gpu_topology"]) == ([], {})


def test_query_gpu_lines_are_parsed():
    gpus = hardware.parse_query_gpu(QUERY_GPU)
    assert gpus == [{"index": i, "name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "driver": "550.54.15",
                     "pci_bus_id": bus} for i, bus in ((0, "00000000:18:00.0"), (1, "00000000:2A:00.0"))]
    assert hardware.parse_query_gpu("") == [] and hardware.parse_query_gpu("garbage\n") == []


def test_topo_matrix_nics_and_affinity_are_parsed_and_named():
    topo = hardware.parse_topo(TOPO_NVLINK)
    assert topo["matrix"]["GPU0"] == {"GPU1": "NV18", "GPU2": "NV18", "NIC0": "PXB", "NIC1": "SYS"}
    assert topo["matrix"]["NIC1"]["GPU1"] == "PXB" and set(topo["matrix"]) == {"GPU0", "GPU1", "GPU2", "NIC0", "NIC1"}
    assert topo["nics"] == {"NIC0": "mlx5_0", "NIC1": "mlx5_1"}
    assert topo["cpu_affinity"]["GPU2"] == "56-111,168-223"
    gpus = hardware.parse_query_gpu(QUERY_GPU + "2, NVIDIA H100 80GB HBM3, 81559, 550.54.15, 00000000:3A:00.0\n")
    assert hardware.intra_node_link(gpus, topo) == "NVLink (NV18) between 3 GPUs"
    pcie = hardware.parse_topo(TOPO_PCIE)
    assert pcie["matrix"] == {"GPU0": {"GPU1": "PHB"}, "GPU1": {"GPU0": "PHB"}} and pcie["nics"] == {}
    assert hardware.intra_node_link(gpus[:2], pcie) == "PCIe via the host bridge (PHB) between 2 GPUs"
    assert hardware.intra_node_link(gpus[:1], {}) == "one GPU, no GPU-to-GPU link"
    assert hardware.parse_topo("") == {} and hardware.parse_topo("No devices were found\n") == {}


CAPTURED = Path(__file__).parent / "captured"


def test_a_real_h200s_nvidia_smi_output_is_parsed():
    """Captured on a lent H200 machine (captured/README.md): its header carries terminal escapes."""
    topo = hardware.parse_topo((CAPTURED / "h200-topo-m.txt").read_text())
    assert topo == {"matrix": {"GPU0": {}}, "nics": {}, "cpu_affinity": {"GPU0": "0-15"}}
    gpus = hardware.parse_query_gpu((CAPTURED / "h200-query-gpu.txt").read_text())
    assert gpus == [{"index": 0, "name": "NVIDIA H200", "memory_mib": 143771, "driver": "580.159.04",
                     "pci_bus_id": "00000000:00:06.0"}]
    assert hardware.intra_node_link(gpus, topo) == "one GPU, no GPU-to-GPU link"
    escaped = TOPO_NVLINK.replace("\tGPU0\tGPU1\tGPU2\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID",
                                  "\t\x1b[4mGPU0\tGPU1\tGPU2\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m")
    assert escaped != TOPO_NVLINK and hardware.parse_topo(escaped) == hardware.parse_topo(TOPO_NVLINK)


def _sysfs(root: Path, files: dict) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")


def test_interfaces_and_their_rates_come_from_sysfs(tmp_path):
    net, ib = tmp_path / "net", tmp_path / "infiniband"
    _sysfs(net, {"eth0/speed": "25000", "eth0/operstate": "up", "eth0/type": "1", "eth0/device/vendor": "x",
                 "eth1/speed": "-1", "eth1/operstate": "down", "eth1/type": "1", "eth1/device/vendor": "x",
                 "ib0/operstate": "up", "ib0/type": "32", "ib0/device/vendor": "x",
                 "veth9/operstate": "up", "veth9/type": "1", "lo/operstate": "unknown", "lo/type": "772"})
    _sysfs(ib, {"mlx5_0/ports/1/rate": "200 Gb/sec (4X HDR)", "mlx5_0/ports/1/state": "4: ACTIVE",
                "mlx5_1/ports/1/rate": "100 Gb/sec (4X EDR)", "mlx5_1/ports/1/state": "1: DOWN"})
    nics = {n["name"]: n for n in hardware.network_interfaces(net, ib)}
    assert set(nics) == {"eth0", "eth1", "ib0", "veth9", "mlx5_0/port1", "mlx5_1/port1"}
    assert (nics["eth0"]["kind"], nics["eth0"]["speed_mbps"]) == ("ethernet", 25000)
    assert nics["eth1"]["speed_mbps"] is None and nics["veth9"]["kind"] == "virtual"
    assert (nics["mlx5_0/port1"]["speed_mbps"], nics["mlx5_0/port1"]["rate"]) == (200000, "200 Gb/sec (4X HDR)")
    assert hardware.inter_node_link(list(nics.values())) == "InfiniBand mlx5_0/port1, 200 Gb/sec (4X HDR)"
    ethernet = [n for n in nics.values() if n["kind"] != "infiniband"]
    assert re.fullmatch(r"Ethernet eth0 \(\S+\), 25 Gb/s", hardware.inter_node_link(ethernet))
    assert hardware.inter_node_link([]) == "" and hardware.network_interfaces(tmp_path / "none", ib)[0]["kind"] == "infiniband"


def test_the_torch_extras_range_is_the_tiers_and_envs_range():
    """setup.cfg's torch extra, CI's two torch tiers, `hvdbench env`'s tested range and the README's
    sentence name the same releases."""
    from hvdbench.releases import TESTED_TORCH

    root = Path(__file__).resolve().parents[2]
    floor, ceiling = re.search(r"^torch =\n    torch>=(\S+),<(\S+)$", (root / "setup.cfg").read_text(),
                               flags=re.M).groups()
    script = (root / "scripts/test_torch_tier.sh").read_text()
    oldest, newest = (re.search(rf"^{name}_TORCH=(\S+)$", script, flags=re.M).group(1)
                      for name in ("OLDEST", "NEWEST"))
    assert (floor, newest.rsplit(".", 1)[0]) == TESTED_TORCH and oldest.startswith(floor + ".")
    major, minor = TESTED_TORCH[1].split(".")
    assert ceiling == f"{major}.{int(minor) + 1}"
    assert f"**Supported PyTorch: {TESTED_TORCH[0]} to {TESTED_TORCH[1]}.**" in (root / "README.md").read_text()


def test_horovods_torch_extension_builds_as_the_c_plus_plus_its_torch_asks_for(tmp_path):
    """scripts/patch_horovod.py reads the standard off torch's ATen.h: this venv's torch (2.13) asks for
    C++17; a torch whose header stops below C++20 (2.14, 2.15) gets 20; no torch, 17."""
    import os
    import subprocess
    import sys

    script = Path(__file__).resolve().parents[2] / "scripts" / "patch_horovod.py"
    ask = f"import runpy; print(runpy.run_path({str(script)!r})['torch_cxx_standard']())"

    def standard(pythonpath):
        env = {**os.environ, "PYTHONPATH": str(pythonpath)} if pythonpath else dict(os.environ)
        return subprocess.run([sys.executable, "-c", ask], capture_output=True, text=True, check=True,
                              env=env, cwd=tmp_path).stdout.strip()

    newer = tmp_path / "newer"
    (newer / "torch" / "include" / "ATen").mkdir(parents=True)
    (newer / "torch" / "__init__.py").write_text("")
    (newer / "torch" / "include" / "ATen" / "ATen.h").write_text(
        "#if !defined(_MSC_VER) && __cplusplus < 202002L\n#error C++20 or later compatible compiler is required"
        " to use ATen.\n#endif\n")
    headerless = tmp_path / "headerless"
    (headerless / "torch").mkdir(parents=True)
    (headerless / "torch" / "__init__.py").write_text("")
    assert (standard(None), standard(newer), standard(headerless)) == ("17", "20", "17")


def test_a_sweep_keeps_each_hosts_record_once_and_the_report_names_its_links(tmp_path):
    import json

    from hvdbench.results.stats.aggregate import Where, where_ran
    from hvdbench.results.records.store import HARDWARE_JSON, SWEEP_RECORD, sweep_link
    from hvdbench.sweep.spec import SweepSpec, keep_hardware

    spec = SweepSpec(model="resnet50", out=tmp_path, entries=[])
    (tmp_path / SWEEP_RECORD).write_text(json.dumps({"model": "resnet50", "train_args": [], "link": ""}))
    nvlink = {"intra_node_link": "NVLink (NV18) between 8 GPUs", "inter_node_link": "InfiniBand mlx5_0/port1, 200 Gb/sec (4X HDR)"}
    for run, hosts in (("1x8-r1", {"n1": nvlink}), ("2x8-r1", {"n1": {**nvlink, "intra_node_link": "changed"},
                                                               "n2": nvlink})):
        (tmp_path / run).mkdir()
        (tmp_path / run / HARDWARE_JSON).write_text(json.dumps(hosts))
        keep_hardware(spec, tmp_path / run)
    keep_hardware(spec, tmp_path / "failed-before-writing-one")  # no record: nothing added, no error
    kept = json.loads((tmp_path / SWEEP_RECORD).read_text())["hardware"]
    assert kept == {"n1": nvlink, "n2": nvlink}  # each host's first record
    assert sweep_link(tmp_path / SWEEP_RECORD) == nvlink["inter_node_link"]  # read, where --link typed none
    assert sweep_link(tmp_path / SWEEP_RECORD, "intra") == nvlink["intra_node_link"]
    rows = [Where(hosts="n1;n2", nodes=2, link=nvlink["inter_node_link"], intra_link=nvlink["intra_node_link"])]
    assert where_ran(rows) == ("hosts: n1, n2 · intra-node link: NVLink (NV18) between 8 GPUs · "
                               "inter-node link: InfiniBand mlx5_0/port1, 200 Gb/sec (4X HDR)")
    record = json.loads((tmp_path / SWEEP_RECORD).read_text())
    (tmp_path / SWEEP_RECORD).write_text(json.dumps({**record, "link": "typed by the user"}))
    assert sweep_link(tmp_path / SWEEP_RECORD) == "typed by the user"
