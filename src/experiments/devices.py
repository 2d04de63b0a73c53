"""Which device a run trains on: the request in the config, checked against this machine.

`resolve` is pure: it takes the request, a `Machine` (how many CUDA GPUs, and why none) and the
process's place among torchrun's processes, so the decision is tested for any GPU count without
touching torch.cuda. `Machine.detect` asks torch.

    python -m experiments.devices                                   # what this machine offers
    python -m experiments.devices device=cuda:1                     # how a request resolves here
    python -m experiments.devices device=dp 'device.ids=[0,2]'
"""

from __future__ import annotations

import os
import platform
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

import torch
from torch import nn

from experiments.config import DeviceConfig
from experiments.distributed import ONE_PROCESS, Processes
from experiments.errors import ExperimentError, one_line

DEVICE_NAMES = ("cpu", "cuda", "auto", "dp", "ddp")
VALID = "cpu, cuda, cuda:N, auto, dp or ddp"


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
    """The device a process trains on; `ids` are nn.DataParallel's GPUs (the first is `index`);
    `backend` is DistributedDataParallel's (nccl or gloo) when the run spans processes."""

    type: str
    index: int | None = None
    ids: tuple[int, ...] = ()
    backend: str = ""
    # Why `device=auto` (or `ddp`) chose this device.
    reason: str = ""

    @property
    def device(self) -> torch.device:
        return torch.device(self.type, self.index)

    def __str__(self) -> str:
        if self.ids:
            return f"dp over cuda:{', cuda:'.join(map(str, self.ids))}"
        if self.backend:
            return f"{self.device} (ddp, {self.backend})"
        return str(self.device)


def requested(request: DeviceConfig) -> str:
    """The request as the user would type it: cpu, cuda, cuda:1, auto, dp."""
    if request.name == "cuda" and request.index is not None:
        return f"cuda:{request.index}"
    return str(request.name)


def resolve(
    request: DeviceConfig,
    machine: Machine,
    job_slot: int | None = None,
    processes: Processes = ONE_PROCESS,
) -> DevicePlan:
    """Turn a device request into a plan for `machine`, or say in one line why it cannot run.

    `job_slot` is the job's number when several jobs of a sweep run at once: `cuda` and `auto`
    without an index then take GPU `job_slot mod GPU count`, so the jobs spread over the GPUs.
    `processes` places this process among torchrun's: `ddp` gives each its own GPU.
    """
    name, index = _parse(request)
    spread = 0 if job_slot is None else job_slot % max(machine.cuda_count, 1)
    if request.ids is not None and name not in ("dp", "ddp"):
        raise ExperimentError(f"device.ids applies to device=dp or ddp only, not device={name}")
    if processes.torchrun and name != "ddp":
        raise ExperimentError(
            f"torchrun started {processes.world_size} processes, but device={requested(request)} "
            "trains in one; use device=ddp"
        )
    if name == "ddp":
        return _ddp_plan(request.ids, machine, processes)
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
        gpus = _gpu_ids(request.ids, machine, "dp")
        return DevicePlan("cuda", gpus[0], gpus)
    index = spread if index is None else index
    if not 0 <= index < machine.cuda_count:
        raise ExperimentError(
            f"device=cuda:{index} is out of range: this machine has {machine.gpus()}"
        )
    return DevicePlan("cuda", index)


def _ddp_plan(ids: list[int] | None, machine: Machine, processes: Processes) -> DevicePlan:
    """One GPU per process (NCCL): GPU LOCAL_RANK, or device.ids[LOCAL_RANK]; no GPU: gloo."""
    if not processes.torchrun:
        raise ExperimentError(
            "device=ddp runs one process per device under torchrun: "
            "torchrun --nproc-per-node=2 train.py device=ddp"
        )
    if machine.cuda_count == 0:
        return DevicePlan("cpu", backend="gloo", reason=f"this machine has {machine.gpus()}")
    gpus = _gpu_ids(ids, machine, "ddp")
    if processes.local_rank >= len(gpus):
        raise ExperimentError(
            f"device=ddp has {len(gpus)} GPU(s) ({', '.join(f'cuda:{g}' for g in gpus)}) for "
            f"{processes.local_world_size} processes on this machine; start at most {len(gpus)} "
            "(torchrun --nproc-per-node) or name more in device.ids"
        )
    return DevicePlan("cuda", gpus[processes.local_rank], backend="nccl")


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


