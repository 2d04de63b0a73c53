"""The real two-node SLURM cluster the SLURM tests run against (tests/slurm_cluster.py): a job
of two tasks runs one on each node, as on a cluster of two machines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT, SMALL


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


@pytest.mark.slow
def test_a_run_in_a_slurm_job_records_the_job(
    slurm_cluster: dict[str, str], tmp_path: Path
) -> None:
    ran = subprocess.run(
        ["srun", "-N", "1", "-n", "1", "-w", "n2", sys.executable, str(ROOT / "train.py"), *SMALL],
        cwd=tmp_path,
        env={**os.environ, **slurm_cluster},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    (recorded,) = tmp_path.glob("outputs/*/*/environment.json")
    cluster = json.loads(recorded.read_text())["cluster"]
    assert cluster.pop("job_id").isdigit()
    assert cluster == {
        "partition": "debug",
        "nodes": "n2",
        "node_count": "1",
        "tasks": "1",
        "node": "n2",
    }
