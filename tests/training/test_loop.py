"""The training loop: gradient clipping (also in fp16), a per-step schedule, label smoothing,
and the end of a diverged run."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from itertools import pairwise

import pytest
import torch
from torch import nn
from torch.optim import SGD, Optimizer
from torch.optim.lr_scheduler import LRScheduler

from experiments.config.choices import Interval
from experiments.core.errors import ExperimentError
from experiments.data.batches import Batches
from experiments.data.epoch_length import optimizer_steps
from experiments.data.types import Split
from experiments.training import loop, schedules
from experiments.training.models import LeNet
from experiments.training.tasks import Classification, Task
from helpers import LR, half_cosine, lr_of, on, scheduler_config

CPU = torch.device("cpu")


def tiny_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 4 * 4, 3))


def tiny_batches(batches: int = 3, batch_size: int = 4, device: torch.device = CPU) -> Batches:
    generator = torch.Generator().manual_seed(0)
    count = batches * batch_size
    images = torch.randint(0, 256, (count, 3, 4, 4), generator=generator, dtype=torch.uint8)
    labels = torch.randint(0, 3, (count,), generator=generator)
    return Batches(
        Split(images, labels),
        batch_size=batch_size,
        mean=[0.5],
        std=[0.5],
        runtime=on(str(device)),
    )


Logged = list[tuple[int, float, float, float]]


def train(
    model: nn.Module,
    optimizer: Optimizer,
    batches: Batches,
    *,
    task: Task | None = None,
    gradient_clip: float | None = None,
    scheduler: LRScheduler | None = None,
    on_step: Callable[[], None] = lambda: None,
    device: torch.device = CPU,
    fp16: bool = False,
    initial_scale: float = 2.0**16,
) -> tuple[loop.TrainingResult, Logged]:
    """One epoch of the real loop (in fp32, or fp16 with loss scaling from `initial_scale`),
    logging every step."""
    logged: Logged = []

    def log_step(step: int, loss: float, speed: float, lr: float) -> None:
        logged.append((step, loss, speed, lr))
        on_step()

    learner = loop.Learner(model, task or Classification(), optimizer, scheduler, gradient_clip)
    precision = {
        "autocast_dtype": torch.float16 if fp16 else None,
        "scaler": torch.amp.GradScaler(device.type, initial_scale, enabled=fp16),
    }
    result = loop.train_epoch(
        learner,
        batches,
        on(str(device), **precision),
        log_interval=1,
        log_step=log_step,
        description="t",
    )
    return result, logged


def flat(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in model.parameters()])


@pytest.mark.parametrize("clip", [1e-3, None])
def test_gradient_clip_bounds_each_step_of_the_parameters(clip: float | None) -> None:
    model = tiny_model()
    optimizer = SGD(model.parameters(), lr=1.0)
    snapshots = [flat(model)]
    train(
        model,
        optimizer,
        tiny_batches(),
        gradient_clip=clip,
        on_step=lambda: snapshots.append(flat(model)),
    )
    moves = [(b - a).norm().item() for a, b in pairwise(snapshots)]
    total = (snapshots[-1] - snapshots[0]).norm().item()
    assert len(moves) == 3
    if clip is not None:
        # SGD with lr 1: a step moves the parameters by the clipped gradient, of norm <= clip.
        assert total <= 3 * 1.0 * clip + 1e-7
        # The gradients are far larger than the clip, so every step is clipped to it, not to 0.
        assert moves == pytest.approx([clip] * 3, rel=1e-3)
    else:
        assert total > 100 * 3 * 1e-3


@pytest.mark.gpu
def test_fp16_clips_the_unscaled_gradients() -> None:
    # Clipped while still scaled (x65536), the steps would be 65536 times smaller than the clip.
    cuda = torch.device("cuda")
    model = tiny_model().to(cuda)
    optimizer = SGD(model.parameters(), lr=1.0)
    snapshots = [flat(model)]
    train(
        model,
        optimizer,
        tiny_batches(device=cuda),
        gradient_clip=1e-3,
        on_step=lambda: snapshots.append(flat(model)),
        device=cuda,
        fp16=True,
    )
    moves = [(b - a).norm().item() for a, b in pairwise(snapshots)]
    assert moves == pytest.approx([1e-3] * 3, rel=1e-2)


def test_a_per_step_schedule_steps_once_per_batch_and_logs_each_steps_lr() -> None:
    model = tiny_model()
    optimizer = SGD(model.parameters(), lr=LR)
    config = scheduler_config("cosine")
    scheduler, interval = schedules.for_run(config, optimizer, epochs=2, steps_per_epoch=3)
    assert interval == Interval.step
    expected = [half_cosine(LR, 0.0, t, 6) for t in range(4)]
    snapshots = [[p.detach().clone() for p in model.parameters()]]
    result, logged = train(
        model,
        optimizer,
        tiny_batches(),
        scheduler=scheduler,
        on_step=lambda: snapshots.append([p.detach().clone() for p in model.parameters()]),
    )
    lrs = [lr for _, _, _, lr in logged]
    assert [step for step, *_ in logged] == [1, 2, 3]
    assert lrs[0] == LR
    assert lrs == pytest.approx(expected[:3], rel=1e-9)
    assert result.lr == lrs[-1]
    assert lr_of(optimizer) == pytest.approx(expected[3], rel=1e-9)

    # Each step trained with the lr it logged: SGD moved its parameters by lr x gradient.
    replay = tiny_model()
    steps = zip(tiny_batches(), lrs, pairwise(snapshots), strict=True)
    for (images, labels), lr, (before, after) in steps:
        with torch.no_grad():
            for parameter, value in zip(replay.parameters(), before, strict=True):
                parameter.copy_(value)
        replay.zero_grad()
        nn.functional.cross_entropy(replay(images), labels).backward()
        for parameter, old, new in zip(replay.parameters(), before, after, strict=True):
            assert parameter.grad is not None
            torch.testing.assert_close(new, old - lr * parameter.grad)


def test_an_fp16_step_skipped_for_overflow_brings_no_warning_about_the_schedule() -> None:
    # fp16's scaler skips a step whose scaled gradients overflow (often the first, while it finds
    # its scale); the schedule steps all the same, and torch would warn that it stepped first.
    model = tiny_model()
    optimizer = SGD(model.parameters(), lr=LR)
    config = scheduler_config("cosine")
    scheduler, _ = schedules.for_run(config, optimizer, epochs=1, steps_per_epoch=1)
    before = flat(model)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        train(
            model,
            optimizer,
            tiny_batches(batches=1),
            scheduler=scheduler,
            fp16=True,
            initial_scale=2.0**40,
        )
    assert torch.equal(flat(model), before)  # the step was skipped
    assert [str(warning.message) for warning in caught] == []


def test_label_smoothing_changes_the_trained_loss_to_the_smoothed_cross_entropy() -> None:
    smoothing, classes = 0.2, 3
    model = tiny_model()
    batches = tiny_batches(batches=1)
    ((images, labels),) = list(batches)
    with torch.no_grad():
        log_p = torch.log_softmax(model(images), dim=1)
    picked = log_p.gather(1, labels[:, None]).squeeze(1)
    unsmoothed = -picked.mean().item()
    smoothed = (-(1 - smoothing) * picked - smoothing / classes * log_p.sum(1)).mean().item()

    result, _ = train(
        model,
        SGD(model.parameters(), lr=LR),
        batches,
        task=Classification(label_smoothing=smoothing),
    )
    assert result.images == 4
    assert result.loss == pytest.approx(smoothed, rel=1e-5)
    assert abs(smoothed - unsmoothed) > 1e-3
    assert result.loss != pytest.approx(unsmoothed, rel=1e-3)


class NanFrom(nn.Module):
    """`tiny_model`'s outputs, nan from the `step`-th call on."""

    def __init__(self, step: int) -> None:
        super().__init__()
        self.model = tiny_model()
        self.calls = 0
        self.step = step

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        outputs = self.model(images)
        return outputs * float("nan") if self.calls >= self.step else outputs


