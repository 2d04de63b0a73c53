"""Several devices training one model: DataParallel in one process, or DistributedDataParallel
over processes launched by torchrun.

    python train.py device=dp 'device.ids=[0,1]'                # one process, two GPUs
    torchrun --nproc-per-node=2 train.py device=ddp             # on 2 GPUs (NCCL), or CPUs (gloo)
    torchrun --nnodes=2 --nproc-per-node=4 --rdzv-backend=c10d \\
             --rdzv-endpoint=node0:29500 --rdzv-id=run42 train.py device=ddp

torchrun starts every process with RANK, LOCAL_RANK and WORLD_SIZE, and hosts a key-value store
they all reach. Through it the processes agree, before Hydra starts, on when the run started and on
its random tag, so they name the same run folder; and a process that fails leaves its reason there
for the others, so the run's records say which process failed first and why. docs/distributed.md
tells the whole story.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from types import FrameType

import torch
import torch.distributed as dist

from experiments.core.errors import ExperimentError
from experiments.devices.process_group import ProcessGroup

STORE_TIMEOUT = timedelta(seconds=60)


class Stopped(Exception):
    """torchrun stopped this process (SIGTERM), usually because another one failed."""


def wait_for_all(group: ProcessGroup) -> None:
    """Wait until every process gets here (nothing to wait for alone): at the end of a run, so
    none tears down its connections while another still uses them."""
    if group.world_size > 1:
        dist.barrier()


def summed(tensor: torch.Tensor, group: ProcessGroup) -> torch.Tensor:
    """`tensor` added up over all processes, in place (nothing to do for one process)."""
    if group.world_size > 1:
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor


def _store() -> dist.TCPStore:
    """torchrun's own key-value store (every process connects to it as a client)."""
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        raise ExperimentError(
            "several processes (WORLD_SIZE is set) need torchrun: "
            "torchrun --nproc-per-node=N train.py device=ddp"
        )
    return dist.TCPStore(
        os.environ["MASTER_ADDR"],
        int(os.environ["MASTER_PORT"]),
        is_master=False,
        timeout=STORE_TIMEOUT,
    )


def _key(name: str) -> str:
    # One torchrun run may restart its processes; each attempt agrees afresh.
    run = os.environ.get("TORCHELASTIC_RUN_ID", "run")
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    return f"experiments/{run}/{attempt}/{name}"


def agree_on_start(group: ProcessGroup, started: datetime, tag: str) -> tuple[datetime, str]:
    """The start time and random tag of process 0, for every process (they name the run folder)."""
    if group.world_size == 1:
        return started, tag
    store = _store()
    if group.is_main:
        store.set(_key("start"), f"{started.isoformat()} {tag}")
    started_text, tag = store.get(_key("start")).decode().split(" ")
    return datetime.fromisoformat(started_text), tag


def first_failure(group: ProcessGroup, reason: str) -> str:
    """Announce this process's failure to the others, and return the run's first failure: this
    one, or one another process announced before (which is then why this one failed too)."""
    if group.world_size == 1:
        return reason
    announced = f"process {group.rank}: {reason}"
    return _store().compare_set(_key("failure"), "", announced).decode()


def start(group: ProcessGroup, backend: str, device: torch.device, timeout: float) -> None:
    """Join the process group; setup and every collective give up after `timeout` seconds."""
    # Before the group exists: torch.distributed.nn's functions take `group=group.WORLD` as a
    # default, evaluated on import (DistributedDataParallel imports it, through torch._dynamo).
    # Imported later, they would hold the group for good, and `teardown` could never end it.
    import torch.distributed.nn  # noqa: F401

    signal.signal(signal.SIGTERM, _raise_stopped)
    dist.init_process_group(
        backend,
        rank=group.rank,
        world_size=group.world_size,
        timeout=timedelta(seconds=timeout),
        device_id=device if device.type == "cuda" else None,
    )


@contextmanager
def teardown() -> Iterator[None]:
    """Leave the process group (if this process joined one) when the block ends; from then on,
    torchrun's SIGTERM ends the process as usual. Whatever holds the group (a DDP model) must be
    gone by then."""
    try:
        yield
    finally:
        if dist.is_initialized():
            _leave()
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _leave() -> None:
    """Destroy the process group, and with it gloo's worker threads. Left running, one of them
    may still be dropping a finished collective's tensors when the interpreter shuts down: it
    needs the GIL for that, and Python ends a thread that asks for it then inside a C++
    destructor, so a completed run aborts (`terminate called without an active exception`)."""
    world = dist.group.WORLD
    dist.destroy_process_group()
    gc.collect()  # DistributedDataParallel's Reducer, in reference cycles, holds the group too
    del world  # the last reference: the group's destructor joins its threads, GIL released


@contextmanager
def sigterm_held() -> Iterator[None]:
    """Hold back torchrun's SIGTERM while the block writes what must not be cut short."""
    if not hasattr(signal, "pthread_sigmask"):  # not on Windows
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _raise_stopped(signum: int, frame: FrameType | None) -> None:
    # Once is enough, and not while a failure is already on its way out (typically the lost
    # connection to the process that failed): either would cut short the writing of the failure.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if sys.exc_info()[0] is None:
        raise Stopped("stopped by torchrun (SIGTERM)")
