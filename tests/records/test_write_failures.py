"""A run that cannot write its records (a full disk, its folder deleted) ends in one line naming
the file, records `failed` where its folder is still there, and leaves no half-written file."""

from __future__ import annotations

import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from experiments.core.errors import ExperimentError
from experiments.records import environment
from experiments.records.metrics import MetricsWriter
from helpers import ROOT, SMALL, results


def _files_up_to(size: int) -> None:
    # A real write error without a full disk: past the limit, a write fails with EFBIG (Python
    # ignores SIGXFSZ). LeNet's checkpoint (about 270 kB) is the first file to cross it.
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))


@pytest.mark.slow
def test_a_full_disk_names_the_file_and_the_run_is_recorded_failed(
    tmp_path: Path,
) -> None:
    # The log on a full device too: each of its lines fails (ENOSPC), and says nothing.
    full_log = "hydra.job_logging.handlers.file.filename=/dev/full"
    done = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), *SMALL, full_log],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=lambda: _files_up_to(150_000),
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    run_dir = next((tmp_path / "outputs").rglob("results.json")).parent
    last = done.stderr.strip().splitlines()[-1]
    reason = f"could not write {run_dir.relative_to(tmp_path)}/checkpoints/last.pt: File too large"
    assert last.endswith(f"Error: {reason}")
    assert (results(run_dir)["status"], results(run_dir)["reason"]) == ("failed", reason)
    # No half-written checkpoint: on a full disk, it would hold the space results.json needs.
    assert [path.name for path in (run_dir / "checkpoints").iterdir()] == []


@pytest.mark.slow
def test_a_run_whose_folder_is_deleted_ends_in_one_line_and_is_not_made_again(
    tmp_path: Path,
) -> None:
    command = [sys.executable, str(ROOT / "train.py"), *SMALL, "trainer.epochs=50"]
    started = subprocess.Popen(
        command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 120
    # Once it writes TensorBoard's events: before, TensorBoard's writer would make the folder again.
    while not list((tmp_path / "outputs").rglob("events.out.tfevents.*")):
        assert time.monotonic() < deadline and started.poll() is None
        time.sleep(0.02)
    (run_dir,) = (path.parent for path in (tmp_path / "outputs").rglob("events.out.tfevents.*"))
    while run_dir.exists():  # again if the run wrote a file into it meanwhile
        assert time.monotonic() < deadline
        # Moved away whole first: deleted in place, its files and folders go one by one, and
        # the run could find its checkpoints/ gone while the run folder is still there.
        trash = tmp_path / f"deleted-{time.monotonic_ns()}"
        run_dir.rename(trash)
        shutil.rmtree(trash, ignore_errors=True)
    _, stderr = started.communicate(timeout=120)
    assert started.returncode == 1
    assert "Traceback" not in stderr
    assert (
        stderr.strip()
        .splitlines()[-1]
        .endswith(f"{run_dir.relative_to(tmp_path)} is gone (deleted while the run went on)")
    )
    assert not run_dir.exists()


@pytest.fixture
def unwritable(tmp_path: Path) -> Path:
    """A run folder where environment.json and metrics.jsonl cannot be written: a folder is in
    the place of each (a link to /dev/full would be replaced, not written through)."""
    for name in ("environment.json", "metrics.jsonl"):
        (tmp_path / name).mkdir()
    return tmp_path


def test_the_environment_that_cannot_be_written_is_named(unwritable: Path) -> None:
    with pytest.raises(ExperimentError) as error:
        environment.write(unwritable)
    assert str(error.value) == f"could not write {unwritable}/environment.json: Is a directory"


def test_metrics_that_cannot_be_written_are_named(unwritable: Path) -> None:
    with (
        pytest.raises(ExperimentError) as error,
        MetricsWriter(unwritable, writes=True) as metrics_writer,
    ):
        metrics_writer.step(1, 0, 1, loss=2.3, speed=100.0, lr=0.1)
    assert str(error.value) == f"could not write {unwritable}/metrics.jsonl: Is a directory"


@pytest.mark.slow
@pytest.mark.parametrize(("size", "unwritten"), [(1_000, "config.yaml"), (3_000, "hydra.yaml")])
def test_hydras_copy_of_the_config_that_cannot_be_written_is_named(
    tmp_path: Path, size: int, unwritten: str
) -> None:
    # Hydra writes .hydra/config.yaml (about 1.7 kB), then hydra.yaml (about 4 kB), before the
    # run begins; a failed write names no file.
    done = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), "hydra.run.dir=run"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=lambda: _files_up_to(size),
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"Error: could not write run/.hydra/{unwritten}, Hydra's copy of the config: File too "
        "large; raise the limit on a file's size (ulimit -f), or name another folder with "
        "hydra.run.dir= "
        "(hydra.sweep.dir= for -m)"
    ]
