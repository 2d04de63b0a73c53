"""What a training run and an evaluation both set up before their first batch: the device,
decided once and passed on from there; the dataset, where the config wants it; and the model on
the device, wrapped for several GPUs or processes and compiled as asked. (The audit that checks
it all arrived is `experiments.devices.placement.audit`.)
"""

from __future__ import annotations

import logging

import torch
from torch import nn

from experiments.config.choices import Preload
from experiments.config.schemas import DatasetConfig, DeviceConfig
from experiments.data import loading, validation
from experiments.data.types import ImageData
from experiments.devices import distributed, wrapping
from experiments.devices.free_gpus import FreeGpus
from experiments.devices.memory import reset_peak_memory
from experiments.devices.placement import Placement
from experiments.devices.plan import DevicePlan, Machine, resolve, wants_any_gpu
from experiments.devices.process_group import ProcessGroup

log = logging.getLogger("experiments")


def prepare_device(
    request: DeviceConfig, group: ProcessGroup, free_gpus: FreeGpus | None = None
) -> DevicePlan:
    """The device this process computes on: the request resolved against this machine (in a
    parallel sweep, a GPU no other job holds, if the request leaves it open), made the current
    one, and joined to the process group when the run spans processes."""
    machine = Machine.detect()
    free_gpu = None
    if free_gpus is not None and wants_any_gpu(request) and machine.cuda_count:
        free_gpu = free_gpus.take(machine.cuda_count)
    plan = resolve(request, machine, group, free_gpu)
    if plan.type == "cuda":
        torch.cuda.set_device(plan.index)  # so nothing lands on cuda:0 by default
    if plan.backend:
        distributed.start(group, plan.backend, plan.device, request.timeout)
    chosen = f", chosen by device={request.name} because {plan.reason}" if plan.reason else ""
    log.info("device: %s%s", plan, chosen)
    reset_peak_memory(plan.device)
    return plan


def load_data(
    config: DatasetConfig, placement: Placement, *, processes_here: int = 1, training: bool = True
) -> ImageData:
    """The dataset (for an evaluation, only its test split) with its validation split, if any,
    its in-memory splits moved to the device once if `dataset.preload=device`.

    What the data told (its classes, image shape, computed mean and std) is written into
    `config`, so the model is sized from it and a checkpoint's config holds it: an evaluation
    then normalizes as training did, and knows the classes it was trained on."""
    data = loading.load(config, processes_here=processes_here, training=training)
    data = validation.with_validation(data, config)
    for key, value in data.derived().items():
        config[key] = value
    if config.preload == Preload.device:
        data = loading.preload(data, placement)
    return data


def place_model(
    model: nn.Module,
    placement: Placement,
    plan: DevicePlan,
    *,
    channels_last: bool = False,
    autocast_dtype: torch.dtype | None = None,
    compile_backend: str | None = None,
) -> nn.Module:
    """The model on its device, in its memory format, wrapped for several GPUs or processes, and
    compiled, as asked."""
    model = placement.module(model)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    model = wrapping.parallelize(model, plan, autocast_dtype)
    if compile_backend:
        model = torch.compile(model, backend=compile_backend)
    return model
