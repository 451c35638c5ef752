"""report.html of a published MLPerf tree in a real browser (headless Chromium, tests/integration/browser.py):
the page loads with no console message and no request leaving it, every plot decodes, the verdict's
lines and states are verdict.csv's, and the verdict fits the first screen of a 1366x768 window. The
pages of a real sweep (report.html, compare.html) are opened by test_sweep.py's bench test, and the
throttled node's by test_cluster.py's, inside the launches those tests make anyway.

    .venv/bin/python -m pytest tests/integration/test_report_browser.py
"""

import csv
import sys
from pathlib import Path

import pytest
from browser import HEIGHT, chromium, load
from conftest import run

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))  # the published tree test_mllog writes
from test_mllog import published_tree  # noqa: E402

pytestmark = pytest.mark.integration


def verdict_states(report: Path) -> dict[str, str]:
    with open(report / "verdict.csv", newline="") as f:
        return {r["check"]: r["state"] for r in csv.DictReader(f)}


def test_the_page_of_a_published_tree_loads_offline_and_opens_with_its_verdict(tmp_path, hvdbench_bin):
    tree = published_tree(tmp_path / "training_results_v4.0")
    report = tmp_path / "report"
    run([hvdbench_bin, "report", "--mllog", tree, "--out", report, "--gpu-hour-price", "3"])
    page_file = report / "report.html"
    assert page_file.stat().st_size < 5e6
    with chromium(tmp_path) as browser:
        page = load(browser, page_file, tmp_path / "verdict.png")
    assert page.console == [] and page.requests == [], (page.console, page.requests)
    assert page.images >= 2 and page.broken_images == []
    assert page.checks == verdict_states(report)
    assert page.checks["time_to_train_rcp"] in ("pass", "fail", "not measured")
    assert page.checks["stragglers"] == "not measured"  # published logs carry no per-rank times
    assert page.viewport == (1366, HEIGHT) and 0 < page.verdict_bottom <= HEIGHT
    assert page.sections[:3] == ["verdict", "cost", "tables"] and "time_to_train" in page.sections
    assert (tmp_path / "verdict.png").stat().st_size > 0
