"""torchrun's processes training one model (device=ddp), agreeing through its store on the run."""

from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

import torch
import torch.distributed as dist

from experiments.core import interrupts
from experiments.core.errors import ExperimentError, one_line
from experiments.core.text import display_path
from experiments.devices.backends.registry import backend_for
from experiments.devices.process_group import SRUN, TORCHRUN, ProcessGroup

T = TypeVar("T")

STORE_TIMEOUT = timedelta(seconds=60)
# How long a process that lost another waits to learn why, before saying only what it saw.
DEATH_GRACE_SECONDS = 5.0
# What gloo and NCCL say when a collective finds another process gone.
LOST_CONNECTION = (
    "Connection reset by peer",
    "Connection closed by peer",
    "Broken pipe",
    "remote process exited",
)


class RefusedByEveryProcess(ExperimentError):
    """A refusal each process makes alike: said without the rank of whichever said it first."""


class Stopped(Exception):
    """torchrun stopped this process (SIGTERM), usually because another one failed."""


def wait_for_all(group: ProcessGroup) -> None:
    """Wait until every process gets here: at the end, so none cuts connections another uses."""
    if group.world_size > 1:
        dist.barrier()


def summed(tensor: torch.Tensor, group: ProcessGroup) -> torch.Tensor:
    """`tensor` added up over all processes, in place."""
    if group.world_size > 1:
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor


def gathered(value: T, group: ProcessGroup) -> list[T]:
    """Every process's `value` (picklable), in the order of their ranks."""
    if group.world_size == 1:
        return [value]
    values: list[Any] = [None] * group.world_size
    dist.all_gather_object(values, value)
    return values


def _store(group: ProcessGroup) -> dist.TCPStore:
    """Where the processes agree: torchrun's agent's store, or the one srun's process 0 keeps."""
    if group.launcher == SRUN:
        return _step_store(group.store_host, group.store_port, group.is_main)
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        raise ExperimentError(
            "several processes (WORLD_SIZE is set) need torchrun: "
            "torchrun --nproc-per-node=N train.py device=ddp"
        )
    address, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    return dist.TCPStore(address, port, is_master=False, timeout=STORE_TIMEOUT)


@functools.cache  # one per process: process 0's serves the others until it ends
def _step_store(host: str, port: int, serves: bool) -> dist.TCPStore:
    try:
        return dist.TCPStore(
            host, port, is_master=serves, timeout=STORE_TIMEOUT, wait_for_workers=False
        )
    except dist.DistError as error:
        doing = f"listen on port {port}" if serves else f"reach process 0 on {host}:{port}"
        raise ExperimentError(
            f"an srun task could not {doing} ({one_line(error)}); give the processes a host "
            "and a free port to meet on: MASTER_ADDR=<the first node> MASTER_PORT=<port>"
        ) from error


def _key(name: str) -> str:
    # One torchrun run may restart its processes; each attempt agrees afresh.
    run = os.environ.get("TORCHELASTIC_RUN_ID", "run")
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    return f"experiments/{run}/{attempt}/{name}"


def agree_on_start(group: ProcessGroup, started: datetime, tag: str) -> tuple[datetime, str]:
    """Process 0's start time and random tag, for every process (they name the run folder)."""
    if group.world_size == 1:
        return started, tag
    said = process_0_says(group, "start", lambda: f"{started.isoformat()} {tag}")
    started_text, tag = said.split(" ")
    return datetime.fromisoformat(started_text), tag


def process_0_says(group: ProcessGroup, name: str, answer: Callable[[], str]) -> str:
    """Process 0's `answer()`, asked of it alone (whether the folder it makes is free), for all."""
    if group.world_size == 1:
        return answer()
    store = _store(group)
    if group.is_main:
        store.set(_key(name), answer())
    return store.get(_key(name)).decode()


