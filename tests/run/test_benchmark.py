"""eval.py benchmark=true: how fast a checkpoint's model answers, on the device, placement,
precision and compilation asked for, in results.json, the console and the trackers."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tensorboard.plugins.hparams import metadata

from experiments.devices.measuring.energy import EnergyMeter
from helpers import BRIEF_BENCHMARK, SMALL, eval_cli, plugin_data, read_events, results, trained_run


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return trained_run(tmp_path_factory.mktemp("runs"), *SMALL)


def test_a_benchmark_records_latency_throughput_and_memory(run_dir: Path, tmp_path: Path) -> None:
    done = eval_cli(
        tmp_path,
        f"ckpt={run_dir}",
        "benchmark=true",
        "placement=cuda_call",
        "precision=bf16",
        "compile=eager",  # torch.compile's path: dynamo's tracing, without inductor's compiling
        "serving.batch_size=32",
        "tracker=[tensorboard,csv]",
        *BRIEF_BENCHMARK,
    )
    assert done.returncode == 0, done.stderr
    served = results(done.run_dir)["serving"]
    assert (served["batch_size"], served["latency_calls"], served["rounds"]) == (32, 100, 3)
    assert 0 < served["latency_p50_ms"] <= served["latency_p95_ms"] <= served["latency_p99_ms"]
    low, median, high = (served[f"images_per_second{end}"] for end in ("_min", "", "_max"))
    assert 0 < low <= median <= high
    assert served["peak_memory_mb"] > 0 and served["memory_of"] == "host"
    assert (served["precision"], served["compile"], served["seed"]) == ("bf16", "eager", 0)
    assert served["host_busy"] in (True, False, None)
    meter = EnergyMeter.for_devices([torch.device("cpu")])
    if meter.unavailable is None:  # the rounds' energy, where this machine's counters are read
        assert served["joules_per_image"] > 0 and served["energy"]["source"] == "rapl"
    else:  # else none, and why
        assert (served["energy"], served["energy_note"]) == (None, meter.unavailable)
    line = next(line for line in done.stderr.splitlines() if "served on cpu" in line)
    assert "batch 1: p50 " in line and "(100 calls in 3 rounds); batch 32: " in line
    # Each figure with its rounds' spread, the calls' p50 within its rounds' p50s.
    rounds_p50 = served["round_latency_p50_ms"]
    assert (served["latency_p50_ms_min"], served["latency_p50_ms_max"]) == (
        min(rounds_p50),
        max(rounds_p50),
    )
    assert served["latency_p50_ms_min"] <= served["latency_p50_ms"] <= served["latency_p50_ms_max"]
    assert f"p50 {served['latency_p50_ms']:.3g} ms [{min(rounds_p50):.3g}, " in line
    rates = served["round_images_per_second"]
    assert (min(rates), max(rates)) == (low, high) and len(rates) == len(rounds_p50) == 3
    # The host's interference said in one line where the rounds show it, else nothing.
    said = [line for line in done.stderr.splitlines() if "the host interfered" in line]
    assert served["host_interfered"] is (served["host_interference"] is not None)
    expected = [served["host_interference"]] if served["host_interfered"] else []
    assert [line.split("] ", 1)[1] for line in said] == expected

    events = read_events(done.run_dir)
    (latency,) = events.Scalars("serving/latency_p50_ms")
    assert latency.value == pytest.approx(served["latency_p50_ms"], rel=1e-6)
    assert "test/accuracy" in events.Tags()["scalars"]
    start = plugin_data(events, metadata.SESSION_START_INFO_TAG).session_start_info
    assert start.hparams["precision"].string_value == "bf16"
    assert start.hparams["placement"].string_value == "cuda_call"
    assert "serving/images_per_second" in (done.run_dir / "metrics.csv").read_text()


def test_without_benchmark_an_evaluation_times_nothing(run_dir: Path, tmp_path: Path) -> None:
    done = eval_cli(tmp_path, f"ckpt={run_dir}", "tracker=[]")
    assert done.returncode == 0, done.stderr
    assert "serving" not in results(done.run_dir)
    assert not list(done.run_dir.glob("events.out.tfevents.*"))


@pytest.mark.parametrize(
    ("asked", "said"),
    [
        ("serving.latency_calls=50", "serving.latency_calls=50 must be "),  # (the golden file's)
        (
            "compile_mode=max-autotune",
            "compile_mode=max-autotune is a mode of torch.compile: add compile=inductor",
        ),
        (
            "precision=fp16",
            "precision=fp16 needs a CUDA device (its gradient scaling, and its fast kernels, run "
            "there); on cpu use bf16 or fp32",
        ),
    ],
)
def test_a_bad_benchmark_setting_is_refused_in_one_line(
    run_dir: Path, tmp_path: Path, asked: str, said: str
) -> None:
    done = eval_cli(tmp_path, f"ckpt={run_dir}", "device=cpu", "benchmark=true", asked)
    assert done.returncode == 1
    assert f"Error: {said}" in done.last_line
    assert results(done.run_dir)["status"] == "failed"


@pytest.mark.gpu
@pytest.mark.parametrize("placement", ["to_device", "cuda_call"])
def test_a_gpu_benchmark_records_its_memory_and_placement(
    run_dir: Path, tmp_path: Path, placement: str
) -> None:
    done = eval_cli(
        tmp_path,
        f"ckpt={run_dir}",
        "device=cuda:0",
        f"placement={placement}",
        "benchmark=true",
        *BRIEF_BENCHMARK,
    )
    assert done.returncode == 0, done.stderr
    served = results(done.run_dir)["serving"]
    assert served["memory_of"] == "cuda:0" and served["peak_memory_mb"] > 0
    assert served["channels_last"] is False  # (the CPU's default only)
    assert 0 < served["latency_p50_ms"] <= served["latency_p99_ms"]
    # A batch of 64 answers many times the images of one at a time.
    assert served["images_per_second"] > 1000 / served["latency_p50_ms"]


@pytest.mark.gpu
def test_a_gpu_benchmark_measures_the_rounds_energy_where_nvml_reads_it(
    run_dir: Path, tmp_path: Path
) -> None:
    meter = EnergyMeter.for_devices([torch.device("cuda", 0)])
    done = eval_cli(
        tmp_path,
        f"ckpt={run_dir}",
        "device=cuda:0",
        "benchmark=true",
        "serving.batch_size=1024",
        "serving.round_seconds=1",  # NVML's counter moves every few milliseconds at best
        "serving.rounds=3",
    )
    assert done.returncode == 0, done.stderr
    served = results(done.run_dir)["serving"]
    if meter.unavailable is not None:
        assert served["energy_note"] == meter.unavailable
        return
    assert served["energy"]["source"] == "nvml"
    assert served["joules_per_image"] > 0
    assert 5 < served["average_watts"] < 2000  # a GPU's power, idle to flat out
