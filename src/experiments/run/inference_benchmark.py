"""The inference benchmark (eval.py benchmark=true): how fast the checkpoint's model answers on
the device and with the placement asked for, in the precision, memory format and compilation
asked for, as timm's `benchmark.py --bench inference` and MLPerf Inference time it: latency at
batch 1 and throughput at a batch; its figures for results.json's `serving` record, the console
and the trackers.

A call places host inputs on the device by the run's placement method, runs the forward pass
under `torch.inference_mode`, and copies the answers back; that copy waits for the device, so the
host clock times the work on a GPU as on the CPU. Untimed calls come first; latency is then the
distribution of single calls, throughput the median of rounds with their least and most
(docs/speed.md, Inference speed). Its inputs are test images drawn with the evaluation's `seed`
(a sweep over seeds repeats the benchmark on other images, as a sweep over trainer.seed repeats
training), normalized as training normalized them, and held on the host, where a server's
requests arrive.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from omegaconf import DictConfig
from torch import nn

from experiments.callbacks.console import energy_text
from experiments.core.text import Unit
from experiments.data.batches import Batches
from experiments.data.types import ImageData
from experiments.devices import memory
from experiments.devices.measuring import host_load
from experiments.devices.measuring.energy import EnergyMeter, Span
from experiments.devices.runtime import Runtime
from experiments.records.recorded import ServingRecord
from experiments.records.speed import host_record
from experiments.run import setup

log = logging.getLogger("experiments")

# Seconds between an energy span's readings (the rounds take seconds, not minutes).
ENERGY_INTERVAL = 0.5
# The single-image requests latency goes round (distinct images, so no cache favours one).
REQUESTS = 100


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


def time_latency(
    server: Server, requests: Sequence[torch.Tensor], calls: int, warmup: int
) -> Latency:
    """`calls` timed calls at batch 1 after `warmup` untimed ones, going round `requests` (inputs
    of one image each, on the host)."""
    for i in range(warmup):
        server.answer(requests[i % len(requests)])
    return Latency([server.timed(requests[i % len(requests)]) for i in range(calls)])


def time_throughput(
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


def benchmark(
    cfg: DictConfig, model: nn.Module, data: ImageData, runtime: Runtime, trained_batch: int
) -> ServingRecord:
    """Time `model` (placed, compiled as `cfg` asks) answering `cfg.serving`'s calls: latency at
    batch 1, throughput at `serving.batch_size` (null: `trained_batch`, its run's), the peak
    memory of the device that served."""
    asked = cfg.serving
    batch_size = asked.batch_size or trained_batch
    inputs = drawn_inputs(data, runtime, batch_size, cfg.seed)
    cuda_graphs = setup.uses_cuda_graphs(cfg.compile, cfg.compile_mode)
    server = Server(model, runtime, cuda_graphs)
    memory.reset_peak_memory(runtime.plan)
    cores, root = host_load.cores(), host_load.run_root()
    started = host_load.snapshot(root, cores)
    requests = [inputs[i : i + 1] for i in range(min(len(inputs), REQUESTS))]
    latency = time_latency(server, requests, asked.latency_calls, asked.warmup_calls)
    # Read often: the rounds last seconds, and a span too short for a counter records nothing.
    span = EnergyMeter.for_devices(runtime.plan.computes_on).measuring(interval=ENERGY_INTERVAL)
    throughput = time_throughput(server, inputs, asked.rounds, asked.round_seconds, span)
    peaks = memory.peak_memory_mb(runtime.plan)
    ended = host_load.snapshot(root, cores)
    load = None
    if started is not None and ended is not None:
        load = host_load.between(started, ended, len(cores), torch.get_num_threads())
    own_memory = not runtime.backend.is_host  # else the host's, which the process's peak counts
    return ServingRecord(
        batch_size=batch_size,
        latency_calls=asked.latency_calls,
        warmup_calls=asked.warmup_calls,
        **latency.milliseconds(),  # type: ignore[typeddict-item]
        **throughput.figures(),  # type: ignore[typeddict-item]
        peak_memory_mb=peaks["peak_cuda_memory_mb" if own_memory else "peak_host_memory_mb"],
        memory_of=str(runtime.device) if own_memory else "host",
        precision=str(cfg.precision),
        channels_last=runtime.channels_last,
        compile=cfg.compile,
        compile_mode=cfg.compile_mode,
        seed=cfg.seed,
        energy=None if span.energy is None else span.energy.energy_record(),
        energy_note=span.unavailable,
        joules_per_image=None if span.energy is None else span.energy.per_image(throughput.inputs),
        average_watts=None if span.energy is None else span.energy.watts,
        **host_record(load),
    )


def drawn_inputs(data: ImageData, runtime: Runtime, count: int, seed: int) -> torch.Tensor:
    """`count` test inputs drawn by `seed` (without replacement where the split holds that
    many), normalized and in the memory format the model computes in, on the host."""
    generator = torch.Generator().manual_seed(seed)
    size = len(data.test)
    if count <= size:
        rows = torch.randperm(size, generator=generator)[:count]
    else:
        rows = torch.randint(size, (count,), generator=generator)
    batches = Batches(
        data.test, batch_size=count, mean=data.mean, std=data.std, runtime=runtime, subset=rows
    )
    inputs, _ = next(iter(batches))
    return inputs.cpu()


def serving_line(record: ServingRecord, unit: Unit) -> str:
    """The console's line: `batch 1: p50 0.84 ms, p95 1.02 ms, p99 1.30 ms (100 calls); batch
    256: 3,120 images/s [3,050, 3,170] over 5 rounds; peak memory 410 MiB (host)`, then the
    rounds' energy (`0.012 J/image at 95 W`, or why none), and the other work on a busy host."""
    percentiles = ", ".join(
        f"p{p} {record[f'latency_p{p}_ms']:.3g} ms"  # type: ignore[literal-required]
        for p in PERCENTILES
    )
    parts = [
        f"batch 1: {percentiles} ({record['latency_calls']} calls)",
        f"batch {record['batch_size']}: {record['images_per_second']:,.0f} {unit.many}/s "
        f"[{record['images_per_second_min']:,.0f}, {record['images_per_second_max']:,.0f}] over "
        f"{record['rounds']} rounds",
    ]
    if record["peak_memory_mb"] is not None:
        parts.append(f"peak memory {record['peak_memory_mb']:,.0f} MiB ({record['memory_of']})")
    if record["joules_per_image"] is not None:
        parts.append(energy_text(record["joules_per_image"], record["average_watts"]))
    else:
        parts.append(f"energy: none ({record['energy_note']})")
    if record.get("host_busy"):
        share = record["host_other_cpu_share"] or 0.0
        parts.append(f"host busy: other processes used {share:.0%} of its cores")
    return "; ".join(parts)


def tracked_numbers(record: ServingRecord) -> dict[str, Any]:
    """The record's figures the trackers get, by their tags (`serving/latency_p50_ms`)."""
    keys = [f"latency_p{p}_ms" for p in PERCENTILES] + ["images_per_second", "peak_memory_mb"]
    keys.append("joules_per_image")
    return {f"serving/{key}": record.get(key) for key in keys}
