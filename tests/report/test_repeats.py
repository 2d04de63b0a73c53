"""Runs that differ only in the seed are repeats of one configuration: a row per configuration
with n, mean ± sd and the 95% confidence interval of the mean (Student's t, with scipy), and the
verdicts between configurations (their arithmetic: tests/report/test_verdicts.py)."""

from __future__ import annotations

import csv
import json
import math
import re
import shutil
import statistics
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from experiments.report import device_cards, repeats, verdicts
from experiments.report.command import main
from experiments.report.statistics import Spread, log_spread, spread, t_quantile
from helpers import completed_sweep, paired_by_scipy, train_cli

MEASURES = {measure.key: measure for measure in repeats.MEASURES}
TEST_ACCURACY, TIME_TO_ACCURACY = MEASURES["test_accuracy"], MEASURES["time_to_accuracy"]


def test_the_spread_of_one_two_three() -> None:
    summed = spread([1.0, 2.0, 3.0])
    assert (summed.n, summed.mean, summed.sd) == (3, 2.0, 1.0)
    # Student's t for 2 degrees of freedom, from a printed table: 4.303.
    half_width = 4.302653 / math.sqrt(3)
    assert summed.interval == pytest.approx((2 - half_width, 2 + half_width))
    assert t_quantile(1) == pytest.approx(12.7062047)


def test_one_run_has_no_spread() -> None:
    assert spread([0.5]) == Spread(1, 0.5, None, None)
    assert log_spread([0.5]) == Spread(1, 0.5, None, None)


def run_row(run: str, swept: dict[str, str], **values: Any) -> dict[str, Any]:
    measured = dict.fromkeys(measure.key for measure in repeats.MEASURES)
    return {"run": run, "status": "completed", "swept": swept, **measured, **values}


def test_runs_that_differ_only_in_the_seed_are_one_configuration() -> None:
    rows = [
        run_row("0", {"model": "lenet", "trainer.seed": "0"}, test_accuracy=0.2),
        run_row("1", {"model": "mlp", "trainer.seed": "0"}, test_accuracy=0.1),
        run_row("2", {"model": "lenet", "trainer.seed": "1"}, test_accuracy=0.4),
        run_row("3", {"model": "mlp", "trainer.seed": "1"}, status="failed"),
        {"run": "4", "status": "not run", "swept": {}},
    ]
    lenet, mlp = repeats.configurations(rows)
    assert (lenet.values, [run["run"] for run in lenet.runs]) == ({"model": "lenet"}, ["0", "2"])
    assert (mlp.values, [run["run"] for run in mlp.runs]) == ({"model": "mlp"}, ["1"])
    assert repeats.repeated([lenet, mlp]) and not repeats.repeated([mlp])
    low, high = lenet.spread(TEST_ACCURACY).interval
    assert lenet.cell(TEST_ACCURACY) == f"30.0% ± 14.1% ({100 * low:.1f}% to {100 * high:.1f}%)"
    assert mlp.cell(TEST_ACCURACY) == "10.0%"  # n=1: no spread, no interval
    lenet.runs[1]["host_busy"] = True
    assert repeats.cells([lenet, mlp]) == [
        ["model", "n", "test acc"],
        ["lenet", "2, 1 busy", lenet.cell(TEST_ACCURACY)],
        ["mlp", "1", "10.0%"],
    ]


