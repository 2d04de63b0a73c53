"""Verdicts: each swept value against another with every other swept key held equal, as hyperfine
and criterion.rs state them, and a difference called only where its interval excludes none.

    cuda:0 trains 4.21x [4.05, 4.38] as fast as cpu, with model=lenet (5 runs each)
    tudui - lenet: +3.3 points of test accuracy [+1.1, +5.5] (3 runs each)
    to_device vs cuda_call: no difference beyond the noise in train images/s (1.02x [0.95, 1.10],
        3 runs each)
    one run each: no verdict; repeat with `-m trainer.seed=0,1,2`

Two measures, a line each per pair of configurations: train images/s as a ratio, the selected
epoch's test accuracy as a difference in points (another task's headline, RMSE, as a difference
in its units, the lower one better). Both intervals are Welch's t at 95% (the
variances of the two configurations are not assumed equal): for the accuracy on the runs' values,
for the speed on their logarithms, its interval the exponential of the log-difference's, so the
ratio is one of geometric means and never reaches below 0. They assume independent runs, their
accuracies roughly normal and their speeds roughly lognormal; they need scipy (the `stats` extra).

The report also warns where repeats of a configuration ran back to back: a drift of the machine
between one configuration's runs and another's then poses as a difference between them.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from experiments.config.choices import Mode
from experiments.config.metric_names import TASK_METRICS, TEST, TaskMetrics
from experiments.report import repeats
from experiments.report.headlines import own_headlines
from experiments.report.repeats import (
    GET_INTERVALS,
    QUANTILE,
    Configuration,
    Quantile,
    Row,
)

HEADING = (
    "Verdicts: each swept value against another, every other swept key held equal "
    "(95% confidence intervals, Welch's t; a difference only where the interval excludes none)"
)
REPEAT = "repeat with `-m trainer.seed=0,1,2`"
# Configurations a back-to-back warning names before it counts the rest.
NAMED = 3


@dataclass(frozen=True)
class Estimate:
    """A difference or a ratio, and its 95% confidence interval."""

    value: float
    low: float
    high: float

    def holds(self, no_change: float) -> bool:
        """Whether the interval holds `no_change` (0 for a difference, 1 for a ratio): then the
        two are not told apart."""
        return self.low <= no_change <= self.high


def welch(first: Sequence[float], second: Sequence[float], quantile: Quantile) -> Estimate:
    """The difference of the means, first - second, with its interval by Welch's t: the
    difference ± t(0.975, df) · se, se² = s₁²/n₁ + s₂²/n₂, df by Welch-Satterthwaite. Two values or
    more a side."""
    difference = statistics.fmean(first) - statistics.fmean(second)
    shares = [statistics.variance(values) / len(values) for values in (first, second)]
    squared_error = sum(shares)
    if squared_error == 0:  # every run alike on both sides: the difference is exact
        return Estimate(difference, difference, difference)
    degrees_of_freedom = squared_error**2 / sum(
        share**2 / (len(values) - 1) for share, values in zip(shares, (first, second), strict=True)
    )
    half_width = quantile(degrees_of_freedom) * math.sqrt(squared_error)
    return Estimate(difference, difference - half_width, difference + half_width)


def ratio(first: Sequence[float], second: Sequence[float], quantile: Quantile) -> Estimate:
    """first / second as the ratio of geometric means, its interval the exponential of Welch's
    on the logarithms."""
    logs = welch([math.log(x) for x in first], [math.log(x) for x in second], quantile)
    return Estimate(math.exp(logs.value), math.exp(logs.low), math.exp(logs.high))


def _points(first: Sequence[float], second: Sequence[float], quantile: Quantile) -> Estimate:
    """The difference of two accuracies (fractions) in percentage points, by Welch's t."""
    return welch([100 * x for x in first], [100 * x for x in second], quantile)


def _times(ratio: float) -> str:
    """`4.21`; `1,958` for the ends of two runs' intervals, which can span thousands."""
    return f"{ratio:.2f}" if ratio < 100 else f"{ratio:,.0f}"


@dataclass(frozen=True)
class Compared:
    """A measure two configurations are compared on, and how its verdict reads."""

    key: str  # of the runs' summary rows
    name: str
    estimate: Callable[[Sequence[float], Sequence[float], Quantile], Estimate]
    no_change: float
    reverse: Callable[[float], float]  # first against second -> second against first
    value: Callable[[float], str]  # how the estimate reads
    bound: Callable[[float], str]  # how the interval's ends read
    verdict: str  # of {better}, {worse}, {held} (the keys held equal), {value} and {interval}
    # A difference read the other way: an RMSE's better side has the lower one.
    lower_is_better: bool = False


