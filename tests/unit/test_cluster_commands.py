"""hvdbench cluster: the exact ip / tc / sshd command lines and the checks made on `ip -j` output."""

import sys

from hvdbench.cluster import netns, shaping, sshd
from hvdbench.cluster.blueprint import make_plan


def _plan(tmp_path, **kw):
    return make_plan("hvd", nodes=2, slots=2, subnet="10.213.0.0/24", state_root=tmp_path, **kw)


def test_bridge_and_node_links(tmp_path):
    plan = _plan(tmp_path)
    assert netns.bridge_up(plan) == [
        ["ip", "link", "add", "hvd-br", "type", "bridge"],
        ["ip", "addr", "add", "10.213.0.1/24", "dev", "hvd-br"],
        ["ip", "link", "set", "hvd-br", "up"]]
    node = plan.nodes[1]
    assert netns.netns_add(node) == ["ip", "netns", "add", "hvd-node2"]
    assert netns.node_link_up(plan, node) == [
        ["ip", "link", "add", "hvd-v2", "type", "veth", "peer", "name", "hvd-br", "netns", "hvd-node2"],
        ["ip", "link", "set", "hvd-v2", "master", "hvd-br", "up"],
        ["ip", "-n", "hvd-node2", "link", "set", "lo", "up"],
        ["ip", "-n", "hvd-node2", "addr", "add", "10.213.0.3/24", "dev", "hvd-br"],
        ["ip", "-n", "hvd-node2", "link", "set", "hvd-br", "up"],
        ["ip", "-n", "hvd-node2", "route", "add", "default", "via", "10.213.0.1"]]
    assert netns.netns_del("hvd-node2") == ["ip", "netns", "del", "hvd-node2"]
    assert netns.link_del("hvd-v2") == ["ip", "link", "del", "hvd-v2"]


def test_node_hosts_file_names_every_node(tmp_path):
    plan = _plan(tmp_path)
    text = netns.node_hosts_text(plan, plan.nodes[0])
    assert "10.213.0.2\thvd-node1\n" in text and "10.213.0.3\thvd-node2\n" in text
    assert "127.0.0.1\tlocalhost\n" in text


# Trimmed `ip -j addr` / `ip -j route` output of a machine with eth0, docker0 and an old route.
ADDRS = [{"ifname": "lo", "addr_info": [{"family": "inet", "local": "127.0.0.1", "prefixlen": 8},
                                        {"family": "inet6", "local": "::1", "prefixlen": 128}]},
         {"ifname": "eth0", "addr_info": [{"family": "inet", "local": "192.0.2.2", "prefixlen": 24}]},
         {"ifname": "docker0", "addr_info": [{"family": "inet", "local": "10.213.0.129", "prefixlen": 25}]}]
ROUTES = [{"dst": "default", "gateway": "192.0.2.1", "dev": "eth0"},
          {"dst": "10.99.0.0/16", "dev": "tun0"},
          {"dst": "fd00::/64", "dev": "eth0"},
          {"dst": "10.214.5.7", "dev": "eth0"},
          {"type": "local", "dst": "127.0.0.0/8", "dev": "lo", "table": "local"},
          {"type": "local", "dst": "10.213.0.129", "dev": "docker0", "table": "local"},
          {"type": "broadcast", "dst": "10.213.0.255", "dev": "docker0", "table": "local"}]


def test_subnet_conflicts_name_what_uses_the_subnet():
    assert netns.subnet_conflicts("10.213.0.0/24", ADDRS, ROUTES) == ["docker0 has 10.213.0.129/25"]
    assert netns.subnet_conflicts("10.99.3.0/24", ADDRS, ROUTES) == ["route 10.99.0.0/16 dev tun0"]
    assert netns.subnet_conflicts("10.214.5.0/24", ADDRS, ROUTES) == ["route 10.214.5.7 dev eth0"]
    assert netns.subnet_conflicts("127.0.5.0/24", ADDRS, ROUTES) == ["lo has 127.0.0.1/8", "route 127.0.0.0/8 dev lo"]
    assert netns.subnet_conflicts("10.220.0.0/24", ADDRS, ROUTES) == []