def test_speeds_are_summed_up_on_the_log_scale_and_never_reach_below_0() -> None:
    """Two runs far apart: on their own scale the interval would run to -19,000 img/s."""
    rows = [
        run_row(str(seed), {"trainer.seed": str(seed)}, train_images_per_second=speed)
        for seed, speed in enumerate([400.0, 1600.0])
    ]
    (configuration,) = repeats.configurations(rows)
    summed = configuration.spread(repeats.SPEED)
    assert summed.mean == pytest.approx(800.0)  # the geometric mean
    assert summed.sd == pytest.approx(math.exp(math.log(4) / math.sqrt(2)))  # a factor
    half_width = 12.7062047 * (math.log(4) / math.sqrt(2)) / math.sqrt(2)
    low, high = summed.interval
    assert (low, high) == pytest.approx((800 / math.exp(half_width), 800 * math.exp(half_width)))
    assert 0 < low < 400 < 1600 < high
    assert configuration.cell(repeats.SPEED) == f"800 ({low:,.0f} to {high:,.0f})"
    header, values = list(csv.reader(repeats.csv_text([configuration]).splitlines()))
    speed = dict(zip(header, values, strict=True))
    assert float(speed["train_images_per_second_geomean"]) == pytest.approx(800.0)
    assert float(speed["train_images_per_second_ci_low"]) == pytest.approx(low)


def test_the_final_test_accuracy_is_its_own_column_only_beside_a_validation_split() -> None:
    def configuration(**values: float) -> list[repeats.Configuration]:
        return repeats.configurations([run_row("0", {}, **values)])

    final = {"test_accuracy": 0.3, "final_test_accuracy": 0.2}
    assert repeats.cells(configuration(**final))[0] == ["n", "test acc"]
    assert repeats.cells(configuration(val_accuracy=0.4, **final))[0] == [
        "n",
        "val acc",
        "test acc",
        "final test acc",
    ]


def test_a_time_to_accuracy_not_reached_by_every_run_says_how_many() -> None:
    reached = [
        run_row(str(seed), {"trainer.seed": str(seed)}, time_to_accuracy=seconds)
        for seed, seconds in enumerate([10.0, 14.0, "not reached"])
    ]
    (configuration,) = repeats.configurations(reached)
    # A time is summed up as a speed is, on the log scale: √(10 · 14) = 11.8.
    assert configuration.cell(TIME_TO_ACCURACY).startswith("11.8 (")
    assert configuration.cell(TIME_TO_ACCURACY).endswith("), 2 of 3 runs")
    never = [run_row("0", {}, time_to_accuracy="not reached")]
    assert repeats.configurations(never)[0].cell(TIME_TO_ACCURACY) == "not reached"


