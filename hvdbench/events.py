"""MLPerf-format event log, the writing side: `:::MLLOG {json}` lines written with MLCommons' own
`mlperf-logging`.

`EventLog(path)` appends to `path`; `EventLog(None)` is a log whose calls do nothing, so a training
loop calls it unconditionally and only the rank given a path (rank 0's `<out>/mllog.txt`) writes.
The file can be checked with the official checker:

    python -m mlperf_logging.compliance_checker --usage training --ruleset 4.0.0 <out>/mllog.txt

(4.0.0 is the last training ruleset that still has ResNet-50; it has BERT too.) It is read back by
the one :::MLLOG parser, `hvdbench.results.mllog` (`read_events`, or `read_event_dicts` for plain dicts).
"""

from __future__ import annotations

import logging
from pathlib import Path

from mlperf_logging.mllog import constants
from mlperf_logging.mllog.mllog import MLLogger

from hvdbench.files import open_no_link


class _NoLinkFileHandler(logging.FileHandler):
    """A FileHandler that appends through open_no_link: a link planted at the log's name is refused."""

    def _open(self):
        return open_no_link(Path(self.baseFilename), "a", encoding=self.encoding or "utf-8")


class EventLog:
    """`start`/`end`/`event` as in mllog; `key` is an mllog constant or its string value."""

    def __init__(self, path: str | Path | None):
        self.path = Path(path) if path else None
        self._logger = None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # A logger of our own: mllog's default one also prints every line to stdout, and one
            # logger per file keeps two runs in one process (tests) from writing into each other.
            logger = logging.getLogger(f"hvdbench.mllog.{self.path.resolve()}")
            logger.propagate = False
            logger.setLevel(logging.INFO)
            for handler in list(logger.handlers):
                logger.removeHandler(handler)
                handler.close()
            handler = _NoLinkFileHandler(self.path, mode="a", encoding="utf-8")
            handler.setFormatter(logging.Formatter("%(message)s"))
            logger.addHandler(handler)
            # stack offset 2: the file:line recorded in each event is our caller's, not this module's.
            self._logger = MLLogger(logger=logger, default_stack_offset=2)

    @property
    def enabled(self) -> bool:
        return self._logger is not None

    def event(self, key: str, value=None, metadata: dict | None = None) -> None:
        if self._logger:
            self._logger.event(key=key, value=value, metadata=metadata)

    def start(self, key: str, value=None, metadata: dict | None = None) -> None:
        if self._logger:
            self._logger.start(key=key, value=value, metadata=metadata)

    def end(self, key: str, value=None, metadata: dict | None = None) -> None:
        if self._logger:
            self._logger.end(key=key, value=value, metadata=metadata)

    def close(self) -> None:
        if self._logger:
            for handler in list(self._logger.logger.handlers):
                self._logger.logger.removeHandler(handler)
                handler.close()
            self._logger = None

    # --- groups of events every run writes ---------------------------------------------------

    def submission(self, benchmark: str, org: str, platform: str, division: str, status: str) -> None:
        """`benchmark`: MLPerf's name for it (the checker's `submission_benchmark`), ModelSpec.benchmark."""
        self.event(constants.SUBMISSION_BENCHMARK, benchmark)
        self.event(constants.SUBMISSION_ORG, org)
        self.event(constants.SUBMISSION_DIVISION, division)
        self.event(constants.SUBMISSION_STATUS, status)
        self.event(constants.SUBMISSION_PLATFORM, platform)

    def hyperparameters(self, values: dict) -> None:
        """One point event per key, e.g. {"global_batch_size": 512, "opt_name": "sgd"}."""
        for key, value in values.items():
            self.event(key, value)

