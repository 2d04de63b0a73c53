"""The report's plots: throughput.png (train images/s by device and placement) and curves.png
(accuracy and train loss per epoch, a line per run). matplotlib is loaded only here."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display needed
import matplotlib.pyplot as plt

Row = dict[str, Any]


def draw(folder: Path, rows: Sequence[Row], histories: Sequence[list[Row]]) -> None:
    """The plots of the report's `rows`, each run's epochs' rows in `histories`."""
    completed = [row for row in rows if row["train_images_per_second"] is not None]
    if completed:
        figure = _throughput_figure(completed)
        figure.savefig(folder / "throughput.png", dpi=120, bbox_inches="tight")
        plt.close(figure)
    named = [(row["run"], history) for row, history in zip(rows, histories, strict=True) if history]
    if named:
        figure = _curves_figure(named)
        figure.savefig(folder / "curves.png", dpi=120, bbox_inches="tight")
        plt.close(figure)


def _throughput_figure(rows: Sequence[dict[str, Any]]) -> Any:
    """Grouped bars: a group per device, a bar per placement; a panel per model and dataset."""
    panels = sorted({(row["model"], row["dataset"]) for row in rows})
    figure, axes = plt.subplots(1, len(panels), figsize=(4 + 3 * len(panels), 4), squeeze=False)
    for axis, (model, dataset) in zip(axes[0], panels, strict=True):
        panel = [row for row in rows if (row["model"], row["dataset"]) == (model, dataset)]
        device_names = sorted({row["device"] for row in panel})
        placements = sorted({row["placement"] for row in panel})
        width = 0.8 / len(placements)
        for offset, placement in enumerate(placements):
            speeds = [
                _mean(
                    r["train_images_per_second"]
                    for r in panel
                    if (r["device"], r["placement"]) == (device, placement)
                )
                for device in device_names
            ]
            positions = [
                i + (offset - (len(placements) - 1) / 2) * width for i in range(len(device_names))
            ]
            bars = axis.bar(positions, speeds, width, label=placement)
            axis.bar_label(bars, fmt="{:,.0f}", fontsize=8)
        axis.set_xticks(range(len(device_names)), device_names)
        axis.set_title(f"{model} on {dataset}")
        axis.set_ylabel("train images / s")
        axis.margins(y=0.1)
        axis.legend(loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=len(placements))
    figure.suptitle("Training throughput by device and placement")
    return figure


def _mean(values: Any) -> float:
    values = list(values)
    return sum(values) / len(values) if values else 0.0


def _curves_figure(histories: Sequence[tuple[str, list[dict[str, Any]]]]) -> Any:
    # No layout engine: the legend sits beside the axes, and savefig's tight box takes it in.
    figure, (accuracy, loss) = plt.subplots(1, 2, figsize=(12, 4.5))
    for number, (name, history) in enumerate(histories):
        # Runs with identical numbers (e.g. two placements) overlap; dashes keep both visible.
        style = {"marker": "o", "linestyle": ("-", "--", ":", "-.")[number % 4]}
        epoch_numbers = [row["epoch"] for row in history]
        line = accuracy.plot(epoch_numbers, [row["test_accuracy"] for row in history], **style)
        if "val_accuracy" in history[-1]:  # the same colour, lighter, for validation
            validation = [row["val_accuracy"] for row in history]
            accuracy.plot(epoch_numbers, validation, color=line[0].get_color(), alpha=0.4, **style)
        loss.plot(epoch_numbers, [row["train_loss"] for row in history], label=name, **style)
    validated = any("val_accuracy" in history[-1] for _, history in histories)
    title = "Test accuracy (faint: validation)" if validated else "Test accuracy"
    accuracy.set(title=title, xlabel="epoch", ylabel="accuracy")
    loss.set(title="Train loss", xlabel="epoch", ylabel="loss")
    for axis in (accuracy, loss):
        axis.grid(alpha=0.3)
        axis.xaxis.get_major_locator().set_params(integer=True)
    loss.legend(title="run", loc="upper left", bbox_to_anchor=(1.02, 1), fontsize=8)
    return figure
