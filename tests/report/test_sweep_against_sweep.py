"""Sweep against sweep: `python -m experiments.report A B` sets B's configurations against A's,
paired by seed, names what differs outside them (a setting each held, the environment), and
with --fail-if-worse exits 1 only where a figure is worse beyond the noise and the threshold.
Two real sweeps that differ in trainer.threads stand in for an environment change."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from experiments.core.errors import ExperimentError
from experiments.report import merged_sweeps, sweep_against_sweep
from experiments.report.command import main
from experiments.report.sweep_against_sweep import Side
from helpers import SMALL, completed_sweep


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Sweeps `one` and `two` of the same two seeds, one thread against two."""
    found = []
    for threads in (1, 2):
        cwd = tmp_path_factory.mktemp(f"threads{threads}")
        sweep = completed_sweep(cwd, "trainer.seed=0,1", *SMALL, f"trainer.threads={threads}")
        found.append(sweep.rename(cwd / ("one", "two")[threads - 1]))
    return found[0], found[1]


def files_of(folder: Path) -> dict[Path, int]:
    return {path: path.stat().st_mtime_ns for path in folder.rglob("*") if path.is_file()}


@pytest.mark.slow
def test_two_sweeps_are_compared_configuration_by_configuration(
    sweeps: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    one, two = sweeps
    before = files_of(one) | files_of(two)
    assert main([str(one), str(two)]) == 0
    console = capsys.readouterr().err.splitlines()
    assert console[0] == sweep_against_sweep.HEADING.format(first="one", second="two") + ":"
    # What the two differ in outside their configurations: the setting each held.
    assert console[1] == "  differs outside the configurations: trainer.threads 1 -> 2"
    # The speed's verdict, whatever the host made of it, is seed by seed (here, no key varies
    # within either sweep: the lines stand under the heading).
    (speed,) = (line for line in console if "train images/s" in line or " trains " in line)
    assert speed.startswith("  one ") or speed.startswith("  two trains "), speed
    assert "paired by seed, 2 pairs" in speed
    # Seed by seed, one thread and two learn the same numbers: no difference, exactly.
    assert (
        "  one vs two: no difference beyond the noise in test accuracy (+0.0 points [+0.0, "
        "+0.0], paired by seed, 2 pairs)"
    ) in console
    assert files_of(one) | files_of(two) == before  # a comparison writes nothing


def lowered(sweep: Path, into: Path, points: float, torch: str) -> Path:
    """A copy of `sweep` whose runs' test accuracy reads `points` lower, on another torch."""
    copied = shutil.copytree(sweep, into)
    for results in copied.glob("*/results.json"):
        found: dict[str, Any] = json.loads(results.read_text())
        for key in ("test_accuracy", "final_test_accuracy"):
            found[key] -= points / 100
        results.write_text(json.dumps(found))
        environment = results.parent / "environment.json"
        recorded = json.loads(environment.read_text())
        environment.write_text(json.dumps(recorded | {"torch": torch}))
    return copied


@pytest.mark.slow
def test_a_figure_worse_beyond_the_noise_and_the_threshold_fails(
    sweeps: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one, _ = sweeps
    worse = lowered(one, tmp_path / "upgraded", points=10, torch="9.9.9")
    torch = json.loads(next(one.glob("*/environment.json")).read_text())["torch"]
    assert main([str(one), str(worse), "--fail-if-worse", "speed:50%,accuracy:5"]) == 1
    console = capsys.readouterr().err
    assert f"  differs outside the configurations: torch {torch} -> 9.9.9\n" in console
    # 10 points lower in each pair: exactly, so beyond the noise, and beyond 5 points.
    assert (
        "Worse beyond the noise:\n  accuracy worse by 10 (beyond the noise, and more than 5): "
        "one - upgraded: +10.0 points of test accuracy [+10.0, +10.0] (paired by seed, 2 pairs)"
    ) in console
    # The same figures within a threshold of 11 points pass.
    assert main([str(one), str(worse), "--fail-if-worse", "accuracy:11"]) == 0
    # Better is never worse: the other way round, nothing fails.
    assert main([str(worse), str(one), "--fail-if-worse", "accuracy:0"]) == 0


@pytest.mark.slow
def test_a_folder_of_links_to_runs_is_one_report(
    sweeps: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    linked = tmp_path / "linked"
    linked.mkdir()
    for sweep in sweeps:
        for run in sweep.glob("*_trainer.seed-*"):
            (linked / f"{sweep.name}-{run.name}").symlink_to(run)
    assert main([str(linked)]) == 0
    console = capsys.readouterr().err
    assert console.startswith(f"4 run(s) in {linked}: 4 completed")
    configurations = (linked / "configurations.csv").read_text().splitlines()
    assert [line.split(",")[:2] for line in configurations[1:]] == [["1", "2"], ["2", "2"]]
    # The report is written beside the links, never through them into the runs.
    assert all(not (run / "summary.csv").exists() for run in linked.iterdir() if run.is_symlink())


def side(name: str, *runs: tuple[dict[str, str], dict[str, str]]) -> Side:
    rows = [
        {"run": f"{i}", "swept": swept, "given": given} for i, (swept, given) in enumerate(runs)
    ]
    return Side(name, Path(name), rows)


def test_sweeps_with_nothing_in_common_are_one_line() -> None:
    first = side(
        "a",
        ({"model": "lenet", "trainer.seed": "0"}, {}),
        ({"model": "mlp", "trainer.seed": "0"}, {}),
    )
    second = side(
        "b",
        ({"model": "tudui", "trainer.seed": "0"}, {}),
        ({"model": "unet", "trainer.seed": "0"}, {}),
    )
    with pytest.raises(ExperimentError) as raised:
        sweep_against_sweep.against(first, second)
    assert str(raised.value) == (
        "b and a have no configuration in common (a ran model=lenet, model=mlp; b ran "
        "model=tudui, model=unet): compare sweeps of the same keys and values"
    )


def test_a_setting_given_on_one_side_only_reads_not_given() -> None:
    first = side("a", ({}, {"trainer.threads": "2", "model": "lenet"}))
    second = side("b", ({}, {"model": "lenet"}))
    assert sweep_against_sweep.setting_differences(first, second) == [
        "trainer.threads 2 -> not given"
    ]


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("speed", "--fail-if-worse speed is not a threshold; give MEASURE:AMOUNT"),
        ("time:5%", "--fail-if-worse time:5% is not a threshold; give MEASURE:AMOUNT"),
        ("speed:5", "speed is compared as a ratio: give a share, e.g. speed:5%"),
        ("accuracy:1%", "accuracy is compared as a difference: give it in points or its units"),
    ],
)
def test_a_threshold_that_is_not_a_measure_and_a_number_is_one_line(given: str, said: str) -> None:
    with pytest.raises(ExperimentError, match=re.escape(said)):
        sweep_against_sweep.thresholds([given], ["accuracy"])
    assert sweep_against_sweep.thresholds(["speed:5%,accuracy:1.5", "mfu:10%"], ["accuracy"]) == [
        sweep_against_sweep.Threshold("speed", "train_images_per_second", 0.05, True),
        sweep_against_sweep.Threshold("accuracy", "test_accuracy", 1.5, False),
        sweep_against_sweep.Threshold("mfu", "mfu", 0.10, True),
    ]


def test_the_command_refuses_a_threshold_for_one_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(tmp_path), "--fail-if-worse", "speed:5%"]) == 1
    assert capsys.readouterr().err == (
        "Error: --fail-if-worse compares folders: give two or more, the first the one to "
        "compare against\n"
    )


