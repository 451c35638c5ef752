"""hvdbench cluster: the state journal, the /etc/hosts block, launch settings, and what `down` may kill."""

import errno
import json
import stat
import subprocess
import sys

import psutil
import pytest

from hvdbench.cluster.blueprint import ClusterError, UpOptions, make_plan
from hvdbench.cluster.launch import cluster_launch_args, launch_settings
from hvdbench.cluster.lifecycle import _ours, _stop_process
from hvdbench.cluster.state import (Journal, make_state_dir, plan_from_dict, plan_to_dict, rewrite_etc_hosts,
                                    with_hosts_block, without_hosts_block)


def _plan(tmp_path, **kw):
    return make_plan(UpOptions("hvd", nodes=2, slots=2, subnet="10.213.0.0/24", **kw), state_root=tmp_path)


def test_plan_round_trips_through_json(tmp_path):
    plan = _plan(tmp_path, bandwidth="1gbit", latency="100us", hostfile=tmp_path / "hf")
    assert plan_from_dict(json.loads(json.dumps(plan_to_dict(plan)))) == plan


def test_state_dir_is_private_and_taken_once(tmp_path):
    plan = _plan(tmp_path)
    make_state_dir(plan.state_dir)
    assert stat.S_IMODE(plan.state_dir.stat().st_mode) == 0o700
    with pytest.raises(ClusterError, match="cluster 'hvd' already exists .*hvdbench cluster down --name hvd"):
        make_state_dir(plan.state_dir)


def test_journal_is_saved_at_every_step_and_loads_back(tmp_path):
    plan = _plan(tmp_path)
    make_state_dir(plan.state_dir)
    journal = Journal(plan)
    journal.record("bridge", name="hvd-br")
    on_disk = json.loads((plan.state_dir / "state.json").read_text())
    assert on_disk["phase"] == "creating" and on_disk["created"] == [{"kind": "bridge", "name": "hvd-br"}]
    journal.record("netns", name="hvd-node1")
    journal.set_phase("up")
    loaded = Journal.load(plan.state_dir)
    assert (loaded.plan, loaded.phase, loaded.created) == (plan, "up", journal.created)


def test_missing_and_corrupt_state(tmp_path):
    assert Journal.load(tmp_path / "nothing") is None
    (tmp_path / "state.json").write_text("{not json")
    with pytest.raises(ClusterError, match=f"{tmp_path / 'state.json'} is not a cluster state file"):
        Journal.load(tmp_path)
    (tmp_path / "state.json").write_text(json.dumps({"version": 99}))
    with pytest.raises(ClusterError, match="version 99"):
        Journal.load(tmp_path)


HOSTS = "127.0.0.1 localhost\n# keep me\n10.0.0.5 db\n"


def test_hosts_block_is_added_once_and_removed_exactly(tmp_path):
    plan = _plan(tmp_path)
    added = with_hosts_block(HOSTS, plan)
    assert added == HOSTS + ("# hvdbench-cluster hvd begin\n10.213.0.2\thvd-node1\n10.213.0.3\thvd-node2\n"
                             "# hvdbench-cluster hvd end\n")
    assert with_hosts_block(added, plan) == added
    other = make_plan(UpOptions("lab", nodes=1, subnet="10.214.0.0/24"), state_root=tmp_path)
    both = with_hosts_block(added, other)
    assert without_hosts_block(both, "hvd") == with_hosts_block(HOSTS, other)
    assert without_hosts_block(without_hosts_block(both, "hvd"), "lab") == HOSTS
    assert without_hosts_block(HOSTS, "hvd") == HOSTS


def test_hosts_file_without_final_newline(tmp_path):
    plan = _plan(tmp_path)
    assert without_hosts_block(with_hosts_block("127.0.0.1 localhost", plan), "hvd") == "127.0.0.1 localhost\n"


