"""results.json's energy: the epochs' training passes added up per counter, from their rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypedDict

from experiments.training.history import EpochRow


class EnergySummary(TypedDict):
    energy: dict[str, Any] | None  # EnergyRecord: source, joules, seconds, watts, counters, covers
    energy_note: str | None  # why there is none, or why some epochs have none
    train_joules_per_image: float | None
    average_watts: float | None


def energy_summary(
    history: Sequence[EpochRow], source: str, covers: str, unavailable: str | None
) -> EnergySummary:
    """The energy of the epochs' training passes; where none was measured, None and why."""
    measured = [row for row in history if row.get("train_energy")]
    if not measured:
        note = unavailable or "no epoch's energy was measured"
        return EnergySummary(
            energy=None, energy_note=note, train_joules_per_image=None, average_watts=None
        )
    seconds = sum(row["train_seconds"] for row in measured)
    by_counter: dict[str, float] = {}
    for row in measured:
        for name, joules in row["train_energy"].items():  # type: ignore[union-attr]
            by_counter[name] = by_counter.get(name, 0.0) + joules
    joules = sum(by_counter.values())
    counters = [
        {"name": name, "joules": each, "watts": each / seconds} for name, each in by_counter.items()
    ]
    energy = {
        "source": source,
        "joules": joules,
        "seconds": seconds,
        "watts": joules / seconds,
        "counters": counters,
        "covers": covers,
        "epochs": [row["epoch"] for row in measured],
    }
    missing = [row["epoch"] for row in history if not row.get("train_energy")]
    note = f"epochs {missing} measured no energy: {unavailable}" if missing else None
    return EnergySummary(
        energy=energy,
        energy_note=note,
        train_joules_per_image=joules / sum(row["train_images"] for row in measured),
        average_watts=joules / seconds,
    )
