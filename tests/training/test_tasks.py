"""The tasks: what each adds up over a split's batches measures the split as a whole would, and a
task refuses data of the other kind."""

from __future__ import annotations

import dataclasses
import logging
import math
from typing import Any

import pytest
import torch

from experiments.config.metric_names import declared
from experiments.core.errors import ExperimentError
from experiments.data.types import ImageData, Split
from experiments.training.tasks import (
    Classification,
    Measured,
    OwnTask,
    Regression,
    Segmentation,
    Task,
    per_pixel_cross_entropy,
)


def tallied(task: Task, outputs: torch.Tensor, targets: torch.Tensor) -> Measured:
    """The task's measure of a split tallied in batches of 7."""
    total = sum(
        task.tally(outputs[low : low + 7], targets[low : low + 7])
        for low in range(0, len(targets), 7)
    )
    return task.measure(total)


def test_regression_measures_rmse_mae_and_r2_in_the_targets_units() -> None:
    generator = torch.Generator().manual_seed(0)
    targets = 150 + 70 * torch.randn(50, 2, generator=generator)
    predicted = targets + 20 * torch.randn(50, 2, generator=generator)
    mean, std = [150.0, 140.0], [70.0, 80.0]
    task = Regression(mean, std)
    # The model predicts standardized targets.
    outputs = (predicted - torch.tensor(mean)) / torch.tensor(std)

    measured = tallied(task, outputs, targets).metrics

    errors = (predicted - targets).double()
    variance = (targets.double() - targets.double().mean(0)).square().sum(0)
    assert measured["rmse"] == pytest.approx(errors.square().mean(0).sqrt().mean().item(), 1e-5)
    assert measured["mae"] == pytest.approx(errors.abs().mean(0).mean().item(), 1e-5)
    r2 = (1 - errors.square().sum(0) / variance).mean().item()
    assert measured["r2"] == pytest.approx(r2, 1e-5)
    assert 0.8 < measured["r2"] < 1  # predictions off by 20 of a spread of 70


