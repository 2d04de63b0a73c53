"""What the report's figures share: drawing into files only, a group's name, the axes' ranges."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display needed (set before any figure is made)
from matplotlib.collections import PolyCollection

from experiments.report.repeats import Row


def label(values: dict[str, str], runs: Sequence[Row]) -> str:
    """`model=lenet, optimizer.lr=0.01`, or, sharing none, the one run's folder or `3 runs`."""
    named = ", ".join(f"{key}={value}" for key, value in values.items())
    return named or (runs[0]["run"] if len(runs) == 1 else f"{len(runs)} runs")


def spanning(axis: Any) -> None:
    """From a twentieth below the lowest value drawn to a twentieth above the highest."""
    values = drawn(axis)
    if not values:
        return
    low, high = min(values), max(values)
    margin = (high - low) / 20 or abs(high) / 20 or 1
    axis.set_ylim(low - margin, high + margin)


def from_zero(axis: Any) -> None:
    """From 0 to a tenth above the highest value drawn, so that a height reads as an amount."""
    axis.set_ylim(0, 1.1 * max(drawn(axis), default=0) or 1)


def drawn(axis: Any) -> list[float]:
    """The finite heights of the lines and bands drawn on `axis` (a diverged run's loss is nan)."""
    lines = [line.get_ydata() for line in axis.get_lines()]
    bands = [
        path.vertices[:, 1]
        for band in axis.collections
        if isinstance(band, PolyCollection)  # (a scatter's paths are its markers' shapes)
        for path in band.get_paths()
    ]
    return [float(y) for heights in lines + bands for y in heights if math.isfinite(y)]
