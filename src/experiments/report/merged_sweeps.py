"""Sweeps from several machines in one table, each configuration's speed set against one
reference device's: `python -m experiments.report A B --reference A:cpu`."""

from __future__ import annotations

from collections.abc import Sequence

from experiments.core.errors import ExperimentError
from experiments.core.text import shared_unit
from experiments.report import repeats, verdicts
from experiments.report.repeats import Configuration, Row
from experiments.report.sweep_against_sweep import Side, setting
from experiments.report.verdicts import SPEED

DEVICE = "device"
HEADING = (
    "Train images/s of every folder's configurations against {reference}'s (geometric means "
    "and their 95% intervals; the ratio seed by seed where both ran the same seeds, else by "
    "Welch's t)"
)


def _devices(side: Side) -> list[str]:
    return list(dict.fromkeys(row["device"] for row in side.rows))


def reference_of(given: str, sides: Sequence[Side]) -> tuple[Side, str]:
    """`FOLDER:DEVICE`, or a `DEVICE` one folder alone used; ExperimentError naming what is."""
    folder, _, device = given.partition(":")
    named = [(side, device) for side in sides if side.name == folder and device in _devices(side)]
    alone = [(side, given) for side in sides if given in _devices(side)]
    for candidates in (named, alone):
        if len(candidates) == 1:
            return candidates[0]
    used = ", ".join(f"{side.name}:{name}" for side in sides for name in _devices(side))
    why = "is a device of more than one folder" if alone else "names no folder's device"
    raise ExperimentError(f"--reference {given} {why}; give FOLDER:DEVICE, one of {used}")


def _configurations(sides: Sequence[Side]) -> list[tuple[Side, Configuration]]:
    # Each side's configurations by device and every key but the seed that varies in any side.
    keys = [
        key
        for key in dict.fromkeys(k for side in sides for k in repeats.varying(side.rows))
        if key != DEVICE
    ]
    found = []
    for side in sides:
        groups: dict[tuple[tuple[str, str], ...], list[Row]] = {}
        for row in side.rows:
            values = ((DEVICE, row["device"]), *((key, setting(row, key)) for key in keys))
            groups.setdefault(values, []).append(row)
        found += [(side, Configuration(dict(values), runs)) for values, runs in groups.items()]
    return found


def _ratio(mine: Configuration, reference: Configuration) -> str:
    pair = verdicts.Pair(DEVICE, mine, reference, {})
    first, second, by_seed = pair.values(SPEED)
    if min(len(first), len(second)) < 2:
        return "one run: no interval"
    estimate = SPEED.estimate(SPEED.test(first, second, by_seed), 0.95)
    return f"{estimate.value:.3g}x [{estimate.low:.3g}, {estimate.high:.3g}]"


def cells(sides: Sequence[Side], reference: tuple[Side, str]) -> list[list[str]]:
    """The table, header first: a row per folder's configuration, its speed and the ratio."""
    configured = _configurations(sides)
    keys = [key for key in configured[0][1].values if key != DEVICE]
    unit = shared_unit(run.get("unit") for _, each in configured for run in each.runs)
    name = f"vs {reference[0].name}:{reference[1]}"
    table = [["folder", DEVICE, "device name", *keys, "n", repeats.SPEED.heading(unit), name]]
    for side, each in configured:
        others = {key: value for key, value in each.values.items() if key != DEVICE}
        matched = [
            of
            for of_side, of in configured
            if of_side is reference[0]
            and of.values[DEVICE] == reference[1]
            and {k: v for k, v in of.values.items() if k != DEVICE} == others
        ]
        if side is reference[0] and each.values[DEVICE] == reference[1]:
            ratio = "1 (the reference)"
        else:
            ratio = _ratio(each, matched[0]) if matched else "no such reference configuration"
        device_name = each.runs[0].get("device_name") or ""
        table.append(
            [
                side.name,
                each.values[DEVICE],
                device_name,
                *others.values(),
                each.count(),
                each.cell(repeats.SPEED),
                ratio,
            ]
        )
    return table
