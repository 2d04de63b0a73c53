"""The report says exactly what was run: a column per swept override, no column empty for every
run, a dot per run grouped by speed, curves in % that read after one epoch, and the speedup over
the CPU."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pytest
from matplotlib.collections import PathCollection
from tensorboard.plugins.hparams import metadata

from experiments.report import batch_sweep, curves, scaling, throughput
from experiments.report.summary import speedup_vs_cpu, table, write_report
from helpers import Finished, metrics, plugin_data, read_events, results, train_cli

SWEEP = (
    "-m",
    "device=every",
    "model=lenet",
    "optimizer.lr=0.01,0.001",
    "trainer.epochs=1",
    "trainer.limit_train_batches=2",
    "trainer.limit_eval_images=64",
)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Finished:
    """Two runs that differ in the learning rate alone, swept over every device of this machine."""
    done = train_cli(tmp_path_factory.mktemp("sweep"), *SWEEP)
    assert done.returncode == 0, done.stderr
    return done


@pytest.fixture(scope="module")
def rows(sweep: Finished) -> list[dict[str, Any]]:
    """The report's rows, as the sweep's end made them (written again, in this process)."""
    return write_report(folder_of(sweep))


def folder_of(sweep: Finished) -> Path:
    (multirun_yaml,) = (sweep.cwd / "outputs").rglob("multirun.yaml")
    return multirun_yaml.parent


def summary_csv(folder: Path) -> list[dict[str, str]]:
    with open(folder / "summary.csv", newline="") as file:
        return list(csv.DictReader(file))


@pytest.mark.slow
def test_device_every_is_the_cpu_alone_on_this_machine_said_in_one_line(sweep: Finished) -> None:
    assert (
        "device=every is cpu alone here: this machine has no CUDA GPU (torch found no CUDA GPU "
        "or driver)\n" in sweep.stderr
    )
    assert [results(run)["device"]["used"] for run in sweep.run_dirs] == ["cpu", "cpu"]


def test_swept_overrides_are_columns_and_empty_columns_are_left_out(
    sweep: Finished, rows: list[dict[str, Any]]
) -> None:
    folder = folder_of(sweep)
    written = summary_csv(folder)
    assert [row["optimizer.lr"] for row in written] == ["0.01", "0.001"]
    # No validation split, no CUDA memory, no GPU to compare with the CPU, no datasheet peak (a
    # CPU has none): no such columns.
    header = list(written[0])
    empties = ("val_accuracy", "peak_cuda_memory_mb", "loader", "reason", "speedup_vs_cpu")
    for empty in (*empties, "datasheet_peak_flops", "datasheet_peak_of", "mfu_datasheet"):
        assert empty not in header
    assert header[:9] == [
        "run",
        "model",
        "model_parameters",
        "model_flops_per_image",
        "model_training_flops_per_image",
        "dataset",
        "device",
        "placement",
        "optimizer.lr",
    ]
    speeds = [results(folder / row["run"])["train_images_per_second"] for row in written]
    assert [float(row["train_images_per_second"]) for row in written] == speeds
    markdown = (folder / "summary.md").read_text().splitlines()
    assert markdown[0].startswith(
        "| run | model | params | FLOPs/image | train FLOPs/image | dataset | device | placement "
        "| optimizer.lr |"
    )
    assert "| val acc |" not in markdown[0] and "| cuda MiB |" not in markdown[0]
    assert (
        "| lenet | 62.0k | 1.30M | 3.20M | cifar10_sample | cpu | to_device | 0.001 | completed |"
        in (markdown[3])
    )
    console = table(rows, folder).splitlines()
    assert console[1].split()[:2] == header[:2]  # the same headers there
    assert console[1].split()[6:10] == header[5:9]  # ("train FLOPs/image" is two words)


def test_joules_per_train_image_are_a_column_where_a_run_measured_them(
    sweep: Finished, tmp_path: Path
) -> None:
    """results.json's train_joules_per_image (NVML, RAPL): a column, nothing where unmeasured."""
    folder = tmp_path / "sweep"
    shutil.copytree(folder_of(sweep), folder)
    assert "train_joules_per_image" not in summary_csv(folder)[0]  # none measured, on this VM
    measured = folder / summary_csv(folder)[0]["run"] / "results.json"
    recorded = json.loads(measured.read_text())
    recorded.update(train_joules_per_image=0.0125, energy_note=None, average_watts=65.0)
    measured.write_text(json.dumps(recorded))
    first, second = write_report(folder)
    assert (first["train_joules_per_image"], second["train_joules_per_image"]) == (0.0125, None)
    assert [row["train_joules_per_image"] for row in summary_csv(folder)] == ["0.0125", ""]
    assert "| train J/image |" in (folder / "summary.md").read_text().splitlines()[0]


def test_two_learning_rates_are_one_speed_a_dot_per_run(rows: list[dict[str, Any]]) -> None:
    figure = throughput.throughput_figure(rows)
    try:
        (axis,) = figure.axes  # one quantity, one axis
        dots = [points for points in axis.collections if isinstance(points, PathCollection)]
        assert sorted(x for each in dots for x, _ in each.get_offsets()) == sorted(
            row["train_images_per_second"] for row in rows
        )  # one group: the learning rate changes what is learned, not how fast
        (name,) = [label.get_text() for label in axis.get_yticklabels()]
        assert name.startswith("2 runs\n") and name.endswith(", n=2")
    finally:
        plt.close(figure)


