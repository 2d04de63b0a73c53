"""scaling.png (and batch_scaling.png, of runs that searched their batch): train images/s against
batch size, a line per speed group with its knee and compute bound; MFU and time to target too."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.lines import Line2D

from experiments.core.text import shared_unit
from experiments.report import batch_sweep
from experiments.report.drawing import Row, from_zero
from experiments.report.repeats import Measure
from experiments.report.statistics import log_spread
from experiments.training.time_to_accuracy import goal_text

SPEED, MFU = "train_images_per_second", "mfu"
# The files, by whether a line's runs searched their batch.
SEARCHED, CHOSEN = "batch_scaling.png", "scaling.png"

BOUND = "bound: measured peak x GPUs / train FLOPs per {one}"
BARS = "bar: 95% interval of a size's runs (geometric mean)"
KNEE = f"knee: smallest batch within {batch_sweep.KNEE_SHARE:.0%} of the best speed"
LARGEST = "largest batch that fit (its search)"


def figures(rows: Sequence[Row]) -> dict[str, list[Row]]:
    """Each file's name with the rows of its lines."""
    drawn: dict[str, list[Row]] = {}
    for line in batch_sweep.scaling_lines(rows).values():
        drawn.setdefault(SEARCHED if batch_sweep.largest_batches(line) else CHOSEN, []).extend(line)
    return drawn


def scaling_figure(rows: Sequence[Row]) -> Any:
    """Both axes logarithmic: models' speeds differ by orders of magnitude."""
    lines = batch_sweep.scaling_lines(rows)
    figure, panels = _panels(rows)
    drawn: set[str] = set()
    for name, line in lines.items():
        drawn |= _draw_line(panels, name, line)
    speed = panels[SPEED]
    title = "Training throughput" + (" (dashed: compute bound)" if BOUND in drawn else "")
    unit = shared_unit(row.get("unit") for line in lines.values() for row in line)
    speed.set(title=title, ylabel=f"train {unit.many} / s")
    speed.set_yscale("log")
    # Plain numbers on the minor ticks too: their default is mathematics, which plots do not parse.
    speed.yaxis.set_major_formatter("{x:,.0f}")
    speed.yaxis.set_minor_formatter("{x:,.0f}")
    for axis in panels.values():
        axis.set_xscale("log", base=2)
        axis.xaxis.set_major_formatter("{x:.0f}")
        axis.set(xlabel="batch size")
        axis.grid(alpha=0.3)
    if MFU in panels:
        panels[MFU].set(title="Model FLOPs utilization", ylabel="MFU (% of the measured peak)")
        panels[MFU].set_ylim(bottom=0)  # a height is an amount; the top holds every bar
    if "seconds" in panels:
        panels["seconds"].set(title=_time_to_accuracy_title(rows), ylabel="training seconds")
        from_zero(panels["seconds"])
    handles = _legend_handles(speed, drawn, unit.one)
    last = list(panels.values())[-1]  # the legend right of it
    last.legend(
        handles=handles, title="line", loc="upper left", bbox_to_anchor=(1.02, 1), fontsize=8
    )
    return figure


def _panels(rows: Sequence[Row]) -> tuple[Any, dict[str, Any]]:
    shown = [SPEED]
    if any(isinstance(row.get(MFU), int | float) for row in rows):
        shown.append(MFU)
    if any(row["time_to_accuracy"] is not None for row in rows):
        shown.append("seconds")
    figure, axes = plt.subplots(1, len(shown), figsize=(1.5 + 5.5 * len(shown), 4.5))
    return figure, dict(zip(shown, axes if len(shown) > 1 else [axes], strict=True))