@pytest.mark.slow
def test_sweeps_of_several_machines_merge_into_one_table_against_a_reference(
    sweeps: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    one, two = sweeps
    assert main([str(one), str(two), "--reference", "one:cpu"]) == 0
    heading, header, reference, other = capsys.readouterr().err.splitlines()
    assert heading == merged_sweeps.HEADING.format(reference="one:cpu") + ":"
    assert header.split() == [
        "folder",
        "device",
        "device",
        "name",
        "n",
        "train",
        "img/s",
        "vs",
        "one:cpu",
    ]
    assert reference.startswith("one  ") and reference.endswith("1 (the reference)")
    # The other machine's (here: sweep's) runs on the CPU against it, seed by seed (no key but
    # the seed varies: no other column).
    assert re.fullmatch(
        r"two +cpu +.+ +2(, \d busy)? +.+ [\d.e+-]+x \[[\d.e+-]+, [\d.e+-]+\]", other
    )
    # A device of both folders needs its folder; a device of none is named with those used.
    for given, why in (
        ("cpu", "is a device of more than one folder"),
        ("one:cuda:0", "names no folder's device"),
    ):
        assert main([str(one), str(two), "--reference", given]) == 1
        assert capsys.readouterr().err == (
            f"Error: --reference {given} {why}; give FOLDER:DEVICE, one of one:cpu, two:cpu\n"
        )
