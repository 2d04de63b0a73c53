"""Verdicts: each swept value against another within a sweep, every other varying key held equal:
a difference only where its interval excludes none, as hyperfine and criterion.rs say them, and
the sweep's comparisons of a measure held to a 5% error together by Holm's step-down; beyond a
few configurations, a ranking whose shared letters mark those not told apart."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from experiments.config.choices import Mode
from experiments.config.metric_names import TEST, TaskMetrics
from experiments.core.text import shared_unit
from experiments.report import repeats
from experiments.report.headlines import SHIPPED, own_headlines
from experiments.report.many_comparisons import ERROR_RATE, Holm, holm, letters
from experiments.report.repeats import SEED, Configuration, Row
from experiments.report.statistics import Estimate, TTest, paired, welch

HEADING = (
    "Verdicts: each swept value against another within a sweep, every other varying key held "
    "equal (95% confidence intervals: seed by seed where both ran the same seeds, else Welch's t; "
    "widened by Holm's step-down where a sweep compares a measure more than once; a difference "
    "only where the interval excludes none)"
)
PAIRED, UNPAIRED = "paired by seed", "Welch's t"
BUSY_ADVICE = (
    "rerun on a quiet machine, or with trainer.threads at most the cores other work leaves free"
)
# Configurations a back-to-back warning names before it counts the rest.
NAMED = 3
# The most values of a key (the others held) compared pair by pair; beyond, they are ranked.
PAIRWISE = 3


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
    shown: Callable[[float], str] = "{:.4g}".format  # a configuration's mean in a ranking

    @property
    def no_change(self) -> float:
        return 1.0 if self.ratio else 0.0

    def test(self, first: Sequence[float], second: Sequence[float], by_seed: bool) -> TTest:
        """first against second: paired (first[i] and second[i] ran one seed) or unpaired."""
        compare = paired if by_seed else welch
        return compare([self.scale(x) for x in first], [self.scale(x) for x in second])

    def estimate(self, test: TTest, confidence: float) -> Estimate:
        found = test.interval(confidence)
        return found.exp() if self.ratio else found

    def centre(self, values: Sequence[float]) -> float:
        """A configuration's mean on the run's scale: a geometric one for a ratio."""
        mean = statistics.fmean(math.log(x) if self.ratio else x for x in values)
        return math.exp(mean) if self.ratio else mean

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
    shown="{:,.0f}".format,
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
        metric.key(TEST),
        name,
        scale,
        False,
        value,
        bound,
        verdict,
        lower_is_better=lower,
        shown=metric.text,
    )


# Which side makes the better use of its hardware: across devices, a verdict of its own.
MFU = timed_ratio(
    "mfu",
    "MFU",
    "{better} uses {value} {interval} the share of its peak that {worse} uses",
    shown="{:.1%}".format,
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
    compares: Callable[[str], bool] = lambda key: True  # which keys' values are set against
    ranked_beyond: int = PAIRWISE  # the most values of a key compared pair by pair

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
    measure_key: str  # of the runs' rows: train_images_per_second, test_accuracy
    first: str
    second: str
    method: str  # PAIRED or UNPAIRED
    runs: list[int]  # of each side; for PAIRED, the pairs' count twice
    estimate: float
    low: float
    high: float
    differs: bool
    busy_both_sides: bool  # a figure by the clock held down on both sides: no difference called
    confidence: float  # the interval's: 0.95, or more where Holm's step-down asked
    comparisons: int  # of the measure in the sweep: Holm's family
    p_value: float
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

    def comparison(self, measure: Compared) -> Comparison | None:
        """None where a side has fewer than two values."""
        first, second, by_seed = self.values(measure)
        if min(len(first), len(second)) < 2:
            return None
        return Comparison(
            self, measure, len(first), len(second), by_seed, measure.test(first, second, by_seed)
        )

    def busy(self, first: Configuration, second: Configuration) -> str:
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

    def busy_on_both_sides(self, measure: Compared) -> bool:
        """Whether other work held down runs of both sides on a measure by the clock: then their
        figures are what the host left over, not the setting's."""
        return measure.timed and all(side.busy() for side in (self.first, self.second))


