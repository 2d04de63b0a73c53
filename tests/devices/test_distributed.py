"""Several processes: DistributedDataParallel under real torchrun processes (gloo on the CPU)."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from contextlib import nullcontext
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.distributed import TCPStore

from experiments.config.validate import validate
from experiments.core.errors import ExperimentError
from experiments.core.interrupts import Terminated
from experiments.devices import process_settings
from experiments.devices.distributed import (
    _ended,
    announced_failure,
    first_failure,
    start,
    teardown,
)
from experiments.devices.process_group import TORCHRUN, ProcessGroup
from experiments.devices.wrapping import without_gradient_sync
from experiments.records import checkpoints
from experiments.run.train import train
from helpers import (
    PROCESS_1_FAILURE,
    assert_same_epochs_as_one_process,
    compose_config,
    env_with_tests_on_path,
    failing_torchrun,
    results,
    torchrun_cli,
    train_cli,
)

DIED = "process {} died without a word (killed by a signal, or by the system when out of memory)"

SHORT = (
    "trainer.epochs=2",
    "trainer.limit_train_batches=6",
    "trainer.limit_eval_images=256",
    "trainer.log_interval=3",
)


@pytest.mark.slow
def test_two_processes_write_one_folder_and_train_as_one_process(tmp_path: Path) -> None:
    # 67 images in batches of 64: the last batch's 3 images split 1 and 2 between the processes,
    # and each must weigh 1/3 of that step's loss, as in one process. The processes take them in
    # batches of 32, two to a step (no_sync for the first): the same steps, [32, 32] and [3].
    tiny = (
        "model=lenet",
        "dataset=synthetic",
        "dataset.train_size=67",
        "dataset.test_size=8",
        "trainer.epochs=2",
        "trainer.log_interval=1",
        "trainer.batch_size=32",
        "trainer.accumulate_batches=2",
    )
    ddp = torchrun_cli(tmp_path / "ddp", 2, "device=ddp", *tiny)
    assert ddp.returncode == 0, ddp.stderr
    with process_settings.restored():  # one process: this one
        train(compose_config("device=cpu", *tiny), tmp_path / "single")

    run_dir = ddp.run_dir  # exactly one run folder for both processes
    assert len(list((tmp_path / "ddp" / "outputs").glob("*/*"))) == 1
    log = (run_dir / "train.log").read_text()
    assert log.count("epoch 1/2:") == 1 and log.count("completed:") == 1
    assert len(list(run_dir.glob("events.out.tfevents.*"))) == 1
    result = results(run_dir)
    assert result["status"] == "completed"
    assert (result["world_size"], result["batch_size"], result["per_process_batch_size"]) == (
        2,
        32,
        16,
    )
    assert result["device"]["backend"] == "gloo"
    # Both processes compute on the one CPU: its peak, once, is what the MFU divides by.
    assert result["peak_devices"] == 1 and 0 < result["mfu"] <= 1

    # The two processes together take the same batches one process takes: the same numbers,
    # up to the order of floating point additions, and the same weights at the end.
    assert_same_epochs_as_one_process(run_dir, tmp_path / "single", epochs=2, train_images=67)
    ours, theirs = (
        checkpoints.load(folder / checkpoints.LAST)["model"]
        for folder in (run_dir, tmp_path / "single")
    )
    assert ours.keys() == theirs.keys()
    for name, weights in theirs.items():
        torch.testing.assert_close(ours[name], weights, rtol=0, atol=1e-6, msg=name)


@pytest.mark.slow
def test_a_process_that_fails_ends_the_run_promptly_and_says_why(tmp_path: Path) -> None:
    done, seconds = failing_torchrun(tmp_path, *SHORT)
    assert seconds < 120
    assert done.returncode != 0
    result = results(done.run_dir)
    assert (result["status"], result["reason"]) == ("failed", PROCESS_1_FAILURE)
    assert f"Error: {PROCESS_1_FAILURE}" in (done.run_dir / "train.log").read_text()
    # torchrun's own summary names the root cause too (written for it by @record).
    summary = done.stderr[done.stderr.index("Root Cause") :]
    assert PROCESS_1_FAILURE in summary and "To enable traceback" not in summary


@pytest.mark.slow
@pytest.mark.parametrize("killed", [1, 0])
def test_a_process_that_dies_without_a_word_is_named(tmp_path: Path, killed: int) -> None:
    done = torchrun_cli(
        tmp_path,
        2,
        "device=ddp",
        "model=custom",
        f"model._target_=failing.KillsProcess{killed}",
        *SHORT,
        env=env_with_tests_on_path(),
    )
    assert done.returncode != 0
    died = DIED.format(killed)
    result = results(done.run_dir)
    assert (result["status"], result["reason"]) == ("failed", died), done.stderr
    # Said by process 0, in the run's log too; where process 0 is the one killed (it writes the
    # records), process 1 records it and says it.
    said = done.stderr if killed == 0 else (done.run_dir / "train.log").read_text()
    assert f"Error: {died}" in said


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads states from /proc")
def test_a_process_that_ended_counts_as_ended_before_it_is_reaped() -> None:
    # A killed process stays a zombie until torchrun's agent reaps it; the others see it ended.
    child = subprocess.Popen(["sleep", "60"])
    assert not _ended(child.pid)
    child.kill()
    deadline = time.monotonic() + 10
    while not _ended(child.pid):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert Path(f"/proc/{child.pid}").exists()  # not reaped yet
    child.wait()
    assert _ended(child.pid)


@pytest.mark.slow
def test_ddp_outside_torchrun_says_how_to_start_it(tmp_path: Path) -> None:
    done = train_cli(tmp_path, "device=ddp", *SHORT)
    assert done.returncode == 1
    assert done.last_line.endswith(
        "Error: device=ddp runs one process per device, started by torchrun "
        "(torchrun --nproc-per-node=2 train.py device=ddp) or by SLURM "
        "(srun --ntasks=2 python train.py device=ddp; hydra.launcher.tasks_per_node=2)"
    )


@pytest.mark.slow
def test_torchrun_with_a_one_process_device_says_to_use_ddp(tmp_path: Path) -> None:
    done = torchrun_cli(tmp_path, 2, "device=cpu", *SHORT)
    assert done.returncode != 0
    message = "torchrun started 2 processes, but device=cpu trains in one; use device=ddp"
    assert results(done.run_dir)["reason"].endswith(message)


def test_the_global_batch_must_divide_among_the_processes() -> None:
    cfg = compose_config("trainer.batch_size=65")
    with pytest.raises(ExperimentError) as error:
        validate(cfg, processes=2)
    assert str(error.value) == (
        "trainer.batch_size=65 is the batch of all 2 processes together; make it a multiple of 2"
    )


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads thread names from /proc")
def test_leaving_the_process_group_ends_gloos_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    # A gloo thread left running at exit can abort a completed run ("terminate called without
    # an active exception"): after teardown, none may be left, even with a DDP model trained.
    with teardown(ProcessGroup(0, 1, 0, 1, launcher=TORCHRUN)):
        join_alone(monkeypatch)
        model = nn.parallel.DistributedDataParallel(nn.Linear(4, 2))
        model(torch.ones(8, 4)).sum().backward()
        assert "pt_gloo_runloop" in thread_names()
        del model
    assert not {"pt_gloo_runloop", "gloo_tcp_loop"} & thread_names()


def test_the_first_batches_of_an_accumulated_step_skip_ddps_gradient_sync(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with teardown(ProcessGroup(0, 1, 0, 1, launcher=TORCHRUN)):
        join_alone(monkeypatch)
        model = nn.parallel.DistributedDataParallel(nn.Linear(4, 2))
        with without_gradient_sync(model):
            assert not model.require_backward_grad_sync
        assert model.require_backward_grad_sync
        del model
    assert isinstance(without_gradient_sync(nn.Linear(4, 2)), nullcontext)  # nothing to sync


def join_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Start a gloo process group of this process alone, as torchrun's only process."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(port))
    start(ProcessGroup(0, 1, 0, 1, launcher=TORCHRUN), "gloo", torch.device("cpu"), 60.0)


def thread_names() -> set[str]:
    return {(task / "comm").read_text().strip() for task in Path("/proc/self/task").iterdir()}


def test_torchruns_stop_after_another_process_failed_records_that_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # torchrun stops the others (SIGTERM) once a failed process ended, after it said why in the
    # agent's store: the run failed for that reason, it was not interrupted.
    agent_store = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    monkeypatch.setenv("TORCHELASTIC_USE_AGENT_STORE", "True")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(agent_store.port))
    group = ProcessGroup(0, 2, 0, 2, launcher=TORCHRUN)
    stopped = Terminated(signal.SIGTERM)
    assert announced_failure(group, stopped) is None  # nobody failed: stopped from outside
    first_failure(ProcessGroup(1, 2, 1, 2, launcher=TORCHRUN), ExperimentError("a bad value"))
    assert announced_failure(group, stopped) == "process 1: a bad value"
    assert announced_failure(group, KeyboardInterrupt()) is None  # Ctrl-C is the user's
    assert announced_failure(ProcessGroup(), stopped) is None