def test_name_conflicts(tmp_path):
    plan = _plan(tmp_path)
    assert netns.name_conflicts(plan, [{"name": "other"}], [{"ifname": "eth0"}]) == []
    assert netns.name_conflicts(plan, [{"name": "hvd-node2"}], [{"ifname": "hvd-br"}, {"ifname": "hvd-v1"}]) == [
        "network namespace hvd-node2", "interface hvd-br", "interface hvd-v1"]


def test_bandwidth_shapes_both_ends_of_each_node_link(tmp_path):
    plan = _plan(tmp_path, bandwidth="100mbit")
    tbf = ["tbf", "rate", "100mbit", "burst", "65536", "latency", "50ms"]
    assert shaping.shape_node(plan, plan.nodes[0]) == [
        ["tc", "-n", "hvd-node1", "qdisc", "replace", "dev", "hvd-br", "root"] + tbf,
        ["tc", "qdisc", "replace", "dev", "hvd-v1", "root"] + tbf]


def test_high_rate_gets_a_burst_of_one_millisecond(tmp_path):
    plan = _plan(tmp_path, bandwidth="10gbit")
    assert shaping.shape_node(plan, plan.nodes[0])[0][-5:] == ["10gbit", "burst", "1250000", "latency", "50ms"]


def test_latency_uses_netem_on_the_sending_side_only(tmp_path):
    plan = _plan(tmp_path, bandwidth="1gbit", latency="100us")
    assert shaping.shape_node(plan, plan.nodes[1]) == [
        ["tc", "-n", "hvd-node2", "qdisc", "replace", "dev", "hvd-br", "root",
         "netem", "delay", "100us", "rate", "1gbit", "limit", "100000"],
        ["tc", "qdisc", "replace", "dev", "hvd-v2", "root",
         "tbf", "rate", "1gbit", "burst", "125000", "latency", "50ms"]]
    latency_only = _plan(tmp_path, latency="2ms")
    assert shaping.shape_node(latency_only, latency_only.nodes[0]) == [
        ["tc", "-n", "hvd-node1", "qdisc", "replace", "dev", "hvd-br", "root",
         "netem", "delay", "2000us", "limit", "100000"]]


def test_unshaped_cluster_runs_no_tc(tmp_path):
    plan = _plan(tmp_path)
    assert shaping.shape_node(plan, plan.nodes[0]) == []


def test_describe_qdiscs_from_tc_json():
    # as printed by `tc -j qdisc show` (rates in bytes/s, netem delay in seconds)
    assert shaping.describe_qdiscs([{"kind": "tbf", "root": True, "options": {"rate": 12500000}}]) == \
        "tbf rate 100mbit"
    assert shaping.describe_qdiscs([{"kind": "netem", "root": True, "options": {
        "delay": {"delay": 0.0001}, "rate": {"rate": 125000000}}}]) == "netem delay 100us rate 1gbit"
    assert shaping.describe_qdiscs([{"kind": "noqueue", "root": True, "options": {}}]) == "unshaped"
    assert shaping.describe_qdiscs([]) == "unshaped"


def test_both_ends_of_a_link_are_read_back_with_their_counters(tmp_path):
    plan = _plan(tmp_path, bandwidth="100mbit")
    node = plan.nodes[0]
    assert shaping.show_node_qdisc(plan, node) == ["tc", "-j", "-s", "-n", "hvd-node1", "qdisc", "show", "dev",
                                                   "hvd-br"]
    assert shaping.show_host_qdisc(node) == ["tc", "-j", "-s", "qdisc", "show", "dev", "hvd-v1"]
    # as `tc -j -s qdisc show` (iproute2 6.1) prints `tbf rate 100mbit burst 65536 latency 50ms` and a
    # child qdisc under it (burst comes back rounded to the kernel's ticks)
    shown = [{"kind": "tbf", "handle": "8001:", "root": True, "refcnt": 3,
              "options": {"rate": 12500000, "burst": 65525, "lat": 50000},
              "bytes": 90, "packets": 1, "drops": 0, "overlimits": 0, "requeues": 0, "backlog": 0, "qlen": 0},
             {"kind": "bfifo", "handle": "1:", "parent": "8001:", "options": {"limit": 690000}}]
    assert shaping.root_qdisc(shown) is shown[0]
    assert shaping.root_qdisc(shown[1:]) is None and shaping.root_qdisc([]) is None
    assert shaping.describe_qdiscs(shown) == "tbf rate 100mbit"
    assert shaping.describe_qdiscs(shown[1:]) == "unshaped"


