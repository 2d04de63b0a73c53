"""What a training run and an evaluation both set up before their first batch, each step one
function that both call: the job's process settings and the device, decided once into a
`Runtime` and passed on from there; the dataset, where the config wants it (and, for training,
what it told of itself merged into the config); the task, refused for data of another kind; and
the model, built on the host, then on the device, wrapped for several GPUs or processes and
compiled as asked. (The audit that checks it all arrived is
`experiments.devices.placement.audit`.) Each returns what it set up; the caller records it.
"""

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
    """What a job sets for its whole process besides the GPUs it sees
    (`devices.process_settings.apply`): torch's CPU threads (None: torch's default), only
    deterministic algorithms, and cuDNN timing its algorithms to keep the fastest. An
    evaluation's are the defaults."""

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
    """What this process computes on and in: the job's process `settings` applied (the GPUs
    CUDA sees first, before anything asks torch.cuda), then the device request resolved against
    this machine (in a parallel sweep, a GPU no other job holds, if the request leaves it open),
    made the current device and joined to the process group when the run spans processes; with
    the placement method, the precision and the memory format (None: the device's default), as
    the keys under `settings_prefix` ask (the trainer's; eval.py's top level: "")."""
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
    return Runtime(
        plan,
        build(placement, device=plan.device),
        group,
        autocast_dtype,
        scaler,
        memory.channels_last(channels_last, plan.device),
    )


def plan_for_job(
    request: DeviceConfig, machine: Machine, group: ProcessGroup, free_gpus: FreeGpus | None
) -> DevicePlan:
    """The request resolved against `machine`. In a parallel sweep (`free_gpus`), the job holds
    every GPU its plan computes on until it ends: one no other job holds, for a request that
    leaves it open; those it names (cuda:N, dp's), once no other job holds any of them."""
    if free_gpus is None or not machine.cuda_count:
        return resolve(request, machine, group)
    free_gpu = free_gpus.take(machine.cuda_count) if wants_any_gpu(request) else None
    plan = resolve(request, machine, group, free_gpu)
    free_gpus.hold(plan.gpus)
    return plan


def load_data(config: DatasetConfig, runtime: Runtime, *, training: bool = True) -> ImageData:
    """The dataset (for an evaluation, only its test split) with its validation split, if any,
    its in-memory splits moved to the device once if `dataset.preload=device`."""
    processes_here = runtime.group.local_world_size
    data = loading.load(config, processes_here=processes_here, training=training)
    data = validation.with_validation(data, config)
    if config.preload == Preload.device:
        data = loading.preload(data, runtime.placement, channels_last=runtime.channels_last)
    return data


def with_data_facts(cfg: DictConfig, data: ImageData) -> DictConfig:
    """A copy of the run's config with what its data told of itself (its classes, image shape,
    computed mean and std) in the dataset's fields: the model is sized from them (the schemas'
    `${dataset.channels}`), and a checkpoint's config holds them, so an evaluation normalizes
    as training did and knows the classes it was trained on."""
    return OmegaConf.merge(cfg, {"dataset": data.derived()})


@functools.cache  # asked once per process: torch takes seconds to list them
def compile_backends() -> CompileBackends:
    """torch.compile's backends and inductor's modes, for `config.validate` to check
    `trainer.compile` and `trainer.compile_mode` against before the data is loaded and the model
    built (torch.compile would say so only then)."""
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


# The backends torch lists whatever is installed, each with the package it compiles with: without
# it, torch.compile fails only at the first step.
BACKEND_PACKAGES = {"tvm": "tvm", "openxla": "torch_xla", "openxla_eval": "torch_xla"}


def build_task(config: DictConfig, data: ImageData) -> Task:
    """The task the `task` config names, measuring what it does of `data`'s classes, refused
    in one line unless `data` holds the kind of targets it learns."""
    task = tasks.build_task(config, len(data.classes))
    task.refuse_other_data(config.name, data)
    return task


def build_model(
    config: DictConfig, task_option: str, task: Task, data: ImageData, from_checkpoint: bool
) -> nn.Module:
    """The model `config` names, on the host, sized to `data` (its shape, its classes) and to
    the outputs `task` (`task=<task_option>`) takes: a training run's and an evaluation's alike;
    untrained where a checkpoint's weights replace it (`from_checkpoint`)."""
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
    """The model on its device, in its memory format, wrapped for several GPUs or processes (its
    BatchNorm layers synchronized over DDP's processes, with `sync_batchnorm`), and compiled
    with `compile_backend` if one is named (in inductor's `compile_mode`, if one is)."""
    model = runtime.placement.module(model)
    if runtime.channels_last:
        model = model.to(memory_format=torch.channels_last)
    model = wrapping.parallelize(model, runtime.plan, runtime.autocast_dtype, sync_batchnorm)
    if compile_backend:
        model = torch.compile(model, backend=compile_backend, mode=compile_mode)
    return model


def uses_cuda_graphs(backend: str | None, compile_mode: str | None) -> bool:
    """Whether a model compiled by `backend` (null: not compiled) in `compile_mode` replays CUDA
    graphs (the cudagraphs backend, or an inductor mode that captures them: both keep CUDA graph
    trees), whose outputs the next replay overwrites: each step then begins with
    `torch.compiler.cudagraph_mark_step_begin`."""
    if not backend:
        return False
    known = compile_backends()
    return backend in known.cuda_graph_backends or compile_mode in known.cuda_graph_modes


def check_compiling(
    prefix: str, settings: DictConfig, request: DeviceConfig, runtime: Runtime
) -> None:
    """How `settings` (a trainer's, `prefix` trainer.; eval.py's, at the top) compile, once the
    device `request` resolved to is known: a backend or mode that captures CUDA graphs refused in
    one line where it is no GPU (device=cpu is refused before, by `config.validate`); one of
    torch's debugging backends said in one warning."""
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
