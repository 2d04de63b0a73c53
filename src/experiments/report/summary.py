"""The report on a folder of runs: a row per run, in CSV and Markdown, and plots to look at.

    python -m experiments.report outputs/2026-11-22/10-00-00_ab12cd34    # a sweep, or one run
    python -m experiments.report outputs                                 # everything

Every multirun writes it into its sweep folder at the end (`report.sweep_end`). A run folder is
any folder with a `.hydra/` snapshot; runs still going, killed or without results are listed as
such, and so are jobs a sweep planned but never started (`not run`) and runs whose files cannot be
read (`unreadable`).

    summary.csv, summary.md   a row per run: the `COLUMNS` and a column per key the runs differ
                              in (`report.swept`), less those empty for every run
    configurations.csv        a row per configuration: its runs that differ only in
                              trainer.seed, summed up (`report.repeats`); summary.md and the
                              console add its table where any ran twice, then the verdicts
                              (`report.verdicts`)
    serving.csv               the same of evaluations that benchmarked
                              (`report.inference_benchmark`)
    verdicts.json             those verdicts, for programs
    throughput.png            train images/s by speed group: a dot per run (hollow: busy host),
                              the geometric mean and its 95% interval
    curves.png                accuracy and train loss per epoch, a line per configuration (its
                              runs' mean, a band from lowest to highest)
    scaling.png               of a sweep over trainer.batch_size: train images/s and MFU
                              against batch size, a line per speed group with its compute bound
                              and knee, and the time to accuracy
    batch_scaling.png         the same, of runs that searched their batch (batch_size=auto)
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.config.metric_names import TEST, VAL
from experiments.config.naming import planned_job_names
from experiments.core.files import write_atomically
from experiments.core.text import Unit, part_of_split, printable, shared_unit, short_count
from experiments.devices.backends import names
from experiments.records.recorded import ResultsFile
from experiments.records.running import alive_here
from experiments.report import (
    batch_sweep,
    device_cards,
    inference_benchmark,
    plausible,
    plots,
    repeats,
    verdicts,
)
from experiments.report.headlines import HEADLINES, headlines, own_headlines
from experiments.report.run_records import RunRecords, UnreadableRun, read_run
from experiments.report.swept import swept_values
from experiments.training.history import History
from experiments.training.selection import selected_epoch

Row = dict[str, Any]


def _percent(value: float) -> str:
    return f"{100 * value:.1f}%"


def _seconds(value: float | str) -> str:
    return value if isinstance(value, str) else f"{value:.1f}"


@dataclass(frozen=True)
class Column:
    """A column of summary.csv, summary.md and the console table: the row's `key` (of its `swept`
    values, for a swept override), its header, and how a value looks."""

    key: str
    header: str  # "{one}", "{many}", "{rate}": the runs' unit (images, or a table's rows)
    show: Callable[[Any], str] = str
    in_console: bool = True
    swept: bool = False

    def heading(self, unit: Unit) -> str:
        """The header, in the runs' unit: `train img/s`, `train rows/s`."""
        return self.header if self.swept else self.header.format_map(vars(unit))

    def value(self, row: Row) -> Any:
        return row.get("swept", {}).get(self.key) if self.swept else row.get(self.key)

    def cell(self, row: Row) -> str:
        value = self.value(row)
        return "" if value is None else self.show(value)


# The status of a run with a file the report cannot read; its reason names the file.
UNREADABLE = "unreadable"

# The groups with a column of their own, swept or not; the other swept keys follow them.
IDENTITY = ("model", "dataset", "device", "placement")


