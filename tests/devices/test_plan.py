"""Device requests resolved for machines with 0, 1 and 4 GPUs, passed in: cuda, dp, ddp, auto, and a
GPU a sweep hands out."""

from __future__ import annotations

import pytest

from experiments.config.choices import DeviceName
from experiments.config.schemas import DeviceConfig
from experiments.core.errors import ExperimentError
from experiments.devices.distributed import shared_gpu
from experiments.devices.plan import (
    DevicePlan,
    Machine,
    every_device,
    request_text,
    resolve,
    wants_any_gpu,
)
from experiments.devices.process_group import SRUN, TORCHRUN, ProcessGroup

NO_GPU = Machine(0, "torch found no CUDA GPU or driver")
ONE_GPU = Machine(1)
FOUR_GPUS = Machine(4)


def request(name: str, index: int | None = None, ids: list[int] | None = None) -> DeviceConfig:
    return DeviceConfig(name=DeviceName(name), index=index, ids=ids)


@pytest.mark.parametrize(
    ("machine", "wanted", "plan"),
    [
        (NO_GPU, request("cpu"), DevicePlan("cpu")),
        (FOUR_GPUS, request("cpu"), DevicePlan("cpu")),
        (ONE_GPU, request("cuda"), DevicePlan("cuda", 0)),
        (FOUR_GPUS, request("cuda"), DevicePlan("cuda", 0)),
        (FOUR_GPUS, request("cuda", 3), DevicePlan("cuda", 3)),
        (ONE_GPU, request("cuda", 0), DevicePlan("cuda", 0)),
        (FOUR_GPUS, request("dp"), DevicePlan("cuda", 0, (0, 1, 2, 3))),
        (FOUR_GPUS, request("dp", ids=[2, 0]), DevicePlan("cuda", 2, (2, 0))),
        (ONE_GPU, request("dp", ids=[0]), DevicePlan("cuda", 0, (0,))),
    ],
)
def test_valid_requests_resolve(machine: Machine, wanted: DeviceConfig, plan: DevicePlan) -> None:
    assert resolve(wanted, machine) == plan


def test_auto_picks_cuda_when_there_is_a_gpu_and_says_why() -> None:
    plan = resolve(request("auto"), FOUR_GPUS)
    assert (plan.type, plan.index) == ("cuda", 0)
    assert plan.reason == "this machine has 4 CUDA GPUs (cuda:0 to cuda:3)"


def test_auto_falls_back_to_the_cpu_and_says_why() -> None:
    plan = resolve(request("auto"), NO_GPU)
    assert plan == DevicePlan(
        "cpu", reason="this machine has no CUDA GPU (torch found no CUDA GPU or driver)"
    )


@pytest.mark.parametrize(
    ("machine", "wanted", "message"),
    [
        (
            NO_GPU,
            request("cuda"),
            "device=cuda needs a CUDA GPU, but this machine has no CUDA GPU (torch found no CUDA "
            "GPU or driver); use device=cpu or device=auto",
        ),
        (NO_GPU, request("cuda", 1), "device=cuda:1 needs a CUDA GPU, but this machine has no"),
        (NO_GPU, request("dp", ids=[0, 1]), "device=dp needs a CUDA GPU, but this machine has no"),
        (
            ONE_GPU,
            request("cuda", 1),
            "device=cuda:1 is out of range: this machine has 1 CUDA GPU (cuda:0)",
        ),
        (
            FOUR_GPUS,
            request("cuda", 4),
            "device=cuda:4 is out of range: this machine has 4 CUDA GPUs (cuda:0 to cuda:3)",
        ),
        (
            FOUR_GPUS,
            request("dp", ids=[]),
            "device.ids=[] names no GPU; device=dp needs at least one of this machine's 4 CUDA "
            "GPUs (cuda:0 to cuda:3)",
        ),
        (
            FOUR_GPUS,
            request("dp", ids=[0, 1, 1]),
            "device.ids=[0, 1, 1] repeats GPU 1; name each GPU once",
        ),
        (
            FOUR_GPUS,
            request("dp", ids=[0, 4]),
            "device.ids=[0, 4] names GPU 4, but this machine has 4 CUDA GPUs (cuda:0 to cuda:3)",
        ),
        (ONE_GPU, request("dp", ids=[-1]), "device.ids=[-1] names GPU -1"),
        (FOUR_GPUS, request("cpu", 1), "device.index applies to device=cuda only, not device=cpu"),
        (FOUR_GPUS, request("cuda", ids=[0]), "device.ids applies to device=dp or ddp only"),
    ],
)
def test_impossible_requests_say_why_in_one_line(
    machine: Machine, wanted: DeviceConfig, message: str
) -> None:
    with pytest.raises(ExperimentError) as error:
        resolve(wanted, machine)
    assert str(error.value).startswith(message)
    assert "\n" not in str(error.value)


