"""The device cards at the end of a report of runs on several devices, or swept over them: per
device, its name and what its configurations measured, then the verdicts between the devices."""

from __future__ import annotations

from collections.abc import Sequence

from experiments.core.text import Unit, shared_unit
from experiments.report import batch_sweep, repeats, verdicts
from experiments.report.repeats import Configuration, Row

HEADING = "Devices"
DEVICE = "device"
CARD_MEASURES = (
    repeats.SPEED,
    repeats.MFU,
    repeats.HOST_MEMORY,
    repeats.CUDA_MEMORY,
    repeats.TRAIN_ENERGY,
)


def cards(rows: Sequence[Row]) -> list[tuple[int, str]]:
    """A line each with its depth; none for runs on one device they were not swept over."""
    configurations = repeats.configurations(rows)
    by_device: dict[str, list[Configuration]] = {}
    for configuration in configurations:
        by_device.setdefault(configuration.runs[0]["device"], []).append(configuration)
    swept = any(DEVICE in run["swept"] for each in configurations for run in each.runs)
    if len(by_device) < 2 and not swept:
        return []
    unit = shared_unit(row.get("unit") for row in rows)
    several = repeats.several_sweeps(configurations)
    lines: list[tuple[int, str]] = []
    for device, mine in by_device.items():
        name = mine[0].runs[0].get("device_name")
        title = f"{device} ({name})" if name else device
        if len(mine) == 1:
            lines.append((0, f"{title}, {_said(mine[0], unit, several)}"))
            continue
        lines.append((0, f"{title}:"))
        lines += [(1, _said(configuration, unit, several)) for configuration in mine]
        lines += [(1, knee) for knee in _knees(rows, device)]
    blocks = verdicts.verdict_lines(configurations).blocks
    between = [block for block in blocks if block.key == DEVICE and block.verdicts]
    if between:
        lines.append((0, "between devices:"))
    for block in between:  # a line per pair, or beyond a few devices a ranking per measure
        lines += [
            (1 + depth, (_held(block.held) if depth == 0 else "") + line)
            for depth, line in block.lines
        ]
    return lines


def _said(configuration: Configuration, unit: Unit, several_sweeps: bool) -> str:
    # `model=lenet, 3 runs: train img/s 1,043 (1,010 to 1,070), MFU 49.6% (...), ...`
    values = [f"{key}={value}" for key, value in configuration.values.items() if key != DEVICE]
    if several_sweeps:
        values.insert(0, repeats.sweep_name(configuration.sweep))
    count, busy = len(configuration.runs), configuration.busy()
    runs = f"{count} run{'s' * (count > 1)}" + (f" ({busy} on a busy host)" if busy else "")
    figures = [
        f"{measure.heading(unit)} {configuration.cell(measure)}"
        for measure in CARD_MEASURES
        if configuration.measured(measure)
    ]
    if searched := batch_sweep.search_text(configuration.runs):
        figures.append(searched)
    return f"{', '.join([*values, runs])}: {', '.join(figures)}"


def _knees(rows: Sequence[Row], device: str) -> list[str]:
    # Per line of a sweep over batch sizes on `device`, after the values of its other keys.
    knees = []
    for name, line in batch_sweep.scaling_lines(rows).items():
        if line[0]["device"] == device and (knee := batch_sweep.knee_text(line)):
            others = name.partition(", ")[2]  # the line's name begins with its device
            knees.append(f"{others}: {knee}" if others else knee)
    return knees


def _held(values: dict[str, str]) -> str:
    held = ", ".join(f"{key}={value}" for key, value in values.items())
    return f"with {held}: " if held else ""