COLUMNS = [
    Column("run", "run"),
    Column("model", "model"),
    Column("model_parameters", "params", short_count),
    Column("model_flops_per_image", "FLOPs/{one}", short_count),
    # A training step's forward and backward passes: what the compute bound divides the peak by.
    Column("model_training_flops_per_image", "train FLOPs/{one}", short_count),
    Column("dataset", "dataset"),
    Column("device", "device"),
    Column("placement", "placement"),
    Column("loader", "loader"),  # memory or stream, for data of the user's own
    Column("status", "status"),
    Column("reason", "reason", in_console=False),
    # The epoch selected on the validation split (the final one without), and its task's
    # headline metric there (accuracy, RMSE), and at the final epoch.
    Column("selected_epoch", "epoch"),
    *(Column(headline.key, headline.header, headline.text) for headline in HEADLINES),
    # "64 of 1,000" when only part of the test split was evaluated (trainer.limit_eval_images).
    Column("test_images", "test {many}"),
    Column("train_images_per_second", "train {rate}", "{:,.0f}".format),
    Column("speedup_vs_cpu", "vs cpu", "{:.1f}x".format),
    # "busy" where other work on the host competed with the run (`devices.measuring.host_load`).
    Column("host_busy", "host", lambda busy: "busy" if busy else ""),
    # The device's measured matrix-product FLOP/s (devices.peak_cache), in the run's precision.
    Column("device_peak_flops", "peak FLOP/s", short_count),
    Column("device_peak_precision", "peak in"),
    # Model FLOPs utilization: the training FLOP/s achieved over that peak (times its devices).
    Column("mfu", "MFU", _percent),
    # Training seconds until trainer.target_value was reached, or "not reached".
    Column("time_to_accuracy", "time to acc (s)", _seconds),
    Column("seconds_per_epoch", "s/epoch", "{:.2f}".format),
    Column("peak_host_memory_mb", "host MiB", "{:,.0f}".format),
    Column("peak_cuda_memory_mb", "cuda MiB", "{:,.0f}".format),
    # The energy a train image took, where the hardware reported it (NVML, RAPL).
    Column("train_joules_per_image", "train J/{one}", "{:.3g}".format),
    # An evaluation's benchmark (`report.inference_benchmark`): latency at batch 1, images/s at
    # the serving batch, the peak memory of the host or GPU it served on, and the energy per
    # image served.
    Column("latency_p50_ms", "p50 ms", "{:.3g}".format),
    Column("latency_p95_ms", "p95 ms", "{:.3g}".format),
    Column("latency_p99_ms", "p99 ms", "{:.3g}".format),
    Column(inference_benchmark.BATCH, "served batch"),
    Column("serving_images_per_second", "served {rate}", "{:,.0f}".format),
    Column("serving_peak_memory_mb", "served MiB", "{:,.0f}".format),
    Column("serving_memory_of", "served MiB of", in_console=False),
    Column("serving_joules_per_image", "served J/{one}", "{:.3g}".format),
    Column("wait_share", "data wait", _percent),
    Column("compute_share", "compute", _percent),
    # On a GPU, asynchronous copies' time there, overlapping the wait.
    Column("copy_share", "copy (GPU time, overlaps)", _percent),
]


def find_runs(folder: Path) -> list[Path]:
    """Every run folder at or below `folder`, training runs' and evaluations', sweep jobs in
    order."""
    runs = [path.parent for path in folder.rglob(".hydra") if (path / "config.yaml").is_file()]
    return sorted(runs, key=lambda run: _natural_key(run.relative_to(folder)))


def _natural_key(path: Path) -> list[Any]:
    # "10_..." after "9_...": compare the leading job numbers as numbers.
    return [
        (0, int(part.split("_")[0])) if part.split("_")[0].isdigit() else (1, part)
        for part in path.parts
    ]


def summary_row(run_dir: Path, folder: Path, records: RunRecords) -> Row:
    """One summary row for a run folder, from its files as `run_records.read_run` read them."""
    results, history, measures = records.results, records.history, records.measures
    row = _bare_row(_run_name(run_dir, folder), _status(results))
    row.update(records.names)
    row["unit"] = results.get("data", {}).get("unit")  # images or rows (older runs: none)
    row["loader"] = results.get("data", {}).get("loader")
    row["gpus"] = gpus_used(results)  # what the compute bound multiplies the peak by
    # What the figures of speed against batch size read (no columns): the batch trained with, of
    # all processes (with trainer.batch_size=auto, its search's), and the search.
    row.update({key: results.get(key) for key in ("batch_size", "batch_search")})
    row["largest_batch"] = (results.get("batch_search") or {}).get("largest")
    if "device" in results:
        device = results["device"]
        row["device"] = device.get("used", device.get("requested"))
        row["device_name"] = device.get("name")  # (for the device cards: no column)
    row.update({key: results[key] for key in row.keys() & results.keys() & FROM_RESULTS})
    if records.evaluation:
        row.update(inference_benchmark.evaluation_fields(results))
    if reached := results.get("time_to_accuracy"):  # of trainer.target_accuracy
        row["time_to_accuracy"] = (
            "not reached" if reached["seconds"] is None else reached["seconds"]
        )
        # What it was the time to, for the figures: 0.4, "val" and "accuracy" (no column).
        metric = reached.get("metric", "accuracy")  # (older runs': accuracy)
        better = reached.get("better", "max")
        row["accuracy_target"] = (reached.get("target"), reached.get("split"), metric, better)
    if records.own_task:  # a task of one's own's
        row["own_headlines"] = headlines(measures)
        row.update({headline.key: results.get(headline.key) for headline in row["own_headlines"]})
    tested = measures.headline.key(TEST)
    # A run still going, or stopped: its epochs so far.
    if history and row["selected_epoch"] is None:
        selected = selected_epoch(history, records.monitor)
        val = measures.headline.key(VAL)
        row.update(
            {
                "selected_epoch": selected["epoch"],
                val: selected.get(val),
                tested: selected[tested],
                measures.final_key(TEST): history[-1][tested],
            }
        )
    if history:
        row["seconds_per_epoch"] = sum(e["epoch_seconds"] for e in history) / len(history)
    # Of a run's test numbers; older runs do not give the split's size.
    in_split = results.get("test_split_images")
    measured = in_split and row.get(tested) is not None and "test_images" in results
    row["test_images"] = part_of_split(results["test_images"], in_split) if measured else None
    if impossible := plausible.left_out(row):
        row["reason"] = "; ".join(filter(None, [row["reason"], *impossible]))
    return row


