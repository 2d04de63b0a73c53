"""The measured peaks kept per machine: a device's peak measured once, then read back; a file
that is not a cache of peaks is measured past, never trusted; a peak a run beats is forgotten, and
the run records why it has no MFU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from experiments.devices import peak
from experiments.devices.peak_cache import CACHE_DIR_VARIABLE, DeviceIdentity, PeakCache
from helpers import QUICK, results, train_cli

CPU = torch.device("cpu")


def test_a_peak_is_measured_once_then_read_from_the_cache(tmp_path: Path) -> None:
    cache = PeakCache(tmp_path / "peaks.json", judge_load=False)
    first = cache.peak(CPU, None, convolutions_lead=False)
    again = cache.peak(CPU, None, convolutions_lead=False)
    assert first.measured and not again.measured
    assert again.peak == first.peak and again.peak.precision == "fp32"
    (entry,) = json.loads((tmp_path / "peaks.json").read_text()).values()
    identity = DeviceIdentity.of(CPU)
    assert (entry["device"], entry["threads"], entry["torch"]) == (
        identity.name,
        torch.get_num_threads(),
        torch.__version__,
    )
    # trainer.measure_peak_flops=true measures afresh, and keeps that.
    fresh = cache.peak(CPU, None, convolutions_lead=False, fresh=True)
    assert fresh.measured and cache.entries()[fresh.key].flops_per_second == (
        fresh.peak.flops_per_second
    )


def test_another_precision_or_operation_is_another_peak(tmp_path: Path) -> None:
    cache = PeakCache(tmp_path / "peaks.json", judge_load=False)
    products = cache.peak(CPU, None, convolutions_lead=False)
    convolutions = cache.peak(CPU, None, convolutions_lead=True)
    assert convolutions.measured and convolutions.key != products.key
    assert len(cache.entries()) == 2


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[1, 2]",
        '{"key": {"flops_per_second": -5}}',
        '{"key": {"flops_per_second": "fast", "precision": "fp32"}}',
    ],
)
def test_a_file_that_is_not_a_cache_of_peaks_is_measured_past(tmp_path: Path, text: str) -> None:
    path = tmp_path / "peaks.json"
    path.write_text(text)
    found = PeakCache(path, judge_load=False).peak(CPU, None, convolutions_lead=False)
    assert found.measured and found.peak.flops_per_second > 1e8
    assert list(PeakCache(path).entries()) == [found.key]  # written afresh, well formed


def test_a_peak_a_run_beats_gives_no_mfu_and_says_why() -> None:
    measured = peak.Peak(100e9, "fp32")
    assert peak.utilization(10_000, 5e6, measured, 1, "cpu").mfu == pytest.approx(0.5)
    # Two GPUs: the peak of each, together.
    assert peak.utilization(10_000, 5e6, measured, 2, "cuda:0,1").mfu == pytest.approx(0.25)
    beaten = peak.utilization(10_000, 11.2e6, measured, 1, "cpu")
    assert beaten.mfu is None and beaten.note is not None
    assert "1.12x the fp32 peak measured on cpu (100G FLOP/s)" in beaten.note
    assert "%" not in beaten.note


@pytest.mark.slow
def test_a_run_that_beats_its_cached_peak_records_why_and_forgets_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_DIR_VARIABLE, str(tmp_path / "cache"))
    cache = PeakCache(judge_load=False)
    found = cache.peak(CPU, None, convolutions_lead=True)  # tudui's, the default model
    wrong = json.loads(cache.path.read_text())
    wrong[found.key]["flops_per_second"] = 1e6  # as if measured while the CPU was busy
    cache.path.write_text(json.dumps(wrong))
    done = train_cli(tmp_path, *QUICK)
    result = results(done.run_dir)
    assert (result["status"], result["mfu"]) == ("completed", None)
    assert (result["device_peak_flops"], result["device_peak_measured"]) == (1e6, False)
    assert "so that peak is wrong" in result["mfu_note"]
    log = (done.run_dir / "train.log").read_text().splitlines()
    assert any(result["mfu_note"] in line for line in log)
    assert "completed:" in log[-1] and "MFU" not in log[-1]  # the last line shows none
    assert found.key not in cache.entries()  # the next run measures it again