def first_failure(group: ProcessGroup, error: BaseException) -> str:
    """Announce this process's failure, and return the run's first (maybe why this one failed)."""
    reason = one_line(error)
    if group.world_size == 1:
        return reason
    announced = (
        reason if isinstance(error, RefusedByEveryProcess) else f"process {group.rank}: {reason}"
    )
    try:
        store = _store(group)
        if _lost_another(error):
            announced = _why_another_was_lost(group, store) or announced
        return store.compare_set(_key("failure"), "", announced).decode()
    except (ExperimentError, dist.DistError):
        if group.launcher != SRUN:
            raise
        if group.is_main:  # its store never started (its port taken): its own failure says so
            return announced
        return died_without_a_word(0)  # process 0 gone, and its store with it, unheard


def announced_failure(group: ProcessGroup, interrupt: KeyboardInterrupt) -> str | None:
    """The failure another process announced, where torchrun's SIGTERM came because of it."""
    if group.world_size == 1 or getattr(interrupt, "signal", None) != signal.SIGTERM:
        return None
    # torchrun stops the others only once a process has ended, after it said why.
    with contextlib.suppress(ExperimentError, dist.DistError):
        store = _store(group)
        if store.check([_key("failure")]):
            return store.get(_key("failure")).decode()
    return None


def _lost_another(error: BaseException) -> bool:
    """Whether `error` says only that another process is gone (stopped, a connection closed)."""
    return isinstance(error, (Stopped, dist.DistNetworkError)) or any(
        words in str(error) for words in LOST_CONNECTION
    )


def _why_another_was_lost(group: ProcessGroup, store: dist.TCPStore) -> str | None:
    """Wait a little for the lost process's failure (None), or to see it dead here (SIGKILL)."""
    here = socket.gethostname()
    others = [rank for rank in range(group.world_size) if rank != group.rank]
    deadline = time.monotonic() + DEATH_GRACE_SECONDS
    while not store.check([_key("failure")]):
        for rank in others:
            if store.check([_key(f"process/{rank}")]):
                host, pid = store.get(_key(f"process/{rank}")).decode().split(" ")
                if host == here and _ended(int(pid)):
                    return died_without_a_word(rank)
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    return None


def died_without_a_word(rank: int) -> str:
    killed = "killed by a signal, or by the system when out of memory"
    return f"process {rank} died without a word ({killed})"


def says_the_failure(group: ProcessGroup, reason: str) -> bool:
    """Whether this process says the run's failure: the main one, or 1 where 0 died unheard."""
    return group.is_main or (group.rank == 1 and reason == died_without_a_word(0))


