"""The optimizer's step fused where torch has a kernel for the device (optimizer.fused): decided
from the request, the class and torch's kernels; kept across a resume; and, on a GPU, the reason
for it: fp16's gradient scaler then never makes the host wait for the GPU."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from torch import nn

from experiments.core.errors import ExperimentError
from experiments.data.batches import Batches
from experiments.data.types import Split
from experiments.run.train import train
from experiments.training import loop
from experiments.training.models import MLP, LeNet, UNet
from experiments.training.optimizers import (
    build_optimizer,
    decide_fused,
    has_fused_kernel,
    host_waits_at_every_step,
)
from experiments.training.tasks import Classification, Regression, Segmentation, Task
from helpers import SMALL, compose_config, on, results, train_cli


class OwnAdam(torch.optim.Adam):
    """A subclass of one's own, whose step need not be torch's."""


@pytest.mark.parametrize(
    ("requested", "device_type", "has_kernel", "fused"),
    [
        (None, "cuda", True, True),  # the default: fused on GPUs, where it saves a wait per step
        (None, "cpu", True, False),  # no device to wait for: torch's own choice
        (None, "cuda", False, False),  # an optimizer torch has no fused step of
        (False, "cuda", True, False),
        (True, "cpu", True, True),
    ],
)
def test_fused_where_asked_and_torch_can(
    requested: bool | None, device_type: str, has_kernel: bool, fused: bool
) -> None:
    assert decide_fused(requested, torch.optim.Adam, device_type, has_kernel) is fused


def test_fused_asked_where_torch_cannot_is_refused_in_one_line() -> None:
    with pytest.raises(ExperimentError) as error:
        decide_fused(True, torch.optim.RMSprop, "cpu", has_kernel=False)
    assert str(error.value) == (
        f"optimizer.fused=true, but torch {torch.__version__} has no fused step of RMSprop on cpu "
        "(it has Adam, AdamW, SGD, Adagrad); set optimizer.fused=null (fused where torch can) or "
        "false"
    )


def test_torch_is_asked_which_optimizers_it_fuses() -> None:
    # torch 2.4 and later fuse Adam, AdamW and SGD on the CPU; never a class of one's own.
    fused = [torch.optim.Adam, torch.optim.AdamW, torch.optim.SGD]
    assert all(has_fused_kernel(kind, "cpu") for kind in fused)
    assert not has_fused_kernel(torch.optim.RMSprop, "cpu")
    assert not has_fused_kernel(OwnAdam, "cpu")


def test_a_fused_step_on_the_cpu_trains_as_the_unfused_one() -> None:
    fused_model, plain_model = tiny_model(), tiny_model()
    fused, was_fused = build("adam", fused_model, "optimizer.fused=true")
    plain, plain_fused = build("adam", plain_model)
    assert (was_fused, plain_fused) == (True, False)  # null: not on the CPU
    assert fused.param_groups[0]["fused"] is True
    for model, optimizer in ((fused_model, fused), (plain_model, plain)):
        for _ in range(3):
            optimizer.zero_grad()
            model(torch.ones(2, 4)).square().sum().backward()
            optimizer.step()
    for fused_weight, plain_weight in zip(
        fused_model.parameters(), plain_model.parameters(), strict=True
    ):
        torch.testing.assert_close(fused_weight, plain_weight)


def test_a_resumed_optimizer_keeps_the_step_it_was_built_with() -> None:
    # A CPU run's checkpoint (unfused) resumed where the optimizer is fused, and back: the saved
    # groups' flag would otherwise replace the one decided now.
    model = tiny_model()
    unfused, _ = build("sgd_momentum", model, "optimizer.fused=false")
    fused, _ = build("sgd_momentum", model, "optimizer.fused=true")
    model(torch.ones(2, 4)).sum().backward()
    unfused.step()
    fused.load_state_dict(unfused.state_dict())
    assert fused.param_groups[0]["fused"] is True
    unfused.load_state_dict(fused.state_dict())
    assert not unfused.param_groups[0]["fused"]


def test_a_run_records_whether_its_step_was_fused(tmp_path: Path) -> None:
    train(compose_config(*SMALL, "optimizer=adam", "optimizer.fused=true"), tmp_path)
    recorded = results(tmp_path)
    assert (recorded["optimizer_fused"], recorded["cudnn_benchmark"]) == (True, False)


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("precision", "accumulate", "optimizer", "clip"),
    [
        (torch.float16, 1, "adam", None),
        (torch.float16, 2, "sgd_momentum", 1.0),  # clipping unscales first: on the GPU too
        (torch.bfloat16, 2, "adam", 1.0),
    ],
)
def test_fused_training_steps_never_make_the_host_wait_for_the_gpu(
    precision: torch.dtype, accumulate: int, optimizer: str, clip: float | None
) -> None:
    train_steps_watched_for_waits(precision, accumulate, optimizer, clip, fused="null")


@pytest.mark.gpu
@pytest.mark.parametrize("task", ["regression", "segmentation"])
def test_every_tasks_training_steps_never_make_the_host_wait_for_the_gpu(task: str) -> None:
    train_steps_watched_for_waits(torch.bfloat16, 2, "adam", 1.0, fused="null", task=task)


@pytest.mark.gpu
def test_unfused_fp16_steps_make_the_host_wait_for_the_gpu() -> None:
    # What fusing saves, and proof that the watch above sees a wait: the scaler's found_inf.item().
    with pytest.raises(RuntimeError, match="synchroniz"):
        train_steps_watched_for_waits(torch.float16, 1, "adam", None, fused="false")


def test_an_unfused_fp16_step_on_a_gpu_is_said_to_make_the_host_wait() -> None:
    # The decision, by its inputs: GradScaler reads found_inf back unless the step takes it.
    parameters = list(nn.Linear(2, 2).parameters())
    unfused = torch.optim.SGD(parameters, lr=0.1)
    fused = torch.optim.SGD(parameters, lr=0.1, fused=True)  # (the CPU's fused step: 2.4+)
    scaling, plain = torch.amp.GradScaler("cpu"), torch.amp.GradScaler("cpu", enabled=False)
    note = host_waits_at_every_step(unfused, scaling, "cuda")
    assert note is not None and note.startswith(
        "trainer.precision=fp16 with SGD's step unfused: GradScaler reads back whether each "
        "step's gradients overflowed, so the host waits for the GPU at every step"
    )
    assert host_waits_at_every_step(fused, scaling, "cuda") is None
    assert host_waits_at_every_step(unfused, plain, "cuda") is None  # fp32 or bf16
    assert host_waits_at_every_step(unfused, scaling, "cpu") is None  # no GPU to wait for


@pytest.mark.gpu
def test_an_unfused_fp16_run_says_the_host_waits_in_its_log(tmp_path: Path) -> None:
    on_gpu = (
        *[o for o in SMALL if not o.startswith("device=")],
        "device=cuda:0",
        "trainer.precision=fp16",
    )
    waits = train_cli(tmp_path / "unfused", *on_gpu, "optimizer.fused=false")
    fused = train_cli(tmp_path / "fused", *on_gpu)
    assert waits.returncode == 0 and fused.returncode == 0, waits.stderr + fused.stderr
    assert "the host waits for the GPU at every step" in (waits.run_dir / "train.log").read_text()
    assert "the host waits" not in (fused.run_dir / "train.log").read_text()


def train_steps_watched_for_waits(
    precision: torch.dtype,
    accumulate: int,
    optimizer: str,
    clip: float | None,
    fused: str,
    task: str = "classification",
) -> None:
    """Train a model of `task` (LeNet classifying) on the GPU through the project's loop, 4
    optimizer steps, with CUDA raising at any call that waits for the GPU in steps 2 and 3 (the
    first may start CUDA's lazy state, and the last logs the epoch's loss, which waits by
    design)."""
    fp16 = precision == torch.float16
    runtime = on(
        "cuda:0",
        autocast_dtype=precision,
        scaler=torch.amp.GradScaler("cuda", enabled=fp16),
    )
    steps = 4
    model, scored, data = task_data(task, 16 * accumulate * steps)
    model = model.to(runtime.device)
    built, _ = build_optimizer(
        compose_config(f"optimizer={optimizer}", f"optimizer.fused={fused}").optimizer,
        model,
        "cuda",
    )
    batches = Batches(data, batch_size=16, mean=[0.5], std=[0.5], runtime=runtime)
    learner = loop.Learner(
        model, scored.to(runtime.device), built, gradient_clip=clip, accumulate_batches=accumulate
    )
    try:
        loop.train_epoch(
            learner,
            batches,
            runtime,
            log_interval=steps,
            log_step=lambda *logged: None,
            description="watched",
            after_step=watch_for_waits(first=2, last=steps - 1),
        )
    finally:
        torch.cuda.set_sync_debug_mode("default")


def task_data(task: str, count: int) -> tuple[nn.Module, Task, Split]:
    """A small model of `task`, the task, and `count` random examples of its kind of data."""
    torch.manual_seed(0)
    images = torch.randint(0, 256, (count, 3, 32, 32), dtype=torch.uint8)
    if task == "regression":  # a CSV's rows: 10 numbers each, and the value to predict
        rows = Split(torch.randn(count, 10, 1, 1), torch.randn(count, 1))
        return MLP(10, 1, 1, [16]), Regression(), rows
    if task == "segmentation":
        masks = torch.randint(0, 4, (count, 32, 32))
        return UNet(3, 32, 4, base_channels=8), Segmentation(), Split(images, masks)
    return LeNet(3, 32, 10), Classification(), Split(images, torch.randint(0, 10, (count,)))


def watch_for_waits(first: int, last: int) -> Callable[[int], None]:
    """An `after_step` that has CUDA raise at a synchronizing call from optimizer step `first`
    through step `last`."""

    def after_step(step: int) -> None:
        watching = first - 1 <= step < last
        torch.cuda.set_sync_debug_mode("error" if watching else "default")

    return after_step


def tiny_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Linear(4, 3)


def build(option: str, model: nn.Module, *overrides: str) -> tuple[torch.optim.Optimizer, bool]:
    config = compose_config(f"optimizer={option}", *overrides).optimizer
    return build_optimizer(config, model, "cpu")
