"""The inference benchmark (eval.py benchmark=true): latency at batch 1 and throughput at a
serving batch, as timm's `benchmark.py --bench inference` and MLPerf Inference time them.

A call places host inputs on the device by the run's placement method, runs the forward pass
under `torch.inference_mode`, and copies the answers back; that copy waits for the device, so the
host clock times the work on a GPU as on the CPU. Untimed calls come first; latency is then the
distribution of single calls, throughput the median of rounds with their least and most
(docs/speed.md, Inference speed).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from experiments.devices.energy import Span
from experiments.devices.runtime import Runtime

# The percentiles of latency reported, as serving targets are stated (MLPerf's p90..p99).
PERCENTILES = (50, 95, 99)


@dataclass(frozen=True)
class Latency:
    """Seconds of single calls at batch 1, timed one by one."""

    seconds: list[float]

    def percentile(self, percent: int) -> float:
        """The `percent`th percentile, interpolated between the calls' times (of 100 calls, p99
        lies between the two slowest)."""
        cuts = statistics.quantiles(self.seconds, n=100, method="inclusive")
        return cuts[percent - 1]

    def milliseconds(self) -> dict[str, float]:
        """`latency_p50_ms`, `_p95_ms`, `_p99_ms` and `_mean_ms`, as results.json has them."""
        figures = {f"latency_p{p}_ms": 1000 * self.percentile(p) for p in PERCENTILES}
        return figures | {"latency_mean_ms": 1000 * statistics.fmean(self.seconds)}


@dataclass(frozen=True)
class Throughput:
    """Rounds of `batches_per_round` batches of `batch_size` inputs, each round's seconds."""

    batch_size: int
    batches_per_round: int
    round_seconds: list[float]

    @property
    def rates(self) -> list[float]:
        """Each round's inputs per second."""
        inputs = self.batch_size * self.batches_per_round
        return [inputs / seconds for seconds in self.round_seconds]

    @property
    def inputs(self) -> int:
        """How many inputs the rounds answered."""
        return self.batch_size * self.batches_per_round * len(self.round_seconds)

    def figures(self) -> dict[str, float | int]:
        """results.json's `images_per_second` (the median round's), `_min`, `_max`, `rounds` and
        `batches_per_round`."""
        rates = self.rates
        return {
            "images_per_second": statistics.median(rates),
            "images_per_second_min": min(rates),
            "images_per_second_max": max(rates),
            "rounds": len(rates),
            "batches_per_round": self.batches_per_round,
        }


class Server:
    """A model answering requests: `answer(inputs)` places them on the device, runs the forward
    pass, and returns once the answers are back on the host. With `cuda_graphs` each call begins
    a step of them, as the training loop does."""

    def __init__(self, model: nn.Module, runtime: Runtime, cuda_graphs: bool = False) -> None:
        self.model = model.eval()
        self.runtime = runtime
        self.cuda_graphs = cuda_graphs

    @torch.inference_mode()
    def answer(self, inputs: torch.Tensor) -> torch.Tensor:
        if self.cuda_graphs:
            torch.compiler.cudagraph_mark_step_begin()
        with self.runtime.autocast():
            outputs = self.model(self.runtime.placement.tensor(inputs))
        return outputs.cpu()  # waits for the device: the answer is there when this returns

    def timed(self, inputs: torch.Tensor) -> float:
        """Seconds one call took, by the host clock."""
        started = time.perf_counter()
        self.answer(inputs)
        return time.perf_counter() - started


def latency(server: Server, requests: Sequence[torch.Tensor], calls: int, warmup: int) -> Latency:
    """`calls` timed calls at batch 1 after `warmup` untimed ones, going round `requests` (inputs
    of one image each, on the host)."""
    for i in range(warmup):
        server.answer(requests[i % len(requests)])
    return Latency([server.timed(requests[i % len(requests)]) for i in range(calls)])


def throughput(
    server: Server,
    batch: torch.Tensor,
    rounds: int,
    least_round_seconds: float,
    energy: Span | None = None,
) -> Throughput:
    """`rounds` rounds of calls with `batch`, each of as many calls as make `least_round_seconds`
    (`calls_per_round`), after an untimed one; the `energy` span, if given, covers the rounds."""
    server.answer(batch)
    per_round = calls_per_round(server, batch, least_round_seconds)
    times = []
    if energy is not None:
        energy.start()
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(per_round):
            server.answer(batch)
        times.append(time.perf_counter() - started)
    if energy is not None:
        energy.stop()
    return Throughput(len(batch), per_round, times)


def calls_per_round(server: Server, batch: torch.Tensor, least_seconds: float) -> int:
    """How many calls with `batch` take `least_seconds` at least, found as timeit's autorange
    does (1, 2, 5, 10, ...), so one slow call cannot make every round short."""
    for calls in (step * 10**power for power in range(10) for step in (1, 2, 5)):
        started = time.perf_counter()
        for _ in range(calls):
            server.answer(batch)
        if time.perf_counter() - started >= least_seconds:
            return calls
    return calls
