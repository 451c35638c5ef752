"""`bench links`'s rows, rule and naming on captured rows (tests/unit/captured/bench_links-*.csv: real
runs on an emulated 3-node cluster, one with node3's link shaped to a tenth, and on localhost): the
shaped node's pairs are flagged and the node named, an even cluster flags nothing, pairs within a host
are compared apart from pairs between hosts, and what the slow pairs share (one host, one path, nothing)
is said as such. The pairs planned, the NICs named from a hardware record, the sizes refused, the CSV
and plot written and read back by the report.

    .venv/bin/python -m pytest tests/unit/test_links.py
"""

import csv
from dataclasses import replace
from pathlib import Path

import pytest

from hvdbench.bench import links_report as LR
from hvdbench.errors import ConfigError
from hvdbench.frameworks.torch.bench_links import sending_interface
from hvdbench.results.analyses import links as L
from hvdbench.results.records.schema import LinkRow
from hvdbench.results.records.store import LINKS_CSV, read_rows
from hvdbench.results.report.build import build
from hvdbench.results.report.load import Loaded, read_benches

CAPTURED = Path(__file__).parent / "captured"


def captured(name: str) -> list[LinkRow]:
    return read_rows(CAPTURED / f"bench_links-{name}.csv", LinkRow)


def slow_pairs(rows) -> list[tuple[str, str]]:
    return [(p.host_a, p.host_b) for p in L.pair_rows(rows) if p.slow]


def test_the_shaped_nodes_pairs_are_slow_and_the_node_is_named():
    rows = captured("3x1-node3-shaped")
    pairs = L.pair_rows(rows)
    assert [(p.rank_a, p.rank_b, p.kind) for p in pairs] == [(0, 1, "between"), (0, 2, "between"),
                                                                       (1, 2, "between")]
    assert slow_pairs(rows) == [("hl-node1", "hl-node3"), ("hl-node2", "hl-node3")]
    # 100 of 1000 Mbit/s: a tenth of the fastest pair, as shaped; 16 MiB is the largest size, 8 B the smallest
    assert [round(p.vs_best, 2) for p in pairs] == [1.0, 0.1, 0.1]
    assert {(p.bandwidth_bytes, p.latency_bytes) for p in pairs} == {(16 << 20, 8)}
    assert 0.11 < pairs[0].bandwidth_gb_s < 0.125  # 1 Gbit/s is 0.125 GB/s
    assert L.verdicts(pairs) == ["every pair with hl-node3 is slow (2 of 2 pairs between hosts): hl-node3's link "
                                 "(hl-br (virtual), 10 Gb/s)"]


def test_an_even_cluster_and_one_host_flag_nothing():
    for name in ("3x1-even", "1x3-localhost"):
        rows = captured(name)
        pairs = L.pair_rows(rows)
        assert pairs and not any(p.slow for p in pairs) and L.verdicts(pairs) == []
        assert min(p.vs_best for p in pairs) > 0.85  # the measured spread the rule's half stands clear of
    local = L.pair_rows(captured("1x3-localhost"))
    assert len({p.run_id for p in local}) == 2 and len(local) == 6  # two runs, each flagged on its own
    assert {(p.kind, p.intra_link, p.nic_a) for p in local} == {("within", "loopback (CPU ranks)", "")}


def _hosts(rows, names: dict[str, str]) -> list[LinkRow]:
    return [replace(r, host_a=names.get(r.host_a, r.host_a), host_b=names.get(r.host_b, r.host_b)) for r in rows]


def test_what_the_slow_pairs_share_is_said_as_it_is():
    shaped = captured("3x1-node3-shaped")
    even = captured("3x1-even")
    # One slow pair whose two hosts have a fast pair elsewhere: the path between them, not a host.
    one = [r for r in shaped if (r.rank_a, r.rank_b) != (1, 2)] + [r for r in even if (r.rank_a, r.rank_b) == (1, 2)]
    one = [replace(r, run_id="x", started_at="t") for r in one]
    assert slow_pairs(one) == [("hl-node1", "hl-node3")]
    assert L.verdicts(L.pair_rows(one)) == [
        "only hl-node1-hl-node3 is slow (between hosts), and both have fast pairs: the path between them "
        "(a cable, a switch port, a route), not either end"]
    # Two slow pairs sharing no host (four hosts: n1-n2 and n3-n4 slow, the others fast).
    fast, slow = even[-1], shaped[-1]  # 16 MiB rows of ranks 1-2: 1 Gbit/s, and the shaped tenth

    def cluster(speeds: dict[str, LinkRow]) -> list[dict]:
        return L.pair_rows([replace(row, run_id="y", host_a=ab[:2], host_b=ab[2:], rank_a=int(ab[1]),
                                    rank_b=int(ab[3])) for ab, row in speeds.items()])

    assert L.verdicts(cluster({"n1n2": slow, "n3n4": slow, "n1n3": fast, "n2n4": fast})) == [
        "2 slow pairs between hosts (n1-n2, n3-n4) share no end: look at what they cross (a switch, a route), "
        "not one host"]
    # Every slow pair holds n1, but n1's pair with n4 is fast: not n1 alone.
    said = L.verdicts(cluster({"n1n2": slow, "n1n3": slow, "n1n4": fast, "n2n3": fast}))
    assert said == ["the slow pairs between hosts (n1-n2, n1-n3) all include n1, but 1 pair(s) with n1 are not slow: "
                    "not n1 alone"]


