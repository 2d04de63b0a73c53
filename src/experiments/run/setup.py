"""What a training run and an evaluation both set up: process, device, data, task and model."""

from __future__ import annotations

import functools
import importlib.util
import logging
from dataclasses import dataclass

import torch
from omegaconf import DictConfig, OmegaConf
from torch import nn

from experiments.config.build import build
from experiments.config.choices import Precision, Preload
from experiments.config.compile_checks import (
    CompileBackends,
    cuda_graphs_need_a_gpu,
    debugging_backend,
)
from experiments.config.schemas import DatasetConfig, DeviceConfig
from experiments.core.errors import ExperimentError
from experiments.data import loading, validation
from experiments.data.types import ImageData
from experiments.devices import distributed, memory, precision, process_settings, wrapping
from experiments.devices.backends.registry import backend_for
from experiments.devices.free_gpus import FreeGpus
from experiments.devices.plan import DevicePlan, Machine, request_text, resolve, wants_any_gpu
from experiments.devices.process_group import ProcessGroup
from experiments.devices.runtime import Runtime
from experiments.training import models, tasks
from experiments.training.tasks import Task

log = logging.getLogger("experiments")


@dataclass(frozen=True)
class ProcessSettings:
    """What a job sets for its whole process besides the GPUs it sees (an evaluation: defaults)."""

    threads: int | None = None
    deterministic: bool = False
    cudnn_benchmark: bool = False


def prepare_runtime(
    request: DeviceConfig,
    placement: DictConfig,
    group: ProcessGroup,
    free_gpus: FreeGpus | None = None,
    *,
    settings: ProcessSettings = ProcessSettings(),
    precision_name: Precision = Precision.fp32,
    channels_last: bool | None = False,
    settings_prefix: str = "trainer.",
) -> Runtime:
    """The process `settings` applied, then the device decided, made current, joined to `group`."""
    process_settings.apply(
        request.visible,
        settings.threads,
        settings.deterministic,
        cudnn_benchmark=settings.cudnn_benchmark,
    )
    plan = plan_for_job(request, Machine.detect(), group, free_gpus)
    backend_for(plan.type).set_device(plan.device)  # so nothing lands on cuda:0 by default
    if plan.backend:
        distributed.start(group, plan.backend, plan.device, request.timeout)
    chosen = f", chosen by device={request.name} because {plan.reason}" if plan.reason else ""
    log.info("device: %s%s", plan, chosen)
    memory.reset_peak_memory(plan)
    autocast_dtype, scaler = precision.autocast_and_scaler(
        precision_name, plan.device, f"{settings_prefix}precision"
    )
    placed = build(placement, device=plan.device)
    memory_format = memory.channels_last(channels_last, plan.device)
    return Runtime(plan, placed, group, autocast_dtype, scaler, memory_format)


def plan_for_job(
    request: DeviceConfig, machine: Machine, group: ProcessGroup, free_gpus: FreeGpus | None
) -> DevicePlan:
    """The request resolved, the GPUs it computes on held in a parallel sweep (`free_gpus`)."""
    if free_gpus is None or not machine.cuda_count:
        return resolve(request, machine, group)
    free_gpu = free_gpus.take(machine.cuda_count) if wants_any_gpu(request) else None
    plan = resolve(request, machine, group, free_gpu)
    free_gpus.hold(plan.gpus)
    return plan


def load_data(config: DatasetConfig, runtime: Runtime, *, training: bool = True) -> ImageData:
    """The dataset (an evaluation's: its test split) with its validation split, if any."""
    data = loading.load(config, processes_here=runtime.group.local_world_size, training=training)
    data = validation.with_validation(data, config)
    if config.preload == Preload.device:
        data = loading.preload(data, runtime.placement, channels_last=runtime.channels_last)
    return data


