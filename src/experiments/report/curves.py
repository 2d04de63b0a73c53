"""curves.png: the headline metric (accuracy in %, RMSE) and train loss per epoch, a line per
configuration: its runs' mean, with a band from their lowest to their highest."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.ticker import MaxNLocator

from experiments.config.metric_names import BEFORE_TASKS, TEST, TRAIN_LOSS, VAL
from experiments.report import repeats
from experiments.report.drawing import Row, from_zero, label, spanning
from experiments.report.headlines import first_measured, own_headlines
from experiments.training.history import History, validated

# Configurations whose numbers coincide (two placements train alike) would hide one another: each
# has its own marker and dash, repeating only after 20, hollow and smaller than the one before.
MARKERS = ("o", "s", "^", "D", "v")
DASHES = ("-", "--", ":", "-.")


def curves_figure(rows: Sequence[Row], histories: Sequence[History]) -> Any:
    """Accuracy is drawn from 0 (a height reads as an amount); the loss axis spans the losses."""
    # No layout engine: the legend sits beside the axes, and savefig's tight box takes it in.
    figure, (accuracy, loss) = plt.subplots(1, 2, figsize=(12, 4.5))
    # The first run's task's headline; runs of another task have no line there.
    measures, own = first_measured(histories), [each.metric for each in own_headlines(rows)]
    headline = measures.headline if measures else next(iter(own), BEFORE_TASKS.headline)
    scale = 100 if headline.percent else 1
    configurations = _configurations(rows, histories)
    repeated = any(len(runs) > 1 for runs in configurations.values())
    for number, (name, runs) in enumerate(configurations.items()):
        style = _style(number)
        if len(runs) > 1:
            name += f" ({len(runs)} runs)"
        tested = [history for history in runs if headline.key(TEST) in history[0]]
        colour = None
        if tested:
            band = _per_epoch(tested, headline.key(TEST), scale)
            colour = _mean_and_band(accuracy, band, style)
            if all(validated(history) for history in tested):  # lighter, for validation
                validation = _per_epoch(tested, headline.key(VAL), scale)
                _mean_and_band(accuracy, validation, {**style, "alpha": 0.4}, colour)
        _mean_and_band(loss, _per_epoch(runs, TRAIN_LOSS), style, colour, name)
    any_validated = any(validated(runs[0]) for runs in configurations.values())
    title = f"Test {headline.name}" + (" (faint: validation)" if any_validated else "")
    unit = " (%)" if headline.percent else ""
    accuracy.set(title=title, xlabel="epoch", ylabel=f"{headline.name}{unit}")
    loss.set(title="Train loss", xlabel="epoch", ylabel="loss")
    last = max(row["epoch"] for runs in configurations.values() for h in runs for row in h)
    for axis in (accuracy, loss):
        if repeated:
            axis.set_title(f"{axis.get_title()}; repeats: mean, band from lowest to highest")
        axis.grid(alpha=0.3)
        axis.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
        # Else one epoch's dots would sit alone on 0.96 to 1.04.
        axis.set_xlim(0.5, last + 0.5)
    from_zero(accuracy)
    if headline.percent:
        accuracy.set_ylim(top=min(accuracy.get_ylim()[1], 100))
    spanning(loss)
    loss.legend(title="configuration", loc="upper left", bbox_to_anchor=(1.02, 1), fontsize=8)
    return figure


def _style(number: int) -> dict[str, Any]:
    return {
        "marker": MARKERS[number % 5],
        "markersize": 9 - 1.5 * (number % 4),
        "markerfacecolor": "none",
        "linestyle": DASHES[number % 4],
        "alpha": 0.85,
    }


def _configurations(rows: Sequence[Row], histories: Sequence[History]) -> dict[str, list[History]]:
    # Whatever their status: a run cut short shows how far it got.
    runs: dict[tuple[str, tuple[tuple[str, str], ...]], list[tuple[Row, History]]] = {}
    for row, history in zip(rows, histories, strict=True):
        if history:
            swept = row.get("swept") or {}
            shared = tuple((k, v) for k, v in swept.items() if repeats.not_the_seed(k))
            runs.setdefault((row.get(repeats.SWEEP, ""), shared), []).append((row, history))
    several = len({sweep for sweep, _ in runs}) > 1
    named = {}
    for (sweep, shared), pairs in runs.items():
        name = label(dict(shared), [row for row, _ in pairs])
        named[f"{repeats.sweep_name(sweep)}: {name}" if several else name] = [h for _, h in pairs]
    return named


Band = dict[int, list[float]]  # the runs' values by epoch


def _per_epoch(runs: Sequence[History], key: str, scale: float = 1) -> Band:
    values: Band = {}
    for history in runs:
        for row in history:
            values.setdefault(row["epoch"], []).append(scale * row[key])
    return dict(sorted(values.items()))


def _mean_and_band(
    axis: Any, band: Band, style: dict[str, Any], colour: str | None = None, name: str = "_"
) -> str:
    """The mean line of `band` (`name` "_": no legend entry) and its band; the line's colour."""
    epochs, means = list(band), [statistics.fmean(values) for values in band.values()]
    (line,) = axis.plot(epochs, means, color=colour, label=name, **style)
    if any(len(values) > 1 for values in band.values()):
        # Of the finite values: a diverged run's nan would make either end arbitrary.
        finite = [
            [value for value in values if math.isfinite(value)] or [math.nan]
            for values in band.values()
        ]
        lowest, highest = [min(values) for values in finite], [max(values) for values in finite]
        axis.fill_between(epochs, lowest, highest, color=line.get_color(), alpha=0.15, linewidth=0)
    return line.get_color()
