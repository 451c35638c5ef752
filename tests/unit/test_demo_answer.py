"""scripts/demo_answer.py's speed-up table: columns as wide as their widest cell.

    .venv/bin/python -m pytest tests/unit/test_demo_answer.py
(the whole answer, from a real demo, is tests/integration/test_demo.py's)"""

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "demo_answer.py"
spec = importlib.util.spec_from_file_location("demo_answer", SCRIPT)
demo_answer = importlib.util.module_from_spec(spec)
spec.loader.exec_module(demo_answer)


def test_a_long_flagged_speedup_runs_into_no_neighbour():
    # The demo of 2026-11-29 printed "1.28x (noisy, noisy-baseline, busy)0.40x (noisy-baseline, busy)".
    rows = [["model", "1x2 (scale-up)", "2x1 (scale-out)"],
            ["gnmt", "1.28x (noisy, noisy-baseline, busy)", "0.40x (noisy-baseline, busy)"],
            ["bert", "1.37x", "-"]]
    lines = demo_answer.aligned(rows)
    assert lines[1] == "  gnmt   1.28x (noisy, noisy-baseline, busy)  0.40x (noisy-baseline, busy)"
    # every column starts where its header does
    start = lines[0].index("2x1 (scale-out)")
    assert lines[1].index("0.40x") == start and lines[2].index("-") == start
    assert all(line == line.rstrip() for line in lines)
