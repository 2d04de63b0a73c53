"""Whether a run folder's process is still training: a resume= beside it is refused."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from experiments.core.errors import ExperimentError
from experiments.records.running import alive_here, refuse_if_running


@pytest.fixture
def process() -> Iterator[subprocess.Popen[bytes]]:
    """A real process, alive for the test."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield sleeper
    sleeper.kill()
    sleeper.wait()


def record(
    run_dir: Path, pid: int, *, status: str = "running", host: str = "", started: float = 0
) -> dict[str, Any]:
    """A results.json as a run writes it when it starts, naming its process."""
    started_at = datetime.fromtimestamp(started or time.time(), timezone.utc)
    (run_dir / "results.json").write_text(
        json.dumps(
            {
                "status": status,
                "started_at": started_at.isoformat(timespec="seconds"),
                "process": {"host": host or socket.gethostname(), "pid": pid},
            }
        )
    )
    return json.loads((run_dir / "results.json").read_text())


def test_a_resume_beside_the_process_still_training_is_refused(
    process: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    record(tmp_path, process.pid)
    with pytest.raises(ExperimentError) as refused:
        refuse_if_running(str(tmp_path))
    host = socket.gethostname()
    assert str(refused.value) == (
        f"resume={tmp_path} is still training: its process {process.pid} on this host ({host}) "
        f"is running; wait for it to end, or stop it (kill {process.pid}) and resume then"
    )


def test_a_run_whose_process_ended_is_resumed(
    process: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    process.kill()
    process.wait()
    results = record(tmp_path, process.pid)
    assert alive_here(results) is False
    refuse_if_running(str(tmp_path))  # accepted: nothing raised


def test_a_process_that_ended_recording_its_run_is_not_asked(
    process: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    # Interrupted, failed or completed: its process said so on its way out.
    record(tmp_path, process.pid, status="failed")
    refuse_if_running(str(tmp_path))


def test_a_pid_taken_by_a_later_process_is_not_the_run(
    process: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    # The run was killed long ago; the system has given its pid to a process started since.
    results = record(tmp_path, process.pid, started=time.time() - 3600)
    assert alive_here(results) is False
    refuse_if_running(str(tmp_path))


def test_a_process_on_another_host_cannot_be_told(
    process: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    results = record(tmp_path, process.pid, host="another-host")
    assert alive_here(results) is None
    refuse_if_running(str(tmp_path))  # killed there perhaps: the user knows


def test_a_pid_no_process_can_have_is_no_process(tmp_path: Path) -> None:
    assert alive_here(record(tmp_path, 2**70)) is False  # a results.json from elsewhere


def test_a_results_json_that_links_to_a_device_is_refused_unread(tmp_path: Path) -> None:
    """Read to its end, /dev/zero would fill the memory of the resume or the report reading it."""
    (tmp_path / "results.json").symlink_to("/dev/zero")
    with pytest.raises(ExperimentError) as refused:
        refuse_if_running(str(tmp_path))
    assert str(refused.value).startswith(
        f"{tmp_path / 'results.json'} is not a regular file (a character device); "
    )
