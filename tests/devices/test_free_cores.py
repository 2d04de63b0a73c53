"""Cores shared out to a sweep's parallel jobs: an equal share each, or one line saying why not."""

from __future__ import annotations

import fcntl
from pathlib import Path

import pytest

from experiments.devices.free_cores import SHARED, CoreShare, FreeCores, cpu_list, share_of_cores

EIGHT = range(8)


@pytest.mark.parametrize(
    ("jobs", "slot", "threads", "share"),
    [
        (2, 0, None, CoreShare((0, 1, 2, 3), 4, 2)),
        (2, 1, None, CoreShare((4, 5, 6, 7), 4, 2)),
        (3, 2, None, CoreShare((4, 5), 2, 3)),  # equal shares: cores 6 and 7 go unused
        (8, 7, None, CoreShare((7,), 1, 8)),
        # trainer.threads within the share: the share's cores, torch's threads as the user set.
        (2, 1, 2, CoreShare((4, 5, 6, 7), None, 2)),
        (1, 0, None, None),  # alone: every core its own, nothing to change
    ],
)
def test_each_job_of_a_parallel_sweep_has_an_equal_share_of_its_own(
    jobs: int, slot: int, threads: int | None, share: CoreShare | None
) -> None:
    assert share_of_cores(EIGHT, jobs, slot, threads) == share


def test_shares_follow_the_cores_the_process_may_use_whatever_their_ids() -> None:
    share = share_of_cores({2, 3, 8, 9}, 2, 1, None)
    assert share == CoreShare((8, 9), 2, 2)
    assert str(share) == (
        "cores: 8-9 (2 thread(s)), this job's own: one of 2 equal shares for the jobs side by side"
    )


@pytest.mark.parametrize(
    ("available", "jobs", "slot", "threads", "can_pin", "notice"),
    [
        (range(1), 2, 0, None, True, "2 jobs run side by side on 1 core(s), too few for one each"),
        (
            EIGHT,
            2,
            0,
            6,
            True,
            "trainer.threads=6 is more than the 4 core(s) that each of 2 jobs side by side",
        ),
        (EIGHT, 2, 0, None, False, "this platform cannot keep a process to cores"),
        (EIGHT, None, None, None, True, "the launcher does not say how many of this sweep's jobs"),
        (EIGHT, 2, None, None, True, "this sweep's other jobs hold all 2 shares of the cores"),
    ],
)
def test_where_a_job_cannot_have_cores_of_its_own_one_line_says_so(
    available: range,
    jobs: int | None,
    slot: int | None,
    threads: int | None,
    can_pin: bool,
    notice: str,
) -> None:
    said = share_of_cores(available, jobs, slot, threads, can_pin=can_pin)
    assert isinstance(said, str) and "\n" not in said
    assert said.startswith(f"cores: {notice}") and SHARED in said


def test_cpu_lists_read_as_linux_writes_them() -> None:
    assert cpu_list({0, 1, 2, 3, 8, 10, 11}) == "0-3,8,10-11"


def test_no_two_running_jobs_hold_one_share_and_a_dead_jobs_comes_free(tmp_path: Path) -> None:
    with FreeCores(tmp_path) as first, FreeCores(tmp_path) as second:
        assert (first.take(2), second.take(2)) == (0, 1)
        with FreeCores(tmp_path) as third:
            assert third.take(2) is None  # more jobs than the launcher said
    # The lock is the system's: closing the file (as a dying process does) releases it.
    lock = open(tmp_path / ".cores" / "0.lock", "w")  # noqa: SIM115
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    with FreeCores(tmp_path) as job:
        assert job.take(2) == 1
    lock.close()
    with FreeCores(tmp_path) as job:
        assert job.take(2) == 0
