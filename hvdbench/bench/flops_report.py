"""`hvdbench bench flops`'s framework-free half: its table and CSV (the counting is
hvdbench.frameworks.torch.flops, on the meta device), beside allreduce_report.py and compute_report.py.

    rows = flops_rows(["resnet50"], ["full"])    # hvdbench.frameworks.torch.flops
    print(markdown(rows)); write_csv(rows, "flops.csv")
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from hvdbench.files import atomic_write_text

FLOPS_COLUMNS = ("model", "flavor", "forward_gflop", "training_gflop", "formula_gflop", "tokens", "ratio", "note")


def markdown(rows: list[dict]) -> str:
    lines = ["| " + " | ".join(FLOPS_COLUMNS) + " |", "|---|---|" + "---:|" * 5 + "---|"]
    lines += ["| " + " | ".join(str(r[c]) for c in FLOPS_COLUMNS) + " |" for r in rows]
    return "\n".join(lines)


def write_csv(rows: list[dict], path) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=FLOPS_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(Path(path), buf.getvalue())
    return str(path)