def _run_name(run_dir: Path, folder: Path) -> str:
    return str(run_dir.relative_to(folder)) if run_dir != folder else run_dir.name


# The columns taken from results.json as they are (the groups come from the config, the device
# from what it used, the status from the process).
FROM_RESULTS = (
    ResultsFile.__required_keys__
    | ResultsFile.__optional_keys__
    | {headline.key for headline in HEADLINES}
) - {"model", "dataset", "device", "placement", "status"}


def gpus_used(results: dict[str, Any]) -> int | None:
    """How many GPUs a run computed on over all its processes; None on the CPU (whose peak counts
    all its cores) or where results.json names no device."""
    device = results.get("device", {})
    if device.get("type") in (None, names.CPU):
        return None
    return len(device.get("ids") or [device.get("index")]) * results.get("world_size", 1)


def _status(results: dict[str, Any]) -> str:
    """completed, failed, interrupted, running, crashed (stopped without a word), or no
    results."""
    status = results.get("status")
    if status is None:
        return "no results"
    if status == "running" and alive_here(results) is False:
        return "crashed"
    return status


def write_report(folder: Path, across_sweeps: bool = False) -> list[dict[str, Any]]:
    """Write summary.csv, summary.md, configurations.csv (of training runs), serving.csv (of
    evaluations that benchmarked), verdicts.json and the plots into `folder`; return the rows.
    Runs are compared within the sweep they came from, or, with `across_sweeps`, as if every run
    at or below `folder` were of one sweep."""
    pairs: list[tuple[Row, History]] = []  # a row and its run's epochs
    runs = find_runs(folder)
    read = {run: _records_or_why(run) for run in runs}
    good = {run: records for run, records in read.items() if isinstance(records, RunRecords)}
    swept = swept_values(good, folder)
    for run, records in read.items():
        if isinstance(records, str):  # why it cannot be read: a row that says so, no more
            pairs.append((_bare_row(_run_name(run, folder), UNREADABLE, records), []))
            continue
        row = summary_row(run, folder, records)
        # A group with its own column is named as there (the device used, for device=auto).
        row["swept"] = {
            key: row[key] if key in IDENTITY and row[key] is not None else value
            for key, value in swept[run].items()
        }
        row["sweep"] = "" if across_sweeps else sweep_of(run, folder)
        pairs.append((row, records.history))
    pairs += [(_bare_row(name, "not run"), []) for name in not_started(folder)]
    pairs.sort(key=lambda pair: _natural_key(Path(pair[0]["run"])))
    rows, histories = [row for row, _ in pairs], [history for _, history in pairs]
    for row in rows:
        row["speedup_vs_cpu"] = speedup_vs_cpu(row, rows)
    shown = columns(rows, in_console=False)
    table = io.StringIO()
    writer = csv.writer(table)
    writer.writerow(column.key for column in shown)
    writer.writerows([column.value(row) for column in shown] for row in rows)
    _write(folder / "summary.csv", table.getvalue())
    _write(folder / "summary.md", markdown(rows))
    configurations = repeats.configurations(trained(rows))
    if trained(rows):  # (a sweep of evaluations has serving.csv)
        _write(folder / "configurations.csv", repeats.csv_text(configurations))
    if (benchmark_csv := inference_benchmark.csv_text(rows)) is not None:
        _write(folder / "serving.csv", benchmark_csv)
    training_verdicts = verdicts.verdict_lines(configurations).verdicts
    benchmark_verdicts = inference_benchmark.benchmark_verdict_lines(rows).verdicts
    _write(folder / "verdicts.json", verdicts.json_text([*training_verdicts, *benchmark_verdicts]))
    plots.draw(folder, rows, histories)
    return rows


