"""One peak per device: within a sweep, every run's MFU divides by the best quiet peak measured of
its device, not by the peak a run beside other work measured again (low, and each run's own)."""

from __future__ import annotations

from collections.abc import Sequence

from experiments.core.text import short_count
from experiments.report.repeats import Row

PEAK = "device_peak_flops"
# The run's own peak, where the report divides by another.
OWN_PEAK = "own_peak_flops"


def _device(row: Row) -> tuple[object, ...]:
    # What a peak is of: the sweep, the device and its name, the precision, the CPU threads, the
    # devices MFU divides by.
    keys = ("sweep", "device", "device_name", "device_peak_precision", "device_threads")
    return tuple(row.get(key) for key in (*keys, "peak_devices"))


def _devices(rows: Sequence[Row]) -> list[list[Row]]:
    # The runs with an MFU, by the device whose peak they divide by.
    devices: dict[tuple[object, ...], list[Row]] = {}
    for row in rows:
        if row.get("mfu") is not None and row.get(PEAK):
            devices.setdefault(_device(row), []).append(row)
    return list(devices.values())


def _quiet(run: Row) -> bool:
    # Its peak taken from the cache (which keeps none measured beside other work), or measured
    # by a run that other work did not hold down.
    return run.get("device_peak_measured") is False or not run.get("host_busy")


def share_peaks(rows: Sequence[Row]) -> None:
    """Divide each run's MFU by its device's best peak in its sweep, a quiet one where there is
    one; a run that measured another keeps it as OWN_PEAK."""
    for runs in _devices(rows):
        quiet = [run[PEAK] for run in runs if _quiet(run)]
        peak = max(quiet or [run[PEAK] for run in runs])
        for run in runs:
            if run[PEAK] != peak:
                run["mfu"] *= run[PEAK] / peak
                run[OWN_PEAK], run[PEAK] = run[PEAK], peak


def note(rows: Sequence[Row]) -> str | None:
    """Which peak MFU divides by, per device whose runs measured different ones."""
    said = []
    for runs in _devices(rows):
        if below := sum(OWN_PEAK in run for run in runs):
            best = "the best quiet one" if any(map(_quiet, runs)) else "the best, none quiet"
            said.append(
                f"{runs[0]['device']} {short_count(runs[0][PEAK])} FLOP/s ({best}; "
                f"{below} of {len(runs)} runs measured less)"
            )
    if not said:
        return None
    return (
        "MFU divides each device's runs in a sweep by one peak: " + "; ".join(said) + ". A run "
        "beside other work measures its peak low, and its MFU by its own would read high"
    )
