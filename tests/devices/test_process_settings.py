"""The GPUs a job lets CUDA see: device.visible counted among those a scheduler granted."""

from __future__ import annotations

import os
import threading
import weakref
from pathlib import Path

import pytest
import torch

from experiments.core.errors import ExperimentError
from experiments.core.files import try_lock
from experiments.devices.free_cores import CoreShare
from experiments.devices.free_gpus import FreeGpus
from experiments.devices.process_settings import isolated_job, on_cores, visible_mask


@pytest.mark.parametrize(
    ("inherited", "visible", "mask"),
    [
        (None, None, None),
        (None, [2, 3], "2,3"),
        ("4,5", None, "4,5"),
        # A scheduler gave the job GPUs 4 and 5: device.visible counts among those.
        ("4,5", [1], "5"),
        ("4,5", [1, 0], "5,4"),
        ("GPU-8f3c,GPU-11aa", [1], "GPU-11aa"),
    ],
)
def test_visible_gpus_are_counted_among_those_the_process_may_see(
    inherited: str | None, visible: list[int] | None, mask: str | None
) -> None:
    assert visible_mask(inherited, visible) == mask


def test_visible_gpus_beyond_a_schedulers_share_are_refused() -> None:
    with pytest.raises(ExperimentError) as error:
        visible_mask("4,5", [2])
    assert str(error.value) == (
        "device.visible=[2] names GPU 2, but CUDA_VISIBLE_DEVICES=4,5 lets this process see 2 "
        "GPU(s), numbered from 0; device.visible counts among those"
    )


def test_a_failed_job_frees_its_memory_before_its_gpu_goes_to_the_next(tmp_path: Path) -> None:
    # Out of memory in a sweep job: its traceback still holds its model and data. The GPU may go
    # to the next job only once they are freed (and, on a GPU, the cache emptied).
    gpu_lock = tmp_path / "0.lock"
    freed_while_gpu_held: list[bool] = []

    def train_out_of_memory() -> None:
        model = {"weights": torch.zeros(1000)}
        model["itself"] = model  # a reference cycle, as DDP's model has: only gc frees it
        weakref.finalize(model["weights"], lambda: freed_while_gpu_held.append(is_locked(gpu_lock)))
        raise RuntimeError("CUDA out of memory")

    free_gpus = FreeGpus(tmp_path)
    with pytest.raises(RuntimeError), isolated_job(free_gpus):
        assert free_gpus.take(1) == 0
        train_out_of_memory()
    assert freed_while_gpu_held == [True]
    assert not is_locked(gpu_lock)  # and released after all


@pytest.mark.gpu
def test_a_failed_job_leaves_no_gpu_memory_behind() -> None:
    torch.cuda.empty_cache()
    reserved = torch.cuda.memory_reserved()

    def train_out_of_memory() -> None:
        model = {"weights": torch.zeros(2**28, device="cuda")}  # 1 GiB
        model["itself"] = model
        raise RuntimeError("CUDA out of memory")

    with pytest.raises(RuntimeError), isolated_job(None):
        train_out_of_memory()
    assert torch.cuda.memory_reserved() == reserved


def is_locked(path: Path) -> bool:
    """Whether a lock on `path` is held (flock: by another open file, even of this process)."""
    lock = try_lock(path)
    if lock is None:
        return True
    lock.close()
    return False


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity here")
def test_a_jobs_cores_hold_for_every_thread_of_its_process_then_come_back() -> None:
    # A thread started before the job (torch's pool, from an earlier job of a sweep's worker).
    cores, threads = os.sched_getaffinity(0), torch.get_num_threads()
    started, done = threading.Event(), threading.Event()
    earlier = threading.Thread(target=lambda: (started.set(), done.wait(10)))
    earlier.start()
    started.wait(10)
    first = min(cores)
    try:
        with on_cores(CoreShare((first,), 1, jobs=2)):
            assert os.sched_getaffinity(0) == os.sched_getaffinity(earlier.native_id) == {first}
            assert torch.get_num_threads() == 1
        assert os.sched_getaffinity(0) == os.sched_getaffinity(earlier.native_id) == cores
        assert torch.get_num_threads() == threads
    finally:
        done.set()
        earlier.join()