def _gpu_ids(ids: list[int] | None, machine: Machine, name: str) -> tuple[int, ...]:
    """The GPUs a dp or ddp request names (null ids: every GPU), checked against the machine."""
    gpus = tuple(range(machine.cuda_count)) if ids is None else tuple(ids)
    shown = f"device.ids={list(gpus)}"
    if not gpus:
        raise ExperimentError(
            f"{shown} names no GPU; device={name} needs at least one of this machine's "
            f"{machine.gpus()}"
        )
    repeated = sorted({gpu for gpu in gpus if gpus.count(gpu) > 1})
    if repeated:
        raise ExperimentError(f"{shown} repeats GPU {repeated[0]}; name each GPU once")
    missing = [gpu for gpu in gpus if not 0 <= gpu < machine.cuda_count]
    if missing:
        raise ExperimentError(
            f"{shown} names GPU {missing[0]}, but this machine has {machine.gpus()}"
        )
    return gpus


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
    """Wrap the (already placed) model for several GPUs or processes, as the plan says."""
    if plan.ids:
        return nn.DataParallel(model, device_ids=list(plan.ids), output_device=plan.index)
    if plan.backend:
        device_ids = [plan.index] if plan.type == "cuda" else None
        return nn.parallel.DistributedDataParallel(model, device_ids=device_ids)
    return model


def unwrap(model: nn.Module) -> nn.Module:
    """The model inside its (Distributed)DataParallel and torch.compile wrappers, whose state_dict
    loads into a single-device model."""
    while True:
        if isinstance(model, (nn.DataParallel, nn.parallel.DistributedDataParallel)):
            model = model.module
        elif isinstance(model, torch._dynamo.eval_frame.OptimizedModule):
            model = model._orig_mod
        else:
            return model


def audit(
    model: nn.Module, loss_fn: nn.Module, batch: tuple[torch.Tensor, torch.Tensor], plan: DevicePlan
) -> None:
    """Check that every parameter and buffer of the (wrapped) model and the loss module, and a
    batch, are on the plan's device; otherwise name the first that is not, and both places."""
    expected = plan.device
    for name, tensor in _placed_tensors(model, loss_fn, batch):
        if tensor.device != expected:
            raise ExperimentError(
                f"placement audit: {name} is on {tensor.device}, but device={plan} puts "
                f"everything on {expected}"
            )


def _placed_tensors(
    model: nn.Module, loss_fn: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]
) -> Iterator[tuple[str, torch.Tensor]]:
    for owner, module in (("model", model), ("loss", loss_fn)):
        yield from ((f"{owner} parameter {n}", t) for n, t in module.named_parameters())
        yield from ((f"{owner} buffer {n}", t) for n, t in module.named_buffers())
    yield "batch images", batch[0]
    yield "batch labels", batch[1]


def describe(plan: DevicePlan) -> dict[str, object]:
    """The device actually used, for results.json: type, index, name (and the DataParallel GPUs)."""
    name = torch.cuda.get_device_name(plan.index) if plan.type == "cuda" else cpu_name()
    described: dict[str, object] = {"type": plan.type, "index": plan.index, "name": name}
    if plan.type == "cpu":
        described["threads"] = torch.get_num_threads()
    if plan.ids:
        described["ids"] = list(plan.ids)
    if plan.backend:
        described["backend"] = plan.backend
    if plan.reason:
        described["reason"] = plan.reason
    return described


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main(argv: list[str] | None = None) -> int:
    """Print what this machine offers and, given device overrides, how they resolve here."""
    overrides = list(sys.argv[1:] if argv is None else argv)
    machine = Machine.detect()
    build = f"CUDA {torch.version.cuda} build" if torch.version.cuda else "CPU-only build"
    print(f"torch {torch.__version__} ({build})")
    cores, threads = os.cpu_count(), torch.get_num_threads()
    print(f"cpu: {cpu_name()}, {cores} logical cores, torch uses {threads} threads")
    if machine.cuda_count == 0:
        print(f"cuda: none ({machine.no_cuda_reason})")
    for index in range(machine.cuda_count):
        gpu = torch.cuda.get_device_properties(index)
        print(
            f"cuda:{index}: {gpu.name}, {gpu.total_memory / 2**30:.1f} GiB, "
            f"compute capability {gpu.major}.{gpu.minor}"
        )
    auto = resolve(DeviceConfig("auto"), machine)
    print(f"device=auto picks {auto}: {auto.reason}")
    if not overrides:
        return 0
    try:
        request = _compose_device(overrides)
        shown = f"device={requested(request)}"
        if request.name == "ddp":
            # What each of torchrun's processes would get, one per GPU (or two on the CPU).
            count = max(machine.cuda_count, 2)
            for rank in range(count):
                processes = Processes(rank, count, rank, count, torchrun=True)
                plan = resolve(request, machine, processes=processes)
                print(f"{shown}, process {rank} of {count}: {plan}")
        else:
            print(f"{shown}: {resolve(request, machine)}")
    except Exception as error:
        print(f"Error: {one_line(error)}", file=sys.stderr)
        return 1
    return 0


def _compose_device(overrides: list[str]) -> DeviceConfig:
    """The device config `python train.py <overrides>` would get."""
    from hydra import compose, initialize_config_dir

    from experiments.cli import CONF_DIR
    from experiments.config import new_tag, register_configs

    register_configs(datetime.now(), new_tag())
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="train", overrides=overrides).device


if __name__ == "__main__":
    sys.exit(main())