def test_the_r2_of_targets_of_one_value_is_undefined_and_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Their variance is 0, or rounding's 1e-16 of their squares: 1 - errors / it would be -inf,
    or some -1e12, not a share of anything."""
    task = Regression([152.3], [1.0])
    targets = torch.full((1000, 1), 152.3)
    outputs = 0.01 * torch.randn(1000, 1, generator=torch.Generator().manual_seed(0))
    with caplog.at_level(logging.WARNING, logger="experiments"):
        first = tallied(task, outputs, targets).metrics
        again = tallied(task, outputs, targets).metrics
    assert math.isnan(first["r2"]) and math.isnan(again["r2"])
    assert first["rmse"] == pytest.approx(0.01, abs=2e-3)  # the other metrics stand
    assert [record.getMessage() for record in caplog.records] == [
        "task=regression: a split's targets hold one value only, so R² (the share of their "
        "variance explained) is undefined: nan in the logs, null in results.json"
    ]


def test_regression_trains_on_the_standardized_target() -> None:
    task = Regression([100.0], [10.0])
    targets = torch.tensor([[110.0], [90.0]])
    assert task(torch.tensor([[1.0], [-1.0]]), targets).item() == 0
    assert task(torch.zeros(2, 1), targets).item() == pytest.approx(1.0)


def test_classification_measures_accuracy_and_its_confusion_matrix() -> None:
    targets = torch.tensor([0, 1, 2, 2, 1, 0, 0, 2, 1, 1, 0, 2, 2, 1, 0])
    predictions = torch.tensor([0, 1, 1, 2, 1, 0, 2, 2, 1, 0, 0, 2, 2, 1, 0])
    outputs = torch.nn.functional.one_hot(predictions, 3).float()

    measured = tallied(Classification(), outputs, targets)

    assert measured.metrics == {"accuracy": pytest.approx(12 / 15)}
    assert measured.confusion == [[4, 0, 1], [1, 4, 0], [0, 1, 4]]


def test_top5_accuracy_counts_the_images_whose_class_is_among_the_five_highest_logits() -> None:
    # 12 classes; logits rising with the class index (11 highest), but for each image's own
    # class (0, 1 or 2), set at a rank of its own: images 0-4 rank 1-5 (in the top five),
    # images 5-9 rank 6-10 (outside it); tallied in batches of 7.
    classes, targets = 12, torch.tensor([0, 1, 2, 0, 1, 2, 0, 1, 2, 0])
    outputs = torch.arange(classes, dtype=torch.float32).repeat(len(targets), 1)
    for image, label in enumerate(targets):
        rank = image + 1  # 1: the highest logit
        outputs[image, label] = classes - rank + 0.5  # above the class ranked `rank` without it
    ranks = (outputs > outputs.gather(1, targets[:, None])).sum(1) + 1
    assert ranks.tolist() == list(range(1, 11))

    measured = tallied(Classification(), outputs, targets)

    assert measured.metrics == {"accuracy": pytest.approx(1 / 10), "top5_accuracy": 0.5}
    assert sum(map(sum, measured.confusion)) == 10  # the matrix as before, its counts alone


def test_top5_accuracy_is_measured_only_among_ten_classes_or_more() -> None:
    targets = torch.tensor([0, 1, 1, 0])
    for classes in (2, 9):
        outputs = torch.randn(4, classes, generator=torch.Generator().manual_seed(classes))
        assert tallied(Classification(), outputs, targets).metrics.keys() == {"accuracy"}
    outputs = torch.randn(4, 10, generator=torch.Generator().manual_seed(10))
    measured = tallied(Classification(), outputs, targets).metrics
    assert measured.keys() == {"accuracy", "top5_accuracy"}
    assert measured["top5_accuracy"] >= measured["accuracy"]


def test_a_task_refuses_data_of_the_other_kind() -> None:
    classes = ImageData(
        "cifar10_sample",
        None,
        Split(torch.zeros(1, 3, 2, 2), torch.zeros(1)),
        ["a"],
        [0.5],
        [0.5],
        (3, 2, 2),
    )
    values = ImageData(
        "csv",
        None,
        Split(torch.zeros(1, 3, 1, 1), torch.zeros(1, 1)),
        ["y"],
        [0.0],
        [1.0],
        (3, 1, 1),
        targets="values",
    )
    masks = dataclasses.replace(classes, name="shapes", targets="masks")
    Classification().refuse_other_data("classification", classes)
    Regression().refuse_other_data("regression", values)
    Segmentation().refuse_other_data("segmentation", masks)
    with pytest.raises(ExperimentError) as refused:
        Regression().refuse_other_data("regression", classes)
    assert str(refused.value) == (
        "task=regression learns values, but dataset cifar10_sample holds classes to predict; use "
        "task=classification, or a dataset of values"
    )
    with pytest.raises(ExperimentError, match=r"^task=classification learns classes, but dataset"):
        Classification().refuse_other_data("classification", values)
    with pytest.raises(ExperimentError) as refused:
        Classification().refuse_other_data("classification", masks)
    assert str(refused.value) == (
        "task=classification learns classes, but dataset shapes holds masks to predict; use "
        "task=segmentation, or a dataset of classes"
    )


def test_the_deterministic_segmentation_loss_is_the_per_pixel_cross_entropy() -> None:
    """The form a deterministic run on a GPU takes gives the loss and gradient of the usual one
    (which has no deterministic CUDA kernel: the `gpu` test trains with it)."""
    outputs = torch.randn(4, 5, 6, 7, dtype=torch.float64, requires_grad=True)
    masks = torch.randint(0, 5, (4, 6, 7))
    usual = torch.nn.functional.cross_entropy(outputs, masks)
    (usual_gradient,) = torch.autograd.grad(usual, outputs)
    rows = per_pixel_cross_entropy(outputs, masks)
    (rows_gradient,) = torch.autograd.grad(rows, outputs)
    assert rows.item() == pytest.approx(usual.item(), rel=1e-12)
    assert torch.allclose(rows_gradient, usual_gradient, rtol=1e-12, atol=0)


def test_segmentation_measures_mean_iou_and_pixel_accuracy_over_every_pixel() -> None:
    # Two images of 2x3 pixels, classes 0 to 2; class 2 is never in the masks nor predicted.
    masks = torch.tensor([[[0, 0, 1], [0, 1, 1]], [[1, 1, 1], [0, 0, 0]]])
    predicted = torch.tensor([[[0, 1, 1], [0, 1, 1]], [[1, 1, 0], [0, 0, 0]]])
    outputs = torch.nn.functional.one_hot(predicted, 3).permute(0, 3, 1, 2).float()

    measured = tallied(Segmentation(), outputs, masks)

    # Class 0: 5 of 6 right, 1 more predicted: IoU 5/7; class 1: 5 right of 6, 1 more: 5/7.
    assert measured.metrics == {
        "miou": pytest.approx(5 / 7),
        "pixel_accuracy": pytest.approx(10 / 12),
    }
    assert measured.confusion == [[5, 1, 0], [1, 5, 0], [0, 0, 0]]
    assert Segmentation().outputs(3, (3, 32, 32)) == (3, 32, 32)


@pytest.mark.gpu
@pytest.mark.parametrize("task", [Classification(0.1), Regression([150.0], [70.0]), Segmentation()])
def test_a_tasks_loss_and_tally_never_make_the_host_wait_for_the_gpu(
    task: Task,
) -> None:
    """What the training step and evaluation ask of a task per batch, on the GPU with CUDA
    raising at any call that waits for it: the loss, its gradient, the tally added up."""
    device = torch.device("cuda", 0)
    task = task.to(device)
    outputs = torch.randn(64, *task.outputs(10, (3, 8, 8)), device=device)
    targets = {
        "classes": torch.randint(0, 10, (64,), device=device),
        "masks": torch.randint(0, 10, (64, 8, 8), device=device),
        "values": 150 + 70 * torch.randn(64, 10, device=device),
    }[task.targets]
    outputs.requires_grad_()
    total = task.tally(outputs.detach(), targets)  # warm up: CUDA's first calls may wait once
    losses = torch.zeros((), device=device)
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(3):
            task(outputs, targets).backward()
            total.add_(task.tally(outputs.detach(), targets))
            losses += task.evaluation_loss(outputs.detach(), targets).float() * len(targets)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert task.measure(total.cpu()).metrics and losses.item() > 0


class Own:
    """A task of one's own whose `right` and `loss` return what `returned` makes of a batch."""

    targets = "classes"

    def __init__(self, right: Any = None, loss: Any = None) -> None:
        self.right_made, self.loss_made = right, loss

    def right(self, outputs: torch.Tensor, targets: torch.Tensor) -> Any:
        correct = (outputs.argmax(1) == targets).float()
        return correct if self.right_made is None else self.right_made(correct)

    def loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> Any:
        loss = torch.nn.functional.cross_entropy(outputs, targets)
        return loss if self.loss_made is None else self.loss_made(loss)


