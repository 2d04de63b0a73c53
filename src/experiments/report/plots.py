"""The report's figures (throughput.png, curves.png, scaling.png, batch_scaling.png), each made by
a function that returns it, for tests to read back. matplotlib is loaded only by these modules."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt

from experiments.core.files import write_atomically
from experiments.report.curves import curves_figure
from experiments.report.drawing import Row
from experiments.report.scaling import figures, scaling_figure
from experiments.report.throughput import speed_groups, throughput_figure
from experiments.training.history import History


def draw(folder: Path, rows: Sequence[Row], histories: Sequence[History]) -> None:
    # Text as it is: a `$` in a folder's name or a swept value is no mathematics to parse.
    with plt.rc_context({"text.parse_math": False}):
        if speed_groups(rows):
            _save(throughput_figure(rows), folder / "throughput.png")
        if any(histories):
            _save(curves_figure(rows, histories), folder / "curves.png")
        for name, drawn in figures(rows).items():
            _save(scaling_figure(drawn), folder / name)


def _save(figure: Any, path: Path) -> None:
    # Replaced whole: a link in its place is not written through.
    write_atomically(
        path, lambda file: figure.savefig(file, format="png", dpi=120, bbox_inches="tight")
    )
    plt.close(figure)
