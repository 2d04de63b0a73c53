"""GPU paths of a job that shares its process or its GPUs: cuBLAS's workspace kept for later jobs,
a sticky CUDA error that ends a sweep's shared process, running out of GPU memory said in one
line, and the GPUs a parallel sweep's jobs hold.

The deciding parts run here with their inputs passed in (a Machine of N GPUs, a launcher, the
allocator's message in a real torch.OutOfMemoryError); the `gpu` tests run them for real.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from experiments.cli.main import later_jobs_share_this_process, sweep_stopped_by
from experiments.config.choices import DeviceName
from experiments.config.schemas import DeviceConfig
from experiments.core.errors import ExperimentError
from experiments.core.files import try_lock
from experiments.devices import memory, process_settings
from experiments.devices.free_gpus import FreeGpus
from experiments.devices.plan import DevicePlan, Machine
from experiments.devices.process_group import ONE_PROCESS
from experiments.run.setup import plan_for_job
from experiments.run.train import train
from helpers import QUICK, compose_config, env_with_tests_on_path, results, train_cli

ON_GPU = [override for override in QUICK if not override.startswith("device=")]
GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0
two_gpus = pytest.mark.skipif(GPUS < 2, reason="needs two GPUs")

# What CUDA's caching allocator says, word for word (torch 2.x), when a GPU is full.
ALLOCATOR_MESSAGE = (
    "CUDA out of memory. Tried to allocate 1.95 GiB. GPU 1 has a total capacity of 14.57 GiB of "
    "which 1.58 GiB is free. Process 2493055 has 12.02 GiB memory in use. Including non-PyTorch "
    "memory, this process has 966.00 MiB memory in use. Of the allocated memory 734.07 MiB is "
    "allocated by PyTorch, and 33.93 MiB is reserved by PyTorch but unallocated. If reserved but "
    "unallocated memory is large try setting PYTORCH_ALLOC_CONF=expandable_segments:True to "
    "avoid fragmentation.  See documentation for Memory Management  "
    "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
)
ASKED = "(it asked for 1.95 GiB more, with 1.58 GiB of its 14.57 GiB free)"


# cuBLAS's workspace: read once per process, so set for the first job and kept.


def test_a_deterministic_job_after_another_in_one_process_finds_cublas_workspace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", "")  # so that monkeypatch puts back the original
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG")
    with process_settings.restored():  # a job that is not deterministic, first in its process
        process_settings.apply(None, threads=None, deterministic=False)
    assert os.environ.get("CUBLAS_WORKSPACE_CONFIG") == process_settings.CUBLAS_WORKSPACE
    with process_settings.restored():
        process_settings.apply(None, threads=None, deterministic=True)
        assert torch.are_deterministic_algorithms_enabled()
    assert not torch.are_deterministic_algorithms_enabled()  # that setting is put back
    assert os.environ.get("CUBLAS_WORKSPACE_CONFIG") == process_settings.CUBLAS_WORKSPACE


def test_a_cublas_workspace_set_by_the_user_stands(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8")
    with process_settings.restored():
        process_settings.apply(None, threads=None, deterministic=True)
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":16:8"


@pytest.mark.parametrize(
    ("at_cuda_start", "refused"),
    [([], False), ([":4096:8"], False), ([":16:8"], False), ([None], True), ([":0:0"], True)],
)
def test_a_deterministic_gpu_job_is_refused_where_cuda_started_without_the_workspace(
    at_cuda_start: list[str | None], refused: bool
) -> None:
    why = process_settings.nondeterministic_cublas(at_cuda_start)
    assert (why is not None) is refused
    if why is not None:
        assert why.startswith("trainer.deterministic=true on a GPU needs CUBLAS_WORKSPACE_CONFIG=")
        assert "set it before the process starts" in why


@pytest.mark.gpu
def test_a_deterministic_job_after_products_without_the_workspace_is_refused_in_one_line(
    tmp_path: Path,
) -> None:
    # Code of one's own that multiplied on the GPU before calling the command line's entry.
    script = (
        "import sys, torch\n"
        "torch.ones(8, 8, device='cuda') @ torch.ones(8, 8, device='cuda')\n"
        "from experiments.cli import main\n"
        f"sys.argv = ['train.py', *{[*ON_GPU, 'device=cuda:0', 'trainer.deterministic=true']!r}]\n"
        "main()\n"
    )
    environment = {k: v for k, v in os.environ.items() if k != "CUBLAS_WORKSPACE_CONFIG"}
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .startswith(
            "Error: trainer.deterministic=true on a GPU needs CUBLAS_WORKSPACE_CONFIG=:4096:8"
        )
    )


@pytest.mark.gpu
def test_a_deterministic_gpu_job_after_one_that_was_not_trains_in_the_same_process(
    tmp_path: Path,
) -> None:
    # Hydra's basic launcher: both jobs in one process, the deterministic one second.
    done = train_cli(tmp_path, "-m", *ON_GPU, "device=cuda:0", "trainer.deterministic=false,true")
    assert done.returncode == 0, done.stderr
    assert [results(run)["status"] for run in done.run_dirs] == ["completed", "completed"]


# A sticky CUDA error: the job is recorded as failed, and a process its later jobs would share
# ends the sweep.


@pytest.mark.parametrize(
    ("launcher", "shared"),
    [
        ("hydra._internal.core_plugins.basic_launcher.BasicLauncher", True),
        ("hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher", True),
        ("hydra_plugins.hydra_submitit_launcher.submitit_launcher.LocalLauncher", False),
        ("hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher", False),
    ],
)
def test_later_jobs_share_the_process_under_the_basic_and_joblib_launchers(
    launcher: str, shared: bool
) -> None:
    assert later_jobs_share_this_process(launcher) is shared


def test_a_sweep_stopped_by_an_unusable_gpu_says_why_and_what_to_do() -> None:
    error = "AcceleratorError: CUDA error: device-side assert triggered"
    assert sweep_stopped_by(error, 0, Path("/sweeps/0")) == (
        "CUDA cannot be used again in this process after job 0 (/sweeps/0) failed with "
        "AcceleratorError: CUDA error: device-side assert triggered; the sweep stops here, its "
        "jobs left are not run (see its report): run them with a launcher that starts a process "
        "per job, hydra/launcher=submitit_local"
    )


def test_a_job_on_the_cpu_leaves_cuda_usable() -> None:
    with pytest.raises(RuntimeError), process_settings.isolated_job(None):
        raise RuntimeError("a job's own failure")
    assert process_settings.cuda_unusable() is None


@pytest.mark.gpu
def test_a_device_side_assert_fails_its_job_and_stops_the_sweep_sharing_its_process(
    tmp_path: Path,
) -> None:
    done = train_cli(
        tmp_path,
        "-m",
        *ON_GPU,
        "device=cuda:0",
        "model=custom",
        "model._target_=failing.AssertsOnTheGpu,experiments.training.models.LeNet",
        env=env_with_tests_on_path(),
        own_process=True,  # the assert leaves CUDA unusable in the process it happens in
    )
    assert done.returncode == 1
    assert done.last_line.startswith("Error: CUDA cannot be used again in this process after job 0")
    result = results(done.run_dir)  # the only job that started
    assert result["status"] == "failed" and "device-side assert triggered" in result["reason"]
    assert "not run" in (done.run_dir.parent / "summary.md").read_text()  # LeNet's job


# Out of GPU memory: one line naming the GPU, the batch size and what to set instead.


def test_running_out_of_gpu_memory_in_training_names_the_gpu_and_a_batch_to_try() -> None:
    with (
        pytest.raises(ExperimentError) as error,
        memory.out_of_memory_said("trainer.batch_size", 512, 1),
    ):
        raise torch.OutOfMemoryError(ALLOCATOR_MESSAGE)
    assert str(error.value) == (
        f"cuda:1 ran out of memory at trainer.batch_size=512 {ASKED}; lower trainer.batch_size "
        "and raise trainer.accumulate_batches to keep 512 images to an optimizer step, e.g. "
        "trainer.batch_size=256 trainer.accumulate_batches=2"
    )
    assert isinstance(error.value.__cause__, torch.OutOfMemoryError)  # kept for tracebacks


@pytest.mark.parametrize(
    ("batch", "said"),
    [
        # Accumulating already, over 2 processes: the smaller batch stays a multiple of 2.
        (
            ("trainer.batch_size", 6, 2, 2),
            f"cuda:1 ran out of memory at trainer.batch_size=6 and trainer.accumulate_batches=2 "
            f"{ASKED}; lower trainer.batch_size and raise trainer.accumulate_batches to keep 12 "
            "images to an optimizer step, e.g. trainer.batch_size=2 "
            "trainer.accumulate_batches=6",
        ),
        (
            ("trainer.batch_size", 1, 1, 1),
            f"cuda:1 ran out of memory at trainer.batch_size=1 {ASKED}, with no smaller batch to "
            "try; use a smaller model, trainer.precision=bf16, or a GPU with more memory",
        ),
        (
            ("batch_size", 500, None, 1),
            f"cuda:1 ran out of memory at batch_size=500 {ASKED}; lower batch_size, e.g. "
            "batch_size=250",
        ),
    ],
)
def test_running_out_of_gpu_memory_suggests_a_batch_that_keeps_the_step(
    batch: tuple[str, int, int | None, int], said: str
) -> None:
    assert memory.out_of_memory_line(ALLOCATOR_MESSAGE, *batch) == said


def test_other_errors_pass_through_the_out_of_memory_translation() -> None:
    with (
        pytest.raises(RuntimeError, match="not memory"),
        memory.out_of_memory_said("trainer.batch_size", 64, 1),
    ):
        raise RuntimeError("not memory")


@pytest.mark.gpu
def test_a_run_out_of_gpu_memory_records_the_one_line(tmp_path: Path) -> None:
    fraction = 64 * 2**20 / torch.cuda.get_device_properties(0).total_memory  # 64 MiB
    wide = ("model=mlp", "model.hidden_sizes=[16384]", "trainer.batch_size=64")  # 200 MB
    torch.cuda.empty_cache()  # what tests before it left in this process's cache is not counted
    torch.cuda.set_per_process_memory_fraction(fraction, 0)
    try:
        with pytest.raises(ExperimentError) as error, process_settings.restored():
            train(compose_config(*ON_GPU, "device=cuda:0", *wide), tmp_path)
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0, 0)
    assert str(error.value).startswith("cuda:0 ran out of memory at trainer.batch_size=64 (it")
    assert results(tmp_path)["reason"] == str(error.value)


# The GPUs a parallel sweep's jobs hold: every GPU of each job's plan.

TWO_GPUS = Machine(2)


def job_plan(name: str, sweep: Path, held: list[FreeGpus], index: int | None = None) -> DevicePlan:
    """A job of a parallel sweep in `sweep`, planned on TWO_GPUS; its FreeGpus kept in `held`."""
    free_gpus = FreeGpus(sweep, poll_seconds=0.02)
    held.append(free_gpus)
    request = DeviceConfig(name=DeviceName(name), index=index)
    return plan_for_job(request, TWO_GPUS, ONE_PROCESS, free_gpus)


def test_device_every_jobs_side_by_side_never_share_a_gpu(tmp_path: Path) -> None:
    held: list[FreeGpus] = []
    assert job_plan("cpu", tmp_path, held) == DevicePlan("cpu")
    assert job_plan("cuda", tmp_path, held, index=1) == DevicePlan("cuda", 1)
    # A job that leaves its GPU open takes one no job holds, the named ones included.
    assert job_plan("cuda", tmp_path, held).index == 0
    planned: list[DevicePlan] = []
    data_parallel = threading.Thread(target=lambda: planned.append(job_plan("dp", tmp_path, [])))
    data_parallel.start()
    time.sleep(0.3)
    assert planned == []  # waiting for both GPUs
    held[2].__exit__(None, None, None)  # cuda:0's job ends
    time.sleep(0.3)
    assert planned == []  # cuda:1 is still held
    free_while_waiting = try_lock(held[2].folder / "0.lock")  # dp holds neither while it waits
    assert free_while_waiting is not None
    free_while_waiting.close()
    held[1].__exit__(None, None, None)
    data_parallel.join(timeout=10)
    assert planned == [DevicePlan("cuda", 0, (0, 1))]


def test_a_job_outside_a_parallel_sweep_is_planned_without_gpus_to_hold() -> None:
    plan = plan_for_job(DeviceConfig(name=DeviceName.dp), TWO_GPUS, ONE_PROCESS, None)
    assert plan == DevicePlan("cuda", 0, (0, 1))
