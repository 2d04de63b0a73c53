"""The confusion matrix of a test split: which classes a model takes for which.

    confusion_matrix.png   rows the true class, columns the predicted one, each row shaded by
                           its share of that class's images; also the image `confusion_matrix`
                           of the run's TensorBoard events

The counts are made on the device by `experiments.training.loop`; matplotlib is imported only
to draw.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from torch.utils.tensorboard import SummaryWriter

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# Above this many classes the cells are too small to print their counts in.
MOST_ANNOTATED_CLASSES = 20
# Above this many, too small to see at all (and the figure too large to draw quickly).
MOST_DRAWN_CLASSES = 100


def figure(counts: list[list[int]], classes: list[str], title: str) -> Figure:
    """The matrix drawn with each row as shares of its true class, so classes of unequal size
    compare; counts printed in the cells up to 20 classes.

    A bare Figure, not pyplot's: nothing global to close, and no pyplot import at the end of
    every run."""
    import numpy as np
    from matplotlib.figure import Figure

    table = np.asarray(counts, dtype=np.int64).reshape(len(classes), len(classes))
    totals = table.sum(axis=1, keepdims=True)
    # A class without test images keeps a row of zeros rather than 0/0.
    shares = np.divide(table, totals, out=np.zeros(table.shape), where=totals > 0)

    size = len(classes)
    side = max(5.0, 3.0 + 0.22 * size)  # inches: 5 for 2 classes, 25 for 100
    labels_size = 10 if size <= 30 else 7
    fig = Figure(figsize=(side + 1.0, side), layout="constrained")
    ax = fig.subplots()
    image = ax.imshow(shares, cmap="Blues", vmin=0.0, vmax=1.0)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="share of the true class")
    ticks = list(range(size))
    rotation = 45 if size <= 10 else 90
    ax.set_xticks(
        ticks, classes, fontsize=labels_size, rotation=rotation, ha="right", rotation_mode="anchor"
    )
    ax.set_yticks(ticks, classes, fontsize=labels_size)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    ax.set_title(title)
    if size <= MOST_ANNOTATED_CLASSES:
        for row in range(size):
            for column in range(size):
                dark = shares[row, column] > 0.5
                ax.text(
                    column,
                    row,
                    str(table[row, column]),
                    ha="center",
                    va="center",
                    fontsize=9 if size <= 10 else 7,
                    color="white" if dark else "black",
                )
    return fig


def save(
    counts: list[list[int]],
    classes: list[str],
    title: str,
    path: Path,
    writer: SummaryWriter | None,
    step: int,
) -> None:
    """Write the figure to `path` as a PNG and, given a `writer`, as the TensorBoard image
    `confusion_matrix` at `step`: drawn once, for both."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from PIL import Image

    canvas = FigureCanvasAgg(figure(counts, classes, title))
    canvas.figure.set_dpi(120)
    canvas.draw()
    pixels = np.asarray(canvas.buffer_rgba())[..., :3]
    Image.fromarray(pixels).save(path)
    if writer is not None:
        writer.add_image("confusion_matrix", pixels, step, dataformats="HWC")
        writer.flush()
