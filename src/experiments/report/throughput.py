"""throughput.png: train images/s by speed group (a sweep's runs that share every swept key that
changes speed): a dot per run, hollow on a busy host, the geometric mean and its 95% interval."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.patches import Patch

from experiments.core.text import shared_unit
from experiments.devices.backends import names
from experiments.report import repeats
from experiments.report.drawing import Row, label

# What changes how fast a run trains: a group's option or any key within it, and these trainer keys;
# runs that differ only in others (the learning rate, the seed) repeat one measurement of speed.
SPEED_GROUPS = ("model", "dataset", "device", "placement")
SPEED_KEYS = (
    "trainer.batch_size",
    "trainer.auto_batch",
    "trainer.auto_batch_halvings",
    "trainer.auto_batch_min_steps",
    "trainer.memory_budget_gb",
    "trainer.precision",
    "trainer.channels_last",
    "trainer.compile",
    "trainer.compile_mode",
    "trainer.threads",
    "trainer.accumulate_batches",
    "trainer.deterministic",
    "trainer.cudnn_benchmark",
    "trainer.sync_batchnorm",
    "trainer.keep_freed_memory",
    "trainer.profile",
)


def changes_speed(key: str) -> bool:
    return key in SPEED_KEYS or key.split(".")[0].split("/")[0] in SPEED_GROUPS


def speed_groups(rows: Sequence[Row]) -> list[repeats.Configuration]:
    """The completed runs with a speed, by their values of the swept keys that change speed."""
    groups = repeats.configurations(rows, changes_speed)
    return [group for group in groups if group.spread(repeats.SPEED) is not None]


def throughput_figure(rows: Sequence[Row]) -> Any:
    """A row per speed group on one axis from 0, coloured by device."""
    groups = speed_groups(rows)
    figure, axis = plt.subplots(figsize=(8, 2.5 + 0.45 * len(groups)))
    devices = list(dict.fromkeys(group.runs[0]["device"] for group in groups))
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    colour = {device: palette[i % len(palette)] for i, device in enumerate(devices)}
    speed = repeats.SPEED.key
    for position, group in enumerate(groups):
        runs = [run for run in group.runs if run.get(speed) is not None]
        summed = group.spread(repeats.SPEED)
        drawn = colour[group.runs[0]["device"]]
        # The dots spread over a third of the row, so that equal speeds stay countable.
        last = len(runs) - 1
        apart = [0.3 * i / last - 0.15 for i in range(len(runs))] if last else [0.0]
        for run, offset in zip(runs, apart, strict=True):
            fill = "none" if run.get("host_busy") else drawn
            axis.scatter(run[speed], position + offset, color=fill, edgecolors=drawn, alpha=0.6)
        low, high = summed.interval or (summed.mean, summed.mean)
        bar = [[summed.mean - low], [high - summed.mean]]
        axis.errorbar(
            summed.mean, position, xerr=bar, fmt="|", markersize=18, color=drawn, capsize=4
        )
    # Each group's numbers under its name: beside its dots, a wide interval would run into them.
    several = repeats.several_sweeps(groups)
    names = [f"{_name(group, several)}\n{_speed_text(group, groups)}" for group in groups]
    axis.set_yticks(range(len(groups)), names, fontsize=8)
    axis.set_ylim(len(groups) - 0.5, -0.5)  # the first group on top, as in the table
    axis.set_xlim(left=0)  # a length is a speed
    axis.xaxis.set_major_formatter("{x:,.0f}")
    unit = shared_unit(run.get("unit") for group in groups for run in group.runs)
    axis.set(
        xlabel=f"train {unit.many} / s",
        title="Training throughput: a dot per run (hollow: busy host), | the geometric mean, its "
        "bar the 95% interval",
    )
    axis.grid(axis="x", alpha=0.3)
    handles = [Patch(color=colour[device], label=device) for device in devices]
    if any(run.get("host_busy") for group in groups for run in group.runs):
        handles.append(Patch(facecolor="none", edgecolor="grey", label="busy host"))
    axis.legend(handles=handles, title="device", loc="upper left", bbox_to_anchor=(1.02, 1))
    return figure


def _name(group: repeats.Configuration, several_sweeps: bool) -> str:
    named = label(group.values, group.runs)
    return f"{repeats.sweep_name(group.sweep)}: {named}" if several_sweeps else named


def _speed_text(group: repeats.Configuration, groups: Sequence[repeats.Configuration]) -> str:
    # `731 [690, 772], n=3  (4.2x cpu)`
    summed = group.spread(repeats.SPEED)
    text = f"{summed.mean:,.0f}"
    if summed.interval is not None:
        text += " [{:,.0f}, {:,.0f}]".format(*summed.interval)
    text += f", n={summed.n}"
    if cpu := _on_the_cpu(group, groups):
        text += f"  ({summed.mean / cpu.spread(repeats.SPEED).mean:.1f}x cpu)"
    return text


def _on_the_cpu(
    group: repeats.Configuration, groups: Sequence[repeats.Configuration]
) -> repeats.Configuration | None:
    if group.runs[0]["device"] == names.CPU:
        return None
    others = {key: value for key, value in group.values.items() if key != "device"}
    on_cpu = (
        other
        for other in groups
        if other.runs[0]["device"] == names.CPU
        and other.sweep == group.sweep
        and others == {key: value for key, value in other.values.items() if key != "device"}
    )
    return next(on_cpu, None)
