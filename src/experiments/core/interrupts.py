"""Ctrl-C, SIGTERM, SIGHUP, SIGQUIT and SIGUSR1 end a command alike, as a KeyboardInterrupt."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

_holding = 0  # how many `held_back` blocks the main thread is in
_pending: list[BaseException] = []  # the interrupt held back, raised when they end
_delivered: list[BaseException] = []  # the interrupt a signal raised, in case it was lost


# Windows has neither SIGHUP nor SIGQUIT nor SIGUSR1.
INTERRUPTING = ("SIGINT", "SIGTERM", "SIGHUP")
# Those that end a process at once by default: they end it so, once the run has recorded why.
ENDING = ("SIGQUIT", "SIGUSR1")
TAKEN = tuple(getattr(signal, name) for name in (*INTERRUPTING, *ENDING) if hasattr(signal, name))


class Terminated(KeyboardInterrupt):
    """A signal other than Ctrl-C's that ends the process: SIGTERM, say."""

    def __init__(self, signum: int = signal.SIGTERM) -> None:
        self.signal = signal.Signals(signum)
        super().__init__(self.signal.name)


def take_interrupts() -> None:
    """Raise the first signal taken (a second would cut its results short); nohup's stay ignored."""
    for each in TAKEN:
        if signal.getsignal(each) != signal.SIG_IGN or each in (signal.SIGINT, signal.SIGTERM):
            signal.signal(each, _interrupt)
    _delivered.clear()


def take_as_interrupt(signum: int) -> None:
    """Raise signal `signum` as the others taken are raised (SIGUSR2: SLURM's warning)."""
    signal.signal(signum, _interrupt)


def raise_if_lost() -> None:
    """Raise again an interrupt Python dropped (raised in a weakref callback or a `__del__`)."""
    if _delivered and not _holding:
        raise _delivered[-1]


@contextmanager
def held_back() -> Iterator[None]:
    """Hold back the signals taken while the block runs; one that came is raised as it ends."""
    global _holding
    _holding += 1
    try:
        yield
    finally:
        _holding -= 1
    if not _holding and _pending:
        raise _pending.pop()


def raise_unless_held(interrupt: BaseException) -> None:
    if not _holding:
        raise interrupt
    _pending.append(interrupt)


def reason(interrupt: KeyboardInterrupt) -> str:
    """Why the run stopped: "interrupted (SIGINT)" (Ctrl-C), "interrupted (SIGHUP)"."""
    name = interrupt.signal.name if isinstance(interrupt, Terminated) else "SIGINT"
    return f"interrupted ({name})"


def exit_code(interrupt: KeyboardInterrupt) -> int:
    """128 and the signal's number, as a shell reports a process the signal ended."""
    return 128 + (interrupt.signal if isinstance(interrupt, Terminated) else signal.SIGINT)


def end_as_the_signal_would(interrupt: KeyboardInterrupt) -> None:
    """End the process by SIGQUIT or SIGUSR1 itself, as the signal would have; return for others."""
    if isinstance(interrupt, Terminated) and interrupt.signal.name in ENDING:
        signal.signal(interrupt.signal, signal.SIG_DFL)
        signal.raise_signal(interrupt.signal)  # to this thread: it ends before the call returns


def _interrupt(signum: int, frame: FrameType | None) -> None:
    for each in {*TAKEN, signum}:
        signal.signal(each, signal.SIG_IGN)
    interrupt = Terminated(signum) if signum != signal.SIGINT else KeyboardInterrupt()
    _delivered.append(interrupt)
    raise_unless_held(interrupt)
