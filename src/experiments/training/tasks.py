"""The `task` config group: a module giving a batch's training loss, what evaluation adds up over
a split on the device (`tally`, no host sync per batch) and what it makes of it (`measure`)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from omegaconf import DictConfig
from torch import Tensor, nn

from experiments.config.build import build, check_importable
from experiments.config.metric_names import ACCURACY, LOSS, TaskMetrics
from experiments.config.task_metrics import metrics_of, task_class
from experiments.core.errors import ExperimentError
from experiments.data.types import ImageData
from experiments.training import shipped_metrics
from experiments.training.shipped_metrics import MAE, MIOU, PIXEL_ACCURACY, R2, RMSE, TOP5_ACCURACY

log = logging.getLogger("experiments")

# Targets whose total sum of squares is below this share of their squares' sum hold one value:
# summing it in float64 leaves some 1e-16 of it, a spread a millionth of theirs is beyond float32.
CONSTANT_SHARE = 1e-12

# Top-5 accuracy: among the model's `TOP_K` highest logits, with `TOP5_LEAST_CLASSES` or more.
TOP_K = 5
TOP5_LEAST_CLASSES = 10


@dataclass
class Measured:
    """A split's metrics by name (its loss aside), and a classifying task's confusion matrix."""

    metrics: dict[str, float]
    confusion: list[list[int]] | None = None


class Task(nn.Module):
    """A task, `forward` its training loss; the config layer reads a class's metrics unbuilt."""

    # What a shipped task may measure, each metric with its better way, the first leading.
    measured: ClassVar[TaskMetrics]
    narrower: ClassVar[tuple[TaskMetrics, ...]] = ()  # what else its config may declare
    unmeasured: ClassVar[dict[str, str]] = {}  # why a metric goes unmeasured with some data
    metrics: TaskMetrics  # what it measures of its data, given when it is built (`build_task`)
    targets = "classes"  # an index per image; "values": float vectors; "masks": a class per pixel

    @classmethod
    def measures(cls, declared: Mapping[str, str] | None, classes: int | None) -> TaskMetrics:
        """What it measures of data of `classes` classes, its config declaring `declared`."""
        return cls.measured

    def refuse_other_data(self, option: str, data: ImageData) -> None:
        if data.targets == self.targets:
            return
        raise ExperimentError(
            f"task={option} learns {self.targets}, but dataset {data.name} holds {data.targets} "
            f"to predict; use task={FITTING[data.targets]}, or a dataset of {self.targets}"
        )

    def outputs(self, num_classes: int, shape: tuple[int, ...]) -> tuple[int, ...]:
        return (num_classes,)

    def forward(self, outputs: Tensor, targets: Tensor) -> Tensor:
        raise NotImplementedError

    def evaluation_loss(self, outputs: Tensor, targets: Tensor) -> Tensor:
        """The training loss less terms (label smoothing) that keep losses from comparing."""
        return self(outputs, targets)

    def tally(self, outputs: Tensor, targets: Tensor) -> Tensor:
        """A batch's sums on the device, of one shape for every batch."""
        raise NotImplementedError

    def measure(self, total: Tensor) -> Measured:
        raise NotImplementedError


class Classification(Task):
    """A class per input: cross-entropy, accuracy, top-5 accuracy and the confusion matrix."""

    measured = shipped_metrics.CLASSIFICATION
    metrics = measured  # (of its data's classes, once built by `build_task`)
    BEFORE_TOP5 = shipped_metrics.BEFORE_TOP5
    narrower = (BEFORE_TOP5,)
    unmeasured: ClassVar[dict[str, str]] = {
        TOP5_ACCURACY.name: f"top-5 accuracy is measured among {TOP5_LEAST_CLASSES} classes or more"
    }

    def __init__(self, label_smoothing: float = 0.0) -> None:
        super().__init__()
        self.label_smoothing = label_smoothing

    @classmethod
    def measures(cls, declared: Mapping[str, str] | None, classes: int | None) -> TaskMetrics:
        """Top-5 accuracy among `TOP5_LEAST_CLASSES` or more, unless its config leaves it out."""
        many = classes is not None and classes >= TOP5_LEAST_CLASSES
        kept = declared is None or TOP5_ACCURACY.name in declared
        return cls.measured if many and kept else cls.BEFORE_TOP5

    def forward(self, outputs: Tensor, targets: Tensor) -> Tensor:
        """Of class indices, or probabilities mixup or CutMix mixed, smoothed as torchvision's."""
        return nn.functional.cross_entropy(outputs, targets, label_smoothing=self.label_smoothing)

    def evaluation_loss(self, outputs: Tensor, targets: Tensor) -> Tensor:
        return nn.functional.cross_entropy(outputs, targets)

    def tally(self, outputs: Tensor, targets: Tensor) -> Tensor:
        """The confusion matrix's counts, and a last column of each class's images in the top K."""
        confusion = confusion_counts(targets, outputs.argmax(1), outputs.shape[1])
        return torch.cat([confusion, in_top_k(outputs, targets, TOP_K)[:, None]], dim=1)

    def measure(self, total: Tensor) -> Measured:
        matrix, in_top = total[:, :-1].tolist(), total[:, -1].sum().item()
        images = sum(map(sum, matrix))
        correct = sum(row[label] for label, row in enumerate(matrix))
        measured = {ACCURACY.name: correct / images}
        if TOP5_ACCURACY in self.metrics.evaluated and len(matrix) >= TOP5_LEAST_CLASSES:
            measured[TOP5_ACCURACY.name] = in_top / images
        return Measured(measured, matrix)