def sweep_of(run: Path, folder: Path) -> str:
    """The sweep folder a run came from, below `folder` (`.`: `folder` is the sweep); "" for a
    run of its own. A sweep folder holds multirun.yaml."""
    for parent in run.parents:
        if not parent.is_relative_to(folder):
            break
        if (parent / "multirun.yaml").is_file():
            return str(parent.relative_to(folder))
    return ""


def _write(path: Path, text: str) -> None:
    """Replace `path` with `text` whole, never through a link; a name that is not UTF-8 is written
    as `_text` prints it."""
    write_atomically(path, lambda file: file.write(text.encode("utf-8", "backslashreplace")))


def _records_or_why(run: Path) -> RunRecords | str:
    """A run's files as read, or why they cannot be: the run's row says so, and the report goes on
    with the other runs."""
    try:
        return read_run(run)
    except UnreadableRun as unreadable:
        return str(unreadable)


def _bare_row(name: str, status: str, reason: str | None = None) -> Row:
    """A row with no more than its run's name, status and why."""
    return {
        **dict.fromkeys(column.key for column in COLUMNS),
        "run": name,
        "status": status,
        "reason": reason,
        "swept": {},
    }


def speedup_vs_cpu(row: Row, rows: Sequence[Row]) -> float | None:
    """A run's train images/s over that of the CPU run of its sweep with the same values of every
    other swept key (over their mean, for repeats of it); None on the CPU, or where there is no
    such run."""
    speed = row["train_images_per_second"]
    if row["device"] == names.CPU or speed is None:
        return None
    on_cpu = [
        other["train_images_per_second"]
        for other in rows
        if other["device"] == names.CPU
        and other["train_images_per_second"] is not None
        and other.get("sweep") == row.get("sweep")
        and _but_the_device(other) == _but_the_device(row)
    ]
    return speed / (sum(on_cpu) / len(on_cpu)) if on_cpu else None


def trained(rows: Sequence[Row]) -> list[Row]:
    """The rows of training runs (and of runs the report cannot tell, which say why)."""
    return [row for row in rows if not inference_benchmark.is_evaluation(row)]


def _but_the_device(row: Row) -> dict[str, Any]:
    return {key: value for key, value in row["swept"].items() if key != "device"}


def columns(rows: Sequence[Row], in_console: bool) -> list[Column]:
    """The columns of a report on `rows`: COLUMNS with a column per swept key after those of
    IDENTITY, less those empty for every run (and, for the console, the reasons)."""
    swept = dict.fromkeys(key for row in rows for key in row.get("swept", {}))
    after = max(i for i, column in enumerate(COLUMNS) if column.key in IDENTITY) + 1
    selected = next(i for i, column in enumerate(COLUMNS) if column.key == "selected_epoch") + 1
    own = [Column(headline.key, headline.header, headline.text) for headline in own_headlines(rows)]
    every = [
        *COLUMNS[:after],
        *(Column(key, key, swept=True) for key in swept if key not in IDENTITY),
        *COLUMNS[after:selected],
        *own,
        *COLUMNS[selected:],
    ]
    return [
        column
        for column in every
        if (column.in_console or not in_console) and any(column.cell(row) for row in rows)
    ]


def not_started(folder: Path) -> list[str]:
    """The jobs, as paths below `folder`, that sweeps planned but have no folder of (stopped
    before they started, or yet to start). Only Hydra's basic sweeper plans its jobs ahead."""
    names = []
    for multirun_yaml in sorted(folder.rglob("multirun.yaml")):
        sweep = multirun_yaml.parent
        # A job's folder is `<number>` or `<number>_...` (older folders name the rest otherwise).
        started = {entry.name.split("_")[0] for entry in sweep.iterdir() if entry.is_dir()}
        names += [
            str((sweep / name).relative_to(folder))
            for name in planned_job_names(multirun_yaml) or []
            if name.split("_")[0] not in started
        ]
    return names


