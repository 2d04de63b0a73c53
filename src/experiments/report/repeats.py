"""Repeats: the completed runs of a report that differ only in `trainer.seed` are runs of one
configuration, summed up in a row per configuration (configurations.csv, and in summary.md and the
console where a configuration ran more than once): how many runs (n), and the mean ± standard
deviation of each measure over them, with the 95% confidence interval of the mean.

The interval is Student's t over the runs, mean ± t(0.975, n - 1) · sd / √n: it assumes the runs
are independent and their values roughly normal. It needs scipy (the `stats` extra); without it the
table shows mean ± sd and n, and says how to get intervals. One run has neither.
"""

from __future__ import annotations

import csv
import io
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from experiments.config.metric_names import VAL
from experiments.report.headlines import HEADLINES, own_headlines

try:
    # scipy.special's quantile, which scipy.stats' `t.ppf` calls: scipy.stats takes three times
    # as long to import, 0.6 s more at the end of every sweep on a 2-core EPYC.
    from scipy.special import stdtrit
except ImportError:  # an optional extra: the report without intervals
    stdtrit = None

Row = dict[str, Any]
# Student's t quantile for a number of degrees of freedom (Welch's need not be whole).
Quantile = Callable[[float], float]

SEED = "trainer.seed"
CONFIDENCE = 0.95
GET_INTERVALS = "pip install -e '.[stats]'"


def t_quantile(degrees_of_freedom: float) -> float:
    """The two-sided 95% quantile of Student's t: 12.706 for 1 degree of freedom, 4.303 for 2."""
    return float(stdtrit(degrees_of_freedom, (1 + CONFIDENCE) / 2))


# None where scipy is not installed.
QUANTILE: Quantile | None = t_quantile if stdtrit is not None else None


@dataclass(frozen=True)
class Spread:
    """n values' mean, standard deviation (of a sample: n - 1 in its denominator) and the 95%
    confidence interval of the mean; no deviation for one value, no interval without scipy."""

    n: int
    mean: float
    sd: float | None
    interval: tuple[float, float] | None


