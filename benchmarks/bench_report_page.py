"""What report.html costs (issue 55): the time `hvdbench report` takes to write a report with the page
(--format csv,md,png,html, the default) against the same report without it (csv,md,png), measured in
the same run, ABBA round by round, each in a fresh process; and the page's size.

    .venv/bin/python benchmarks/bench_report_page.py results/demo-study --rounds 4

Each measurement is a whole `hvdbench report SOURCE --out TMP --format F` (loading, the sections, the
files); times are the child's CPU time (the machine is shared: other processes' load moves wall time
more), wall time beside them. Prints each round's ratio with:without and their median and spread,
and report.html's size in MB.

Measured on the 2-core development machine, shared (load average 5 to 9), on the demo's study
(`hvdbench study run demo --hosts localhost:2 --layouts 1x1,1x2 --repeats 1`: 7 models, 14 runs), 4 rounds
ABBA: with:without the page, CPU time median 0.946 (0.789-1.006), wall 1.121 (0.929-1.382): the page is
inside the noise of the rest; report.html 1.69 MB (2.09 MB with --predict 1x4's plots).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HVDBENCH = Path(sys.executable).parent / "hvdbench"
WITH, WITHOUT = "csv,md,png,html", "csv,md,png"


def one(source: str, formats: str) -> tuple[float, float, int]:
    """CPU and wall seconds of one report in a fresh process, and report.html's bytes (0 without it)."""
    with tempfile.TemporaryDirectory(prefix="bench-report-page-") as tmp:
        out = Path(tmp) / "report"
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run([str(HVDBENCH), "report", source, "--out", str(out), "--format", formats],
                       check=True, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        page = out / "report.html"
        return cpu, wall, page.stat().st_size if page.exists() else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", help="a sweep or study folder")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    ratios, walls, size = [], [], 0
    for k in range(args.rounds):
        order = (WITH, WITHOUT) if k % 2 == 0 else (WITHOUT, WITH)  # ABBA
        found = {formats: one(args.source, formats) for formats in order}
        (cpu_with, wall_with, size), (cpu_without, wall_without, _) = found[WITH], found[WITHOUT]
        ratios.append(cpu_with / cpu_without)
        walls.append(wall_with / wall_without)
        print(f"round {k + 1}: with the page {cpu_with:.2f} s CPU ({wall_with:.2f} wall), without "
              f"{cpu_without:.2f} s ({wall_without:.2f}): {ratios[-1]:.3f}")
    print(f"with:without, CPU time: median {statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f}); "
          f"wall {statistics.median(walls):.3f} ({min(walls):.3f}-{max(walls):.3f})")
    print(f"report.html: {size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