SAID = "task._target_=my_tasks.Own"
RIGHT = declared({"right": "max"})  # what its config declares
BATCH = 12
PER_EXAMPLE = f"for a batch of {BATCH} it must return a value per example, shape ({BATCH},)"
SCALAR = "where it must return the batch's mean loss, a scalar tensor of shape ()"


def a_batch() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    outputs = torch.randn(BATCH, 3, generator=generator, requires_grad=True)
    return outputs, torch.randint(0, 3, (BATCH,), generator=generator)


@pytest.mark.parametrize(
    ("right", "said"),
    [
        (lambda correct: correct.mean(), f"right returned shape (), {PER_EXAMPLE}"),
        (
            lambda correct: correct.mean(0, keepdim=True),
            f"right returned shape (1,), {PER_EXAMPLE}",
        ),
        (
            lambda correct: correct[:, None].expand(-1, 3),
            f"right returned shape (12, 3), {PER_EXAMPLE}",
        ),
        (
            lambda correct: correct.mean().item(),
            f"right returned a Python float (0.3333), not a tensor, {PER_EXAMPLE}",
        ),
        (lambda correct: correct.tolist(), f"right returned list, not a tensor, {PER_EXAMPLE}"),
        (
            lambda correct: correct.to(torch.complex64),
            "right returned torch.complex64 values, where a metric's are real: floating point, "
            "integer or bool",
        ),
    ],
    ids=["batch-mean", "one-value", "n-by-3", "float", "list", "complex"],
)
def test_a_metric_of_another_shape_is_refused_naming_it(right: Any, said: str) -> None:
    """Summed, each would give a wrong number without a word (a batch's mean counted once for
    its 12 examples, N x 3 counted three times)."""
    task = OwnTask(Own(right=right), SAID, RIGHT)
    with pytest.raises(ExperimentError) as error:
        task.tally(*a_batch())
    assert str(error.value) == f"{SAID}: {said}"


@pytest.mark.parametrize(
    ("loss", "said"),
    [
        (lambda loss: loss.item(), f"loss returned a Python float (1.245), not a tensor, {SCALAR}"),
        (lambda loss: loss.expand(BATCH), f"loss returned shape (12,), {SCALAR}"),
        (
            lambda loss: loss * float("nan"),
            "loss returned nan at the first batch, before any step; a loss is finite for a "
            "model as built",
        ),
        (
            lambda loss: torch.tensor(loss.item()),
            "loss returned a tensor that does not require grad, so training could not change the "
            "model; compute it from the model's outputs, without .item(), .detach() or a new "
            "torch.tensor",
        ),
    ],
    ids=["float", "vector", "nan", "no-grad"],
)
def test_a_loss_that_cannot_train_is_refused_at_the_first_batch(loss: Any, said: str) -> None:
    task = OwnTask(Own(loss=loss), SAID, RIGHT)
    with pytest.raises(ExperimentError) as error:
        task(*a_batch())
    assert str(error.value).startswith(f"{SAID}: {said}")


def test_a_task_that_returns_what_it_should_is_measured() -> None:
    counted = Own(right=lambda correct: correct.bool())  # (bool: counted as 0 and 1)
    task = OwnTask(counted, SAID, RIGHT)
    outputs, targets = a_batch()
    task(outputs, targets).backward()
    with torch.no_grad():
        task(outputs, targets)  # (evaluation's loss: no gradient to require)
        measured = task.measure(task.tally(outputs, targets))
    expected = (outputs.argmax(1) == targets).float().mean().item()
    assert measured.metrics == {"right": pytest.approx(expected)}


def test_the_report_reads_each_shipped_tasks_own_metrics() -> None:
    from experiments.training import shipped_metrics, tasks

    assert [task.measured for task in tasks.SHIPPED] == list(shipped_metrics.SHIPPED)
