"""scaling.png, of a sweep over batch sizes: train images/s against batch size, a line per speed
group but the batch size, with its compute bound (dashed) where the runs measured their device's
peak; beside it, the time to the target accuracy."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.lines import Line2D

from experiments.core.text import shared_unit
from experiments.report.drawing import Row, from_zero
from experiments.report.throughput import changes_speed
from experiments.training.time_to_accuracy import goal_text

BATCH_SIZE = "trainer.batch_size"


def scaling_lines(rows: Sequence[Row]) -> dict[str, list[Row]]:
    """The measured runs of a sweep over batch sizes, by line: the runs with the same device and
    the same values of every other swept key that changes speed (`changes_speed`; repeats and
    learning rates share a line), in order of batch size. None without such a sweep."""
    lines: dict[str, list[Row]] = {}
    for row in rows:
        swept = row.get("swept") or {}
        if BATCH_SIZE in swept and row["train_images_per_second"] is not None:
            others = {"device": row["device"]}
            others.update(
                (key, value)
                for key, value in swept.items()
                if key != BATCH_SIZE and changes_speed(key)
            )
            name = ", ".join(f"{key}={value}" for key, value in others.items())
            lines.setdefault(name, []).append(row)
    for line in lines.values():
        line.sort(key=lambda row: int(row["swept"][BATCH_SIZE]))
    return lines


BOUND = "bound: measured peak x GPUs / train FLOPs per {one}"


def scaling_figure(rows: Sequence[Row]) -> Any:
    """Train images/s against batch size, a line per speed group but the batch size (through the
    geometric mean of its runs at each size, as the report sums speeds up everywhere, with a dot
    per run where a size ran more than once), each with
    its compute bound (dashed, said so in the legend) only where its runs measured their device's
    peak; both axes logarithmic, as the models' speeds differ by orders of magnitude. Beside it,
    where the runs set trainer.target_accuracy, the training seconds until they reached it (a
    size where a run did not reach it is a gap), titled with the target and its split."""
    lines = scaling_lines(rows)
    timed = any(row["time_to_accuracy"] is not None for row in rows)
    figure, axes = plt.subplots(1, 2 if timed else 1, figsize=(12 if timed else 7, 4.5))
    speed, seconds = (axes[0], axes[1]) if timed else (axes, None)
    bounded = False
    for name, line in lines.items():
        sizes, speeds = _by_batch_size(line, lambda row: row["train_images_per_second"])
        drawn = speed.plot(sizes, speeds, "o-", label=name)
        colour = drawn[0].get_color()
        if len(line) > len(sizes):  # repeats: each run, behind the mean
            runs = [int(row["swept"][BATCH_SIZE]) for row in line]
            measured = [row["train_images_per_second"] for row in line]
            speed.scatter(runs, measured, color=colour, alpha=0.35, s=12)
        if bound := compute_bound(line):
            bounded = True
            speed.axhline(
                bound,
                color=colour,
                linestyle="--",
                alpha=0.6,
            )
        if seconds is not None:
            seconds.plot(*_by_batch_size(line, _reached_seconds), "o-", label=name)
    title = "Training throughput" + (" (dashed: compute bound)" if bounded else "")
    unit = shared_unit(row.get("unit") for line in lines.values() for row in line)
    speed.set(title=title, ylabel=f"train {unit.many} / s")
    speed.set_yscale("log")
    speed.yaxis.set_major_formatter("{x:,.0f}")
    for axis in [speed] if seconds is None else [speed, seconds]:
        axis.set_xscale("log", base=2)
        axis.xaxis.set_major_formatter("{x:.0f}")
        axis.set(xlabel="batch size")
        axis.grid(alpha=0.3)
    if seconds is not None:
        seconds.set(title=_time_to_accuracy_title(rows), ylabel="training seconds")
        from_zero(seconds)
    beside = 1.02 if seconds is None else 2.3  # right of the last panel
    handles = speed.get_legend_handles_labels()[0]
    if bounded:  # one entry for the dashed lines, each in its line's colour
        bound_label = BOUND.format(one=unit.one)
        handles.append(Line2D([], [], color="grey", linestyle="--", label=bound_label))
    speed.legend(
        handles=handles, title="line", loc="upper left", bbox_to_anchor=(beside, 1), fontsize=8
    )
    return figure


def _by_batch_size(
    line: Sequence[Row], value: Callable[[Row], float]
) -> tuple[list[int], list[float]]:
    """The line's batch sizes, and the geometric mean of `value` (a speed, or seconds) over the
    runs of each (nan where a run's is nan)."""
    values: dict[int, list[float]] = {}
    for row in line:
        values.setdefault(int(row["swept"][BATCH_SIZE]), []).append(value(row))
    means = [math.exp(statistics.fmean(map(math.log, each))) for each in values.values()]
    return list(values), means


def _time_to_accuracy_title(rows: Sequence[Row]) -> str:
    """ "Time to 40% validation accuracy", "Time to validation rmse <= 60", or each target
    where the runs' differ ("target accuracy" for runs of versions that did not record theirs)."""
    split_names = {"val": "validation", "test": "test"}
    recorded = [row.get("accuracy_target") or (None, None, None, None) for row in rows]
    targets = dict.fromkeys(
        goal_text(target, split_names.get(split, split), metric, better)
        for target, split, metric, better in recorded
        if target is not None
    )
    return f"Time to {' or '.join(targets) or 'target accuracy'}"


def compute_bound(line: Sequence[Row]) -> float | None:
    """About the most train images/s the line's device could give its model: the device's peak
    FLOP/s (the best its runs measured) times the GPUs a run computes on (`gpus`: dp's, or one
    per ddp process; one device on the CPU), over the FLOPs of a training step's forward and
    backward passes per image (runs of versions that did not count those: 3x the forward's, an
    estimate a run can pass); None unless measured (trainer.measure_peak_flops)."""
    peaks = [row.get("device_peak_flops") for row in line]
    step = line[0].get("model_training_flops_per_image")
    forward = line[0].get("model_flops_per_image")
    flops = step or (3 * forward if forward else None)
    if not flops or None in peaks:
        return None
    return max(row["device_peak_flops"] * (row.get("gpus") or 1) for row in line) / flops


def _reached_seconds(row: Row) -> float:
    """A run's training seconds to the target accuracy; nan where it did not reach it."""
    value = row["time_to_accuracy"]
    return float(value) if isinstance(value, float | int) else math.nan
