"""The emulated cluster's shaped link, timed: what it delivers, and what it does to scale-out.

    sudo .venv/bin/python benchmarks/bench_cluster.py                    # about 3 minutes on 2 busy cores
    sudo .venv/bin/python benchmarks/bench_cluster.py --bandwidth 1gbit --mib 64 --skip-train

Brings up its own 2-node cluster (`hvdbench cluster up --name benchcl --nodes 2 --slots 2
--bandwidth RATE`, taken down at the end), then prints every figure beside a baseline measured in the
same run, rounds alternating (ABBA) so both sides see the machine in the same state:
1. Link: a TCP stream of --mib MiB from node1 to node2, through node1's transmit and node2's receive
   shaper. Baseline: the same stream inside node1 over its loopback (unshaped). Printed: Mbit/s of
   each (median of the rounds), shaped / configured rate (close to 1, a little under: headers count
   against the rate) and shaped / loopback.
2. Training: Horovod (Gloo) SGD on a one-layer model whose --width^2 x 4 bytes gradient (4 MiB) is
   allreduced every step. Baseline: 1x2, both ranks on node1 (loopback: scale-up). Against it: 2x1,
   one rank per node (through the link: scale-out). Printed: samples/s of each (median) and the
   median of the per-round ratios 2x1 / 1x2 (at 100mbit, well under 0.7 on 2 cores).
Needs root on Linux (network namespaces); otherwise it says so and exits 0, so `make bench` goes on.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
sys.path.insert(0, str(ROOT))


def env(**extra) -> dict:
    e = dict(os.environ)
    e.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1",
             PYTHONUNBUFFERED="1", PATH=f"{BIN}{os.pathsep}{e.get('PATH', '')}")
    e.update(extra)
    return e


def run(argv: list, **kw) -> subprocess.CompletedProcess:
    argv = [str(a) for a in argv]
    proc = subprocess.run(argv, capture_output=True, text=True, errors="replace", env=kw.pop("env", env()), **kw)
    if proc.returncode != 0:
        sys.exit(f"$ {' '.join(argv)}\nfailed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


# --- what runs inside the nodes ----------------------------------------------------------------

def sink(address: str) -> None:
    """One TCP connection: print the port, read to EOF, answer with the byte count."""
    with socket.create_server((address, 0)) as srv:
        print(srv.getsockname()[1], flush=True)
        conn, _ = srv.accept()
        with conn:
            total = 0
            while chunk := conn.recv(1 << 20):
                total += len(chunk)
            conn.sendall(f"{total}\n".encode())


def source(address: str, port: int, nbytes: int) -> None:
    """Send nbytes; the time runs from the connection to the sink's count (all bytes arrived)."""
    block = bytes(1 << 20)
    start = time.perf_counter()
    with socket.create_connection((address, port), timeout=300) as s:
        left = nbytes
        while left > 0:
            left -= s.send(block[:min(left, len(block))])
        s.shutdown(socket.SHUT_WR)
        received = int(s.makefile().readline())
    print(json.dumps({"bytes": received, "seconds": time.perf_counter() - start}))


def worker(report_dir: Path, steps: int, warmup: int, width: int, batch: int) -> None:
    """Under horovodrun: SGD whose width^2 x 4 bytes gradient is allreduced every step; rank 0
    writes samples/s (a file: Open MPI may splice two ranks' stdout lines into one)."""
    import horovod.torch as hvd
    import torch

    torch.set_num_threads(1)
    hvd.init()
    torch.manual_seed(0)
    model = torch.nn.Linear(width, width, bias=False)
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
        (report_dir / "train.json").write_text(json.dumps({
            "samples_per_s": steps * batch * hvd.size() / elapsed, "size": hvd.size(),
            "cross_size": hvd.cross_size()}) + "\n")
    hvd.shutdown()


# --- the benchmark -----------------------------------------------------------------------------

def stream(src_ns: str, dst_ns: str, address: str, nbytes: int) -> float:
    """Mbit/s of one TCP stream from namespace src_ns to `address` in dst_ns."""
    me = [sys.executable, str(Path(__file__).resolve())]
    srv = subprocess.Popen(["ip", "netns", "exec", dst_ns, *me, "sink", address], stdout=subprocess.PIPE,
                           text=True)
    try:
        port = srv.stdout.readline().strip()
        if not port:
            sys.exit(f"the sink in {dst_ns} did not start")
        out = json.loads(run(["ip", "netns", "exec", src_ns, *me, "source", address, port, nbytes]).stdout)
        srv.wait(timeout=60)
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait()
    if out["bytes"] != nbytes:
        sys.exit(f"stream {src_ns} -> {address}: {out['bytes']} of {nbytes} bytes arrived")
    return out["bytes"] * 8 / out["seconds"] / 1e6


def train(args, hosts: str, cluster_env: dict, horovodrun_args) -> float:
    with tempfile.TemporaryDirectory(prefix="hvdbench-bench-cluster-") as reports:
        run([BIN / "horovodrun", "-np", "2", "-H", hosts, *horovodrun_args, "--gloo",
             sys.executable, Path(__file__).resolve(), "worker", reports, args.steps, args.warmup, args.width,
             args.batch], env=env(**cluster_env), timeout=600)
        report = json.loads((Path(reports) / "train.json").read_text())
    expected = len({h.rsplit(":", 1)[0] for h in hosts.split(",")})
    if report["cross_size"] != expected:
        sys.exit(f"{hosts}: ranks on {report['cross_size']} nodes, expected {expected}")
    return report["samples_per_s"]


