"""hydra/launcher=slurm: each job asks SLURM for what it needs, checked against the partition
before anything is submitted (the partitions here are given; tests/cluster runs real jobs)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from experiments.cli.slurm_launcher import NO_SLURM
from experiments.cli.slurm_partition import JobRequest, Partition, gpus_in, minutes, refusal
from helpers import SMALL, train_cli

SMALL_NODES = Partition("debug", nodes=2, cpus=4, memory_mb=8000, gpus=0, time_limit_min=120)
GPU_NODES = Partition("gpu", nodes=4, cpus=64, memory_mb=512000, gpus=8, time_limit_min=None)


def job(**asked: object) -> JobRequest:
    fields: dict = dict(
        nodes=1,
        tasks_per_node=1,
        cpus_per_task=2,
        gpus_per_node=0,
        mem_gb=None,
        timeout_min=60,
        gpus_for="device=cpu",
    )
    return JobRequest(**{**fields, **asked})


def test_a_job_the_partition_can_run_is_not_refused() -> None:
    assert refusal(job(), SMALL_NODES) is None
    assert refusal(job(nodes=4, tasks_per_node=8, gpus_per_node=8, mem_gb=400), GPU_NODES) is None
    assert str(job()) == "1 node x 1 task, 2 CPUs per task, no GPU, the cluster's memory, 60 min"


@pytest.mark.parametrize(
    ("asked", "said"),
    [
        ({"nodes": 3}, "hydra.launcher.nodes=3: partition debug has 2 nodes"),
        (
            {"gpus_per_node": 1, "gpus_for": "device=cuda"},
            "device=cuda asks 1 GPU(s) per node, but partition debug's nodes have no GPUs; "
            "use device=cpu",
        ),
        (
            {"gpus_per_node": 1, "gpus_for": "hydra.launcher.gpus_per_node=1"},
            "hydra.launcher.gpus_per_node=1 asks 1 GPU(s) per node, but partition debug's "
            "nodes have no GPUs",
        ),
        (
            {"cpus_per_task": 3, "tasks_per_node": 2},
            "hydra.launcher.cpus_per_task=3 x tasks_per_node=2 asks 6 CPUs per node, but "
            "partition debug's nodes have at most 4",
        ),
        (
            {"mem_gb": 16},
            "hydra.launcher.mem_gb=16, but partition debug's nodes have at most 7.8 GB "
            "(null: the cluster's default)",
        ),
        (
            {"timeout_min": 180},
            "hydra.launcher.timeout_min=180, but partition debug's time limit is 120 min",
        ),
    ],
)
def test_a_job_no_node_can_run_is_refused_naming_the_setting(
    asked: dict[str, object], said: str
) -> None:
    assert refusal(job(**asked), SMALL_NODES) == said


def test_sinfos_gres_and_time_limits_are_read() -> None:
    assert gpus_in("(null)") == 0
    assert gpus_in("gpu:4") == 4
    assert gpus_in("gpu:a100:8(S:0-1),shard:a100:4") == 8
    assert gpus_in("gpu:a100:2,gpu:v100:2") == 4
    assert [minutes(limit) for limit in ("infinite", "30", "30:00", "2:00:00", "1-12:00:00")] == [
        None,
        30,
        30,
        120,
        36 * 60,
    ]
    assert minutes("2-06") == 54 * 60  # days-hours


@pytest.mark.slow
def test_the_slurm_launcher_says_in_one_line_where_there_is_no_slurm(tmp_path: Path) -> None:
    """A machine whose PATH holds no SLURM command, whether or not this one has SLURM."""
    no_slurm = {"PATH": str(Path(sys.executable).parent)}
    done = train_cli(tmp_path, "-m", "hydra/launcher=slurm", *SMALL, env=no_slurm)
    assert done.returncode == 1
    assert done.last_line == f"Error: {NO_SLURM}"
    assert "Traceback" not in done.stderr
    assert not list((tmp_path / "outputs").rglob(".hydra"))  # no job started
