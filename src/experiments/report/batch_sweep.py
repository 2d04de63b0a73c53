"""A sweep over batch sizes: its runs by line (a device, with every other swept key that changes
speed), the knee and the largest batch the runs' search found. `report.scaling` draws them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from experiments.core.text import shared_unit
from experiments.report.repeats import Row
from experiments.report.statistics import log_spread
from experiments.report.throughput import changes_speed
from experiments.training import batch_choice
from experiments.training.batch_choice import KNEE_SHARE

BATCH_SIZE = "trainer.batch_size"
HALVINGS = "trainer.auto_batch_halvings"
# With trainer.batch_size=auto, what chooses the batch among those that fit is swept.
BATCH_KEYS = (BATCH_SIZE, "trainer.auto_batch", HALVINGS, "trainer.auto_batch_min_steps")

HEADING = (
    f"Batch sizes (the knee: the smallest within {KNEE_SHARE:.0%} of the best speed, "
    "by geometric mean)"
)


def trained_batch(row: Row) -> int | None:
    """The batch a run trained with, of all its processes: results.json's, else its swept one."""
    recorded = row.get("batch_size")
    if isinstance(recorded, int):
        return recorded
    swept = str(row.get("swept", {}).get(BATCH_SIZE, ""))
    return int(swept) if swept.isdigit() else None


def scaling_lines(rows: Sequence[Row]) -> dict[str, list[Row]]:
    """The measured runs of a sweep over batch sizes, by line, in order of batch."""
    lines: dict[str, list[Row]] = {}
    for row in rows:
        swept = row.get("swept") or {}
        if (
            swept.keys() & set(BATCH_KEYS)
            and row["train_images_per_second"] is not None
            and trained_batch(row) is not None
        ):
            others = {k: v for k, v in swept.items() if k not in BATCH_KEYS and changes_speed(k)}
            named = {"device": row["device"]} | others
            name = ", ".join(f"{key}={value}" for key, value in named.items())
            lines.setdefault(name, []).append(row)
    for line in lines.values():
        line.sort(key=trained_batch)
    return lines


def by_batch_size(line: Sequence[Row], key: str) -> dict[int, list[float]]:
    """The line's runs' positive values of `key` by the batch each trained with, in order."""
    values: dict[int, list[float]] = {}
    for row in line:
        value = row.get(key)
        if isinstance(value, int | float) and value > 0:
            values.setdefault(trained_batch(row), []).append(value)
    return dict(sorted(values.items()))


def knee(speeds: Mapping[int, Sequence[float]]) -> int:
    """The smallest batch size whose geometric mean speed is within `KNEE_SHARE` of the best
    size's: the rule trainer.auto_batch=knee trains by (`training.batch_choice`)."""
    return batch_choice.knee({size: log_spread(runs).mean for size, runs in speeds.items()})


def largest_batches(line: Sequence[Row]) -> list[int]:
    """The largest batches that fit, as the line's runs' searches found them, smallest first."""
    return sorted({search["largest"] for search in _searches(line)})


def search_text(line: Sequence[Row]) -> str | None:
    """`largest batch 4096 (memory budget 4 GB)`, or `1024 to 2048` where the searches disagreed."""
    largest = largest_batches(line)
    if not largest:
        return None
    found = f"{largest[0]}" + (f" to {largest[-1]}" if len(largest) > 1 else "")
    stopped = " or ".join(dict.fromkeys(_stopped_by(search) for search in _searches(line)))
    return f"largest batch {found} ({stopped})"


def _searches(line: Sequence[Row]) -> list[dict[str, Any]]:
    return [row["batch_search"] for row in line if row.get("batch_search")]


def _stopped_by(search: Mapping[str, Any]) -> str:
    if search["stopped_by"] == "memory budget" and search.get("budget_gb") is not None:
        return f"memory budget {search['budget_gb']:g} GB"
    return str(search["stopped_by"])


def knee_text(line: Sequence[Row]) -> str | None:
    """`knee 512 (2,250 img/s, within 5% of the best: 2,310 img/s at 2048)`; None for one size."""
    speeds = by_batch_size(line, "train_images_per_second")
    if len(speeds) < 2:
        return None
    means = {size: log_spread(runs).mean for size, runs in speeds.items()}
    found, best = knee(speeds), max(means, key=lambda size: means[size])
    rate = shared_unit(row.get("unit") for row in line).rate
    text = f"knee {found} ({means[found]:,.0f} {rate}"
    if found == best:
        return f"{text}, the best)"
    return f"{text}, within {KNEE_SHARE:.0%} of the best: {means[best]:,.0f} {rate} at {best})"


def notes(rows: Sequence[Row]) -> list[str]:
    """Per line, `device=cpu: largest batch 4096 (memory budget 4 GB), knee 512 (...)`."""
    said = []
    for name, line in scaling_lines(rows).items():
        if parts := [text for text in (search_text(line), knee_text(line)) if text]:
            said.append(f"{name}: {', '.join(parts)}")
    return said
