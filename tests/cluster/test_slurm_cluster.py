"""The real two-node SLURM cluster the SLURM tests run against (tests/slurm_cluster.py): a job
of two tasks runs one on each node, as on a cluster of two machines."""

from __future__ import annotations

import os
import subprocess

import pytest


@pytest.mark.slow
def test_a_job_of_two_nodes_runs_a_task_on_each(slurm_cluster: dict[str, str]) -> None:
    ran = subprocess.run(
        ["srun", "-N", "2", "-n", "2", "-l", "printenv", "SLURMD_NODENAME", "SLURM_NTASKS"],
        env={**os.environ, **slurm_cluster},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr
    assert sorted(ran.stdout.splitlines()) == ["0: 2", "0: n1", "1: 2", "1: n2"]
