"""A figure no run can truly have (a speed of 0 or below, an MFU of -50% or inf, an accuracy of
750%, J/image of -1, a NaN), hand-edited into a run's results.json, is left out of the report
with the run's reason naming it; the run's other figures stay, and the report is made whatever
the numbers: even when no run of a group has a speed above 0."""

from __future__ import annotations

import csv
import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from experiments.report.command import main
from helpers import SMALL, trained_run

# A copy of a real run with one figure changed, and the phrase its row's reason gives.
IMPOSSIBLE: dict[str, tuple[str, Any, str]] = {
    "stopped": (
        "train_images_per_second",
        0,
        "train_images_per_second is 0, where a number above 0",
    ),
    "backwards": (
        "train_images_per_second",
        -5.0,
        "train_images_per_second is -5, where a number above 0",
    ),
    "nan": ("train_images_per_second", math.nan, "train_images_per_second is nan, not a finite"),
    "mfu_negative": ("mfu", -0.5, "mfu is -0.5, where a number above 0% and at most 100%"),
    "mfu_infinite": ("mfu", math.inf, "mfu is inf, not a finite number"),
    "accuracy": ("test_accuracy", 7.5, "test_accuracy is 7.5, where a number from 0% to 100%"),
    "energy": (
        "train_joules_per_image",
        -1,
        "train_joules_per_image is -1, where a number above 0",
    ),
}


def _changed(run: Path, key: str, value: Any) -> None:
    results = json.loads((run / "results.json").read_text())
    assert key in results  # the figure the run recorded
    (run / "results.json").write_text(json.dumps({**results, key: value}))


def _rows(folder: Path) -> dict[str, dict[str, str]]:
    with open(folder / "summary.csv", newline="", encoding="utf-8") as file:
        return {row["run"]: row for row in csv.DictReader(file)}


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Its energy is read where the machine has a counter; else written in, as a real run's is.
    run = trained_run(tmp_path_factory.mktemp("trained"), *SMALL)
    results = json.loads((run / "results.json").read_text())
    results["train_joules_per_image"] = results.get("train_joules_per_image") or 0.5
    (run / "results.json").write_text(json.dumps(results))
    return run


def _report(
    folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> str:
    monkeypatch.chdir(folder.parent)
    capsys.readouterr()
    assert main([folder.name]) == 0
    said = capsys.readouterr().err
    assert "Traceback" not in said
    return said


@pytest.mark.slow
def test_an_impossible_figure_is_left_out_and_named_and_the_rest_of_its_run_stays(
    good: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    folder = tmp_path / "runs"
    shutil.copytree(good, folder / "good")
    for name, (key, value, _) in IMPOSSIBLE.items():
        shutil.copytree(good, folder / name)
        _changed(folder / name, key, value)
    said = _report(folder, capsys, monkeypatch)
    rows = _rows(folder)
    assert all(row["status"] == "completed" for row in rows.values())
    assert rows["good"]["reason"] == ""
    for name, (key, _, phrase) in IMPOSSIBLE.items():
        assert f"\n{name}: {phrase}" in said
        assert phrase in rows[name]["reason"]
        assert rows[name][key] == ""
        # The figures it could have stay.
        other = "test_accuracy" if key != "test_accuracy" else "train_images_per_second"
        assert rows[name][other] == rows["good"][other] != ""


@pytest.mark.slow
def test_a_group_without_a_speed_above_0_is_said_and_the_report_is_made(
    good: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    folder = tmp_path / "runs"
    for name in ("first", "second"):
        shutil.copytree(good, folder / name)
        _changed(folder / name, "train_images_per_second", 0)
    said = _report(folder, capsys, monkeypatch)
    assert said.count("train_images_per_second is 0, where a number above 0") == 2
    assert (folder / "summary.md").is_file()