def alternate(rounds: int, a, b) -> tuple[list[float], list[float]]:
    """ABBA: a, b, then b, a, ... so neither side always goes first."""
    got_a, got_b = [], []
    for r in range(rounds):
        for fn, got in ((a, got_a), (b, got_b)) if r % 2 == 0 else ((b, got_b), (a, got_a)):
            got.append(fn())
    return got_a, got_b


def line(label: str, value: float, unit: str, rounds: list[float]) -> None:
    print(f"  {label:<48}{value:>12,.1f} {unit:<10} (rounds {', '.join(f'{x:,.1f}' for x in rounds)})")


def link_bench(args, nodes) -> None:
    (n1, _), (n2, a2) = nodes
    nbytes = args.mib << 20
    shaped, loop = alternate(args.rounds, lambda: stream(n1, n2, a2, nbytes),
                             lambda: stream(n1, n1, "127.0.0.1", nbytes))
    rate = parse_rate(args.bandwidth) / 1e6
    s, lo = statistics.median(shaped), statistics.median(loop)
    print(f"\nlink: one TCP stream of {args.mib} MiB, median of {args.rounds} rounds")
    line(f"{n1} -> {n2}, shaped to {args.bandwidth}", s, "Mbit/s", shaped)
    line(f"baseline: loopback inside {n1}", lo, "Mbit/s", loop)
    print(f"  shaped / configured {rate:,.0f} Mbit/s: {s / rate:.3f}    shaped / loopback: {s / lo:.4f}")


def train_bench(args, nodes, settings) -> None:
    (n1, _), (n2, _) = nodes
    up_, out = alternate(args.rounds,
                         lambda: train(args, f"{n1}:2", settings.env, settings.horovodrun_args),
                         lambda: train(args, f"{n1}:1,{n2}:1", settings.env, settings.horovodrun_args))
    ratios = [o / u for u, o in zip(up_, out)]
    mib = args.width * args.width * 4 / (1 << 20)
    print(f"\ntraining: Horovod (Gloo), {mib:g} MiB gradient allreduced per step, batch {args.batch} per rank, "
          f"{args.steps} timed steps after {args.warmup}; median of {args.rounds} rounds")
    line("baseline: 1x2 (scale-up, loopback)", statistics.median(up_), "samples/s", up_)
    line(f"2x1 (scale-out, through {args.bandwidth})", statistics.median(out), "samples/s", out)
    print(f"  2x1 / 1x2: {statistics.median(ratios):.3f}   (per round: {', '.join(f'{r:.3f}' for r in ratios)})")


def parse_rate(text: str) -> int:
    from hvdbench.cluster.blueprint import parse_rate as parse

    return parse(text)


def checked_rate(text: str) -> str:
    from hvdbench.cluster.blueprint import ClusterError

    try:
        parse_rate(text)
    except ClusterError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bandwidth", default="100mbit", type=checked_rate, help="link rate each way (default 100mbit)")
    p.add_argument("--name", default="benchcl", help="cluster name (default benchcl)")
    p.add_argument("--subnet", default="10.213.90.0/24", help="its subnet; must be unused (default 10.213.90.0/24)")
    p.add_argument("--mib", type=int, default=32, help="MiB per link stream (default 32)")
    p.add_argument("--rounds", type=int, default=3, help="rounds of each comparison (default 3)")
    p.add_argument("--width", type=int, default=1024, help="model width: width^2 x 4 bytes of gradient (default 1024)")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--skip-link", action="store_true")
    p.add_argument("--skip-train", action="store_true")
    args = p.parse_args()
    if platform.system() != "Linux" or os.geteuid() != 0:
        print("bench_cluster: skipped: the emulated cluster needs root on Linux (network namespaces); "
              "run it as root")
        return 0
    from hvdbench.cluster import ClusterError, inspect_links, launch_settings, preflight
    from hvdbench.cluster.blueprint import state_dir_for
    from hvdbench.cluster.state import Journal

    try:
        preflight()
    except ClusterError as e:
        print(f"bench_cluster: skipped: {e}")
        return 0
    hvdbench = BIN / "hvdbench"
    print(run([hvdbench, "cluster", "up", "--name", args.name, "--subnet", args.subnet, "--nodes", "2",
               "--slots", "2", "--bandwidth", args.bandwidth]).stdout.splitlines()[0])
    try:
        links = inspect_links(args.name)
        print("shaping read back: " + "; ".join(
            f"{link.node} sends {link.transmit['kind']} {link.transmit['options'].get('rate', 0) * 8 / 1e6:g} Mbit/s, "
            f"receives {link.receive['kind']} {link.receive['options'].get('rate', 0) * 8 / 1e6:g} Mbit/s"
            for link in links))
        settings = launch_settings(args.name)
        nodes = [(n.name, n.address) for n in Journal.load(state_dir_for(args.name)).plan.nodes]
        if not args.skip_link:
            link_bench(args, nodes)
        if not args.skip_train:
            train_bench(args, nodes, settings)
    finally:
        down = subprocess.run([str(hvdbench), "cluster", "down", "--name", args.name], capture_output=True,
                              text=True, env=env())
        print(f"\n{down.stdout.strip().splitlines()[-1] if down.stdout.strip() else down.stderr.strip()}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "sink":
        sink(sys.argv[2])
    elif len(sys.argv) > 1 and sys.argv[1] == "source":
        source(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(Path(sys.argv[2]), *map(int, sys.argv[3:7]))
    else:
        sys.exit(main())
