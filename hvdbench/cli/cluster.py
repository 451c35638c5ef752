"""`hvdbench cluster up|status|down`: an emulated multi-node cluster on this machine (root)."""

import os
import shlex

import click

from hvdbench.cluster.blueprint import CPU_PERIOD_US, DEFAULT_NAME, DEFAULT_SUBNET

name_option = click.option("--name", default=DEFAULT_NAME, show_default=True,
                           help="Cluster name (1-8 lowercase letters/digits); nodes are NAME-node1...")


@click.group()
def cluster():
    """An emulated multi-node cluster on this Linux machine (needs root).

    Each node is a network namespace with its own hostname, address and sshd, joined by a bridge
    whose links `tc` can slow down, so scale-out (ranks on different nodes) really crosses a
    network while scale-up (ranks on one node) does not.

    \b
    Example:
      hvdbench cluster up --nodes 2 --slots 1 --bandwidth 1gbit
      hvdbench cluster status
      hvdbench cluster down
    """


@cluster.command()
@click.option("--nodes", type=int, default=2, show_default=True, help="Number of nodes.")
@click.option("--slots", type=int, default=1, show_default=True, help="Slots (ranks) per node in the hostfile.")
@click.option("--bandwidth", metavar="RATE", help="Shape each node's link to RATE each way, e.g. 100mbit, 10gbit.")
@click.option("--latency", metavar="DELAY", help="Add DELAY one-way between nodes, e.g. 100us (needs sch_netem).")
@click.option("--subnet", default=DEFAULT_SUBNET, show_default=True, help="IPv4 subnet for the nodes; must be unused.")
@click.option("--hostfile", type=click.Path(dir_okay=False), help="Write the hostfile here, not in the state directory (removed by `down`).")
@click.option("--slurm", is_flag=True, help="Also run Slurm on it: munge, a slurmctld and one slurmd per node "
              "(Debian packages slurmctld, slurmd, slurm-client, munge), from the cluster's own files.")
@click.option("--node-cpu", "node_cpu", multiple=True, metavar="NODE=FRACTION",
              help="Rehearse a slow node: NODE's processes (its sshd, so every rank started there, and its "
                   "slurmd) get FRACTION (0-1] of the CPUs the node would otherwise get, its even share of this "
                   "machine (CPUs / nodes), as a CFS quota on a cgroup (v2 cpu.max or v1 cpu.cfs_quota_us); "
                   "NODE is node3 or NAME-node3. Repeat for more nodes.")
@click.option("--node-rate", "node_rate", multiple=True, metavar="NODE=RATE",
              help="Rehearse a slow link: NODE's link, both ways, at RATE (e.g. 100mbit) in place of --bandwidth "
                   "(--latency still applies). Repeat for more nodes.")
@name_option
def up(nodes, slots, bandwidth, latency, subnet, hostfile, slurm, node_cpu, node_rate, name):
    """Create the cluster: namespaces, bridge, veths, shaping, sshds, hostfile (and with --slurm a
    real Slurm: partition `hvd`, one node per namespace); with --node-cpu or --node-rate one node
    made slower than the others, to see what a bad node looks like before meeting one.

    \b
    Example:
      hvdbench cluster up --nodes 2 --slots 2 --bandwidth 100mbit
      hvdbench cluster up --name lab --nodes 4 --subnet 10.214.0.0/24 --hostfile hostfiles/lab
      hvdbench cluster up --bandwidth 10gbit --latency 50us    # a delay needs sch_netem
      hvdbench cluster up --name slm --nodes 2 --slots 2 --slurm --subnet 10.215.0.0/24
      hvdbench cluster up --nodes 3 --node-cpu node3=0.5                     # node3 at half its CPU share
      hvdbench cluster up --nodes 3 --bandwidth 1gbit --node-rate node3=100mbit   # node3's NIC at a tenth
    """
    from hvdbench.cluster.blueprint import UpOptions, make_plan
    from hvdbench.cluster.lifecycle import up as cluster_up

    plan = make_plan(UpOptions(name=name, nodes=nodes, slots=slots, subnet=subnet, bandwidth=bandwidth,
                               latency=latency, hostfile=hostfile, slurm=slurm, node_cpu=node_cpu,
                               node_rate=node_rate))
    cluster_up(plan)
    nodes_text = f"{len(plan.nodes)} node{'s' if len(plan.nodes) != 1 else ''}"
    click.echo(f"Cluster {plan.name} is up: {nodes_text} x {plan.slots} slots on {plan.subnet}, "
               f"links {plan.describe_links()}.")
    for node in plan.nodes:
        quota = (f"  CPU quota {node.cpu_fraction:g} of its share ({node.cpu_quota_us / CPU_PERIOD_US:.2f} CPU)"
                 if node.cpu_quota_us is not None else "")
        click.echo(f"  {node.name:<14} {node.address}{quota}")
    _usage(plan.name)