def _draw_line(panels: Mapping[str, Any], name: str, line: Sequence[Row]) -> set[str]:
    """A line on each panel, in one colour; what it drew that the legend explains."""
    searched = batch_sweep.search_text(line)
    speeds = batch_sweep.by_batch_size(line, SPEED)
    named = f"{name}: {searched}" if searched else name
    colour, drawn = _through_means(panels[SPEED], speeds, named)
    mfus = {
        size: [100 * mfu for mfu in runs]
        for size, runs in batch_sweep.by_batch_size(line, MFU).items()
    }
    if MFU in panels and mfus:
        drawn |= _through_means(panels[MFU], mfus, name, colour, most=100.0)[1]
    if len(speeds) > 1:
        drawn.add(KNEE)
        at = batch_sweep.knee(speeds)
        for key, values in ((SPEED, speeds), (MFU, mfus)):
            if key in panels and at in values:
                mean = log_spread(values[at]).mean
                panels[key].scatter([at], [mean], marker="*", s=160, color=colour, gid="knee")
    for largest in batch_sweep.largest_batches(line):
        drawn.add(LARGEST)
        for key in (SPEED, MFU):
            if key in panels:
                panels[key].axvline(largest, color=colour, linestyle=":", gid="largest")
    if bound := compute_bound(line):
        drawn.add(BOUND)
        panels[SPEED].axhline(bound, color=colour, linestyle="--", alpha=0.6)
    if "seconds" in panels:
        panels["seconds"].plot(*_seconds_by_batch_size(line), "o-", color=colour)
    return drawn


def _through_means(
    axis: Any,
    values: Mapping[int, Sequence[float]],
    label: str,
    colour: str | None = None,
    most: float | None = None,
) -> tuple[str, set[str]]:
    """A line through each size's geometric mean, dots and a bar where it ran more than once."""
    measure = Measure("", "", str, log_scale=True, most=most)
    spreads = {size: measure.spread(runs) for size, runs in values.items()}
    means = [spread.mean for spread in spreads.values()]
    (drawn,) = axis.plot(list(spreads), means, "o-", label=label, color=colour)
    colour = drawn.get_color()
    repeated = [size for size, spread in spreads.items() if spread.n > 1]
    for size in repeated:
        axis.scatter([size] * len(values[size]), values[size], color=colour, alpha=0.35, s=12)
        if (interval := spreads[size].interval) is not None:
            axis.vlines(size, *interval, color=colour, alpha=0.6, gid="interval")
    return colour, {BARS} if repeated else set()


def _legend_handles(speed: Any, drawn: set[str], one: str) -> list[Any]:
    handles = speed.get_legend_handles_labels()[0]
    marks = {
        BARS: {"marker": "|", "markersize": 10, "linestyle": "none"},
        KNEE: {"marker": "*", "markersize": 10, "linestyle": "none"},
        LARGEST: {"linestyle": ":"},
        BOUND: {"linestyle": "--"},
    }
    for mark, style in marks.items():
        if mark in drawn:  # in the runs' unit: BOUND's {one}
            handles.append(Line2D([], [], color="grey", label=mark.format(one=one), **style))
    return handles


def _seconds_by_batch_size(line: Sequence[Row]) -> tuple[list[int], list[float]]:
    # The geometric mean of each size's; nan, a gap, where a run did not reach the target.
    values: dict[int, list[float]] = {}
    for row in line:
        reached = row["time_to_accuracy"]
        seconds = float(reached) if isinstance(reached, float | int) else math.nan
        values.setdefault(batch_sweep.trained_batch(row), []).append(seconds)
    means = [math.exp(statistics.fmean(map(math.log, each))) for each in values.values()]
    return list(values), means


def _time_to_accuracy_title(rows: Sequence[Row]) -> str:
    # "Time to 40% validation accuracy", or each target where the runs' differ.
    split_names = {"val": "validation", "test": "test"}
    recorded = [row.get("accuracy_target") or (None, None, None, None) for row in rows]
    targets = dict.fromkeys(
        goal_text(target, split_names.get(split, split), metric, better)
        for target, split, metric, better in recorded
        if target is not None
    )
    return f"Time to {' or '.join(targets) or 'target accuracy'}"


def compute_bound(line: Sequence[Row]) -> float | None:
    """About the most train images/s the line's device could give its model: the best peak FLOP/s
    times its GPUs, over a step's FLOPs per image (older runs: 3x the forward's), if measured."""
    step = line[0].get("model_training_flops_per_image")
    forward = line[0].get("model_flops_per_image")
    flops = step or (3 * forward if forward else None)
    if not flops or any(row.get("device_peak_flops") is None for row in line):
        return None
    return max(row["device_peak_flops"] * (row.get("gpus") or 1) for row in line) / flops
