"""This process's place among those training one model together, from torchrun's env; no torch."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class ProcessGroup:
    """The processes that train one model together, seen from one of them (alone: rank 0 of 1)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1
    torchrun: bool = False  # even as its only process

    @classmethod
    def from_env(cls) -> ProcessGroup:
        env = os.environ
        if "WORLD_SIZE" not in env:
            return cls()
        return cls(
            int(env["RANK"]),
            int(env["WORLD_SIZE"]),
            int(env.get("LOCAL_RANK", 0)),
            int(env.get("LOCAL_WORLD_SIZE", env["WORLD_SIZE"])),
            torchrun=True,
        )

    @property
    def is_main(self) -> bool:
        """The process that writes the run's records."""
        return self.rank == 0


ONE_PROCESS = ProcessGroup()
