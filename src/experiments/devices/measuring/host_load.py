"""Whether other work took a run's CPU cores: their busy ticks in /proc less its own processes'."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
# /proc/stat's busy fields: user, nice, system, irq, softirq, steal (guest is in user and nice).
BUSY_FIELDS = (0, 1, 2, 5, 6, 7)
COUNTED_FIELDS = 8  # the fields summed for the total: the above, idle and iowait
# The share of the run's cores others may take before it is busy: a tenth slows it by as much.
BUSY_SHARE = 0.10
# The fewest ticks (hundredths of a second) a span needs to be judged: each snapshot is one off.
FEWEST_TICKS = 50


@dataclass(frozen=True)
class Snapshot:
    """Clock ticks so far: the busy and all ticks of the run's cores, and the run's own."""

    busy: int
    total: int
    own: int


@dataclass(frozen=True)
class HostLoad:
    other_cpu_share: float  # of the run's cores' time, taken by other processes
    cores: int  # the cores the run could use
    busy: bool  # enough to slow the run (BUSY_SHARE)

    @property
    def other_cores(self) -> float:
        return self.other_cpu_share * self.cores

    def text(self) -> str:
        return (
            f"host busy: other processes used {self.other_cpu_share:.0%} of its {self.cores} "
            f"core{'s' if self.cores > 1 else ''}"
        )


def cpu_ticks(proc_stat: str, cpus: Iterable[int]) -> tuple[int, int]:
    """The busy and all ticks of `cpus`, from /proc/stat's text."""
    wanted = {f"cpu{cpu}" for cpu in cpus}
    busy = total = 0
    for line in proc_stat.splitlines():
        name, *fields = line.split()
        if name in wanted:
            ticks = [int(field) for field in fields[:COUNTED_FIELDS]]
            busy += sum(ticks[field] for field in BUSY_FIELDS if field < len(ticks))
            total += sum(ticks)
    return busy, total


def process_ticks(proc_pid_stat: str) -> tuple[int, int, int]:
    """(pid, ppid, ticks of its own and of the children it waited for) from /proc/PID/stat."""
    pid = int(proc_pid_stat.split(" ", 1)[0])
    fields = proc_pid_stat.rpartition(")")[2].split()
    # After the name, which may hold spaces and ")": state, ppid, ..., utime to cstime (14-17).
    return pid, int(fields[1]), sum(int(ticks) for ticks in fields[11:15])


def tree_ticks(processes: Iterable[tuple[int, int, int]], root: int) -> int:
    """The ticks of process `root` and of every process below it, of (pid, ppid, ticks)."""
    children: dict[int, list[int]] = {}
    ticks: dict[int, int] = {}
    for pid, parent, own in processes:
        children.setdefault(parent, []).append(pid)
        ticks[pid] = own
    total, waiting = 0, [root]
    while waiting:
        pid = waiting.pop()
        total += ticks.get(pid, 0)
        waiting += children.get(pid, [])
    return total


def between(start: Snapshot, end: Snapshot, cores: int, threads: int) -> HostLoad | None:
    """The other work on a run's `cores` in `threads` threads (None: too short a span to tell)."""
    total = end.total - start.total
    if total < FEWEST_TICKS:
        return None
    other = max(end.busy - start.busy - (end.own - start.own), 0)
    share = min(other / total, 1.0)
    used = min(threads, cores)
    taken = max(share * cores - (cores - used), 0.0)  # from the cores the run computes on
    return HostLoad(share, cores, busy=taken > BUSY_SHARE * used)


def since(started: Snapshot | None, root: int, cpus: set[int], threads: int) -> HostLoad | None:
    """The load on `cpus` from `started` until now (None: unknown, or too short to tell)."""
    now = snapshot(root, cpus)
    if started is None or now is None:
        return None
    return between(started, now, len(cpus), threads)


def free_cores(load: HostLoad) -> int:
    """The run's cores that other work left free, to the nearest whole one (at least one)."""
    return max(round(load.cores - load.other_cores), 1)


def threads_above_free_cores(
    threads: int, load: HostLoad, key: str, typed: bool = True
) -> str | None:
    """The warning for `threads` (`typed`: as `key`, trainer.threads or eval.py's threads, set
    it) above the cores `load` left free."""
    free = free_cores(load)
    if threads <= free:
        return None
    asked = (
        f"{key}={threads} is"
        if typed
        else f"{key} is unset, so torch computes in {threads} threads,"
    )
    return (
        f"{asked} more than the {free} core(s) other processes left free for this run (they "
        f"kept {load.other_cores:.1f} of its {load.cores} cores busy while it set up): its speed "
        f"will read low; use {key}={free} or fewer, or a quieter machine"
    )


def run_root() -> int:
    """The process the run's own processes descend from: torchrun's, else this one."""
    return os.getppid() if "TORCHELASTIC_RUN_ID" in os.environ else os.getpid()


def cores() -> set[int]:
    return os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()


def snapshot(root: int, cpus: set[int]) -> Snapshot | None:
    """The ticks so far of `cpus` and of the processes from `root` down; None without /proc."""
    try:
        busy, total = cpu_ticks((PROC / "stat").read_text(), cpus)
    except OSError:
        return None
    if not total:
        return None
    return Snapshot(busy, total, tree_ticks(_processes(), root))


def _processes() -> list[tuple[int, int, int]]:
    """(pid, ppid, ticks) of every process that can be read (one may end while it is read)."""
    found = []
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                found.append(process_ticks((entry / "stat").read_text()))
    return found
