"""Ctrl-C (SIGINT) and SIGTERM (`kill`, `timeout`, a SLURM preemption) end a command alike: the
run records that it was interrupted, and by which, its temporary files are removed on the way
out, and it can be resumed. SIGTERM is raised as `Terminated`, a KeyboardInterrupt, so that what
serves Ctrl-C (every `except KeyboardInterrupt`, `except BaseException` and `finally`) serves it.
Code that another thread waits on (TensorBoard's writer and its queue) holds them back while it
runs (`held`): cut short there, it leaves the queue waiting for ever. Under torchrun, joining the
process group gives SIGTERM torchrun's meaning instead (`experiments.devices.distributed`), held
back the same way (`raise_unless_held`)."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

_holding = 0  # how many `held` blocks the main thread is in
_pending: list[BaseException] = []  # the interrupt held back, raised when they end


class Terminated(KeyboardInterrupt):
    """The process was sent SIGTERM."""


def take_interrupts() -> None:
    """From now on, SIGINT raises KeyboardInterrupt and SIGTERM Terminated, the first of them
    only: a second, while the first one's record is written, would cut it short (and show a
    traceback)."""
    for each in (signal.SIGINT, signal.SIGTERM):
        signal.signal(each, _interrupt)


@contextmanager
def held() -> Iterator[None]:
    """Hold back Ctrl-C and SIGTERM while the block runs; one that came meanwhile is raised when
    it ends."""
    global _holding
    _holding += 1
    try:
        yield
    finally:
        _holding -= 1
    if not _holding and _pending:
        raise _pending.pop()


def raise_unless_held(interrupt: BaseException) -> None:
    """Raise `interrupt` (from a signal handler) now, or if a `held` block runs, when it ends."""
    if _holding:
        _pending.append(interrupt)
        return
    raise interrupt


def reason(interrupt: KeyboardInterrupt) -> str:
    """Why the run stopped, for results.json and the console."""
    return "interrupted (SIGTERM)" if isinstance(interrupt, Terminated) else "interrupted"


def exit_code(interrupt: KeyboardInterrupt) -> int:
    """128 and the signal's number, as a shell reports a process the signal ended."""
    return 128 + (signal.SIGTERM if isinstance(interrupt, Terminated) else signal.SIGINT)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    for each in (signal.SIGINT, signal.SIGTERM):
        signal.signal(each, signal.SIG_IGN)
    raise_unless_held(Terminated() if signum == signal.SIGTERM else KeyboardInterrupt())
