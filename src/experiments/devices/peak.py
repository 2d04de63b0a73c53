"""A device's compute bound, measured: the floating-point operations per second of large square
matrix products in the run's precision. A run's images/s cannot beat this over its model's FLOPs
per training image (times the GPUs it computes on), so the report draws that as the model's bound
on that device (trainer.measure_peak_flops, set by experiment=device_scaling).

On a GPU the products run back to back after a warm-up, timed with CUDA events, so neither the
launches nor the host's clock are in the time; they are large enough to fill an H100. fp32 is
measured in the precision the model's leading operations compute in: TF32 for a model of
convolutions where cuDNN may use it (its default on Ampere and later), and for one of matrix
products (an MLP) only where cuBLAS may (torch's default is full fp32: its peak is several times
lower). bf16 and fp16 are measured on the tensor cores their autocast uses. On the CPU a quick,
smaller measurement is timed with the host's clock; for a model led by convolutions, channels-last
convolutions are timed too and the faster taken: oneDNN's bf16 convolutions run about ten times as
fast as bf16 matrix products on a CPU without bf16 units (a 2-core AMD EPYC: 14-18 against 1.3
GFLOP/s), so a peak of products alone is one that such a model beats.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from experiments.core.text import short_count

# What the report and results.json call each precision a peak was measured in.
PRECISION_NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}


@dataclass(frozen=True)
class Measurement:
    """How a peak is measured: `timings` timings of `products` back-to-back `size` x `size`
    products in `dtype` (with TF32 where `tf32`), the best taken, after `warm_up` products; with
    `convolutions`, channels-last convolutions timed alike, the faster taken."""

    dtype: torch.dtype
    tf32: bool
    size: int
    products: int
    timings: int
    warm_up: int
    convolutions: bool = False
    # Timed on for at least this long (more timings than `timings`): on the CPU, long enough
    # for /proc to tell whether other work shared it meanwhile (`devices.host_load`), and for
    # a moment of it to be passed over by the best timing.
    least_seconds: float = 0.0

    @property
    def precision(self) -> str:
        """fp32, tf32, bf16 or fp16: what results.json records as `device_peak_precision`."""
        return "tf32" if self.tf32 else PRECISION_NAMES[self.dtype]

    @property
    def operations(self) -> str:
        """What was timed: a peak's cache keeps peaks of different operations apart."""
        return "products and convolutions" if self.convolutions else "products"


@dataclass(frozen=True)
class Peak:
    """A measured peak, and the precision it was measured in (`Measurement.precision`)."""

    flops_per_second: float
    precision: str


def measurement_for(
    device_type: str, autocast_dtype: torch.dtype | None, tf32: bool, convolutions_lead: bool
) -> Measurement:
    """How to measure the peak a run on `device_type` can reach: in its autocast dtype (None:
    fp32, with TF32 where `tf32`, that is where the run's fp32 may use it on this GPU); on the
    CPU, its convolutions too where they lead the model's FLOPs."""
    dtype = autocast_dtype or torch.float32
    uses_tf32 = tf32 and device_type == "cuda" and dtype == torch.float32
    if device_type == "cuda":
        # Large enough to fill an H100's units (its plain fp32 ones are about 7 times slower than
        # TF32's, so half the size does), several products per timing, so one launch is nothing.
        tensor_cores = uses_tf32 or dtype != torch.float32
        return Measurement(dtype, uses_tf32, 8192 if tensor_cores else 4096, 4, 5, 4)
    # Well under a second: most CPUs emulate bfloat16, at a hundredth of fp32's speed.
    size = 1024 if dtype == torch.float32 else 256
    return Measurement(
        dtype, False, size, 1, 3, 1, convolutions=convolutions_lead, least_seconds=0.5
    )


def tf32_in_use(device: torch.device, convolutions_lead: bool) -> bool:
    """Whether a model's fp32 operations on `device` compute in TF32: its convolutions (where
    they `lead` its FLOPs) as cuDNN's setting says, its matrix products as cuBLAS's does."""
    if device.type != "cuda":
        return False
    return runs_in_tf32(
        torch.cuda.get_device_capability(device),
        convolutions_lead,
        convolutions_in_tf32=_convolutions_in_tf32(),
        products_in_tf32=torch.get_float32_matmul_precision() != "highest",
    )


def runs_in_tf32(
    capability: tuple[int, int],
    convolutions_lead: bool,
    *,
    convolutions_in_tf32: bool,
    products_in_tf32: bool,
) -> bool:
    """Whether fp32 work led by convolutions (else by matrix products) computes in TF32 on a GPU
    of compute `capability` (TF32 units: Ampere, 8.0, and later), given cuDNN's and cuBLAS's
    settings."""
    if capability < (8, 0):
        return False
    return convolutions_in_tf32 if convolutions_lead else products_in_tf32


def _convolutions_in_tf32() -> bool:
    # torch 2.9 and later have a setting per operation; reading the older flag where either was
    # set the newer way raises.
    newer = getattr(getattr(torch.backends.cudnn, "conv", None), "fp32_precision", None)
    return torch.backends.cudnn.allow_tf32 if newer is None else newer == "tf32"


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
    tf32 = tf32_in_use(device, convolutions_lead)
    return measurement_for(device.type, autocast_dtype, tf32, convolutions_lead)


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
    """How long `work` takes on `device`: between CUDA events around it on a GPU (the host
    returns before the GPU is done), by the host's clock on the CPU."""
    if device.type != "cuda":
        start = time.perf_counter()
        work()
        return time.perf_counter() - start
    with torch.cuda.device(device):
        start_event, end_event = (torch.cuda.Event(enable_timing=True) for _ in range(2))
        start_event.record()
        work()
        end_event.record()
        end_event.synchronize()
        return start_event.elapsed_time(end_event) / 1000


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


# The most FLOP/s a device of each kind can do, well above any made, so that a peak beyond it (a
# cache edited or damaged) is refused, not divided by. A CPU thread (torch computes on one per
# core): AVX-512's two FMA units do 64 fp32 FLOPs a cycle, 320 G at 5 GHz, so 1 T; AMX's tiles 1,024
# bf16 FLOPs a cycle, 5 T, so 10 T in bf16 and fp16. A GPU: a B200's dense bf16 is 2.25 P, its TF32
# and fp32 less, so 10 P in any precision.
CPU_THREAD_MOST_FLOPS = {"fp32": 1e12, "bf16": 1e13, "fp16": 1e13}
GPU_MOST_FLOPS = 1e16


def most_possible(device_type: str, precision: str, threads: int) -> float:
    """The most FLOP/s any device of `device_type` can do in `precision` (on the CPU, computing
    on `threads` threads): a measurement above it is wrong."""
    if device_type == "cuda":
        return GPU_MOST_FLOPS
    return CPU_THREAD_MOST_FLOPS.get(precision, max(CPU_THREAD_MOST_FLOPS.values())) * threads


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
