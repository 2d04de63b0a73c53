"""Several processes: DistributedDataParallel under real torchrun processes (gloo on the CPU)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from experiments.config.validate import validate
from experiments.core.errors import ExperimentError
from experiments.data.batches import Batches
from experiments.data.types import Split
from experiments.devices.command import main as devices_main
from experiments.devices.placement import audit
from experiments.devices.plan import DevicePlan
from experiments.devices.process_group import ProcessGroup
from experiments.training.models import Tudui
from helpers import (
    PROCESS_1_FAILURE,
    assert_same_epochs_as_one_process,
    compose_config,
    failing_torchrun,
    on,
    results,
    torchrun_cli,
    train_cli,
)

SHORT = (
    "trainer.epochs=2",
    "trainer.limit_train_batches=6",
    "trainer.limit_eval_batches=4",
    "trainer.log_interval=3",
)


def test_two_processes_write_one_folder_and_match_one_process(tmp_path: Path) -> None:
    ddp = torchrun_cli(tmp_path / "ddp", 2, "device=ddp", *SHORT)
    assert ddp.returncode == 0, ddp.stderr
    single = train_cli(tmp_path / "single", "device=cpu", *SHORT)
    assert single.returncode == 0, single.stderr

    run_dir = ddp.run_dir  # exactly one run folder for both processes
    assert len(list((tmp_path / "ddp" / "outputs").glob("*/*"))) == 1
    log = (run_dir / "train.log").read_text()
    assert log.count("epoch 1/2:") == 1 and log.count("completed:") == 1
    assert len(list(run_dir.glob("events.out.tfevents.*"))) == 1
    result = results(run_dir)
    assert result["status"] == "completed"
    assert (result["world_size"], result["batch_size"], result["per_process_batch_size"]) == (
        2,
        64,
        32,
    )
    assert result["device"]["backend"] == "gloo"
    torch.load(run_dir / "checkpoints" / "last.pt", weights_only=True)

    # The two processes together take the same batches one process takes: the same numbers,
    # up to the order of floating point additions.
    assert_same_epochs_as_one_process(run_dir, single.run_dir, epochs=2, train_images=6 * 64)


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


def test_ddp_outside_torchrun_says_how_to_start_it(tmp_path: Path) -> None:
    done = train_cli(tmp_path, "device=ddp", *SHORT)
    assert done.returncode == 1
    assert done.last_line.endswith(
        "Error: device=ddp runs one process per device under torchrun: "
        "torchrun --nproc-per-node=2 train.py device=ddp"
    )


def test_torchrun_with_a_one_process_device_says_to_use_ddp(tmp_path: Path) -> None:
    done = torchrun_cli(tmp_path, 2, "device=cpu", *SHORT)
    assert done.returncode != 0
    message = "torchrun started 2 processes, but device=cpu trains in one; use device=ddp"
    assert results(done.run_dir)["reason"].endswith(message)


def batches(split: Split, group: ProcessGroup, **options: object) -> Batches:
    return Batches(
        split, batch_size=4, mean=[0.5], std=[0.5], device=on("cpu", group=group), **options
    )


def test_the_processes_share_every_batch_without_overlap() -> None:
    split = Split(torch.zeros(10, 1, 1, 1, dtype=torch.uint8), torch.arange(10))

    def labels(group: ProcessGroup) -> list[list[int]]:
        shuffle = torch.Generator().manual_seed(3)
        return [batch.tolist() for _, batch in batches(split, group, shuffle=shuffle)]

    whole = labels(ProcessGroup())
    halves = [labels(ProcessGroup(rank, 2, rank, 2, torchrun=True)) for rank in (0, 1)]
    assert [first + second for first, second in zip(*halves, strict=True)] == whole
    assert [len(batch) for batch in halves[0]] == [2, 2, 1]


def test_a_last_batch_too_small_to_share_is_left_out() -> None:
    split = Split(torch.zeros(9, 1, 1, 1, dtype=torch.uint8), torch.arange(9))
    assert batches(split, ProcessGroup(0, 3, 0, 3, torchrun=True)).sizes == [4, 4]
    assert batches(split, ProcessGroup()).sizes == [4, 4, 1]


def test_the_global_batch_must_divide_among_the_processes() -> None:
    cfg = compose_config("trainer.batch_size=65")
    with pytest.raises(ExperimentError) as error:
        validate(cfg, processes=2)
    assert str(error.value) == (
        "trainer.batch_size=65 is the batch of all 2 processes together; make it a multiple of 2"
    )


def test_the_audit_names_a_misplaced_tensor() -> None:
    model = Tudui(3, 32, 10)
    model.register_buffer("running_scale", torch.ones(1, device="meta"))
    batch = (torch.zeros(1, 3, 32, 32), torch.zeros(1, dtype=torch.int64))
    with pytest.raises(ExperimentError) as error:
        audit(model, nn.CrossEntropyLoss(), batch, DevicePlan("cpu"))
    assert str(error.value) == (
        "placement audit: model buffer running_scale is on meta, but device=cpu puts everything "
        "on cpu"
    )


def test_the_audit_checks_the_loss_module_and_the_batch() -> None:
    model = Tudui(3, 32, 10)
    weighted = nn.CrossEntropyLoss(weight=torch.ones(10, device="meta"))
    batch = (torch.zeros(1, 3, 32, 32), torch.zeros(1, dtype=torch.int64))
    with pytest.raises(ExperimentError, match="loss buffer weight is on meta"):
        audit(model, weighted, batch, DevicePlan("cpu"))
    misplaced = (torch.zeros(1, 3, 32, 32, device="meta"), batch[1])
    with pytest.raises(ExperimentError, match="batch images is on meta"):
        audit(model, nn.CrossEntropyLoss(), misplaced, DevicePlan("cpu"))
    audit(model, nn.CrossEntropyLoss(), batch, DevicePlan("cpu"))  # all in place: no error


def test_devices_lists_the_machine_and_resolves_requests(
    capsys: pytest.CaptureFixture[str],
) -> None:
    def devices(*overrides: str) -> tuple[int, list[str], str]:
        code = devices_main(list(overrides))
        printed = capsys.readouterr()
        return code, printed.out.splitlines(), printed.err.strip()

    code, lines, _ = devices()
    assert code == 0
    assert lines[0].startswith(f"torch {torch.__version__}")
    assert (
        lines[1].startswith("cpu: ") and f"torch uses {torch.get_num_threads()} threads" in lines[1]
    )
    assert devices("device=cpu")[1][-1] == "device=cpu: cpu"
    if torch.cuda.is_available():
        return
    assert lines[2].startswith("cuda: none (")
    assert lines[3].startswith("device=auto picks cpu: this machine has no CUDA GPU")
    code, _, error = devices("device=cuda:1")
    assert code == 1 and error.startswith("Error: device=cuda:1 needs a CUDA GPU")
    assert devices("device=ddp")[1][-2:] == [
        "device=ddp, process 0 of 2: cpu (ddp, gloo)",
        "device=ddp, process 1 of 2: cpu (ddp, gloo)",
    ]


def test_devices_runs_as_a_module() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "experiments.devices", "device=gpu"], capture_output=True, text=True
    )
    assert done.returncode == 1
    assert done.stderr.strip().startswith("Error: device=gpu is not an option of 'device'")
    assert "device=auto picks" in done.stdout
