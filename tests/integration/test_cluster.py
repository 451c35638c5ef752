"""`hvdbench cluster` for real: network namespaces, sshds, horovodrun (Gloo, MPI) and mpirun across
emulated nodes, link shaping (the qdiscs the kernel holds, and the traffic that crosses them), one
node made slow (--node-cpu: its ranks under a CPU quota, named the straggler by the report of a sweep
over it; --node-rate: its own link rate), and clean removal. Needs root and Linux (CI runs as root). Nothing here is timed: how fast a shaped link
is, and how much slower it makes scale-out, is measured by benchmarks/bench_cluster.py.

Every test brings its own cluster (own name and subnet) up through the CLI and takes it down in a
`finally`, then checks that no namespace, link, process, /etc/hosts line or state is left behind.
"""

import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest
from browser import chromium, load

from conftest import csv_rows, launch_env, run
from hvdbench.cluster import inspect_links
from hvdbench.cluster.launch import launch_settings

pytestmark = [pytest.mark.integration, pytest.mark.root,
              pytest.mark.skipif(platform.system() != "Linux" or os.geteuid() != 0,
                                 reason="network namespaces need root on Linux (CI runs as root)")]

PROBE = str(Path(__file__).with_name("cluster_probe.py"))
STATE_ROOT = Path("/run/hvdbench-cluster")


def _ip_json(*args):
    out = subprocess.run(["ip", "-j", *args], capture_output=True, text=True, check=True).stdout.strip()
    return json.loads(out) if out else []


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def assert_nothing_left(name: str, state: dict) -> None:
    """What `up` created (per its state file) is gone: namespaces, links, processes, hosts entries."""
    plan = state["plan"]
    nodes = [n["name"] for n in plan["nodes"]]
    assert not set(nodes) & {n["name"] for n in _ip_json("netns", "list")}
    ours = {plan["bridge"]} | {n["host_veth"] for n in plan["nodes"]}
    assert not ours & {link["ifname"] for link in _ip_json("link", "show")}
    pids = [e["pid"] for e in state["created"] if e["kind"] in ("sshd", "daemon")]  # sshds, Slurm, munge
    assert not [p for p in pids if _alive(p)]
    assert f"hvdbench-cluster {name} begin" not in Path("/etc/hosts").read_text()
    assert not any(Path("/etc/netns", n).exists() for n in nodes)
    assert not [e["path"] for e in state["created"] if e["kind"] == "cgroup" and Path(e["path"]).exists()]
    assert not (STATE_ROOT / name).exists()


def cluster_cli(hvdbench_bin, *args, check=True, env=None):
    return run([hvdbench_bin, "cluster", *args], timeout=120, check=check, env=env or launch_env())


@contextmanager
def cluster(hvdbench_bin, name, subnet, nodes, slots, *extra):
    """`hvdbench cluster up` ... yield its state ... `hvdbench cluster down`, always, then check."""
    cluster_cli(hvdbench_bin, "down", "--name", name)  # a leftover of an earlier, killed run
    state = None
    try:
        up = cluster_cli(hvdbench_bin, "up", "--name", name, "--subnet", subnet, "--nodes", str(nodes),
                         "--slots", str(slots), *extra)
        assert f"Cluster {name} is up" in up.stdout
        state = json.loads((STATE_ROOT / name / "state.json").read_text())
        yield state
    finally:
        down = cluster_cli(hvdbench_bin, "down", "--name", name, check=False)
        assert down.returncode == 0, down.stderr
    assert f"Cluster {name} is down." in down.stdout
    assert_nothing_left(name, state)


# Each address's name by reverse lookup, or "error".
REVERSE_LOOKUP = """
import socket, sys
for address in sys.argv[1:]:
    try:
        print(socket.getnameinfo((address, 0), socket.NI_NAMEREQD)[0])
    except socket.gaierror:
        print("error")
"""


