"""Repeats: completed runs of a sweep that differ only in `trainer.seed` are one configuration,
summed up as mean ± sd with the mean's 95% interval; speeds and times on the log scale."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from experiments.config.metric_names import VAL
from experiments.core.text import Unit, shared_unit
from experiments.report.headlines import HEADLINES, own_headlines
from experiments.report.statistics import Spread, log_spread, spread

Row = dict[str, Any]

SEED = "trainer.seed"
# The row's sweep folder below the report's, "" for runs of their own.
SWEEP = "sweep"


@dataclass(frozen=True)
class Measure:
    """A number of each run summed up per configuration (a speed's on the log scale)."""

    key: str
    header: str  # "{rate}": the runs' unit (img/s, rows/s)
    show: Callable[[float], str]
    log_scale: bool = False
    in_table: bool = True  # else only in configurations.csv and the device cards
    most: float | None = None  # the most a value can be (an MFU's 1): an interval is cut there

    def heading(self, unit: Unit) -> str:
        return self.header.format_map(vars(unit))

    def spread(self, values: Sequence[float]) -> Spread:
        summed = log_spread(values) if self.log_scale else spread(values)
        if self.most is None or summed.interval is None:
            return summed
        low, high = summed.interval
        return replace(summed, interval=(low, min(high, self.most)))

    def statistics(self) -> tuple[str, ...]:
        """Its columns in configurations.csv, after the measure's key."""
        centre, deviation = ("geomean", "gsd") if self.log_scale else ("mean", "sd")
        return ("n", centre, deviation, "ci_low", "ci_high")


SPEED = Measure("train_images_per_second", "train {rate}", "{:,.0f}".format, log_scale=True)
# Noise a factor, as the speed's it is proportional to.
MFU = Measure("mfu", "MFU", "{:.1%}".format, log_scale=True, most=1.0)
HOST_MEMORY = Measure("peak_host_memory_mb", "host memory", "{:,.0f} MiB".format, in_table=False)
CUDA_MEMORY = Measure("peak_cuda_memory_mb", "GPU memory", "{:,.0f} MiB".format, in_table=False)
TRAIN_ENERGY = Measure(
    "train_joules_per_image", "train J/{one}", "{:.3g} J".format, log_scale=True, in_table=False
)
MEASURES = [
    *(Measure(headline.key, headline.header, headline.metric.text) for headline in HEADLINES),
    SPEED,
    MFU,
    Measure("time_to_accuracy", "time to acc (s)", "{:.1f}".format, log_scale=True),
    HOST_MEMORY,
    CUDA_MEMORY,
    TRAIN_ENERGY,
    Measure("largest_batch", "largest batch", "{:,.0f}".format, in_table=False),
]


@dataclass(frozen=True)
class Configuration:
    """The values of the varying keys (but the seed) that its runs share."""

    values: dict[str, str]
    runs: list[Row]
    sweep: str = ""

    def measured(self, measure: Measure) -> list[Any]:
        """The runs' recorded values of `measure`: numbers, or "not reached"."""
        return [run[measure.key] for run in self.runs if run.get(measure.key) is not None]

    def numbers(self, key: str) -> list[float]:
        """The runs' finite values of `key`: not "not reached", nor a diverged run's nan."""
        values = [run.get(key) for run in self.runs]
        return [each for each in values if isinstance(each, (int, float)) and math.isfinite(each)]

    def spread(self, measure: Measure) -> Spread | None:
        numbers = [x for x in self.numbers(measure.key) if x > 0 or not measure.log_scale]
        return measure.spread(numbers) if numbers else None

    def busy(self) -> int:
        """How many of its runs other work on the host held down."""
        return sum(1 for run in self.runs if run.get("host_busy"))

    def cell(self, measure: Measure) -> str:
        """`47.0% ± 1.0% (44.5% to 49.5%)`; a speed's `1,420 (1,210 to 1,670), 2 of 3 runs`."""
        measured = self.measured(measure)
        summed = self.spread(measure)
        if summed is None:
            if not measured:
                return ""
            # "not reached" by any run, or no finite value (nan: diverged)
            return measured[0] if isinstance(measured[0], str) else measure.show(measured[0])
        text = measure.show(summed.mean)
        if summed.sd is not None and not measure.log_scale:
            text += f" ± {measure.show(summed.sd)}"
        if summed.interval is not None:
            low, high = summed.interval
            text += f" ({measure.show(low)} to {measure.show(high)})"
        if summed.n < len(self.runs):
            text += f", {summed.n} of {len(self.runs)} runs"
        return text

    def count(self) -> str:
        """`3`, or `3, 1 busy`."""
        busy = self.busy()
        return f"{len(self.runs)}, {busy} busy" if busy else str(len(self.runs))


def not_the_seed(key: str) -> bool:
    return key != SEED


def configurations(
    rows: Sequence[Row], counts: Callable[[str], bool] = not_the_seed
) -> list[Configuration]:
    """The completed runs of `rows` by sweep and their values of the varying keys that `counts`."""
    completed = [row for row in rows if row["status"] == "completed"]
    keys = {
        sweep: varying([row for row in completed if row.get(SWEEP, "") == sweep], counts)
        for sweep in dict.fromkeys(row.get(SWEEP, "") for row in completed)
    }
    runs: dict[tuple[str, tuple[tuple[str, str], ...]], list[Row]] = {}
    for row in completed:
        sweep = row.get(SWEEP, "")
        shared = tuple((key, row["swept"].get(key, "")) for key in keys[sweep])
        runs.setdefault((sweep, shared), []).append(row)
    return [Configuration(dict(shared), group, sweep) for (sweep, shared), group in runs.items()]


def varying(rows: Sequence[Row], counts: Callable[[str], bool] = not_the_seed) -> list[str]:
    """The keys that `counts` whose values differ between the rows."""
    keys = dict.fromkeys(key for row in rows for key in row["swept"] if counts(key))
    return [key for key in keys if len({row["swept"].get(key, "") for row in rows}) > 1]


def repeated(configurations: Sequence[Configuration]) -> bool:
    return any(len(configuration.runs) > 1 for configuration in configurations)


def several_sweeps(configurations: Sequence[Configuration]) -> bool:
    """Whether the configurations came from more than one sweep: each is then named with it."""
    return len({configuration.sweep for configuration in configurations}) > 1


def sweep_name(sweep: str) -> str:
    return f"sweep {sweep}" if sweep else "runs of their own"


def _measures(
    configurations: Sequence[Configuration], offered: Sequence[Measure] | None
) -> list[Measure]:
    if offered is None:
        runs = [run for configuration in configurations for run in configuration.runs]
        own = [Measure(each.key, each.header, each.metric.text) for each in own_headlines(runs)]
        offered = [*MEASURES[: len(HEADLINES)], *own, *MEASURES[len(HEADLINES) :]]
    return [
        measure
        for measure in offered
        if any(configuration.measured(measure) for configuration in configurations)
    ]


def _keys(configurations: Sequence[Configuration]) -> list[str]:
    keys = dict.fromkeys(key for configuration in configurations for key in configuration.values)
    return [SWEEP, *keys] if several_sweeps(configurations) else list(keys)


def _value(configuration: Configuration, key: str) -> str:
    return configuration.sweep if key == SWEEP else configuration.values.get(key, "")


HEADING = (
    "Configurations (runs that differ only in trainer.seed): n runs (those on a busy host), "
    "mean ± sd (95% confidence interval of the mean, Student's t); speeds and times to "
    "accuracy: geometric mean (its interval on the log scale)"
)


def cells(
    configurations: Sequence[Configuration], offered: Sequence[Measure] | None = None
) -> list[list[str]]:
    """The table of configurations, header first."""
    keys = _keys(configurations)
    measures = [measure for measure in _measures(configurations, offered) if measure.in_table]
    # Without a validation split the final test accuracy would repeat the selected one's.
    if not any(measure.key.startswith(f"{VAL}_") for measure in measures):
        measures = [measure for measure in measures if not measure.key.startswith("final_")]
    unit = shared_unit(run.get("unit") for each in configurations for run in each.runs)
    table = [[*keys, "n", *(measure.heading(unit) for measure in measures)]]
    table += [
        [
            *(_value(configuration, key) for key in keys),
            configuration.count(),
            *(configuration.cell(measure) for measure in measures),
        ]
        for configuration in configurations
    ]
    return table


def csv_text(
    configurations: Sequence[Configuration], offered: Sequence[Measure] | None = None
) -> str:
    """configurations.csv: a row per configuration, with n, mean, sd and interval per measure."""
    keys, measures = _keys(configurations), _measures(configurations, offered)
    statistics = [f"{measure.key}_{name}" for measure in measures for name in measure.statistics()]
    body = [
        [
            *(_value(configuration, key) for key in keys),
            len(configuration.runs),
            " ".join(run["run"] for run in configuration.runs),
            configuration.busy(),
            *(
                value
                for measure in measures
                for value in _statistics(configuration.spread(measure))
            ),
        ]
        for configuration in configurations
    ]
    return csv_of([[*keys, "n", "runs", "busy_runs", *statistics], *body])


def csv_of(rows: Iterable[Iterable[Any]]) -> str:
    """`rows` as CSV, the first the header."""
    table = io.StringIO()
    csv.writer(table).writerows(rows)
    return table.getvalue()


def _statistics(summed: Spread | None) -> tuple[Any, ...]:
    if summed is None:
        return (None,) * 5
    low, high = summed.interval or (None, None)
    return (summed.n, summed.mean, summed.sd, low, high)