SPEED = Compared(
    "train_images_per_second",
    "train images/s",
    ratio,
    1.0,
    lambda value: 1 / value,
    lambda value: _times(value) + "x",
    _times,
    "{better} trains {value} {interval} as fast as {worse}{held}",
)


def _headline(measures: TaskMetrics) -> Compared:
    """The selected epoch's test number of a task's headline metric, as a difference: in points
    of a percentage (accuracy), or in its own units (RMSE)."""
    metric = measures.headline
    name = f"test {metric.name}"
    if metric.percent:
        estimate, value, bound = _points, "{:+.1f} points".format, "{:+.1f}".format
    else:
        estimate, value, bound = welch, "{:+.4g}".format, "{:+.4g}".format
    return Compared(
        metric.key(TEST),
        name,
        estimate,
        0.0,
        lambda value: -value,
        value,
        bound,
        "{better} - {worse}{held}: {value} of " + name + " {interval}",
        lower_is_better=metric.better == Mode.min,
    )


COMPARED = (SPEED, *(_headline(measures) for measures in TASK_METRICS.values()))


def compared_on(pair: Pair) -> list[Compared]:
    """Speed and the shipped tasks' headlines, and a task of one's own's that its runs ran."""
    runs = [*pair.first.runs, *pair.second.runs]
    own = {headline.metric for headline in own_headlines(runs) if not headline.final}
    return [*COMPARED, *(_headline(TaskMetrics((metric,))) for metric in own)]


@dataclass(frozen=True)
class Pair:
    """Two configurations that differ in `key` alone, and the values of the keys held equal."""

    key: str
    first: Configuration
    second: Configuration
    held: dict[str, str]

    def name(self, configuration: Configuration) -> str:
        """A group's choice names itself (`cuda:0`); any other value is named with its key
        (`optimizer.lr=0.01`)."""
        value = configuration.values[self.key]
        return value if "." not in self.key else f"{self.key}={value}"

    def with_held(self) -> str:
        """`, with model=lenet`: the keys held equal tell two verdicts on a pair apart."""
        held = ", ".join(f"{key}={value}" for key, value in self.held.items())
        return f", with {held}" if held else ""

    def versus(self) -> str:
        return f"{self.name(self.first)} vs {self.name(self.second)}{self.with_held()}"

    def runs(self) -> str:
        first, second = len(self.first.runs), len(self.second.runs)
        return f"{first} runs each" if first == second else f"{first} and {second} runs"

    def verdict(self, measure: Compared, quantile: Quantile) -> str | None:
        """The line on `measure`, or None where a side has fewer than two values of it."""
        first, second = (each.numbers(measure.key) for each in (self.first, self.second))
        if min(len(first), len(second)) < 2:
            return None
        estimate = measure.estimate(first, second, quantile)
        better, worse = self.first, self.second
        differs = not estimate.holds(measure.no_change)
        second_better = (
            measure.reverse(estimate.value) > estimate.value
        ) != measure.lower_is_better
        if differs and second_better:  # the better one first
            better, worse = worse, better
            ends = measure.reverse(estimate.high), measure.reverse(estimate.low)
            estimate = Estimate(measure.reverse(estimate.value), *ends)
        value = measure.value(estimate.value)
        interval = f"[{measure.bound(estimate.low)}, {measure.bound(estimate.high)}]"
        if not differs:
            return (
                f"{self.versus()}: no difference beyond the noise in {measure.name} "
                f"({value} {interval}, {self.runs()}{self.busy(measure)})"
            )
        said = measure.verdict.format(
            better=self.name(better),
            worse=self.name(worse),
            held=self.with_held(),
            value=value,
            interval=interval,
        )
        return f"{said} ({self.runs()}{self.busy(measure)})"

    def busy(self, measure: Compared) -> str:
        """`, 2 of 6 on a busy host`: runs whose speed other work on the machine held down
        (`devices.host_load`), which make a speed's verdict doubtful, whatever its interval."""
        if measure is not SPEED:
            return ""
        runs = [*self.first.runs, *self.second.runs]
        busy = sum(1 for run in runs if run.get("host_busy"))
        return f", {busy} of {len(runs)} on a busy host" if busy else ""


