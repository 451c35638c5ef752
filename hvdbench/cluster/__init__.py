"""An emulated multi-node cluster on one Linux machine (root only), for rehearsals, the demo and tests.

One network namespace per node, each with its own hostname, a veth into a bridge and an sshd; `tc`
on the veths shapes the inter-node links. See DESIGN.md ("An emulated cluster on one machine").

    plan = make_plan("hvd", nodes=2, slots=1, bandwidth="100mbit")
    up(plan)                       # hvdbench cluster up --nodes 2 --slots 1 --bandwidth 100mbit
    launch_settings("hvd")         # hostfile, extra horovodrun/mpirun options, PATH for its ssh
    down("hvd")                    # hvdbench cluster down
"""

from hvdbench.cluster.launch import ClusterLaunch, cluster_launch_args, launch_settings
from hvdbench.cluster.lifecycle import down, preflight, status, up
from hvdbench.cluster.plan import ClusterError, ClusterPlan, make_plan

__all__ = ["ClusterError", "ClusterLaunch", "ClusterPlan", "cluster_launch_args", "down", "launch_settings",
           "make_plan", "preflight", "status", "up"]