def test_requests_are_shown_as_typed() -> None:
    assert request_text(request("cuda", 3)) == "cuda:3"
    assert request_text(request("dp")) == "dp"


def test_plans_read_as_torch_devices() -> None:
    assert str(DevicePlan("cuda", 1)) == "cuda:1"
    assert str(DevicePlan("cpu")) == "cpu"
    assert str(DevicePlan("cuda", 2, (2, 3))) == "dp over cuda:2, cuda:3"


@pytest.mark.parametrize(
    ("wanted", "open_gpu"),
    [
        (request("cuda"), True),
        (request("auto"), True),
        (request("cuda", 3), False),
        (request("cpu"), False),
        (request("dp"), False),
        (request("ddp"), False),
    ],
)
def test_only_requests_that_leave_the_gpu_open_take_a_free_one(
    wanted: DeviceConfig, open_gpu: bool
) -> None:
    assert wants_any_gpu(wanted) is open_gpu


def test_a_gpu_handed_out_by_the_sweep_is_used_and_said() -> None:
    plan = resolve(request("cuda"), FOUR_GPUS, free_gpu=2)
    assert (plan.index, plan.reason) == (2, "no other job on this machine held cuda:2")
    plan = resolve(request("auto"), FOUR_GPUS, free_gpu=3)
    assert plan.index == 3
    assert plan.reason == (
        "this machine has 4 CUDA GPUs (cuda:0 to cuda:3), and no other job on this machine held "
        "cuda:3"
    )
    assert resolve(request("cuda", 1), FOUR_GPUS, free_gpu=3).index == 1  # named: stays put


def test_parallel_sweep_jobs_on_a_cpu_machine_stay_on_the_cpu() -> None:
    assert resolve(request("auto"), NO_GPU).type == "cpu"


def torchrun_process(local_rank: int, local_world: int) -> ProcessGroup:
    return ProcessGroup(local_rank, local_world, local_rank, local_world, launcher=TORCHRUN)


@pytest.mark.parametrize(
    ("machine", "wanted", "process", "plan"),
    [
        (FOUR_GPUS, request("ddp"), torchrun_process(2, 4), DevicePlan("cuda", 2, backend="nccl")),
        (
            FOUR_GPUS,
            request("ddp", ids=[3, 1]),
            torchrun_process(1, 2),
            DevicePlan("cuda", 1, backend="nccl"),
        ),
        (ONE_GPU, request("ddp"), torchrun_process(0, 1), DevicePlan("cuda", 0, backend="nccl")),
        # Each process shown only its own GPU (SLURM's --gpus-per-task=1): numbered 0 in each.
        (
            ONE_GPU,
            request("ddp"),
            torchrun_process(1, 2),
            DevicePlan("cuda", 0, backend="nccl", reason="this process sees one GPU"),
        ),
    ],
)
def test_ddp_gives_each_process_its_own_gpu(
    machine: Machine, wanted: DeviceConfig, process: ProcessGroup, plan: DevicePlan
) -> None:
    assert resolve(wanted, machine, process) == plan


