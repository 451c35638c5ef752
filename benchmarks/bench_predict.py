"""The layout predictor against measurement on the emulated cluster, at several inter-node link
bandwidths: fit on 1x1, 1x2 and 2x1, predict 2x2 and 4x1, and print predicted / measured.

    sudo .venv/bin/python benchmarks/bench_predict.py                       # about 12 minutes, root
    sudo .venv/bin/python benchmarks/bench_predict.py --bandwidths 50mbit,1gbit --repeats 1

For each bandwidth it brings up a 4-node x 2-slot emulated cluster (`hvdbench cluster up`, the link
shaped with tc), sweeps a model's debug flavor in throughput mode over 1x1, 1x2, 2x1, 2x2 and 4x1
(with `--allreduce-bench`: Horovod's allreduce curve per layout, which the predictor's links are
fitted from), takes it down, and runs `hvdbench predict --fit-on 1x1,1x2,2x1` twice: with each
layout's own allreduce bench (--layout-benches: 2x2's and 4x1's allreduce measured, their training
not) and with the link model fitted on 2x1 alone (--link-model-only). The goal is predicted /
measured within 1 +- 0.15 for the layouts not fitted on.

Every node of the emulated cluster is a namespace of this one machine: 4 ranks share its cores, so
the predictor's "ranks per machine" is N x G here (fitted from 1x1 against 1x2).
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
from pathlib import Path

BIN = Path(sys.executable).parent
HVD = str(BIN / "hvdbench")
FIT = "1x1,1x2,2x1"
PREDICT = "2x2,4x1"


def sh(*argv: str) -> None:
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    subprocess.run(list(argv), check=True, env=env, stdout=subprocess.DEVNULL)


def one_bandwidth(bandwidth: str, args, work: Path) -> list[dict]:
    name = "hvdpred"
    sweep = work / f"sweep-{bandwidth}"
    sh(HVD, "cluster", "up", "--name", name, "--nodes", "4", "--slots", "2", "--bandwidth", bandwidth,
       "--subnet", "10.232.9.0/24")
    try:
        sh(HVD, "sweep", args.model, "--cluster", name, "--layouts", f"{FIT},{PREDICT}", "--repeats",
           str(args.repeats), "--allreduce-bench", args.allreduce_max, "--timeout", "300", "--out", str(sweep),
           "--", "--flavor", "debug", "--synthetic", "--steps", str(args.steps), "--warmup-steps", "5")
    finally:
        sh(HVD, "cluster", "down", "--name", name)
    rows = []
    # Twice: with each layout's own allreduce bench (2x2's and 4x1's allreduce measured, their
    # training not), and from the link model fitted on 2x1 alone (the 8x8 a team is about to buy).
    for how in ("--layout-benches", "--link-model-only"):
        report = work / f"report-{bandwidth}{how}"
        sh(HVD, "predict", str(sweep), "--layouts", PREDICT, "--fit-on", FIT, how, "--out", str(report))
        # prediction.csv's figures with the fit's link and exposure (prediction_fit.csv: a row each, in order)
        with open(report / "prediction.csv", newline="") as f, open(report / "prediction_fit.csv", newline="") as g:
            rows += [{**fit, **row, "how": how.lstrip("-")}
                     for row, fit in zip(csv.DictReader(f), csv.DictReader(g), strict=True)]
    return rows


def cross_bandwidth(sweeps: dict[str, Path]) -> list[float]:
    """The interconnect changes, the layout does not: fit on one bandwidth's 1x1, 1x2 and 2x1 (work,
    exposure), take another bandwidth's 2x1 link from its allreduce bench alone, predict its 2x1.
    Two ranks: what this 2-core machine runs without oversubscribing its cores."""
    from hvdbench.results.predict.throughput import fit_group, fit_link, predict
    from hvdbench.results.report import load  # the report's one reader: runs and bench rows
    from hvdbench.topology import parse_layouts

    ratios = []
    loaded = {bw: load([folder]) for bw, folder in sweeps.items()}
    for fitted_bw, fitted in loaded.items():
        fit = fit_group(fitted.runs, fitted.allreduce, fit_layouts=set(parse_layouts(FIT)), layout_benches=False)
        for other_bw, other in loaded.items():
            if other_bw == fitted_bw:
                continue
            fit.links["inter"] = fit_link([r for r in other.allreduce if r.layout == "2x1"], "inter")
            runs = [r for r in other.runs if r.layout == "2x1" and r.status == "success"]
            measured = sum(r.throughput for r in runs) / len(runs)
            row = predict(fit, 2, 1)
            ratios.append(row.predicted_throughput / measured)
            print(f"fit at {fitted_bw:>8}, link of {other_bw:>8}: 2x1 predicted {row.predicted_throughput:7.1f}, "
                  f"measured {measured:7.1f} samples/s, predicted/measured {ratios[-1]:.3f}", flush=True)
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--bandwidths", default="50mbit,200mbit,1gbit")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--allreduce-max", default="1M", help="--allreduce-bench's largest message")
    parser.add_argument("--keep", metavar="DIR", help="Keep the sweeps and predictions in DIR (default: a temporary folder)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench_predict.py needs root: the emulated cluster uses network namespaces")
    results = []
    with tempfile.TemporaryDirectory(prefix="hvdbench-bench-predict-") as tmp:
        work = Path(args.keep) if args.keep else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for bandwidth in args.bandwidths.split(","):
            for row in one_bandwidth(bandwidth, args, work):
                results.append((bandwidth, row))
                ratio = row["predicted_vs_measured"]
                fitted = row["fitted"] == "yes"
                print(f"{bandwidth:>8}  {row['how']:>15}  {row['layout']:>4}  {'fit' if fitted else 'new':>3}  "
                      f"predicted {float(row['predicted_throughput']):8.1f}  measured "
                      f"{float(row['measured_throughput'] or 'nan'):8.1f} samples/s  "
                      f"predicted/measured {float(ratio) if ratio else float('nan'):.3f}  "
                      f"({row['link_kind'] or 'no'} link busbw {float(row['busbw_gb_s'] or 'nan'):.3g} GB/s, "
                      f"exposed/allreduce {float(row['exposure'] or 'nan'):.2f})",
                      flush=True)
        ratios = cross_bandwidth({bw: work / f"sweep-{bw}" for bw in args.bandwidths.split(",")})
    inside = sum(abs(x - 1) <= 0.15 for x in ratios)
    print(f"{args.model} debug, the link changed: {inside} of {len(ratios)} 2x1 predictions within +-15 % "
          f"(predicted/measured {min(ratios):.3f} to {max(ratios):.3f})")
    for how in ("layout-benches", "link-model-only"):
        new = [float(r["predicted_vs_measured"]) for _, r in results
               if r["how"] == how and r["fitted"] != "yes" and r["predicted_vs_measured"]]
        inside = sum(abs(x - 1) <= 0.15 for x in new)
        print(f"{args.model} debug, {how}: {inside} of {len(new)} predictions of layouts not fitted on within "
              f"+-15 % (predicted/measured {min(new):.3f} to {max(new):.3f})" if new else f"{how}: nothing to compare")


if __name__ == "__main__":
    main()