def test_sshd_is_started_without_a_shell_and_with_its_own_hostname(tmp_path):
    plan = _plan(tmp_path)
    d = tmp_path / "hvd" / "hvd-node1"
    assert sshd.sshd_argv(plan, plan.nodes[0], "/usr/sbin/sshd", python="/venv/bin/python") == [
        "ip", "netns", "exec", "hvd-node1", "unshare", "--uts", "--",
        "/venv/bin/python", "-m", "hvdbench.cluster.nodeinit", "hvd-node1",
        "/usr/sbin/sshd", "-D", "-f", str(d / "sshd_config"), "-E", str(d / "sshd.log")]
    assert sshd.sshd_argv(plan, plan.nodes[0], "/usr/sbin/sshd")[7] == sys.executable
    assert sshd.keygen_argv(tmp_path / "k", "c") == ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "c",
                                                     "-f", str(tmp_path / "k")]


def test_sshd_config_listens_on_the_node_only_and_takes_only_our_key(tmp_path):
    plan = _plan(tmp_path)
    lines = sshd.sshd_config_text(plan, plan.nodes[1]).splitlines()
    assert "ListenAddress 10.213.0.3:22" in lines
    assert f"HostKey {tmp_path / 'hvd' / 'hvd-node2' / 'ssh_host_ed25519_key'}" in lines
    assert f"AuthorizedKeysFile {tmp_path / 'hvd' / 'authorized_keys'}" in lines
    for line in ("PasswordAuthentication no", "KbdInteractiveAuthentication no", "PermitRootLogin prohibit-password",
                 "AllowTcpForwarding no", "PermitUserEnvironment no"):
        assert line in lines
    assert sshd.authorized_keys_text(plan, "ssh-ed25519 AAAAkey c\n") == (
        'from="10.213.0.0/24",no-port-forwarding,no-agent-forwarding,no-X11-forwarding ssh-ed25519 AAAAkey c\n')


def test_ssh_client_side_lives_in_the_state_dir(tmp_path):
    plan = _plan(tmp_path)
    state = tmp_path / "hvd"
    config = sshd.ssh_config_text(plan)
    assert "Host hvd-node1 hvd-node2 10.213.0.2 10.213.0.3\n" in config
    assert f"IdentityFile {state / 'id_ed25519'}" in config
    assert f"UserKnownHostsFile {state / 'known_hosts'}" in config
    assert "StrictHostKeyChecking yes" in config and "~" not in config and ".ssh" not in config
    known = sshd.known_hosts_text(plan, {"hvd-node1": "ssh-ed25519 AAA1 hvd-node1\n",
                                         "hvd-node2": "ssh-ed25519 AAA2 hvd-node2\n"})
    assert known == "hvd-node1,10.213.0.2 ssh-ed25519 AAA1\nhvd-node2,10.213.0.3 ssh-ed25519 AAA2\n"
    assert sshd.ssh_wrapper_text("/usr/bin/ssh", state / "ssh_config") == (
        f'#!/bin/sh\nexec /usr/bin/ssh -F {state / "ssh_config"} "$@"\n')


def test_ssh_banner_is_none_when_nothing_listens():
    assert sshd.ssh_banner("127.0.0.1", port=9, timeout=0.5) is None


# --- a sweep on the emulated cluster's own Slurm (issue 30) ------------------------------------------

def _cluster_up(tmp_path, slurm):
    """A cluster's state as `hvdbench cluster up` leaves it (state.json, phase up, its hostfile),
    written in a temporary folder: no namespace, no daemon."""
    from hvdbench.cluster.state import Journal, make_state_dir
    from hvdbench.topology import Host, write_hostfile

    plan = _plan(tmp_path, slurm=slurm)
    make_state_dir(plan.state_dir)
    write_hostfile(plan.hostfile, [Host(n.name, plan.slots) for n in plan.nodes])
    Journal(plan, phase="up").save()
    return plan


