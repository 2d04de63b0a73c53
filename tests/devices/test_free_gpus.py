"""GPUs handed out to a sweep's parallel jobs: never one to two at once, freed when a job dies."""

from __future__ import annotations

import fcntl
import threading
import time
from pathlib import Path

from experiments.devices.free_gpus import GPU_LOCKS, FreeGpus, this_machines_gpu_locks


def test_free_gpus_never_hands_one_gpu_to_two_running_jobs(tmp_path: Path) -> None:
    with FreeGpus(tmp_path) as first, FreeGpus(tmp_path) as second:
        assert (first.take(2), second.take(2)) == (0, 1)
        # A third job waits until one of them ends; then it takes that GPU.
        third = FreeGpus(tmp_path, poll_seconds=0.05)
        taken: list[int] = []
        waiting = threading.Thread(target=lambda: taken.append(third.take(2)))
        waiting.start()
        time.sleep(0.3)
        assert taken == []
        second.__exit__(None, None, None)
        waiting.join(timeout=10)
        assert taken == [1]
        third.__exit__(None, None, None)


def test_a_gpu_held_by_a_job_that_died_comes_free(tmp_path: Path) -> None:
    # The lock is the system's: closing the file (as a dying process does) releases it.
    lock = open(tmp_path / "0.lock", "w")  # noqa: SIM115
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    with FreeGpus(tmp_path) as job:
        assert job.take(2) == 1
    lock.close()
    with FreeGpus(tmp_path) as job:
        assert job.take(2) == 0


def test_gpus_are_locked_by_the_machines_names_for_them(tmp_path: Path) -> None:
    # Two sweeps whose jobs see other GPUs of the machine (CUDA_VISIBLE_DEVICES=2,3 and 3) lock
    # GPU 3 by one name: a job of the second waits while one of the first computes on it.
    with FreeGpus(tmp_path, visible="2,3") as first:
        assert first.take(2) == 0 and first.lock_name(1) == "3.lock"
        first.hold([1])
        second = FreeGpus(tmp_path, visible="3")
        assert not second._locked([0])
    assert second._locked([0])
    second.__exit__(None, None, None)


def test_this_machines_locks_are_shared_by_all_its_users(tmp_path: Path) -> None:
    assert this_machines_gpu_locks({GPU_LOCKS: str(tmp_path)}) == tmp_path
    shared = this_machines_gpu_locks({})
    assert shared.is_dir() and shared.stat().st_mode & 0o1777 == 0o1777
