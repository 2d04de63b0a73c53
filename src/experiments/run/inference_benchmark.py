"""eval.py benchmark=true: latency at batch 1 and throughput, as timm and MLPerf time them."""

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
# As serving targets are stated (MLPerf's p90..p99).
PERCENTILES = (50, 95, 99)


@dataclass(frozen=True)
class Latency:
    """Seconds of single calls at batch 1."""

    seconds: list[float]

    def milliseconds(self) -> dict[str, float]:
        # Interpolated between the calls' times: p99 of 100 lies between the two slowest.
        cuts = statistics.quantiles(self.seconds, n=100, method="inclusive")
        figures = {f"latency_p{p}_ms": 1000 * cuts[p - 1] for p in PERCENTILES}
        return figures | {"latency_mean_ms": 1000 * statistics.fmean(self.seconds)}


@dataclass(frozen=True)
class Throughput:
    batch_size: int
    batches_per_round: int
    round_seconds: list[float]

    @property
    def inputs(self) -> int:
        return self.batch_size * self.batches_per_round * len(self.round_seconds)

    def figures(self) -> dict[str, float | int]:
        rates = [self.batch_size * self.batches_per_round / s for s in self.round_seconds]
        return {
            "images_per_second": statistics.median(rates),
            "images_per_second_min": min(rates),
            "images_per_second_max": max(rates),
            "rounds": len(rates),
            "batches_per_round": self.batches_per_round,
        }


class Server:
    """A model answering requests on the device, each answer back on the host when it returns."""

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

    def timed(self, inputs: torch.Tensor, calls: int = 1) -> float:
        """Seconds `calls` calls in a row took, by the host clock."""
        started = time.perf_counter()
        for _ in range(calls):
            self.answer(inputs)
        return time.perf_counter() - started


def time_latency(
    server: Server, requests: Sequence[torch.Tensor], calls: int, warmup: int
) -> Latency:
    """`calls` timed calls after `warmup` untimed ones, going round `requests` (of one image)."""
    for i in range(warmup):
        server.answer(requests[i % len(requests)])
    return Latency([server.timed(requests[i % len(requests)]) for i in range(calls)])


def time_throughput(
    server: Server, batch: torch.Tensor, rounds: int, seconds: float, energy: Span | None = None
) -> Throughput:
    """`rounds` rounds of as many calls as take `seconds` at least; `energy` spans them."""
    server.answer(batch)
    per_round = calls_per_round(server, batch, seconds)
    if energy is not None:
        energy.start()
    times = [server.timed(batch, per_round) for _ in range(rounds)]
    if energy is not None:
        energy.stop()
    return Throughput(len(batch), per_round, times)


def calls_per_round(server: Server, batch: torch.Tensor, least_seconds: float) -> int:
    """How many calls take `least_seconds`, as timeit's autorange finds them (1, 2, 5, 10, ...)."""
    for calls in (step * 10**power for power in range(10) for step in (1, 2, 5)):
        if server.timed(batch, calls) >= least_seconds:
            return calls
    return calls


def benchmark(
    cfg: DictConfig, model: nn.Module, data: ImageData, runtime: Runtime, trained_batch: int
) -> ServingRecord:
    """`model` timed answering `cfg.serving`'s calls, and the peak memory of what served."""
    asked = cfg.serving
    batch_size = asked.batch_size or trained_batch
    inputs = drawn_inputs(data, runtime, batch_size, cfg.seed)
    server = Server(model, runtime, setup.uses_cuda_graphs(cfg.compile, cfg.compile_mode))
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
    """`count` test inputs drawn by `seed`, normalized, on the host."""
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
    """ "batch 1: p50 0.84 ms, ... (100 calls); batch 256: 3,120 images/s [3,050, 3,170] ..."."""
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
    """The record's figures by the trackers' tags (`serving/latency_p50_ms`)."""
    keys = [f"latency_p{p}_ms" for p in PERCENTILES] + ["images_per_second", "peak_memory_mb"]
    keys.append("joules_per_image")
    return {f"serving/{key}": record.get(key) for key in keys}
