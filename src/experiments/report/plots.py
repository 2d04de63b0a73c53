"""The report's plots, each made by a function that returns its figure (tests read them back):

    throughput.png  train images/s by speed group (the runs that share the values of every swept
                    key that changes speed, `SPEED_KEYS`, whatever their learning rate or seed):
                    a dot per run, the group's mean and its 95% interval
    curves.png      accuracy in % and train loss per epoch, a line per configuration (the runs
                    that differ only in trainer.seed: their mean, with a band from their lowest
                    to their highest); the loss axis spans the losses
    scaling.png     of a sweep over batch sizes: train images/s against batch size, a line per
                    speed group but the batch size, with its compute bound (dashed) where the
                    runs measured their device's peak; beside it, the time to the target accuracy

Runs are named by the values they were swept over. matplotlib is loaded only here."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display needed
import matplotlib.pyplot as plt
from matplotlib.collections import PolyCollection
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from experiments.core.files import write_atomically
from experiments.report import repeats

Row = dict[str, Any]


def draw(folder: Path, rows: Sequence[Row], histories: Sequence[list[Row]]) -> None:
    """The plots of the report's `rows`, each run's epochs' rows in `histories`."""
    if speed_groups(rows):
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


# What changes how fast a run trains: a group's option or any key within it (`model.arch`,
# `dataset.workers`, `device.ids`), and these keys of the trainer. Runs that differ only in other
# keys (the learning rate, the optimizer's settings, the schedule, the seed) train at one speed:
# their images/s are repeats of one measurement, whatever gap the machine's other work made.
SPEED_GROUPS = ("model", "dataset", "device", "placement")
SPEED_KEYS = (
    "trainer.batch_size",
    "trainer.precision",
    "trainer.channels_last",
    "trainer.compile",
    "trainer.threads",
    "trainer.accumulate_batches",
    "trainer.deterministic",
    "trainer.cudnn_benchmark",
    "trainer.sync_batchnorm",
    "trainer.keep_freed_memory",
    "trainer.profile",
)
SPEED = next(measure for measure in repeats.MEASURES if measure.key == "train_images_per_second")


def changes_speed(key: str) -> bool:
    """Whether a swept key changes how fast a run trains (`SPEED_GROUPS`, `SPEED_KEYS`)."""
    return key in SPEED_KEYS or key.split(".")[0].split("/")[0] in SPEED_GROUPS


def speed_groups(rows: Sequence[Row]) -> list[repeats.Configuration]:
    """The completed runs that measured their speed, by their values of the swept keys that
    change speed, in the order of each group's first run."""
    groups = repeats.configurations(rows, changes_speed)
    return [group for group in groups if group.measured(SPEED)]


def label(values: dict[str, str], runs: Sequence[Row]) -> str:
    """Runs named by the swept values they share (`model=lenet, optimizer.lr=0.01`), or, sharing
    none, by the folder of the one run or the number of runs."""
    named = ", ".join(f"{key}={value}" for key, value in values.items())
    return named or (runs[0]["run"] if len(runs) == 1 else f"{len(runs)} runs")


def throughput_figure(rows: Sequence[Row]) -> Any:
    """A row per speed group, all on one axis from 0 (so one length is one speed), coloured by
    device: a dot per run, the mean (|) and its 95% interval (a bar, of two runs or more), named
    with the mean, its interval, n and, off the CPU, the ratio to the CPU group of the same other
    values."""
    groups = speed_groups(rows)
    figure, axis = plt.subplots(figsize=(8, 2.5 + 0.45 * len(groups)))
    devices = list(dict.fromkeys(group.runs[0]["device"] for group in groups))
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    colour = {device: palette[i % len(palette)] for i, device in enumerate(devices)}
    for position, group in enumerate(groups):
        speeds = group.measured(SPEED)
        summed = group.spread(SPEED)
        drawn = colour[group.runs[0]["device"]]
        # The dots spread over a third of the row, so that equal speeds stay countable.
        last = len(speeds) - 1
        apart = [0.3 * i / last - 0.15 for i in range(len(speeds))] if last else [0.0]
        axis.scatter(speeds, [position + offset for offset in apart], color=drawn, alpha=0.6)
        low, high = summed.interval or (summed.mean, summed.mean)
        axis.errorbar(
            summed.mean,
            position,
            xerr=[[summed.mean - low], [high - summed.mean]],
            fmt="|",
            markersize=18,
            color=drawn,
            capsize=4,
        )
    # Each group's numbers under its name: beside its dots, a wide interval would run into them.
    names = [f"{label(group.values, group.runs)}\n{_speed_text(group, groups)}" for group in groups]
    axis.set_yticks(range(len(groups)), names, fontsize=8)
    axis.set_ylim(len(groups) - 0.5, -0.5)  # the first group on top, as in the table
    axis.set_xlim(left=0)  # a length is a speed
    axis.xaxis.set_major_formatter("{x:,.0f}")
    axis.set(
        xlabel="train images / s",
        title="Training throughput: a dot per run, | the mean, its bar the 95% interval",
    )
    axis.grid(axis="x", alpha=0.3)
    handles = [Patch(color=colour[device], label=device) for device in devices]
    axis.legend(handles=handles, title="device", loc="upper left", bbox_to_anchor=(1.02, 1))
    return figure