def test_a_diverged_runs_nan_is_left_out_of_its_configurations_numbers() -> None:
    """A run trained on past divergence (trainer.stop_on_divergence=false) records nan."""
    runs = [
        run_row(str(seed), {"trainer.seed": str(seed)}, test_accuracy=accuracy)
        for seed, accuracy in enumerate([0.25, math.nan, 0.75, math.inf])
    ]
    (configuration,) = repeats.configurations(runs)
    assert configuration.cell(TEST_ACCURACY).startswith("50.0% ± 35.4% (")
    assert configuration.cell(TEST_ACCURACY).endswith("%), 2 of 4 runs")
    diverged = repeats.configurations([run_row("0", {}, test_accuracy=math.nan)])
    assert diverged[0].cell(TEST_ACCURACY) == "nan%"


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The two placements on the CPU, each trained with two seeds: two configurations of two runs
    each, and verdicts between them. Both placements do the same work: each seed's two runs
    learn the same numbers, a difference that is none."""
    return completed_sweep(
        tmp_path_factory.mktemp("repeats"),
        "placement=to_device,cuda_call",
        "trainer.seed=0,1",  # swept first all the same: test_each_placement_ran_once_before_twice
        "model=lenet",
        "device=cpu",
        "trainer.epochs=1",
        "trainer.limit_train_batches=2",
        "trainer.limit_eval_images=64",
    )


@pytest.mark.slow
def test_each_placement_ran_once_before_twice(sweep: Path) -> None:
    jobs = sorted(
        (path for path in sweep.iterdir() if (path / ".hydra").is_dir()),
        key=lambda path: int(path.name.split("_")[0]),
    )
    swept = [OmegaConf.load(job / ".hydra" / "overrides.yaml") for job in jobs]
    assert [
        sorted(
            override
            for override in overrides
            if override.startswith(("placement=", "trainer.seed="))
        )
        for overrides in swept
    ] == [
        ["placement=to_device", "trainer.seed=0"],
        ["placement=cuda_call", "trainer.seed=0"],
        ["placement=to_device", "trainer.seed=1"],
        ["placement=cuda_call", "trainer.seed=1"],
    ]


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as file:
        return list(csv.DictReader(file))


def test_the_report_command_has_a_row_per_configuration(
    sweep: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(sweep)]) == 0
    console = capsys.readouterr().err
    runs = read_csv(sweep / "summary.csv")
    assert len(runs) == 4  # still a row per run
    configurations = read_csv(sweep / "configurations.csv")
    assert [(row["placement"], row["n"]) for row in configurations] == [
        ("to_device", "2"),
        ("cuda_call", "2"),
    ]
    assert "trainer.seed" not in configurations[0]
    for configuration in configurations:
        mine = [run for run in runs if run["placement"] == configuration["placement"]]
        assert configuration["runs"] == " ".join(run["run"] for run in mine)
        assert {run["trainer.seed"] for run in mine} == {"0", "1"}
        busy = sum(run.get("host_busy") == "True" for run in mine)
        assert int(configuration["busy_runs"]) == busy
        # The accuracy on its own scale, the speed and MFU on the log scale (geometric means).
        for key, scale, back, mean_name, sd_name in (
            ("test_accuracy", float, float, "mean", "sd"),
            ("train_images_per_second", math.log, math.exp, "geomean", "gsd"),
            ("mfu", math.log, math.exp, "geomean", "gsd"),
        ):
            values = [scale(float(run[key])) for run in mine]
            mean, sd = statistics.fmean(values), statistics.stdev(values)
            half_width = 12.7062047 * sd / math.sqrt(2)  # Student's t, 1 degree of freedom
            assert float(configuration[f"{key}_n"]) == 2
            assert float(configuration[f"{key}_{mean_name}"]) == pytest.approx(back(mean))
            assert float(configuration[f"{key}_{sd_name}"]) == pytest.approx(back(sd))
            low, high = back(mean - half_width), back(mean + half_width)
            if key == "mfu":
                high = min(high, 1.0)  # no mean above the whole peak
            assert float(configuration[f"{key}_ci_low"]) == pytest.approx(low)
            assert float(configuration[f"{key}_ci_high"]) == pytest.approx(high)
    assert "val_accuracy_mean" not in configurations[0]  # no validation split

    markdown = (sweep / "summary.md").read_text().split("\n\n")
    # The runs' table, the heading, the configurations' table, then the verdicts' heading and
    # lines (tests/report/test_verdicts.py).
    assert len(markdown) == 5
    assert markdown[1] == repeats.HEADING + ":"
    header, rule, *body = markdown[2].splitlines()
    # No validation split: the selected epoch is the final one, its test accuracy the final one.
    assert header == "| placement | n | test acc | train img/s | MFU |"
    assert rule == "|---|---|---|---|---|"
    first = configurations[0]
    mean, low = float(first["test_accuracy_mean"]), float(first["test_accuracy_ci_low"])
    assert re.match(rf"\| to_device \| 2(, \d busy)? \| {100 * mean:.1f}% ± ", body[0])
    assert f"({100 * low:.1f}% to " in body[0] and len(body) == 2
    assert markdown[1] in console and re.search(r"\ncuda_call +2(, \d busy)? ", console)


BUSY = (
    r"(?:; busy host: (?P<busy>\d of 2 \S+ runs, \d of 2 \S+ runs)"
    r"(?:, all on one side: not to be trusted for speed)?)?"
)
SPEED = re.compile(
    r"(?P<faster>\S+) trains [\d.,]+x \[(?P<low>[\d.,]+), (?P<high>[\d.,]+)\] as fast as "
    rf"(?P<slower>\S+) \(paired by seed, 2 pairs{BUSY}\)"
)
SPEED_WITHIN_NOISE = re.compile(
    r"to_device vs cuda_call: (?:no difference beyond the noise in train images/s|no verdict on "
    r"train images/s, busy on both sides: what other work left over, not the setting) "
    rf"\([\d.,]+x \[(?P<low>[\d.,]+), (?P<high>[\d.,]+)\], paired by seed, 2 pairs{BUSY}\)"
)


def test_a_sweeps_summary_states_its_verdicts(
    sweep: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each seed ran both placements: the verdicts compare them seed by seed."""
    assert main([str(sweep)]) == 0
    console = capsys.readouterr().err
    markdown = (sweep / "summary.md").read_text()
    heading, listed = markdown.split("\n\n")[-2:]
    assert heading == verdicts.HEADING + ":"
    speed, accuracy, *advice = listed.splitlines()
    assert f"  {speed[2:]}" in console and f"  {accuracy[2:]}" in console
    # Where other work held down both sides (this suite's other worker), once what to do.
    assert advice == (
        ["- 1 verdict(s) busy on both sides: " + verdicts.BUSY_ADVICE]
        if "busy on both sides" in speed
        else []
    )
    assert "Warning: repeats" not in markdown  # the seed's sweep ran first: interleaved

    runs = read_csv(sweep / "summary.csv")
    by_seed = {
        placement: {run["trainer.seed"]: run for run in runs if run["placement"] == placement}
        for placement in ("to_device", "cuda_call")
    }
    speeds = {
        placement: [
            math.log(float(by_seed[placement][seed]["train_images_per_second"])) for seed in "01"
        ]
        for placement in by_seed
    }
    if found := SPEED.fullmatch(speed[2:]):
        low, high = paired_by_scipy(speeds[found["faster"]], speeds[found["slower"]])
    else:
        found = SPEED_WITHIN_NOISE.fullmatch(speed[2:])
        assert found, speed
        low, high = paired_by_scipy(speeds["to_device"], speeds["cuda_call"])
    # Two pairs: t(0.975, 1) is 12.7, so the interval can span thousands (`1,958`).
    shown = [float(found[end].replace(",", "")) for end in ("low", "high")]
    assert shown == pytest.approx([math.exp(low), math.exp(high)], rel=0.01, abs=0.006)
    # Runs beside other work (this suite's other worker) are counted in the speed's verdict.
    busy = sum(run.get("host_busy") == "True" for run in runs)
    assert (found["busy"] is not None) == (busy > 0)
    # Seed by seed the placements learned the same numbers: no difference, exactly.
    assert accuracy == (
        "- to_device vs cuda_call: no difference beyond the noise in test accuracy "
        "(+0.0 points [+0.0, +0.0], paired by seed, 2 pairs)"
    )


