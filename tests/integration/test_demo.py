"""scripts/demo.sh (`make demo`) as a newcomer sees it, on one model and one repeat (its DEMO_* knobs, which
its header gives): it says at the start how long it expects to take, between the stages how much is
done and how long is left, and ends with the answer in a few lines and the page to open, the report's
whole text in report.log (issue 58: no estimate, and ~700 lines of summary.md scrolling the list of
files away). Local layouts only (DEMO_LOCAL), as root too: the emulated cluster's demo is `make demo`.
The study's data is prepared where demo.yaml says, ./demo-out/ in the checkout, as `make demo` does.

    .venv/bin/python -m pytest tests/integration/test_demo.py
"""

import os
import re
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(900)
def test_the_demo_says_its_time_its_progress_and_ends_with_its_answer(tmp_path):
    env = {**os.environ, "DEMO_OUT": str(tmp_path), "DEMO_LOCAL": "1", "DEMO_ONLY": "ncf", "DEMO_REPEATS": "1",
           "DEMO_STUDY_REPEATS": "1", "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "demo.sh")], capture_output=True, text=True, env=env,
                          timeout=850)
    out = proc.stdout.splitlines()
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # The start: what it runs and how long that takes (2 ncf runs and 2 of ResNet-50's: 4 launches).
    assert out[0].startswith("make demo: 2 throughput runs (1 models x 2 layouts x 1 repeats)")
    assert re.search(r"about \d+:\d\d on a quiet 2-core machine", "\n".join(out[:3]))
    # The progress: the study's runs done of its total, the demo's before its last stages.
    assert any(re.search(r"study: 0 of 2 runs done", line) for line in out)
    assert any(re.search(r"\[\d+:\d\d; 2 of 4 runs done, about \d+:\d\d left\]", line) for line in out)
    # The end: the answer, a few lines, and the page to open; the report's text is in report.log.
    answer = out[out.index(next(line for line in out if line.startswith("== the answer"))) + 1:]
    assert answer[0] == "throughput speed-up over one rank (1x1), mean of the repeats:"
    assert re.match(r"  ncf +\d+\.\d\dx", answer[2]), answer
    assert re.match(r"time to train, resnet50 to top1_accuracy 0\.95: 1x1 \d+ s, 1x2 \d+ s", answer[3]), answer
    run = next(tmp_path.glob("2*"))
    assert re.fullmatch(rf"open: {run}/report/(report\.html|summary\.md)", answer[-1]) and len(answer) <= 6
    assert (run / "report.log").read_text().count("\n") > 50  # what no longer scrolls through the terminal
    assert len(out) < 60, len(out)