class Regression(Task):
    """Float vectors, standardized so the loss starts near 1; each metric the mean over targets."""

    targets = "values"
    measured = shipped_metrics.REGRESSION

    def __init__(self, target_mean: Sequence[float] = (0.0,), target_std: Sequence[float] = (1.0,)):
        super().__init__()
        self.register_buffer("mean", torch.tensor(target_mean, dtype=torch.float32))
        self.register_buffer("std", torch.tensor(target_std, dtype=torch.float32))
        self._said_r2_undefined = False

    def forward(self, outputs: Tensor, targets: Tensor) -> Tensor:
        return nn.functional.mse_loss(outputs.float(), (targets - self.mean) / self.std)

    def tally(self, outputs: Tensor, targets: Tensor) -> Tensor:
        """Per target, in float64: sums of squared and absolute errors, targets, squares; count."""
        predicted = (outputs.double() * self.std + self.mean).reshape(targets.shape)
        errors, values = predicted - targets, targets.double()
        count = torch.full_like(values[0], len(values))
        sums = [errors.square(), errors.abs(), values, values.square()]
        return torch.stack([*(each.sum(0) for each in sums), count])

    def measure(self, total: Tensor) -> Measured:
        squared, absolute, summed, squares, count = total
        variance = squares - summed.square() / count  # the targets' total sum of squares
        # Targets of one value have none but rounding's: R², the share of it explained, is nan.
        constant = variance <= squares * CONSTANT_SHARE
        if constant.any() and not self._said_r2_undefined:
            self._said_r2_undefined = True
            log.warning(
                "task=regression: a split's targets hold one value only, so R² (the share of "
                "their variance explained) is undefined: nan in the logs, null in results.json"
            )
        return Measured(
            {
                RMSE.name: (squared / count).sqrt().mean().item(),
                MAE.name: (absolute / count).mean().item(),
                R2.name: torch.where(constant, torch.nan, 1 - squared / variance).mean().item(),
            }
        )


class Segmentation(Task):
    """A class per pixel, (N, K, H, W) logits against (N, H, W) masks: mean IoU, pixel accuracy."""

    targets = "masks"
    measured = shipped_metrics.SEGMENTATION

    def forward(self, outputs: Tensor, targets: Tensor) -> Tensor:
        # CUDA's nll_loss2d has no deterministic version, so trainer.deterministic=true would fail
        # at the first step; the rows of logits' loss has one, but costs a copy of the logits.
        if outputs.is_cuda and torch.are_deterministic_algorithms_enabled():
            return per_pixel_cross_entropy(outputs, targets)
        return nn.functional.cross_entropy(outputs, targets)

    def outputs(self, num_classes: int, shape: tuple[int, ...]) -> tuple[int, ...]:
        return (num_classes, *shape[1:])

    def tally(self, outputs: Tensor, targets: Tensor) -> Tensor:
        return confusion_counts(targets, outputs.argmax(1), outputs.shape[1])

    def measure(self, total: Tensor) -> Measured:
        counts = total.double()
        right = counts.diagonal()
        union = counts.sum(0) + counts.sum(1) - right  # predicted or true, per class
        present = union > 0
        return Measured(
            {
                MIOU.name: (right[present] / union[present]).mean().item(),
                PIXEL_ACCURACY.name: (right.sum() / counts.sum()).item(),
            },
            total.tolist(),
        )


def per_pixel_cross_entropy(outputs: Tensor, targets: Tensor) -> Tensor:
    rows = outputs.movedim(1, -1).reshape(-1, outputs.shape[1])
    return nn.functional.cross_entropy(rows, targets.reshape(-1))


SHIPPED = (Classification, Regression, Segmentation)  # whose metrics the report reads runs by
# The task that learns each kind of target.
FITTING = {"classes": "classification", "values": "regression", "masks": "segmentation"}


