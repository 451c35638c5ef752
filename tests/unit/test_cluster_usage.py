"""What `hvdbench cluster up` and `status` tell a user to type next: the short sweep form."""

from types import SimpleNamespace

from hvdbench.cli import cluster as cli_cluster


def test_cluster_up_suggests_the_sweep_by_cluster_name(monkeypatch, capsys):
    settings = SimpleNamespace(hosts=["hvd-node1:2", "hvd-node2:2"], hostfile="/run/hvdbench-cluster/hvd/hostfile",
                               horovodrun_args=["--network-interface", "hvd-br"], mpirun_args=["--mca", "x", "y"],
                               env={"PATH": "/run/hvdbench-cluster/hvd/bin:/usr/bin"}, link="emulated veth bridge, 1gbit")
    monkeypatch.setattr("hvdbench.cluster.launch.launch_settings", lambda name: settings)
    cli_cluster._usage("hvd")
    said = capsys.readouterr().out
    assert "hvdbench sweep MODEL --cluster hvd --out DIR -- ..." in said
    assert "--launcher-arg" not in said and "sweep MODEL --hostfile" not in said
