"""What SLURM's variables say of an srun step's tasks, for a process group formed without
torchrun; pure, without torch."""

from __future__ import annotations

import re

# The ports a step's rendezvous may take: above the well-known and registered ones most
# services use, below Linux's ephemeral range (32768 on), where connections take theirs.
FIRST_PORT = 15000
PORTS = 17000


def first_host(nodelist: str) -> str:
    """The first host of a SLURM host list: "n[1-2],gpu07" -> "n1", "gpu[07-09]" -> "gpu07"."""
    depth, end = 0, len(nodelist)
    for position, letter in enumerate(nodelist):
        depth += {"[": 1, "]": -1}.get(letter, 0)
        if letter == "," and depth == 0:
            end = position
            break
    first = nodelist[:end]
    bracket = re.fullmatch(r"([^\[]*)\[([^\]]*)\](.*)", first)
    if bracket is None:
        return first
    prefix, ranges, suffix = bracket.groups()
    return f"{prefix}{re.split(r'[-,]', ranges)[0]}{suffix}"


def tasks_per_node(counts: str) -> list[int]:
    """SLURM's tasks on each node: "2(x3),1" -> [2, 2, 2, 1]."""
    tasks: list[int] = []
    for part in counts.split(","):
        count, _, times = part.partition("(x")
        tasks += [int(count)] * int(times.rstrip(")") or 1)
    return tasks


def rendezvous_port(job_id: str, step_id: str) -> int:
    """The port a step's process 0 listens on, the same in every task, apart from the ports
    other jobs' steps take (as far as their ids differ in `PORTS`)."""
    step = int(step_id) if step_id.isdigit() else 0  # "batch", "extern": not an srun step
    return FIRST_PORT + (int(job_id) * 8 + step) % PORTS
