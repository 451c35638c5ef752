"""hvdbench cluster up --node-cpu / --node-rate: one node made slower than the others (issue 47's
rehearsal of a bad node). The option parsing, the quota's arithmetic, the cgroup hierarchy found
from /proc/self/mounts (v2 where it works, else v1, else one line), the files written, the argv that
starts a node's sshd inside its cgroup, the per-node tc lines, and (as root, where this machine has a
cpu hierarchy) a real cgroup that a process joins and `down`'s removal waits out.

    .venv/bin/python -m pytest tests/unit/test_cluster_bad_node.py
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from hvdbench.cli.main import cli
from hvdbench.cluster import cgroup, shaping
from hvdbench.cluster.blueprint import CPU_PERIOD_US, ClusterError, UpOptions, make_plan
from hvdbench.cluster.launch import launch_settings
from hvdbench.cluster.lifecycle import _in_cgroup, check_free
from hvdbench.cluster.state import Journal, make_state_dir, plan_from_dict, plan_to_dict


def _plan(tmp_path, **kw):
    return make_plan(UpOptions("hvd", nodes=3, slots=1, subnet="10.213.0.0/24", **kw), state_root=tmp_path, cpus=2)


def test_node_cpu_is_a_fraction_of_the_nodes_even_share_of_the_machine(tmp_path):
    plan = _plan(tmp_path, node_cpu=["node3=0.5"])
    # 2 CPUs over 3 nodes: node3's share is 2/3 CPU, half of it 1/3 CPU = 16667 us per 50 ms
    assert [(n.cpu_fraction, n.cpu_quota_us) for n in plan.nodes] == [(None, None), (None, None), (0.5, 16667)]
    assert CPU_PERIOD_US == 50_000
    full_name = _plan(tmp_path, node_cpu=["hvd-node1=1", "node2=0.25"])
    assert [n.cpu_quota_us for n in full_name.nodes] == [33333, 8333, None]
    assert cgroup.plan_needs_one(plan) and not cgroup.plan_needs_one(_plan(tmp_path))


def test_node_rate_overrides_the_clusters_shaping_on_both_ends_of_that_node_only(tmp_path):
    plan = _plan(tmp_path, bandwidth="1gbit", node_rate=["node3=100mbit"])
    assert [n.rate_bit for n in plan.nodes] == [None, None, 100_000_000]
    slow = ["tbf", "rate", "100mbit", "burst", "65536", "latency", "50ms"]
    assert shaping.shape_node(plan, plan.nodes[2]) == [
        ["tc", "-n", "hvd-node3", "qdisc", "replace", "dev", "hvd-br", "root"] + slow,
        ["tc", "qdisc", "replace", "dev", "hvd-v3", "root"] + slow]
    assert shaping.shape_node(plan, plan.nodes[0])[0][-5:] == ["1gbit", "burst", "125000", "latency", "50ms"]
    assert plan.describe_links() == "1gbit, except hvd-node3 at 100mbit"
    # alone (no --bandwidth) only that node is shaped; with --latency its netem carries its own rate
    alone = _plan(tmp_path, node_rate=["node2=10mbit"])
    assert [bool(shaping.shape_node(alone, n)) for n in alone.nodes] == [False, True, False]
    assert alone.describe_links() == "unshaped, except hvd-node2 at 10mbit"
    delayed = _plan(tmp_path, latency="100us", node_rate=["node1=10mbit"])
    assert shaping.shape_node(delayed, delayed.nodes[0])[0][-7:] == [
        "netem", "delay", "100us", "rate", "10mbit", "limit", "100000"]
    assert shaping.shape_node(delayed, delayed.nodes[1])[0][-5:] == ["netem", "delay", "100us", "limit", "100000"]


@pytest.mark.parametrize("kwargs,message", [
    (dict(node_cpu=["node4=0.5"]), "--node-cpu node4: no such node (cluster hvd has node1..node3)"),
    (dict(node_cpu=["other-node1=0.5"]), "--node-cpu other-node1: no such node"),
    (dict(node_cpu=["node3"]), "--node-cpu 'node3' is invalid: give NODE=VALUE"),
    (dict(node_cpu=["=0.5"]), "--node-cpu '=0.5' is invalid"),
    (dict(node_cpu=["node3=0.5", "hvd-node3=0.2"]), "--node-cpu hvd-node3: given twice"),
    (dict(node_cpu=["node3=0"]), "--node-cpu node3=0: give a fraction above 0 and at most 1"),
    (dict(node_cpu=["node3=1.5"]), "--node-cpu node3=1.5: give a fraction above 0 and at most 1"),
    (dict(node_cpu=["node3=half"]), "--node-cpu node3=half: give a fraction"),
    (dict(node_cpu=["node3=nan"]), "--node-cpu node3=nan: give a fraction"),
    (dict(node_cpu=["node3=0.01"]), "--node-cpu node3=0.01 comes to 333 us of CPU per 50000 us, below the kernel's"),
    (dict(node_rate=["node2=fast"]), "--node-rate node2=fast is invalid: give a rate such as 100mbit"),
    (dict(node_rate=["node9=1gbit"]), "--node-rate node9: no such node"),
])
def test_bad_node_options_are_one_line_naming_the_option_and_node(tmp_path, kwargs, message):
    with pytest.raises(ClusterError) as e:
        _plan(tmp_path, **kwargs)
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_cli_refuses_a_bad_node_option_before_anything_exists():
    result = CliRunner().invoke(cli, ["cluster", "up", "--name", "nobad", "--nodes", "3", "--node-cpu", "node5=0.5"])
    assert result.exit_code == 1
    assert result.output.strip() == "Error: --node-cpu node5: no such node (cluster nobad has node1..node3)"
    assert not Path("/run/hvdbench-cluster/nobad").exists()


def test_the_plan_with_bad_nodes_round_trips_through_the_journal(tmp_path):
    plan = _plan(tmp_path, node_cpu=["node3=0.5"], node_rate=["node2=100mbit"])
    assert plan_from_dict(json.loads(json.dumps(plan_to_dict(plan)))) == plan
    make_state_dir(plan.state_dir)
    journal = Journal(plan)
    journal.set_phase("up")
    assert launch_settings("hvd", state_root=tmp_path).link == "emulated veth bridge, unshaped, except hvd-node2 at 100mbit"


# /proc/self/mounts of this project's CI machine: v1 controllers, and a cgroup2 mount without cpu
HYBRID = """tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0
cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup /sys/fs/cgroup/cpuset cgroup rw,relatime,cpuset 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
"""
UNIFIED = "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime,nsdelegate 0 0\n"
SYSTEMD_V1 = "cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,nosuid,nodev,noexec,relatime,cpu,cpuacct 0 0\n"


def _reader(files: dict[str, str]):
    def read(path):
        if str(path) not in files:
            raise FileNotFoundError(2, "No such file or directory")
        return files[str(path)]
    return read


def test_v1_is_used_where_the_cgroup2_mount_lacks_the_cpu_controller():
    read = _reader({"/sys/fs/cgroup/unified/cgroup.subtree_control": "\n", "/sys/fs/cgroup/cpu/cpu.cfs_quota_us": "-1\n"})
    h = cgroup.find_hierarchy(HYBRID, read, lambda p: True)
    assert h == cgroup.Hierarchy(1, Path("/sys/fs/cgroup/cpu"))
    assert cgroup.candidates(SYSTEMD_V1) == [cgroup.Hierarchy(1, Path("/sys/fs/cgroup/cpu,cpuacct"))]


def test_v2_is_used_where_its_root_enables_cpu_for_its_children():
    read = _reader({"/sys/fs/cgroup/cgroup.subtree_control": "cpuset cpu io memory pids\n"})
    assert cgroup.find_hierarchy(UNIFIED, read, lambda p: True) == cgroup.Hierarchy(2, Path("/sys/fs/cgroup"))
    both = _reader({"/sys/fs/cgroup/unified/cgroup.subtree_control": "cpu\n", "/sys/fs/cgroup/cpu/cpu.cfs_quota_us": "-1"})
    assert cgroup.find_hierarchy(HYBRID, both, lambda p: True).version == 2


def test_no_usable_hierarchy_is_one_line_saying_why_each_was_not():
    read = _reader({"/sys/fs/cgroup/unified/cgroup.subtree_control": "memory\n",
                    "/sys/fs/cgroup/cpu/cpu.cfs_quota_us": "-1\n"})
    with pytest.raises(ClusterError) as e:
        cgroup.find_hierarchy(HYBRID, read, lambda p: str(p) != "/sys/fs/cgroup/cpu")
    assert str(e.value) == (
        "--node-cpu needs a cgroup with the cpu controller, v2 (cpu.max) or v1 (cpu.cfs_quota_us), and this machine "
        "has none usable: /sys/fs/cgroup/unified (cgroup v2) does not enable the cpu controller for its children; "
        "/sys/fs/cgroup/cpu (cgroup v1) is not writable")
    with pytest.raises(ClusterError, match="none usable: no cgroup mount in /proc/self/mounts$"):
        cgroup.find_hierarchy("proc /proc proc rw 0 0\n", read, lambda p: True)


def test_quota_files_and_the_argv_that_starts_a_node_inside_its_cgroup(tmp_path):
    node = _plan(tmp_path, node_cpu=["node3=0.5"]).nodes[2]
    v1, v2 = cgroup.Hierarchy(1, Path("/sys/fs/cgroup/cpu")), cgroup.Hierarchy(2, Path("/sys/fs/cgroup"))
    assert cgroup.quota_files(v1, node, 50_000) == [
        (Path("/sys/fs/cgroup/cpu/hvdbench-hvd-node3/cpu.cfs_period_us"), "50000"),
        (Path("/sys/fs/cgroup/cpu/hvdbench-hvd-node3/cpu.cfs_quota_us"), "16667")]
    assert cgroup.quota_files(v2, node, 50_000) == [(Path("/sys/fs/cgroup/hvdbench-hvd-node3/cpu.max"), "16667 50000")]
    folder = Path("/sys/fs/cgroup/cpu/hvdbench-hvd-node3")
    argv = ["ip", "netns", "exec", "hvd-node3", "unshare", "--uts", "--", "python", "-m", "x"]
    assert _in_cgroup(argv, None, {"ip": "/usr/sbin/ip"}) == argv
    # before `ip netns exec`, which mounts a /sys without the cgroups; every step execs the next
    assert _in_cgroup(argv, folder, {"ip": "/usr/sbin/ip"}) == [
        sys.executable, "-m", "hvdbench.cluster.nodeinit", "--cgroup", str(folder), "--", "/usr/sbin/ip", *argv[1:]]


def test_quota_read_back_in_words(tmp_path):
    (tmp_path / "cpu.max").write_text("16667 50000\n")
    assert cgroup.describe(cgroup.read_quota(2, tmp_path)) == "0.33 CPU (16667/50000 us)"
    (tmp_path / "cpu.cfs_quota_us").write_text("-1\n")
    (tmp_path / "cpu.cfs_period_us").write_text("100000\n")
    assert cgroup.describe(cgroup.read_quota(1, tmp_path)) == "unlimited"
    assert cgroup.describe(cgroup.read_quota(1, tmp_path / "gone")) == "absent"


def test_nodeinit_refuses_a_bad_cgroup_form():
    for argv in (["--cgroup", "rel", "--", "/bin/true"], ["--cgroup", "/x", "/bin/true"], ["--cgroup", "/x", "--", "true"]):
        proc = subprocess.run([sys.executable, "-m", "hvdbench.cluster.nodeinit", *argv], capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 1 and "usage: python -m hvdbench.cluster.nodeinit --cgroup" in proc.stderr, argv


def _hierarchy():
    try:
        return cgroup.find_hierarchy()
    except (ClusterError, OSError):
        return None


@pytest.mark.skipif(os.geteuid() != 0 or _hierarchy() is None, reason="makes a real cgroup: root and a cpu hierarchy")
def test_a_process_started_in_a_real_cgroup_stays_in_it_and_removal_waits_for_it(tmp_path):
    h = _hierarchy()
    plan = make_plan(UpOptions(f"u{os.getpid() % 10**6}", nodes=3, subnet="10.213.250.0/24", node_cpu=["node1=0.5"]),
                     state_root=tmp_path, cpus=2)
    node = plan.nodes[0]
    folder = cgroup.create(h, node, CPU_PERIOD_US)
    proc = None
    try:
        assert cgroup.read_quota(h.version, folder) == (16667, CPU_PERIOD_US)  # 0.5 x 2/3 CPU
        with pytest.raises(ClusterError, match=f"clashes with existing cgroup {folder};"):  # before anything is made
            check_free(plan, h)
        proc = subprocess.Popen(cgroup.started_in(folder, ["/bin/sleep", "60"]))
        # nodeinit joins the cgroup, then execs sleep: wait for the exec (the pid's cmdline reads empty
        # or python's until it is done), then the process must still be in the cgroup.
        deadline = time.monotonic() + 30
        while not Path(f"/proc/{proc.pid}/cmdline").read_bytes().startswith(b"/bin/sleep"):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        assert proc.pid in cgroup.procs(folder)
        with pytest.raises(ClusterError, match=f"{folder} still holds process\\(es\\) {proc.pid}, which were started "
                                               "on its node"):
            cgroup.remove(folder, timeout_s=0.2)
        assert folder.is_dir()
        proc.kill()
        proc.wait()
        assert cgroup.remove(folder) and not folder.exists()
        assert cgroup.remove(folder) is False  # already gone: nothing to do
    finally:
        if proc and proc.poll() is None:
            proc.kill()
            proc.wait()
        if folder.exists():
            folder.rmdir()