def test_pairs_within_a_host_are_not_held_to_pairs_between_hosts_and_one_pair_is_never_slow():
    """NVLink within a host and a NIC between hosts differ by design: each kind against its own fastest."""
    shaped = captured("3x1-node3-shaped")
    between = [r for r in shaped if (r.rank_a, r.rank_b) == (0, 1)]  # one pair: nothing to compare it with
    within = [replace(r, kind="within", host_b=r.host_a, rank_a=5, rank_b=6, bandwidth_gb_s=100.0)
              for r in between]
    pairs = L.pair_rows(between + within)
    assert [p.slow for p in pairs] == [False, False] and [p.vs_best for p in pairs] == [1.0, 1.0]


def test_two_hosts_of_two_ranks_each_kind_apart_and_a_host_whose_own_pairs_are_slow_named():
    """Captured on an emulated 2x2 (1 Gbit/s between the nodes, loopback within): the one pair between
    hosts is never slow (nothing to compare), the pairs within are compared with each other."""
    rows = captured("2x2-emulated")
    pairs = L.pair_rows(rows)
    assert [(p.kind, p.rank_a, p.rank_b) for p in pairs] == [("between", 0, 2), ("within", 0, 1),
                                                                       ("within", 2, 3)]
    assert pairs[0].vs_best == 1.0 and 0.11 < pairs[0].bandwidth_gb_s < 0.125 and L.verdicts(pairs) == []
    assert pairs[0].bandwidth_gb_s < 0.5 * min(p.bandwidth_gb_s for p in pairs[1:])  # yet not "slow"
    # hm-node1's ranks at a tenth of hm-node2's: its own links named, not a NIC.
    slowed = [replace(r, bandwidth_gb_s=r.bandwidth_gb_s / 10) if r.rank_a == 0 and r.rank_b == 1 else r for r in rows]
    assert L.verdicts(L.pair_rows(slowed)) == [
        "every pair within hm-node1 is slow (1 of 1), the other hosts' are not: hm-node1's links between its ranks "
        "(loopback (CPU ranks))"]


def test_pairs_planned_between_hosts_then_within_each():
    assert LR.plan_pairs(["a", "a", "b", "b", "c"]) == [(0, 2, "between"), (0, 4, "between"), (2, 4, "between"),
                                                      (0, 1, "within"), (2, 3, "within")]
    assert LR.plan_pairs(["a"]) == []


def test_sizes_and_round_trips():
    assert LR.check_sizes([1 << 20, 8, 8]) == [8, 1 << 20]
    for bad, words in (([], "at least one"), ([0], "1 byte to 4 GiB"), ([8 << 30], "1 byte to 4 GiB")):
        with pytest.raises(ConfigError, match=words):
            LR.check_sizes(bad)
    assert LR.round_trips(1e-5, 20, 5, 1.0) == 20  # fast: the most asked for
    assert LR.round_trips(0.05, 20, 5, 1.0) == 4  # 5 repeats x 4 x 50 ms = the second
    assert LR.round_trips(2.8, 20, 5, 1.0) == 1  # a 16 MiB round trip at 100 Mbit/s: one a repeat


RECORD = {"nics": [{"name": "eth0", "state": "up", "kind": "ethernet", "driver": "ixgbe", "speed_mbps": 10000},
                   {"name": "veth1", "state": "up", "kind": "virtual", "driver": "", "speed_mbps": None},
                   {"name": "mlx5_0/port1", "state": "4: ACTIVE", "kind": "infiniband", "driver": "mlx5_0",
                    "speed_mbps": 200000, "rate": "200 Gb/sec (4X HDR)"}],
          "gpus": [], "gpu_topology": {"matrix": {"GPU0": {"GPU1": "NV18"}, "GPU1": {"GPU0": "NV18"}}}}


