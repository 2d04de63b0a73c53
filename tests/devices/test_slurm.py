"""An srun step's tasks as a process group, from SLURM's variables passed in (no cluster)."""

from __future__ import annotations

import pytest

from experiments.devices import slurm
from experiments.devices.process_group import SRUN, TORCHRUN, ProcessGroup

# What srun gives task 1 of `srun --nodes=2 --ntasks=3` (two on n1, one on n2), as seen on the
# test cluster (job 7, its first step).
TASK_1_OF_3 = {
    "SLURM_JOB_ID": "7",
    "SLURM_STEP_ID": "0",
    "SLURM_PROCID": "1",
    "SLURM_LOCALID": "1",
    "SLURM_NODEID": "0",
    "SLURM_STEP_NUM_TASKS": "3",
    "SLURM_STEP_TASKS_PER_NODE": "2,1",
    "SLURM_STEP_NODELIST": "n[1-2]",
}


@pytest.mark.parametrize(
    ("nodelist", "first"),
    [
        ("n1", "n1"),
        ("n[1-2]", "n1"),
        ("gpu[07-09,12],cpu3", "gpu07"),
        ("login2,n[1-4]", "login2"),
        ("rack[3]-node[1-2]", "rack3-node[1-2]"),  # (only the first bracket is read)
    ],
)
def test_the_first_host_of_a_host_list(nodelist: str, first: str) -> None:
    assert slurm.first_host(nodelist) == first


def test_tasks_per_node_repeat_as_slurm_writes_them() -> None:
    assert slurm.tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    assert slurm.tasks_per_node("4") == [4]


def test_each_step_of_a_job_meets_on_a_port_of_its_own() -> None:
    ports = {slurm.rendezvous_port("123456", str(step)) for step in range(8)}
    assert len(ports) == 8
    assert all(slurm.FIRST_PORT <= port < slurm.FIRST_PORT + slurm.PORTS for port in ports)
    assert slurm.rendezvous_port("123456", "batch") == slurm.rendezvous_port("123456", "0")


def test_an_srun_task_is_its_place_in_the_step() -> None:
    group = ProcessGroup.from_env(TASK_1_OF_3)
    assert group == ProcessGroup(
        rank=1,
        world_size=3,
        local_rank=1,
        local_world_size=2,
        launcher=SRUN,
        store_host="n1",
        store_port=slurm.rendezvous_port("7", "0"),
    )
    assert group.processes == "srun started 3 tasks"


def test_a_host_and_port_given_win_over_slurms() -> None:
    given = ProcessGroup.from_env(
        {**TASK_1_OF_3, "MASTER_ADDR": "10.0.0.5", "MASTER_PORT": "29500"}
    )
    assert (given.store_host, given.store_port) == ("10.0.0.5", 29500)


def test_torchrun_inside_an_srun_step_forms_torchruns_group() -> None:
    torchrun = {"WORLD_SIZE": "4", "RANK": "3", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}
    group = ProcessGroup.from_env({**TASK_1_OF_3, **torchrun})
    assert (group.launcher, group.rank, group.world_size) == (TORCHRUN, 3, 4)


def test_a_batch_script_is_one_process_of_its_own() -> None:
    # sbatch's script sees the job's variables but no step's: it is not a task of an srun step.
    batch = {"SLURM_JOB_ID": "7", "SLURM_PROCID": "0", "SLURM_NTASKS": "2"}
    assert ProcessGroup.from_env(batch) == ProcessGroup()