# The nice value of what a test starts ahead of other work: 87x the weight of make test's other worker's
# processes (nice 0) where both want a core, so that a shaped link's timings are the link's and a node
# under a CPU quota the one slow node. At -10 (9.3x) the other worker still took 0.9-1.2 cores during the
# CPU-quota rehearsal's runs and slowed its two even nodes by half in one 3x1 run of two, which left node3
# 1.23x their compute against a threshold of 0.51 (the spread of the two runs): not named (a46d823).
AHEAD = -20


@contextmanager
def ahead_of_other_work():
    """Every process started inside (`cluster up`'s sshds and so the ranks they start, a launcher) at
    nice AHEAD, which they inherit from this process; this one back to its own after."""
    before = os.getpriority(os.PRIO_PROCESS, 0)
    os.setpriority(os.PRIO_PROCESS, 0, AHEAD)
    try:
        yield
    finally:
        os.setpriority(os.PRIO_PROCESS, 0, before)


def _env(name):
    base = launch_env()
    return launch_env(**launch_settings(name, path=base["PATH"]).env)


def launch(name, launcher, hosts, np_=2):
    """Run the probe on the cluster (launcher: 'gloo' or 'mpi' through horovodrun, or 'mpirun') and
    return what its ranks wrote: {"rank-0": {...}, ...}. Reports come back as files because Open MPI
    may splice two ranks' stdout lines into one."""
    s = launch_settings(name)
    if launcher == "mpirun":
        argv = ["mpirun", "--allow-run-as-root", "-np", str(np_), "-H", hosts, *s.mpirun_args]
    else:
        argv = [str(Path(sys.executable).parent / "horovodrun"), "-np", str(np_), "-H", hosts,
                *s.horovodrun_args, f"--{launcher}"]
    with tempfile.TemporaryDirectory(prefix="hvdbench-probe-") as reports:
        run(argv + [sys.executable, PROBE, reports], timeout=240, env=_env(name))
        return {p.stem: json.loads(p.read_text()) for p in Path(reports).glob("*.json")}


def probes(reports: dict) -> list[dict]:
    return sorted(reports.values(), key=lambda r: r["rank"])


@pytest.mark.timeout(600)
def test_two_nodes_one_slot_each(hvdbench_bin):
    with cluster(hvdbench_bin, "it2x1", "10.213.31.0/24", 2, 1) as state:
        status = cluster_cli(hvdbench_bin, "status", "--name", "it2x1").stdout
        assert re.search(r"it2x1-node1 .*10\.213\.31\.2 .*yes", status), status
        assert re.search(r"it2x1-node2 .*10\.213\.31\.3 .*yes", status), status
        assert (STATE_ROOT / "it2x1" / "hostfile").read_text() == "it2x1-node1 slots=1\nit2x1-node2 slots=1\n"
        # A node's resolver asks only the node's own loopback, where nothing listens: what its hosts file
        # lacks (the IPv4-mapped form of node2's address, which torch's TCPStore looks up for each
        # client) fails at once rather than after the resolver's timeouts (10 s a lookup before);
        # node names still resolve both ways.
        resolv = run(["ip", "netns", "exec", "it2x1-node1", "cat", "/etc/resolv.conf"], timeout=60).stdout
        assert [line.split() for line in resolv.splitlines() if line.startswith("nameserver")] == \
            [["nameserver", "127.0.0.1"]], resolv
        lookup = run(["ip", "netns", "exec", "it2x1-node1", sys.executable, "-c", REVERSE_LOOKUP,
                      "::ffff:10.213.31.3", "10.213.31.3"], timeout=60).stdout.split()
        assert lookup == ["error", "it2x1-node2"], lookup
        for launcher in ("gloo", "mpi", "mpirun"):
            ranks = probes(launch("it2x1", launcher, "it2x1-node1:1,it2x1-node2:1"))
            assert [r["rank"] for r in ranks] == [0, 1], launcher
            assert all((r["size"], r["local_size"], r["cross_size"]) == (2, 1, 2) for r in ranks), ranks
            assert [r["hostname"] for r in ranks] == ["it2x1-node1", "it2x1-node2"], launcher
        assert len([e for e in state["created"] if e["kind"] == "sshd"]) == 2


