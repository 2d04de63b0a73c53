"""The device's measured peak, the compute bound's numerator: measured in the run's precision, with
enough work to fill a large GPU, timed on the GPU (CUDA events), quick on the CPU."""

from __future__ import annotations

import pytest
import torch

from experiments.devices.backends import cuda as cuda_backend
from experiments.devices.backends.registry import backend_for
from experiments.devices.measuring import peak


@pytest.mark.parametrize(
    ("device_type", "autocast_dtype", "tf32", "lead", "dtype", "size", "precision", "also"),
    [
        # A GPU's fp32 runs convolutions in TF32 by default (Ampere and later): so is the peak.
        ("cuda", None, True, "conv", torch.float32, 8192, "tf32", False),
        ("cuda", None, False, "mm", torch.float32, 4096, "fp32", False),
        ("cuda", torch.bfloat16, True, "conv", torch.bfloat16, 8192, "bf16", False),
        ("cuda", torch.float16, False, "mm", torch.float16, 8192, "fp16", False),
        ("cpu", None, True, "mm", torch.float32, 1024, "fp32", False),  # no TF32 on a CPU
        # Emulated on most CPUs, where oneDNN's convolutions run far faster than products.
        ("cpu", torch.bfloat16, False, "conv", torch.bfloat16, 256, "bf16", True),
        ("cpu", torch.bfloat16, False, "mm", torch.bfloat16, 256, "bf16", False),
    ],
)
def test_the_peak_is_measured_in_the_runs_precision(
    device_type: str,
    autocast_dtype: torch.dtype | None,
    tf32: bool,
    lead: str,
    dtype: torch.dtype,
    size: int,
    precision: str,
    also: bool,
) -> None:
    backend = backend_for(device_type)
    how = backend.peak_measurement(autocast_dtype, tf32, convolutions_lead=lead == "conv")
    assert (how.dtype, how.size, how.precision) == (dtype, size, precision)
    assert how.tf32 == (precision == "tf32")
    assert how.convolutions is also
    if device_type == "cuda":  # back to back, so that no launch's overhead is in the time
        assert how.products >= 4 and how.warm_up >= 1


@pytest.mark.parametrize(
    ("capability", "convolutions_lead", "convolutions_in_tf32", "products_in_tf32", "tf32"),
    [
        # torch's defaults on an H100: cuDNN's convolutions in TF32, cuBLAS's products not.
        ((9, 0), True, True, False, True),
        ((9, 0), False, True, False, False),  # an MLP: its products run in full fp32
        ((9, 0), False, True, True, True),  # torch.set_float32_matmul_precision("high")
        ((8, 0), True, False, True, False),  # torch.backends.cudnn.allow_tf32 = False
        ((7, 0), True, True, True, False),  # a V100 has no TF32 units
    ],
)
def test_fp32_is_measured_in_the_precision_of_the_models_leading_operations(
    capability: tuple[int, int],
    convolutions_lead: bool,
    convolutions_in_tf32: bool,
    products_in_tf32: bool,
    tf32: bool,
) -> None:
    assert (
        cuda_backend.runs_in_tf32(
            capability,
            convolutions_lead,
            convolutions_in_tf32=convolutions_in_tf32,
            products_in_tf32=products_in_tf32,
        )
        is tf32
    )


def test_the_cpu_peak_is_plausible_and_in_the_runs_dtype() -> None:
    # Quick by its sizes (above): 0.2-0.5 s for both here.
    fp32 = peak.measure(torch.device("cpu"), None, convolutions_lead=True)
    bf16 = peak.measure(torch.device("cpu"), torch.bfloat16, convolutions_lead=True)
    assert fp32.precision == "fp32" and bf16.precision == "bf16"
    # Any CPU of this century multiplies fp32 matrices faster than 0.1 GFLOP/s; none at 100 T.
    assert 1e8 < fp32.flops_per_second < 1e14
    assert 0 < bf16.flops_per_second < 1e14


@pytest.mark.gpu
def test_a_gpus_peak_is_timed_on_the_gpu_in_each_precision() -> None:
    cuda = torch.device("cuda", 0)
    settings = torch.get_float32_matmul_precision()
    measurement = backend_for("cuda").peak_measurement
    fp32 = peak.matmul_flops_per_second(cuda, measurement(None, False, False))
    tf32 = peak.matmul_flops_per_second(cuda, measurement(None, True, False))
    bf16 = peak.measure(cuda, torch.bfloat16, convolutions_lead=False)
    assert torch.get_float32_matmul_precision() == settings  # the run's own, put back
    assert bf16.precision == "bf16"
    assert all(1e11 < flops < 1e16 for flops in (fp32, tf32, bf16.flops_per_second))
    if torch.cuda.get_device_capability(cuda) >= (8, 0):  # tensor cores for TF32 and bf16
        # cuDNN's default for convolutions is TF32; torch's for matrix products is full fp32.
        assert peak.measure(cuda, None, convolutions_lead=True).precision == "tf32"
        assert peak.measure(cuda, None, convolutions_lead=False).precision == "fp32"
        # At least twice fp32's rate on every such GPU (GeForce cards' TF32 only matches fp32).
        assert bf16.flops_per_second > 1.5 * fp32


def test_measuring_a_peak_leaves_the_runs_generators_as_they_were() -> None:
    # A peak measured after the run is seeded (a cold cache) must leave the run's later draws,
    # dropout's among them, as a cached peak (a warm one) does.
    small = peak.Measurement(torch.float32, False, 64, 2, 1, 1, convolutions=True)
    torch.manual_seed(0)
    peak.flops_per_second(torch.device("cpu"), small)
    measured_first = torch.rand(4)
    torch.manual_seed(0)
    assert torch.equal(measured_first, torch.rand(4))


@pytest.mark.gpu
def test_measuring_a_gpus_peak_leaves_its_generator_as_it_was() -> None:
    cuda = torch.device("cuda", 0)
    small = peak.Measurement(torch.float32, False, 256, 2, 1, 1, convolutions=True)
    torch.cuda.manual_seed(0)
    peak.flops_per_second(cuda, small)
    measured_first = torch.rand(4, device=cuda)
    torch.cuda.manual_seed(0)
    assert torch.equal(measured_first, torch.rand(4, device=cuda))
