"""GPUs handed out to the jobs of one sweep that run side by side."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import IO

from experiments.core.files import try_lock

log = logging.getLogger("experiments")


class FreeGpus:
    """GPUs handed out to the jobs of one sweep that run side by side (hydra/launcher=joblib).

    A job whose request leaves the GPU open (device=cuda or device=auto) takes the first GPU no
    other running job of the sweep holds, and holds it until it ends: a lock file per GPU in the
    sweep folder (`.gpus/<index>.lock`), which the system releases even if the job dies. With
    more parallel jobs than GPUs, or jobs of unequal length, a job waits for a GPU to come free:
    no two jobs of a sweep ever share one. (Linux and macOS: the locks are POSIX file locks.)
    """

    def __init__(self, sweep_dir: Path, poll_seconds: float = 1.0) -> None:
        self.folder = sweep_dir / ".gpus"
        self.poll_seconds = poll_seconds
        self._held: IO[str] | None = None

    def __enter__(self) -> FreeGpus:
        return self

    def __exit__(self, *exception: object) -> None:
        if self._held is not None:
            self._held.close()  # releases the lock
            self._held = None

    def take(self, count: int) -> int:
        """The index of a GPU (of `count`) that no other job holds, held from now on."""
        self.folder.mkdir(parents=True, exist_ok=True)
        said = False
        while True:
            for index in range(count):
                self._held = try_lock(self.folder / f"{index}.lock")
                if self._held is not None:
                    return index
            if not said:
                log.info("waiting for a GPU: this sweep's other jobs hold all %d", count)
                said = True
            time.sleep(self.poll_seconds)