@pytest.mark.timeout(600)
def test_one_node_two_slots(hvdbench_bin):
    with cluster(hvdbench_bin, "it1x2", "10.213.32.0/24", 1, 2):
        for launcher in ("gloo", "mpi"):
            ranks = probes(launch("it1x2", launcher, "it1x2-node1:2"))
            assert [r["rank"] for r in ranks] == [0, 1], launcher
            assert all((r["size"], r["local_size"], r["cross_size"]) == (2, 2, 1) for r in ranks), ranks
            assert {r["hostname"] for r in ranks} == {"it1x2-node1"}


# A one-connection TCP sink and source, run inside the nodes' namespaces: the sink prints its port,
# then the byte count it received once the source closes.
SINK = """
import socket, sys
srv = socket.create_server((sys.argv[1], 0))
print(srv.getsockname()[1], flush=True)
conn, _ = srv.accept()
total = 0
while chunk := conn.recv(1 << 16):
    total += len(chunk)
print(total, flush=True)
"""
SOURCE = """
import socket, sys
with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=60) as s:
    s.sendall(bytes(int(sys.argv[3])))
"""


def send_between_nodes(src_ns: str, dst_ns: str, dst_address: str, nbytes: int) -> int:
    """Stream `nbytes` over TCP from namespace src_ns to dst_address in dst_ns; returns what arrived."""
    sink = subprocess.Popen(["ip", "netns", "exec", dst_ns, sys.executable, "-c", SINK, dst_address],
                            stdout=subprocess.PIPE, text=True)
    try:
        port = sink.stdout.readline().strip()
        run(["ip", "netns", "exec", src_ns, sys.executable, "-c", SOURCE, dst_address, port, str(nbytes)],
            timeout=120)
        received = int(sink.stdout.readline())
        assert sink.wait(timeout=30) == 0
        return received
    finally:
        if sink.poll() is None:
            sink.kill()
            sink.wait()


