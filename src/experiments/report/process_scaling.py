"""How a DDP model's speed grows with its processes (a sweep over device.processes): each count's
speed against the fewest's, with its interval, and the scaling efficiency, that ratio over the
ratio of the processes (1.0: twice the processes, twice the speed)."""

from __future__ import annotations

from collections.abc import Sequence

from experiments.report.repeats import SPEED
from experiments.report.verdicts import PAIRED, Block, Verdict

PROCESSES = "device.processes"


def scaling_lines(blocks: Sequence[Block]) -> list[tuple[int, str]]:
    """A line per count of processes against the fewest, of each block over device.processes."""
    lines: list[tuple[int, str]] = []
    for block in blocks:
        speeds = [each for each in block.verdicts if each.measure_key == SPEED.key]
        if block.key != PROCESSES or not speeds:
            continue
        fewest = min(_count(side) for each in speeds for side in (each.first, each.second))
        held = ", ".join(f"{key}={value}" for key, value in block.held.items())
        lines.append((0, f"scaling over {PROCESSES}" + (f", with {held}" if held else "") + ":"))
        against_fewest = [each for each in speeds if fewest in map(_count, _sides(each))]
        lines += sorted((1, _said(each, fewest)) for each in against_fewest)
    return lines


def _said(verdict: Verdict, fewest: int) -> str:
    first, second = map(_count, _sides(verdict))
    more = first if second == fewest else second
    ratio, low, high = verdict.estimate, verdict.low, verdict.high
    if first != more:  # the verdict's ratio is of the fewest's speed to this one's
        ratio, low, high = 1 / ratio, 1 / high, 1 / low
    scale = more / fewest
    pairs, runs = verdict.runs
    how = f"{pairs} pairs" if verdict.method == PAIRED else f"{pairs} and {runs} runs"
    if verdict.busy_both_sides:
        how += "; busy on both sides: what other work left over, not the scaling"
    return (
        f"{more} processes: {ratio:.2f}x [{low:.2f}, {high:.2f}] the speed of {fewest}, "
        f"scaling efficiency {ratio / scale:.0%} [{low / scale:.0%}, {high / scale:.0%}] "
        f"({verdict.method}, {how})"
    )


def _sides(verdict: Verdict) -> tuple[str, str]:
    return verdict.first, verdict.second


def _count(side: str) -> int:
    """The processes a side of a verdict names: "device.processes=4" -> 4."""
    return int(side.rpartition("=")[2])
