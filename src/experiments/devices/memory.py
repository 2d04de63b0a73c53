"""A job's memory: its settings (docs/speed.md), its peak, and running out of GPU memory said."""

from __future__ import annotations

import contextlib
import ctypes
import platform
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import torch

from experiments.core.errors import ExperimentError
from experiments.devices.backends.registry import backend_for
from experiments.devices.plan import DevicePlan

MIB = 2**20

# mallopt(3) parameters, from glibc's malloc.h.
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3


def keep_freed_memory() -> bool:
    """Whether glibc's malloc (on Linux) now keeps freed buffers, not unmapping them each step."""
    if sys.platform != "linux" or platform.libc_ver()[0] != "glibc":
        return False
    libc = ctypes.CDLL("libc.so.6")
    return bool(libc.mallopt(M_MMAP_THRESHOLD, 32 * MIB) and libc.mallopt(M_TRIM_THRESHOLD, 2**30))


def channels_last(requested: bool | None, device: torch.device) -> bool:
    """Whether to use channels-last memory format: as asked, else the device kind's default."""
    return backend_for(device.type).channels_last_by_default if requested is None else requested


def reset_peak_memory(plan: DevicePlan) -> None:
    """Count peak memory from now: the host's (on Linux) and each of the plan's GPUs'."""
    # Writing 5 resets the kernel's peak resident set (VmHWM); elsewhere it counts from the start.
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")
    for device in plan.computes_on:
        backend_for(device.type).reset_peak_memory(device)


def peak_memory_mb(plan: DevicePlan) -> dict[str, float | None]:
    """Peak host resident memory and the peak CUDA memory of the plan's fullest GPU, in MiB."""
    devices = [backend_for(device.type).peak_memory_bytes(device) for device in plan.computes_on]
    own = [peak_memory / MIB for peak_memory in devices if peak_memory is not None]
    cuda = max(own) if own else None
    return {"peak_host_memory_mb": _peak_rss_bytes() / MIB, "peak_cuda_memory_mb": cuda}


ALLOCATOR_SAYS = re.compile(
    r"Tried to allocate (?P<asked>[\d.]+ \w+)\. GPU (?P<gpu>\d+) has a total capacity of "
    r"(?P<total>[\d.]+ \w+) of which (?P<free>[\d.]+ \w+) is free"
)


@contextlib.contextmanager
def out_of_memory_said(
    batch_key: str, batch_size: int | str, accumulate_batches: int | None = None, processes: int = 1
) -> Iterator[None]:
    """Turn running out of GPU memory in the block into one line (`out_of_memory_line`)."""
    try:
        yield
    except torch.OutOfMemoryError as error:
        line = out_of_memory_line(str(error), batch_key, batch_size, accumulate_batches, processes)
        raise ExperimentError(line) from error


def out_of_memory_line(
    message: str,
    batch_key: str,
    batch_size: int | str,
    accumulate_batches: int | None = None,
    processes: int = 1,
) -> str:
    """Running out of GPU memory (torch's `message`) in one line, with a smaller batch to try."""
    said = ALLOCATOR_SAYS.search(message)
    gpu = f"cuda:{said['gpu']}" if said else "the GPU"
    asked = (
        f" (it asked for {said['asked']} more, with {said['free']} of its {said['total']} free)"
        if said
        else ""
    )
    if not isinstance(batch_size, int):  # trainer.batch_size=auto: after its search
        return (
            f"{gpu} ran out of memory at the batch {batch_key}={batch_size} found{asked} (its "
            f"search's step fit; other work on the GPU or later steps took more); give "
            f"{batch_key} a smaller number"
        )
    accumulating = accumulate_batches is not None and accumulate_batches > 1
    setting = f"{batch_key}={batch_size}" + (
        f" and trainer.accumulate_batches={accumulate_batches}" if accumulating else ""
    )
    # The smallest factor that leaves a whole batch, still a multiple of the processes.
    factor = next(
        (
            factor
            for factor in range(2, batch_size + 1)
            if batch_size % factor == 0 and (batch_size // factor) % processes == 0
        ),
        None,
    )
    if factor is None:
        remedy = (
            "use a GPU with more memory, or device=cpu"
            if accumulate_batches is None
            else "use a smaller model, trainer.precision=bf16, or a GPU with more memory"
        )
        return (
            f"{gpu} ran out of memory at {setting}{asked}, with no smaller batch to try; {remedy}"
        )
    smaller = f"{batch_key}={batch_size // factor}"
    if accumulate_batches is None:
        return f"{gpu} ran out of memory at {setting}{asked}; lower {batch_key}, e.g. {smaller}"
    step = batch_size * accumulate_batches
    return (
        f"{gpu} ran out of memory at {setting}{asked}; lower {batch_key} and raise "
        f"trainer.accumulate_batches to keep {step} images to an optimizer step, e.g. {smaller} "
        f"trainer.accumulate_batches={accumulate_batches * factor}"
    )


def _peak_rss_bytes() -> float:
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return float(line.split()[1]) * 1024  # reported in kB
    try:
        import resource  # not on Windows
    except ImportError:
        return float("nan")
    max_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return float(max_rss if sys.platform == "darwin" else max_rss * 1024)  # macOS's is in bytes
