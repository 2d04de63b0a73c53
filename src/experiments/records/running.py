"""Whether a run folder's process is still training it, and the lock of the process writing it."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from experiments.core.errors import ExperimentError
from experiments.core.files import RECORD, UnreadableFile, as_json, read_data, try_process_lock

# started_at is written to the second, after the process started: it cannot start later than that.
CLOCK_SLACK_SECONDS = 1.0


def read_results(run_dir: Path) -> dict[str, Any]:
    """The run's results.json, or {} where none can be read (a special or huge one is refused)."""
    try:
        results = read_data(run_dir / "results.json", RECORD, as_json)
    except UnreadableFile:
        return {}
    return results if isinstance(results, dict) else {}


def refuse_if_running(run: str) -> None:
    results = read_results(Path(run))
    if results.get("status") != "running" or not alive_here(results):
        return
    pid = results["process"]["pid"]
    raise ExperimentError(
        f"resume={run} is still training: its process {pid} on this host ({socket.gethostname()})"
        f" is running; wait for it to end, or stop it (kill {pid}) and resume then"
    )


LOCK = ".lock"


@contextmanager
def sole_writer(run_dir: Path, resume: str | None) -> Iterator[None]:
    """Lock the run folder's `.lock` while writing it: of two `resume=` at once, one is refused."""
    path = run_dir / LOCK
    if path.is_dir():  # (opening it would say only "Is a directory")
        what = f"resume={resume}: its {LOCK}" if resume else str(path)
        raise ExperimentError(
            f"{what} is a folder, where the run's lock file belongs (the process writing the run "
            "folder locks it); move the folder away, and run the command again"
        )
    lock = try_process_lock(path)
    if lock is None:
        what = f"resume={resume}" if resume else f"the run folder {run_dir}"
        raise ExperimentError(
            f"{what} is being written by another process (a resume started at the same time?); "
            "wait for it to end, then resume if it did not finish"
        )
    try:
        yield
    finally:
        os.close(lock)  # and with it the lock


def alive_here(results: dict[str, Any]) -> bool | None:
    """Whether the process a run's results.json names is alive; None when it ran on another host."""
    process = results.get("process") or {}
    if process.get("host") != socket.gethostname():
        return None
    try:
        os.kill(process["pid"], 0)
    except (ProcessLookupError, OverflowError):  # (no pid that large: a file from elsewhere)
        return False
    except PermissionError:
        pass  # alive, owned by someone else
    started = _start_time(process["pid"])
    recorded_at = results.get("started_at")
    if started is None or recorded_at is None:
        return True
    return started <= datetime.fromisoformat(recorded_at).timestamp() + CLOCK_SLACK_SECONDS


def _start_time(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        boot = next(
            float(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime ")
        )
    except (OSError, StopIteration):
        return None
    # starttime, field 22 of proc(5), in clock ticks after boot; fields[0] is field 3.
    return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
