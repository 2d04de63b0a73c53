"""Files written whole or not at all, and locks between processes.

Every record a run keeps (results.json, metrics.jsonl after a resume, checkpoints, the cache's
statistics) is written by `write_atomically`, and every lock (a cache entry being built, a GPU a
sweep job holds) is a POSIX file lock, which the system releases even if its process dies.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

# The temporary file of `write_atomically`.
LEFTOVER = re.compile(r"\..+\.\d+\.tmp")
# How often a process waiting for a lock tries it again.
LOCK_POLL_SECONDS = 0.1


def write_atomically(path: Path, write: Callable[[IO[bytes]], object]) -> None:
    """Write to a temporary file beside `path`, sync it to disk, then rename it over `path`:
    a crash leaves either the old file or the new one, never a torn one. A write that fails (or
    is interrupted) removes its temporary file; one killed leaves it to `remove_leftovers`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(temporary, "wb") as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    if hasattr(os, "O_DIRECTORY"):  # make the rename itself durable (POSIX)
        directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)


def remove_leftovers(*folders: Path) -> list[Path]:
    """Remove the temporary files that writers killed mid-write (`.last.pt.<pid>.tmp`) left in
    `folders`, and return them. Only while no other process writes there."""
    left = [
        path
        for folder in folders
        for path in folder.glob(".*.tmp")
        if LEFTOVER.fullmatch(path.name) and path.is_file()
    ]
    for path in left:
        path.unlink(missing_ok=True)
    return left


def write_text_atomically(path: Path, text: str) -> None:
    write_atomically(path, lambda file: file.write(text.encode()))


@contextlib.contextmanager
def locked(path: Path, timeout: float, waiting: Callable[[], object]) -> Iterator[None]:
    """Hold an exclusive lock on `path` for the block. If another process holds it, call
    `waiting` once and wait for it, `timeout` seconds at most (then TimeoutError): a holder that
    is stopped or hung never releases it."""
    lock = try_lock(path)
    if lock is None:
        waiting()
        deadline = time.monotonic() + timeout
        while (lock := try_lock(path)) is None:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{path} is still locked after {timeout:g} s")
            time.sleep(LOCK_POLL_SECONDS)
    with lock:
        yield


def try_lock(path: Path) -> IO[str] | None:
    """An exclusive lock on `path`, held until the returned file is closed; None at once if
    another process holds it."""
    import fcntl  # POSIX only, as above

    lock = open(path, "w")  # noqa: SIM115 - the caller holds it open
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        return None
    return lock
