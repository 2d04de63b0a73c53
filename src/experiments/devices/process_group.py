"""This process's place among those training one model together, from torchrun's or an srun
step's variables; no torch."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from experiments.devices import slurm

# What started the processes: torchrun (its agent keeps the store), or srun (process 0 does).
TORCHRUN = "torchrun"
SRUN = "srun"


@dataclass(frozen=True)
class ProcessGroup:
    """The processes that train one model together, seen from one of them (alone: rank 0 of 1)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1
    launcher: str | None = None  # TORCHRUN or SRUN, even for a single process
    # Where the processes meet (srun's: process 0 listens there; torchrun's agent keeps its own).
    store_host: str = ""
    store_port: int = 0

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> ProcessGroup:
        if "WORLD_SIZE" in env:  # torchrun's (inside an srun step too: torchrun's group wins)
            return cls(
                int(env["RANK"]),
                int(env["WORLD_SIZE"]),
                int(env.get("LOCAL_RANK", 0)),
                int(env.get("LOCAL_WORLD_SIZE", env["WORLD_SIZE"])),
                launcher=TORCHRUN,
            )
        if "SLURM_STEP_NUM_TASKS" in env and "SLURM_PROCID" in env:  # a task of an srun step
            return cls._of_srun_step(env)
        return cls()

    @classmethod
    def _of_srun_step(cls, env: Mapping[str, str]) -> ProcessGroup:
        """Its task: rendezvous on the step's first node, on a port of the job and step."""
        on_each_node = slurm.tasks_per_node(env.get("SLURM_STEP_TASKS_PER_NODE", "1"))
        node = min(int(env.get("SLURM_NODEID", 0)), len(on_each_node) - 1)
        nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST", "localhost")
        port = env.get("MASTER_PORT") or slurm.rendezvous_port(
            env.get("SLURM_JOB_ID", "0"), env.get("SLURM_STEP_ID", "0")
        )
        return cls(
            int(env["SLURM_PROCID"]),
            int(env["SLURM_STEP_NUM_TASKS"]),
            int(env.get("SLURM_LOCALID", 0)),
            on_each_node[node],
            launcher=SRUN,
            store_host=env.get("MASTER_ADDR") or slurm.first_host(nodelist),
            store_port=int(port),
        )

    @property
    def is_main(self) -> bool:
        """The process that writes the run's records."""
        return self.rank == 0

    @property
    def processes(self) -> str:
        """What started them, in words: "torchrun started 2 processes", "srun started 2 tasks"."""
        started = "processes" if self.launcher == TORCHRUN else "tasks"
        return f"{self.launcher} started {self.world_size} {started}"


ONE_PROCESS = ProcessGroup()
