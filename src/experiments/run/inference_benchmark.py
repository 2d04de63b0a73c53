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
from experiments.callbacks.speed import warn_of_threads_above_free_cores
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
# Rounds further apart than this (the slowest round's figure over the fastest's) the host
# interfered with: above a quiet host's spread, below a busy one's (docs/speed.md says why).
INTERFERED_SPREAD = 1.5


@dataclass(frozen=True)
class Latency:
    """Seconds of single calls at batch 1, in the order timed, in `rounds` rounds of them."""

    seconds: list[float]
    rounds: int = 1

    def round_p50_ms(self) -> list[float]:
        """Each round's median call, in ms (the rounds' calls differ in number by one at most)."""
        size, extra = divmod(len(self.seconds), self.rounds)
        medians, start = [], 0
        for index in range(self.rounds):
            end = start + size + (index < extra)
            medians.append(1000 * statistics.median(self.seconds[start:end]))
            start = end
        return medians

    def milliseconds(self) -> dict[str, float | list[float]]:
        # Interpolated between the calls' times: p99 of 100 lies between the two slowest.
        cuts = statistics.quantiles(self.seconds, n=100, method="inclusive")
        figures: dict[str, float | list[float]] = {
            f"latency_p{p}_ms": 1000 * cuts[p - 1] for p in PERCENTILES
        }
        rounds = self.round_p50_ms()  # the calls' p50 lies within them
        return figures | {
            "latency_mean_ms": 1000 * statistics.fmean(self.seconds),
            "latency_p50_ms_min": min(rounds),
            "latency_p50_ms_max": max(rounds),
            "round_latency_p50_ms": rounds,
        }


@dataclass(frozen=True)
class Throughput:
    batch_size: int
    batches_per_round: int
    round_seconds: list[float]

    @property
    def inputs(self) -> int:
        return self.batch_size * self.batches_per_round * len(self.round_seconds)

    def rates(self) -> list[float]:
        return [self.batch_size * self.batches_per_round / s for s in self.round_seconds]

    def figures(self) -> dict[str, float | int | list[float]]:
        rates = self.rates()
        return {
            "images_per_second": statistics.median(rates),
            "images_per_second_min": min(rates),
            "images_per_second_max": max(rates),
            "rounds": len(rates),
            "batches_per_round": self.batches_per_round,
            "round_images_per_second": rates,
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
    server: Server, requests: Sequence[torch.Tensor], calls: int, warmup: int, rounds: int
) -> Latency:
    """`calls` timed calls in `rounds` after `warmup` untimed ones, going round `requests`."""
    for i in range(warmup):
        server.answer(requests[i % len(requests)])
    seconds = [server.timed(requests[i % len(requests)]) for i in range(calls)]
    return Latency(seconds, min(rounds, calls))


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
    cfg: DictConfig,
    model: nn.Module,
    data: ImageData,
    runtime: Runtime,
    trained_batch: int,
    since: host_load.Snapshot | None,
) -> ServingRecord:
    """`model` timed answering `cfg.serving`'s calls, and the peak memory of what served; the
    threads the other work `since` (the evaluation's start) left no core for are warned of."""
    asked = cfg.serving
    batch_size = asked.batch_size or trained_batch
    inputs = drawn_inputs(data, runtime, batch_size, cfg.seed)
    server = Server(model, runtime, setup.uses_cuda_graphs(cfg.compile, cfg.compile_mode))
    cores, root, threads = host_load.cores(), host_load.run_root(), torch.get_num_threads()
    set_up = host_load.since(since, root, cores, threads)  # the evaluation's, until now
    warn_of_threads_above_free_cores("threads", cfg.threads, set_up)
    memory.reset_peak_memory(runtime.plan)
    started = host_load.snapshot(root, cores)
    requests = [inputs[i : i + 1] for i in range(min(len(inputs), REQUESTS))]
    latency = time_latency(server, requests, asked.latency_calls, asked.warmup_calls, asked.rounds)
    # Read often: the rounds last seconds, and a span too short for a counter records nothing.
    span = EnergyMeter.for_devices(runtime.plan.computes_on).measuring(interval=ENERGY_INTERVAL)
    throughput = time_throughput(server, inputs, asked.rounds, asked.round_seconds, span)
    peaks = memory.peak_memory_mb(runtime.plan)
    load = host_load.since(started, root, cores, threads)
    own_memory = not runtime.backend.is_host  # else the host's, which the process's peak counts
    note = interference(latency.round_p50_ms(), throughput.rates(), load, threads, data.unit)
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
        host_interfered=note is not None,
        host_interference=note,
    )


def interference(
    latency_p50_ms: Sequence[float],
    images_per_second: Sequence[float],
    load: host_load.HostLoad | None,
    threads: int,
    unit: Unit,
) -> str | None:
    """One line where the host interfered with the rounds (their figures further than
    `INTERFERED_SPREAD` apart, or other work on the cores enough to slow them: `load`), with
    what to do; else None."""
    shown = []
    if (apart := _spread(latency_p50_ms)) > INTERFERED_SPREAD:
        low, high = min(latency_p50_ms), max(latency_p50_ms)
        shown.append(f"its rounds' p50 latency spans {low:.3g}-{high:.3g} ms ({apart:.3g}x)")
    if (apart := _spread(images_per_second)) > INTERFERED_SPREAD:
        low, high = min(images_per_second), max(images_per_second)
        shown.append(f"their {unit.many}/s {low:,.0f}-{high:,.0f} ({apart:.3g}x)")
    if load is not None and load.busy:
        shown.append(f"other processes used {load.other_cpu_share:.0%} of its cores")
    if not shown:
        return None
    remedies = ["on a quieter machine", f"with more serving.rounds than {len(images_per_second)}"]
    if load is not None and (free := host_load.free_cores(load)) < threads:
        remedies.insert(0, f"with threads={free} (the cores other work left free)")
    return (
        f"the host interfered with the benchmark: {'; '.join(shown)}; rerun it "
        f"{', '.join(remedies[:-1])}, or {remedies[-1]} (their median outlasts a few disturbed "
        "rounds)"
    )


def _spread(figures: Sequence[float]) -> float:
    """The largest of `figures` over the least (1: one figure, or none to divide by)."""
    return max(figures) / min(figures) if len(figures) > 1 and min(figures) > 0 else 1.0


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
    """ "batch 1: p50 0.84 ms [0.82, 0.87], ... (100 calls in 5 rounds); batch 256: 3,120
    images/s [3,050, 3,170] over 5 rounds; ...": each figure with its rounds' least and most."""
    p50 = f"p50 {record['latency_p50_ms']:.3g} ms"
    p50 += f" [{record['latency_p50_ms_min']:.3g}, {record['latency_p50_ms_max']:.3g}]"
    tails = ", ".join(
        f"p{p} {record[f'latency_p{p}_ms']:.3g} ms"  # type: ignore[literal-required]
        for p in PERCENTILES[1:]
    )
    latency_rounds = len(record["round_latency_p50_ms"])
    parts = [
        f"batch 1: {p50}, {tails} ({record['latency_calls']} calls in {latency_rounds} rounds)",
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