def _ended(pid: int) -> bool:
    """Whether process `pid` of this machine has ended: gone, or a zombie not yet reaped."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # someone else's: not one of ours
        return False
    try:
        # Linux: a zombie still takes signals; its state, after the command's ")", says Z.
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] in ("Z", "X")
    except FileNotFoundError:  # reaped just now; or no /proc at all (macOS): taken as running
        return Path("/proc/self").exists()


def start(group: ProcessGroup, backend: str, device: torch.device, timeout: float) -> None:
    """Join the process group; setup and every collective give up after `timeout` seconds."""
    # Before the group exists: imported later, its defaults would hold the group for good.
    import torch.distributed.nn  # noqa: F401

    if group.launcher == TORCHRUN:  # (srun's SIGTERM, scancel's, is an interruption)
        signal.signal(signal.SIGTERM, _raise_stopped)
    owned = backend_for(device.type).each_process_owns_its_device
    if group.world_size > 1:  # where this process runs, so the others can tell if it dies
        _store(group).set(_key(f"process/{group.rank}"), f"{socket.gethostname()} {os.getpid()}")
        if owned:
            refuse_shared_gpus(group, device)
    dist.init_process_group(
        backend,
        rank=group.rank,
        world_size=group.world_size,
        timeout=timedelta(seconds=timeout),
        device_id=device if owned else None,
        # torchrun's agent's store is found through its variables; srun's is process 0's.
        store=_store(group) if group.launcher == SRUN else None,
    )


def refuse_other_commands(group: ProcessGroup, run_dir: Path, config: Callable[[], str]) -> None:
    """Refuse, in every process, a run whose processes were given different commands: another
    run folder, or another `config()` (the run's composed config, as text)."""
    if group.world_size == 1:
        return
    store = _store(group)
    digest = hashlib.sha256(config().encode()).hexdigest()
    store.set(_key(f"command/{group.rank}"), f"{digest} {run_dir}")
    said = [store.get(_key(f"command/{rank}")).decode() for rank in range(group.world_size)]
    digests, folders = zip(*(each.split(" ", 1) for each in said), strict=True)
    same = "every process must be given the same command"
    for rank in range(1, group.world_size):
        if folders[rank] != folders[0]:
            raise RefusedByEveryProcess(
                f"process {rank}'s run folder is {display_path(Path(folders[rank]))}, process 0's "
                f"{display_path(Path(folders[0]))}: {same}"
            )
        if digests[rank] != digests[0]:
            raise RefusedByEveryProcess(f"process {rank}'s config is not process 0's: {same}")


@contextmanager
def kept_for_the_others(group: ProcessGroup) -> Iterator[None]:
    """Under srun, process 0's store serves the others, so its process ends after theirs (or
    after STORE_TIMEOUT): one that fails last can still say why."""
    try:
        yield
    finally:
        if group.launcher == SRUN and group.world_size > 1:
            with contextlib.suppress(ExperimentError, dist.DistError):
                store = _store(group)
                store.set(_key(f"ended/{group.rank}"), "")
                if group.is_main:
                    others = [_key(f"ended/{rank}") for rank in range(1, group.world_size)]
                    store.wait(others, STORE_TIMEOUT)


def refuse_shared_gpus(group: ProcessGroup, device: torch.device) -> None:
    """Refuse, in every process, two processes on one GPU (NCCL fails, or hangs), by its UUID."""
    store = _store(group)
    gpu = backend_for(device.type).identity(device)
    store.set(_key(f"gpu/{group.rank}"), f"{gpu.uuid} {gpu.name}")
    gpus = {rank: store.get(_key(f"gpu/{rank}")).decode() for rank in range(group.world_size)}
    if why := shared_gpu(gpus):
        raise RefusedByEveryProcess(why)


def shared_gpu(gpus: dict[int, str]) -> str | None:
    """The first two processes that share a GPU of `gpus` (by rank: "<uuid> <name>"), in a line."""
    first_with: dict[str, int] = {}
    for rank, gpu in sorted(gpus.items()):
        uuid, _, name = gpu.partition(" ")
        if uuid in first_with:
            return (
                f"device=ddp: processes {first_with[uuid]} and {rank} would both compute on one "
                f"GPU ({name}, {uuid}); start as many processes per machine as it has GPUs "
                "(torchrun --nproc-per-node), or show each process a GPU of its own "
                "(CUDA_VISIBLE_DEVICES, SLURM's --gpus-per-task=1)"
            )
        first_with[uuid] = rank
    return None


@contextmanager
def teardown(group: ProcessGroup) -> Iterator[None]:
    """Leave the process group, if joined, when the block ends (its DDP model gone by then)."""
    failed = True
    try:
        yield
        failed = False
    finally:
        if dist.is_initialized():
            _leave()
            if group.launcher == TORCHRUN:
                # Its SIGTERM ends the process as usual, unless it would cut a failure's line.
                signal.signal(signal.SIGTERM, signal.SIG_IGN if failed else signal.SIG_DFL)


def _leave() -> None:
    """Destroy the process group and gloo's threads, which would abort a run at its exit."""
    world = dist.group.WORLD
    dist.destroy_process_group()
    gc.collect()  # DistributedDataParallel's Reducer, in reference cycles, holds the group too
    del world  # the last reference: the group's destructor joins its threads, GIL released


def _raise_stopped(signum: int, frame: FrameType | None) -> None:
    # Once, and not while a failure is on its way out: either would cut its writing short.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if sys.exc_info()[0] is None:
        interrupts.raise_unless_held(Stopped("stopped by torchrun (SIGTERM)"))
