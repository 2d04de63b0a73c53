"""Many comparisons at once: Holm's step-down over a sweep's comparisons of a measure, each
interval drawn at its step's level, and beyond a few configurations a ranking whose shared
letters mark those not told apart (a compact letter display)."""

from __future__ import annotations

import csv
import itertools
import json
import math
import random
import re
from pathlib import Path
from typing import Any

import pytest
from scipy import stats
from test_verdicts import sweep_rows

from experiments.report import repeats, verdicts
from experiments.report.many_comparisons import holm, letters
from helpers import train_cli


def test_holm_steps_down_and_stops_at_the_first_that_holds():
    outcome = holm([0.04, 0.001, 0.03, 0.2])
    # 0.001 < 0.05/4; 0.03 >= 0.05/3 fails, so 0.04 and 0.2 hold as well, at the failed level.
    assert [o.differs for o in outcome] == [False, True, False, False]
    assert outcome[1].confidence == pytest.approx(1 - 0.05 / 4)
    assert [o.confidence for o in (outcome[0], outcome[2], outcome[3])] == [
        pytest.approx(1 - 0.05 / 3)
    ] * 3


def test_one_comparison_is_its_own_family():
    assert holm([0.049])[0].differs and holm([0.049])[0].confidence == pytest.approx(0.95)
    assert not holm([0.05])[0].differs


def test_every_p_below_its_level_differs():
    outcome = holm([0.01, 0.02, 0.012])
    assert all(o.differs for o in outcome)
    assert sorted(o.confidence for o in outcome) == pytest.approx([1 - 0.05 / k for k in (1, 2, 3)])


def test_letters_of_no_difference_and_of_every_difference():
    names = ["a", "b", "c"]
    assert letters(names, set()) == {"a": "a", "b": "a", "c": "a"}
    every = {frozenset(p) for p in itertools.combinations(names, 2)}
    assert letters(names, every) == {"a": "a", "b": "b", "c": "c"}


def test_letters_of_an_overlapping_ranking():
    # x differs from z only: x and y share one letter, y and z another.
    assert letters(["x", "y", "z"], {frozenset("xz")}) == {"x": "a", "y": "ab", "z": "b"}


@pytest.mark.parametrize("seed", range(20))
def test_two_share_a_letter_exactly_when_they_are_not_told_apart(seed):
    draw = random.Random(seed)
    names = list(range(draw.randint(2, 8)))
    differ = {frozenset(p) for p in itertools.combinations(names, 2) if draw.random() < 0.4}
    shown = letters(names, differ)
    for first, second in itertools.combinations(names, 2):
        share = bool(set(shown[first]) & set(shown[second]))
        assert share == (frozenset((first, second)) not in differ)


# A sweep of six configurations, three seeds each: speed (img/s) and accuracy per run.
NOISE = [1.00, 1.08, 0.95]


def six_configurations(fastest: float) -> list[dict[str, Any]]:
    """Runs of `trainer.threads=1..6`, the fourth `fastest` times as fast seed by seed, the
    others alike up to a few percent of noise; accuracy alike everywhere, seed by seed."""
    draw = random.Random(6)
    runs = {
        (str(threads),): [
            (
                1000.0 * noise * (fastest if threads == 4 else 1) * draw.uniform(0.97, 1.03),
                0.3 + seed / 100,
            )
            for seed, noise in enumerate(NOISE)
        ]
        for threads in range(1, 7)
    }
    return sweep_rows(runs, ["trainer.threads"])


def test_six_configurations_are_ranked_with_letters_not_thirty_lines() -> None:
    found = verdicts.verdict_lines(repeats.configurations(six_configurations(fastest=4.0)))
    # 15 pairs on each of speed and accuracy, every one in verdicts.json, decided as one family
    # per measure.
    assert len(found.verdicts) == 30
    assert {verdict.comparisons for verdict in found.verdicts} == {15}
    speed_rows = [line for depth, line in found.lines if depth == 1][:6]
    heading, *_ = (line for depth, line in found.lines if depth == 0)
    assert heading == (
        "trainer.threads ranked by train images/s, best first (a shared letter: not told apart; "
        "Holm's step-down over 15 comparisons):"
    )
    assert speed_rows[0].startswith("a  trainer.threads=4: 4,")
    assert all(re.match(r"b  trainer\.threads=[12356]: [\d,]+$", row) for row in speed_rows[1:])
    accuracy = [line for depth, line in found.lines if depth == 1][6:]
    assert [line[:3] for line in accuracy] == ["a  "] * 6 and len(found.lines) == 14