def pairs(configurations: Sequence[Configuration]) -> list[Pair]:
    """Every two configurations that differ in one swept key alone, key by key in the order the
    keys were given, then in the order of the configurations' first runs."""
    keys = list(dict.fromkeys(key for each in configurations for key in each.values))
    found = []
    for key in keys:
        others = [other for other in keys if other != key]
        for i, first in enumerate(configurations):
            for second in configurations[i + 1 :]:
                if first.values.get(key) != second.values.get(key) and all(
                    first.values.get(other) == second.values.get(other) for other in others
                ):
                    held = {other: first.values.get(other, "") for other in others}
                    found.append(Pair(key, first, second, held))
    return found


def lines(
    configurations: Sequence[Configuration], quantile: Quantile | None = QUANTILE
) -> list[str]:
    """The verdicts on a report's configurations, a line per pair and measure; one line where
    every configuration ran once, and one saying how to get them where scipy is missing."""
    compared = pairs(configurations)
    if compared and all(len(each.runs) == 1 for each in configurations):
        return [f"one run each: no verdict; {REPEAT}"]
    found, without_scipy = [], False
    for pair in compared:
        once = [pair.name(each) for each in (pair.first, pair.second) if len(each.runs) == 1]
        if once:
            alone = "one run each" if len(once) == 2 else f"one run of {once[0]}"
            found.append(f"{pair.versus()}: {alone}: no verdict; {REPEAT}")
        elif quantile is None:
            without_scipy = True
        else:
            verdicts = (pair.verdict(measure, quantile) for measure in compared_on(pair))
            found += [verdict for verdict in verdicts if verdict is not None]
    if without_scipy:
        found.append(f"for verdicts on configurations that ran more than once: {GET_INTERVALS}")
    return found


def back_to_back(rows: Sequence[Row], configurations: Sequence[Configuration]) -> str | None:
    """A warning where repeats of a configuration ran one after another while the report holds
    other configurations: a drift of the machine between them would pose as a difference.

    The order the runs ran in is the report's order of them (`summary.find_runs`): a sweep's
    jobs by number, runs of their own by their date and time folders, the same for a sweep folder
    and for all of outputs/. (results.json's start time is to the second: too coarse for runs of
    a second or two.) Runs that failed took their place in it too; jobs not run did not."""
    if len(configurations) < 2:
        return None
    ran = [row["run"] for row in rows if row["status"] != "not run"]
    place = {run: i for i, run in enumerate(ran)}
    stretches = []
    for configuration in configurations:
        places = sorted(place[run["run"]] for run in configuration.runs)
        for stretch in _consecutive(places):
            if len(stretch) > 1:
                named = " ".join(f"{key}={value}" for key, value in configuration.values.items())
                stretches.append(f"{named} ({_jobs([ran[i] for i in stretch])})")
    if not stretches:
        return None
    if len(stretches) > NAMED:
        stretches[NAMED:] = [f"{len(stretches) - NAMED} more configuration(s)"]
    listed = ", ".join(stretches[:-1]) + " and " if len(stretches) > 1 else ""
    return (
        f"Warning: repeats of {listed}{stretches[-1]} ran back to back: drift between them can "
        "pose as a difference; run them interleaved, e.g. sweep with -m trainer.seed=0,1,2 "
        "<the other keys> so each configuration runs once before any runs twice"
    )


def _consecutive(places: list[int]) -> list[list[int]]:
    """Sorted places cut into runs of consecutive ones: [0, 1, 3] -> [[0, 1], [3]]."""
    stretches: list[list[int]] = []
    for i in places:
        if stretches and stretches[-1][-1] == i - 1:
            stretches[-1].append(i)
        else:
            stretches.append([i])
    return stretches


def _jobs(runs: list[str]) -> str:
    """`jobs 0-2` for jobs of one sweep, else `runs <first> to <last>`."""
    paths = [Path(run) for run in runs]
    numbers = [path.name.split("_")[0] for path in paths]
    if len({path.parent for path in paths}) == 1 and all(number.isdigit() for number in numbers):
        return f"jobs {numbers[0]}-{numbers[-1]}"
    return f"runs {runs[0]} to {runs[-1]}"


def on(rows: Sequence[Row], quantile: Quantile | None = QUANTILE) -> tuple[list[str], str | None]:
    """The verdicts on a report's rows (on their configurations), and the warning where repeats
    ran back to back (None where they did not)."""
    compared = repeats.configurations(rows)
    return lines(compared, quantile), back_to_back(rows, compared)