def spread(values: Sequence[float], quantile: Quantile | None = QUANTILE) -> Spread:
    """The spread of one or more values (the interval by `quantile`; None: no interval)."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return Spread(len(values), mean, None, None)
    sd = statistics.stdev(values)
    if quantile is None:
        return Spread(len(values), mean, sd, None)
    half_width = quantile(len(values) - 1) * sd / math.sqrt(len(values))
    return Spread(len(values), mean, sd, (mean - half_width, mean + half_width))


@dataclass(frozen=True)
class Measure:
    """A number of each run (its summary row's `key`) summed up per configuration."""

    key: str
    header: str
    show: Callable[[float], str]


MEASURES = [
    # Each task's headline metric: on validation and test at the selected epoch, at the final.
    *(Measure(headline.key, headline.header, headline.text) for headline in HEADLINES),
    Measure("train_images_per_second", "train img/s", "{:,.0f}".format),
    Measure("time_to_accuracy", "time to acc (s)", "{:.1f}".format),
]


@dataclass(frozen=True)
class Configuration:
    """The values of the swept keys (but the seed) that its runs share, and the runs' rows."""

    values: dict[str, str]
    runs: list[Row]

    def measured(self, measure: Measure) -> list[Any]:
        """The runs' values of `measure`, where recorded: numbers, or "not reached" (a time to
        accuracy)."""
        return [run[measure.key] for run in self.runs if run.get(measure.key) is not None]

    def numbers(self, key: str) -> list[float]:
        """The runs' finite values of `key`: not "not reached", nor a diverged run's nan."""
        values = [run.get(key) for run in self.runs]
        return [each for each in values if isinstance(each, (int, float)) and math.isfinite(each)]

    def spread(self, measure: Measure, quantile: Quantile | None = QUANTILE) -> Spread | None:
        numbers = self.numbers(measure.key)
        return spread(numbers, quantile) if numbers else None

    def cell(self, measure: Measure, quantile: Quantile | None = QUANTILE) -> str:
        """`47.0% ± 1.0% (44.5% to 49.5%)`, with `, 2 of 3 runs` where not every run has a
        value (the others did not reach the target accuracy)."""
        measured = self.measured(measure)
        summed = self.spread(measure, quantile)
        if summed is None:
            if not measured:  # not recorded
                return ""
            # "not reached" by any run, or no finite value (nan: diverged)
            return measured[0] if isinstance(measured[0], str) else measure.show(measured[0])
        text = measure.show(summed.mean)
        if summed.sd is not None:
            text += f" ± {measure.show(summed.sd)}"
        if summed.interval is not None:
            low, high = summed.interval
            text += f" ({measure.show(low)} to {measure.show(high)})"
        if summed.n < len(self.runs):
            text += f", {summed.n} of {len(self.runs)} runs"
        return text


def not_the_seed(key: str) -> bool:
    return key != SEED


def configurations(
    rows: Sequence[Row], counts: Callable[[str], bool] = not_the_seed
) -> list[Configuration]:
    """The completed runs of a report's rows, grouped by their values of the swept keys that
    `counts` (all but the seed; the report's figures of speed, those that change speed), in the
    order of each configuration's first run."""
    runs: dict[tuple[tuple[str, str], ...], list[Row]] = {}
    for row in rows:
        if row["status"] == "completed":
            shared = tuple((key, value) for key, value in row["swept"].items() if counts(key))
            runs.setdefault(shared, []).append(row)
    return [Configuration(dict(shared), group) for shared, group in runs.items()]


def repeated(configurations: Sequence[Configuration]) -> bool:
    """Whether any configuration ran more than once."""
    return any(len(configuration.runs) > 1 for configuration in configurations)


def _measures(configurations: Sequence[Configuration]) -> list[Measure]:
    """The measures some run recorded (no validation accuracy without a validation split): a
    task of one's own's headline among them."""
    runs = [run for configuration in configurations for run in configuration.runs]
    own = [
        Measure(headline.key, headline.header, headline.text) for headline in own_headlines(runs)
    ]
    return [
        measure
        for measure in [*MEASURES[:-2], *own, *MEASURES[-2:]]
        if any(configuration.measured(measure) for configuration in configurations)
    ]


def _keys(configurations: Sequence[Configuration]) -> list[str]:
    return list(
        dict.fromkeys(key for configuration in configurations for key in configuration.values)
    )


def heading(quantile: Quantile | None = QUANTILE) -> str:
    """What the table of configurations shows, and how to get intervals where they are missing."""
    what = "Configurations (runs that differ only in trainer.seed): n runs, mean ± sd"
    if quantile is None:
        return f"{what}; for 95% confidence intervals: {GET_INTERVALS}"
    return f"{what} (95% confidence interval of the mean, Student's t)"


def cells(
    configurations: Sequence[Configuration], quantile: Quantile | None = QUANTILE
) -> list[list[str]]:
    """The table of configurations, header first: the values they differ in, n, each measure
    (but the final test accuracy where no run had a validation split: the selected epoch is then
    the final one, and the column would repeat the test accuracy's)."""
    keys, measures = _keys(configurations), _measures(configurations)
    if not any(measure.key.startswith(f"{VAL}_") for measure in measures):
        measures = [measure for measure in measures if not measure.key.startswith("final_")]
    table = [[*keys, "n", *(measure.header for measure in measures)]]
    table += [
        [
            *(configuration.values.get(key, "") for key in keys),
            str(len(configuration.runs)),
            *(configuration.cell(measure, quantile) for measure in measures),
        ]
        for configuration in configurations
    ]
    return table


# The columns of configurations.csv per measure.
STATISTICS = ("n", "mean", "sd", "ci_low", "ci_high")


def csv_text(configurations: Sequence[Configuration], quantile: Quantile | None = QUANTILE) -> str:
    """configurations.csv: a row per configuration, its values, n, its runs, and per measure
    `<key>_n`, `_mean`, `_sd`, `_ci_low`, `_ci_high` (empty where there is none)."""
    keys, measures = _keys(configurations), _measures(configurations)
    table = io.StringIO()
    writer = csv.writer(table)
    writer.writerow(
        [
            *keys,
            "n",
            "runs",
            *(f"{measure.key}_{name}" for measure in measures for name in STATISTICS),
        ]
    )
    for configuration in configurations:
        writer.writerow(
            [
                *(configuration.values.get(key, "") for key in keys),
                len(configuration.runs),
                " ".join(run["run"] for run in configuration.runs),
                *(
                    value
                    for measure in measures
                    for value in _statistics(configuration.spread(measure, quantile))
                ),
            ]
        )
    return table.getvalue()


def _statistics(summed: Spread | None) -> tuple[Any, ...]:
    """n, mean, sd and the interval's ends, as configurations.csv has them."""
    if summed is None:
        return (None,) * len(STATISTICS)
    low, high = summed.interval or (None, None)
    return (summed.n, summed.mean, summed.sd, low, high)