def markdown(rows: Sequence[Row]) -> str:
    """summary.md: the runs; of the training runs, the repeated configurations, verdicts, batch
    notes, device cards and a back-to-back warning; then the evaluations' Serving section."""
    shown, unit = columns(rows, in_console=False), shared_unit(row.get("unit") for row in rows)
    cells = [[column.heading(unit) for column in shown]]
    cells += [[column.cell(row) for column in shown] for row in rows]
    lines = _markdown_lines(cells)
    runs = trained(rows)
    if repeated := _repeated_configurations(runs):
        lines += ["", repeats.HEADING + ":", "", *_markdown_lines(repeated)]
    judged, warning = verdicts.verdicts_and_warning(runs)
    if judged.lines:
        listed = [f"{'  ' * depth}- {line}" for depth, line in judged.lines]
        lines += ["", verdicts.HEADING + ":", "", *listed]
    if noted := batch_sweep.notes(runs):
        lines += ["", batch_sweep.HEADING + ":", "", *(f"- {note}" for note in noted)]
    if carded := device_cards.cards(runs):
        listed = [f"{'  ' * depth}- {line}" for depth, line in carded]
        lines += ["", device_cards.HEADING + ":", "", *listed]
    if warning:
        lines += ["", warning]
    if benchmark := inference_benchmark.section(rows):
        lines += ["", inference_benchmark.HEADING + ":", "", *_markdown_lines(benchmark.cells)]
        if benchmark.verdict_lines.lines:
            listed = [f"{'  ' * depth}- {line}" for depth, line in benchmark.verdict_lines.lines]
            lines += ["", inference_benchmark.VERDICTS + ":", "", *listed]
        if benchmark.warning:
            lines += ["", benchmark.warning]
    return _text(lines) + "\n"


def _repeated_configurations(rows: Sequence[Row]) -> list[list[str]]:
    """The table of configurations (`experiments.report.repeats`), header first, where any ran
    more than once; none where each ran once, when it would only repeat the runs' table."""
    configurations = repeats.configurations(rows)
    return repeats.cells(configurations) if repeats.repeated(configurations) else []


def _markdown_lines(cells: list[list[str]]) -> list[str]:
    """A Markdown table of `cells`, their first row the header."""
    header, *body = [[cell.replace("|", "\\|") for cell in line] for line in cells]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(line) + " |" for line in body]


def _aligned_lines(cells: list[list[str]]) -> list[str]:
    """A plain-text table of `cells`, each column as wide as its widest cell."""
    cells = [[printable(cell) for cell in line] for line in cells]  # as `_text` will print them
    widths = [max(len(line[i]) for line in cells) for i in range(len(cells[0]))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in cells
    ]


def table(rows: Sequence[Row], folder: Path) -> str:
    """The console's report: a count by status, the runs, why any failed, then the sections of
    summary.md."""
    shown, unit = columns(rows, in_console=True), shared_unit(row.get("unit") for row in rows)
    body = [[column.heading(unit) for column in shown]]
    body += [[column.cell(row) for column in shown] for row in rows]
    lines = _aligned_lines(body)
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    tally = ", ".join(f"{count} {status}" for status, count in counts.items())
    reasons = [f"{row['run']}: {row['reason']}" for row in rows if row["reason"]]
    runs = trained(rows)
    if repeated := _repeated_configurations(runs):
        reasons += [repeats.HEADING + ":", *_aligned_lines(repeated)]
    judged, warning = verdicts.verdicts_and_warning(runs)
    if judged.lines:
        reasons += [verdicts.HEADING + ":", *_indented(judged.lines)]
    if noted := batch_sweep.notes(runs):
        reasons += [batch_sweep.HEADING + ":", *(f"  {note}" for note in noted)]
    if carded := device_cards.cards(runs):
        reasons += [device_cards.HEADING + ":", *_indented(carded)]
    if warning:
        reasons.append(warning)
    if benchmark := inference_benchmark.section(rows):
        reasons += [inference_benchmark.HEADING + ":", *_aligned_lines(benchmark.cells)]
        if benchmark.verdict_lines.lines:
            reasons += [
                inference_benchmark.VERDICTS + ":",
                *_indented(benchmark.verdict_lines.lines),
            ]
        reasons += [benchmark.warning] if benchmark.warning else []
    return _text([f"{len(rows)} run(s) in {folder}: {tally}", *lines, *reasons])


def _indented(lines: Sequence[tuple[int, str]]) -> list[str]:
    """Lines each with its depth below a heading, as the console indents them."""
    return [f"{'  ' * (depth + 1)}{line}" for depth, line in lines]


def _text(lines: Sequence[str]) -> str:
    """The report's `lines` as printed: each one line, whatever a run folder's name or files hold
    (a newline, a terminal's escape: written as `\\n`, `\\x1b`)."""
    return "\n".join(map(printable, lines))