def test_a_family_decides_as_holm_and_its_intervals_agree() -> None:
    """Each verdict's interval is drawn at the level of its step, so it excludes no change
    exactly when the verdict differs; that level is Holm's, recomputed here from scipy's p."""
    for fastest in (1.0, 1.06, 4.0):
        found = verdicts.verdict_lines(repeats.configurations(six_configurations(fastest)))
        speeds = [verdict for verdict in found.verdicts if verdict.measure == "train images/s"]
        by_p = sorted(speeds, key=lambda verdict: verdict.p_value)
        failed = next((k for k, v in enumerate(by_p) if v.p_value >= 0.05 / (15 - k)), 15)
        for step, verdict in enumerate(by_p):
            assert verdict.differs == (step < failed)
            level = 0.05 / (15 - min(step, failed))
            assert verdict.confidence == pytest.approx(1 - level)
            assert verdict.differs == (not verdict.low <= 1 <= verdict.high)


def test_identical_configurations_read_no_difference_everywhere() -> None:
    found = verdicts.verdict_lines(repeats.configurations(six_configurations(fastest=1.0)))
    assert not any(verdict.differs for verdict in found.verdicts)
    assert all(line.startswith("a  ") for depth, line in found.lines if depth == 1)


@pytest.mark.slow
def test_a_real_sweep_of_six_identical_configurations(tmp_path: Path) -> None:
    """Six values of a key that changes nothing (the logging interval, beyond the run's steps),
    three seeds each: seed by seed the same numbers, so the accuracy reads no difference
    everywhere, exactly; the speed's 15 comparisons are decided as Holm's family."""
    done = train_cli(
        tmp_path,
        "-m",
        "trainer.log_interval=101,102,103,104,105,106",
        "trainer.seed=0,1,2",
        "model=lenet",
        "device=cpu",
        "trainer.epochs=1",
        "trainer.limit_train_batches=1",
        "trainer.limit_eval_images=32",
    )
    assert done.returncode == 0, done.stderr
    (verdicts_json,) = (tmp_path / "outputs").rglob("verdicts.json")
    found = json.loads(verdicts_json.read_text())
    accuracy = [verdict for verdict in found if verdict["measure"] == "test accuracy"]
    speed = [verdict for verdict in found if verdict["measure"] == "train images/s"]
    assert (len(accuracy), len(speed)) == (15, 15)
    assert not any(verdict["differs"] for verdict in accuracy)
    assert all(verdict["comparisons"] == 15 for verdict in found)
    # Each speed's p-value is scipy's paired t-test's on the log speeds, and Holm's step-down
    # over them gives each verdict and the level of its interval.
    speeds = {
        (row["trainer.log_interval"], row["trainer.seed"]): math.log(
            float(row["train_images_per_second"])
        )
        for row in csv.DictReader((verdicts_json.parent / "summary.csv").open())
    }
    for verdict in speed:
        sides = [
            verdict[side].removeprefix("trainer.log_interval=") for side in ("first", "second")
        ]
        logs = [[speeds[side, seed] for seed in "012"] for side in sides]
        assert verdict["p_value"] == pytest.approx(stats.ttest_rel(*logs).pvalue)
    outcomes = holm([verdict["p_value"] for verdict in speed])
    assert [(v["differs"], v["confidence"]) for v in speed] == [
        (o.differs, pytest.approx(o.confidence)) for o in outcomes
    ]
    # The sweep's own report ranks the six on each measure: one letter for all on accuracy.
    ranked = done.stderr.split(
        "trainer.log_interval ranked by test accuracy, best first (a shared letter: not told "
        "apart; Holm's step-down over 15 comparisons):\n"
    )[1]
    assert re.findall(r"^    (\S+)  trainer\.log_interval=10\d: ", ranked, re.M)[:6] == ["a"] * 6
