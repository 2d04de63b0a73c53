"""Ctrl-C (SIGINT), SIGTERM and SIGHUP end a command alike: the run writes that it was
interrupted and by which signal, removes its temporary files, and can be resumed. SIGQUIT and
SIGUSR1 are taken the same way, then end the process as they would have without a handler
(`end_as_the_signal_would`). A signal other than Ctrl-C is raised as `Terminated`, a
KeyboardInterrupt, so every `except KeyboardInterrupt` and `finally` serves it too. Code that
another thread waits on (TensorBoard's writer queue) holds them back as it runs (`held_back`): cut
short there, it leaves the queue waiting for ever. Under torchrun, SIGTERM takes torchrun's meaning
instead (`devices.distributed`), held back the same way."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

_holding = 0  # how many `held_back` blocks the main thread is in
_pending: list[BaseException] = []  # the interrupt held back, raised when they end
_delivered: list[BaseException] = []  # the interrupt a signal raised, in case it was lost


# The signals taken, by name (Windows has neither SIGHUP nor SIGQUIT nor SIGUSR1).
INTERRUPTING = ("SIGINT", "SIGTERM", "SIGHUP")
# Those that end a process at once by default, SIGQUIT with a core dump: they end it so, once the
# run has recorded why.
ENDING = ("SIGQUIT", "SIGUSR1")
TAKEN = tuple(getattr(signal, name) for name in (*INTERRUPTING, *ENDING) if hasattr(signal, name))


class Terminated(KeyboardInterrupt):
    """The process was sent a signal other than Ctrl-C's that ends it: SIGTERM, say."""

    def __init__(self, signum: int = signal.SIGTERM) -> None:
        self.signal = signal.Signals(signum)
        super().__init__(self.signal.name)


def take_interrupts() -> None:
    """From now on, SIGINT raises KeyboardInterrupt and the other signals taken Terminated, the
    first only: a second would cut short the writing of the first one's results. A signal the
    process was started ignoring (other than SIGINT and SIGTERM) stays ignored, for `nohup`."""
    for each in TAKEN:
        inherited = signal.getsignal(each)
        if inherited == signal.SIG_IGN and each not in (signal.SIGINT, signal.SIGTERM):
            continue
        signal.signal(each, _interrupt)
    _delivered.clear()


def raise_if_lost() -> None:
    """Raise again an interrupt that Python dropped ("Exception ignored": raised in a weakref
    callback or a `__del__`), which would otherwise leave the run going as if never signalled.
    Called where the run can stop: every epoch and logged step."""
    if _delivered and not _holding:
        raise _delivered[-1]


@contextmanager
def held_back() -> Iterator[None]:
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
    """Raise `interrupt` (from a signal handler) now, or if in a `held_back` block, when it ends."""
    if _holding:
        _pending.append(interrupt)
        return
    raise interrupt


def reason(interrupt: KeyboardInterrupt) -> str:
    """Why the run stopped, for results.json and the console: "interrupted (SIGINT)" (Ctrl-C),
    "interrupted (SIGHUP)"."""
    name = interrupt.signal.name if isinstance(interrupt, Terminated) else "SIGINT"
    return f"interrupted ({name})"


def exit_code(interrupt: KeyboardInterrupt) -> int:
    """128 and the signal's number, as a shell reports a process the signal ended."""
    return 128 + (interrupt.signal if isinstance(interrupt, Terminated) else signal.SIGINT)


def end_as_the_signal_would(interrupt: KeyboardInterrupt) -> None:
    """End the process by SIGQUIT or SIGUSR1 itself, once its results are written, as the signal
    would have; return for the others, which end with `exit_code`."""
    if isinstance(interrupt, Terminated) and interrupt.signal.name in ENDING:
        signal.signal(interrupt.signal, signal.SIG_DFL)
        signal.raise_signal(interrupt.signal)  # to this thread: it ends before the call returns


def _interrupt(signum: int, frame: FrameType | None) -> None:
    for each in TAKEN:
        signal.signal(each, signal.SIG_IGN)
    interrupt = Terminated(signum) if signum != signal.SIGINT else KeyboardInterrupt()
    _delivered.append(interrupt)
    raise_unless_held(interrupt)
