"""An emulated multi-node cluster on one Linux machine (root only), for rehearsals, the demo and tests.

One network namespace per node, each with its own hostname, a veth into a bridge and an sshd; `tc`
on the veths shapes the inter-node links. See docs/design.md ("An emulated cluster on one machine").

    plan = make_plan(UpOptions("hvd", nodes=2, slots=1, bandwidth="100mbit"))
    up(plan)                       # hvdbench cluster up --nodes 2 --slots 1 --bandwidth 100mbit
    launch_settings("hvd")         # hostfile, extra horovodrun/mpirun options, PATH for its ssh
    inspect_links("hvd")           # each node's link shaping (tc qdiscs, both ends) read back
    down("hvd")                    # hvdbench cluster down
"""

from hvdbench.cluster.blueprint import ClusterError, ClusterPlan, make_plan
from hvdbench.cluster.launch import ClusterLaunch, cluster_launch_args, launch_settings
from hvdbench.cluster.lifecycle import LinkShaping, down, inspect_links, preflight, status, up

__all__ = ["ClusterError", "ClusterLaunch", "ClusterPlan", "LinkShaping", "cluster_launch_args", "down",
           "inspect_links", "launch_settings", "make_plan", "preflight", "status", "up"]
