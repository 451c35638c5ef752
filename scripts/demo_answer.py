"""The demo's answer in a few lines, and the page to open: each model's throughput speed-up over one
rank on every other layout it ran (1x2: a second rank in the same node, scale-up; 2x1: in a second
node, scale-out), ResNet-50's time to its target on each layout, and the flags the report would raise
on them. scripts/demo.sh prints it last; the report's whole text is in report.log beside the report.

    .venv/bin/python scripts/demo_answer.py demo-out/20261128-201543

The figures are the report's own tables (hvdbench.results.stats.aggregate), computed again from the
demo's runs.csv files: the report's text is hundreds of lines, the answer a dozen.
"""

from __future__ import annotations

import sys
from pathlib import Path

from hvdbench.results.report import load
from hvdbench.results.stats.aggregate import build_tables

# The page to open, first the one that exists: the report's HTML page where it writes one, else its Markdown.
PAGES = ("report.html", "summary.md")


def aligned(rows: list[list[str]]) -> list[str]:
    """`rows` (the first the header) as text columns, each as wide as its widest cell and two spaces:
    a flagged speed-up ("1.28x (noisy, noisy-baseline, busy)") runs into no neighbour."""
    widths = [max(len(row[i]) for row in rows) + 2 for i in range(len(rows[0]))]
    return ["  " + "".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]


def answer(run: Path) -> list[str]:
    """The lines of the answer for demo folder `run` (its study/, sweep-tta/ and report/)."""
    sweeps = [path for path in (run / "study", run / "sweep-tta") if path.exists()]
    tables = build_tables(load(sweeps).runs)
    lines = []
    speedups: dict[str, dict[str, str]] = {}
    for row in tables.scaling:  # ScalingRow
        if row.mode == "throughput" and row.speedup is not None and row.layout != row.baseline:
            flags = f" ({row.flags.replace(';', ', ')})" if row.flags else ""
            speedups.setdefault(row.model, {})[row.layout] = f"{row.speedup:.2f}x{flags}"
    layouts = sorted({lay for by_layout in speedups.values() for lay in by_layout})
    if speedups:
        names = {"1x2": "1x2 (scale-up)", "2x1": "2x1 (scale-out)"}
        lines.append("throughput speed-up over one rank (1x1), mean of the repeats:")
        lines += aligned([["model", *(names.get(lay, lay) for lay in layouts)],
                          *([model, *(by_layout.get(lay, "-") for lay in layouts)]
                            for model, by_layout in sorted(speedups.items()))])
    trained: dict[str, list[str]] = {}
    for row in tables.time_to_train:  # TimeToTrainRow
        if row.ttt_min is not None:
            said = f"{row.layout} {row.ttt_min * 60:.0f} s"
            if row.speedup is not None and row.layout != row.baseline:
                said += f" ({row.speedup:.2f}x)"
            target = f"{row.target:g}" if isinstance(row.target, float) else row.target
            trained.setdefault(f"{row.model} to {row.metric} {target}", []).append(said)
    lines += [f"time to train, {what}: {', '.join(said)}" for what, said in trained.items()]
    if not lines:
        lines.append("no run succeeded: see the report")
    report = run / "report"
    page = next((report / name for name in PAGES if (report / name).exists()), report)
    lines.append(f"open: {page}")
    return [line.rstrip() for line in lines]


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} DEMO_FOLDER")
    print("\n".join(answer(Path(sys.argv[1]))))
