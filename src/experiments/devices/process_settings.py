"""What a job sets for its whole process, put back when it ends: a sweep's jobs may share one."""

from __future__ import annotations

import gc
import os
import traceback
from collections.abc import Collection, Iterator
from contextlib import contextmanager, nullcontext, suppress
from pathlib import Path

import torch

from experiments.core.errors import ExperimentError, one_line
from experiments.devices.free_cores import CoreShare
from experiments.devices.free_gpus import FreeGpus

# The fixed workspace cuBLAS needs to be deterministic, and those torch accepts as such.
CUBLAS_WORKSPACE = ":4096:8"
DETERMINISTIC_CUBLAS_WORKSPACES = (CUBLAS_WORKSPACE, ":16:8")
SAVED_ENVIRONMENT = ("CUDA_VISIBLE_DEVICES",)

# CUDA_VISIBLE_DEVICES and CUBLAS_WORKSPACE_CONFIG as CUDA started with them (empty: not known).
_cuda_started_with: list[str | None] = []
_cublas_workspace_at_cuda_start: list[str | None] = []
# The sticky CUDA error (a device-side assert, ...) that left CUDA unusable in this process.
_cuda_failed_with: list[str] = []


def number_gpus_by_bus() -> None:
    """Number GPUs in PCI bus order, as nvidia-smi does, unless the environment says otherwise."""
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")


def fix_cublas_workspace() -> None:
    """Give cuBLAS a deterministic workspace before CUDA starts; one already set stands."""
    found = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
    if not torch.cuda.is_initialized():
        _cublas_workspace_at_cuda_start[:] = [os.environ["CUBLAS_WORKSPACE_CONFIG"]]
    elif not _cublas_workspace_at_cuda_start:  # CUDA started before any job of this process
        _cublas_workspace_at_cuda_start[:] = [found]


def refuse_nondeterministic_cublas() -> None:
    """Refuse a deterministic job on a GPU whose CUDA started without a deterministic workspace."""
    if why := nondeterministic_cublas(_cublas_workspace_at_cuda_start):
        raise ExperimentError(why)


def nondeterministic_cublas(at_cuda_start: list[str | None]) -> str | None:
    """Why cuBLAS cannot be deterministic with the workspace `at_cuda_start` holds, if it can't."""
    if not at_cuda_start or at_cuda_start[0] in DETERMINISTIC_CUBLAS_WORKSPACES:
        return None
    started = "unset" if at_cuda_start[0] is None else f"={at_cuda_start[0]}"
    return (
        f"trainer.deterministic=true on a GPU needs CUBLAS_WORKSPACE_CONFIG={CUBLAS_WORKSPACE} "
        f"(or :16:8) from CUDA's start, but CUDA started in this process with it {started}, and "
        "cuBLAS reads it only then; set it before the process starts "
        f"(CUBLAS_WORKSPACE_CONFIG={CUBLAS_WORKSPACE} python ...), or train in a process of its own"
    )


def apply(
    visible: list[int] | None,
    threads: int | None,
    deterministic: bool,
    *,
    cudnn_benchmark: bool = False,
) -> None:
    """A job's settings for its whole process, the GPUs first; determinism beats benchmarking."""
    number_gpus_by_bus()
    fix_cublas_workspace()
    set_visible_gpus(visible)
    if threads is not None:
        torch.set_num_threads(threads)
    torch.backends.cudnn.benchmark = cudnn_benchmark and not deterministic
    if deterministic:
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.deterministic = True


@contextmanager
def isolated_job(free_gpus: FreeGpus | None) -> Iterator[None]:
    """One job of this process: its settings and memory handed back, then its GPU to `free_gpus`."""
    with free_gpus or nullcontext(), restored():
        yield