@pytest.mark.slow
def test_a_real_speed_difference_is_found_seed_by_seed(tmp_path: Path) -> None:
    """Batches of 512 against batches of 1: a step's fixed cost spread over 512 times the images,
    tens of times the images/s on any machine; beside other work on both sides, no verdict."""
    done = train_cli(
        tmp_path,
        "-m",
        "trainer.batch_size=1,512",
        "trainer.seed=0,1,2",
        "model=lenet",
        "device=cpu",
        "trainer.epochs=1",
        "trainer.limit_train_batches=5",
        "trainer.limit_eval_images=64",
    )
    assert done.returncode == 0, done.stderr
    (verdicts_json,) = (tmp_path / "outputs").rglob("verdicts.json")
    (speed, _) = json.loads(verdicts_json.read_text())
    assert (speed["method"], speed["runs"]) == ("paired by seed", [3, 3]), speed["text"]
    assert f"\n  {speed['text']}\n" in done.stderr  # the sweep's own report says it
    if speed["busy_both_sides"]:  # other work held down both: no verdict is the honest one
        assert not speed["differs"] and "busy on both sides" in speed["text"]
        return
    assert (speed["first"], speed["second"]) == (
        "trainer.batch_size=512",
        "trainer.batch_size=1",
    ), speed["text"]
    assert speed["differs"] and speed["low"] > 1, speed["text"]


