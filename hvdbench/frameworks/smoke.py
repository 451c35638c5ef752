"""A Horovod smoke worker: allreduce a known tensor in PyTorch and TensorFlow, check it on every rank.

    horovodrun -np 2 -H localhost:2 --gloo python -m hvdbench.frameworks.smoke --expect-local-size 2
    horovodrun -np 2 -H localhost:2 --mpi  python -m hvdbench.frameworks.smoke --framework tensorflow

Both frameworks by default, one after the other in each rank; --framework one of them.

Rank r contributes [r+1, 2(r+1), 3(r+1), 4(r+1)]; the sum over n ranks is k*n(n+1)/2 in slot k. Each
rank prints one line `SMOKE {json}` (and, with --report-dir, writes it to DIR/rank-<r>.json: launchers
may interleave the ranks' output) and exits 1 if a value or the topology is not what was expected.
"""

import argparse
import json
import socket
import sys
from pathlib import Path


def expected_sum(size: int) -> list[float]:
    return [k * size * (size + 1) / 2 for k in (1, 2, 3, 4)]


def _torch():
    import horovod.torch as hvd
    import torch

    hvd.init()
    mine = torch.arange(1, 5, dtype=torch.float32) * (hvd.rank() + 1)
    total = hvd.allreduce(mine, op=hvd.Sum, name="smoke.torch").tolist()
    return hvd, total


def _tensorflow():
    import horovod.tensorflow as hvd
    import tensorflow as tf

    hvd.init()
    mine = tf.range(1, 5, dtype=tf.float32) * float(hvd.rank() + 1)
    total = hvd.allreduce(mine, op=hvd.Sum, name="smoke.tf").numpy().tolist()
    return hvd, total


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", choices=["torch", "tensorflow", "both"], default="both")
    parser.add_argument("--expect-size", type=int)
    parser.add_argument("--expect-local-size", type=int)
    parser.add_argument("--expect-cross-size", type=int)
    parser.add_argument("--report-dir", type=Path, help="Also write each rank's report to DIR/rank-<r>.json.")
    args = parser.parse_args(argv)

    frameworks = ["torch", "tensorflow"] if args.framework == "both" else [args.framework]
    failures, report = [], {"host": socket.gethostname()}
    for fw in frameworks:
        hvd, total = _torch() if fw == "torch" else _tensorflow()
        topo = {"rank": hvd.rank(), "size": hvd.size(), "local_rank": hvd.local_rank(),
                "local_size": hvd.local_size(), "cross_size": hvd.cross_size(),
                "controller": "mpi" if hvd.mpi_enabled() else "gloo"}
        want = expected_sum(hvd.size())
        if total != want:
            failures.append(f"{fw}: allreduce gave {total}, expected {want}")
        for key, expected in (("size", args.expect_size), ("local_size", args.expect_local_size),
                              ("cross_size", args.expect_cross_size)):
            if expected is not None and topo[key] != expected:
                failures.append(f"{fw}: {key} is {topo[key]}, expected {expected}")
        if not 0 <= topo["local_rank"] < topo["local_size"]:
            failures.append(f"{fw}: local_rank {topo['local_rank']} outside local_size {topo['local_size']}")
        report[fw] = {**topo, "allreduce": total}
    report["ok"] = not failures
    text = json.dumps(report, sort_keys=True)
    print("SMOKE " + text, flush=True)
    if args.report_dir:
        args.report_dir.mkdir(parents=True, exist_ok=True)
        (args.report_dir / f"rank-{report[frameworks[0]]['rank']}.json").write_text(text + "\n")
    for failure in failures:
        print(f"Error: rank {report[frameworks[0]]['rank']}: {failure}", file=sys.stderr, flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
