"""Reference convergence points: `rcp_check` runs mlperf-logging's own RCP checker on a group of
runs read from MLPerf logs, as the official result summarizer does for closed-division results,
and reads back its verdict and score factor.

    hvdbench report --mllog training_results_v4.0/Oracle --ruleset 4.0.0   # rcp_* columns of time_to_train.csv
"""

from __future__ import annotations

import contextlib
import copy
import functools
import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hvdbench.results.mllog.record import MllogRun, scaling_factor
from hvdbench.results.records.schema import RunResult


@dataclass(frozen=True)
class Rcp:
    """The RCP check of one group of runs (one benchmark, system, layout and batch), as the official
    result summarizer makes it. `factor` is what the summarizer multiplies the score by (the
    scaling.json the checker writes; 1.0 when it writes none); None when no check applies."""
    check: str  # Pass | Fail | Interp. Fail | Missing | No RCP | not checked
    note: str  # the checker's message, or why it was not run
    ruleset: str = ""
    factor: float | None = None
    rcp_mean: float | None = None  # the RCP's olympic mean epochs (or samples) to converge
    rcp_min: float | None = None  # the fewest mean epochs (samples) the checker accepts
    converge_mean: float | None = None  # these runs' olympic mean epochs (samples), as the checker computes it


NOT_CHECKED = "not checked"


def rcp_check(runs: list[RunResult]) -> Rcp | None:
    """Run mlperf-logging's RCP checker (`rcp_checker.check_directory`, pruned RCPs, no bypass,
    set_scaling: exactly the call the result summarizer makes for a closed-division benchmark
    folder) on these runs' logs, and read back the scaling.json it writes. None for runs that are
    not MLPerf logs (runs.csv rows)."""
    logs = [r for r in runs if isinstance(r, MllogRun)]
    if not logs:
        return None
    ruleset, division = logs[0].ruleset, logs[0].division
    if division != "closed":
        return Rcp(NOT_CHECKED, f"{division or 'no'} division: the summarizer checks RCPs in the closed "
                   "division only", ruleset, 1.0)
    if len(logs) < 3:
        return Rcp(NOT_CHECKED, f"{len(logs)} run(s): the checker's olympic mean needs 3", ruleset, 1.0)
    from mlperf_logging.rcp_checker import rcp_checker  # numpy and scipy: only when a check runs

    capture = _Capture()
    root_logger = logging.getLogger()
    old_level = root_logger.level
    root_logger.addHandler(capture)  # also keeps logging.info from installing a stderr handler
    root_logger.setLevel(logging.INFO)
    try:
        with tempfile.TemporaryDirectory(prefix="hvdbench-rcp-") as tmp:
            for i, run in enumerate(logs):
                Path(tmp, f"result_{i}.txt").write_text("\n".join(run.rcp_lines) + "\n", encoding="latin-1")
            try:
                with _checkers_built_once(rcp_checker):
                    passed, message, _ = rcp_checker.check_directory(
                        tmp, "training", ruleset, False, False, rcp_file=None, rcp_pass="pruned_rcps",
                        rcp_bypass=False, set_scaling=True)
            except Exception as e:  # no RCP file or entry for this benchmark and round, a bad ruleset
                return Rcp("No RCP", f"the RCP checker did not run ({type(e).__name__}: {e}): training "
                           f"ruleset {ruleset} may have no RCPs for {logs[0].model!r}", ruleset, 1.0)
            factor = scaling_factor(Path(tmp, "scaling.json")) or 1.0
    finally:
        root_logger.removeHandler(capture)
        root_logger.setLevel(old_level)
    record = capture.arg(" RCP Record: %s")
    rcp_mean = record.get("RCP Mean") if isinstance(record, dict) else None
    speedup = record.get("Max Speedup") if isinstance(record, dict) else None
    check = "Pass" if passed else (
        "Fail" if message == "RCP found" else "Interp. Fail" if message == "RCP Interpolation"
        else "Missing" if "Missing" in message else "No RCP" if message == "Cannot find any RCPs" else "Fail")
    converge = capture.arg(" Submission mean epochs: %.4f")
    published = {r.published_scaling for r in logs}
    if len(published) == 1 and None not in published and abs(published.pop() - factor) > 1e-9:
        message += f"; the published scaling.json says ×{logs[0].published_scaling:.4f}"
    return Rcp(check, message, ruleset, factor, _float(rcp_mean),
               _float(rcp_mean / speedup) if rcp_mean and speedup else None, _float(converge))


@contextlib.contextmanager
def _checkers_built_once(module):
    """check_directory with each RCP_Checker (a benchmark's RCP table of a ruleset, with its statistics:
    hundreds of t-tests, half of a check's time) built once a process: during the call the module's
    RCP_Checker hands out a fresh copy of the one built, so no check sees what another left in it
    (rcp_file, a custom table, is None in rcp_check's call)."""
    built = module.RCP_Checker

    def copy_of_built(usage, ruleset, benchmark, verbose, rcp_file=None):
        return copy.deepcopy(_built(built, usage, ruleset, benchmark, verbose))

    module.RCP_Checker = copy_of_built
    try:
        yield
    finally:
        module.RCP_Checker = built


@functools.cache
def _built(checker: type, usage: str, ruleset: str, benchmark: str, verbose: bool):
    return checker(usage, ruleset, benchmark, verbose)  # raises for a ruleset or benchmark without RCPs


def _float(value) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


class _Capture(logging.Handler):
    """The RCP checker's log records (it reports through the root logger), kept, never printed."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def arg(self, msg: str):
        """The argument of the last record logged with this format string."""
        for record in reversed(self.records):
            if record.msg == msg and record.args:
                return record.args[0] if isinstance(record.args, tuple) else record.args
        return None