def _speed_text(group: repeats.Configuration, groups: Sequence[repeats.Configuration]) -> str:
    """`731 [690, 772], n=3  (4.2x cpu)`: the mean, its interval and the ratio to the CPU."""
    summed = group.spread(SPEED)
    text = f"{summed.mean:,.0f}"
    if summed.interval is not None:
        text += " [{:,.0f}, {:,.0f}]".format(*summed.interval)
    text += f", n={summed.n}"
    if cpu := _on_the_cpu(group, groups):
        text += f"  ({summed.mean / cpu.spread(SPEED).mean:.1f}x cpu)"
    return text


def _on_the_cpu(
    group: repeats.Configuration, groups: Sequence[repeats.Configuration]
) -> repeats.Configuration | None:
    """The CPU's group with the same values as `group` but the device; None on the CPU."""
    if group.runs[0]["device"] == "cpu":
        return None
    others = {key: value for key, value in group.values.items() if key != "device"}
    for other in groups:
        if other.runs[0]["device"] == "cpu" and others == {
            key: value for key, value in other.values.items() if key != "device"
        }:
            return other
    return None


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


BOUND = "bound: measured peak / train FLOPs per image"


def scaling_figure(rows: Sequence[Row]) -> Any:
    """Train images/s against batch size, a line per speed group but the batch size (through the
    mean of its runs at each size, with a dot per run where a size ran more than once), each with
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
    speed.set(title=title, ylabel="train images / s")
    speed.set_yscale("log")
    speed.yaxis.set_major_formatter("{x:,.0f}")
    for axis in [speed] if seconds is None else [speed, seconds]:
        axis.set_xscale("log", base=2)
        axis.xaxis.set_major_formatter("{x:.0f}")
        axis.set(xlabel="batch size")
        axis.grid(alpha=0.3)
    if seconds is not None:
        seconds.set(title=_time_to_accuracy_title(rows), ylabel="training seconds")
        _from_zero(seconds)
    beside = 1.02 if seconds is None else 2.3  # right of the last panel
    handles = speed.get_legend_handles_labels()[0]
    if bounded:  # one entry for the dashed lines, each in its line's colour
        handles.append(Line2D([], [], color="grey", linestyle="--", label=BOUND))
    speed.legend(
        handles=handles, title="line", loc="upper left", bbox_to_anchor=(beside, 1), fontsize=8
    )
    return figure


def _by_batch_size(
    line: Sequence[Row], value: Callable[[Row], float]
) -> tuple[list[int], list[float]]:
    """The line's batch sizes, and the mean of `value` over the runs of each (nan where a run's
    is nan)."""
    values: dict[int, list[float]] = {}
    for row in line:
        values.setdefault(int(row["swept"][BATCH_SIZE]), []).append(value(row))
    return list(values), [statistics.fmean(each) for each in values.values()]


def _time_to_accuracy_title(rows: Sequence[Row]) -> str:
    """ "Time to 40% validation accuracy", or each target where the runs' differ ("target
    accuracy" for runs of versions that did not record theirs)."""
    split_names = {"val": "validation", "test": "test"}
    recorded = [row.get("accuracy_target") or (None, None) for row in rows]
    targets = dict.fromkeys(
        f"{100 * target:g}% {split_names.get(split, split)} accuracy"
        for target, split in recorded
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


# Configurations whose numbers coincide (two placements train alike) would hide one another:
# each has its own marker and dash, in a sequence that repeats only after 20.
MARKERS = ("o", "s", "^", "D", "v")
DASHES = ("-", "--", ":", "-.")


def curves_figure(rows: Sequence[Row], histories: Sequence[list[Row]]) -> Any:
    """Test (and, faint, validation) accuracy in % and train loss per epoch, a line per
    configuration (runs that differ only in the seed): the mean of its runs at each epoch, and a
    band from their lowest to their highest; one legend entry per configuration. Accuracy is
    drawn from 0 (a height reads as an amount); the loss axis spans the losses, which would be a
    flat line at the top of an axis from 0."""
    # No layout engine: the legend sits beside the axes, and savefig's tight box takes it in.
    figure, (accuracy, loss) = plt.subplots(1, 2, figsize=(12, 4.5))
    configurations = _configurations(rows, histories)
    repeated = False
    for number, (name, runs) in enumerate(configurations.items()):
        style = {"marker": MARKERS[number % 5], "linestyle": DASHES[number % 4], "alpha": 0.85}
        if len(runs) > 1:
            repeated = True
            name += f" ({len(runs)} runs)"
        colour = _mean_and_band(accuracy, _per_epoch(runs, "test_accuracy", 100), style)
        if all("val_accuracy" in history[-1] for history in runs):  # lighter, for validation
            validation = _per_epoch(runs, "val_accuracy", 100)
            _mean_and_band(accuracy, validation, {**style, "alpha": 0.4}, colour)
        _mean_and_band(loss, _per_epoch(runs, "train_loss"), style, colour, name)
    validated = any("val_accuracy" in runs[0][-1] for runs in configurations.values())
    title = "Test accuracy (faint: validation)" if validated else "Test accuracy"
    accuracy.set(title=title, xlabel="epoch", ylabel="accuracy (%)")
    loss.set(title="Train loss", xlabel="epoch", ylabel="loss")
    if repeated:
        for axis in (accuracy, loss):
            axis.set_title(f"{axis.get_title()}; repeats: mean, band from lowest to highest")
    last = max(row["epoch"] for runs in configurations.values() for h in runs for row in h)
    for axis in (accuracy, loss):
        axis.grid(alpha=0.3)
        axis.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
        # Half an epoch either side: one epoch's dots would otherwise sit alone on 0.96 to 1.04.
        axis.set_xlim(0.5, last + 0.5)
    _from_zero(accuracy)
    accuracy.set_ylim(top=min(accuracy.get_ylim()[1], 100))
    _spanning(loss)
    loss.legend(title="configuration", loc="upper left", bbox_to_anchor=(1.02, 1), fontsize=8)
    return figure


def _configurations(
    rows: Sequence[Row], histories: Sequence[list[Row]]
) -> dict[str, list[list[Row]]]:
    """The epochs' rows of the runs that have any, by configuration (named by the swept values
    its runs share but the seed), whatever their status: a run cut short shows how far it got."""
    runs: dict[tuple[tuple[str, str], ...], list[tuple[Row, list[Row]]]] = {}
    for row, history in zip(rows, histories, strict=True):
        if history:
            swept = row.get("swept") or {}
            shared = tuple(
                (key, value) for key, value in swept.items() if repeats.not_the_seed(key)
            )
            runs.setdefault(shared, []).append((row, history))
    return {
        label(dict(shared), [row for row, _ in pairs]): [history for _, history in pairs]
        for shared, pairs in runs.items()
    }


Band = dict[int, list[float]]  # the runs' values at each epoch


def _per_epoch(runs: Sequence[list[Row]], key: str, scale: float = 1) -> Band:
    values: Band = {}
    for history in runs:
        for row in history:
            values.setdefault(row["epoch"], []).append(scale * row[key])
    return dict(sorted(values.items()))


def _mean_and_band(
    axis: Any, band: Band, style: dict[str, Any], colour: str | None = None, name: str = "_"
) -> str:
    """The mean line of `band` (labelled `name`; "_": no legend entry), and where several runs
    reached an epoch the band between their lowest and highest values; returns its colour."""
    epochs = list(band)
    (line,) = axis.plot(
        epochs,
        [statistics.fmean(values) for values in band.values()],
        color=colour,
        label=name,
        **style,
    )
    if any(len(values) > 1 for values in band.values()):
        # Of the finite values: a diverged run's nan would make either end arbitrary.
        finite = [
            [value for value in values if math.isfinite(value)] or [math.nan]
            for values in band.values()
        ]
        lowest, highest = [min(values) for values in finite], [max(values) for values in finite]
        axis.fill_between(epochs, lowest, highest, color=line.get_color(), alpha=0.15, linewidth=0)
    return line.get_color()


def _spanning(axis: Any) -> None:
    """From a twentieth below the lowest value drawn to a twentieth above the highest, or around
    the one value drawn."""
    values = _drawn(axis)
    if not values:
        return
    low, high = min(values), max(values)
    margin = (high - low) / 20 or abs(high) / 20 or 1
    axis.set_ylim(low - margin, high + margin)


def _from_zero(axis: Any) -> None:
    """From 0 to a tenth above the highest value drawn, so that a height reads as an amount, and
    one epoch's points as more than the axis's edges."""
    axis.set_ylim(0, 1.1 * max(_drawn(axis), default=0) or 1)


def _drawn(axis: Any) -> list[float]:
    """The finite heights of the lines and bands drawn on `axis` (a diverged run's loss is nan)."""
    lines = [line.get_ydata() for line in axis.get_lines()]
    bands = [
        path.vertices[:, 1]
        for band in axis.collections
        if isinstance(band, PolyCollection)  # (a scatter's paths are its markers' shapes)
        for path in band.get_paths()
    ]
    return [float(y) for heights in lines + bands for y in heights if math.isfinite(y)]
