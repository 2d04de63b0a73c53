"""The confusion matrix: counted (also on a GPU), drawn, saved as a PNG and a TensorBoard image."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from experiments.records import confusion
from experiments.records.tensorboard import TensorBoard
from experiments.training.tasks import confusion_counts, in_top_k
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


@pytest.mark.gpu
@pytest.mark.parametrize("deterministic", [False, True])
def test_counting_a_batch_never_waits_for_the_gpu(deterministic: bool) -> None:
    labels = torch.randint(0, 10, (1000,), device="cuda")
    predictions = torch.randint(0, 10, (1000,), device="cuda")
    outputs = torch.randn(1000, 10, device="cuda")
    torch.cuda.synchronize()
    torch.use_deterministic_algorithms(deterministic)  # (trainer.deterministic)
    torch.cuda.set_sync_debug_mode("error")  # any copy of a result to the host raises
    try:
        counts = confusion_counts(labels, predictions, 10)
        counts += confusion_counts(labels, predictions, 10)
        top5 = in_top_k(outputs, labels, 5)
    finally:
        torch.cuda.set_sync_debug_mode("default")
        torch.use_deterministic_algorithms(False)
    assert counts.sum().item() == 2000
    assert torch.equal(top5.cpu(), in_top_k(outputs.cpu(), labels.cpu(), 5))


def test_counts_are_the_same_and_deterministic_mode_is_kept_as_it_was() -> None:
    labels, predictions = torch.randint(0, 10, (500,)), torch.randint(0, 10, (500,))
    plain = confusion_counts(labels, predictions, 10)
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        assert torch.equal(confusion_counts(labels, predictions, 10), plain)
        assert torch.are_deterministic_algorithms_enabled()
        assert torch.is_deterministic_algorithms_warn_only_enabled()
    finally:
        torch.use_deterministic_algorithms(False)


def test_confusion_matrix_is_saved_as_png_and_tensorboard_image(tmp_path: Path) -> None:
    counts = [[5, 1, 0], [2, 7, 1], [0, 0, 9]]
    path = tmp_path / "confusion_matrix.png"
    board = TensorBoard(tmp_path / "run")

    png, size = confusion.save(counts, ["cat", "dog", "bird"], "test, epoch 3", path)
    board.picture(confusion.TAG, png, size, step=30)
    board.close("completed")

    with Image.open(path) as png:
        assert png.format == "PNG"
        width, height = png.size
        drawn = np.asarray(png.convert("RGB"))
    assert 250 < width < 1200 and 250 < height < 1200
    (image,) = read_events(tmp_path / "run").Images("test/confusion_matrix")
    assert image.step == 30
    assert (image.width, image.height) == (width, height)
    # The cat row: 5 of 6 images right, shaded as 5/6 of the darkest blue.
    assert count(drawn, confusion.shade(np.array(5 / 6))) > confusion.cell_size(3) ** 2 // 2
    # Encoded once, for both: TensorBoard's image is the file's bytes.
    assert image.encoded_image_string == path.read_bytes()


def test_a_class_without_images_is_a_row_of_zeros() -> None:
    counts = confusion_counts(torch.tensor([0, 0, 1]), torch.tensor([0, 1, 1]), num_classes=3)
    assert counts[2].tolist() == [0, 0, 0]
    shares = confusion.shares(counts.tolist())
    assert shares.tolist() == [[0.5, 0.5, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]


def test_cells_show_their_counts_up_to_20_classes_and_only_their_shade_beyond() -> None:
    def uncovered_share(size: int) -> float:
        """Of a matrix where every cell holds one image: the share of the cells' pixels left in
        their shade (what the counts printed in them do not cover)."""
        ones = [[1] * size] * size
        drawn = confusion.picture(ones, [f"class {i}" for i in range(size)], "test")
        cells = (confusion.cell_size(size) * size) ** 2
        return count(drawn, confusion.shade(np.array(1 / size))) / cells

    assert uncovered_share(confusion.MOST_ANNOTATED_CLASSES) < 0.99
    assert uncovered_share(confusion.MOST_ANNOTATED_CLASSES + 1) >= 1.0


def count(pixels: np.ndarray, colour: np.ndarray) -> int:
    """How many pixels have exactly this colour."""
    return int((pixels == colour).all(axis=-1).sum())
