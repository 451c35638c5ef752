"""Runs under horovodrun/mpirun on the emulated cluster (tests/integration/test_cluster.py).

    horovodrun -np 2 -H hvd-node1:1,hvd-node2:1 --gloo python tests/integration/cluster_probe.py where DIR
        -> one file per rank, DIR/rank-<r>.json: {"rank", "size", "local_rank", "local_size", "cross_size",
           "hostname"} (files, not stdout: Open MPI may splice two ranks' lines into one)
    horovodrun ... python tests/integration/cluster_probe.py train DIR --steps 4
        -> rank 0 writes DIR/train.json {"samples_per_s": ...}: SGD on a one-layer model whose 16 MiB gradient is
           allreduced every step, so throughput is bound by the links between the ranks
"""

import argparse
import json
import socket
import time
from pathlib import Path

import horovod.torch as hvd
import torch


def where(report_dir: Path):
    # The namespaces share this machine's file system, so every node writes into the same folder.
    report = {"rank": hvd.rank(), "size": hvd.size(), "local_rank": hvd.local_rank(),
              "local_size": hvd.local_size(), "cross_size": hvd.cross_size(), "hostname": socket.gethostname()}
    (report_dir / f"rank-{hvd.rank()}.json").write_text(json.dumps(report) + "\n")


def train(report_dir: Path, steps: int, warmup: int, width: int, batch: int):
    torch.manual_seed(0)
    model = torch.nn.Linear(width, width, bias=False)  # width**2 * 4 bytes of gradient
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1e-3),
                                   named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    x = torch.randn(batch, width)
    for step in range(warmup + steps):
        if step == warmup:
            hvd.allreduce(torch.zeros(1), name="sync_start")
            start = time.perf_counter()
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()
    hvd.allreduce(torch.zeros(1), name="sync_stop")
    elapsed = time.perf_counter() - start
    if hvd.rank() == 0:
        report = {"samples_per_s": steps * batch * hvd.size() / elapsed, "step_s": elapsed / steps,
                  "size": hvd.size(), "cross_size": hvd.cross_size()}
        (report_dir / "train.json").write_text(json.dumps(report) + "\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["where", "train"])
    parser.add_argument("report_dir", type=Path)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--width", type=int, default=2048)
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args()
    torch.set_num_threads(1)
    hvd.init()
    if args.mode == "where":
        where(args.report_dir)
    else:
        train(args.report_dir, args.steps, args.warmup, args.width, args.batch)
    hvd.shutdown()
