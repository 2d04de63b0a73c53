"""How the benchmark times a model's answers (`run.inference_benchmark`): percentiles of given call
times, rounds' rates and their spread, whether the host interfered with given rounds, and a real
model answered on the host as a server would."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from experiments.core.text import IMAGES
from experiments.devices.measuring.host_load import HostLoad
from experiments.run import inference_benchmark
from helpers import on


class CountedLinear(nn.Linear):
    """A linear layer that counts its forward passes."""

    def __init__(self) -> None:
        super().__init__(4, 3)
        self.calls = 0

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return super().forward(inputs)


def test_percentiles_interpolate_between_the_calls() -> None:
    # 1 ms to 100 ms: p50 between the 50th and 51st, p99 between the two slowest.
    latency = inference_benchmark.Latency([ms / 1000 for ms in range(1, 101)])
    figures = latency.milliseconds()
    assert figures["latency_p50_ms"] == pytest.approx(50.5)
    assert figures["latency_p95_ms"] == pytest.approx(95.05)
    assert figures["latency_p99_ms"] == pytest.approx(99.01)
    assert figures["latency_mean_ms"] == pytest.approx(50.5)
    # In 3 rounds of 34, 33 and 33 calls, in the order timed: each round's p50.
    rounds = inference_benchmark.Latency([ms / 1000 for ms in range(1, 101)], rounds=3)
    assert rounds.round_p50_ms() == pytest.approx([17.5, 51.0, 84.0])
    figures = rounds.milliseconds()
    assert (figures["latency_p50_ms_min"], figures["latency_p50_ms_max"]) == (17.5, 84.0)
    assert figures["latency_p50_ms"] == pytest.approx(50.5)  # the calls', as with one round


def test_throughput_is_the_median_round_with_its_least_and_most() -> None:
    rounds = inference_benchmark.Throughput(
        batch_size=8, batches_per_round=5, round_seconds=[0.5, 0.4, 1.0]
    )
    assert rounds.figures() == {
        "images_per_second": 80.0,  # 40 images in 0.5 s, 0.4 s, 1 s: 80, 100, 40 per second
        "images_per_second_min": 40.0,
        "images_per_second_max": 100.0,
        "rounds": 3,
        "batches_per_round": 5,
        "round_images_per_second": [80.0, 100.0, 40.0],
    }
    assert rounds.inputs == 120


def test_a_server_answers_on_the_host_after_untimed_calls() -> None:
    model = CountedLinear()
    server = inference_benchmark.Server(model, on("cpu"))
    requests = [torch.randn(1, 4) for _ in range(3)]
    latency = inference_benchmark.time_latency(server, requests, calls=100, warmup=7, rounds=3)
    assert model.calls == 107
    assert len(latency.seconds) == 100 and min(latency.seconds) > 0
    assert len(latency.round_p50_ms()) == 3
    assert not model.training  # answered as evaluated: dropout off, BatchNorm's running stats
    answer = server.answer(requests[0])
    assert answer.device.type == "cpu" and not answer.requires_grad


def test_a_round_holds_as_many_calls_as_last_its_least_seconds() -> None:
    model = CountedLinear()
    server = inference_benchmark.Server(model, on("cpu"))
    batch = torch.randn(16, 4)
    # A batch of this layer takes microseconds: 20 ms hold many, 1, 2, 5, 10, 20, ... found.
    per_round = inference_benchmark.calls_per_round(server, batch, 0.02)
    assert per_round >= 10 and str(per_round)[0] in "125"
    model.calls = 0
    rounds = inference_benchmark.time_throughput(server, batch, 3, 0.02)
    assert len(rounds.round_seconds) == 3
    calibration = sum(
        c
        for c in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)
        if c <= rounds.batches_per_round
    )
    assert model.calls == 1 + calibration + 3 * rounds.batches_per_round  # one untimed first


QUIET = HostLoad(other_cpu_share=0.02, cores=2, busy=False)
BUSY = HostLoad(other_cpu_share=0.35, cores=2, busy=True)  # others kept 0.7 cores: 1 left free


def interference(
    latency_p50_ms: list[float],
    images_per_second: list[float],
    load: HostLoad | None = QUIET,
    threads: int = 2,
) -> str | None:
    return inference_benchmark.interference(
        latency_p50_ms, images_per_second, load, threads, IMAGES
    )


def test_rounds_within_one_and_a_half_times_on_a_quiet_host_were_not_interfered_with() -> None:
    assert interference([0.8, 0.85, 0.9], [3000.0, 3400.0, 3200.0]) is None
    assert interference([0.6, 0.9], [2000.0, 3000.0]) is None  # 1.5x apart: the most
    assert interference([0.5], [1000.0]) is None  # one round: no spread to judge
    assert interference([0.8, 0.9], [3000.0, 3100.0], load=None) is None  # /proc unread


def test_rounds_far_apart_say_so_with_their_spread_and_what_to_do() -> None:
    # One latency round answering in 78.5 ms where the others took 0.2 ms, on a busy host.
    said = interference([0.2, 0.21, 78.5], [3000.0, 3100.0, 2900.0], load=BUSY)
    assert said == (
        "the host interfered with the benchmark: its rounds' p50 latency spans 0.2-78.5 ms "
        "(392x); other processes used 35% of its cores; rerun it with threads=1 (the cores "
        "other work left free), on a quieter machine, or with more serving.rounds than 3 (their "
        "median outlasts a few disturbed rounds)"
    )
    # Throughput rounds 1.55x apart on a quiet host: no thread to give up.
    said = interference([0.2, 0.21], [2000.0, 3100.0], threads=1)
    assert said == (
        "the host interfered with the benchmark: their images/s 2,000-3,100 (1.55x); rerun it "
        "on a quieter machine, or with more serving.rounds than 2 (their median outlasts a few "
        "disturbed rounds)"
    )


def test_a_busy_host_interfered_however_close_the_rounds() -> None:
    # Every round slowed alike: only /proc tells.
    said = interference([0.8, 0.8, 0.8], [3000.0] * 3, load=BUSY)
    assert said is not None
    assert said.startswith(
        "the host interfered with the benchmark: other processes used 35% of its cores; rerun "
        "it with threads=1 (the cores other work left free), on a quieter machine"
    )
    # Threads within the cores left free: a quieter machine or more rounds.
    said = interference([0.8, 0.8, 0.8], [3000.0] * 3, load=BUSY, threads=1)
    assert said is not None and "threads=" not in said


@pytest.mark.gpu
def test_on_a_gpu_the_clock_is_read_after_the_work_finished() -> None:
    # Matrix products that take milliseconds on the GPU: a call that returned once they were
    # queued would time microseconds. CUDA's own events time the work alone.
    model = nn.Sequential(*(nn.Linear(4096, 4096) for _ in range(8))).cuda()
    server = inference_benchmark.Server(model, on("cuda:0"))
    inputs = torch.randn(512, 4096)
    server.answer(inputs)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.inference_mode():
        placed = inputs.cuda()
        start.record()
        model(placed)
        end.record()
    end.synchronize()
    work = start.elapsed_time(end) / 1000
    assert server.timed(inputs) >= 0.9 * work > 0
    assert server.answer(inputs).device.type == "cpu"
