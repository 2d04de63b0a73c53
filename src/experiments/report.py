"""The report on a folder of runs: a row per run, in CSV and Markdown, and plots to look at.

    python -m experiments.report outputs/2026-11-22/10-00-00_ab12cd34    # a sweep, or one run
    python -m experiments.report outputs                                 # everything

(The command line is `experiments.cli.report_main`.)

Every multirun writes it into its sweep folder at the end (`experiments.sweep.SweepReport`). A run
folder is any folder with a `.hydra/` snapshot; runs still going, killed, or without results are
listed as such, not left out.

    summary.csv, summary.md   model, dataset, device, placement, status (and why it failed), the
                              selected epoch with its validation and test accuracy (the final
                              epoch without a validation split), the final test accuracy, train
                              images/s, seconds per epoch, peak memory, and where training time
                              went: waiting for batches, copying them to the device (the share
                              spent moving data), computing
    throughput.png            train images/s by device and placement
    curves.png                test (and validation) accuracy and train loss per epoch, a line
                              per run
"""

from __future__ import annotations

import csv
import json
import os
import socket
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from experiments.selection import Monitor

Row = dict[str, Any]


def _percent(value: float) -> str:
    return f"{100 * value:.1f}%"


@dataclass(frozen=True)
class Column:
    """A column of summary.csv, summary.md and the console table: the row's `key`, its header,
    and how a value looks (the console leaves out the reasons, listed beneath it instead)."""

    key: str
    header: str
    show: Callable[[Any], str] = str
    in_console: bool = True

    def cell(self, row: Row) -> str:
        value = row[self.key]
        return "" if value is None else self.show(value)


COLUMNS = [
    Column("run", "run"),
    Column("model", "model"),
    Column("dataset", "dataset"),
    Column("device", "device"),
    Column("placement", "placement"),
    Column("loader", "loader"),  # memory or stream, for data of the user's own
    Column("status", "status"),
    Column("reason", "reason", in_console=False),
    # The epoch selected on the validation split (the final one without), and its accuracies.
    Column("selected_epoch", "epoch"),
    Column("val_accuracy", "val acc", _percent),
    Column("test_accuracy", "test acc", _percent),
    Column("final_test_accuracy", "final test acc", _percent),
    Column("train_images_per_second", "train img/s", "{:,.0f}".format),
    Column("seconds_per_epoch", "s/epoch", "{:.2f}".format),
    Column("peak_host_memory_mb", "host MiB", "{:,.0f}".format),
    Column("peak_cuda_memory_mb", "cuda MiB", "{:,.0f}".format),
    Column("wait_share", "data wait", _percent),
    Column("copy_share", "copy to device", _percent),
    Column("compute_share", "compute", _percent),
]


def find_runs(folder: Path) -> list[Path]:
    """Every training run folder at or below `folder` (not evaluations), sweep jobs in order."""
    runs = [
        path.parent
        for path in folder.rglob(".hydra")
        if (path / "config.yaml").is_file() and "trainer" in OmegaConf.load(path / "config.yaml")
    ]
    return sorted(runs, key=lambda run: _natural_key(run.relative_to(folder)))


def _natural_key(path: Path) -> list[Any]:
    # "10_..." after "9_...": compare the leading job numbers as numbers.
    return [
        (0, int(part.split("_")[0])) if part.split("_")[0].isdigit() else (1, part)
        for part in path.parts
    ]


def summary_row(run_dir: Path, folder: Path) -> Row:
    """One summary row for a run folder, from its results.json, or what its folder shows."""
    config = OmegaConf.load(run_dir / ".hydra" / "config.yaml")
    history = epochs(run_dir)
    row: Row = dict.fromkeys(column.key for column in COLUMNS)
    row.update(
        run=str(run_dir.relative_to(folder)) if run_dir != folder else run_dir.name,
        model=OmegaConf.select(config, "model.name"),
        dataset=OmegaConf.select(config, "dataset.name"),
        device=OmegaConf.select(config, "device.name"),
        placement=OmegaConf.select(config, "placement.name"),
    )
    results_file = run_dir / "results.json"
    results = json.loads(results_file.read_text()) if results_file.is_file() else {}
    row["status"] = _status(results)
    row["reason"] = results.get("reason")
    row["loader"] = results.get("data", {}).get("loader")
    if "device" in results:
        device = results["device"]
        row["device"] = device.get("used", device.get("requested"))
    for key in row:
        if key in results and key not in ("model", "dataset", "device", "placement", "status"):
            row[key] = results[key]
    if history:
        if row["selected_epoch"] is None:  # a run still going, or stopped: its epochs so far
            has_validation = "val_accuracy" in history[-1]
            selected = (
                Monitor.of(config.trainer).selected(history) if has_validation else history[-1]
            )
            row.update(
                selected_epoch=selected["epoch"],
                val_accuracy=selected.get("val_accuracy"),
                test_accuracy=selected["test_accuracy"],
                final_test_accuracy=history[-1]["test_accuracy"],
            )
        row["seconds_per_epoch"] = sum(e["epoch_seconds"] for e in history) / len(history)
    return row


def _status(results: dict[str, Any]) -> str:
    """completed, failed, running, crashed (stopped without a word), or no results."""
    status = results.get("status")
    if status is None:
        return "no results"
    if status != "running":
        return status
    process = results.get("process", {})
    if process.get("host") != socket.gethostname():
        return "running"
    try:
        os.kill(process["pid"], 0)
    except ProcessLookupError:
        return "crashed"
    except PermissionError:
        pass  # alive, owned by someone else
    return "running"


def epochs(run_dir: Path) -> list[dict[str, Any]]:
    """The epoch rows of a run's metrics.jsonl (none if it has not finished an epoch)."""
    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [row for row in rows if row["kind"] == "epoch"]


