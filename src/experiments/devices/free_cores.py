"""Cores handed out to the jobs of one sweep that run side by side (hydra/launcher=joblib), so
that no job's speed is measured on cores another job computes on."""

from __future__ import annotations

import itertools
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from experiments.core.files import try_lock

SHARED = "the jobs' speeds will be compared on shared cores"


@dataclass(frozen=True)
class CoreShare:
    """A job's own cores, and the threads torch computes in (None: as the user set them)."""

    cpus: tuple[int, ...]
    threads: int | None
    jobs: int  # side by side, each with a share as large

    def __str__(self) -> str:
        threads = "" if self.threads is None else f" ({self.threads} thread(s))"
        return (
            f"cores: {cpu_list(self.cpus)}{threads}, this job's own: one of {self.jobs} equal "
            "shares for the jobs side by side"
        )


def share_of_cores(
    available: Collection[int],
    jobs: int | None,
    slot: int | None,
    threads: int | None,
    *,
    can_pin: bool = True,
    threads_key: str = "trainer.threads",
) -> CoreShare | str | None:
    """Job `slot`'s equal share of the `available` cores among `jobs` side by side, its threads
    one a core unless the user set them (`threads`); the one-line notice where it can have none;
    None for a job alone, whose cores are all its own."""
    if jobs == 1:
        return None
    if jobs is None:
        return (
            f"cores: the launcher does not say how many of this sweep's jobs run at once; {SHARED}"
        )
    if not can_pin:
        return f"cores: this platform cannot keep a process to cores (sched_setaffinity); {SHARED}"
    if len(available) < jobs:
        return (
            f"cores: {jobs} jobs run side by side on {len(available)} core(s), too few for one "
            f"each; {SHARED} (run at most {len(available)} at once for cores of their own)"
        )
    if slot is None:
        return f"cores: this sweep's other jobs hold all {jobs} shares of the cores; {SHARED}"
    each = len(available) // jobs
    if threads is not None and threads > each:
        return (
            f"cores: {threads_key}={threads} is more than the {each} core(s) that each of {jobs} "
            f"jobs side by side can have of the {len(available)} here; {SHARED} "
            f"({threads_key}={each} or unset gives each its own)"
        )
    cpus = tuple(sorted(available)[slot * each : (slot + 1) * each])
    return CoreShare(cpus, each if threads is None else None, jobs)


def cpu_list(cpus: Collection[int]) -> str:
    """`0-3,8`: the CPUs' ids, runs of consecutive ones as ranges, as Linux's cpu lists are."""
    runs = itertools.groupby(enumerate(sorted(cpus)), lambda place: place[1] - place[0])
    spans = [[cpu for _, cpu in run] for _, run in runs]
    return ",".join(str(span[0]) if len(span) == 1 else f"{span[0]}-{span[-1]}" for span in spans)


class FreeCores:
    """A job holds its share of the cores, a slot, by a lock file in the sweep folder, released
    even if it dies."""

    def __init__(self, sweep_dir: Path) -> None:
        self.folder = sweep_dir / ".cores"
        self._held: IO[str] | None = None

    def __enter__(self) -> FreeCores:
        return self

    def __exit__(self, *exception: object) -> None:
        if self._held is not None:
            self._held.close()  # releases it
            self._held = None

    def take(self, slots: int) -> int | None:
        """The first of `slots` that no other running job holds, held from now on; None if all
        are (more jobs run at once than the launcher said)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        for slot in range(slots):
            if (lock := try_lock(self.folder / f"{slot}.lock")) is not None:
                self._held = lock
                return slot
        return None
