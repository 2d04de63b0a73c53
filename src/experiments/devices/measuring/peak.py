"""A device's compute bound, measured in the precision of a run's leading operations: its MFU's."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

import torch

from experiments.core.text import short_count
from experiments.devices.backends.base import Measurement
from experiments.devices.backends.registry import backend_for
from experiments.devices.measuring.datasheet import DatasheetPeak


@dataclass(frozen=True)
class Peak:
    flops_per_second: float
    precision: str


def measure(
    device: torch.device, autocast_dtype: torch.dtype | None, convolutions_lead: bool
) -> Peak:
    """The peak of `device` for a run in `autocast_dtype` (None: fp32) of a model so led."""
    how = measurement(device, autocast_dtype, convolutions_lead)
    return Peak(flops_per_second(device, how), how.precision)


def measurement(
    device: torch.device, autocast_dtype: torch.dtype | None, convolutions_lead: bool
) -> Measurement:
    """How `measure` measures: its precision, known beforehand, is what the cache is read by."""
    backend = backend_for(device.type)
    tf32 = backend.tf32_in_use(device, convolutions_lead)
    return backend.peak_measurement(autocast_dtype, tf32, convolutions_lead)


def flops_per_second(device: torch.device, how: Measurement) -> float:
    """The peak `how` measures on `device`: its products', or its convolutions' where faster."""
    products = matmul_flops_per_second(device, how)
    if not how.convolutions:
        return products
    return max(products, convolution_flops_per_second(device, how))


def matmul_flops_per_second(device: torch.device, how: Measurement) -> float:
    """The best timing of products on `device` (a multiply-add is two FLOPs, as the model's)."""
    a, b = _operands(device, how.dtype, (how.size, how.size), (how.size, how.size))
    product = torch.empty_like(a)

    def products(count: int) -> None:
        for _ in range(count):
            torch.mm(a, b, out=product)

    with _matmul_tf32() if how.tf32 else nullcontext():
        products(how.warm_up)  # cuBLAS chooses its kernel, the clocks rise
        best = _best_seconds(lambda: products(how.products), device, how)
    return 2 * how.size**3 * how.products / best


def convolution_flops_per_second(device: torch.device, how: Measurement) -> float:
    """The best timing of channels-last convolutions (the CPU's default), fewer images emulated."""
    batch, channels, side, kernel = (32 if how.dtype == torch.float32 else 8), 64, 32, 5
    images, weight = _operands(
        device, how.dtype, (batch, channels, side, side), (channels, channels, kernel, kernel)
    )
    images, weight = (x.contiguous(memory_format=torch.channels_last) for x in (images, weight))

    def convolutions(count: int) -> None:
        for _ in range(count):
            torch.nn.functional.conv2d(images, weight, padding=kernel // 2)

    convolutions(how.warm_up)
    best = _best_seconds(lambda: convolutions(how.products), device, how)
    return 2 * batch * channels * channels * kernel**2 * side**2 * how.products / best


def _operands(
    device: torch.device, dtype: torch.dtype, *shapes: tuple[int, ...]
) -> list[torch.Tensor]:
    """Random tensors of `shapes`, from a generator of their own: the run's draws stay as seeded."""
    generator = torch.Generator(device=device).manual_seed(0)
    return [torch.randn(shape, generator=generator, device=device, dtype=dtype) for shape in shapes]


def _best_seconds(work: Callable[[], None], device: torch.device, how: Measurement) -> float:
    """The shortest of `how.timings` timings of `work` or more, for `how.least_seconds` at least."""
    backend = backend_for(device.type)
    started, timings = time.perf_counter(), []
    while len(timings) < how.timings or time.perf_counter() - started < how.least_seconds:
        start = backend.mark(device)
        work()
        timings.append(backend.mark(device).seconds_since(start))
    return min(timings)


@contextmanager
def _matmul_tf32() -> Iterator[None]:
    """cuBLAS's fp32 products in TF32 while a TF32 peak is measured; the run's setting after."""
    was = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(was)


@dataclass(frozen=True)
class Utilization:
    """A run's model FLOPs utilization (a share of 1), or None where it beat a wrong peak."""

    mfu: float | None
    note: str | None = None


def utilization(
    training_flops_per_image: int, images_per_second: float, peak: Peak, devices: int, on: str
) -> Utilization:
    """The run's training FLOP/s over the peak of its `devices` (each `peak`), `on` naming them."""
    return _share(
        training_flops_per_image * images_per_second,
        peak.flops_per_second,
        devices,
        lambda share, each: (
            f"no MFU: training ran at {share:.2f}x the {peak.precision} peak measured on {on} "
            f"({short_count(peak.flops_per_second)} FLOP/s{each}), so that peak is wrong "
            "(measured while the device was busy?); the next run measures it again"
        ),
    )


def datasheet_utilization(
    training_flops_per_image: int,
    images_per_second: float,
    stated: DatasheetPeak,
    precision: str,
    devices: int,
) -> Utilization:
    """The run's training FLOP/s over `stated` (one device's, in `precision`) times `devices`: its
    MFU as tables that quote datasheets give it; None where the run beat that figure."""
    return _share(
        training_flops_per_image * images_per_second,
        stated.flops_per_second,
        devices,
        lambda share, each: (
            f"no MFU against {stated.named(precision)}: training ran at {share:.2f}x its "
            f"{short_count(stated.flops_per_second)} FLOP/s{each}, so that figure is not this "
            "device's"
        ),
    )


def _share(
    achieved: float, peak_flops: float, devices: int, beaten: Callable[[float, str], str]
) -> Utilization:
    # The achieved FLOP/s over the devices' peak; above 1 the peak is wrong, and `beaten` says so.
    share = achieved / (peak_flops * devices)
    return (
        Utilization(share)
        if share <= 1
        else Utilization(None, beaten(share, " each" * (devices > 1)))
    )
