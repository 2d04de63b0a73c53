"""The report's plots: throughput.png (train images/s, a bar per run) and curves.png (accuracy in %
and train loss per epoch, a line per run), each run labelled by the values it was swept over.
matplotlib is loaded only here."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display needed
import matplotlib.pyplot as plt
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

Row = dict[str, Any]


def draw(folder: Path, rows: Sequence[Row], histories: Sequence[list[Row]]) -> None:
    """The plots of the report's `rows`, each run's epochs' rows in `histories`."""
    if any(row["train_images_per_second"] is not None for row in rows):
        _save(throughput_figure(rows), folder / "throughput.png")
    if any(histories):
        _save(curves_figure(rows, histories), folder / "curves.png")


def _save(figure: Any, path: Path) -> None:
    figure.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(figure)


def label(row: Row) -> str:
    """A run named by its swept values (`model=lenet, optimizer.lr=0.01`), or by its folder where
    the runs differ in nothing."""
    swept = row.get("swept") or {}
    return ", ".join(f"{key}={value}" for key, value in swept.items()) or row["run"]


def throughput_figure(rows: Sequence[Row]) -> Any:
    """A bar per measured run, never a mean of several, all on one axis (so one length is one
    speed), coloured by device; a run off the CPU says its speedup over the CPU run of its
    configuration."""
    measured = [row for row in rows if row["train_images_per_second"] is not None]
    figure, axis = plt.subplots(figsize=(8, 2.5 + 0.35 * len(measured)))
    devices = list(dict.fromkeys(row["device"] for row in measured))
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    colour = {device: palette[i % len(palette)] for i, device in enumerate(devices)}
    positions = range(len(measured))
    bars = axis.barh(
        positions,
        [row["train_images_per_second"] for row in measured],
        color=[colour[row["device"]] for row in measured],
    )
    axis.bar_label(bars, [_speed_text(row) for row in measured], padding=3, fontsize=8)
    axis.set_yticks(positions, [label(row) for row in measured])
    axis.invert_yaxis()  # the first run on top, as in the table
    axis.margins(x=0.2)  # room for the bars' numbers
    axis.xaxis.set_major_formatter("{x:,.0f}")
    axis.set(xlabel="train images / s", title="Training throughput, a bar per run")
    axis.grid(axis="x", alpha=0.3)
    handles = [Patch(color=colour[device], label=device) for device in devices]
    axis.legend(handles=handles, title="device", loc="upper left", bbox_to_anchor=(1.02, 1))
    return figure


def _speed_text(row: Row) -> str:
    speedup = row.get("speedup_vs_cpu")
    return f"{row['train_images_per_second']:,.0f}" + (f"  ({speedup:.1f}x cpu)" if speedup else "")


def curves_figure(rows: Sequence[Row], histories: Sequence[list[Row]]) -> Any:
    """Test (and, faint, validation) accuracy in % and train loss per epoch, a line per run."""
    # No layout engine: the legend sits beside the axes, and savefig's tight box takes it in.
    figure, (accuracy, loss) = plt.subplots(1, 2, figsize=(12, 4.5))
    plotted = [
        (label(row), history) for row, history in zip(rows, histories, strict=True) if history
    ]
    for number, (name, history) in enumerate(plotted):
        # Runs with identical numbers (e.g. two placements) overlap; dashes keep both visible.
        style = {"marker": "o", "linestyle": ("-", "--", ":", "-.")[number % 4]}
        epoch_numbers = [row["epoch"] for row in history]
        tested = [100 * row["test_accuracy"] for row in history]
        line = accuracy.plot(epoch_numbers, tested, **style)
        if "val_accuracy" in history[-1]:  # the same colour, lighter, for validation
            validation = [100 * row["val_accuracy"] for row in history]
            accuracy.plot(epoch_numbers, validation, color=line[0].get_color(), alpha=0.4, **style)
        loss.plot(epoch_numbers, [row["train_loss"] for row in history], label=name, **style)
    validated = any("val_accuracy" in history[-1] for _, history in plotted)
    title = "Test accuracy (faint: validation)" if validated else "Test accuracy"
    accuracy.set(title=title, xlabel="epoch", ylabel="accuracy (%)")
    loss.set(title="Train loss", xlabel="epoch", ylabel="loss")
    last = max(row["epoch"] for _, history in plotted for row in history)
    for axis in (accuracy, loss):
        axis.grid(alpha=0.3)
        axis.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
        # Half an epoch either side: one epoch's dots would otherwise sit alone on 0.96 to 1.04.
        axis.set_xlim(0.5, last + 0.5)
        _from_zero(axis)
    accuracy.set_ylim(top=min(accuracy.get_ylim()[1], 100))
    loss.legend(title="run", loc="upper left", bbox_to_anchor=(1.02, 1), fontsize=8)
    return figure


def _from_zero(axis: Any) -> None:
    """From 0 to a tenth above the highest finite value plotted (a diverged run's loss is nan), so
    that a height reads as an amount, and one epoch's points as more than the axis's edges."""
    values = [y for line in axis.get_lines() for y in line.get_ydata() if math.isfinite(y)]
    axis.set_ylim(0, 1.1 * max(values, default=0) or 1)
