"""Ctrl-C (SIGINT) and SIGHUP (a closed terminal, a dropped ssh connection) end a real
`python train.py` as SIGTERM does; SIGQUIT and SIGUSR1 are recorded too, and then end it as they
would have. Each leaves results.json `interrupted`, by its signal, and says how the run goes on:
stopped before its first checkpoint, each run here is run again afresh."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers import ROOT, results

RUN = ("model=lenet", "device=cpu", "trainer.epochs=2", "trainer.limit_train_batches=20")
# How each ends: SIGINT and SIGHUP with an exit code, as SIGTERM does; the others by the signal.
ENDS = {
    "SIGINT": 128 + signal.SIGINT,
    "SIGHUP": 128 + signal.SIGHUP,
    "SIGQUIT": -signal.SIGQUIT,
    "SIGUSR1": -signal.SIGUSR1,
}


@dataclass
class Signalled:
    returncode: int
    stderr: str
    run_dir: Path


def _as_a_shell_starts_it() -> None:
    """Each signal's default action, as a terminal's shell starts a command: a signal ignored by
    this test process (another test's run in it may have left one so) would stay ignored in
    the run, by design (`nohup`), and the run would train on."""
    for name in ENDS:
        signal.signal(getattr(signal, name), signal.SIG_DFL)


@pytest.fixture(scope="module")
def signalled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Signalled]:
    """A run per signal, started side by side, each sent its signal once results.json says it is
    running (it sets up its data and model then)."""
    started: dict[str, tuple[Path, subprocess.Popen[bytes]]] = {}
    try:
        for name in ENDS:
            cwd = tmp_path_factory.mktemp(name)
            with open(cwd / "stderr.txt", "w") as stderr:
                command = [sys.executable, str(ROOT / "train.py"), *RUN]
                started[name] = (
                    cwd,
                    subprocess.Popen(
                        command, cwd=cwd, stderr=stderr, preexec_fn=_as_a_shell_starts_it
                    ),
                )
        waiting, deadline = set(ENDS), time.monotonic() + 120
        while waiting:
            for name in sorted(waiting):
                cwd, process = started[name]
                assert time.monotonic() < deadline and process.poll() is None
                if list((cwd / "outputs").rglob("results.json")):
                    process.send_signal(getattr(signal, name))
                    waiting.remove(name)
            time.sleep(0.02)
        for _, process in started.values():
            process.wait(timeout=60)
    finally:
        for _, process in started.values():
            process.kill()
            process.wait()
    return {
        name: Signalled(
            process.returncode,
            (cwd / "stderr.txt").read_text(),
            next((cwd / "outputs").rglob("results.json")).parent,
        )
        for name, (cwd, process) in started.items()
    }


@pytest.mark.slow
@pytest.mark.parametrize("name", ENDS)
def test_a_signal_that_ends_a_run_is_recorded_as_its_reason(
    name: str, signalled: dict[str, Signalled]
) -> None:
    run = signalled[name]
    assert run.returncode == ENDS[name]
    folder = run.run_dir.relative_to(run.run_dir.parents[2])  # outputs/<day>/<time>, as typed
    assert run.stderr.strip().splitlines()[-1] == (
        f"Interrupted ({name}); the run in {folder} saved no checkpoint to resume from; run it "
        f"again with: python train.py replay={folder}"
    )
    assert "Traceback" not in run.stderr
    result = results(run.run_dir)
    assert (result["status"], result["reason"]) == ("interrupted", f"interrupted ({name})")
    assert not list(run.run_dir.rglob("*.tmp"))


# Started ignoring SIGHUP, as `nohup` starts a command, takes the signals as every command does.
IGNORING_SIGHUP = """
import os, signal, time
signal.signal(signal.SIGHUP, signal.SIG_IGN)
from experiments.core.interrupts import take_interrupts
take_interrupts()
os.kill(os.getpid(), signal.SIGHUP)
time.sleep(0.2)
print("still running", flush=True)
"""


def test_a_command_started_with_nohup_goes_on_when_its_terminal_closes() -> None:
    done = subprocess.run([sys.executable, "-c", IGNORING_SIGHUP], capture_output=True, text=True)
    assert (done.returncode, done.stdout, done.stderr) == (0, "still running\n", "")
