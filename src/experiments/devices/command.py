"""`python -m experiments.devices [device overrides]` (experiments-devices): what this machine
offers, and how the device a `python train.py` with these overrides would ask for resolves here,
or why not."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from datetime import datetime

import torch
from hydra import compose, initialize_config_module
from omegaconf import DictConfig

from experiments.config.choices import DeviceName
from experiments.config.overrides import refuse_numbers_for_groups
from experiments.config.schemas import DeviceConfig
from experiments.config.store import CONFIG_PACKAGE, new_tag, register_configs
from experiments.core.errors import one_line
from experiments.core.text import gpu_name
from experiments.devices.description import cpu_name, torch_build
from experiments.devices.plan import Machine, request_text, resolve
from experiments.devices.process_group import ProcessGroup
from experiments.devices.process_settings import number_gpus_by_bus

USAGE = """usage: python -m experiments.devices [device overrides]
Lists this machine's CPU and GPUs and what device=auto picks; with device overrides (those of
python train.py, e.g. device=cuda:1 or device=dp 'device.ids=[0,1]'), how that request resolves
here, or why it cannot (exit code 1)."""


def main(argv: Sequence[str] | None = None) -> int:
    """The machine's CPU and GPUs, what device=auto picks, and how the overrides' device
    resolves; exit code 1 with one line if it cannot."""
    number_gpus_by_bus()  # as every job does, so cuda:N names the same GPU here
    overrides = list(sys.argv[1:] if argv is None else argv)
    if {"-h", "--help"} & set(overrides):
        print(USAGE)
        return 0
    machine = Machine.detect()
    print(f"torch {torch.__version__} ({torch_build()})")
    cores, threads = os.cpu_count(), torch.get_num_threads()
    print(f"cpu: {cpu_name()}, {cores} logical cores, torch uses {threads} threads")
    if machine.cuda_count == 0:
        print(f"cuda: none ({machine.no_cuda_reason})")
    for index in range(machine.cuda_count):
        properties = torch.cuda.get_device_properties(index)
        print(
            f"{gpu_name(index)}: {properties.name}, {properties.total_memory / 2**30:.1f} GiB, "
            f"compute capability {properties.major}.{properties.minor}"
        )
    auto = resolve(DeviceConfig(DeviceName.auto), machine)
    print(f"device=auto picks {auto}: {auto.reason}")
    if not overrides:
        return 0
    try:
        refuse_numbers_for_groups(overrides)
        request = _composed_device(overrides)
        if request.name == DeviceName.ddp:
            # What each of torchrun's processes would get, one per GPU (or two on the CPU).
            count = max(machine.cuda_count, 2)
            for rank in range(count):
                group = ProcessGroup(rank, count, rank, count, torchrun=True)
                plan = resolve(request, machine, group)
                print(f"device=ddp, process {rank} of {count}: {plan}")
        else:
            print(f"device={request_text(request)}: {resolve(request, machine)}")
    except Exception as error:
        print(f"Error: {one_line(error)}", file=sys.stderr)
        return 1
    return 0


def _composed_device(overrides: list[str]) -> DictConfig:
    """The device config `python train.py <overrides>` would get."""
    register_configs(datetime.now(), new_tag())
    with initialize_config_module(CONFIG_PACKAGE, version_base="1.3"):
        return compose(config_name="train", overrides=overrides).device
