"""hydra/launcher=slurm on the real two-node cluster: each sweep job a SLURM job asking for what
it needs, the sweep's report at its end, and a job SLURM cannot run refused in one line."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from helpers import SMALL, train_cli

SLURM_SWEEP = ("-m", "hydra/launcher=slurm", "hydra.sweep.dir=sweep")


@pytest.mark.slow
def test_a_cpu_sweep_asks_no_gpu_and_ends_with_its_report(
    slurm_cluster: dict[str, str], tmp_path: Path
) -> None:
    done = train_cli(tmp_path, *SLURM_SWEEP, *SMALL, "model=tudui,lenet", env=slurm_cluster)
    assert done.returncode == 0, done.stderr
    said = done.stdout + done.stderr
    asked = "(1 node x 1 task, 2 CPUs per task, no GPU, the cluster's memory, 60 min)"
    assert said.count(asked) == 2
    assert "2 run(s) in" in said and "2 completed" in said
    assert (tmp_path / "sweep" / "summary.md").is_file()
    jobs = set()
    for run in ("0_model-tudui", "1_model-lenet"):
        assert json.loads((tmp_path / "sweep" / run / "results.json").read_text())["status"] == (
            "completed"
        )
        environment = json.loads((tmp_path / "sweep" / run / "environment.json").read_text())
        jobs.add(environment["cluster"]["job_id"])
    assert len(jobs) == 2  # a SLURM job each
    # The jobs were followed without SLURM's accounting, which this cluster keeps none of.
    assert "sacct" not in said and "accounting" not in said


@pytest.mark.slow
def test_a_gpu_job_on_nodes_without_gpus_is_refused_before_submitting(
    slurm_cluster: dict[str, str], tmp_path: Path
) -> None:
    overrides = [*SMALL, "device=cuda", "model=tudui,lenet"]
    done = train_cli(tmp_path, *SLURM_SWEEP, *overrides, env=slurm_cluster)
    assert done.returncode == 1
    assert done.last_line == (
        "Error: device=cuda asks 1 GPU(s) per node, but partition debug's nodes have no GPUs; "
        "use device=cpu"
    )
    assert not (tmp_path / "sweep" / ".submitit").exists()  # nothing submitted


@pytest.mark.slow
def test_a_job_sbatch_refuses_is_one_line(slurm_cluster: dict[str, str], tmp_path: Path) -> None:
    constraint = "+hydra.launcher.additional_parameters.constraint=bigmem"
    done = train_cli(tmp_path, *SLURM_SWEEP, *SMALL, constraint, env=slurm_cluster)
    assert done.returncode == 1
    assert done.last_line == (
        "Error: SLURM refused the job: Batch job submission failed: Invalid feature specification"
    )
    assert "sbatch: error" not in done.stderr
    queued = subprocess.run(
        ["squeue", "-h"],
        env={**os.environ, **slurm_cluster},
        capture_output=True,
        text=True,
        check=True,
    )
    assert queued.stdout == ""
