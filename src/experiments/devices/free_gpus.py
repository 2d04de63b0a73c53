"""GPUs handed out to the jobs that run side by side on one machine (hydra/launcher=joblib,
submitit_local): of one sweep, of two sweeps started at once, of two users."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO

from experiments.core.files import try_lock
from experiments.core.text import gpu_name

log = logging.getLogger("experiments")


# A folder of lock files to use instead of this machine's shared one.
GPU_LOCKS = "EXPERIMENTS_GPU_LOCKS"


def this_machines_gpu_locks(env: Mapping[str, str] = os.environ) -> Path:
    """The folder of this machine's GPU locks: one every user may write (sticky, as /tmp is),
    so that no two jobs of any sweep share a GPU; this user's own where that cannot be made."""
    if env.get(GPU_LOCKS):
        return Path(env[GPU_LOCKS])
    host = socket.gethostname().split(".")[0]
    shared = Path(tempfile.gettempdir()) / f"experiments-gpus-{host}"
    with contextlib.suppress(OSError):
        shared.mkdir(exist_ok=True)
        if shared.stat().st_uid == os.getuid():
            shared.chmod(0o1777)  # (not as mkdir's mode, which the umask narrows)
        if os.access(shared, os.W_OK | os.X_OK) and not shared.is_symlink():
            return shared
    return Path.home() / ".cache" / "experiments" / f"gpus-{host}"


class FreeGpus:
    """A job holds its GPUs by a lock file each in `folder`, released even if it dies. GPUs are
    named as the machine numbers them: CUDA_VISIBLE_DEVICES's entries where it is set."""

    def __init__(self, folder: Path, poll_seconds: float = 1.0, visible: str | None = None) -> None:
        self.folder = folder
        self.poll_seconds = poll_seconds
        self._held: dict[int, IO[str]] = {}
        shown = os.environ.get("CUDA_VISIBLE_DEVICES") if visible is None else visible
        self._machines_names = [name.strip() for name in (shown or "").split(",") if name.strip()]

    def lock_name(self, index: int) -> str:
        """GPU `index` of this process's, as the machine names it."""
        names = self._machines_names
        return f"{names[index] if index < len(names) else index}.lock"

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
                log.info("waiting for a GPU: other jobs on this machine hold all %d", count)
                said = True
            time.sleep(self.poll_seconds)

    def hold(self, gpus: Iterable[int]) -> None:
        """Hold all of `gpus` at once (no deadlock), waiting while other jobs hold any of them."""
        wanted = sorted(set(gpus) - self._held.keys())
        said = False
        while wanted and not self._locked(wanted):
            if not said:
                log.info(
                    "waiting for %s: another job on this machine holds %s",
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
            path = self.folder / self.lock_name(index)
            lock = try_lock(path)
            with contextlib.suppress(OSError):  # another user's jobs may lock it too
                path.chmod(0o666)
            if lock is None:
                for taken in locks.values():
                    taken.close()
                return False
            locks[index] = lock
        self._held |= locks
        return True