# `bench links` must find node3's pairs the slow ones: beside another launch at the same priority (make
# test's other worker) its 100mbit pair once measured slower than node3's 10mbit ones (268 ms for 256 KiB
# against 167-218), so the test runs ahead of other work (nice AHEAD) rather than alone: ahead of the other
# worker, and of two busy loops, at nice -10 node1-node2 took 6.0 ms for 128 KiB and node3's pairs 57.7-57.9 ms.
@pytest.mark.timeout(300)
def test_links_are_shaped_as_configured_and_carry_the_traffic_between_nodes(hvdbench_bin, tmp_path):
    """--bandwidth 100mbit: a tbf of 100 Mbit/s on both ends of every node's veth (the node's
    transmit side inside its namespace, its receive side on the bridge), as `status` and the cluster's
    own inspection read them back from the kernel, and a stream from node1 to node2 crosses node1's
    transmit and node2's receive shaper. node3's own link at a tenth of the others' (--node-rate):
    `bench links` under mpirun across the three nodes flags node3's two pairs, not node1-node2's, and
    names node3 (issue 47's shaped link). Nothing is timed here: what the shaped link delivers, and
    what it does to scale-out against scale-up, is measured by benchmarks/bench_cluster.py."""
    with ahead_of_other_work(), cluster(hvdbench_bin, "itbw", "10.213.33.0/24", 3, 1, "--bandwidth", "100mbit",
                                        "--node-rate", "node3=10mbit") as state:
        sshds = [psutil.Process(e["pid"]) for e in state["created"] if e["kind"] == "sshd"]
        assert len(sshds) == 3 and {p.nice() for p in sshds} == {AHEAD}  # what they start runs ahead too
        status = cluster_cli(hvdbench_bin, "status", "--name", "itbw").stdout
        assert re.search(r"itbw-node1 .*tbf rate 100mbit", status), status
        assert re.search(r"itbw-node2 .*tbf rate 100mbit", status), status
        assert re.search(r"itbw-node3 .*tbf rate 10mbit .*none", status), status  # its own rate; no CPU quota
        assert launch_settings("itbw").link == "emulated veth bridge, 100mbit, except itbw-node3 at 10mbit"
        before = {link.node: link for link in inspect_links("itbw")}
        assert set(before) == {"itbw-node1", "itbw-node2", "itbw-node3"}
        for link in before.values():
            rate = 10_000_000 if link.node == "itbw-node3" else 100_000_000
            for end in (link.transmit, link.receive):
                assert (end["kind"], end["options"]["rate"]) == ("tbf", rate // 8), link  # bytes/s
                assert abs(end["options"]["burst"] - 65536) <= 655, link  # rounded to the kernel's ticks

        nbytes = 4 << 20
        assert send_between_nodes("itbw-node1", "itbw-node2", "10.213.33.3", nbytes) == nbytes
        after = {link.node: link for link in inspect_links("itbw")}

        def crossed(node, end):
            return getattr(after[node], end)["bytes"] - getattr(before[node], end)["bytes"]

        assert crossed("itbw-node1", "transmit") >= nbytes  # payload plus TCP/IP headers
        assert crossed("itbw-node2", "receive") >= nbytes
        assert crossed("itbw-node2", "transmit") < nbytes // 8  # the way back: acknowledgements only
        assert crossed("itbw-node1", "receive") < nbytes // 8

        # 128 KiB is the largest size: at 10 Mbit/s a round trip is ~0.2 s, and --budget-s 0.3 keeps each
        # slow pair to one or two of them a repeat (256 KiB and the default 1 s budget: the test took 33 s
        # alone, 19 s now; node3's pairs still measure 9x slower than node1-node2).
        s = launch_settings("itbw")
        bench = run(["mpirun", "--allow-run-as-root", "-np", "3", "-H", "itbw-node1:1,itbw-node2:1,itbw-node3:1",
                     *s.mpirun_args, hvdbench_bin, "bench", "links", "--sizes", "8,128K", "--repeats", "2",
                     "--budget-s", "0.3", "--out", tmp_path], timeout=240, env=_env("itbw"))
    assert "every pair with itbw-node3 is slow" in bench.stdout, bench.stdout
    largest = [r for r in csv_rows(tmp_path / "bench_links.csv") if r["bytes"] == str(128 << 10)]
    assert {(r["host_a"], r["host_b"]) for r in largest} == {("itbw-node1", "itbw-node2"),
                                                           ("itbw-node1", "itbw-node3"),
                                                           ("itbw-node2", "itbw-node3")}
    rate = {frozenset((r["host_a"], r["host_b"])): float(r["bandwidth_gb_s"]) for r in largest}
    assert rate[frozenset(("itbw-node1", "itbw-node3"))] < rate[frozenset(("itbw-node1", "itbw-node2"))] / 2
    assert rate[frozenset(("itbw-node2", "itbw-node3"))] < rate[frozenset(("itbw-node1", "itbw-node2"))] / 2


@pytest.mark.timeout(300)
def test_latency_is_netem_on_the_sending_side_or_a_clear_refusal(hvdbench_bin):
    name = "itlat"
    cluster_cli(hvdbench_bin, "down", "--name", name)
    up = cluster_cli(hvdbench_bin, "up", "--name", name, "--subnet", "10.213.38.0/24", "--nodes", "2",
                     "--bandwidth", "100mbit", "--latency", "100us", check=False)
    if up.returncode != 0:  # a kernel without sch_netem: refused, and nothing of it is left
        assert up.stderr.strip() == ("Error: --latency needs the netem queueing discipline, which this kernel "
                                     "lacks (CONFIG_NET_SCH_NETEM); shape with --bandwidth alone")
        assert not {f"{name}-node1", f"{name}-node2"} & {n["name"] for n in _ip_json("netns", "list")}
        assert not {f"{name}-br", f"{name}-v1", f"{name}-v2"} & {link["ifname"] for link in _ip_json("link", "show")}
        assert not (STATE_ROOT / name).exists()
        return
    state = json.loads((STATE_ROOT / name / "state.json").read_text())
    try:
        for link in inspect_links(name):
            sent, received = link.transmit, link.receive
            assert sent["kind"] == "netem", link
            assert sent["options"]["delay"]["delay"] == pytest.approx(100e-6), link  # seconds
            assert sent["options"]["rate"]["rate"] == 100_000_000 // 8, link
            assert (received["kind"], received["options"]["rate"]) == ("tbf", 100_000_000 // 8), link
        status = cluster_cli(hvdbench_bin, "status", "--name", name).stdout
        assert status.count("netem delay 100us rate 100mbit") == 2, status
    finally:
        down = cluster_cli(hvdbench_bin, "down", "--name", name, check=False)
        assert down.returncode == 0, down.stderr
    assert_nothing_left(name, state)


@pytest.mark.timeout(300)
def test_occupied_subnet_taken_name_and_down_twice(hvdbench_bin):
    with cluster(hvdbench_bin, "itbad", "10.213.34.0/24", 1, 1):
        clash = cluster_cli(hvdbench_bin, "up", "--name", "itbad2", "--subnet", "10.213.34.128/25", check=False)
        assert clash.returncode == 1
        assert clash.stderr.strip() == ("Error: --subnet 10.213.34.128/25 is in use on this machine "
                                        "(itbad-br has 10.213.34.1/24; route 10.213.34.0/24 dev itbad-br); "
                                        "pick another with --subnet")
        again = cluster_cli(hvdbench_bin, "up", "--name", "itbad", "--subnet", "10.213.35.0/24", check=False)
        assert again.returncode == 1 and "Error: cluster name 'itbad' clashes with existing" in again.stderr
        assert not (STATE_ROOT / "itbad2").exists()
    loopback = cluster_cli(hvdbench_bin, "up", "--name", "itlo", "--subnet", "127.0.5.0/24", check=False)
    assert loopback.returncode == 1 and "lo has 127.0.0.1/8" in loopback.stderr
    twice = cluster_cli(hvdbench_bin, "down", "--name", "itbad")
    assert twice.stdout.strip() == "No cluster named itbad; nothing to do."


@pytest.mark.timeout(300)
@pytest.mark.parametrize("step", ["network", "sshd"])
def test_down_cleans_up_after_a_killed_up(hvdbench_bin, step):
    """Killed after the network (no cgroup yet) or after the sshds (node2's sshd in its CPU-quota
    cgroup): `down` stops the sshds, then removes the cgroup they were in, and the rest."""
    name = f"itkill{step[0]}"
    cluster_cli(hvdbench_bin, "down", "--name", name)
    killed = cluster_cli(hvdbench_bin, "up", "--name", name, "--subnet", "10.213.36.0/24", "--nodes", "2",
                         "--node-cpu", "node2=0.5", check=False, env=launch_env(HVDBENCH_CLUSTER_INJECT_CRASH=step))
    assert killed.returncode == -signal.SIGKILL
    state = json.loads((STATE_ROOT / name / "state.json").read_text())
    assert state["phase"] == "creating"
    assert {f"{name}-node1", f"{name}-node2"} <= {n["name"] for n in _ip_json("netns", "list")}
    pids = [e["pid"] for e in state["created"] if e["kind"] == "sshd"]
    assert len(pids) == (2 if step == "sshd" else 0) and all(_alive(p) for p in pids)
    groups = [e for e in state["created"] if e["kind"] == "cgroup"]
    if step == "sshd":  # node2's sshd (and only it) lives in node2's cgroup
        [group] = groups
        assert group["node"] == f"{name}-node2" and Path(group["path"]).is_dir()
        in_it = {int(p) for p in Path(group["path"], "cgroup.procs").read_text().split()}
        sshd_of = {e["node"]: e["pid"] for e in state["created"] if e["kind"] == "sshd"}
        assert sshd_of[f"{name}-node2"] in in_it and sshd_of[f"{name}-node1"] not in in_it
    else:
        assert groups == []
    status = cluster_cli(hvdbench_bin, "status", "--name", name).stdout
    assert "was not completely created" in status
    down = cluster_cli(hvdbench_bin, "down", "--name", name)
    assert f"Cluster {name} is down." in down.stdout
    assert_nothing_left(name, state)


@pytest.mark.timeout(300)
def test_a_failing_up_undoes_what_it_made(hvdbench_bin):
    failed = cluster_cli(hvdbench_bin, "up", "--name", "itfail", "--subnet", "10.213.37.0/24",
                         "--hostfile", "/proc/hvdbench-nowhere/hostfile", check=False)
    assert failed.returncode == 1
    assert failed.stderr.strip() == ("Error: cluster 'itfail' not created (undone): /proc/hvdbench-nowhere: "
                                     "No such file or directory")
    assert not {"itfail-node1", "itfail-node2"} & {n["name"] for n in _ip_json("netns", "list")}
    assert not {"itfail-br", "itfail-v1", "itfail-v2"} & {link["ifname"] for link in _ip_json("link", "show")}
    assert not (STATE_ROOT / "itfail").exists()
    assert "hvdbench-cluster itfail" not in Path("/etc/hosts").read_text()


# Ahead of other work (nice AHEAD), not alone: node3 must be the one slow node. At nice -10 and a quota of
# 0.45, beside make test's other worker, its 3x1 waterfall put 198 ms in imbalance against 48 in
# communication (alone: 507 against 119) and node3's compute at 1.70x the others' against a threshold of
# 0.19; beside two busy loops 254 against 90 and 2.07x at nice -10, 457 against 213 and 2.48x at nice -20.
# But at a46d823 the other worker slowed node1 and node2 by half in one 3x1 run of two (0.9-1.2 cores
# busy), node3 came out 2.0x, then 1.23x, against a threshold of 0.51, and was not named: hence nice -20
# and a quota of 0.3, node3 half as fast again: beside the detection, GNMT and sweep tests node3 came out
# 4.4x, 3.7x and 5.1x against thresholds of 0.15, 0.46 and 0.69. Then at 9271074 (a fresh clone's make
# test, 2026-12-01 11:08) the other worker (1.5 cores busy) slowed node1 and node2 by 1.8x in the second
# 3x1 run, whose node3 came out 1.70x after 4.82x, against a threshold of 0.81 (the others' compute
# moved that much between the two runs), and was not named: hence a quota of 0.2, under which node3's
# step is quota-bound at ~0.3 s, 3.4x the others' slowest seen. The even 2x1's second host came out
# 1.07-1.44x the first (its 8 steps of 20-57 ms are noisy), but a host is named only where it was slow in
# every layout it ran in, and node2 is not in 3x1.
@pytest.mark.timeout(900)
def test_a_node_under_a_cpu_quota_is_named_the_straggler_where_it_ran_and_nowhere_else(hvdbench_bin, tmp_path):
    """Issue 47's rehearsal of a bad node: three nodes, node3's ranks under 0.2 of the CPU the node would
    otherwise get (--node-cpu node3=0.2, a CFS quota on the cgroup its sshd started in: a quota is a
    ceiling, which binds here because the cluster runs ahead of other work, at nice AHEAD; beside other work
    at the same priority every rank got less than half its share and half did not bind). Its ranks' start-up
    (imports, ssh) runs under the quota too: with two repeats of each layout the test took 115 s alone at
    0.2 (node3 9.6x and 9.2x the others, threshold 0.52), 75-79 s at 0.3, 60 s at 0.45, but the milder
    quotas were each once too mild beside the other worker (see above). One sweep of debug ResNet-50 over
    2x1 (node1 and node2: the hostfile's first two) and 3x1 (all three), one run each (53 s alone: a
    second repeat checked nothing the first does not; the report's repeats are tests/unit's). The
    report names node3, and only node3, as the straggler of 3x1 (the cross-layout line too), puts 3x1's loss
    over 2x1 in imbalance rather than communication, and names no straggler in 2x1: the even cluster in the
    same launch, no false alarm. Nothing here is timed; the figures are the report's."""
    name, quota = "itslow", 0.2
    node3 = f"{name}-node3"
    with ahead_of_other_work(), cluster(hvdbench_bin, name, "10.213.39.0/24", 3, 1, "--node-cpu", f"node3={quota}") \
            as state:
        status = cluster_cli(hvdbench_bin, "status", "--name", name).stdout
        share = round(quota * len(os.sched_getaffinity(0)) / 3 * 50_000)  # that share of node3's even one, per 50 ms
        assert re.search(rf"{node3} .* {share / 50_000:.2f} CPU \({share}/50000 us\)", status), status
        assert re.search(rf"{name}-node1 .* none ", status), status
        [group] = [Path(e["path"]) for e in state["created"] if e["kind"] == "cgroup"]
        out, report = tmp_path / "sweep", tmp_path / "report"
        run([hvdbench_bin, "sweep", "resnet50", "--cluster", name, "--layouts", "2x1,3x1", "--repeats", "1",
             "--out", out, "--", "--flavor", "debug", "--synthetic", "--steps", "8", "--warmup-steps", "2"],
            timeout=600, env=_env(name))
        throttled = dict(line.split() for line in (group / "cpu.stat").read_text().splitlines())
        assert int(throttled["nr_throttled"]) > 0  # node3's ranks ran in its cgroup, and met its quota
        summary = run([hvdbench_bin, "report", out, "--out", report]).stdout
    records = csv_rows(out / "runs.csv")
    assert sorted((r["layout"], r["status"]) for r in records) == [("2x1", "success"), ("3x1", "success")]
    assert {r["slowest_host"] for r in records if r["layout"] == "3x1"} == {node3}
    ranks = csv_rows(report / "stragglers.csv")
    named = {(r["layout"], r["host"]) for r in ranks if r["straggler"] == "yes"}
    assert named == {("3x1", node3)}, ranks  # node3 where it ran; nobody in the even 2x1
    hosts = {(r["layout"], r["host"]): r for r in csv_rows(report / "stragglers_hosts.csv")}
    assert {k for k, r in hosts.items() if r["straggler"] == "yes"} == {("3x1", node3)}
    assert float(hosts[("3x1", node3)]["vs_others"]) > 1 + float(hosts[("3x1", node3)]["threshold"])
    text = (report / "summary.md").read_text()
    assert f"every layout with {node3} (3x1) waited for it" in text
    assert f"Straggler: rank 2 on {node3}." in text
    assert text.count("No straggler: every rank within the threshold.") == 1  # 2x1's
    assert "## Which rank or host held the others back" in summary
    [fall] = [r for r in csv_rows(report / "waterfall.csv") if r["layout"] == "3x1"]
    assert fall["baseline"] == "2x1"
    assert float(fall["imbalance_loss"]) > max(0.0, float(fall["comm_loss"])), fall
    # Issue 55: the throttled node is a failed check of the verdict, naming it, on the first lines of
    # verdict.csv and of report.html, which opens offline in a real browser.
    verdict = {r["check"]: r for r in csv_rows(report / "verdict.csv")}
    assert (verdict["stragglers"]["state"], verdict["stragglers"]["subject"]) == ("fail", node3), verdict
    assert verdict["failed_runs"]["state"] == "pass"
    with chromium(tmp_path) as browser:
        page = load(browser, report / "report.html")
    assert page.checks["stragglers"] == "fail" and page.console == [] and page.requests == []
    assert node3 in (report / "report.html").read_text().split('id="cost"')[0]  # named inside the verdict
