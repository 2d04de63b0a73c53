"""The run's log file, held back until a resume is accepted: a refused one leaves it as it was."""

from __future__ import annotations

import logging
import sys
from logging.handlers import BufferingHandler
from pathlib import Path
from typing import IO

from experiments.core.files import open_to_append


class LogFile(logging.FileHandler):
    """Hydra's job logging's file handler: it appends, never through a link (one is replaced)."""

    def _open(self) -> IO[str]:
        return open_to_append(Path(self.baseFilename), self.encoding)


class HeldLog:
    """What the job logs reaches the log files in `run_dir` only once `release` is called."""

    def __init__(self, run_dir: Path) -> None:
        self._root = logging.getLogger()
        folder = run_dir.resolve()
        self._files = [
            handler
            for handler in self._root.handlers
            if isinstance(handler, logging.FileHandler)
            and Path(handler.baseFilename).parent == folder
        ]
        self._waiting = BufferingHandler(capacity=sys.maxsize)
        for handler in self._files:
            self._root.removeHandler(handler)
        self._root.addHandler(self._waiting)

    def release(self) -> None:
        """The resume is accepted: what waited is written, and the rest goes straight through."""
        self._root.removeHandler(self._waiting)
        for handler in self._files:
            self._root.addHandler(handler)
            for record in self._waiting.buffer:
                if record.levelno >= handler.level:
                    handler.handle(record)
        self._waiting.buffer.clear()
