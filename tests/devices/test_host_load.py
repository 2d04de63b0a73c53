"""The host's load: /proc's text read, the run's own processes told from the others, and the
verdict on known numbers (a quiet host cannot be had on a machine shared with other tests)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from experiments.devices.measuring import host_load
from experiments.devices.measuring.host_load import HostLoad, Snapshot

# /proc/stat as Linux writes it (two CPUs): user nice system idle iowait irq softirq steal guest
# guest_nice, in clock ticks.
PROC_STAT = """\
cpu  973453 0 110118 430758 6518 0 1114 2028 0 0
cpu0 441657 0 48583 268362 1655 0 582 1008 0 0
cpu1 531796 5 61535 162395 4863 7 532 1019 40 0
intr 4365168 0 0 0 0 0 0 0 0 0
ctxt 4318323
btime 1795560000
"""


def test_the_busy_ticks_of_the_cores_asked_for_are_read_from_proc_stat() -> None:
    # cpu1: user, nice, system, irq, softirq, steal are work; idle and iowait are not; guest is
    # in user already.
    busy = 531796 + 5 + 61535 + 7 + 532 + 1019
    assert host_load.cpu_ticks(PROC_STAT, {1}) == (busy, busy + 162395 + 4863)
    both, _ = host_load.cpu_ticks(PROC_STAT, {0, 1})
    assert both == busy + 441657 + 48583 + 582 + 1008
    assert host_load.cpu_ticks(PROC_STAT, {7}) == (0, 0)  # not on this machine


def test_a_process_s_ticks_are_read_past_a_name_with_spaces_and_parentheses() -> None:
    # pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime
    # stime cutime cstime ...
    line = "4242 (py (worker) 1) R 4200 4200 21911 0 -1 4194304 102 0 0 0 150 30 7 3 20 0 1 0"
    assert host_load.process_ticks(line) == (4242, 4200, 150 + 30 + 7 + 3)


def test_the_run_s_ticks_are_its_process_and_everything_below_it() -> None:
    processes = [(10, 1, 100), (11, 10, 20), (12, 11, 3), (13, 1, 999), (14, 13, 50)]
    assert host_load.tree_ticks(processes, 10) == 123  # not 13's, a sibling, nor its child
    assert host_load.tree_ticks(processes, 99) == 0  # gone


def test_a_child_s_work_is_the_run_s_own() -> None:
    """inductor's compile workers, a child busy for the run, are not "other work"."""
    cpus = host_load.cores()
    start = host_load.snapshot(os.getpid(), cpus)
    assert start is not None  # Linux, where these tests run
    child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)
        end = host_load.snapshot(os.getpid(), cpus)
    finally:
        child.kill()
        child.wait()
    assert end is not None
    assert end.own - start.own >= 10  # at least 0.1 s of the child's CPU (100 ticks a second)


def test_other_work_on_the_run_s_cores_makes_it_busy() -> None:
    start = Snapshot(busy=1_000, total=10_000, own=500)
    # 2 cores for 1 s (200 ticks), all busy: 100 of them the run's, 100 another process's.
    busy = host_load.between(start, Snapshot(busy=1_200, total=10_200, own=600), 2, 2)
    assert busy == HostLoad(other_cpu_share=0.5, cores=2, busy=True)
    assert busy.other_cores == 1.0
    assert busy.text() == "host busy: other processes used 50% of its 2 cores"


def test_a_quiet_host_and_work_on_the_cores_the_run_leaves_free_are_not_busy() -> None:
    start = Snapshot(busy=1_000, total=10_000, own=500)
    # 2 cores for 1 s: the run's 190 ticks, 6 of a shell and a logger (3%).
    quiet = host_load.between(start, Snapshot(busy=1_196, total=10_200, own=690), 2, 2)
    assert quiet.other_cpu_share == pytest.approx(0.03) and not quiet.busy
    # A run of 1 thread on 2 cores leaves one to others: a process busy on it takes nothing.
    beside = host_load.between(start, Snapshot(busy=1_200, total=10_200, own=600), 2, 1)
    assert beside.other_cpu_share == 0.5 and not beside.busy
    # Two such processes take half of the run's core.
    two = host_load.between(start, Snapshot(busy=1_200, total=10_200, own=550), 2, 1)
    assert two.busy


def test_a_span_too_short_for_proc_s_clock_is_not_judged() -> None:
    start = Snapshot(busy=1_000, total=10_000, own=500)
    # 2 cores for 0.2 s: 40 ticks, 8 of them others', 20% give or take 5%.
    assert host_load.between(start, Snapshot(busy=1_030, total=10_040, own=522), 2, 2) is None


TRAINER = "trainer.threads"


def test_threads_above_the_cores_left_free_are_said() -> None:
    load = HostLoad(other_cpu_share=0.35, cores=2, busy=True)  # others keep 0.7 cores busy
    assert host_load.free_cores(load) == 1
    assert host_load.threads_above_free_cores(2, load, TRAINER) == (
        "trainer.threads=2 is more than the 1 core(s) other processes left free for this run "
        "(they kept 0.7 of its 2 cores busy while it set up): its speed will read low; use "
        "trainer.threads=1 or fewer, or a quieter machine"
    )
    assert host_load.threads_above_free_cores(1, load, TRAINER) is None
    # Unset, torch's default (a thread per core) is as many threads: said, with what to set.
    assert host_load.threads_above_free_cores(2, load, TRAINER, typed=False) == (
        "trainer.threads is unset, so torch computes in 2 threads, more than the 1 core(s) other "
        "processes left free for this run (they kept 0.7 of its 2 cores busy while it set up): "
        "its speed will read low; use trainer.threads=1 or fewer, or a quieter machine"
    )
    assert host_load.free_cores(HostLoad(1.0, 2, True)) == 1  # never none
    quiet = HostLoad(0.02, 2, False)
    assert host_load.threads_above_free_cores(2, quiet, TRAINER) is None
    assert host_load.threads_above_free_cores(3, quiet, TRAINER) is not None  # more than there are
    # eval.py's benchmark says it in its own key.
    assert host_load.threads_above_free_cores(2, load, "threads", typed=False) == (
        "threads is unset, so torch computes in 2 threads, more than the 1 core(s) other "
        "processes left free for this run (they kept 0.7 of its 2 cores busy while it set up): "
        "its speed will read low; use threads=1 or fewer, or a quieter machine"
    )


def test_without_proc_the_load_is_not_known(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(host_load, "PROC", tmp_path)  # a system without Linux's /proc
    assert host_load.snapshot(os.getpid(), {0}) is None