def test_nics_are_named_from_the_hardware_record():
    assert LR.nic_words(RECORD, "eth0") == ("eth0 (ixgbe), 10 Gb/s", 1.25)
    assert LR.nic_words(RECORD, "veth1") == ("veth1 (virtual), speed not reported", None)
    assert LR.nic_words(RECORD, "mlx5_0/port1") == ("mlx5_0/port1 (mlx5_0), 200 Gb/sec (4X HDR)", 25.0)
    assert LR.nic_words(RECORD, "ib9") == ("ib9 (not in the hardware record)", None)
    # Which interface: Gloo's is GLOO_SOCKET_IFNAME's; NCCL's the active InfiniBand port unless it is turned off.
    assert sending_interface("gloo", RECORD, {"GLOO_SOCKET_IFNAME": "eth0,eth1"}) == "eth0"
    assert sending_interface("nccl", RECORD, {}) == "mlx5_0/port1"
    assert sending_interface("nccl", RECORD, {"NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": "=eth0"}) == "eth0"
    assert sending_interface("nccl", {}, {"NCCL_SOCKET_IFNAME": "eth1,eth0"}) == "eth1"
    # NCCL's '^lo' says what it avoids, not what it takes: the interface of the host name's address then.
    assert sending_interface("nccl", {}, {"NCCL_SOCKET_IFNAME": "^lo"}) == sending_interface("gloo", {}, {})


def test_rows_get_their_ends_hosts_devices_and_paths():
    base = LinkRow(run_id="r", bytes=8, time_s=1e-5)
    ends = [{"host": h, "device": f"GPU {g} H100", "backend": "nccl", "gpu": g, "nic": "eth0 (ixgbe), 10 Gb/s",
             "nic_gb_s": 1.25, "topo": RECORD["gpu_topology"]["matrix"]} for h, g in (("a", 0), ("a", 1), ("b", 0))]
    ends[2]["nic_gb_s"] = None
    rows = LR.describe([replace(base, kind="within", rank_a=0, rank_b=1),
                        replace(base, kind="between", rank_a=0, rank_b=2)], ends)
    assert (rows[0].intra_link, rows[0].nic_a, rows[0].host_b, rows[0].device_b) == ("NV18", "", "a", "GPU 1 H100")
    assert (rows[1].intra_link, rows[1].nic_b, rows[1].nic_gb_s, rows[1].backend) == ("", "eth0 (ixgbe), 10 Gb/s", None,
                                                                                "nccl")


def test_the_bench_writes_its_csv_and_matrix_and_the_report_reads_them(tmp_path):
    rows = captured("3x1-node3-shaped")
    written = LR.write_outputs(rows, tmp_path)
    assert [p.name for p in written] == [LINKS_CSV, "bench_links_3x1.png"]
    assert written[1].read_bytes()[:4] == b"\x89PNG"
    assert read_rows(tmp_path / LINKS_CSV, LinkRow) == rows
    printed = "\n".join(LR.report_lines(rows))
    assert "SLOW" in printed and "every pair with hl-node3 is slow" in printed and "below 0.5 x" in printed

    loaded = Loaded()
    read_benches(loaded, tmp_path)  # the one reader of a sweep folder's bench CSVs
    assert loaded.links == rows
    section = build(loaded).sections["links"]
    text = section.markdown()
    assert "## Links between hosts and ranks" in text and "every pair with hl-node3 is slow" in text
    assert "NIC of every host: hl-br (virtual), 10 Gb/s" in text and "inter-node link" not in text
    # The link the sweep names (sweep.json): what a virtual NIC's rate does not say.
    assert "NIC of every host: hl-br (virtual), 10 Gb/s · inter-node link: emulated, 1gbit" in L.markdown(
        rows, link="emulated, 1gbit")
    files = section.files(tmp_path / "report", ("csv", "png"))
    assert [p.name for p in files] == ["links.csv", "links.png"]
    table = list(csv.DictReader((tmp_path / "report" / "links.csv").open()))
    assert [(r["host_a"], r["host_b"], r["slow"]) for r in table] == [
        ("hl-node1", "hl-node2", "no"), ("hl-node1", "hl-node3", "yes"), ("hl-node2", "hl-node3", "yes")]


def test_without_link_rows_the_section_says_nothing():
    assert L.markdown([]) == "" and L.write([], Path("unused")) == []