def with_data_facts(cfg: DictConfig, data: ImageData) -> DictConfig:
    """The config with what the data told of itself: the model's size, a checkpoint's to keep."""
    return OmegaConf.merge(cfg, {"dataset": data.derived()})


@functools.cache  # asked once per process: torch takes seconds to list them
def compile_backends() -> CompileBackends:
    """torch.compile's backends and inductor's modes, for `config.validate` to check against."""
    from torch import _inductor  # (where inductor keeps its modes: no public name has them)

    modes = _inductor.list_mode_options()
    accepted = frozenset(torch.compiler.list_backends(exclude_tags=()))
    uninstalled = {
        backend: package
        for backend, package in BACKEND_PACKAGES.items()
        if backend in accepted and importlib.util.find_spec(package) is None
    }
    return CompileBackends(
        accepted=accepted,
        offered=tuple(b for b in torch.compiler.list_backends() if b not in uninstalled),
        modes=tuple(modes),
        cuda_graph_modes=frozenset(
            mode for mode, options in modes.items() if options.get("triton.cudagraphs")
        ),
        cuda_graph_backends=frozenset({"cudagraphs"}) & accepted,
        debugging=accepted - frozenset(torch.compiler.list_backends(exclude_tags=("debug",))),
        uninstalled=tuple(uninstalled.items()),
    )


# Backends torch lists whatever is installed, and their packages: without, the first step fails.
BACKEND_PACKAGES = {"tvm": "tvm", "openxla": "torch_xla", "openxla_eval": "torch_xla"}


def build_task(config: DictConfig, data: ImageData) -> Task:
    """The task `config` names, refused in one line unless `data` holds the targets it learns."""
    task = tasks.build_task(config, len(data.classes))
    task.refuse_other_data(config.name, data)
    return task


def build_model(
    config: DictConfig, task_option: str, task: Task, data: ImageData, from_checkpoint: bool
) -> nn.Module:
    """The model `config` names, on the host, sized to `data` and the outputs `task` takes."""
    classes = len(data.classes)
    outputs = task.outputs(classes, data.shape)
    return models.build_for(
        config, data.shape, classes, data.name, task_option, outputs, from_checkpoint
    )


def place_model(
    model: nn.Module,
    runtime: Runtime,
    compile_backend: str | None = None,
    sync_batchnorm: bool = False,
    compile_mode: str | None = None,
) -> nn.Module:
    """The model on its device and memory format, wrapped for several GPUs, compiled as asked."""
    model = runtime.placement.module(model)
    if runtime.channels_last:
        model = model.to(memory_format=torch.channels_last)
    model = wrapping.parallelize(model, runtime.plan, runtime.autocast_dtype, sync_batchnorm)
    if compile_backend:
        model = torch.compile(model, backend=compile_backend, mode=compile_mode)
    return model


def uses_cuda_graphs(backend: str | None, compile_mode: str | None) -> bool:
    """Whether the compiled model replays CUDA graphs (each step then marks its beginning)."""
    if not backend:
        return False
    known = compile_backends()
    return backend in known.cuda_graph_backends or compile_mode in known.cuda_graph_modes


def check_compiling(
    prefix: str, settings: DictConfig, request: DeviceConfig, runtime: Runtime
) -> None:
    """A backend or mode capturing CUDA graphs refused on no GPU; a debugging one warned of."""
    backend, mode = settings.compile, settings.get("compile_mode")
    if not backend:
        return
    known = compile_backends()
    where = f"device={request_text(request)} resolved to {runtime.plan}, which"
    replays = runtime.backend.replays_cuda_graphs
    if not replays and backend in known.cuda_graph_backends:
        raise ExperimentError(cuda_graphs_need_a_gpu(f"{prefix}compile", backend, where))
    if not replays and mode in known.cuda_graph_modes:
        raise ExperimentError(cuda_graphs_need_a_gpu(f"{prefix}compile_mode", mode, where))
    if backend in known.debugging:
        log.warning(debugging_backend(f"{prefix}compile", backend))
