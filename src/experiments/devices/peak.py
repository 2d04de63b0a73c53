"""A device's compute bound, measured: the floating-point operations per second of a large square
fp32 matrix product, the best of a few. A run's images/s cannot beat this over 3x its model's
FLOPs per image (the backward pass costs about twice the forward), so the report draws that as
the model's bound on that device (trainer.measure_peak_flops, set by experiment=device_scaling)."""

from __future__ import annotations

import time

import torch


def matmul_flops_per_second(device: torch.device, size: int = 1024, repeats: int = 5) -> float:
    """The best of `repeats` timed `size` x `size` matrix products on `device`, after one to warm
    up (a product is 2 * size**3 operations: a multiply-add is two, as the model's count has it)."""
    a = torch.randn(size, size, device=device)
    b = torch.randn(size, size, device=device)
    best = float("inf")
    for _ in range(repeats + 1):
        _synchronize(device)
        start = time.perf_counter()
        torch.mm(a, b)
        _synchronize(device)
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":  # the host returns before the GPU is done
        torch.cuda.synchronize(device)