def write_report(folder: Path) -> list[dict[str, Any]]:
    """Write summary.csv, summary.md and the plots into `folder`; return the rows."""
    runs = find_runs(folder)
    rows = [summary_row(run, folder) for run in runs]
    with open(folder / "summary.csv", "w", newline="", encoding="utf-8") as file:
        writer = csv.DictWriter(file, fieldnames=[column.key for column in COLUMNS])
        writer.writeheader()
        writer.writerows(rows)
    (folder / "summary.md").write_text(markdown(rows), encoding="utf-8")
    _plot(folder, runs, rows)
    return rows


def markdown(rows: Sequence[Row]) -> str:
    lines = ["| " + " | ".join(column.header for column in COLUMNS) + " |"]
    lines.append("|" + "---|" * len(COLUMNS))
    lines += ["| " + " | ".join(column.cell(row) for column in COLUMNS) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def table(rows: Sequence[Row], folder: Path) -> str:
    """A plain-text table for the console: a count by status, the runs, then why any failed.
    Columns empty in every row (CUDA memory on the CPU) are left out."""
    shown = [
        column for column in COLUMNS if column.in_console and any(column.cell(row) for row in rows)
    ]
    body = [[column.header for column in shown]]
    body += [[column.cell(row) for column in shown] for row in rows]
    widths = [max(len(line[i]) for line in body) for i in range(len(shown))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in body
    ]
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    tally = ", ".join(f"{count} {status}" for status, count in counts.items())
    reasons = [f"{row['run']}: {row['reason']}" for row in rows if row["reason"]]
    return "\n".join([f"{len(rows)} run(s) in {folder}: {tally}", *lines, *reasons])


def _plot(folder: Path, runs: Sequence[Path], rows: Sequence[dict[str, Any]]) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display needed
    import matplotlib.pyplot as plt

    completed = [row for row in rows if row["train_images_per_second"] is not None]
    if completed:
        figure = _throughput_figure(plt, completed)
        figure.savefig(folder / "throughput.png", dpi=120, bbox_inches="tight")
        plt.close(figure)
    histories = [(row["run"], epochs(run)) for run, row in zip(runs, rows, strict=True)]
    histories = [(name, history) for name, history in histories if history]
    if histories:
        figure = _curves_figure(plt, histories)
        figure.savefig(folder / "curves.png", dpi=120, bbox_inches="tight")
        plt.close(figure)


def _throughput_figure(plt: Any, rows: Sequence[dict[str, Any]]) -> Any:
    """Grouped bars: a group per device, a bar per placement; a panel per model and dataset."""
    panels = sorted({(row["model"], row["dataset"]) for row in rows})
    figure, axes = plt.subplots(1, len(panels), figsize=(4 + 3 * len(panels), 4), squeeze=False)
    for axis, (model, dataset) in zip(axes[0], panels, strict=True):
        panel = [row for row in rows if (row["model"], row["dataset"]) == (model, dataset)]
        device_names = sorted({row["device"] for row in panel})
        placements = sorted({row["placement"] for row in panel})
        width = 0.8 / len(placements)
        for offset, placement in enumerate(placements):
            speeds = [
                _mean(
                    r["train_images_per_second"]
                    for r in panel
                    if (r["device"], r["placement"]) == (device, placement)
                )
                for device in device_names
            ]
            positions = [
                i + (offset - (len(placements) - 1) / 2) * width for i in range(len(device_names))
            ]
            bars = axis.bar(positions, speeds, width, label=placement)
            axis.bar_label(bars, fmt="{:,.0f}", fontsize=8)
        axis.set_xticks(range(len(device_names)), device_names)
        axis.set_title(f"{model} on {dataset}")
        axis.set_ylabel("train images / s")
        axis.margins(y=0.1)
        axis.legend(loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=len(placements))
    figure.suptitle("Training throughput by device and placement")
    return figure


def _mean(values: Any) -> float:
    values = list(values)
    return sum(values) / len(values) if values else 0.0


def _curves_figure(plt: Any, histories: Sequence[tuple[str, list[dict[str, Any]]]]) -> Any:
    # No layout engine: the legend sits beside the axes, and savefig's tight box takes it in.
    figure, (accuracy, loss) = plt.subplots(1, 2, figsize=(12, 4.5))
    for number, (name, history) in enumerate(histories):
        # Runs with identical numbers (e.g. two placements) overlap; dashes keep both visible.
        style = {"marker": "o", "linestyle": ("-", "--", ":", "-.")[number % 4]}
        epoch_numbers = [row["epoch"] for row in history]
        line = accuracy.plot(epoch_numbers, [row["test_accuracy"] for row in history], **style)
        if "val_accuracy" in history[-1]:  # the same colour, lighter, for validation
            validation = [row["val_accuracy"] for row in history]
            accuracy.plot(epoch_numbers, validation, color=line[0].get_color(), alpha=0.4, **style)
        loss.plot(epoch_numbers, [row["train_loss"] for row in history], label=name, **style)
    validated = any("val_accuracy" in history[-1] for _, history in histories)
    title = "Test accuracy (faint: validation)" if validated else "Test accuracy"
    accuracy.set(title=title, xlabel="epoch", ylabel="accuracy")
    loss.set(title="Train loss", xlabel="epoch", ylabel="loss")
    for axis in (accuracy, loss):
        axis.grid(alpha=0.3)
        axis.xaxis.get_major_locator().set_params(integer=True)
    loss.legend(title="run", loc="upper left", bbox_to_anchor=(1.02, 1), fontsize=8)
    return figure


if __name__ == "__main__":
    from experiments.cli import report_main

    sys.exit(report_main())
