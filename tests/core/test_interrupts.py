"""Ctrl-C and SIGTERM, sent to a real process that takes them as every command does."""

from __future__ import annotations

import subprocess
import sys

import pytest

# Takes the signals as `python train.py` does, is sent the one named in argv[1], and while that
# interruption is being handled (its record written), gets a second Ctrl-C.
INTERRUPTED_TWICE = """
import os, signal, sys, time
from experiments.core.interrupts import exit_code, reason, take_interrupts
take_interrupts()
try:
    os.kill(os.getpid(), getattr(signal, sys.argv[1]))
    time.sleep(10)
except KeyboardInterrupt as interrupt:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.2)
    print(reason(interrupt), exit_code(interrupt), flush=True)
"""


@pytest.mark.parametrize(
    ("signal", "said"),
    [("SIGINT", "interrupted (SIGINT) 130"), ("SIGTERM", "interrupted (SIGTERM) 143")],
)
def test_a_signal_interrupts_once_and_a_second_ctrl_c_is_not_a_traceback(
    signal: str, said: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_TWICE, signal], capture_output=True, text=True
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, f"{said}\n", "")


# Sent SIGTERM inside a `held_back` block (as TensorBoard's writes are), then Ctrl-C as well.
HELD = """
import os, signal, time
from experiments.core.interrupts import held_back, take_interrupts
take_interrupts()
try:
    with held_back():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.2)
        print("the block ran to its end", flush=True)
        os.kill(os.getpid(), signal.SIGINT)
    print("not reached", flush=True)
except KeyboardInterrupt as interrupt:
    print(type(interrupt).__name__, flush=True)
"""


def test_an_interrupt_inside_a_held_block_is_raised_when_the_block_ends() -> None:
    done = subprocess.run([sys.executable, "-c", HELD], capture_output=True, text=True)
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        "the block ran to its end\nTerminated\n",
        "",
    )


# torchrun's SIGTERM, as a process that joined the group takes it (`Stopped`), arriving while a
# thread runs beside the main one (as TensorBoard's writer does) and a `held_back` block writes.
STOPPED_WHILE_HELD = """
import os, signal, threading, time
from experiments.core.interrupts import held_back
from experiments.devices import distributed
signal.signal(signal.SIGTERM, distributed._raise_stopped)
threading.Thread(target=time.sleep, args=(2,), daemon=True).start()
try:
    with held_back():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.2)
        print("the block ran to its end", flush=True)
except distributed.Stopped as stopped:
    print(stopped, flush=True)
"""


@pytest.mark.slow
def test_torchruns_sigterm_inside_a_held_block_waits_for_its_end() -> None:
    done = subprocess.run(
        [sys.executable, "-c", STOPPED_WHILE_HELD], capture_output=True, text=True
    )
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        "the block ran to its end\nstopped by torchrun (SIGTERM)\n",
        "",
    )


# Sent SIGHUP inside a weakref callback (as an import's module lock has), where Python drops the
# handler's exception ("Exception ignored"); the run then asks whether it was signalled.
LOST = """
import signal, weakref
from experiments.core.interrupts import raise_if_lost, take_interrupts
signal.signal(signal.SIGHUP, signal.SIG_DFL)  # (a terminal's, even where the tests run under nohup)
take_interrupts()
class Thing: ...
thing = Thing()
watch = weakref.ref(thing, lambda _: signal.raise_signal(signal.SIGHUP))
del thing
print("went on", flush=True)
try:
    raise_if_lost()
except KeyboardInterrupt as interrupt:
    print(type(interrupt).__name__, interrupt, flush=True)
"""


def test_an_interrupt_lost_where_python_drops_exceptions_is_raised_again() -> None:
    done = subprocess.run([sys.executable, "-c", LOST], capture_output=True, text=True)
    assert done.returncode == 0
    assert done.stdout == "went on\nTerminated SIGHUP\n"
    assert "Exception ignored" in done.stderr  # (Python's own line on the one it dropped)
