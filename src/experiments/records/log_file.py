"""The run's log file (`train.log`, `eval.log`): written by `LogFile`, the file handler of Hydra's
job logging (conf/hydra/job_logging/experiments.yaml), and held back while a resume is not yet
accepted: a refused resume leaves its lines as they were, as it leaves the rest of the run's
record (`experiments.records.results.Results`)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import IO

from experiments.core.files import open_to_append


class LogFile(logging.FileHandler):
    """Appends to the log file, never through a link: a link in its place (to a file outside the
    run folder) is replaced, as Hydra sets the handler up, by a log file of the run's own, which
    begins anew; the file it pointed to is left as it was."""

    def _open(self) -> IO[str]:
        return open_to_append(Path(self.baseFilename), self.encoding)


class _Waiting(logging.Handler):
    """Keeps the records meant for the log file until the resume is accepted."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


class HeldLog:
    """From now on, what the job logs reaches the log files in `run_dir` only once `release` is
    called, and then in order. Never released (a refused resume), it never reaches them: not even
    the refusal's own line, which the console shows. Hydra sets up the handlers anew for every job,
    so a job that ends unreleased leaves nothing to put back."""

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
