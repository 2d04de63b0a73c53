"""`python -m experiments.devices`: what this machine offers, and how device overrides resolve."""

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
from experiments.core.text import display_path, gpu_name, short_count
from experiments.devices.backends.cpu import cpu_name
from experiments.devices.backends.registry import backend_for
from experiments.devices.description import torch_build
from experiments.devices.measuring.energy import EnergyMeter
from experiments.devices.measuring.peak_cache import PeakCache
from experiments.devices.plan import Machine, request_text, resolve
from experiments.devices.process_group import TORCHRUN, ProcessGroup
from experiments.devices.process_settings import number_gpus_by_bus

USAGE = """usage: python -m experiments.devices [--measure-peaks] [device overrides]
Lists this machine's CPU and GPUs, whether the energy they use can be read here and from what,
the peaks measured on them (kept per user: every run divides its training FLOP/s by its
device's, its MFU) and what device=auto picks; --measure-peaks measures every device's peaks
afresh in each precision first, and keeps them (run it on a quiet machine).
With device overrides (those of python train.py, e.g. device=cuda:1 or device=dp
'device.ids=[0,1]'), how that request resolves here, or why it cannot (exit code 1)."""

MEASURE_PEAKS = "--measure-peaks"


def main(argv: Sequence[str] | None = None) -> int:
    number_gpus_by_bus()  # as every job does, so cuda:N names the same GPU here
    overrides = list(sys.argv[1:] if argv is None else argv)
    if {"-h", "--help"} & set(overrides):
        print(USAGE)
        return 0
    measure_peaks = MEASURE_PEAKS in overrides
    overrides = [argument for argument in overrides if argument != MEASURE_PEAKS]
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
    _say_energy(machine.cuda_count)
    _say_peaks(machine.cuda_count, measure_peaks)
    auto = resolve(DeviceConfig(DeviceName.auto), machine)
    print(f"device=auto picks {auto}: {auto.reason}")
    if not overrides:
        return 0
    try:
        refuse_numbers_for_groups(overrides)
        request = _composed_device(overrides)
        if request.name == DeviceName.ddp:
            # What each of torchrun's processes would get: one per GPU (or two on the CPU).
            count = max(machine.cuda_count, 2)
            for rank in range(count):
                group = ProcessGroup(rank, count, rank, count, launcher=TORCHRUN)
                print(f"device=ddp, process {rank} of {count}: {resolve(request, machine, group)}")
        else:
            print(f"device={request_text(request)}: {resolve(request, machine)}")
    except Exception as error:
        print(f"Error: {one_line(error)}", file=sys.stderr)
        return 1
    return 0


def _say_energy(cuda_count: int) -> None:
    print(f"energy on cpu: {EnergyMeter.for_devices([torch.device('cpu')]).text()}")
    if cuda_count:
        gpus = [torch.device("cuda", index) for index in range(cuda_count)]
        print(f"energy on {', '.join(map(str, gpus))}: {EnergyMeter.for_devices(gpus).text()}")


def _say_peaks(cuda_count: int, measure: bool) -> None:
    # Kept even where other work shared the CPU (a run keeps only quiet peaks): run it quietly.
    cache = PeakCache(judge_load=not measure)
    devices = [torch.device("cpu"), *(torch.device("cuda", index) for index in range(cuda_count))]
    if measure:
        for device in devices:
            for autocast_dtype, convolutions_lead in backend_for(device.type).peak_kinds():
                cache.peak(device, autocast_dtype, convolutions_lead, fresh=True)
    identities = [(str(device), backend_for(device.type).identity(device)) for device in devices]
    kept = cache.entries().values()
    where = display_path(cache.path)
    print(f"peaks measured here ({where}; a run measures the one it needs once):")
    for name, identity in identities:
        own = (identity.name, identity.uuid)
        mine = [entry for entry in kept if (entry.device, entry.uuid) == own]
        for entry in mine:
            count = entry.threads
            threads = f", {count} thread{'s' * (count > 1)}" if count is not None else ""
            print(
                f"  {name}: {short_count(entry.flops_per_second)} FLOP/s in {entry.precision} "
                f"({entry.operations}; torch {entry.torch}{threads}, {entry.measured_at[:10]})"
            )
        if not mine:
            print(f"  {name}: none yet ({MEASURE_PEAKS} measures them)")


def _composed_device(overrides: list[str]) -> DictConfig:
    register_configs(datetime.now(), new_tag())
    with initialize_config_module(CONFIG_PACKAGE, version_base="1.3"):
        return compose(config_name="train", overrides=overrides).device
