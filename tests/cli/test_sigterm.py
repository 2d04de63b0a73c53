"""SIGTERM (`kill`, `timeout`, a SLURM preemption) ends a real `python train.py` as Ctrl-C does:
one line that says how the run goes on, the run recorded as interrupted, nothing half-written
left, and the command that line names finishes it."""

from __future__ import annotations

import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from experiments.core.errors import ExperimentError
from experiments.records.running import refuse_if_running
from helpers import ROOT, results, steps_so_far, train_cli

# Two short epochs of LeNet, every step logged: a second epoch to stop the run in.
RUN = (
    "model=lenet",
    "device=cpu",
    "trainer.epochs=2",
    "trainer.limit_train_batches=20",
    "trainer.limit_eval_images=64",
    "trainer.log_interval=1",
)


@pytest.mark.slow
def test_sigterm_interrupts_a_run_which_a_resume_then_finishes(tmp_path: Path) -> None:
    console = tmp_path / "stderr.txt"
    with open(console, "w") as stderr:
        training = subprocess.Popen(
            [sys.executable, str(ROOT / "train.py"), *RUN], cwd=tmp_path, stderr=stderr
        )
        try:
            deadline = time.monotonic() + 120
            while not any(row["epoch"] == 2 for row in steps_so_far(tmp_path)):
                assert time.monotonic() < deadline and training.poll() is None
                time.sleep(0.02)
            (run_dir,) = (path.parent for path in (tmp_path / "outputs").rglob("results.json"))
            # While it trains, a resume beside it is refused.
            with pytest.raises(ExperimentError, match="is still training: its process"):
                refuse_if_running(str(run_dir))
            training.send_signal(signal.SIGTERM)
            training.wait(timeout=60)
        finally:
            training.kill()
            training.wait()
    said = console.read_text()
    assert training.returncode == 143
    folder = run_dir.relative_to(tmp_path)
    last_line = said.strip().splitlines()[-1]
    assert last_line == (
        f"Interrupted (SIGTERM); the run in {folder} goes on with: python train.py resume={folder}"
    )
    assert "Traceback" not in said
    result = results(run_dir)
    assert (result["status"], result["reason"], result["epochs_completed"]) == (
        "interrupted",
        "interrupted (SIGTERM)",
        1,
    )
    assert not list(run_dir.rglob("*.tmp"))

    # The command as said, typed in the folder the run was started in.
    command = shlex.split(last_line.partition("goes on with: ")[2])
    assert command[:2] == ["python", "train.py"]
    done = train_cli(tmp_path, *command[2:])
    assert done.returncode == 0, done.stderr
    result = results(run_dir)
    assert (result["status"], result["resumed_after_epochs"]) == ("completed", [1])