@pytest.mark.slow
def test_a_report_over_several_sweeps_compares_within_each(
    sweep: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """outputs/ with two sweeps and a run that failed on a mistyped key: each sweep's runs are
    compared among themselves, the typo names no column, and each verdict line holds what varies."""
    outputs = tmp_path / "outputs"
    report = shutil.ignore_patterns("summary.*", "configurations.csv", "verdicts.json", "*.png")
    sweeps = ["2026-11-28/10-00-00_a", "2026-11-28/11-00-00_b"]
    for name in sweeps:
        shutil.copytree(sweep, outputs / name, ignore=report)
    assert train_cli(tmp_path, "+trainer.thread=2").returncode == 1  # did you mean threads?

    assert main([str(outputs)]) == 0
    console = capsys.readouterr().err
    configurations = read_csv(outputs / "configurations.csv")
    assert [(row["sweep"], row["placement"], row["n"]) for row in configurations] == [
        (name, placement, "2") for name in sweeps for placement in ("to_device", "cuda_call")
    ]
    with open(outputs / "summary.csv", newline="") as file:
        assert not any("trainer.thread" in key for key in next(csv.reader(file)))
    found = json.loads((outputs / "verdicts.json").read_text())
    assert [(each["sweep"], each["method"], each["runs"]) for each in found] == [
        (name, "paired by seed", [2, 2]) for name in sweeps for _ in ("speed", "accuracy")
    ]
    listed = (outputs / "summary.md").read_text().split(verdicts.HEADING + ":\n\n")[1]
    listed = listed.split(f"\n\n{device_cards.HEADING}:")[0]  # the verdicts, before the cards
    assert [line for line in listed.splitlines() if line.startswith("- ")] == [
        f"- sweep {name}:" for name in sweeps
    ]
    assert max(map(len, listed.splitlines())) < 200
    assert f"  sweep {sweeps[1]}:" in console

    # Told to, the two sweeps are one: four runs of each placement, two of each seed: unpaired.
    assert main([str(outputs), "--across-sweeps"]) == 0
    configurations = read_csv(outputs / "configurations.csv")
    assert [(row["placement"], row["n"]) for row in configurations] == [
        ("to_device", "4"),
        ("cuda_call", "4"),
    ]
    found = json.loads((outputs / "verdicts.json").read_text())
    assert [(each["sweep"], each["method"], each["runs"]) for each in found] == [
        ("", "Welch's t", [4, 4]) for _ in ("speed", "accuracy")
    ]


def test_a_sweeps_mfu_divides_by_one_peak_per_device(
    sweep: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run that measured its peak again beside other work (here its results.json says so: half
    the peak, twice the MFU) divides by the sweep's best quiet peak, as the others do."""
    copied = tmp_path / "sweep"
    shutil.copytree(sweep, copied, ignore=shutil.ignore_patterns("summary.*", "*.png"))
    (busy,) = (job for job in copied.iterdir() if job.name.startswith("1_"))
    results = json.loads((busy / "results.json").read_text())
    quiet_peak, mfu = results["device_peak_flops"], results["mfu"]
    results |= {
        "device_peak_flops": quiet_peak / 2,
        "mfu": mfu * 2,
        "device_peak_measured": True,
        "host_busy": True,
    }
    (busy / "results.json").write_text(json.dumps(results))
    assert main([str(copied)]) == 0
    console = capsys.readouterr().err
    runs = {row["run"]: row for row in read_csv(copied / "summary.csv")}
    assert {float(row["device_peak_flops"]) for row in runs.values()} == {quiet_peak}
    assert float(runs[busy.name]["mfu"]) == pytest.approx(mfu)
    assert "MFU divides each device's runs in a sweep by one peak: cpu " in console
    assert "(the best quiet one; 1 of 4 runs measured less)" in console
    # One peak: the MFU is the speed again, so it gets no verdict of its own.
    found = json.loads((copied / "verdicts.json").read_text())
    assert [verdict["measure"] for verdict in found] == ["train images/s", "test accuracy"]
