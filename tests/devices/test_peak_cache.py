"""The measured peaks kept per machine: a device's peak measured once, then read back; a file
that is not a cache of peaks, or an entry of one that is not a well-formed peak, is measured
past, never trusted, and written anew; a peak beyond any device of its kind, or one a run beats,
is forgotten (the run records why it has no MFU); processes side by side lose none of each
other's entries."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
from pathlib import Path
from typing import Any

import pytest
import torch

from experiments.core.files import MIB
from experiments.core.text import display_path, short_count
from experiments.devices.backends.registry import backend_for
from experiments.devices.measuring import peak
from experiments.devices.measuring.peak_cache import CACHE_DIR_VARIABLE, PeakCache
from helpers import CPU_FP32_PRODUCTS, QUICK, cpu_peak_entry, results, train_cli

CPU = torch.device("cpu")


def cache_text(**changed: Any) -> str:
    return json.dumps({CPU_FP32_PRODUCTS: cpu_peak_entry(**changed)})


def test_a_peak_is_measured_once_then_read_from_the_cache(tmp_path: Path) -> None:
    cache = PeakCache(tmp_path / "peaks.json", judge_load=False)
    first = cache.peak(CPU, None, convolutions_lead=False)
    again = cache.peak(CPU, None, convolutions_lead=False)
    assert first.measured and not again.measured
    assert again.peak == first.peak and again.peak.precision == "fp32"
    (entry,) = json.loads((tmp_path / "peaks.json").read_text()).values()
    identity = backend_for("cpu").identity(CPU)
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


def test_a_well_formed_entry_is_read_back_unmeasured(tmp_path: Path) -> None:
    path = tmp_path / "peaks.json"
    path.write_text(cache_text())  # (what the cases below each spoil in one field)
    found = PeakCache(path, judge_load=False).peak(CPU, None, convolutions_lead=False)
    assert (found.measured, found.key, found.peak.flops_per_second) == (
        False,
        CPU_FP32_PRODUCTS,
        1e9,
    )


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[1, 2]",
        '{"key": {"flops_per_second": -5}}',
        '{"key": {"flops_per_second": "fast", "precision": "fp32"}}',
        cache_text(flops_per_second=-5),
        cache_text(flops_per_second=True),
        cache_text(flops_per_second="1e9"),
        cache_text().replace("1000000000.0", "9" * 401),  # a whole number no float holds
        cache_text().replace("1000000000.0", "NaN"),
        cache_text(threads="2"),
        cache_text(threads=[2]),
        cache_text(threads=True),
        cache_text(threads=2.5),
        cache_text(precision=None),
        cache_text(measured_at=20261201),
        cache_text(device={"name": "cpu"}),
        json.dumps({CPU_FP32_PRODUCTS: "a peak"}),
        "[" * 100_000 + "]" * 100_000,  # deeper than Python's parser goes
        json.dumps({CPU_FP32_PRODUCTS: cpu_peak_entry(), "padding": "x" * 2 * MIB}),
        b"\x89PNG\r\n".decode("latin-1"),
    ],
)
def test_a_file_that_is_not_a_cache_of_peaks_is_measured_past(tmp_path: Path, text: str) -> None:
    path = tmp_path / "peaks.json"
    path.write_text(text)
    found = PeakCache(path, judge_load=False).peak(CPU, None, convolutions_lead=False)
    assert found.measured and found.peak.flops_per_second > 1e8
    assert list(PeakCache(path).entries()) == [found.key]  # written afresh, well formed


def test_a_pipe_or_folder_in_the_caches_place_is_measured_past_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pipe = tmp_path / "pipe" / "peaks.json"
    pipe.parent.mkdir()
    os.mkfifo(pipe)  # read, it would wait for ever for a writer
    with caplog.at_level(logging.WARNING, logger="experiments"):
        found = PeakCache(pipe, judge_load=False).peak(CPU, None, convolutions_lead=False)
    assert found.measured and pipe.is_file()  # the pipe replaced by the cache
    assert list(PeakCache(pipe).entries()) == [found.key]
    assert [message for message in caplog.messages if "not a cache" in message] == [
        f"{pipe} is not a cache of peaks ({pipe} is not a regular file (a named pipe); it holds "
        "this machine's measured peaks: delete it, and runs measure them again): measuring again"
    ]
    caplog.clear()
    folder = tmp_path / "folder" / "peaks.json"
    folder.mkdir(parents=True)
    with caplog.at_level(logging.WARNING, logger="experiments"):
        found = PeakCache(folder, judge_load=False).peak(CPU, None, convolutions_lead=False)
    assert found.measured and folder.is_dir()  # a folder is never removed
    assert caplog.messages[-1] == (
        f"the measured peak is not kept: could not write {folder}: Is a directory (set "
        f"{CACHE_DIR_VARIABLE})"
    )
    assert not list(folder.parent.glob(".*.tmp"))  # no write left behind


def test_a_peak_beyond_any_device_of_its_kind_is_forgotten_and_measured_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "peaks.json"
    path.write_text(cache_text(flops_per_second=1e30))
    cache = PeakCache(path, judge_load=False)
    with caplog.at_level(logging.WARNING, logger="experiments"):
        found = cache.peak(CPU, None, convolutions_lead=False)
    most = backend_for("cpu").most_flops("fp32", torch.get_num_threads())
    assert found.measured and 1e8 < found.peak.flops_per_second <= most
    assert cache.entries()[found.key].flops_per_second == found.peak.flops_per_second
    assert caplog.messages == [
        f"the cached fp32 peak of cpu (1e+30 FLOP/s, in {display_path(path)}) is more than any "
        f"such device can do ({short_count(most)} FLOP/s): forgotten, and measured again"
    ]


def test_the_most_a_device_can_do_is_above_every_device_made() -> None:
    # A 2-thread EPYC's fp32 here: 0.1-0.2 T; an H100's dense bf16: 0.99 P, a B200's 2.25 P.
    cpu, cuda = backend_for("cpu"), backend_for("cuda")
    assert cpu.most_flops("fp32", 2) == 2e12
    assert cpu.most_flops("bf16", 64) == 64e13  # AMX's tiles, on every core
    assert cuda.most_flops("bf16", 1) == cuda.most_flops("fp32", 1) == 1e16


def keep_entries(path: Path, process: int, count: int, start: Any) -> None:
    """Keep `count` entries of its own in the cache at `path`, once every process has started."""
    cache = PeakCache(path, judge_load=False)
    identity = backend_for("cpu").identity(CPU)
    start.wait()
    for number in range(count):
        measured = peak.Peak(1e9 + number, "fp32")
        cache.keep(f"process {process}, entry {number}", identity, measured, "products")


@pytest.mark.slow
def test_processes_side_by_side_lose_none_of_each_others_entries(tmp_path: Path) -> None:
    path = tmp_path / "peaks.json"
    processes, each = 4, 20
    context = multiprocessing.get_context("fork")  # (torch is imported already)
    start = context.Barrier(processes)
    workers = [
        context.Process(target=keep_entries, args=(path, process, each, start))
        for process in range(processes)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert [worker.exitcode for worker in workers] == [0] * processes
    assert len(PeakCache(path).entries()) == processes * each


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
