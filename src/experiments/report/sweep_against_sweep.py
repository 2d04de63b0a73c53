"""Sweep against sweep: `python -m experiments.report A B` sets each configuration of B against
the same configuration of A (paired by seed where both ran the same seeds), names what differs
between them outside the configurations (settings held within each, the environment), and
with thresholds says which figures are worse beyond the noise, as pytest-benchmark's
--benchmark-compare-fail does for timings."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.core.errors import ExperimentError
from experiments.core.files import RECORD, UnreadableFile, as_json, read_data
from experiments.core.text import printable
from experiments.report import repeats, verdicts
from experiments.report.repeats import SEED, Configuration, Row

SIDE = "sweep"  # the key the two sides' configurations differ in
RULES = verdicts.VerdictRules(
    SEED, verdicts.compared_on, named_alone=lambda key: True, compares=lambda key: key == SIDE
)
HEADING = (
    "{second} against {first}, configuration by configuration (95% confidence intervals: seed "
    "by seed where both ran the same seeds, else Welch's t; widened by Holm's step-down over "
    "each measure's comparisons; a difference only where the interval excludes none)"
)
# What environment.json says that the figures depend on, as its keys name it.
ENVIRONMENT = (
    ("torch", ("torch",)),
    ("CUDA build", ("cuda_build",)),
    ("cuDNN", ("cudnn",)),
    ("GPU driver", ("gpu_driver",)),
    ("Python", ("python",)),
    ("host", ("host",)),
    ("platform", ("platform",)),
    ("CPU", ("cpu", "name")),
    ("cores", ("cpu", "logical_cores")),
    ("commit", ("git", "commit")),
    ("uncommitted changes", ("git", "dirty")),
)
# Changed packages named before the rest are counted.
PACKAGES = 8
# Measures a threshold can name beside the runs' test headlines (accuracy, rmse, ...).
NAMED_MEASURES = {"speed": verdicts.SPEED.key, "mfu": verdicts.MFU.key}


@dataclass(frozen=True)
class Side:
    """One folder's completed training runs, named as the comparison names it."""

    name: str
    folder: Path
    rows: list[Row]


@dataclass(frozen=True)
class Threshold:
    """`speed:5%`: worse beyond the noise by more than `amount` (a share, or points)."""

    measure: str  # as given
    key: str  # of the runs' rows
    amount: float
    share: bool  # a share of the figure (ratio measures), else in the measure's own units


def side_names(folders: Sequence[Path]) -> list[str]:
    """Each folder's own name, or its path as given where two share a name."""
    names = [folder.resolve().name or str(folder) for folder in folders]
    return [str(f) if names.count(n) > 1 else n for f, n in zip(folders, names, strict=True)]


def configurations(first: Side, second: Side) -> list[Configuration]:
    """Both sides' configurations by the keys that vary within either (the seed aside), each
    with its side's name under SIDE; a setting held within each side is no such key."""
    keys = dict.fromkeys([*repeats.varying(first.rows), *repeats.varying(second.rows)])
    found: dict[tuple[Any, ...], list[Row]] = {}
    for side in (first, second):
        for row in side.rows:
            values = tuple((key, setting(row, key)) for key in keys)
            found.setdefault((*values, (SIDE, side.name)), []).append(row)
    return [Configuration(dict(values), runs) for values, runs in found.items()]


def unmatched(configured: Sequence[Configuration], side: str) -> list[str]:
    """`side`'s configurations that the other side did not run, each as its values."""
    others = [dict(each.values) for each in configured if each.values[SIDE] != side]
    for other in others:
        other.pop(SIDE)
    names = []
    for each in configured:
        values = {key: value for key, value in each.values.items() if key != SIDE}
        if each.values[SIDE] == side and values not in others:
            names.append(", ".join(f"{key}={value}" for key, value in values.items()) or "all")
    return names


def setting_differences(first: Side, second: Side) -> list[str]:
    """`trainer.threads 1 -> 2`: a key given on the command line that each side held at one
    value, but not at the same one ("not given": its default)."""
    said = []
    runs = [*first.rows, *second.rows]
    keys = dict.fromkeys(key for row in runs for key in (*row["swept"], *row.get("given", {})))
    for key in keys:
        if key == SEED:
            continue
        values = [{setting(row, key) for row in side.rows} for side in (first, second)]
        if all(len(held) == 1 for held in values) and values[0] != values[1]:
            was, now = (next(iter(held)) for held in values)
            said.append(f"{key} {was} -> {now}")
    return said


def setting(row: Row, key: str) -> str:
    """The run's value of `key`: swept or given ("not given": its default)."""
    given = {**row.get("given", {}), **row["swept"]}
    return given.get(key, "not given")


def _environment(run: Path) -> dict[str, Any]:
    try:
        found = read_data(run / "environment.json", RECORD, as_json)
    except (UnreadableFile, FileNotFoundError):
        return {}
    return found if isinstance(found, dict) else {}


def _field(environment: dict[str, Any], path: tuple[str, ...]) -> str:
    value: Any = environment
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return "none" if value is None else printable(str(value))


def _gpus(environment: dict[str, Any]) -> str:
    gpus = environment.get("gpus")
    names = (
        [gpu.get("name") for gpu in gpus if isinstance(gpu, dict)] if isinstance(gpus, list) else []
    )
    return ", ".join(printable(str(name)) for name in names) or "none"