@dataclass(frozen=True, eq=False)  # eq=False: each comparison is one, hashed as itself
class Comparison:
    """A pair's t test on one measure, before its family (the sweep's tests of that measure)
    has set the confidence its interval is drawn at."""

    pair: Pair
    measure: Compared
    first_runs: int
    second_runs: int
    by_seed: bool
    test: TTest

    def verdict(self, outcome: Holm, comparisons: int) -> Verdict:
        """As the family's step-down decided: `outcome.differs`, at `outcome.confidence`."""
        pair, measure = self.pair, self.measure
        estimate = measure.estimate(self.test, outcome.confidence)
        better, worse = pair.first, pair.second
        leftovers = pair.busy_on_both_sides(measure)
        differs = outcome.differs and not leftovers
        if differs and measure.second_better(estimate):  # the better one first
            better, worse, estimate = worse, better, measure.reverse(estimate)
        value = measure.value(estimate.value)
        interval = f"[{measure.bound(estimate.low)}, {measure.bound(estimate.high)}]"
        runs_of_both = [*pair.first.runs, *pair.second.runs]
        unit = shared_unit(run.get("unit") for run in runs_of_both)
        where = measure.where(runs_of_both)
        name = measure.name.replace("{many}", unit.many)
        runs = [self.first_runs] * 2 if self.by_seed else [self.first_runs, self.second_runs]
        how = f"{PAIRED}, {runs[0]} pairs" if self.by_seed else f"{UNPAIRED}, {_runs(runs)}"
        if comparisons > 1:
            how += f"; {_percent(outcome.confidence)} interval, Holm over {comparisons} comparisons"
        if measure.timed:
            how += pair.busy(better, worse)
        sides = {"better": pair.name(better), "worse": pair.name(worse)}  # as `verdict` names them
        if leftovers:
            said = (
                f"{pair.versus()}: no verdict on {name}{where}, busy on both sides: what other "
                f"work left over, not the setting ({value} {interval}, {how})"
            )
        elif differs:
            said = measure.verdict.format(**sides, value=value, interval=interval, many=unit.many)
            said += f"{where} ({how})"
        else:
            said = (
                f"{pair.versus()}: no difference beyond the noise in {name}{where} "
                f"({value} {interval}, {how})"
            )
        return Verdict(
            sweep=pair.first.sweep,
            key=pair.key,
            held=pair.held,
            measure=name,
            measure_key=measure.key,
            first=sides["better"],
            second=sides["worse"],
            method=PAIRED if self.by_seed else UNPAIRED,
            runs=runs,
            estimate=estimate.value,
            low=estimate.low,
            high=estimate.high,
            differs=differs,
            busy_both_sides=leftovers,
            confidence=outcome.confidence,
            comparisons=comparisons,
            p_value=self.test.p_value,
            busy_runs=[better.busy(), worse.busy()] if measure.timed else None,
            text=said,
        )


def _percent(confidence: float) -> str:
    # 95%, 98.75%, 99.667%: to the error's third digit
    error = 100 * (1 - confidence)
    decimals = max(0, 2 - math.floor(math.log10(error)))
    return f"{100 * confidence:.{decimals}f}".rstrip("0").rstrip(".") + "%"


def _runs(runs: list[int]) -> str:
    return f"{runs[0]} runs each" if runs[0] == runs[1] else f"{runs[0]} and {runs[1]} runs"


def pairs(
    configurations: Sequence[Configuration], rules: VerdictRules = TRAINING_RULES
) -> list[Pair]:
    """Every two configurations of one sweep that differ in one varying key alone, key by key."""
    keys = list(dict.fromkeys(key for each in configurations for key in each.values))
    found = []
    for key in filter(rules.compares, keys):
        for i, first in enumerate(configurations):
            for second in configurations[i + 1 :]:
                alike = first.sweep == second.sweep and set(first.values) == set(second.values)
                differ = [k for k, value in first.values.items() if second.values.get(k) != value]
                if alike and differ == [key]:
                    held = {other: value for other, value in first.values.items() if other != key}
                    found.append(Pair(key, first, second, held, rules))
    return found


@dataclass(frozen=True)
class Block:
    """The verdicts of one sweep's key with the other varying keys `held`: a line per pair and
    measure (depth 0), or beyond PAIRWISE values a ranking per measure (its rows at depth 1)."""

    sweep: str
    key: str
    held: dict[str, str]
    lines: list[tuple[int, str]]
    verdicts: list[Verdict]


@dataclass(frozen=True)
class VerdictLines:
    """Lines with their depth below the heading, the verdicts for verdicts.json, and the blocks
    the lines were made of."""

    lines: list[tuple[int, str]]
    verdicts: list[Verdict]
    blocks: list[Block]


def verdict_lines(
    configurations: Sequence[Configuration], rules: VerdictRules = TRAINING_RULES
) -> VerdictLines:
    """A block per sweep, key and values held, under its sweep (of several) and those values."""
    compared = pairs(configurations, rules)
    if compared and all(len(each.runs) == 1 for each in configurations):
        return VerdictLines([(0, f"one run each: no verdict; {rules.repeat}")], [], [])
    judged = _judged(compared, rules)
    grouped: dict[tuple[str, str, tuple[tuple[str, str], ...]], list[int]] = {}
    for i, pair in enumerate(compared):
        grouped.setdefault((pair.first.sweep, pair.key, tuple(pair.held.items())), []).append(i)
    blocks = [
        _block([compared[i] for i in places], [judged.get(i) for i in places], rules)
        for places in grouped.values()
    ]
    lines: list[tuple[int, str]] = []
    several = repeats.several_sweeps(configurations)
    above: tuple[str, ...] = ()
    for block in blocks:
        headings = [repeats.sweep_name(block.sweep)] if several else []
        if block.held:
            headings.append("with " + ", ".join(f"{k}={v}" for k, v in block.held.items()))
        for depth, heading in enumerate(headings):
            if above[: depth + 1] != tuple(headings[: depth + 1]):
                lines.append((depth, heading + ":"))
        above = tuple(headings)
        lines += [(len(headings) + depth, line) for depth, line in block.lines]
    found = [v for block in blocks for v in block.verdicts]
    if held_down := sum(verdict.busy_both_sides for verdict in found):
        lines.append((0, f"{held_down} verdict(s) busy on both sides: {BUSY_ADVICE}"))
    return VerdictLines(lines, found, blocks)


