"""The emulated cluster's Slurm as files and argv (the daemons themselves run in
tests/integration/test_slurm.py): everything under the cluster's state folder, nothing of the
system's Slurm or munge, one slurmd per node in its namespaces with its own PMIx folder."""

import json
import signal
import subprocess
import sys

import pytest

from hvdbench.cluster import slurm
from hvdbench.cluster.blueprint import UpOptions, make_plan
from hvdbench.cluster.state import plan_from_dict, plan_to_dict
from hvdbench.sweep.signals import SweepInterrupted


def plan(tmp_path, **kw):
    return make_plan(UpOptions("hvd", nodes=2, slots=4, subnet="10.213.0.0/24", slurm=True, **kw), state_root=tmp_path)


def test_slurm_conf_names_the_nodes_and_keeps_to_the_state_folder(tmp_path):
    p = plan(tmp_path)
    text = slurm.slurm_conf_text(p, "vm")
    lines = text.splitlines()
    assert "SlurmctldHost=vm(10.213.0.1)" in lines and f"SlurmctldPort={slurm.CTLD_PORT}" in lines
    assert "NodeName=hvd-node1 NodeAddr=10.213.0.2 CPUs=4 State=UNKNOWN" in lines
    assert "NodeName=hvd-node2 NodeAddr=10.213.0.3 CPUs=4 State=UNKNOWN" in lines
    assert "PartitionName=hvd Nodes=ALL Default=YES MaxTime=INFINITE State=UP" in lines
    assert "MpiDefault=pmix" in lines and "SlurmdParameters=config_overrides" in lines
    paths = [v for line in lines if "=" in line and not line.startswith("#")
             for v in line.split("=", 1)[1].split() if v.startswith("/") or "socket=/" in v]
    assert paths and all(str(p.state_dir) in v for v in paths)  # no /etc/slurm, /var/spool, /run/munge
    assert slurm.client_env(p) == {"SLURM_CONF": str(p.state_dir / "slurm" / "slurm.conf")}


@pytest.mark.parametrize("fs, plugin", [("cgroup2fs", "cgroup/v2"), ("tmpfs", "cgroup/v1"), ("", "cgroup/v1")])
def test_cgroup_plugin_follows_the_hierarchy(fs, plugin):
    assert f"CgroupPlugin={plugin}\n" in slurm.cgroup_conf_text(fs)


def test_each_slurmd_runs_in_its_node_with_its_own_pmix_folder(tmp_path):
    p = plan(tmp_path)
    node = p.nodes[1]
    argv = slurm.slurmd_argv(p, node, "/usr/sbin/slurmd", "/venv/bin/python")
    assert argv == ["ip", "netns", "exec", "hvd-node2", "unshare", "--uts", "--mount", "--", "/venv/bin/python",
                    "-m", "hvdbench.cluster.nodeinit", "--bind",
                    f"{p.state_dir}/hvd-node2/pmix:{p.state_dir}/slurm/pmix", "hvd-node2",
                    "/usr/sbin/slurmd", "-D", "-N", "hvd-node2", "-f", f"{p.state_dir}/slurm/slurm.conf"]
    assert f"PMIxCliTmpDirBase={p.state_dir}/slurm/pmix" in slurm.mpi_conf_text(p)


def test_files_and_a_fresh_key_only_root_reads(tmp_path):
    p = plan(tmp_path)
    slurm.write_files(p, "vm")
    key = p.state_dir / "munge" / "munge.key"
    assert key.stat().st_mode & 0o777 == 0o400 and key.stat().st_size == 1024
    assert {f.name for f in (p.state_dir / "slurm").iterdir()} >= {"slurm.conf", "cgroup.conf", "mpi.conf", "pmix"}
    assert all((p.state_dir / n.name / "pmix").is_dir() for n in p.nodes)
    other = plan(tmp_path / "b")
    slurm.write_files(other, "vm")
    assert (other.state_dir / "munge" / "munge.key").read_bytes() != key.read_bytes()


def test_the_slurm_flag_round_trips_and_old_state_files_read_as_without(tmp_path):
    p = plan(tmp_path)
    assert plan_from_dict(json.loads(json.dumps(plan_to_dict(p)))) == p
    old = plan_to_dict(p)
    del old["slurm"]
    assert plan_from_dict(old).slurm is False


def test_nodeinit_refuses_a_relative_bind_before_touching_anything():
    proc = subprocess.run([sys.executable, "-m", "hvdbench.cluster.nodeinit", "--bind", "rel:/x", "n1", "/bin/true"],
                          capture_output=True, text=True)
    assert proc.returncode == 1 and "--bind takes /ABSOLUTE/SRC:/ABSOLUTE/DST" in proc.stderr


def test_slurms_time_limit_warning_is_told_apart_from_a_stop():
    assert SweepInterrupted(signal.SIGUSR1).time_limit and not SweepInterrupted(signal.SIGTERM).time_limit
    assert str(SweepInterrupted(signal.SIGUSR1)) == "the Slurm job reached its time limit"