@cluster.command()
@name_option
def status(name):
    """List the nodes, their addresses, link shaping, CPU quota and whether each sshd answers (the
    shaping and quota as the kernel holds them).

    \b
    Example:
      hvdbench cluster status --name hvd
    """
    from rich.table import Table

    from hvdbench.cluster.lifecycle import status as cluster_status
    from hvdbench.output import console

    journal, rows = cluster_status(name)
    table = Table(title=f"cluster {name} ({journal.phase}, {journal.plan.subnet})")
    for col in ("node", "address", "slots", "link shaping", "cpu quota", "sshd pid", "sshd answers"):
        table.add_column(col, no_wrap=True)
    for r in rows:
        table.add_row(r.name, r.address, str(r.slots), r.shaping, r.cpu_quota, str(r.sshd_pid or "-"),
                      "yes" if r.sshd_answers else "NO")
    console().print(table)  # piped: whole lines, never wrapped cells (scripts grep them)
    if journal.plan.slurm:
        from hvdbench.cluster import slurm

        click.echo(f"Slurm (SLURM_CONF={slurm.conf_path(journal.plan)}):")
        click.echo(slurm.sinfo_text(journal.plan))
    if journal.phase == "up":
        _usage(name)
    else:
        click.echo(f"Cluster {name} was not completely created; remove it with "
                   f"`hvdbench cluster down --name {name}`.")


@cluster.command()
@name_option
def down(name):
    """Remove everything `up` created; safe to run twice, and after an interrupted `up`.

    \b
    Example:
      hvdbench cluster down --name hvd
    """
    from hvdbench.cluster.lifecycle import down as cluster_down

    done = cluster_down(name)
    if not done:
        click.echo(f"No cluster named {name}; nothing to do.")
        return
    for line in done:
        click.echo(f"  {line}")
    click.echo(f"Cluster {name} is down.")


def _usage(name: str) -> None:
    from hvdbench.cluster.launch import launch_settings
    from hvdbench.frameworks import SHARED_MACHINE_ENV

    s = launch_settings(name)
    np_ = sum(int(h.rsplit(":", 1)[1]) for h in s.hosts)
    hvd_args = shlex.join(s.horovodrun_args)
    # horovodrun needs the interface named: on a single remote node it would otherwise pick loopback
    # for its rendezvous address, which the ranks cannot reach from their namespace.
    # A sweep takes the cluster by name (its hostfile, ssh wrapper, interface and link): that is the
    # line to copy; the launcher lines are for running something by hand.
    hostfile = shlex.quote(str(s.hostfile))  # lines to copy: a path with a space stays one word
    click.echo(f"Sweep on it:\n  hvdbench sweep MODEL --cluster {name} --out DIR -- ...\n"
               f"Hostfile: {s.hostfile}\n"
               "Launch from this shell (the ssh wrapper on PATH carries the cluster's key and host keys;\n"
               f"{SHARED_MACHINE_ENV}=1 gives each rank its share of this machine's cores):\n"
               f"  export PATH={shlex.quote(s.env['PATH'].split(os.pathsep, 1)[0])}:$PATH {SHARED_MACHINE_ENV}=1\n"
               f"  horovodrun -np {np_} --hostfile {hostfile} {hvd_args} --gloo python ...\n"
               f"  horovodrun -np {np_} --hostfile {hostfile} {hvd_args} --mpi python ...\n"
               f"  mpirun -np {np_} --hostfile {hostfile} {shlex.join(s.mpirun_args)} python ...\n"
               + (f"Slurm: export SLURM_CONF={shlex.quote(s.env['SLURM_CONF'])}, then sinfo, sbatch, srun, squeue, "
                  f"scancel;\n  hvdbench sweep MODEL --hostfile {hostfile} --launcher slurm --submit --out DIR -- ...\n"
                  if "SLURM_CONF" in s.env else "") +
               f"Remove it: hvdbench cluster down --name {name}")
