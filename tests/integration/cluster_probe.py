"""Runs under horovodrun/mpirun on the emulated cluster (tests/integration/test_cluster.py).

    horovodrun -np 2 -H hvd-node1:1,hvd-node2:1 --gloo python tests/integration/cluster_probe.py DIR
        -> one file per rank, DIR/rank-<r>.json: {"rank", "size", "local_rank", "local_size", "cross_size",
           "hostname"} (files, not stdout: Open MPI may splice two ranks' lines into one)

What the cluster's links do to training throughput is measured by benchmarks/bench_cluster.py.
"""

import json
import socket
import sys
from pathlib import Path

import horovod.torch as hvd


def where(report_dir: Path):
    # The namespaces share this machine's file system, so every node writes into the same folder.
    report = {"rank": hvd.rank(), "size": hvd.size(), "local_rank": hvd.local_rank(),
              "local_size": hvd.local_size(), "cross_size": hvd.cross_size(), "hostname": socket.gethostname()}
    (report_dir / f"rank-{hvd.rank()}.json").write_text(json.dumps(report) + "\n")


if __name__ == "__main__":
    hvd.init()
    where(Path(sys.argv[1]))
    hvd.shutdown()
