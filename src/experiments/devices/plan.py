"""Which device a job runs on; `resolve` is pure (`Machine` asks torch), tested without GPUs."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from experiments.config.choices import DeviceName
from experiments.config.schemas import DeviceConfig
from experiments.core.errors import ExperimentError
from experiments.core.text import gpu_name
from experiments.devices.process_group import ONE_PROCESS, SRUN, TORCHRUN, ProcessGroup


@dataclass(frozen=True)
class Machine:
    cuda_count: int
    no_cuda_reason: str = ""  # for messages

    @classmethod
    def detect(cls) -> Machine:
        if not torch.cuda.is_available():
            return cls(0, _no_cuda_reason())
        return cls(torch.cuda.device_count())

    @classmethod
    def counted(cls) -> Machine:
        """The GPUs torch counts without starting CUDA, for jobs that set the visible GPUs after."""
        count = torch.cuda.device_count()
        return cls(count, "" if count else _no_cuda_reason())

    def gpus(self) -> str:
        """What the machine has, as in "4 CUDA GPUs (cuda:0 to cuda:3)"."""
        if self.cuda_count == 0:
            return f"no CUDA GPU ({self.no_cuda_reason})"
        if self.cuda_count == 1:
            return f"1 CUDA GPU ({gpu_name(0)})"
        return f"{self.cuda_count} CUDA GPUs ({gpu_name(0)} to {gpu_name(self.cuda_count - 1)})"


def _no_cuda_reason() -> str:
    # torch.cuda serves ROCm builds as well as CUDA ones.
    if torch.version.cuda is None and torch.version.hip is None:
        return f"this torch {torch.__version__} is a CPU-only build"
    return "torch found no CUDA GPU or driver"


@dataclass(frozen=True)
class DevicePlan:
    """The device a process trains on: `ids` are DataParallel's (`index` first), `backend` DDP's."""

    type: str
    index: int | None = None
    ids: tuple[int, ...] = ()
    backend: str = ""
    reason: str = ""  # why device=auto (or ddp) chose this device

    @property
    def device(self) -> torch.device:
        return torch.device(self.type, self.index)

    @property
    def gpus(self) -> tuple[int, ...]:
        return self.ids or (() if self.index is None else (self.index,))

    @property
    def computes_on(self) -> list[torch.device]:
        return [torch.device("cuda", gpu) for gpu in self.gpus] or [self.device]

    def __str__(self) -> str:
        if self.ids:
            return f"dp over {', '.join(map(gpu_name, self.ids))}"
        if self.backend:
            return f"{self.device} (ddp, {self.backend})"
        return str(self.device)


def request_text(request: DeviceConfig) -> str:
    """The request as the user would type it: cpu, cuda, cuda:1, auto, dp."""
    if request.name == DeviceName.cuda and request.index is not None:
        return gpu_name(request.index)
    return str(request.name)


def every_device(cuda_count: int) -> list[str]:
    """What `-m device=every` sweeps over: the CPU, each GPU alone, and dp over two or more."""
    gpus = [gpu_name(index) for index in range(cuda_count)]
    return [DeviceName.cpu, *gpus, *([DeviceName.dp] if cuda_count >= 2 else [])]


def wants_any_gpu(request: DeviceConfig) -> bool:
    """Whether the request leaves the GPU open (device=cuda, device=auto)."""
    return request.name in (DeviceName.cuda, DeviceName.auto) and request.index is None


def resolve(
    request: DeviceConfig,
    machine: Machine,
    group: ProcessGroup = ONE_PROCESS,
    free_gpu: int | None = None,
) -> DevicePlan:
    """A plan for the request on `machine`, or one line why not; `free_gpu`: a sweep's GPU."""
    name, index = request.name, request.index
    if request.ids is not None and name not in (DeviceName.dp, DeviceName.ddp):
        raise ExperimentError(f"device.ids applies to device=dp or ddp only, not device={name}")
    if index is not None and name != DeviceName.cuda:
        raise ExperimentError(f"device.index applies to device=cuda only, not device={name}")
    if request.processes is not None and name != DeviceName.ddp:
        raise ExperimentError(f"device.processes applies to device=ddp only, not device={name}")
    # (srun's one task is a job's every process: SLURM starts each job's tasks through it.)
    started = group.launcher == TORCHRUN or group.world_size > 1
    if started and name != DeviceName.ddp:
        raise ExperimentError(
            f"{group.processes}, but device={request_text(request)} trains in one; use device=ddp"
        )
    handed = "" if free_gpu is None else f"no other job on this machine held {gpu_name(free_gpu)}"
    if name == DeviceName.ddp:
        return _ddp_plan(request.ids, request.processes, machine, group)
    if name == DeviceName.cpu:
        return DevicePlan("cpu")
    if name == DeviceName.auto:
        reason = f"this machine has {machine.gpus()}"
        if machine.cuda_count == 0:
            return DevicePlan("cpu", reason=reason)
        return DevicePlan("cuda", free_gpu or 0, reason=f"{reason}{handed and ', and '}{handed}")
    if machine.cuda_count == 0:
        raise ExperimentError(
            f"device={request_text(request)} needs a CUDA GPU, but this machine has "
            f"{machine.gpus()}; use device=cpu or device=auto"
        )
    if name == DeviceName.dp:
        gpus = _gpu_ids(request.ids, machine, "dp")
        return DevicePlan("cuda", gpus[0], gpus)
    if index is None:
        return DevicePlan("cuda", free_gpu or 0, reason=handed)
    if not 0 <= index < machine.cuda_count:
        raise ExperimentError(
            f"device={gpu_name(index)} is out of range: this machine has {machine.gpus()}"
        )
    return DevicePlan("cuda", index)


