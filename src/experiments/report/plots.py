"""The report's plots: throughput.png (train images/s, a bar per run), curves.png (accuracy in %
and train loss per epoch, a line per run) and, for a sweep over batch sizes, scaling.png (train
images/s against batch size, a line per device and other swept values), each run labelled by the
values it was swept over. matplotlib is loaded only here."""

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

from experiments.core.files import write_atomically

Row = dict[str, Any]


def draw(folder: Path, rows: Sequence[Row], histories: Sequence[list[Row]]) -> None:
    """The plots of the report's `rows`, each run's epochs' rows in `histories`."""
    if any(row["train_images_per_second"] is not None for row in rows):
        _save(throughput_figure(rows), folder / "throughput.png")
    if any(histories):
        _save(curves_figure(rows, histories), folder / "curves.png")
    if scaling_lines(rows):
        _save(scaling_figure(rows), folder / "scaling.png")


def _save(figure: Any, path: Path) -> None:
    # Replaced whole: a link in its place (in a folder from elsewhere) is not written through.
    write_atomically(
        path, lambda file: figure.savefig(file, format="png", dpi=120, bbox_inches="tight")
    )
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


BATCH_SIZE = "trainer.batch_size"


def scaling_lines(rows: Sequence[Row]) -> dict[str, list[Row]]:
    """The measured runs of a sweep over batch sizes, by line: the runs with the same device and
    the same values of every other swept key, in order of batch size. None without such a sweep."""
    lines: dict[str, list[Row]] = {}
    for row in rows:
        swept = row.get("swept") or {}
        if BATCH_SIZE in swept and row["train_images_per_second"] is not None:
            others = {"device": row["device"]}
            others.update((key, value) for key, value in swept.items() if key != BATCH_SIZE)
            name = ", ".join(f"{key}={value}" for key, value in others.items())
            lines.setdefault(name, []).append(row)
    for line in lines.values():
        line.sort(key=lambda row: int(row["swept"][BATCH_SIZE]))
    return lines


def scaling_figure(rows: Sequence[Row]) -> Any:
    """Train images/s against batch size, a line per device and model, each with its compute
    bound (dashed) where the runs measured their device's peak; both axes logarithmic, as the
    models' speeds differ by orders of magnitude. Beside it, where the runs set
    trainer.target_accuracy, the training seconds until they reached it."""
    lines = scaling_lines(rows)
    timed = any(row["time_to_accuracy"] is not None for row in rows)
    figure, axes = plt.subplots(1, 2 if timed else 1, figsize=(12 if timed else 7, 4.5))
    speed, seconds = (axes[0], axes[1]) if timed else (axes, None)
    for name, line in lines.items():
        sizes = [int(row["swept"][BATCH_SIZE]) for row in line]
        drawn = speed.plot(
            sizes, [row["train_images_per_second"] for row in line], "o-", label=name
        )
        if bound := compute_bound(line):
            colour = drawn[0].get_color()
            speed.axhline(bound, color=colour, linestyle="--", alpha=0.6, label=f"{name}: bound")
        if seconds is not None:  # a run that never reached the target leaves a gap
            reached = [_seconds_or_nan(row["time_to_accuracy"]) for row in line]
            seconds.plot(sizes, reached, "o-", label=name)
    speed.set(
        title="Training throughput (dashed: estimated compute bound)", ylabel="train images / s"
    )
    speed.set_yscale("log")
    speed.yaxis.set_major_formatter("{x:,.0f}")
    for axis in [speed] if seconds is None else [speed, seconds]:
        axis.set_xscale("log", base=2)
        axis.xaxis.set_major_formatter("{x:.0f}")
        axis.set(xlabel="batch size")
        axis.grid(alpha=0.3)
    if seconds is not None:
        seconds.set(title="Time to target accuracy", ylabel="training seconds")
        _from_zero(seconds)
    beside = 1.02 if seconds is None else 2.3  # right of the last panel
    speed.legend(title="line", loc="upper left", bbox_to_anchor=(beside, 1), fontsize=8)
    return figure


def compute_bound(line: Sequence[Row]) -> float | None:
    """About the most train images/s the line's device could give its model: the device's peak
    FLOP/s (the best its runs measured) over the FLOPs of a training step's forward and backward
    passes per image (runs of versions that did not count those: 3x the forward's, an estimate a
    run can pass); None unless measured (trainer.measure_peak_flops)."""
    peaks = [row.get("device_peak_flops") for row in line]
    step = line[0].get("model_training_flops_per_image")
    forward = line[0].get("model_flops_per_image")
    flops = step or (3 * forward if forward else None)
    if not flops or None in peaks:
        return None
    return max(peaks) / flops


def _seconds_or_nan(value: Any) -> float:
    return float(value) if isinstance(value, float | int) else math.nan


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
