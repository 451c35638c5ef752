"""hvdbench cluster refuses clearly where it cannot work: not root, not Linux, tools missing."""

import os
import shutil
import socket
import subprocess
import sys
import threading

import pytest
from click.testing import CliRunner

from hvdbench.cli.main import cli
from hvdbench.cluster import sshd
from hvdbench.cluster.blueprint import STATE_ROOT, ClusterError, make_plan
from hvdbench.cluster.lifecycle import ROOT_MESSAGE, preflight, status
from hvdbench.cluster.state import Journal, make_state_dir


def test_not_root_is_refused_in_one_line():
    with pytest.raises(ClusterError) as e:
        preflight(euid=1000, system="Linux")
    assert str(e.value) == ROOT_MESSAGE == ("hvdbench cluster needs root (network namespaces); "
                                            "run as root or use local layouts")


def test_not_linux_is_refused():
    with pytest.raises(ClusterError, match="needs Linux .* this is Darwin"):
        preflight(euid=0, system="Darwin")


def test_missing_tools_are_named_with_their_packages():
    def which(tool, path=None):
        return None if tool in ("sshd", "tc") else f"/usr/bin/{tool}"
    with pytest.raises(ClusterError, match=r"needs sshd, tc, not found .*install: iproute2 openssh-server"):
        preflight(euid=0, system="Linux", which=which)


def test_tools_found_are_absolute_paths():
    tools = preflight(euid=0, system="Linux", which=lambda t, path=None: f"/opt/x/{t}")
    assert tools["sshd"] == "/opt/x/sshd" and set(tools) == {"ip", "tc", "sshd", "ssh", "ssh-keygen", "unshare"}


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root to drop privileges")
def test_cli_as_an_unprivileged_user_exits_1_with_the_message(hvdbench_bin):
    proc = subprocess.run(["setpriv", "--reuid", "nobody", "--regid", "nogroup", "--clear-groups",
                           hvdbench_bin, "cluster", "up", "--name", "nobody"],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "HOME": "/"})
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"Error: {ROOT_MESSAGE}"
    assert not os.path.exists("/run/hvdbench-cluster/nobody")


def test_cli_rejects_bad_options_before_anything_else():
    result = CliRunner().invoke(cli, ["cluster", "up", "--name", "Bad/Name"])
    assert result.exit_code == 1
    assert "Error: cluster name 'Bad/Name' is invalid" in result.output
    result = CliRunner().invoke(cli, ["cluster", "up", "--bandwidth", "fast"])
    assert result.exit_code == 1 and "Error: --bandwidth 'fast' is invalid" in result.output


def test_a_rate_tc_cannot_shape_is_refused_before_anything_is_made():
    """Issue 57 case 12: 100tbit built the network, then tc failed on 'illegal value for "burst"'."""
    for args, said in ((["--bandwidth", "100tbit"], "--bandwidth '100tbit'"),
                       (["--nodes", "2", "--node-rate", "node2=99999999tbit"], "node2")):
        result = CliRunner().invoke(cli, ["cluster", "up", "--name", "t57rate", *args])
        assert result.exit_code == 1, result.output
        line = result.output.strip().splitlines()[-1]
        assert line.startswith("Error: ") and said in line and "too fast for tc: at most 34tbit" in line, line
    assert not (STATE_ROOT / "t57rate").exists()


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("ip"), reason="makes a real network namespace: root")
def test_status_of_a_cluster_whose_up_stopped_half_way_says_so(tmp_path):
    """Issue 57 case 12: `up` killed after a node's namespace was made and before its link: status failed
    on tc's error ('Cannot find device') instead of listing what is there and saying to run down."""
    name = f"t{os.getpid() % 100000}"  # unique per test process (namespaces are the machine's)
    plan = make_plan(name, nodes=2, slots=1, subnet="10.219.0.0/24", state_root=tmp_path)
    make_state_dir(plan.state_dir)
    journal = Journal(plan)  # phase "creating"
    subprocess.run(["ip", "netns", "add", plan.nodes[0].name], check=True)
    try:
        journal.record("netns", name=plan.nodes[0].name)
        _, rows = status(name, state_root=tmp_path)
        assert [(r.name, r.shaping) for r in rows] == [(plan.nodes[0].name, "not made"), (plan.nodes[1].name, "absent")]
    finally:
        subprocess.run(["ip", "netns", "del", plan.nodes[0].name], check=False)


def test_down_of_an_unknown_cluster_is_a_no_op():
    result = CliRunner().invoke(cli, ["cluster", "down", "--name", "nosuch9"])
    assert result.exit_code == 0 and "No cluster named nosuch9; nothing to do." in result.output


def test_status_of_an_unknown_cluster_is_an_error():
    result = CliRunner().invoke(cli, ["cluster", "status", "--name", "nosuch9"])
    assert result.exit_code == 1 and "Error: no cluster named 'nosuch9'" in result.output


def test_nodeinit_refuses_bad_arguments():
    for argv in ([], ["Bad_Host", "/usr/sbin/sshd"], ["hvd-node1", "relative/sshd"]):
        proc = subprocess.run([sys.executable, "-m", "hvdbench.cluster.nodeinit", *argv],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 1 and "usage: python -m hvdbench.cluster.nodeinit" in proc.stderr


def test_ssh_banner_reads_the_identification_line():
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def answer():
        conn, _ = server.accept()
        conn.sendall(b"SSH-2.0-OpenSSH_test\r\n")
        conn.close()
    t = threading.Thread(target=answer)
    t.start()
    try:
        assert sshd.ssh_banner("127.0.0.1", port=port, timeout=5) == "SSH-2.0-OpenSSH_test"
    finally:
        t.join()
        server.close()