@contextmanager
def restored() -> Iterator[None]:
    """When the block (a job) ends, put back what `apply` set (but cuBLAS's), free its tensors."""
    environment = {name: os.environ.get(name) for name in SAVED_ENVIRONMENT}
    threads = torch.get_num_threads()
    algorithms = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    cudnn = (torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic)
    gc.freeze()  # what lives before the job is the process's: collect only the job's after
    try:
        yield
    except BaseException as error:
        _let_go_of_frames(error)
        raise
    finally:
        for name, value in environment.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if torch.get_num_threads() != threads:  # resizing torch's thread pools is not free
            torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(algorithms, warn_only=warn_only)
        torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = cudnn
        gc.collect()  # a model in reference cycles (DDP's) is freed only by the collector
        gc.unfreeze()  # (what the job left behind, then, the process's next full collection)
        _hand_back_cached_gpu_memory()


def _hand_back_cached_gpu_memory() -> None:
    """Empty CUDA's cache; where a sticky CUDA error fails it, the job's own error stands."""
    if not torch.cuda.is_initialized() or _cuda_failed_with:
        return
    try:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    except RuntimeError as error:  # torch.AcceleratorError, a CUDA error
        _cuda_failed_with.append(one_line(error))


def cuda_unusable() -> str | None:
    """The sticky CUDA error, in one line, that left CUDA unusable in this process; else None."""
    return _cuda_failed_with[0] if _cuda_failed_with else None


def _let_go_of_frames(error: BaseException) -> None:
    """Clear the locals (the failed job's model and data) of the finished frames of `error`."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [error]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        traceback.clear_frames(current.__traceback__)  # skips the frames still running
        pending += [current.__cause__, current.__context__]


def set_visible_gpus(visible: list[int] | None) -> None:
    """Let CUDA see only `device.visible`'s GPUs (all it may, for None): call before CUDA starts."""
    mask = visible_mask(os.environ.get("CUDA_VISIBLE_DEVICES"), visible)
    if _cuda_started_with and _cuda_started_with[0] != mask and torch.cuda.is_available():
        started = _cuda_started_with[0]
        raise ExperimentError(
            f"device.visible={visible} needs CUDA_VISIBLE_DEVICES={mask or '(unset)'}, but CUDA "
            f"started in this process with {started or 'every GPU'} for an earlier job and reads "
            "it only once; sweep device.visible with a launcher that starts a process per job "
            "(hydra/launcher=submitit_local)"
        )
    _cuda_started_with[:] = [mask]
    if mask is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = mask


def visible_mask(inherited: str | None, visible: list[int] | None) -> str | None:
    """CUDA_VISIBLE_DEVICES for `device.visible`, counted among the inherited mask's GPUs."""
    if visible is None:
        return inherited
    if inherited is None:
        return ",".join(map(str, visible))
    allowed = [entry.strip() for entry in inherited.split(",") if entry.strip()]
    beyond = [gpu for gpu in visible if gpu >= len(allowed)]
    if beyond:
        raise ExperimentError(
            f"device.visible={list(visible)} names GPU {beyond[0]}, but CUDA_VISIBLE_DEVICES="
            f"{inherited} lets this process see {len(allowed)} GPU(s), numbered from 0; "
            "device.visible counts among those"
        )
    return ",".join(allowed[gpu] for gpu in visible)


@contextmanager
def on_cores(share: CoreShare) -> Iterator[None]:
    """Every thread of this process on `share`'s cores, torch in its threads, until the end."""
    cpus, threads = os.sched_getaffinity(0), torch.get_num_threads()
    _keep_threads_to(share.cpus)
    if share.threads is not None:
        torch.set_num_threads(share.threads)
    try:
        yield
    finally:
        _keep_threads_to(cpus)
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)


def _keep_threads_to(cpus: Collection[int]) -> None:
    # sched_setaffinity(0) moves the calling thread alone: torch's pool, started by an earlier job
    # of this process, would stay where it was. Threads started later inherit their starter's.
    tasks = Path("/proc/self/task")
    for thread in [int(task.name) for task in tasks.iterdir()] if tasks.is_dir() else [0]:
        with suppress(ProcessLookupError):  # it ended meanwhile
            os.sched_setaffinity(thread, cpus)


@contextmanager
def one_thread() -> Iterator[None]:
    """torch's CPU work on one thread in the block: a one-image probe is too small to share."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
