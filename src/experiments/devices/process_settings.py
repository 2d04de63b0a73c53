"""What a job sets for its whole process - and takes back when it ends.

A sweep's jobs may share a process (Hydra's basic launcher, a joblib worker), so what one job sets
for the whole process (visible GPUs, deterministic algorithms, cuDNN's flags, CPU threads) is put
back when it ends, and its cached GPU memory handed back, so the next job starts as a fresh process
would.

CUDA reads CUDA_VISIBLE_DEVICES once, when it starts: it is set before anything asks torch.cuda,
and a later job that wants other GPUs says so in one line. cuBLAS reads CUBLAS_WORKSPACE_CONFIG
once too, at the first matrix product: it is set before every job's first and kept. Where CUDA
started before any job set it, a deterministic job on a GPU is refused
(`refuse_nondeterministic_cublas`).

A sticky CUDA error (a device-side assert, an illegal memory access) leaves CUDA unusable for the
rest of the process; the job fails as usual, and `cuda_unusable` tells the caller.
"""

from __future__ import annotations

import gc
import os
import traceback
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext

import torch

from experiments.core.errors import ExperimentError, one_line
from experiments.devices.free_gpus import FreeGpus

# cuBLAS needs a fixed workspace to be deterministic; torch reads it at the process's first
# matrix product on a GPU, and refuses deterministic ones from then on if it was unset.
CUBLAS_WORKSPACE = ":4096:8"
# The workspaces torch accepts as deterministic (`Context::checkCuBLASConfigDeterministic`).
DETERMINISTIC_CUBLAS_WORKSPACES = (CUBLAS_WORKSPACE, ":16:8")
SAVED_ENVIRONMENT = ("CUDA_VISIBLE_DEVICES",)

# The CUDA_VISIBLE_DEVICES this process's CUDA started with (None: all GPUs): its first job's.
_cuda_started_with: list[str | None] = []
# The sticky CUDA error that left CUDA unusable in this process, in one line (empty: none).
_cuda_failed_with: list[str] = []
# The CUBLAS_WORKSPACE_CONFIG this process's CUDA started with (None: unset), as far as known:
# set by `fix_cublas_workspace` before CUDA started, or what it found once CUDA had.
_cublas_workspace_at_cuda_start: list[str | None] = []


def number_gpus_by_bus() -> None:
    """Number GPUs in PCI bus order, as nvidia-smi does (CUDA's own order puts the fastest
    first), so cuda:N and device.visible name the same GPU in every process; an order set in the
    environment stands."""
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")


def fix_cublas_workspace() -> None:
    """Give cuBLAS the fixed workspace deterministic algorithms need, before the process's first
    matrix product (read only then); a workspace set in the environment stands."""
    found = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
    if not torch.cuda.is_initialized():
        _cublas_workspace_at_cuda_start[:] = [os.environ["CUBLAS_WORKSPACE_CONFIG"]]
    elif not _cublas_workspace_at_cuda_start:  # CUDA started before any job of this process
        _cublas_workspace_at_cuda_start[:] = [found]


def refuse_nondeterministic_cublas() -> None:
    """Refuse, in one line, a deterministic job on a GPU in a process whose CUDA started without
    a deterministic cuBLAS workspace: cuBLAS took its workspace then, and keeps it."""
    if why := nondeterministic_cublas(_cublas_workspace_at_cuda_start):
        raise ExperimentError(why)


def nondeterministic_cublas(at_cuda_start: list[str | None]) -> str | None:
    """Why cuBLAS cannot compute deterministically in a process whose CUDA started with the
    CUBLAS_WORKSPACE_CONFIG `at_cuda_start` holds (empty: not started, or not known); None if it
    can."""
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
    """A job's settings for its whole process; the GPUs first, before anything asks torch.cuda.
    `cudnn_benchmark` lets cuDNN time its algorithms and keep the fastest, which a deterministic
    job may not (validate refuses the pair; here determinism wins)."""
    number_gpus_by_bus()
    fix_cublas_workspace()
    set_visible_gpus(visible)
    if threads is not None:
        torch.set_num_threads(threads)
    if deterministic:
        make_deterministic()
    else:
        torch.backends.cudnn.benchmark = cudnn_benchmark


@contextmanager
def isolated_job(free_gpus: FreeGpus | None) -> Iterator[None]:
    """One job of this process: its settings put back and memory handed back when it ends, and
    only then its GPU released to `free_gpus` (else the next job could start on a GPU still full
    of this one's tensors)."""
    with free_gpus or nullcontext(), restored():
        yield


@contextmanager
def restored() -> Iterator[None]:
    """When the block (a job) ends, put back every process-wide setting `apply` may change (but
    cuBLAS's workspace), and free the job's tensors (a failed job's too), uncached on a GPU."""
    environment = {name: os.environ.get(name) for name in SAVED_ENVIRONMENT}
    threads = torch.get_num_threads()
    algorithms = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
    )
    cudnn = (torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic)
    # What lives before the job is the process's (torch's and Hydra's modules): frozen, the
    # collection after the job goes through the job's own objects only.
    gc.freeze()
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
        torch.use_deterministic_algorithms(algorithms[0], warn_only=algorithms[1])
        torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = cudnn
        gc.collect()  # a model in reference cycles (DDP's) is freed only by the collector
        gc.unfreeze()  # (what the job left behind, then, the process's next full collection)
        _hand_back_cached_gpu_memory()


def _hand_back_cached_gpu_memory() -> None:
    """Empty CUDA's cache, unless a sticky CUDA error (raised again by every CUDA call) makes
    that fail: then the job's own error stands, and `cuda_unusable` says so from now on. (The
    synchronization asks CUDA even when the cache holds nothing to free.)"""
    if not torch.cuda.is_initialized() or _cuda_failed_with:
        return
    try:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    except RuntimeError as error:  # torch.AcceleratorError, a CUDA error
        _cuda_failed_with.append(one_line(error))


def cuda_unusable() -> str | None:
    """The sticky CUDA error, in one line, that left CUDA unusable for the rest of this process
    (found when a job ended); None while CUDA works, or never started."""
    return _cuda_failed_with[0] if _cuda_failed_with else None


def _let_go_of_frames(error: BaseException) -> None:
    """Clear the locals of the finished frames in the tracebacks of `error` and its causes, which
    hold the failed job's model and data while the error is kept to be reported; the frames'
    code and lines stay, for a traceback."""
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
    """CUDA_VISIBLE_DEVICES for `device.visible`, given the one the process inherited (None:
    unset, every GPU). The GPUs are counted among those the inherited mask allows - a scheduler
    that gave the job GPUs 4 and 5 has them numbered 0 and 1 - so a job never leaves its share."""
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


def make_deterministic() -> None:
    """Ask torch for deterministic algorithms only (an error names any op that has none)."""
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True


@contextmanager
def one_thread() -> Iterator[None]:
    """torch's CPU operations on one thread in the block: a probe of one image is too little work
    to share out, and shared, each operation waits for every thread to get its turn on a busy
    host (docs/speed.md, Start-up)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
