"""The report's figures read as a person would read them, checked on the figures' own data: speed
grouped by what changes speed, a dot per run with the mean and its interval; loss curves that
span the losses, repeats as a mean with a band; a compute bound only where a peak was measured."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import matplotlib.pyplot as plt
import pytest
from matplotlib.collections import PathCollection

from experiments.report import curves, scaling, statistics, throughput

Row = dict[str, Any]


@pytest.fixture(autouse=True)
def _closed() -> Iterator[None]:
    yield
    plt.close("all")


def run(name: str, speed: float | None, status: str = "completed", **swept: str) -> Row:
    """A report's row of a run, as `summary.write_report` makes it (what the figures read)."""
    return {
        "run": name,
        "status": status,
        "device": swept.get("device", "cpu"),
        "train_images_per_second": speed,
        "time_to_accuracy": None,
        "swept": swept,
    }


def test_a_learning_rate_sweep_is_one_speed_group_drawn_as_its_runs_mean_and_interval() -> None:
    # The sweep: optimizer.lr=0.01,0.1 ran at 731 and 330 img/s, one speed twice.
    rows = [
        run("0", 731.0, device="cpu", **{"optimizer.lr": "0.01"}),
        run("1", 330.0, device="cpu", **{"optimizer.lr": "0.1"}),
        run("2", 3000.0, device="cuda:0", **{"optimizer.lr": "0.01"}),
        run("3", 3100.0, device="cuda:0", **{"optimizer.lr": "0.1"}),
        run("4", 9.0, "failed", device="cuda:0", **{"optimizer.lr": "1.0"}),
    ]
    busy_speed = 3100.0
    rows[3]["host_busy"] = True
    groups = throughput.speed_groups(rows)
    assert [(group.values, len(group.runs)) for group in groups] == [
        ({"device": "cpu"}, 2),
        ({"device": "cuda:0"}, 2),  # the failed run is no measurement
    ]

    figure = throughput.throughput_figure(rows)
    (axis,) = figure.axes
    names, numbers = zip(
        *(tick.get_text().split("\n") for tick in axis.get_yticklabels()), strict=True
    )
    assert names == ("device=cpu", "device=cuda:0")
    dots = [
        (list(points.get_offsets()[0]), points.get_facecolor())
        for points in axis.collections
        if isinstance(points, PathCollection)
    ]
    cpu_dots = [x_y for x_y, _ in dots if -0.5 < x_y[1] < 0.5]  # on the CPU's row
    assert sorted(x for x, _ in cpu_dots) == [330.0, 731.0]  # each run, not a bar of one
    # The busy run's dot is hollow, the others filled.
    hollow = [x_y[0] for x_y, face in dots if face.size == 0 or face[0][3] == 0]
    assert hollow == [busy_speed]
    mean = statistics.log_spread([731.0, 330.0])  # the geometric mean, as the verdicts compare
    assert [axis.get_lines()[0].get_xdata()[0]] == [mean.mean]  # the mean's mark
    low, high = mean.interval
    assert numbers[0] == f"{mean.mean:,.0f} [{low:,.0f}, {high:,.0f}], n=2"
    assert numbers[1].endswith(f"n=2  ({3050.0 / mean.mean:.1f}x cpu)")
    assert axis.get_xlim()[0] == 0  # a length is a speed


def test_the_keys_that_change_speed_group_the_runs_and_the_others_do_not() -> None:
    for key in (
        "device",
        "model",
        "model.arch",
        "dataset.workers",
        "trainer.precision",
        "trainer.compile_mode",
    ):
        assert throughput.changes_speed(key), key
    for key in ("optimizer.lr", "trainer.seed", "scheduler", "optimizer.weight_decay"):
        assert not throughput.changes_speed(key), key
    rows = [
        run("0", 100.0, **{"trainer.batch_size": "32", "trainer.seed": "0"}),
        run("1", 110.0, **{"trainer.batch_size": "32", "trainer.seed": "1"}),
        run("2", 190.0, **{"trainer.batch_size": "64", "trainer.seed": "0"}),
    ]
    groups = throughput.speed_groups(rows)
    assert [group.values for group in groups] == [
        {"trainer.batch_size": "32"},
        {"trainer.batch_size": "64"},
    ]


def history(*losses: float, accuracy: float = 0.1) -> list[Row]:
    return [
        {"epoch": epoch, "train_loss": loss, "test_accuracy": accuracy}
        for epoch, loss in enumerate(losses, start=1)
    ]