def test_rewrite_hosts_file(tmp_path):
    path = tmp_path / "hosts"
    path.write_text(HOSTS)
    plan = _plan(tmp_path)
    rewrite_etc_hosts(lambda t: with_hosts_block(t, plan), path)
    assert "hvd-node2" in path.read_text() and path.read_text().startswith(HOSTS)
    rewrite_etc_hosts(lambda t: without_hosts_block(t, "hvd"), path)
    assert path.read_text() == HOSTS
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hosts"]


def test_bind_mounted_hosts_file_is_rewritten_in_place(tmp_path, monkeypatch):
    # Containers bind-mount /etc/hosts: renaming over it fails with EBUSY, so it is rewritten in place.
    path = tmp_path / "hosts"
    path.write_text(HOSTS)
    inode = path.stat().st_ino

    def busy(src, dst):
        raise OSError(errno.EBUSY, "Device or resource busy", str(dst))
    monkeypatch.setattr("hvdbench.results.records.schema.os.replace", busy)
    rewrite_etc_hosts(lambda t: with_hosts_block(t, _plan(tmp_path)), path)
    assert "hvd-node1" in path.read_text() and path.stat().st_ino == inode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hosts"]


def _up_journal(tmp_path, phase="up", **kw):
    plan = _plan(tmp_path, **kw)
    make_state_dir(plan.state_dir)
    journal = Journal(plan, phase=phase)
    journal.save()
    return journal


def test_launch_settings_of_a_running_cluster(tmp_path):
    _up_journal(tmp_path)
    s = launch_settings("hvd", state_root=tmp_path, path="/usr/bin:/bin")
    assert s.hostfile == tmp_path / "hvd" / "hostfile"
    assert s.hosts == ("hvd-node1:2", "hvd-node2:2")
    assert s.horovodrun_args == ("--network-interfaces", "hvd-br")
    assert s.mpirun_args == ("-mca", "btl_tcp_if_include", "hvd-br", "-mca", "oob_tcp_if_include", "hvd-br",
                             "-x", "PATH", "-x", "HVDBENCH_SHARED_MACHINE")
    assert s.env == {"PATH": f"{tmp_path / 'hvd' / 'bin'}:/usr/bin:/bin", "HVDBENCH_SHARED_MACHINE": "1"}
    assert s.link == "emulated veth bridge, unshaped"


def test_launch_settings_name_the_shaped_link(tmp_path):
    _up_journal(tmp_path, bandwidth="100mbit", latency="2ms")
    assert launch_settings("hvd", state_root=tmp_path).link == "emulated veth bridge, 100mbit, 2000us one-way"


def test_launch_settings_refuse_a_missing_or_half_made_cluster(tmp_path):
    with pytest.raises(ClusterError, match="cluster 'hvd' is not up"):
        launch_settings("hvd", state_root=tmp_path)
    _up_journal(tmp_path, phase="creating")
    with pytest.raises(ClusterError, match="cluster 'hvd' is not up"):
        launch_settings("hvd", state_root=tmp_path)
    with pytest.raises(ClusterError, match="cluster 'nosuch' is not up"):
        cluster_launch_args("nosuch")


@pytest.fixture
def sleeper(tmp_path):
    """A real process standing in for a recorded sshd (the config path appears in its command line)."""
    config = tmp_path / "sshd_config"
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", str(config)])
    yield proc, str(config)
    proc.kill()
    proc.wait()


def test_down_recognises_only_the_process_it_recorded(sleeper):
    proc, config = sleeper
    entry = {"node": "hvd-node1", "pid": proc.pid, "create_time": psutil.Process(proc.pid).create_time(),
             "config": config}
    assert _ours(entry).pid == proc.pid
    # A recycled pid: same number, other start time or other command line -> never ours, never killed.
    assert _ours({**entry, "create_time": entry["create_time"] - 100}) is None
    assert _ours({**entry, "config": "/run/hvdbench-cluster/other/sshd_config"}) is None
    assert _stop_process({**entry, "create_time": entry["create_time"] - 100}) == []
    assert proc.poll() is None
    assert _stop_process(entry) == [f"stopped sshd of hvd-node1 (pid {proc.pid})"]
    assert proc.wait(timeout=10) is not None
    assert _ours(entry) is None
