"""The confusion matrix: counted (also on a GPU), drawn, saved as a PNG and a TensorBoard image."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pytest
import torch
from PIL import Image
from torch.utils.tensorboard import SummaryWriter

from experiments.records import confusion
from experiments.training.loop import confusion_counts
from helpers import read_events


def test_confusion_matrix_counts_pairs_of_true_and_predicted_class() -> None:
    labels = torch.tensor([0, 0, 1, 1, 2, 2, 2])
    predictions = torch.tensor([0, 1, 1, 1, 2, 0, 2])

    counts = confusion_counts(labels, predictions, num_classes=3)

    assert counts.dtype == torch.int64
    assert counts.tolist() == [[1, 1, 0], [0, 2, 0], [1, 0, 2]]
    accuracy = (labels == predictions).float().mean().item()
    assert counts.diagonal().sum().item() / counts.sum().item() == pytest.approx(accuracy)


@pytest.mark.gpu
def test_confusion_matrix_counts_on_the_gpu() -> None:
    labels = torch.randint(0, 10, (1000,))
    predictions = torch.randint(0, 10, (1000,))
    expected = confusion_counts(labels, predictions, 10)

    counts = confusion_counts(labels.cuda(), predictions.cuda(), 10)

    assert counts.device.type == "cuda"
    assert torch.equal(counts.cpu(), expected)


def test_confusion_matrix_is_saved_as_png_and_tensorboard_image(tmp_path: Path) -> None:
    counts = [[5, 1, 0], [2, 7, 1], [0, 0, 9]]
    path = tmp_path / "confusion_matrix.png"
    writer = SummaryWriter(tmp_path / "run")

    confusion.save(counts, ["cat", "dog", "bird"], "test, epoch 3", path, writer, step=30)
    writer.close()

    assert plt.get_fignums() == []  # closed
    with Image.open(path) as png:
        assert png.format == "PNG"
        width, height = png.size
    assert 400 < width < 1200 and 400 < height < 1200
    (image,) = read_events(tmp_path / "run").Images("confusion_matrix")
    assert image.step == 30
    assert image.width > 300 and image.height > 300


def test_a_class_without_images_is_a_row_of_zeros(tmp_path: Path) -> None:
    counts = confusion_counts(torch.tensor([0, 0, 1]), torch.tensor([0, 1, 1]), num_classes=3)
    assert counts[2].tolist() == [0, 0, 0]

    fig = confusion.figure(counts.tolist(), ["a", "b", "never seen"], "test")
    try:
        shares = fig.axes[0].images[0].get_array()
        assert shares.tolist() == [[0.5, 0.5, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]
        assert [text.get_text() for text in fig.axes[0].texts][6:] == ["0", "0", "0"]
        fig.canvas.draw()
    finally:
        plt.close(fig)
    confusion.save(counts.tolist(), ["a", "b", "never seen"], "test", tmp_path / "c.png", None, 0)
    assert (tmp_path / "c.png").stat().st_size > 0
    assert plt.get_fignums() == []


def test_many_classes_are_drawn_without_counts_in_the_cells() -> None:
    size = 40
    fig = confusion.figure([[1] * size] * size, [f"class {i}" for i in range(size)], "test")
    try:
        assert len(fig.axes[0].texts) == 0
        assert fig.get_figheight() > 10  # inches: larger with more classes
    finally:
        plt.close(fig)
