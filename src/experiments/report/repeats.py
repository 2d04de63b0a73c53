"""Repeats: completed runs that differ only in `trainer.seed` are one configuration, summed up in a
row (configurations.csv; summary.md and the console where one ran more than once): n (and how many
ran on a busy host), and per measure the mean ± sd with the mean's 95% interval
(`report.statistics`). Speeds and times are summed up on the log scale, as the verdicts compare
them: a geometric mean and an interval that never reaches below 0.

Runs are grouped within their sweep unless told to pool sweeps, and a configuration is named by the
keys that vary among its sweep's completed runs.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from experiments.config.metric_names import VAL
from experiments.core.text import Unit, shared_unit
from experiments.report.headlines import HEADLINES, own_headlines
from experiments.report.statistics import Spread, log_spread, spread

Row = dict[str, Any]

SEED = "trainer.seed"
# The sweep a row came from (the sweep folder below the report's, "" for runs of their own).
SWEEP = "sweep"


@dataclass(frozen=True)
class Measure:
    """A number of each run (its summary row's `key`) summed up per configuration: on the log
    scale for a speed, whose runs differ by factors."""

    key: str
    header: str  # "{rate}": the runs' unit (img/s, rows/s)
    show: Callable[[float], str]
    log_scale: bool = False
    # A column of the configurations' table (else of configurations.csv and the device cards).
    in_table: bool = True
    # The most a value can be (an MFU's 1): an interval of the mean is cut there.
    most: float | None = None

    def heading(self, unit: Unit) -> str:
        return self.header.format_map(vars(unit))

    def spread(self, values: Sequence[float]) -> Spread:
        summed = log_spread(values) if self.log_scale else spread(values)
        if self.most is None or summed.interval is None:
            return summed
        low, high = summed.interval
        return dataclasses.replace(summed, interval=(low, min(high, self.most)))

    def statistics(self) -> tuple[str, ...]:
        """The names of its columns in configurations.csv, after the measure's key."""
        if self.log_scale:
            return ("n", "geomean", "gsd", "ci_low", "ci_high")
        return ("n", "mean", "sd", "ci_low", "ci_high")


SPEED = Measure("train_images_per_second", "train {rate}", "{:,.0f}".format, log_scale=True)
# A share of a peak, as the speed it is proportional to: its noise a factor.
MFU = Measure("mfu", "MFU", "{:.1%}".format, log_scale=True, most=1.0)
# The memory a run took at its peak, on the host and on its fullest GPU.
HOST_MEMORY = Measure("peak_host_memory_mb", "host memory", "{:,.0f} MiB".format, in_table=False)
CUDA_MEMORY = Measure("peak_cuda_memory_mb", "GPU memory", "{:,.0f} MiB".format, in_table=False)
# The energy a train image took, where the hardware reported it: positive, its noise a factor.
TRAIN_ENERGY = Measure(
    "train_joules_per_image", "train J/{one}", "{:.3g} J".format, log_scale=True, in_table=False
)
MEASURES = [
    # Each task's headline metric: on validation and test at the selected epoch, at the final.
    *(Measure(headline.key, headline.header, headline.text) for headline in HEADLINES),
    SPEED,
    MFU,
    # A time, as a speed is: positive, its noise a factor.
    Measure("time_to_accuracy", "time to acc (s)", "{:.1f}".format, log_scale=True),
    HOST_MEMORY,
    CUDA_MEMORY,
    TRAIN_ENERGY,
    # The largest batch a run's search found (trainer.batch_size=auto).
    Measure("largest_batch", "largest batch", "{:,.0f}".format, in_table=False),
]


@dataclass(frozen=True)
class Configuration:
    """The values of the varying keys (but the seed) that its runs share, the runs' rows, and the
    sweep they came from."""

    values: dict[str, str]
    runs: list[Row]
    sweep: str = ""

    def measured(self, measure: Measure) -> list[Any]:
        """The runs' values of `measure`, where recorded: numbers, or "not reached" (a time to
        accuracy)."""
        return [run[measure.key] for run in self.runs if run.get(measure.key) is not None]

    def numbers(self, key: str) -> list[float]:
        """The runs' finite values of `key`: not "not reached", nor a diverged run's nan."""
        values = [run.get(key) for run in self.runs]
        return [each for each in values if isinstance(each, (int, float)) and math.isfinite(each)]

    def spread(self, measure: Measure) -> Spread | None:
        numbers = [x for x in self.numbers(measure.key) if x > 0 or not measure.log_scale]
        return measure.spread(numbers) if numbers else None

    def busy(self) -> int:
        """How many of its runs other work on the host held down (`devices.measuring.host_load`)."""
        return sum(1 for run in self.runs if run.get("host_busy"))

    def cell(self, measure: Measure) -> str:
        """`47.0% ± 1.0% (44.5% to 49.5%)`, `1,420 (1,210 to 1,670)` for a speed (its deviation a
        factor, in configurations.csv), with `, 2 of 3 runs` where not every run has a value (the
        others did not reach the target)."""
        measured = self.measured(measure)
        summed = self.spread(measure)
        if summed is None:
            if not measured:  # not recorded
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
        """`3`, or `3, 1 busy` where other work on the host held some of its runs down."""
        busy = self.busy()
        return f"{len(self.runs)}, {busy} busy" if busy else str(len(self.runs))


def not_the_seed(key: str) -> bool:
    return key != SEED


def configurations(
    rows: Sequence[Row], counts: Callable[[str], bool] = not_the_seed
) -> list[Configuration]:
    """The completed runs of `rows`, grouped by sweep and by their values of the varying keys that
    `counts` (all but the seed; for the speed figures, those that change speed), in the order of
    each configuration's first run."""
    completed = [row for row in rows if row["status"] == "completed"]
    varying = {
        sweep: _varying([row for row in completed if row.get(SWEEP, "") == sweep], counts)
        for sweep in dict.fromkeys(row.get(SWEEP, "") for row in completed)
    }
    runs: dict[tuple[str, tuple[tuple[str, str], ...]], list[Row]] = {}
    for row in completed:
        sweep = row.get(SWEEP, "")
        shared = tuple((key, row["swept"].get(key, "")) for key in varying[sweep])
        runs.setdefault((sweep, shared), []).append(row)
    return [Configuration(dict(shared), group, sweep) for (sweep, shared), group in runs.items()]


def _varying(rows: Sequence[Row], counts: Callable[[str], bool]) -> list[str]:
    """The swept keys that `counts` whose values differ between `rows`, in the order given."""
    keys = dict.fromkeys(key for row in rows for key in row["swept"] if counts(key))
    return [key for key in keys if len({row["swept"].get(key, "") for row in rows}) > 1]


def repeated(configurations: Sequence[Configuration]) -> bool:
    """Whether any configuration ran more than once."""
    return any(len(configuration.runs) > 1 for configuration in configurations)


def several_sweeps(configurations: Sequence[Configuration]) -> bool:
    """Whether the configurations came from more than one sweep: each is then named with its."""
    return len({configuration.sweep for configuration in configurations}) > 1


def sweep_name(sweep: str) -> str:
    """How a report names the sweep folder its configurations came from."""
    return f"sweep {sweep}" if sweep else "runs of their own"


def _measures(
    configurations: Sequence[Configuration], offered: Sequence[Measure] | None
) -> list[Measure]:
    """The measures `offered` that some run recorded; by default, training's (no validation
    accuracy without a validation split), a task of one's own's headline among them."""
    if offered is None:
        runs = [run for configuration in configurations for run in configuration.runs]
        own = [
            Measure(headline.key, headline.header, headline.text)
            for headline in own_headlines(runs)
        ]
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
    """The table of configurations, header first: the values they differ in (and their sweep, of
    several), n, each measure `offered` (without the final test accuracy where no run had a
    validation split: it would repeat the selected one's)."""
    keys = _keys(configurations)
    measures = [measure for measure in _measures(configurations, offered) if measure.in_table]
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
    """configurations.csv: a row per configuration, its values, n, its runs, its busy runs, and
    per measure `offered` `<key>_n`, `_mean`, `_sd`, `_ci_low`, `_ci_high` (for a speed `_geomean`
    and `_gsd`), empty where there is none."""
    keys, measures = _keys(configurations), _measures(configurations, offered)
    table = io.StringIO()
    writer = csv.writer(table)
    writer.writerow(
        [
            *keys,
            "n",
            "runs",
            "busy_runs",
            *(f"{measure.key}_{name}" for measure in measures for name in measure.statistics()),
        ]
    )
    for configuration in configurations:
        writer.writerow(
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
        )
    return table.getvalue()


def _statistics(summed: Spread | None) -> tuple[Any, ...]:
    """n, mean, sd and the interval's ends, as configurations.csv has them."""
    if summed is None:
        return (None,) * 5
    low, high = summed.interval or (None, None)
    return (summed.n, summed.mean, summed.sd, low, high)