def test_the_loss_axis_spans_the_losses_and_repeats_are_a_mean_with_a_band() -> None:
    rows = [
        run("0", 1.0, **{"model": "lenet", "trainer.seed": "0"}),
        run("1", 1.0, **{"model": "lenet", "trainer.seed": "1"}),
        run("2", 1.0, **{"model": "tudui", "trainer.seed": "0"}),
    ]
    # Losses near ln(10) = 2.3, as every short CIFAR-10 run has: from 0 they are one flat line.
    histories = [history(2.31, 2.29), history(2.30, 2.25, accuracy=0.15), history(2.30, 2.27)]
    figure = curves.curves_figure(rows, histories)
    accuracy, loss = figure.axes
    assert accuracy.get_ylim()[0] == 0 and accuracy.get_ylim()[1] >= 15  # the band in view

    low, high = loss.get_ylim()
    assert 2.2 < low < 2.25 and 2.31 < high < 2.36  # the losses fill the axis
    legend = [text.get_text() for text in loss.get_legend().get_texts()]
    assert legend == ["model=lenet (2 runs)", "model=tudui"]  # an entry per configuration
    lenet, tudui = loss.get_lines()
    assert list(lenet.get_ydata()) == pytest.approx([2.305, 2.27])  # the mean of the repeats
    (band,) = loss.collections  # only the repeated configuration has one
    edges = band.get_paths()[0].vertices[:, 1]
    assert min(edges) == pytest.approx(2.25) and max(edges) == pytest.approx(2.31)
    # Lines that may coincide differ in marker and dashes.
    assert lenet.get_marker() != tudui.get_marker()
    assert lenet.get_linestyle() != tudui.get_linestyle()


def legend_texts(figure: Any) -> list[str]:
    """The entries of the legend, right of a figure's last panel."""
    return [text.get_text() for text in figure.axes[-1].get_legend().get_texts()]


def scaling_run(batch: str, speed: float, peak: float | None, seconds: float | str) -> Row:
    return {
        **run(batch, speed, device="cpu", **{"trainer.batch_size": batch}),
        "device_peak_flops": peak,
        "model_training_flops_per_image": 1000.0,
        "time_to_accuracy": seconds,
        "accuracy_target": (0.4, "val", "accuracy", "max"),
    }


def test_the_bound_is_drawn_and_named_only_where_a_peak_was_measured() -> None:
    measured = [scaling_run("32", 100.0, 1e6, 5.0), scaling_run("64", 150.0, 1e6, "not reached")]
    figure = scaling.scaling_figure(measured)
    speed, seconds = figure.axes[:2]
    assert [line.get_linestyle() for line in speed.get_lines()] == ["-", "--"]
    legend = legend_texts(figure)
    assert legend == ["device=cpu", scaling.KNEE, scaling.BOUND.format(one="image")]
    assert "dashed: compute bound" in speed.get_title()
    assert seconds.get_title() == "Time to 40% validation accuracy"

    unmeasured = [{**row, "device_peak_flops": None} for row in measured]
    figure = scaling.scaling_figure(unmeasured)
    speed = figure.axes[0]
    assert [line.get_linestyle() for line in speed.get_lines()] == ["-"]
    assert legend_texts(figure) == ["device=cpu", scaling.KNEE]
    assert "bound" not in speed.get_title()


def test_repeats_at_a_batch_size_are_their_geometric_mean_on_the_scaling_line() -> None:
    rows = [
        scaling_run("32", 100.0, None, 4.0),
        {
            **scaling_run("32", 120.0, None, 6.0),
            "swept": {"trainer.batch_size": "32", "trainer.seed": "1"},
        },
        scaling_run("64", 150.0, None, 3.0),
    ]
    figure = scaling.scaling_figure(rows)
    speed, seconds = figure.axes[:2]
    (line,) = speed.get_lines()
    assert list(line.get_xdata()) == [32, 64]
    assert list(line.get_ydata()) == pytest.approx([(100 * 120) ** 0.5, 150.0])
    (timed,) = seconds.get_lines()
    assert list(timed.get_ydata()) == pytest.approx([(4 * 6) ** 0.5, 3.0])


