"""The device cards at the end of a report of runs on several devices, or swept over them: per
device, its name and what its configurations measured, then the verdicts between the devices,
their ranking to the target, and where a faster one converged worse, a line that says so."""

from __future__ import annotations

from collections.abc import Sequence

from experiments.config.metric_names import TEST
from experiments.core.text import Unit, shared_unit
from experiments.report import batch_sweep, process_scaling, repeats, to_target, verdicts
from experiments.report.repeats import Configuration, Row
from experiments.report.verdicts import Block, Verdict

HEADING = "Devices"
DEVICE = "device"
# The keys whose sweeps make a card: the device, and how many of it train together.
SWEPT = (DEVICE, process_scaling.PROCESSES)
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
    swept = any(
        key in run["swept"] for each in configurations for run in each.runs for key in SWEPT
    )
    if len(by_device) < 2 and not swept:
        return []
    unit = shared_unit(row.get("unit") for row in rows)
    several = repeats.several_sweeps(configurations)
    priced = any(row.get(to_target.PRICE) for row in rows)
    lines: list[tuple[int, str]] = []
    for device, mine in by_device.items():
        name = mine[0].runs[0].get("device_name")
        title = f"{device} ({name})" if name else device
        if len(mine) == 1:
            lines.append((0, f"{title}, {_said(mine[0], unit, several, priced)}"))
            continue
        lines.append((0, f"{title}:"))
        lines += [(1, _said(configuration, unit, several, priced)) for configuration in mine]
        lines += [(1, knee) for knee in _knees(rows, device)]
    blocks = verdicts.verdict_lines(configurations).blocks
    if between := _between(configurations, blocks, unit):
        lines += [(0, "between devices:"), *between]
    return lines + process_scaling.scaling_lines(blocks)


def to_target_verdicts(configurations: Sequence[Configuration]) -> list[Verdict]:
    """The devices' rankings by time, energy and cost to the target, for verdicts.json."""
    return [each for block in to_target.ranked(configurations, DEVICE) for each in block.verdicts]


def _between(
    configurations: Sequence[Configuration], blocks: Sequence[Block], unit: Unit
) -> list[tuple[int, str]]:
    """The verdicts between devices (a line per pair, or beyond a few devices a ranking per
    measure), their rankings to the target, those left out of them, and the self-checks."""
    between = [block for block in blocks if block.key == DEVICE and block.verdicts]
    lines = [
        (1 + depth, (_held(block.held) if depth == 0 else "") + line)
        for block in [*between, *to_target.ranked(configurations, DEVICE)]
        for depth, line in block.lines
    ]
    if lines:
        lines += [
            (1, f"{_held(_others(each))}not ranked to the target: {each.values[DEVICE]}, {why}")
            for each, why in to_target.unranked(configurations)
            if DEVICE in each.values
        ]
    return lines + [
        (1, _held(block.held) + line)
        for block in between
        for line in _self_checks(block, configurations, unit)
    ]


def _self_checks(block: Block, configurations: Sequence[Configuration], unit: Unit) -> list[str]:
    """As MLPerf checks a faster setup still converged: where the faster device of a pair took
    more epochs to the target, missed it, or ended at a worse test headline beyond the noise."""
    lines, speed = [], verdicts.SPEED.name.replace("{many}", unit.many)
    for verdict in block.verdicts:
        if verdict.measure != speed or not verdict.differs:
            continue
        fast, slow = (
            _named(configurations, block, name) for name in (verdict.first, verdict.second)
        )
        ratio = verdicts.SPEED.value(verdict.estimate)
        faster = f"{verdict.first} trains {ratio} as fast as {verdict.second} but "
        worse = _slower_to_the_goal(fast, slow, verdict.second, unit)
        worse += [
            f"to a worse {other.measure}, beyond the noise: faster per {unit.one}, not to as "
            "good a model"
            for other in block.verdicts
            if other.measure.startswith(f"{TEST} ")
            and other.differs
            and (other.first, other.second) == (verdict.second, verdict.first)
        ]
        lines += [faster + each for each in worse]
    return lines


def _slower_to_the_goal(
    fast: Configuration, slow: Configuration, slow_name: str, unit: Unit
) -> list[str]:
    goal = to_target.goal(fast)
    if goal is None:
        return []
    if to_target.missed(fast) and to_target.reached(slow) and not to_target.missed(slow):
        return [
            f"{to_target.missed(fast)} of its {len(fast.runs)} runs did not reach {goal}, where "
            f"every {slow_name} run did: faster per {unit.one}, not to the goal"
        ]
    took, against = to_target.epochs(fast), to_target.epochs(slow)
    if took is None or against is None or took[0] <= against[0]:
        return []
    average = " on average" if took[1] or against[1] else ""
    return [
        f"reached {goal} in {took[0]:.3g} epochs against {against[0]:.3g}{average}: faster per "
        f"{unit.one}, slower to converge"
    ]


def _named(configurations: Sequence[Configuration], block: Block, device: str) -> Configuration:
    # The configuration a verdict of `block` names `device` (a device is named by its value).
    return next(
        each
        for each in configurations
        if each.sweep == block.sweep
        and each.values.get(DEVICE) == device
        and _others(each) == block.held
    )


def _others(configuration: Configuration) -> dict[str, str]:
    return {key: value for key, value in configuration.values.items() if key != DEVICE}


def _said(configuration: Configuration, unit: Unit, several_sweeps: bool, priced: bool) -> str:
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
    said = f"{', '.join([*values, runs])}: {', '.join(figures)}"
    to_goal = to_target.figures(configuration, priced)
    return f"{said}; {to_goal}" if to_goal else said


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