def test_ddp_without_a_gpu_uses_gloo_on_the_cpu() -> None:
    plan = resolve(request("ddp"), NO_GPU, group=torchrun_process(1, 2))
    assert (plan.type, plan.backend) == ("cpu", "gloo")


def test_ddp_with_more_processes_than_gpus_is_refused() -> None:
    with pytest.raises(ExperimentError) as error:
        resolve(request("ddp"), Machine(2), group=torchrun_process(3, 4))
    assert str(error.value) == (
        "device=ddp has 2 GPU(s) (cuda:0, cuda:1) for 4 processes on this machine; start at most "
        "2 (torchrun --nproc-per-node) or name more in device.ids"
    )


def test_ddp_processes_that_would_share_a_gpu_are_refused() -> None:
    # Two processes shown the one GPU of a machine (torchrun --nproc-per-node=2 on one GPU).
    shared = {0: "GPU-5e1f H100", 1: "GPU-77aa H100", 2: "GPU-5e1f H100"}
    assert shared_gpu(shared) == (
        "device=ddp: processes 0 and 2 would both compute on one GPU (H100, GPU-5e1f); start as "
        "many processes per machine as it has GPUs (torchrun --nproc-per-node), or show each "
        "process a GPU of its own (CUDA_VISIBLE_DEVICES, SLURM's --gpus-per-task=1)"
    )
    assert shared_gpu({0: "GPU-5e1f H100", 1: "GPU-77aa H100"}) is None


def test_ddp_ids_are_checked_like_dp_ids() -> None:
    with pytest.raises(ExperimentError, match=r"device.ids=\[1, 1\] repeats GPU 1"):
        resolve(request("ddp", ids=[1, 1]), FOUR_GPUS, group=torchrun_process(0, 2))


@pytest.mark.parametrize(
    ("gpus", "devices"),
    [
        (0, ["cpu"]),
        (1, ["cpu", "cuda:0"]),
        (2, ["cpu", "cuda:0", "cuda:1", "dp"]),
        (4, ["cpu", "cuda:0", "cuda:1", "cuda:2", "cuda:3", "dp"]),
    ],
)
def test_every_device_is_the_cpu_each_gpu_and_dp_over_two_or_more(
    gpus: int, devices: list[str]
) -> None:
    assert every_device(gpus) == devices


def test_srun_tasks_form_a_ddp_group_and_train_nothing_else() -> None:
    task = ProcessGroup(1, 2, 0, 1, launcher=SRUN, store_host="n1", store_port=15001)
    assert resolve(request("ddp"), NO_GPU, task).backend == "gloo"
    with pytest.raises(ExperimentError) as refused:
        resolve(request("cpu"), NO_GPU, task)
    assert (
        str(refused.value) == "srun started 2 tasks, but device=cpu trains in one; use device=ddp"
    )
    # A job's one task (every SLURM job's process is srun's) trains as any one process does.
    alone = ProcessGroup(launcher=SRUN, store_host="n1", store_port=15001)
    assert resolve(request("cpu"), NO_GPU, alone).type == "cpu"


def test_ddp_processes_asked_must_be_the_processes_started() -> None:
    task = ProcessGroup(0, 2, 0, 1, launcher=SRUN, store_host="n1", store_port=15001)
    asked = DeviceConfig(DeviceName.ddp, processes=2)
    assert resolve(asked, NO_GPU, task).backend == "gloo"
    with pytest.raises(ExperimentError) as refused:
        resolve(DeviceConfig(DeviceName.ddp, processes=4), NO_GPU, task)
    assert str(refused.value) == (
        "device.processes=4, but srun started 2 tasks: start 4 (torchrun --nproc-per-node x "
        "--nnodes, srun --ntasks), or leave device.processes out"
    )
    with pytest.raises(ExperimentError) as refused:
        resolve(DeviceConfig(DeviceName.cpu, processes=1), NO_GPU)
    assert str(refused.value) == "device.processes applies to device=ddp only, not device=cpu"
