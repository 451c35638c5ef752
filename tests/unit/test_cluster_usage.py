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


def test_the_lines_to_copy_are_shell_quoted(monkeypatch, capsys):
    # A state folder with a space (a HOME with one) printed lines that split the path in two.
    state = "/home/a user/.hvdbench-cluster/hvd"
    settings = SimpleNamespace(hosts=["hvd-node1:2"], hostfile=f"{state}/hostfile",
                               horovodrun_args=["--network-interface", "hvd-br"], mpirun_args=["--mca", "x", "y z"],
                               env={"PATH": f"{state}/bin:/usr/bin", "SLURM_CONF": f"{state}/slurm/slurm.conf"},
                               link="emulated veth bridge, 1gbit")
    monkeypatch.setattr("hvdbench.cluster.launch.launch_settings", lambda name: settings)
    cli_cluster._usage("hvd")
    said = capsys.readouterr().out.splitlines()
    assert f"  export PATH='{state}/bin':$PATH HVDBENCH_SHARED_MACHINE=1" in said
    assert f"  mpirun -np 2 --hostfile '{state}/hostfile' --mca x 'y z' python ..." in said
    assert f"Slurm: export SLURM_CONF='{state}/slurm/slurm.conf', then sinfo, sbatch, srun, squeue, scancel;" in said
