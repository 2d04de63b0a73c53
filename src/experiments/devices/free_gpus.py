"""GPUs handed out to the jobs of one sweep that run side by side (hydra/launcher=joblib)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from pathlib import Path
from typing import IO

from experiments.core.files import try_lock
from experiments.core.text import gpu_name

log = logging.getLogger("experiments")


class FreeGpus:
    """A job holds its GPUs by a lock file each in the sweep folder, released even if it dies."""

    def __init__(self, sweep_dir: Path, poll_seconds: float = 1.0) -> None:
        self.folder = sweep_dir / ".gpus"
        self.poll_seconds = poll_seconds
        self._held: dict[int, IO[str]] = {}

    def __enter__(self) -> FreeGpus:
        return self

    def __exit__(self, *exception: object) -> None:
        for lock in self._held.values():
            lock.close()  # releases it
        self._held.clear()

    def take(self, count: int) -> int:
        """The index of a GPU (of `count`) that no other job holds, held from now on."""
        said = False
        while True:
            for index in range(count):
                if self._locked([index]):
                    return index
            if not said:
                log.info("waiting for a GPU: this sweep's other jobs hold all %d", count)
                said = True
            time.sleep(self.poll_seconds)

    def hold(self, gpus: Iterable[int]) -> None:
        """Hold all of `gpus` at once (no deadlock), waiting while other jobs hold any of them."""
        wanted = sorted(set(gpus) - self._held.keys())
        said = False
        while wanted and not self._locked(wanted):
            if not said:
                log.info(
                    "waiting for %s: another job of this sweep holds %s",
                    ", ".join(map(gpu_name, wanted)),
                    "one of them" if len(wanted) > 1 else "it",
                )
                said = True
            time.sleep(self.poll_seconds)

    def _locked(self, gpus: list[int]) -> bool:
        """Lock every GPU of `gpus`, or (one being held by another job) none of them."""
        self.folder.mkdir(parents=True, exist_ok=True)
        locks: dict[int, IO[str]] = {}
        for index in gpus:
            lock = try_lock(self.folder / f"{index}.lock")
            if lock is None:
                for taken in locks.values():
                    taken.close()
                return False
            locks[index] = lock
        self._held |= locks
        return True
