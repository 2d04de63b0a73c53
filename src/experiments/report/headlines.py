"""The numbers a report leads with: each task's headline metric at the selected and final epochs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from experiments.config.metric_names import TEST, VAL, Metric, TaskMetrics
from experiments.training import shipped_metrics
from experiments.training.history import History

SHORT = {"accuracy": "acc"}


@dataclass(frozen=True)
class Headline:
    """A task's headline on a split: its key in a run's results (and summary row), its header."""

    key: str
    header: str
    metric: Metric
    final: bool  # at the final epoch, not the selected one


def headlines(measures: TaskMetrics) -> list[Headline]:
    """val, test, and final test."""
    metric = measures.headline
    short = SHORT.get(metric.name, metric.name)
    return [
        Headline(metric.key(VAL), f"val {short}", metric, final=False),
        Headline(metric.key(TEST), f"test {short}", metric, final=False),
        Headline(measures.final_key(TEST), f"final test {short}", metric, final=True),
    ]


SHIPPED = list(shipped_metrics.SHIPPED)
HEADLINES = [headline for measures in SHIPPED for headline in headlines(measures)]


def own_headlines(rows: Sequence[Mapping[str, Any]]) -> list[Headline]:
    """The headlines of the tasks of one's own that `rows` ran, in order."""
    found = {headline.key: headline for row in rows for headline in row.get("own_headlines", ())}
    return list(found.values())


def first_measured(histories: Sequence[History]) -> TaskMetrics | None:
    """The shipped task of the first run whose epoch rows hold one's metrics."""
    found = (m for h in histories if h for m in SHIPPED if m.headline.key(TEST) in h[0])
    return next(found, None)