def test_curves_are_in_percent_and_read_after_one_epoch(
    sweep: Finished, rows: list[dict[str, Any]]
) -> None:
    histories = [metrics(run, "epoch") for run in sweep.run_dirs]
    figure = curves.curves_figure(rows, histories)
    try:
        accuracy, loss = figure.axes
        dots = [line.get_ydata()[0] for line in accuracy.get_lines()]
        assert dots == [100 * history[0]["test_accuracy"] for history in histories]
        assert "%" in accuracy.get_ylabel()
        for axis in (accuracy, loss):
            low, high = axis.get_xlim()
            assert low <= 0.5 and high >= 1.5  # not alone on an axis from 0.96 to 1.04
            assert all(tick == round(tick) for tick in axis.get_xticks())  # whole epochs
        assert accuracy.get_ylim()[0] == 0  # an amount; the loss axis spans the losses
        legend = [text.get_text() for text in loss.get_legend().get_texts()]
        # Named by what the sweep varies: the device (device=every) and the learning rate.
        assert legend[:2] == ["device=cpu, optimizer.lr=0.01", "device=cpu, optimizer.lr=0.001"]
    finally:
        plt.close(figure)


def test_each_job_lists_what_its_sweep_varies_first_in_hparams(sweep: Finished) -> None:
    for run_dir in sweep.run_dirs:
        experiment = plugin_data(read_events(run_dir), metadata.EXPERIMENT_TAG).experiment
        # device=every, and optimizer.lr, which is the dashboard's lr.
        swept = experiment.hparam_infos[:2]
        assert {(info.name, info.differs) for info in swept} == {("device", True), ("lr", True)}
        assert not any(info.differs for info in experiment.hparam_infos[2:])


def row(device: str, speed: float | None, **swept: Any) -> dict[str, Any]:
    return {
        "device": device,
        "train_images_per_second": speed,
        "swept": {"device": device, **swept},
    }


def test_the_speedup_is_over_the_cpu_run_of_the_same_configuration() -> None:
    cpu_fast, cpu_slow = row("cpu", 200.0, lr="0.01"), row("cpu", 100.0, lr="0.001")
    rows = [
        cpu_fast,
        cpu_slow,
        row("cuda:0", 1000.0, lr="0.01"),
        row("cuda:0", 1000.0, lr="0.001"),
        row("dp over cuda:0, cuda:1", 1500.0, lr="0.001"),
        row("cuda:1", 800.0, lr="0.1"),  # no CPU run with this learning rate
        row("cuda:1", None, lr="0.01"),  # failed
    ]
    speedups = [speedup_vs_cpu(each, rows) for each in rows]
    assert speedups == [None, None, 5.0, 10.0, 15.0, None, None]
    # Repeats of one configuration on the CPU: their mean.
    again = [*rows, row("cpu", 300.0, lr="0.01")]
    assert speedup_vs_cpu(rows[2], again) == 4.0


@pytest.mark.gpu
def test_device_every_on_a_gpu_machine_reports_each_gpus_speedup(tmp_path: Path) -> None:
    done = train_cli(tmp_path, *SWEEP)
    assert done.returncode == 0, done.stderr
    assert "device=every is cpu, cuda:0" in done.stderr
    rows = summary_csv(folder_of(done))
    on_cpu = {
        row["optimizer.lr"]: float(row["train_images_per_second"])
        for row in rows
        if row["device"] == "cpu"
    }
    others = [row for row in rows if row["device"] != "cpu"]
    assert others and len(on_cpu) == 2
    for other in others:
        expected = float(other["train_images_per_second"]) / on_cpu[other["optimizer.lr"]]
        assert float(other["speedup_vs_cpu"]) == pytest.approx(expected)


def test_the_scaling_lines_join_runs_by_device_and_model_and_bound_only_what_was_measured() -> None:
    def row(device: str, batch: str, width: str, peak: float | None) -> dict[str, object]:
        swept = {"device": device, "trainer.batch_size": batch, "model.hidden_sizes": width}
        return {
            "device": device,
            "swept": swept,
            "train_images_per_second": 1.0,
            "model_flops_per_image": 100,
            "device_peak_flops": peak,
        }

    rows = [
        row("cpu", "64", "[8]", 600.0),
        row("cpu", "32", "[8]", 900.0),
        row("cuda:0", "32", "[8]", None),
        row("cpu", "32", "[16]", 900.0),
    ]
    lines = batch_sweep.scaling_lines(rows)
    assert {
        name: [r["swept"]["trainer.batch_size"] for r in line] for name, line in lines.items()
    } == {
        "device=cpu, model.hidden_sizes=[8]": ["32", "64"],
        "device=cuda:0, model.hidden_sizes=[8]": ["32"],
        "device=cpu, model.hidden_sizes=[16]": ["32"],
    }
    assert scaling.compute_bound(lines["device=cpu, model.hidden_sizes=[8]"]) == 900.0 / 300
    assert scaling.compute_bound(lines["device=cuda:0, model.hidden_sizes=[8]"]) is None
    for each in rows:
        del each["swept"]["trainer.batch_size"]
    assert batch_sweep.scaling_lines(rows) == {}
