"""Verdicts: each swept value against another within a sweep, every other varying key held equal:
a difference only where its 95% interval excludes none, as hyperfine and criterion.rs say them."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from experiments.config.choices import Mode
from experiments.config.metric_names import TEST, TaskMetrics
from experiments.core.text import shared_unit
from experiments.report import repeats
from experiments.report.headlines import SHIPPED, own_headlines
from experiments.report.repeats import SEED, Configuration, Row
from experiments.report.statistics import Estimate, paired, welch

HEADING = (
    "Verdicts: each swept value against another within a sweep, every other varying key held "
    "equal (95% confidence intervals: seed by seed where both ran the same seeds, else Welch's t; "
    "a difference only where the interval excludes none)"
)
PAIRED, UNPAIRED = "paired by seed", "Welch's t"
# Configurations a back-to-back warning names before it counts the rest.
NAMED = 3


def _times(ratio: float) -> str:
    # `1,958` for the ends of two runs' intervals, which can span thousands.
    return f"{ratio:.2f}" if ratio < 100 else f"{ratio:,.0f}"


@dataclass(frozen=True)
class Compared:
    """A measure two configurations are compared on, and how its verdict reads."""

    key: str  # of the runs' summary rows
    name: str  # "{many}": the runs' unit (images, rows)
    scale: Callable[[float], float]  # a run's value as the comparison takes it (a log, points)
    ratio: bool  # compared on the log scale: the estimate is a ratio, no change 1
    value: Callable[[float], str]  # how the estimate reads
    bound: Callable[[float], str]  # how the interval's ends read
    verdict: str  # of {better}, {worse}, {value}, {interval} and {many} (the runs' unit)
    lower_is_better: bool = False  # an RMSE's, a time's
    timed: bool = False  # by the clock: read low where other work shared the host
    # What both sides' runs share that the verdict names after its interval: " at batch 256".
    where: Callable[[Sequence[Row]], str] = lambda runs: ""

    @property
    def no_change(self) -> float:
        return 1.0 if self.ratio else 0.0

    def estimate(self, first: Sequence[float], second: Sequence[float], by_seed: bool) -> Estimate:
        """first against second: paired (first[i] and second[i] ran one seed) or unpaired."""
        compare = paired if by_seed else welch
        found = compare([self.scale(x) for x in first], [self.scale(x) for x in second])
        return found.exp() if self.ratio else found

    def reverse(self, estimate: Estimate) -> Estimate:
        if self.ratio:
            return Estimate(1 / estimate.value, 1 / estimate.high, 1 / estimate.low)
        return Estimate(-estimate.value, -estimate.high, -estimate.low)

    def usable(self, value: Any) -> bool:
        """Finite (not a diverged run's nan), and above 0 on the log scale."""
        number = isinstance(value, (int, float)) and math.isfinite(value)
        return number and (value > 0 or not self.ratio)

    def second_better(self, estimate: Estimate) -> bool:
        return (estimate.value < self.no_change) != self.lower_is_better


def timed_ratio(key: str, name: str, verdict: str, **how: Any) -> Compared:
    """A measure taken by the clock, compared as a ratio: `4.00x [3.6, 4.4]`."""
    return Compared(key, name, math.log, True, _ratio, _times, verdict, timed=True, **how)


def _ratio(value: float) -> str:
    return _times(value) + "x"


SPEED = timed_ratio(
    "train_images_per_second",
    "train {many}/s",
    "{better} trains {value} {interval} as fast as {worse}",
)


def _headline(measures: TaskMetrics) -> Compared:
    """The test headline as a difference: in points of a percentage, or in its own units."""
    metric = measures.headline
    name = f"test {metric.name}"
    if metric.percent:
        scale, value, bound = (lambda x: 100 * x), "{:+.1f} points".format, "{:+.1f}".format
    else:
        scale, value, bound = float, "{:+.4g}".format, "{:+.4g}".format
    verdict = "{better} - {worse}: {value} of " + name + " {interval}"
    lower = metric.better == Mode.min
    return Compared(
        metric.key(TEST), name, scale, False, value, bound, verdict, lower_is_better=lower
    )


# Which side makes the better use of its hardware: across devices, a verdict of its own.
MFU = timed_ratio(
    "mfu", "MFU", "{better} uses {value} {interval} the share of its peak that {worse} uses"
)

COMPARED = (SPEED, MFU, *(_headline(measures) for measures in SHIPPED))


def compared_on(pair: Pair) -> list[Compared]:
    """Speed, MFU where it is not the speed's verdict again, and the runs' tasks' headlines."""
    runs = [*pair.first.runs, *pair.second.runs]
    own = {headline.metric for headline in own_headlines(runs) if not headline.final}
    compared = [*COMPARED, *(_headline(TaskMetrics((metric,))) for metric in own)]
    return compared if _mfu_differs_from_speed(runs) else [c for c in compared if c is not MFU]


def _mfu_differs_from_speed(runs: Sequence[Row]) -> bool:
    # Whether the runs' MFU is not their speed times one factor.
    bounds = {
        (run["model_training_flops_per_image"], run["device_peak_flops"], run.get("gpus"))
        for run in runs
        if run.get("mfu") is not None
    }
    return len(bounds) > 1


@dataclass(frozen=True)
class VerdictRules:
    """How a kind of sweep's configurations are judged."""

    seed: str
    compared_on: Callable[[Pair], list[Compared]]
    named_alone: Callable[[str], bool]

    def counts(self, key: str) -> bool:
        """Whether `key` tells configurations apart."""
        return key != self.seed

    @property
    def repeat(self) -> str:
        return f"repeat with `-m {self.seed}=0,1,2`"


# A training sweep's: a group's choice names itself (`cuda:0`, `adam`), a key with a dot does not.
TRAINING_RULES = VerdictRules(SEED, compared_on, lambda key: "." not in key)


@dataclass(frozen=True)
class Verdict:
    """One verdict, as verdicts.json holds it (the better side first where they differ)."""

    sweep: str
    key: str
    held: dict[str, str]
    measure: str
    first: str
    second: str
    method: str  # PAIRED or UNPAIRED
    runs: list[int]  # of each side; for PAIRED, the pairs' count twice
    estimate: float
    low: float
    high: float
    differs: bool
    busy_runs: list[int] | None  # of each side, of a speed's verdict
    text: str


def _by_seed(configuration: Configuration, measure: Compared, seed: str) -> dict[str, float] | None:
    # None where a run's seed is not known or more than one ran a seed.
    seeds = [run["swept"].get(seed) for run in configuration.runs]
    if None in seeds or len(set(seeds)) < len(seeds):
        return None
    return {
        seed: run[measure.key]
        for seed, run in zip(seeds, configuration.runs, strict=True)
        if measure.usable(run.get(measure.key))
    }


@dataclass(frozen=True)
class Pair:
    """Two configurations of a sweep that differ in `key` alone, the other varying keys `held`."""

    key: str
    first: Configuration
    second: Configuration
    held: dict[str, str]
    rules: VerdictRules = TRAINING_RULES

    def name(self, configuration: Configuration) -> str:
        """`cuda:0` (as the rules say), or `optimizer.lr=0.01`."""
        value = configuration.values[self.key]
        return value if self.rules.named_alone(self.key) else f"{self.key}={value}"

    def versus(self) -> str:
        return f"{self.name(self.first)} vs {self.name(self.second)}"

    def values(self, measure: Compared) -> tuple[list[float], list[float], bool]:
        """The two sides' values, and whether paired: where two seeds or more ran on both sides."""
        seed = self.rules.seed
        first, second = _by_seed(self.first, measure, seed), _by_seed(self.second, measure, seed)
        if first is not None and second is not None:
            seeds = [seed for seed in first if seed in second]
            if len(seeds) >= 2:
                return [first[seed] for seed in seeds], [second[seed] for seed in seeds], True
        return (
            [x for x in self.first.numbers(measure.key) if measure.usable(x)],
            [x for x in self.second.numbers(measure.key) if measure.usable(x)],
            False,
        )

    def verdict(self, measure: Compared) -> Verdict | None:
        """None where a side has fewer than two values."""
        first, second, by_seed = self.values(measure)
        if min(len(first), len(second)) < 2:
            return None
        estimate = measure.estimate(first, second, by_seed)
        better, worse = self.first, self.second
        differs = not estimate.holds(measure.no_change)
        if differs and measure.second_better(estimate):  # the better one first
            better, worse, estimate = worse, better, measure.reverse(estimate)
        value = measure.value(estimate.value)
        interval = f"[{measure.bound(estimate.low)}, {measure.bound(estimate.high)}]"
        runs_of_both = [*self.first.runs, *self.second.runs]
        unit = shared_unit(run.get("unit") for run in runs_of_both)
        where = measure.where(runs_of_both)
        name = measure.name.replace("{many}", unit.many)
        runs = [len(first)] * 2 if by_seed else [len(first), len(second)]
        how = f"{PAIRED}, {runs[0]} pairs" if by_seed else f"{UNPAIRED}, {_runs(runs)}"
        if measure.timed:
            how += self._busy(better, worse)
        sides = {"better": self.name(better), "worse": self.name(worse)}  # as `verdict` names them
        if differs:
            said = measure.verdict.format(**sides, value=value, interval=interval, many=unit.many)
            said += f"{where} ({how})"
        else:
            said = (
                f"{self.versus()}: no difference beyond the noise in {name}{where} "
                f"({value} {interval}, {how})"
            )
        return Verdict(
            sweep=self.first.sweep,
            key=self.key,
            held=self.held,
            measure=name,
            first=sides["better"],
            second=sides["worse"],
            method=PAIRED if by_seed else UNPAIRED,
            runs=runs,
            estimate=estimate.value,
            low=estimate.low,
            high=estimate.high,
            differs=differs,
            busy_runs=[better.busy(), worse.busy()] if measure.timed else None,
            text=said,
        )

    def _busy(self, first: Configuration, second: Configuration) -> str:
        """`; busy host: 3 of 3 trainer.threads=2 runs, 0 of 3 trainer.threads=1 runs`."""
        busy = [first.busy(), second.busy()]
        if not any(busy):
            return ""
        sides = ", ".join(
            f"{count} of {len(side.runs)} {self.name(side)} runs"
            for count, side in zip(busy, (first, second), strict=True)
        )
        one_sided = ", all on one side: not to be trusted for speed" if 0 in busy else ""
        return f"; busy host: {sides}{one_sided}"


def _runs(runs: list[int]) -> str:
    return f"{runs[0]} runs each" if runs[0] == runs[1] else f"{runs[0]} and {runs[1]} runs"


def pairs(
    configurations: Sequence[Configuration], rules: VerdictRules = TRAINING_RULES
) -> list[Pair]:
    """Every two configurations of one sweep that differ in one varying key alone, key by key."""
    keys = list(dict.fromkeys(key for each in configurations for key in each.values))
    found = []
    for key in keys:
        for i, first in enumerate(configurations):
            for second in configurations[i + 1 :]:
                alike = first.sweep == second.sweep and set(first.values) == set(second.values)
                differ = [k for k, value in first.values.items() if second.values.get(k) != value]
                if alike and differ == [key]:
                    held = {other: value for other, value in first.values.items() if other != key}
                    found.append(Pair(key, first, second, held, rules))
    return found


@dataclass(frozen=True)
class VerdictLines:
    """Lines with their depth below the heading, and the verdicts for verdicts.json."""

    lines: list[tuple[int, str]]
    verdicts: list[Verdict]


def verdict_lines(
    configurations: Sequence[Configuration], rules: VerdictRules = TRAINING_RULES
) -> VerdictLines:
    """A line per pair and measure, under its sweep (of several) and the keys held equal."""
    compared = pairs(configurations, rules)
    if compared and all(len(each.runs) == 1 for each in configurations):
        return VerdictLines([(0, f"one run each: no verdict; {rules.repeat}")], [])
    lines: list[tuple[int, str]] = []
    found: list[Verdict] = []
    several = repeats.several_sweeps(configurations)
    above: tuple[str, ...] = ()
    for pair in compared:
        headings = [repeats.sweep_name(pair.first.sweep)] if several else []
        if pair.held:
            headings.append("with " + ", ".join(f"{k}={v}" for k, v in pair.held.items()))
        for depth, heading in enumerate(headings):
            if above[: depth + 1] != tuple(headings[: depth + 1]):
                lines.append((depth, heading + ":"))
        above = tuple(headings)
        once = [pair.name(each) for each in (pair.first, pair.second) if len(each.runs) == 1]
        if once:
            alone = "one run each" if len(once) == 2 else f"one run of {once[0]}"
            lines.append((len(headings), f"{pair.versus()}: {alone}: no verdict; {rules.repeat}"))
            continue
        verdicts = [pair.verdict(measure) for measure in rules.compared_on(pair)]
        found += [verdict for verdict in verdicts if verdict is not None]
        lines += [(len(headings), v.text) for v in verdicts if v is not None]
    return VerdictLines(lines, found)


def json_text(verdicts: Sequence[Verdict]) -> str:
    """verdicts.json: a list of the verdicts' fields."""
    return json.dumps([asdict(verdict) for verdict in verdicts], indent=1, allow_nan=False) + "\n"


def back_to_back(
    rows: Sequence[Row],
    configurations: Sequence[Configuration],
    rules: VerdictRules = TRAINING_RULES,
) -> str | None:
    """A warning where repeats of a configuration ran back to back: a drift of the machine would
    pose as a difference. The order is the report's (results.json's time is too coarse)."""
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
        f"pose as a difference; run them interleaved, e.g. sweep with -m {rules.seed}=0,1,2 "
        "<the other keys> so each configuration runs once before any runs twice"
    )


def _consecutive(places: list[int]) -> list[list[int]]:
    # [0, 1, 3] -> [[0, 1], [3]]
    stretches: list[list[int]] = []
    for i in places:
        if stretches and stretches[-1][-1] == i - 1:
            stretches[-1].append(i)
        else:
            stretches.append([i])
    return stretches


def _jobs(runs: list[str]) -> str:
    # `jobs 0-2` for jobs of one sweep, else `runs <first> to <last>`.
    paths = [Path(run) for run in runs]
    numbers = [path.name.split("_")[0] for path in paths]
    if len({path.parent for path in paths}) == 1 and all(number.isdigit() for number in numbers):
        return f"jobs {numbers[0]}-{numbers[-1]}"
    return f"runs {runs[0]} to {runs[-1]}"


def verdicts_and_warning(
    rows: Sequence[Row], rules: VerdictRules = TRAINING_RULES
) -> tuple[VerdictLines, str | None]:
    """The verdicts on the rows' configurations, and the back-to-back warning."""
    compared = repeats.configurations(rows, rules.counts)
    return verdict_lines(compared, rules), back_to_back(rows, compared, rules)
