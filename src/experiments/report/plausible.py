"""The figures of a run's row that no run can truly have (a speed not above 0, a number not finite):
a damaged run folder's. Each is left out of the row, whose reason names it."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

from experiments.report.headlines import HEADLINES, Headline
from experiments.report.repeats import Row


class Bound(NamedTuple):
    holds: Callable[[float], bool]
    says: str


ABOVE_ZERO = Bound(lambda value: value > 0, "above 0")
AT_LEAST_ZERO = Bound(lambda value: value >= 0, "0 or more")
SHARE = Bound(lambda value: 0 <= value <= 1, "from 0% to 100%")
# No MFU is recorded where a run beat its peak.
UTILIZATION = Bound(lambda value: 0 < value <= 1, "above 0% and at most 100%")

FIGURES = {
    "train_images_per_second": ABOVE_ZERO,
    "mfu": UTILIZATION,
    "mfu_datasheet": UTILIZATION,
    "seconds_per_epoch": ABOVE_ZERO,
    "time_to_accuracy": AT_LEAST_ZERO,  # or "not reached"
    "peak_host_memory_mb": AT_LEAST_ZERO,
    "peak_cuda_memory_mb": AT_LEAST_ZERO,
    "train_joules_per_image": ABOVE_ZERO,
    "latency_p50_ms": ABOVE_ZERO,
    "latency_p95_ms": ABOVE_ZERO,
    "latency_p99_ms": ABOVE_ZERO,
    "serving_images_per_second": ABOVE_ZERO,
    "serving_peak_memory_mb": AT_LEAST_ZERO,
    "serving_joules_per_image": ABOVE_ZERO,
    "largest_batch": ABOVE_ZERO,
    "wait_share": SHARE,
    "compute_share": SHARE,
    "copy_share": SHARE,
}


def left_out(row: Row) -> list[str]:
    """Set to None each figure of `row` it cannot truly hold; what each was and can be."""
    said = []
    headlines: list[Headline] = [*HEADLINES, *(row.get("own_headlines") or [])]
    shares = {headline.key: SHARE for headline in headlines if headline.metric.percent}
    for key, bound in {**FIGURES, **shares}.items():
        value = row.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if not math.isfinite(value):
            said.append(f"{key} is {value}, not a finite number: left out")
        elif not bound.holds(value):
            said.append(f"{key} is {value:g}, where a number {bound.says} belongs: left out")
        else:
            continue
        row[key] = None
    return said