def test_slurm_on_a_cluster_takes_its_hostfile_and_slurm_conf(tmp_path):
    from hvdbench.sweep.build import cluster_settings

    plan = _cluster_up(tmp_path, slurm=True)
    hostfile, args, env, link = cluster_settings("hvd", "slurm", ("--verbose",), {"X": "1"}, state_root=tmp_path)
    assert hostfile == tmp_path / "hvd" / "hostfile" == plan.hostfile
    assert args == ("--verbose",)  # srun's own: none of horovodrun's or mpirun's interface options
    assert env["SLURM_CONF"] == str(tmp_path / "hvd" / "slurm" / "slurm.conf")
    assert env["HVDBENCH_SHARED_MACHINE"] == "1" and env["X"] == "1"
    assert env["PATH"].startswith(f"{tmp_path / 'hvd' / 'bin'}:")
    assert link == "emulated veth bridge, unshaped"
    # the other launchers as before, with the Slurm's client environment too
    _, args, env, _ = cluster_settings("hvd", "mpirun", (), {}, state_root=tmp_path)
    assert args[:3] == ("-mca", "btl_tcp_if_include", "hvd-br") and "SLURM_CONF" in env


def test_slurm_on_a_cluster_without_one_is_refused_in_one_line(tmp_path):
    import pytest

    from hvdbench.errors import UsageError
    from hvdbench.sweep.build import cluster_settings

    _cluster_up(tmp_path, slurm=False)
    with pytest.raises(UsageError) as e:
        cluster_settings("hvd", "slurm", (), {}, state_root=tmp_path)
    assert str(e.value) == (
        "--launcher slurm: cluster 'hvd' runs no Slurm; bring it up with one: `hvdbench cluster down --name hvd`, "
        "then `hvdbench cluster up --name hvd --slurm ...`")
    with pytest.raises(UsageError, match="--launcher horovodrun, mpirun or .* slurm, not srun"):
        cluster_settings("hvd", "srun", (), {}, state_root=tmp_path)
    _, _, env, _ = cluster_settings("hvd", "horovodrun", (), {}, state_root=tmp_path)
    assert "SLURM_CONF" not in env


def test_sweep_dry_run_on_the_clusters_slurm_renders_its_jobs_there(tmp_path, monkeypatch):
    """`hvdbench sweep --cluster hvd --launcher slurm --dry-run`: sinfo asked with the cluster's
    SLURM_CONF (GPU GRES or not), the jobs' sweep given it, and this process's environment put back."""
    import functools
    import os
    import shlex

    from click.testing import CliRunner

    from hvdbench.cli.main import cli
    from hvdbench.cluster import launch

    _cluster_up(tmp_path, slurm=True)
    monkeypatch.setattr(launch, "launch_settings", functools.partial(launch.launch_settings, state_root=tmp_path))
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir()
    seen = tmp_path / "sinfo-saw"
    (bin_dir / "sinfo").write_text(f'#!/bin/sh\necho "$SLURM_CONF" > {shlex.quote(str(seen))}\necho "(null)"\n')
    (bin_dir / "sinfo").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("SLURM_CONF", raising=False)
    conf = str(tmp_path / "hvd" / "slurm" / "slurm.conf")
    result = CliRunner().invoke(cli, ["sweep", "resnet50", "--cluster", "hvd", "--launcher", "slurm", "--layouts",
                                      "1x2,2x1", "--dry-run", "--out", str(tmp_path / "o"), "--", "--synthetic"])
    assert result.exit_code == 0, result.output
    assert f"# the cluster's own Slurm: export SLURM_CONF={conf}" in result.output
    assert seen.read_text().strip() == conf  # sinfo reached the cluster's Slurm
    assert result.output.count(f"--env SLURM_CONF={conf}") == 2  # each layout's job
    assert "#SBATCH --nodes=2" in result.output and "--gres" not in result.output  # no gpu GRES there
    assert "SLURM_CONF" not in os.environ and not (tmp_path / "o").exists()
