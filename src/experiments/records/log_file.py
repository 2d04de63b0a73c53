"""The run's log file (`train.log`, `eval.log`): written by `LogFile`, the file handler of Hydra's
job logging (conf/hydra/job_logging/experiments.yaml), and held back until a resume is accepted,
so a refused resume leaves it as it was (as `records.results.Results` does results.json)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import IO

from experiments.core.files import open_to_append


class LogFile(logging.FileHandler):
    """Appends to the log file, never through a link: a link in its place is replaced by a log
    file of the run's own; the file it pointed to is left as it was."""

    def _open(self) -> IO[str]:
        return open_to_append(Path(self.baseFilename), self.encoding)


class _Waiting(logging.Handler):
    """Keeps the log lines meant for the log file until the resume is accepted."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


class HeldLog:
    """From now on, what the job logs reaches the log files in `run_dir` only once `release` is
    called, and then in order; never released (a refused resume), it never does. Hydra sets up
    the handlers anew for every job, so there is nothing to put back."""

    def __init__(self, run_dir: Path) -> None:
        self._root = logging.getLogger()
        folder = run_dir.resolve()
        self._files = [
            handler
            for handler in self._root.handlers
            if isinstance(handler, logging.FileHandler)
            and Path(handler.baseFilename).parent == folder
        ]
        self._waiting = _Waiting()
        for handler in self._files:
            self._root.removeHandler(handler)
        self._root.addHandler(self._waiting)

    def release(self) -> None:
        """The resume is accepted: what waited is written, and the rest goes straight through."""
        self._root.removeHandler(self._waiting)
        for handler in self._files:
            self._root.addHandler(handler)
            for record in self._waiting.records:
                if record.levelno >= handler.level:
                    handler.handle(record)
        self._waiting.records.clear()
