"""A device's compute bound, measured: the floating-point operations per second of large square
matrix products in the run's precision. A run's images/s cannot beat this over its model's FLOPs
per training image (times the GPUs it computes on), so the report draws that as the model's bound
on that device (trainer.measure_peak_flops, set by experiment=device_scaling).

On a GPU the products run back to back after a warm-up, timed with CUDA events, large enough to
fill an H100. fp32 is measured in the precision the model's leading operations compute in: TF32
for convolutions where cuDNN may use it (its default on Ampere and later), and for matrix products
only where cuBLAS may (torch's default is full fp32). bf16 and fp16 are measured on the tensor
cores their autocast uses. On the CPU a smaller measurement is timed with the host's clock; for a
model led by convolutions, channels-last convolutions are timed too and the faster taken: on a CPU
without bf16 units oneDNN's bf16 convolutions far outrun bf16 matrix products (docs/speed.md,
Utilization), so a peak of products alone is one such a model beats.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from experiments.core.text import short_count
from experiments.devices.backends.base import Measurement
from experiments.devices.backends.registry import backend_for


@dataclass(frozen=True)
class Peak:
    """A measured peak, and the precision it was measured in (`Measurement.precision`)."""

    flops_per_second: float
    precision: str


def measure(
    device: torch.device, autocast_dtype: torch.dtype | None, convolutions_lead: bool
) -> Peak:
    """The peak FLOP/s of `device` in the precision of a run that autocasts to `autocast_dtype`
    (None: fp32) a model whose FLOPs are mostly convolutions (`convolutions_lead`) or matrix
    products, and that precision's name."""
    how = measurement(device, autocast_dtype, convolutions_lead)
    return Peak(flops_per_second(device, how), how.precision)


def measurement(
    device: torch.device, autocast_dtype: torch.dtype | None, convolutions_lead: bool
) -> Measurement:
    """How the peak of `device` is measured for a run that autocasts to `autocast_dtype` a model
    led by convolutions (`convolutions_lead`) or by matrix products: its precision is known
    before anything is measured (what a cached peak is looked up by)."""
    backend = backend_for(device.type)
    tf32 = backend.tf32_in_use(device, convolutions_lead)
    return backend.peak_measurement(autocast_dtype, tf32, convolutions_lead)


def flops_per_second(device: torch.device, how: Measurement) -> float:
    """The peak `how` measures on `device`: its products', or its convolutions' where faster."""
    products = matmul_flops_per_second(device, how)
    return (
        max(products, convolution_flops_per_second(device, how)) if how.convolutions else products
    )


def matmul_flops_per_second(device: torch.device, how: Measurement) -> float:
    """The best of `how.timings` timings or more of products on `device` (a product is
    2 * size**3 operations: a multiply-add is two, as the model's count has it)."""
    a, b = _operands(device, how.dtype, (how.size, how.size), (how.size, how.size))
    product = torch.empty_like(a)

    def products(count: int) -> None:
        for _ in range(count):
            torch.mm(a, b, out=product)

    with _matmul_tf32(how.tf32):
        products(how.warm_up)  # cuBLAS chooses its kernel, the clocks rise
        best = _best_seconds(lambda: products(how.products), device, how)
    return 2 * how.size**3 * how.products / best


def convolution_flops_per_second(device: torch.device, how: Measurement) -> float:
    """The best of `how.timings` timings or more of a 5 x 5 convolution of 64 channels over
    32 x 32 images in channels-last memory (as a model of convolutions runs on the CPU by
    default), in `how.dtype`: a batch of 32 in fp32 (some 7 GFLOPs), 8 in the precisions a CPU
    emulates."""
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
    """Random tensors of `shapes` to time work on, drawn from a generator of their own: a peak
    measured after the run is seeded leaves the run's draws as a cached peak would."""
    generator = torch.Generator(device=device).manual_seed(0)
    return [torch.randn(shape, generator=generator, device=device, dtype=dtype) for shape in shapes]


def _best_seconds(work: Callable[[], None], device: torch.device, how: Measurement) -> float:
    """The shortest of `how.timings` timings of `work` or more, timed on until
    `how.least_seconds` have gone by."""
    started, timings = time.perf_counter(), []
    while len(timings) < how.timings or time.perf_counter() - started < how.least_seconds:
        timings.append(_seconds(work, device))
    return min(timings)


def _seconds(work: Callable[[], None], device: torch.device) -> float:
    """How long `work` takes on `device`: between marks in its queue of work around it (CUDA
    events on a GPU, whose host returns before the GPU is done; the host's clock on the CPU)."""
    backend = backend_for(device.type)
    start = backend.mark(device)
    work()
    return backend.mark(device).seconds_since(start)


@contextmanager
def _matmul_tf32(enabled: bool) -> Iterator[None]:
    """cuBLAS's fp32 products in TF32 while a TF32 peak is measured (the run's convolutions may
    use TF32 where its products do not); the run's setting again after."""
    if not enabled:
        yield
        return
    was = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(was)


@dataclass(frozen=True)
class Utilization:
    """What a run's training made of its devices' peak: its model FLOPs utilization (`mfu`, a
    share of 1), or None, with `note` saying why, where the run beat the peak: a peak that is
    wrong (measured while the device was busy) gives no MFU."""

    mfu: float | None
    note: str | None = None


def utilization(
    training_flops_per_image: int, images_per_second: float, peak: Peak, devices: int, on: str
) -> Utilization:
    """The training FLOP/s a run achieved (FLOPs per training image, forward and backward, times
    its images/s) over the peak of its `devices` (each `peak`), `on` naming them."""
    share = training_flops_per_image * images_per_second / (peak.flops_per_second * devices)
    if share <= 1:
        return Utilization(share)
    return Utilization(
        None,
        f"no MFU: training ran at {share:.2f}x the {peak.precision} peak measured on {on} "
        f"({short_count(peak.flops_per_second)} FLOP/s{' each' if devices > 1 else ''}), so that "
        "peak is wrong (measured while the device was busy?); the next run measures it again",
    )
