"""hydra/launcher=slurm on the real two-node cluster: each sweep job a SLURM job asking for what
it needs, the sweep's report at its end, and a job SLURM cannot run refused in one line."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from helpers import QUICK, SMALL, env_with_tests_on_path, numbers, results, train_cli

# How long the preempted job may take to be requeued (seconds: one step and the signal).
REQUEUE_WAIT_SECONDS = 120
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
def test_a_sweep_over_processes_trains_each_job_as_one_ddp_group_over_both_nodes(
    slurm_cluster: dict[str, str], tmp_path: Path
) -> None:
    swept = ["device=ddp", "device.processes=2,4", "hydra.launcher.nodes=2", "trainer.threads=1"]
    done = train_cli(tmp_path, *SLURM_SWEEP, *SMALL[1:], *swept, env=slurm_cluster)
    assert done.returncode == 0, done.stderr
    said = done.stdout + done.stderr
    assert "(2 nodes x 1 task, 1 CPU per task, no GPU," in said  # gloo: no GPU
    assert "(2 nodes x 2 tasks, 1 CPU per task, no GPU," in said
    assert "2 run(s) in" in said and "2 completed" in said
    for run, processes in (("0_device.processes-2", 2), ("1_device.processes-4", 4)):
        folder = tmp_path / "sweep" / run
        assert (results(folder)["status"], results(folder)["world_size"]) == (
            "completed",
            processes,
        )
        cluster = json.loads((folder / "environment.json").read_text())["cluster"]
        assert (cluster["node_count"], cluster["tasks"]) == ("2", str(processes))
        # Process 0 alone writes the log and the snapshot; the other task's go to its own log.
        assert (folder / "train.log").read_text().count("completed:") == 1


@pytest.mark.slow
@pytest.mark.parametrize(
    ("overrides", "refusal"),
    [
        (
            ["device=cuda"],
            "device=cuda asks 1 GPU(s) per node, but partition debug's nodes have no GPUs; "
            "use device=cpu",
        ),
        (
            ["device=ddp", "hydra.launcher.nodes=2", "trainer.batch_size=65"],
            "trainer.batch_size=65 is the batch of all 2 processes together; make it a multiple "
            "of 2: the job's 2 processes are its hydra.launcher.nodes=2 x tasks_per_node=1",
        ),
        (
            ["device=cpu", "hydra.launcher.tasks_per_node=2"],
            "hydra.launcher asks 1 node(s) x 2 task(s), but device=cpu trains in one process; "
            "use device=ddp, or one task",
        ),
        (
            ["device=ddp", "device.processes=3", "hydra.launcher.nodes=2"],
            "device.processes=3 does not divide among hydra.launcher.nodes=2: ask a multiple "
            "of 2, or other nodes",
        ),
    ],
    ids=["gpu-on-cpu-nodes", "batch-over-tasks", "tasks-of-one-process", "processes-over-nodes"],
)
def test_a_job_the_cluster_cannot_run_is_refused_before_submitting(
    slurm_cluster: dict[str, str], tmp_path: Path, overrides: list[str], refusal: str
) -> None:
    swept = [*SMALL[1:], *overrides, "model=tudui,lenet"]
    done = train_cli(tmp_path, *SLURM_SWEEP, *swept, env=slurm_cluster)
    assert done.returncode == 1
    assert done.last_line == f"Error: {refusal}"
    assert not (tmp_path / "sweep").exists()  # nothing submitted, no folder left


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


@pytest.mark.slow
def test_a_preempted_job_is_requeued_and_resumes_in_its_own_folder(
    slurm_cluster: dict[str, str], tmp_path: Path
) -> None:
    preempted = [
        *SMALL,
        "trainer.epochs=2",
        "model=custom",
        "model._target_=failing.PreemptedInEpoch2",
    ]
    env = {**slurm_cluster, **env_with_tests_on_path()}
    started: list[str] = []
    starter = threading.Thread(target=start_requeued_job_now, args=(slurm_cluster, started))
    starter.start()
    done = train_cli(tmp_path / "slurm", *SLURM_SWEEP, *preempted, env=env)
    starter.join()
    assert started, "the preempted job was not requeued"
    assert done.returncode == 0, done.stderr
    (run_dir,) = (path.parent for path in (tmp_path / "slurm" / "sweep").glob("*/results.json"))
    assert results(run_dir)["status"] == "completed"
    log = (run_dir / "train.log").read_text()
    assert "requeued: it goes on in sweep/0" in log
    assert "resuming sweep/0 after epoch 1" in log
    # The same digits as a run never preempted (outside SLURM, the model is LeNet's).
    uninterrupted = train_cli(tmp_path / "here", *preempted, env=env_with_tests_on_path())
    assert numbers(run_dir) == numbers(uninterrupted.run_dir)


@pytest.mark.slow
def test_a_sweep_stopped_here_is_resumed_on_the_cluster(
    slurm_cluster: dict[str, str], tmp_path: Path
) -> None:
    env = env_with_tests_on_path()
    model = ["model=custom", "model._target_=failing.StopsOnce"]
    sweep = ["-m", "hydra.sweep.dir=sweep", *QUICK, *model, "trainer.seed=0,1,2"]
    first = train_cli(tmp_path, *sweep, env={**env, "FAILING_FIRST_ATTEMPT": "1"})
    assert first.returncode != 0
    resumed = train_cli(
        tmp_path, "-m", "resume=sweep", "hydra/launcher=slurm", *model, env={**env, **slurm_cluster}
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "1 of 3 jobs completed, left as they are; 2 to run" in resumed.stdout
    assert "3 run(s) in" in resumed.stderr and ": 3 completed" in resumed.stderr
    clusters = [
        json.loads((tmp_path / "sweep" / job / "environment.json").read_text()).get("cluster")
        for job in ("0_trainer.seed-0", "1_trainer.seed-1", "2_trainer.seed-2")
    ]
    assert clusters[0] is None  # completed here, left as it was
    assert clusters[1]["job_id"] != clusters[2]["job_id"]  # a SLURM job each
    # Job 2 went on from its checkpoint on the cluster with the digits it would have had here.
    again = train_cli(tmp_path / "here", *QUICK, *model, "trainer.seed=2", env=env)
    assert numbers(tmp_path / "sweep" / "2_trainer.seed-2") == numbers(again.run_dir)


def start_requeued_job_now(slurm_cluster: dict[str, str], started: list[str]) -> None:
    """SLURM holds a requeued job for two minutes before it may start again: as an
    administrator may, start it at once (its id added to `started`)."""
    env = {**os.environ, **slurm_cluster}
    deadline = time.monotonic() + REQUEUE_WAIT_SECONDS
    while time.monotonic() < deadline:
        queued = subprocess.run(
            ["squeue", "-h", "-o", "%i %T %r"], env=env, capture_output=True, text=True
        ).stdout.split()
        if queued[1:] == ["PENDING", "BeginTime"]:
            update = ["scontrol", "update", f"JobId={queued[0]}", "StartTime=now"]
            subprocess.run(update, env=env, check=True)
            started.append(queued[0])
            return
        time.sleep(0.2)