@pytest.mark.parametrize("log_interval", [1, 3])
def test_a_loss_that_is_not_finite_ends_the_epoch_naming_its_first_step(log_interval: int) -> None:
    model = NanFrom(step=2)
    learner = loop.Learner(model, nn.CrossEntropyLoss(), SGD(model.parameters(), lr=LR))
    with pytest.raises(ExperimentError) as error:
        loop.train_epoch(
            learner,
            tiny_batches(),
            on("cpu"),
            log_interval=log_interval,
            log_step=lambda *logged: None,
            description="epoch 2/5",
        )
    assert str(error.value) == (
        "diverged: train loss nan at epoch 2/5, step 2; lower optimizer.lr or set "
        "trainer.gradient_clip"
    )


def test_without_the_divergence_check_the_epoch_trains_on() -> None:
    model = NanFrom(step=2)
    optimizer = SGD(model.parameters(), lr=LR)
    learner = loop.Learner(model, nn.CrossEntropyLoss(), optimizer, stop_on_divergence=False)
    result = loop.train_epoch(
        learner,
        tiny_batches(),
        on("cpu"),
        log_interval=1,
        log_step=lambda *logged: None,
        description="epoch 1/1",
    )
    assert math.isnan(result.loss) and result.images == 12


@pytest.mark.parametrize("accumulate", [2, 3])
def test_accumulated_batches_step_as_one_batch_of_them_all(accumulate: int) -> None:
    # 18 images in batches of 4 (the last of 2), `accumulate` to a step, against batches of
    # 4 * `accumulate`: the same steps of the same images, the last one short. LeNet has no
    # batch norm, so the steps' gradients, and the weights after them, are the same.
    generator = torch.Generator().manual_seed(0)
    split = Split(
        torch.randint(0, 256, (18, 3, 32, 32), generator=generator, dtype=torch.uint8),
        torch.randint(0, 10, (18,), generator=generator),
    )

    def trained(batch_size: int, accumulate_batches: int) -> tuple[torch.Tensor, Logged]:
        torch.manual_seed(0)
        model = LeNet(3, 32, 10)
        optimizer = SGD(model.parameters(), lr=0.1, momentum=0.9)
        batches = Batches(split, batch_size=batch_size, mean=[0.5], std=[0.5], runtime=on())
        steps = optimizer_steps(len(batches), accumulate_batches)
        scheduler, _ = schedules.for_run(
            scheduler_config("cosine"), optimizer, epochs=1, steps_per_epoch=steps
        )
        logged: Logged = []
        loop.train_epoch(
            loop.Learner(
                model,
                nn.CrossEntropyLoss(),
                optimizer,
                scheduler,
                accumulate_batches=accumulate_batches,
            ),
            batches,
            on(),
            log_interval=1,
            log_step=lambda *row: logged.append(row),
            description="t",
        )
        return flat(model), logged

    weights, logged = trained(4, accumulate)
    whole_weights, whole_logged = trained(4 * accumulate, 1)

    assert len(logged) == optimizer_steps(5, accumulate) == len(whole_logged)
    assert [row[0] for row in logged] == [row[0] for row in whole_logged]  # steps
    assert [row[1] for row in logged] == pytest.approx([row[1] for row in whole_logged])  # losses
    assert [row[3] for row in logged] == pytest.approx([row[3] for row in whole_logged])  # lrs
    assert torch.allclose(weights, whole_weights, atol=1e-6, rtol=0)
    assert not torch.allclose(weights, trained(4, 1)[0], atol=1e-3)  # a step per batch differs


def test_cuda_graphs_begin_a_step_at_each_optimizer_step_and_evaluated_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # trainer.compile_mode=reduce-overhead: a step of graphs per optimizer step, not per batch
    # (a step's batches add up their gradients), and per evaluated batch. Counted on torch's own.
    marked = []
    mark = torch.compiler.cudagraph_mark_step_begin
    monkeypatch.setattr(
        torch.compiler, "cudagraph_mark_step_begin", lambda: (marked.append(1), mark())
    )
    model = tiny_model()
    learner = loop.Learner(
        model,
        Classification(),
        SGD(model.parameters(), lr=0.1),
        accumulate_batches=2,
        cuda_graphs=True,
    )
    loop.train_epoch(
        learner,
        tiny_batches(batches=5),
        on(),
        log_interval=10,
        log_step=lambda *logged: None,
        description="t",
    )
    assert len(marked) == 3  # batches 1-2, 3-4, 5
    loop.evaluate(model, tiny_batches(batches=2), on(), Classification(), cuda_graphs=True)
    assert len(marked) == 5
