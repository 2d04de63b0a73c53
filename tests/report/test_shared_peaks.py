"""One peak per device in a sweep: MFU divides each run's speed by the best quiet peak of its
device, not by the low peak a run beside other work measured again (a real sweep's report:
tests/report/test_repeats.py)."""

from __future__ import annotations

from typing import Any

import pytest

from experiments.report import shared_peaks


def run(peak: float, mfu: float, **more: Any) -> dict[str, Any]:
    return {
        "sweep": "",
        "device": "cpu",
        "device_name": "a CPU",
        "device_peak_precision": "fp32",
        "device_threads": 2,
        "peak_devices": 1,
        "device_peak_flops": peak,
        "device_peak_measured": True,
        "mfu": mfu,
        **more,
    }


def test_each_run_divides_by_the_best_quiet_peak() -> None:
    rows = [
        run(100e9, 0.10),
        run(80e9, 0.125, host_busy=True),  # the same speed as the first, over a low peak
        run(150e9, 0.05, host_busy=True),  # high, but measured beside other work
        run(120e9, 0.05, device_peak_measured=False),  # the cache's: measured quiet
    ]
    shared_peaks.share_peaks(rows)
    assert {row["device_peak_flops"] for row in rows} == {120e9}
    assert [row["mfu"] for row in rows] == pytest.approx(
        [100 / 1200, 0.1 * 80 / 120 * 1.25, 0.0625, 0.05]
    )
    assert [row.get("own_peak_flops") for row in rows] == [100e9, 80e9, 150e9, None]
    assert shared_peaks.note(rows) == (
        "MFU divides each device's runs in a sweep by one peak: cpu 120G FLOP/s (the best quiet "
        "one; 3 of 4 runs measured less). A run beside other work measures its peak low, and its "
        "MFU by its own would read high"
    )


def test_peaks_of_other_devices_sweeps_and_threads_stay_apart() -> None:
    rows = [
        run(100e9, 0.1),
        run(50e9, 0.1, device_threads=1),
        run(60e9, 0.1, sweep="another"),
        run(200e9, 0.1, device_peak_precision="bf16"),
        run(300e9, None),  # beat its peak: no MFU to divide
    ]
    shared_peaks.share_peaks(rows)
    assert [row["device_peak_flops"] for row in rows] == [100e9, 50e9, 60e9, 200e9, 300e9]
    assert shared_peaks.note(rows) is None


def test_where_no_run_was_quiet_the_best_is_taken_and_said() -> None:
    rows = [run(90e9, 0.1, host_busy=True), run(60e9, 0.15, host_busy=True)]
    shared_peaks.share_peaks(rows)
    assert [row["mfu"] for row in rows] == pytest.approx([0.1, 0.1])
    assert "cpu 90.0G FLOP/s (the best, none quiet; 1 of 2 runs measured less)" in (
        shared_peaks.note(rows) or ""
    )