class OwnTask(Task):
    """A task of one's own (docs/tasks.md), each method's result checked at its first batch: a
    metric of another shape would be summed into a wrong number silently."""

    def __init__(self, own: Any, said: str, metrics: TaskMetrics) -> None:
        super().__init__()
        self.own = own  # (a module of its own goes to the device with this one)
        self.said = said  # task._target_=<its class>, to begin its refusals
        self.targets = getattr(own, "targets", "classes")
        self.metrics = metrics
        self.names = [metric.name for metric in self.metrics.evaluated if metric != LOSS]
        # "training", "evaluation", "metrics": checked once, as finiteness waits for the device.
        self.checked: set[str] = set()

    def forward(self, outputs: Tensor, targets: Tensor) -> Tensor:
        loss = self.own.loss(outputs, targets)
        mode = "training" if torch.is_grad_enabled() else "evaluation"
        if mode not in self.checked:
            self._check_loss(loss)
            self.checked.add(mode)
        return loss

    def tally(self, outputs: Tensor, targets: Tensor) -> Tensor:
        values = [getattr(self.own, name)(outputs, targets) for name in self.names]
        if "metrics" not in self.checked:
            for name, value in zip(self.names, values, strict=True):
                self._check_metric(name, value, len(targets))
            self.checked.add("metrics")
        sums = [value.double().sum() for value in values]
        return torch.stack([*sums, outputs.new_full((), len(targets), dtype=torch.float64)])

    def measure(self, total: Tensor) -> Measured:
        *sums, count = total.tolist()
        return Measured({name: value / count for name, value in zip(self.names, sums, strict=True)})

    def _refusal(self, what: str) -> ExperimentError:
        return ExperimentError(f"{self.said}: {what}")

    def _check_tensor(self, name: str, value: Any, shape: tuple[int, ...], must: str) -> None:
        if not isinstance(value, Tensor):
            raise self._refusal(f"{name} returned {_described(value)}, {must}")
        if value.shape != shape:
            raise self._refusal(f"{name} returned shape {tuple(value.shape)}, {must}")

    def _check_loss(self, loss: Any) -> None:
        must = "where it must return the batch's mean loss, a scalar tensor of shape ()"
        self._check_tensor("loss", loss, (), must)
        if loss.is_complex():
            raise self._refusal(f"loss returned a {loss.dtype}, {must}")
        if not torch.is_grad_enabled():  # (a model that diverged is evaluated as it is)
            return
        if not torch.isfinite(loss).item():
            raise self._refusal(
                f"loss returned {loss.item()} at the first batch, before any step; a loss is "
                "finite for a model as built"
            )
        if not loss.requires_grad:
            raise self._refusal(
                "loss returned a tensor that does not require grad, so training could not "
                "change the model; compute it from the model's outputs, without .item(), "
                ".detach() or a new torch.tensor"
            )

    def _check_metric(self, name: str, value: Any, count: int) -> None:
        must = f"for a batch of {count} it must return a value per example, shape ({count},)"
        self._check_tensor(name, value, (count,), must)
        if value.is_complex():
            raise self._refusal(
                f"{name} returned {value.dtype} values, where a metric's are real: floating "
                "point, integer or bool"
            )


def _described(value: Any) -> str:
    if isinstance(value, bool | int | float):
        return f"a Python {type(value).__name__} ({value:.4g}), not a tensor"
    return f"{type(value).__name__}, not a tensor"


def build_task(node: DictConfig, classes: int | None = None) -> Task:
    """The task a `task` config names, for data of `classes` classes."""
    metrics = metrics_of({"task": node, "dataset": {"num_classes": classes}})
    assert metrics is not None, "a task of one's own's config declares its metrics"
    if task_class(node) is None:
        check_importable("task._target_", node._target_)
    built = build(node, leave_out=("metrics",))
    if isinstance(built, Task):
        built.metrics = metrics
        return built
    said = f"task._target_={node._target_}"
    names = [LOSS.name, *(metric.name for metric in metrics.evaluated if metric != LOSS)]
    missing = [name for name in names if not callable(getattr(built, name, None))]
    targets = getattr(built, "targets", "classes")
    if missing or targets not in FITTING:
        wrong = [f"no method {name}" for name in missing]
        wrong += [f"targets = {targets!r} (classes, values or masks)"] * (targets not in FITTING)
        raise ExperimentError(f"{said}: {'; '.join(wrong)} (docs/tasks.md)")
    return OwnTask(built, said, metrics)


def in_top_k(outputs: Tensor, targets: Tensor, k: int) -> Tensor:
    """Per true class, on the device: its images whose class is among their `k` highest logits."""
    classes = outputs.shape[1]
    highest = outputs.topk(min(k, classes), dim=1).indices
    hits = (highest == targets.reshape(-1, 1)).any(1).long()
    counts = torch.zeros(classes, dtype=torch.int64, device=outputs.device)
    with _integer_sums():
        return counts.scatter_add_(0, targets.reshape(-1).long(), hits)


def confusion_counts(labels: Tensor, predictions: Tensor, num_classes: int) -> Tensor:
    """Row: true class, column: predicted; by scatter_add_, as bincount syncs with the host."""
    pairs = labels.reshape(-1).long() * num_classes + predictions.reshape(-1).long()
    counts = torch.zeros(num_classes * num_classes, dtype=torch.int64, device=pairs.device)
    with _integer_sums():
        counts.scatter_add_(0, pairs, torch.ones_like(pairs))
    return counts.reshape(num_classes, num_classes)


@contextlib.contextmanager
def _integer_sums() -> Iterator[None]:
    """A sum of integers is exact in any order: deterministic mode is set aside for it, whose
    ordered scatter_add_ on CUDA reads the indices' bounds back to the host, a wait per call."""
    if not torch.are_deterministic_algorithms_enabled():
        yield
        return
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(False)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(True, warn_only=warn_only)
