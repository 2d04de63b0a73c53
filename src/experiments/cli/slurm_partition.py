"""A SLURM partition's nodes as `sinfo` tells them, and a job's request checked against them
before it is submitted: a job no node can take would wait in the queue for good."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass

from experiments.core.errors import ExperimentError

SINFO_SECONDS = 30


@dataclass(frozen=True)
class Partition:
    name: str
    nodes: int
    cpus: int  # the most any of its nodes has
    memory_mb: int
    gpus: int
    time_limit_min: int | None  # None: no limit


@dataclass(frozen=True)
class JobRequest:
    """What one SLURM job of the sweep asks for, as submitit will ask sbatch."""

    nodes: int
    tasks_per_node: int
    cpus_per_task: int | None
    gpus_per_node: int
    mem_gb: float | None
    timeout_min: int
    gpus_for: str  # who asked for the GPUs: "hydra.launcher.gpus_per_node", "device=cuda"

    def __str__(self) -> str:
        """As "1 node x 1 task, 2 CPUs and no GPU per task, the cluster's memory, 60 min"."""
        gpus = f"{self.gpus_per_node} GPU(s) per node" if self.gpus_per_node else "no GPU"
        memory = "the cluster's memory" if self.mem_gb is None else f"{self.mem_gb:g} GB"
        return (
            f"{_count(self.nodes, 'node')} x {_count(self.tasks_per_node, 'task')}, "
            f"{_count(self.cpus_per_task or 1, 'CPU')} per task, {gpus}, {memory}, "
            f"{self.timeout_min} min"
        )


def read_partition(name: str | None) -> Partition | None:
    """Partition `name` (None: the cluster's default), or None where sinfo cannot say."""
    listed = _sinfo("-o", "%P|%l")
    if listed is None:
        return None
    limits = dict(line.split("|") for line in listed)
    default = next((each for each in limits if each.endswith("*")), None)
    wanted = name or (default and default.rstrip("*"))
    known = {each.rstrip("*"): limit for each, limit in limits.items()}
    if wanted is None:
        return None
    if wanted not in known:
        raise ExperimentError(
            f"hydra.launcher.partition={wanted}: this cluster has no such partition; it has "
            f"{', '.join(sorted(known))}"
        )
    nodes = _sinfo("-N", "-p", wanted, "-o", "%N|%c|%m|%G") or []
    rows = {row.split("|")[0]: row.split("|")[1:] for row in nodes}
    return Partition(
        wanted,
        nodes=len(rows),
        cpus=max((_leading_int(cpus) for cpus, _, _ in rows.values()), default=0),
        memory_mb=max((_leading_int(memory) for _, memory, _ in rows.values()), default=0),
        gpus=max((gpus_in(gres) for _, _, gres in rows.values()), default=0),
        time_limit_min=minutes(known[wanted]),
    )


def refusal(job: JobRequest, partition: Partition) -> str | None:
    """Why no node of `partition` can run `job`, naming the setting; None where one can."""
    name = partition.name
    if job.nodes > partition.nodes:
        return f"hydra.launcher.nodes={job.nodes}: partition {name} has {partition.nodes} nodes"
    if job.gpus_per_node > partition.gpus:
        has = f"at most {partition.gpus}" if partition.gpus else "no"
        advice = "; use device=cpu" if job.gpus_for.startswith("device=") else ""
        return (
            f"{job.gpus_for} asks {job.gpus_per_node} GPU(s) per node, but partition {name}'s "
            f"nodes have {has} GPUs{advice}"
        )
    cpus = (job.cpus_per_task or 1) * job.tasks_per_node
    if cpus > partition.cpus:
        return (
            f"hydra.launcher.cpus_per_task={job.cpus_per_task} x tasks_per_node="
            f"{job.tasks_per_node} asks {cpus} CPUs per node, but partition {name}'s nodes "
            f"have at most {partition.cpus}"
        )
    if job.mem_gb is not None and job.mem_gb * 1024 > partition.memory_mb:
        return (
            f"hydra.launcher.mem_gb={job.mem_gb:g}, but partition {name}'s nodes have at most "
            f"{partition.memory_mb / 1024:.1f} GB (null: the cluster's default)"
        )
    limit = partition.time_limit_min
    if limit is not None and job.timeout_min > limit:
        return (
            f"hydra.launcher.timeout_min={job.timeout_min}, but partition {name}'s time limit "
            f"is {limit} min"
        )
    return None


def gpus_in(gres: str) -> int:
    """The GPUs in sinfo's gres, as "gpu:4", "gpu:a100:8(S:0-1),shard:4" or "(null)"."""
    found = re.findall(r"(?:^|,)gpu(?::[^:,(]+)?:(\d+)", gres)
    return sum(int(count) for count in found)


def minutes(limit: str) -> int | None:
    """sinfo's time limit ("infinite", "30:00", "2:00:00", "1-12:00:00") in whole minutes."""
    if limit in ("infinite", "n/a", "UNLIMITED"):
        return None
    days, dash, clock = limit.rpartition("-")
    parts = [int(part) for part in clock.split(":")]
    if dash:  # days-hours[:minutes[:seconds]]
        hours, mins = parts[0], parts[1] if len(parts) > 1 else 0
    else:  # minutes, minutes:seconds, or hours:minutes:seconds
        hours, mins = (parts[0], parts[1]) if len(parts) == 3 else (0, parts[0])
    return int(days or 0) * 24 * 60 + hours * 60 + mins


def _count(number: int, thing: str) -> str:
    return f"{number} {thing}{'' if number == 1 else 's'}"


def _leading_int(text: str) -> int:
    digits = re.match(r"\d+", text)
    return int(digits.group()) if digits else 0


def _sinfo(*arguments: str) -> list[str] | None:
    try:
        done = subprocess.run(
            ["sinfo", "-h", *arguments], capture_output=True, text=True, timeout=SINFO_SECONDS
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return [line for line in done.stdout.splitlines() if line.strip()]
