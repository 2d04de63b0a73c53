"""MFU's peak, measured or read from the cache, changes no number of the training: the same seed
gives the same digits with a cold cache and a warm one, dropout's draws among them. A peak given
as device.peak_flops is recorded beside the measured one, its MFU too, and the report shows both."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from experiments.report.command import main as report_main
from helpers import QUICK, SMALL, assert_field_refused, metrics, results, train_cli

# A model of one's own whose dropout draws from the global generator after the run is seeded.
MY_MODELS = """
from torch import nn


class Dropping(nn.Sequential):
    def __init__(self, num_classes: int = 10) -> None:
        super().__init__(
            nn.Flatten(), nn.Linear(3 * 32 * 32, 32), nn.ReLU(), nn.Dropout(0.5),
            nn.Linear(32, num_classes),
        )
"""


@pytest.mark.slow
def test_the_same_seed_gives_the_same_digits_with_a_cold_and_a_warm_peak_cache(
    tmp_path: Path,
) -> None:
    (tmp_path / "my_models.py").write_text(MY_MODELS)
    model = ("model=custom", "model._target_=my_models.Dropping")
    cold = train_cli(tmp_path, *QUICK, *model, "trainer.measure_peak_flops=true")
    assert cold.returncode == 0, cold.stderr
    assert results(cold.run_dir)["device_peak_measured"] is True
    (tmp_path / "warm").mkdir()
    (tmp_path / "warm" / "my_models.py").write_text(MY_MODELS)
    warm = train_cli(tmp_path / "warm", *QUICK, *model)
    assert warm.returncode == 0, warm.stderr
    assert results(warm.run_dir)["device_peak_measured"] is False
    losses = [[row["train_loss"] for row in metrics(done.run_dir, "step")] for done in (cold, warm)]
    assert losses[0] == losses[1]
    tested = [[row["test_loss"] for row in metrics(done.run_dir, "epoch")] for done in (cold, warm)]
    assert tested[0] == tested[1]


@pytest.mark.slow
def test_a_given_peak_is_recorded_beside_the_measured_one_with_the_mfu_against_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Far above what any CPU trains at, whatever this machine's speed: an MFU, never a note.
    done = train_cli(tmp_path, *SMALL, "device.peak_flops=1e15")
    assert done.returncode == 0, done.stderr
    result = results(done.run_dir)
    assert (result["datasheet_peak_flops"], result["datasheet_peak_source"]) == (1e15, "given")
    assert result["datasheet_peak_of"] == "device.peak_flops"
    achieved = result["model_training_flops_per_image"] * result["train_images_per_second"]
    assert result["mfu_datasheet"] == pytest.approx(achieved / 1e15)
    assert result["mfu"] == pytest.approx(achieved / result["device_peak_flops"])  # as before
    shares = rf"MFU {result['mfu']:.1%} of its fp32 peak, {result['mfu_datasheet']:.1%} of the peak"
    assert f"({shares} given as device.peak_flops)" in done.last_line

    assert report_main([str(done.run_dir)]) == 0
    header, row = (re.split(r"\s{2,}", line) for line in capsys.readouterr().err.splitlines()[1:3])
    shown = dict(zip(header, row, strict=True))
    named = ["MFU", "datasheet FLOP/s", "datasheet of", "MFU (datasheet)"]
    assert header[header.index("MFU") :][:4] == named  # each named, side by side
    assert shown["MFU (datasheet)"] == f"{result['mfu_datasheet']:.1%}"
    assert (shown["datasheet FLOP/s"], shown["datasheet of"]) == ("1.00P", "device.peak_flops")
    with open(done.run_dir / "summary.csv", newline="") as file:
        (written,) = csv.DictReader(file)
    assert float(written["mfu_datasheet"]) == result["mfu_datasheet"]


@pytest.mark.slow
def test_a_peak_not_above_zero_is_refused_in_one_line(tmp_path: Path) -> None:
    done = train_cli(tmp_path, *SMALL, "device.peak_flops=-1")
    assert done.returncode != 0
    assert_field_refused(done.last_line.partition("Error: ")[2], "device.peak_flops", "-1.0")
    assert "Traceback" not in done.stderr
