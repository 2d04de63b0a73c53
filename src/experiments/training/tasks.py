"""What a batch holds and how a model is judged on it: the `task` config group.

A task is a module (so a loss with weights of its own goes to the device with the model) that
gives the training loss of a batch, and what evaluation adds up over a split on the device
(`tally`: a tensor of sums, no host sync per batch) and makes of the split's total (`measure`).
Its `metrics` name what it measures, which way each is better, and which one leads.

    task=classification     a batch is (images, class indices); cross-entropy; accuracy
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from experiments.config.metric_names import ACCURACY, CLASSIFICATION, TaskMetrics


@dataclass
class Measured:
    """A split's numbers as a task measures them: its metrics by name (its loss aside), and for
    a task that tells classes apart, the confusion matrix (row: true class, column: predicted)."""

    metrics: dict[str, float]
    confusion: list[list[int]] | None = None


class Task(nn.Module):
    """The base of a task; `forward` is its training loss, a batch's mean."""

    metrics: TaskMetrics

    def forward(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def evaluation_loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """The loss evaluation reports, a batch's mean: the training loss unless that has terms
        of its own (label smoothing) that would keep losses from comparing across settings."""
        return self(outputs, targets)

    def tally(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """A batch's sums, on the device: the same shape for every batch, added up over a split
        (and over processes)."""
        raise NotImplementedError

    def measure(self, total: torch.Tensor) -> Measured:
        """The metrics of a split whose batches' tallies add up to `total` (on the host)."""
        raise NotImplementedError


class Classification(Task):
    """A class per input: cross-entropy over the output's logits (with `label_smoothing` in
    training), accuracy and the confusion matrix, from which per-class accuracy follows."""

    metrics = CLASSIFICATION

    def __init__(self, label_smoothing: float = 0.0) -> None:
        super().__init__()
        self.label_smoothing = label_smoothing

    def forward(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(outputs, targets, label_smoothing=self.label_smoothing)

    def evaluation_loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(outputs, targets)

    def tally(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return confusion_counts(targets, outputs.argmax(1), outputs.shape[1])

    def measure(self, total: torch.Tensor) -> Measured:
        matrix = total.tolist()
        correct = sum(row[label] for label, row in enumerate(matrix))
        return Measured({ACCURACY.name: correct / sum(map(sum, matrix))}, matrix)


def confusion_counts(
    labels: torch.Tensor, predictions: torch.Tensor, num_classes: int
) -> torch.Tensor:
    """(num_classes, num_classes) int64 counts: row = true class, column = predicted class.

    A one-dimensional scatter_add_ of ones at `label * K + prediction`, on whatever device the
    tensors are on: no wait for a GPU (bincount would copy its minimum and maximum to the host,
    two waits per batch), and deterministic on CUDA too (integer sums; torch's deterministic
    mode has a one-dimensional scatter_add_)."""
    pairs = labels.reshape(-1).long() * num_classes + predictions.reshape(-1).long()
    counts = torch.zeros(num_classes * num_classes, dtype=torch.int64, device=pairs.device)
    counts.scatter_add_(0, pairs, torch.ones_like(pairs))
    return counts.reshape(num_classes, num_classes)
