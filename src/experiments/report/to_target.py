"""Time, energy and cost to a run's target (trainer.target_*), as MLPerf ranks setups: per run
from its records and the prices given, per configuration a geometric mean with its interval, and
the configurations of one key ranked on each; a run that missed the target is never fast."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from experiments.report import verdicts
from experiments.report.prices import SECONDS_PER_HOUR, Prices
from experiments.report.repeats import SEED, Configuration, Measure, Row
from experiments.training.history import EpochRow
from experiments.training.time_to_accuracy import TimeToAccuracy, goal_text

TIME, ENERGY, COST = "time_to_accuracy", "energy_to_target", "cost_to_target"
EPOCHS, PRICE = "epochs_to_target", "price_per_hour"
NOT_REACHED = "not reached"


def _figure(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _seconds(value: float) -> str:
    return f"{_figure(value)} s"


def _joules(value: float) -> str:
    return f"{_figure(value)} J"


# Each configuration's, summed up on the log scale, and the same compared between configurations.
FIGURES = (
    Measure(TIME, "time", _seconds, log_scale=True, in_table=False),
    Measure(ENERGY, "energy", _joules, log_scale=True, in_table=False),
    Measure(COST, "cost", _figure, log_scale=True, in_table=False),
)
COMPARED = (
    verdicts.timed_ratio(
        TIME,
        "time to target",
        "{better} reaches the target in {value} {interval} the time {worse} takes",
        lower_is_better=True,
        shown=_seconds,
    ),
    verdicts.timed_ratio(
        ENERGY,
        "energy to target",
        "{better} reaches the target on {value} {interval} the energy {worse} uses",
        lower_is_better=True,
        shown=_joules,
    ),
    verdicts.timed_ratio(
        COST,
        "cost to target",
        "{better} reaches the target for {value} {interval} the cost of {worse}",
        lower_is_better=True,
        shown=_figure,
    ),
)


def run_fields(
    reached: TimeToAccuracy | None, history: Sequence[EpochRow], joules_per_image: float | None
) -> Row:
    """A run's epochs and joules until its target: the energy its epochs' counters measured, or
    else its J/image times the images it trained; "not reached", or nothing without a target."""
    if not reached:
        return {}
    epoch = reached["epoch"]
    if epoch is None:
        return {EPOCHS: NOT_REACHED, ENERGY: NOT_REACHED}
    until = [row for row in history if row["epoch"] <= epoch]
    joules = None
    if until and all(row.get("train_energy") for row in until):
        joules = sum(sum((row.get("train_energy") or {}).values()) for row in until)
    elif until and joules_per_image is not None:
        joules = joules_per_image * sum(row["train_images"] for row in until)
    return {EPOCHS: epoch, ENERGY: joules}


def price(rows: Sequence[Row], prices: Prices) -> None:
    """Each run's price an hour and cost to its target: its seconds, at that price, times the
    GPUs it used (one device on the CPU)."""
    for row in rows:
        per_hour = prices.of(row["device"]) if row.get("device") else None
        seconds, row[PRICE], row[COST] = row.get(TIME), per_hour, None
        if per_hour is not None and seconds is not None:
            each = per_hour / SECONDS_PER_HOUR * (row.get("gpus") or 1)
            row[COST] = seconds if isinstance(seconds, str) else seconds * each


def goal(configuration: Configuration) -> str | None:
    """`50% val accuracy`, its runs' target; None where they had none."""
    target = next((run["accuracy_target"] for run in configuration.runs if run.get(TIME)), None)
    return None if target is None else goal_text(*target)


def reached(configuration: Configuration) -> list[Row]:
    return [run for run in configuration.runs if isinstance(run.get(TIME), (int, float))]


def missed(configuration: Configuration) -> int:
    """How many of its runs never reached their target."""
    return sum(run.get(TIME) == NOT_REACHED for run in configuration.runs)


def figures(configuration: Configuration, priced: bool) -> str | None:
    """`to 50% val accuracy: time 12.3 s (11.0 s to 13.8 s), energy ..., cost ... at 2.49/h`,
    over the runs that reached it; None without a target. `priced`: some device has a price."""
    target = goal(configuration)
    if target is None:
        return None
    runs, hit = len(configuration.runs), reached(configuration)
    if not hit:
        return f"{target} not reached in {runs} run{'s' * (runs > 1)}"
    of_hit = replace(configuration, runs=hit)
    said = [f"{m.header} {of_hit.cell(m)}" for m in FIGURES if of_hit.measured(m)]
    per_hour = configuration.runs[0].get(PRICE)
    gpus = configuration.runs[0].get("gpus") or 1
    if per_hour is not None:
        said[-1] += f" at {per_hour:g}/h" + (f" for each of {gpus} GPUs" if gpus > 1 else "")
    elif priced:
        said.append(f"cost: no price for {configuration.runs[0]['device']}")
    share = f" ({len(hit)} of {runs} runs reached it)" if len(hit) < runs else ""
    return f"to {target}{share}: {', '.join(said)}"


def ranked(configurations: Sequence[Configuration], key: str) -> list[verdicts.Block]:
    """The blocks of `key`'s values ranked on each measure to the target, with Holm's step-down
    over each measure's comparisons; configurations that missed it in a run are left out."""
    rules = verdicts.VerdictRules(
        SEED,
        lambda pair: list(COMPARED) if pair.key == key else [],
        verdicts.TRAINING_RULES.named_alone,
        ranked_beyond=1,  # a ranking of two is still the question asked: which is first
    )
    every = [each for each in configurations if reached(each) and not missed(each)]
    blocks = verdicts.verdict_lines(every, rules).blocks
    return [block for block in blocks if block.key == key and block.verdicts]


def unranked(configurations: Sequence[Configuration]) -> list[tuple[Configuration, str]]:
    """Those left out of the ranking, with why: `1 of 3 runs did not reach 50% val accuracy`."""
    return [
        (each, f"{missed(each)} of {len(each.runs)} runs did not reach {goal(each)}")
        for each in configurations
        if missed(each)
    ]


def epochs(configuration: Configuration) -> tuple[float, bool] | None:
    """The mean epochs its runs took to the target, and whether they differed; None: none hit."""
    counts: list[Any] = [run[EPOCHS] for run in reached(configuration) if run.get(EPOCHS)]
    if not counts:
        return None
    return sum(counts) / len(counts), len(set(counts)) > 1