Judged = list[tuple[Compared, Verdict]]


def _judged(compared: Sequence[Pair], rules: VerdictRules) -> dict[int, Judged]:
    """The verdicts of each pair with two runs a side or more (by its place in `compared`), each
    measure's family the sweep's comparisons on it, decided together by Holm's step-down."""
    tests = {
        i: [found for measure in rules.compared_on(pair) if (found := pair.comparison(measure))]
        for i, pair in enumerate(compared)
        if min(len(pair.first.runs), len(pair.second.runs)) > 1
    }
    families: dict[tuple[str, str], list[Comparison]] = {}
    for found in tests.values():
        for each in found:
            families.setdefault((each.pair.first.sweep, each.measure.key), []).append(each)
    decided: dict[Comparison, Verdict] = {}
    for family in families.values():
        outcomes = holm([each.test.p_value for each in family], ERROR_RATE)
        for each, outcome in zip(family, outcomes, strict=True):
            decided[each] = each.verdict(outcome, len(family))
    return {i: [(each.measure, decided[each]) for each in found] for i, found in tests.items()}


def _block(pairs_of: Sequence[Pair], judged: Sequence[Judged | None], rules: VerdictRules) -> Block:
    """A line per pair and measure; beyond PAIRWISE configurations, a ranking per measure."""
    first = pairs_of[0]
    configurations = list(
        {id(side): side for pair in pairs_of for side in (pair.first, pair.second)}.values()
    )
    found = [each for of_pair in judged if of_pair for each in of_pair]
    if len(configurations) > rules.ranked_beyond:
        lines = _ranking(first, configurations, found, rules)
    else:
        lines = []
        for pair, of_pair in zip(pairs_of, judged, strict=True):
            if of_pair is None:
                once = [
                    pair.name(side) for side in (pair.first, pair.second) if len(side.runs) == 1
                ]
                alone = "one run each" if len(once) == 2 else f"one run of {once[0]}"
                lines.append((0, f"{pair.versus()}: {alone}: no verdict; {rules.repeat}"))
            lines += [(0, verdict.text) for _, verdict in of_pair or []]
    return Block(first.first.sweep, first.key, first.held, lines, [v for _, v in found])


def _ranking(
    pair: Pair, configurations: Sequence[Configuration], found: Judged, rules: VerdictRules
) -> list[tuple[int, str]]:
    """Per measure, the configurations best first, each with its letters: two that share one
    are not told apart (a compact letter display)."""
    lines: list[tuple[int, str]] = []
    once = [pair.name(each) for each in configurations if len(each.runs) == 1]
    if once:
        lines.append((0, f"one run of {', '.join(once)}: no verdict; {rules.repeat}"))
    by_measure: dict[str, Judged] = {}
    for measure, verdict in found:
        by_measure.setdefault(verdict.measure, []).append((measure, verdict))
    for name, judged in by_measure.items():
        measure, comparisons = judged[0][0], judged[0][1].comparisons
        compared = {side for _, verdict in judged for side in (verdict.first, verdict.second)}
        ranked = [each for each in configurations if pair.name(each) in compared]
        centre = {
            pair.name(each): measure.centre(
                [x for x in each.numbers(measure.key) if measure.usable(x)]
            )
            for each in ranked
        }
        ranked.sort(key=lambda each: centre[pair.name(each)], reverse=not measure.lower_is_better)
        differ = {frozenset((v.first, v.second)) for _, v in judged if v.differs}
        shown = letters([pair.name(each) for each in ranked], differ)
        width = max(len(text) for text in shown.values())
        holm_said = f"; Holm's step-down over {comparisons} comparisons" if comparisons > 1 else ""
        lines.append(
            (
                0,
                f"{pair.key} ranked by {name}, best first (a shared letter: not told apart"
                f"{holm_said}):",
            )
        )
        for each in ranked:
            named = pair.name(each)
            busy = each.busy() if measure.timed else 0
            on_busy = f" ({busy} of {len(each.runs)} runs on a busy host)" if busy else ""
            figure = measure.shown(centre[named])
            lines.append((1, f"{shown[named].ljust(width)}  {named}: {figure}{on_busy}"))
        if held_down := sum(verdict.busy_both_sides for _, verdict in judged):
            lines.append((1, f"{held_down} of its pairs busy on both sides: not told apart"))
    return lines


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
