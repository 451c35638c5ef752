"""Where make test's time goes, in CPU-seconds: the lines tests/conftest.py writes for each test when
HVDBENCH_TEST_CPU_LOG names a folder, added up by test file, then the costliest tests.

    HVDBENCH_TEST_CPU_LOG=/tmp/suite-cpu make test
    .venv/bin/python scripts/suite_cpu.py /tmp/suite-cpu            # the 30 costliest files and tests
    .venv/bin/python scripts/suite_cpu.py /tmp/suite-cpu --top 10

A test's CPU-seconds are its pytest process's own and those of the processes it waited for (a launch
and its ranks); the durations pytest lists are wall seconds, which grow with what the other worker
runs beside the test. A line that is not node id, wall, own and children's CPU is named and left out.
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path


def read(folder: Path) -> list[tuple[str, float, float, float]]:
    """Every test's (node id, wall s, own CPU s, children's CPU s) from folder/*.tsv."""
    rows = []
    for path in sorted(folder.glob("*.tsv")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            try:  # a line of another length fails the unpacking, a bad number the float: both ValueError
                node, wall, own, children = line.split("\t")
                rows.append((node, float(wall), float(own), float(children)))
            except ValueError:
                print(f"warning: {path}:{number}: not node id, wall, own CPU and children's CPU; left out",
                      file=sys.stderr)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="the folder HVDBENCH_TEST_CPU_LOG named")
    parser.add_argument("--top", type=int, default=30, help="files and tests listed (default 30)")
    args = parser.parse_args(argv)
    if not args.folder.is_dir():
        print(f"error: {args.folder}: no such folder", file=sys.stderr)
        return 1
    rows = read(args.folder)
    if not rows:
        print(f"error: {args.folder}: no test lines (run make test with HVDBENCH_TEST_CPU_LOG={args.folder})",
              file=sys.stderr)
        return 1
    by_file = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for node, wall, own, children in rows:
        entry = by_file[node.split("::")[0]]
        entry[0] += 1
        entry[1] += wall
        entry[2] += own + children
    wall = sum(r[1] for r in rows)
    cpu = sum(r[2] + r[3] for r in rows)
    print(f"{len(rows)} tests: {wall:,.0f} worker-seconds of wall time, {cpu:,.0f} CPU-seconds "
          f"(the tests' own {sum(r[2] for r in rows):,.0f}, the processes they waited for "
          f"{sum(r[3] for r in rows):,.0f})")
    print(f"\n{'CPU s':>8} {'share':>6} {'wall s':>8} {'tests':>5}  file")
    for name, (count, file_wall, file_cpu) in sorted(by_file.items(), key=lambda kv: -kv[1][2])[:args.top]:
        print(f"{file_cpu:8.1f} {file_cpu / cpu:6.1%} {file_wall:8.1f} {count:5d}  {name}")
    print(f"\n{'CPU s':>8} {'wall s':>8}  test")
    for node, test_wall, own, children in sorted(rows, key=lambda r: -(r[2] + r[3]))[:args.top]:
        print(f"{own + children:8.1f} {test_wall:8.1f}  {node}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