def searched(device: str, batch: int, speed: float, mfu: float | None, seed: str = "0") -> Row:
    """A row of experiment=batch_scaling's: swept over the halvings of the largest batch that fit
    (4096 on the CPU, 65536 on the GPU), trained at `batch`."""
    largest = 4096 if device == "cpu" else 65536
    halvings = (largest // batch).bit_length() - 1
    return {
        **run(
            f"{device}-{batch}-{seed}",
            speed,
            device=device,
            **{"trainer.auto_batch_halvings": str(halvings), "trainer.seed": seed},
        ),
        "batch_size": batch,
        "mfu": mfu,
        "batch_search": {
            "largest": largest,
            "trained": batch,
            "halvings": halvings,
            "stopped_by": "memory budget" if device == "cpu" else "out of memory",
            "budget_gb": 4.0 if device == "cpu" else None,
        },
    }


def test_batch_scaling_draws_speed_and_mfu_with_spread_knee_and_largest_batch() -> None:
    rows = [
        searched("cpu", 1024, 1000.0, 0.10),
        searched("cpu", 1024, 1210.0, 0.121, seed="1"),
        searched("cpu", 2048, 2000.0, 0.20),
        searched("cpu", 2048, 2100.0, None, seed="1"),  # beat its peak: no MFU
        searched("cpu", 4096, 2050.0, 0.205),
        searched("cuda:0", 65536, 9000.0, 0.40),
    ]
    assert scaling.figures(rows) == {scaling.SEARCHED: rows}  # every line searched its batch
    figure = scaling.scaling_figure(rows)
    speed, mfu = figure.axes
    assert mfu.get_title() == "Model FLOPs utilization"
    cpu_speed, cpu_largest, gpu_speed, gpu_largest = speed.get_lines()
    assert cpu_speed.get_label() == "device=cpu: largest batch 4096 (memory budget 4 GB)"
    # Drawn at the batch each run trained with, not at the halvings swept.
    assert list(cpu_speed.get_xdata()) == [1024, 2048, 4096]
    mean_1024 = (1000.0 * 1210.0) ** 0.5
    assert list(cpu_speed.get_ydata()) == pytest.approx([mean_1024, (2000 * 2100) ** 0.5, 2050])
    assert list(gpu_speed.get_xdata()) == [65536]
    # The largest batch, dotted, where each line's search stopped.
    assert [line.get_gid() for line in (cpu_largest, gpu_largest)] == ["largest", "largest"]
    assert [line.get_xdata()[0] for line in (cpu_largest, gpu_largest)] == [4096, 65536]
    # A bar per repeated size: the 95% interval of the runs' geometric mean.
    bars = [each for each in speed.collections if each.get_gid() == "interval"]
    assert len(bars) == 2  # 1024 and 2048 ran twice
    low, high = statistics.log_spread([1000.0, 1210.0]).interval
    assert bars[0].get_segments()[0][:, 1] == pytest.approx([low, high])
    # The knee, a star on each panel: 2048 is within 5% of 4096's speed.
    (knee,) = [each for each in speed.collections if each.get_gid() == "knee"]
    assert list(knee.get_offsets()[0]) == pytest.approx([2048, (2000 * 2100) ** 0.5])
    (mfu_knee,) = [each for each in mfu.collections if each.get_gid() == "knee"]
    assert list(mfu_knee.get_offsets()[0]) == pytest.approx([2048, 20.0])  # the one run with MFU
    # MFU in % of the peak: the geometric mean of the runs that recorded it, from 0.
    cpu_mfu = mfu.get_lines()[0]
    assert list(cpu_mfu.get_ydata()) == pytest.approx([(10.0 * 12.1) ** 0.5, 20.0, 20.5])
    assert mfu.get_ylim()[0] == 0
    assert legend_texts(figure) == [
        "device=cpu: largest batch 4096 (memory budget 4 GB)",
        "device=cuda:0: largest batch 65536 (out of memory)",
        scaling.BARS,
        scaling.KNEE,
        scaling.LARGEST,
    ]


def test_mfu_is_drawn_only_where_runs_recorded_it_and_each_kind_of_sweep_has_its_file() -> None:
    unmeasured = [searched("cpu", batch, 100.0 * batch, None) for batch in (1024, 2048)]
    (speed,) = scaling.scaling_figure(unmeasured).axes  # no MFU panel
    assert speed.get_title() == "Training throughput"
    chosen = [scaling_run("32", 100.0, None, 5.0), scaling_run("64", 150.0, None, 3.0)]
    chosen = [
        {**row, "device": "cuda:0", "swept": {**row["swept"], "device": "cuda:0"}} for row in chosen
    ]
    assert scaling.figures([*unmeasured, *chosen]) == {
        scaling.SEARCHED: unmeasured,
        scaling.CHOSEN: chosen,
    }
    assert scaling.figures([{**row, "swept": {}} for row in chosen]) == {}
