"""Which device a run trains on: the request in the config, checked against this machine.

`resolve` is pure: it takes the request and a `Machine` (how many CUDA GPUs, and why none), so the
decision is tested for any GPU count without touching torch.cuda. `Machine.detect` asks torch.
"""

from __future__ import annotations

import os
import platform
import re
from dataclasses import dataclass

import torch
from torch import nn

from experiments.config import DeviceConfig
from experiments.errors import ExperimentError

DEVICE_NAMES = ("cpu", "cuda", "auto", "dp")
VALID = "cpu, cuda, cuda:N, auto or dp"


@dataclass(frozen=True)
class Machine:
    cuda_count: int
    # Why there is no CUDA GPU, for messages (empty when there is one).
    no_cuda_reason: str = ""

    @classmethod
    def detect(cls) -> Machine:
        if torch.version.cuda is None:
            return cls(0, f"this torch {torch.__version__} is a CPU-only build")
        if not torch.cuda.is_available():
            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            hidden = "" if visible is None else f" with CUDA_VISIBLE_DEVICES={visible}"
            return cls(0, f"torch found no CUDA GPU or driver{hidden}")
        return cls(torch.cuda.device_count())

    def gpus(self) -> str:
        """What the machine has, as in "4 CUDA GPUs (cuda:0 to cuda:3)"."""
        if self.cuda_count == 0:
            return f"no CUDA GPU ({self.no_cuda_reason})"
        if self.cuda_count == 1:
            return "1 CUDA GPU (cuda:0)"
        return f"{self.cuda_count} CUDA GPUs (cuda:0 to cuda:{self.cuda_count - 1})"


@dataclass(frozen=True)
class DevicePlan:
    """The device a run trains on; `ids` are nn.DataParallel's GPUs (the first is `index`)."""

    type: str
    index: int | None = None
    ids: tuple[int, ...] = ()
    # Why `device=auto` chose this device.
    reason: str = ""

    @property
    def device(self) -> torch.device:
        return torch.device(self.type, self.index)

    def __str__(self) -> str:
        if self.ids:
            return f"dp over cuda:{', cuda:'.join(map(str, self.ids))}"
        return str(self.device)


def requested(request: DeviceConfig) -> str:
    """The request as the user would type it: cpu, cuda, cuda:1, auto, dp."""
    if request.name == "cuda" and request.index is not None:
        return f"cuda:{request.index}"
    return str(request.name)


def resolve(request: DeviceConfig, machine: Machine, job_slot: int | None = None) -> DevicePlan:
    """Turn a device request into a plan for `machine`, or say in one line why it cannot run.

    `job_slot` is the job's number when several jobs of a sweep run at once: `cuda` and `auto`
    without an index then take GPU `job_slot mod GPU count`, so the jobs spread over the GPUs.
    """
    name, index = _parse(request)
    spread = 0 if job_slot is None else job_slot % max(machine.cuda_count, 1)
    if request.ids is not None and name != "dp":
        raise ExperimentError(f"device.ids applies to device=dp only, not device={name}")
    if name == "cpu":
        return DevicePlan("cpu")
    if name == "auto":
        if machine.cuda_count == 0:
            return DevicePlan("cpu", reason=f"this machine has {machine.gpus()}")
        return DevicePlan("cuda", spread, reason=f"this machine has {machine.gpus()}")
    if machine.cuda_count == 0:
        raise ExperimentError(
            f"device={requested(request)} needs a CUDA GPU, but this machine has {machine.gpus()}; "
            "use device=cpu or device=auto"
        )
    if name == "dp":
        return DevicePlan("cuda", *_dp_ids(request.ids, machine))
    index = spread if index is None else index
    if not 0 <= index < machine.cuda_count:
        raise ExperimentError(
            f"device=cuda:{index} is out of range: this machine has {machine.gpus()}"
        )
    return DevicePlan("cuda", index)


def _parse(request: DeviceConfig) -> tuple[str, int | None]:
    """Split a request into name and index, reading a torch-style `cuda:N` name too."""
    name, index = str(request.name), request.index
    match = re.fullmatch(r"cuda:(\d+)", name)
    if match:
        if index is not None and index != int(match[1]):
            raise ExperimentError(
                f"device.name={name} and device.index={index} disagree; give the GPU once"
            )
        return "cuda", int(match[1])
    if name not in DEVICE_NAMES:
        raise ExperimentError(f"device.name={name} is not a device; valid: {VALID}")
    if index is not None and name != "cuda":
        raise ExperimentError(f"device.index applies to device=cuda only, not device={name}")
    return name, index


def _dp_ids(ids: list[int] | None, machine: Machine) -> tuple[int, tuple[int, ...]]:
    """The first GPU and all GPUs of a DataParallel request (null ids: every GPU)."""
    gpus = tuple(range(machine.cuda_count)) if ids is None else tuple(ids)
    shown = f"device.ids={list(gpus)}"
    if not gpus:
        raise ExperimentError(
            f"{shown} names no GPU; device=dp needs at least one of this machine's {machine.gpus()}"
        )
    repeated = sorted({gpu for gpu in gpus if gpus.count(gpu) > 1})
    if repeated:
        raise ExperimentError(f"{shown} repeats GPU {repeated[0]}; name each GPU once")
    missing = [gpu for gpu in gpus if not 0 <= gpu < machine.cuda_count]
    if missing:
        raise ExperimentError(
            f"{shown} names GPU {missing[0]}, but this machine has {machine.gpus()}"
        )
    return gpus[0], gpus


def set_visible(visible: list[str] | None) -> None:
    """Set CUDA_VISIBLE_DEVICES (in PCI bus order) from `device.visible`, before CUDA starts."""
    if visible is None:
        return
    wanted = ",".join(str(gpu) for gpu in visible)
    if torch.cuda.is_initialized() and os.environ.get("CUDA_VISIBLE_DEVICES") != wanted:
        raise ExperimentError(
            f"device.visible={list(visible)} must be set before CUDA starts, but CUDA already runs "
            "in this process; run it in a process of its own"
        )
    os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    os.environ["CUDA_VISIBLE_DEVICES"] = wanted


def select(plan: DevicePlan) -> None:
    """Make the plan's GPU the current one, so nothing lands on cuda:0 by default."""
    if plan.type == "cuda":
        torch.cuda.set_device(plan.index)


def parallelize(model: nn.Module, plan: DevicePlan) -> nn.Module:
    """Wrap the (already placed) model in nn.DataParallel when the plan spans several GPUs."""
    if not plan.ids:
        return model
    return nn.DataParallel(model, device_ids=list(plan.ids), output_device=plan.index)


def unwrap(model: nn.Module) -> nn.Module:
    """The model inside a DataParallel wrapper: its state_dict loads into a single-device model."""
    return model.module if isinstance(model, nn.DataParallel) else model


def describe(plan: DevicePlan) -> dict[str, object]:
    """The device actually used, for results.json: type, index, name (and the DataParallel GPUs)."""
    name = torch.cuda.get_device_name(plan.index) if plan.type == "cuda" else _cpu_name()
    described: dict[str, object] = {"type": plan.type, "index": plan.index, "name": name}
    if plan.type == "cpu":
        described["threads"] = torch.get_num_threads()
    if plan.ids:
        described["ids"] = list(plan.ids)
    if plan.reason:
        described["reason"] = plan.reason
    return described


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
