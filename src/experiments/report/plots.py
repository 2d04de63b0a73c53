"""The report's figures, each made by a function that returns it (tests read them back):

    throughput.png  train images/s by speed group: a dot per run, the geometric mean and its 95%
                    interval (`experiments.report.throughput`)
    curves.png      accuracy and train loss per epoch, a line per configuration, repeats as a
                    mean with a band (`experiments.report.curves`)
    scaling.png     of a sweep over batch sizes: train images/s against batch size with the
                    compute bound and the knee, MFU, and the time to accuracy
                    (`experiments.report.scaling`)
    batch_scaling.png  the same, of runs that searched their batch (trainer.batch_size=auto),
                    with the largest batch each device took

Runs are named by the values they were swept over. matplotlib is loaded only by these modules."""

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
    """The plots of the report's `rows`, each run's epochs' rows in `histories`. Their text is
    drawn as it is: a folder's name or a swept value with `$` in it is no mathematics to parse."""
    with plt.rc_context({"text.parse_math": False}):
        if speed_groups(rows):
            _save(throughput_figure(rows), folder / "throughput.png")
        if any(histories):
            _save(curves_figure(rows, histories), folder / "curves.png")
        for name, drawn in figures(rows).items():
            _save(scaling_figure(drawn), folder / name)


def _save(figure: Any, path: Path) -> None:
    # Replaced whole: a link in its place (in a folder from elsewhere) is not written through.
    write_atomically(
        path, lambda file: figure.savefig(file, format="png", dpi=120, bbox_inches="tight")
    )
    plt.close(figure)