def environment_differences(first: Side, second: Side) -> list[str]:
    """What environment.json says differently of the two sides' runs: `torch 2.5.1 -> 2.6.0`."""
    read = [
        [_environment(side.folder / row["run"]) for row in side.rows] for side in (first, second)
    ]
    fields = [*ENVIRONMENT, ("GPUs", ())]
    said = []
    for name, path in fields:
        values = [
            list(dict.fromkeys(_field(env, path) if path else _gpus(env) for env in side))
            for side in read
        ]
        if set(values[0]) != set(values[1]):
            said.append(f"{name} {' / '.join(values[0])} -> {' / '.join(values[1])}")
    packages = [
        {
            name: version
            for env in side
            for name, version in (env.get("packages") or {}).items()
            if isinstance(env.get("packages"), dict)
        }
        for side in read
    ]
    changed = sorted(
        name
        for name in packages[0].keys() | packages[1].keys()
        if packages[0].get(name) != packages[1].get(name)
    )
    for name in changed[:PACKAGES]:
        was, now = (printable(str(side.get(name, "absent"))) for side in packages)
        said.append(f"{printable(name)} {was} -> {now}")
    if len(changed) > PACKAGES:
        said.append(f"{len(changed) - PACKAGES} more packages (their environment.json files)")
    return said


THRESHOLD = re.compile(r"(?P<measure>[\w.]+):(?P<amount>\d+(?:\.\d+)?)(?P<percent>%?)")


def thresholds(given: Sequence[str], headlines: Sequence[str]) -> list[Threshold]:
    """`speed:5%,accuracy:1` (and repeated): ExperimentError naming a bad one and what is valid."""
    valid = {**NAMED_MEASURES, **{name: f"test_{name}" for name in headlines}}
    found = []
    for each in (part for text in given for part in text.split(",") if part):
        matched = THRESHOLD.fullmatch(each.strip())
        what = (
            f"give MEASURE:AMOUNT with MEASURE one of {', '.join(valid)}: speed:5% (a share, for "
            "speed and mfu), accuracy:1 (points of a percentage, or the measure's own units)"
        )
        if matched is None or matched["measure"] not in valid:
            raise ExperimentError(f"--fail-if-worse {each} is not a threshold; {what}")
        ratio = matched["measure"] in NAMED_MEASURES
        if ratio != bool(matched["percent"]):
            raise ExperimentError(
                f"--fail-if-worse {each}: {matched['measure']} is "
                + (
                    "compared as a ratio: give a share, e.g. speed:5%"
                    if ratio
                    else "compared as a difference: give it in points or its units, e.g. accuracy:1"
                )
            )
        amount = float(matched["amount"]) / (100 if ratio else 1)
        found.append(Threshold(matched["measure"], valid[matched["measure"]], amount, ratio))
    return found


def worse_by(verdict: verdicts.Verdict, baseline: str, share: bool) -> float | None:
    """How much worse than `baseline` the other side is beyond the noise: a share of the
    figure, or a difference in its units; None where it is not worse beyond the noise."""
    if not verdict.differs or verdict.first != baseline:
        return None
    return 1 - 1 / verdict.estimate if share else abs(verdict.estimate)


def failures(
    found: Sequence[verdicts.Verdict], baseline: str, given: Sequence[Threshold]
) -> list[str]:
    """The verdicts worse than a threshold allows, each as its line; MFU, where it is the speed
    again (one peak), judged on the speed."""
    failed = []
    for threshold in given:
        key = threshold.key
        if key == verdicts.MFU.key and not any(v.measure_key == key for v in found):
            key = verdicts.SPEED.key
        for verdict in (v for v in found if v.measure_key == key):
            worse = worse_by(verdict, baseline, threshold.share)
            if worse is not None and worse > threshold.amount:
                amounts = [
                    f"{x:.1%}" if threshold.share else f"{x:.4g}" for x in (worse, threshold.amount)
                ]
                failed.append(
                    f"{threshold.measure} worse by {amounts[0]} (beyond the noise, and more than "
                    f"{amounts[1]}): {verdict.text}"
                )
    return failed


@dataclass(frozen=True)
class Against:
    """The lines of one side against the baseline, and their verdicts."""

    lines: list[str]
    verdicts: list[verdicts.Verdict]


def against(first: Side, second: Side) -> Against:
    """`second` against `first`: what differs outside the configurations, the configurations
    one side alone ran, and a verdict per configuration in both and measure."""
    configured = configurations(first, second)
    judged = verdicts.verdict_lines(configured, RULES)
    if not judged.blocks and not judged.lines:
        ran = [", ".join(unmatched(configured, side.name)) for side in (first, second)]
        raise ExperimentError(
            f"{second.name} and {first.name} have no configuration in common ({first.name} ran "
            f"{ran[0]}; {second.name} ran {ran[1]}): compare sweeps of the same keys and values"
        )
    lines = [HEADING.format(first=first.name, second=second.name) + ":"]
    outside = [*setting_differences(first, second), *environment_differences(first, second)]
    lines.append("  differs outside the configurations: " + ("; ".join(outside) or "nothing"))
    for side in (first, second):
        if alone := unmatched(configured, side.name):
            lines.append(f"  only {side.name} ran: {'; '.join(alone)}")
    lines += [f"{'  ' * (depth + 1)}{line}" for depth, line in judged.lines]
    return Against(lines, judged.verdicts)
