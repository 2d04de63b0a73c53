"""device=ddp from SLURM's own variables, without torchrun: real srun tasks on the two nodes of the
test cluster form one process group (gloo), as torchrun's processes do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.devices import process_settings
from experiments.run.train import train
from helpers import (
    FAILS_IN_PROCESS_1,
    PROCESS_1_FAILURE,
    assert_same_epochs_as_one_process,
    compose_config,
    results,
    srun_cli,
)

TINY = (
    "dataset=synthetic",
    "dataset.train_size=67",
    "dataset.test_size=8",
    "trainer.epochs=2",
    "trainer.batch_size=32",
)


@pytest.mark.slow
def test_a_task_on_each_node_trains_as_one_process(
    slurm_cluster: dict[str, str], tmp_path: Path
) -> None:
    done = srun_cli(tmp_path / "ddp", slurm_cluster, "device=ddp", "model=lenet", *TINY)
    assert done.returncode == 0, done.stderr
    with process_settings.restored():  # one process: this one
        train(compose_config("device=cpu", "model=lenet", *TINY), tmp_path / "single")

    run_dir = done.run_dir  # one folder for both tasks, written by process 0
    assert (run_dir / "train.log").read_text().count("completed:") == 1
    result = results(run_dir)
    assert (result["status"], result["world_size"], result["per_process_batch_size"]) == (
        "completed",
        2,
        16,
    )
    cluster = json.loads((run_dir / "environment.json").read_text())["cluster"]
    assert (cluster["nodes"], cluster["tasks"]) == ("n[1-2]", "2")
    assert_same_epochs_as_one_process(run_dir, tmp_path / "single", epochs=2, train_images=67)


@pytest.mark.slow
def test_a_task_that_fails_is_named_in_the_runs_record(
    slurm_cluster: dict[str, str], tmp_path: Path
) -> None:
    done = srun_cli(tmp_path, slurm_cluster, "device=ddp", *FAILS_IN_PROCESS_1, *TINY)
    assert done.returncode != 0
    assert (results(done.run_dir)["status"], results(done.run_dir)["reason"]) == (
        "failed",
        PROCESS_1_FAILURE,
    )
    assert f"Error: {PROCESS_1_FAILURE}" in done.stderr


@pytest.mark.slow
def test_tasks_given_different_commands_are_refused(
    slurm_cluster: dict[str, str], tmp_path: Path
) -> None:
    done = srun_cli(
        tmp_path, slurm_cluster, "device=ddp", *TINY, each_task="trainer.seed=$SLURM_PROCID"
    )
    assert done.returncode != 0
    refused = "process 1's config is not process 0's: every process must be given the same command"
    result = results(done.run_dir)  # process 0's folder says why
    assert (result["status"], result["reason"]) == ("failed", refused)


@pytest.mark.slow
def test_tasks_of_a_one_process_device_are_told_to_use_ddp(
    slurm_cluster: dict[str, str], tmp_path: Path
) -> None:
    done = srun_cli(tmp_path, slurm_cluster, "device=cpu", *TINY)
    assert done.returncode != 0
    said = "srun started 2 tasks, but device=cpu trains in one; use device=ddp"
    assert said in done.stderr
    assert results(done.run_dir)["status"] == "failed"
