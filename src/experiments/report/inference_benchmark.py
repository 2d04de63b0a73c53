"""Evaluations in a report (eval.py), and its Serving section: the evaluations that benchmarked
(benchmark=true) by configuration, repeating on `seed`, with verdicts between them as training's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from experiments.records.recorded import ResultsFile
from experiments.report import repeats, verdicts
from experiments.report.repeats import Configuration, Measure, Row
from experiments.report.run_records import GROUPS

SEED = "seed"
# The batch the throughput was measured at (the latency's is 1).
BATCH = "serving_batch_size"
EVALUATION = "evaluation"

# results.json `serving` fields that a summary row holds, under the row's keys.
FROM_SERVING = {
    "batch_size": BATCH,
    "latency_p50_ms": "latency_p50_ms",
    "latency_p95_ms": "latency_p95_ms",
    "latency_p99_ms": "latency_p99_ms",
    "images_per_second": "serving_images_per_second",
    "peak_memory_mb": "serving_peak_memory_mb",
    "memory_of": "serving_memory_of",
    "joules_per_image": "serving_joules_per_image",
    "host_busy": "host_busy",
}


def evaluation_fields(results: ResultsFile) -> Row:
    """What an evaluation's summary row takes from its results.json."""
    recorded: dict[str, Any] = dict(results)  # (an `EvaluationRecord`)
    serving = recorded.get("serving") or {}
    return {
        "kind": EVALUATION,
        "model": recorded.get("model"),
        "dataset": recorded.get("dataset"),
        **{row_key: serving.get(key) for key, row_key in FROM_SERVING.items()},
    }


def is_evaluation(row: Row) -> bool:
    return row.get("kind") == EVALUATION


def _milliseconds(value: float) -> str:
    return f"{value:.3g}" if value < 1000 else f"{value:,.0f}"


MEASURES = [
    *(
        Measure(f"latency_{p}_ms", f"{p} ms", _milliseconds, log_scale=True)
        for p in ("p50", "p95", "p99")
    ),
    Measure("serving_images_per_second", "served {rate}", "{:,.0f}".format, log_scale=True),
    Measure("serving_peak_memory_mb", "peak memory", "{:,.0f} MiB".format),
    Measure("serving_joules_per_image", "J/{one}", "{:.3g} J".format, log_scale=True),
]


def _at_batch(runs: Sequence[Row]) -> str:
    # ` at batch 256`, where both sides' runs served at one.
    batches = {run.get(BATCH) for run in runs}
    return f" at batch {batches.pop()}" if len(batches) == 1 and None not in batches else ""


LATENCY = verdicts.timed_ratio(
    "latency_p50_ms",
    "p50 latency at batch 1",
    "{better} answers at batch 1 in {value} {interval} the time of {worse}",
    lower_is_better=True,
)
THROUGHPUT = verdicts.timed_ratio(
    "serving_images_per_second",
    "{many}/s served",
    "{better} serves {value} {interval} as many {many}/s as {worse}",
    where=_at_batch,
)
# A group's choice names a side alone (`cuda:0`), any other key with it (`precision=bf16`).
BENCHMARK_RULES = verdicts.VerdictRules(
    SEED, lambda pair: [LATENCY, THROUGHPUT], lambda key: key in GROUPS
)

HEADING = (
    "Serving (evaluations with benchmark=true that differ only in seed): n runs, latency at "
    "batch 1 and images/s at the serving batch as geometric means (their 95% interval on the "
    "log scale), peak memory (the host's on a CPU, the GPU's on a GPU) as mean ± sd (95% "
    "confidence interval of the mean), J/image where the hardware reported it"
)

VERDICTS = "Serving verdicts" + verdicts.HEADING.removeprefix("Verdicts")


@dataclass(frozen=True)
class Section:
    """The Serving section of a report: its table (header first), verdicts, back-to-back warning."""

    cells: list[list[str]]
    verdict_lines: verdicts.VerdictLines
    warning: str | None


def _served(rows: Sequence[Row]) -> list[Row]:
    return [row for row in rows if is_evaluation(row) and row.get(BATCH) is not None]


def configurations(rows: Sequence[Row]) -> list[Configuration]:
    """The completed evaluations of `rows` that benchmarked, by configuration."""
    return repeats.configurations(_served(rows), BENCHMARK_RULES.counts)


def section(rows: Sequence[Row]) -> Section | None:
    """None where no evaluation benchmarked."""
    measured = configurations(rows)
    if not measured:
        return None
    return Section(
        repeats.cells(measured, MEASURES),
        verdicts.verdict_lines(measured, BENCHMARK_RULES),
        verdicts.back_to_back(_served(rows), measured, BENCHMARK_RULES),
    )


def csv_text(rows: Sequence[Row]) -> str | None:
    """serving.csv, as configurations.csv is written; None where no evaluation benchmarked."""
    measured = configurations(rows)
    return repeats.csv_text(measured, MEASURES) if measured else None


def benchmark_verdict_lines(rows: Sequence[Row]) -> verdicts.VerdictLines:
    """The verdicts between the serving configurations (for verdicts.json)."""
    return verdicts.verdict_lines(configurations(rows), BENCHMARK_RULES)