# How each launcher is told the processes it starts on each machine.
PER_NODE = {TORCHRUN: "torchrun --nproc-per-node", SRUN: "srun --ntasks-per-node"}


def _ddp_plan(
    ids: list[int] | None, processes: int | None, machine: Machine, group: ProcessGroup
) -> DevicePlan:
    """One GPU per process (NCCL): LOCAL_RANK's, device.ids[LOCAL_RANK], or the one it sees."""
    if group.launcher is None:
        raise ExperimentError(
            "device=ddp runs one process per device, started by torchrun "
            "(torchrun --nproc-per-node=2 train.py device=ddp) or by SLURM "
            "(srun --ntasks=2 python train.py device=ddp; hydra.launcher.tasks_per_node=2)"
        )
    if processes not in (None, group.world_size):
        raise ExperimentError(
            f"device.processes={processes}, but {group.processes}: start {processes} "
            "(torchrun --nproc-per-node x --nnodes, srun --ntasks), or leave device.processes out"
        )
    if machine.cuda_count == 0:
        return DevicePlan("cpu", backend="gloo", reason=f"this machine has {machine.gpus()}")
    if machine.cuda_count == 1 and ids is None:
        mine = "this process sees one GPU" if group.local_world_size > 1 else ""
        return DevicePlan("cuda", 0, backend="nccl", reason=mine)
    gpus = _gpu_ids(ids, machine, "ddp")
    if group.local_rank >= len(gpus):
        raise ExperimentError(
            f"device=ddp has {len(gpus)} GPU(s) ({', '.join(map(gpu_name, gpus))}) for "
            f"{group.local_world_size} processes on this machine; start at most {len(gpus)} "
            f"({PER_NODE[group.launcher]}) or name more in device.ids"
        )
    return DevicePlan("cuda", gpus[group.local_rank], backend="nccl")


def _gpu_ids(ids: list[int] | None, machine: Machine, name: str) -> tuple[int, ...]:
    """The GPUs a dp or ddp request names (null ids: every GPU), checked against the machine."""
    gpus = tuple(range(machine.cuda_count)) if ids is None else tuple(ids)
    given = f"device.ids={list(gpus)}"
    if not gpus:
        raise ExperimentError(
            f"{given} names no GPU; device={name} needs at least one of this machine's "
            f"{machine.gpus()}"
        )
    repeated = sorted({index for index in gpus if gpus.count(index) > 1})
    if repeated:
        raise ExperimentError(f"{given} repeats GPU {repeated[0]}; name each GPU once")
    missing = [index for index in gpus if not 0 <= index < machine.cuda_count]
    if missing:
        raise ExperimentError(
            f"{given} names GPU {missing[0]}, but this machine has {machine.gpus()}"
        )
    return gpus
