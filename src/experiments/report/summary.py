"""The report on a folder of runs (any folder with a `.hydra/` snapshot): summary.csv and .md,
configurations.csv, serving.csv, verdicts.json and the plots."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.config.metric_names import TEST, VAL
from experiments.config.naming import planned_job_names
from experiments.core.errors import ExperimentError
from experiments.core.files import found_below, write_atomically
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
    shared_peaks,
    to_target,
    verdicts,
)
from experiments.report.headlines import HEADLINES, headlines, own_headlines
from experiments.report.prices import Prices
from experiments.report.repeats import Row
from experiments.report.run_records import RunRecords, UnreadableRun, read_run
from experiments.report.swept import swept_values, value_of
from experiments.training.history import History
from experiments.training.selection import selected_epoch


def _seconds(value: float | str) -> str:
    return value if isinstance(value, str) else f"{value:.1f}"


@dataclass(frozen=True)
class Column:
    """A column of summary.csv, summary.md and the console table."""

    key: str
    header: str  # "{one}", "{many}", "{rate}": the runs' unit (images, or a table's rows)
    show: Callable[[Any], str] = str
    in_console: bool = True
    swept: bool = False

    def heading(self, unit: Unit) -> str:
        return self.header if self.swept else self.header.format_map(vars(unit))

    def value(self, row: Row) -> Any:
        return row.get("swept", {}).get(self.key) if self.swept else row.get(self.key)

    def cell(self, row: Row) -> str:
        value = self.value(row)
        return "" if value is None else self.show(value)


UNREADABLE = "unreadable"

# The groups with a column of their own, swept or not; the other swept keys follow them.
IDENTITY = ("model", "dataset", "device", "placement")


COLUMNS = [
    Column("run", "run"),
    Column("model", "model"),
    Column("model_parameters", "params", short_count),
    Column("model_flops_per_image", "FLOPs/{one}", short_count),
    Column("model_training_flops_per_image", "train FLOPs/{one}", short_count),
    Column("dataset", "dataset"),
    Column("device", "device"),
    Column("placement", "placement"),
    Column("loader", "loader"),  # memory or stream, for data of the user's own
    Column("status", "status"),
    Column("reason", "reason", in_console=False),
    Column("selected_epoch", "epoch"),
    *(Column(headline.key, headline.header, headline.metric.text) for headline in HEADLINES),
    Column("test_images", "test {many}"),
    Column("train_images_per_second", "train {rate}", "{:,.0f}".format),
    Column("speedup_vs_cpu", "vs cpu", "{:.1f}x".format),
    Column("host_busy", "host", lambda busy: "busy" if busy else ""),
    Column("device_peak_flops", "peak FLOP/s", short_count),
    Column("device_peak_precision", "peak in"),
    Column("mfu", "MFU", "{:.1%}".format),
    Column("datasheet_peak_flops", "datasheet FLOP/s", short_count),
    Column("datasheet_peak_of", "datasheet of"),  # the GPU model, or device.peak_flops
    Column("mfu_datasheet", "MFU (datasheet)", "{:.1%}".format),
    Column("time_to_accuracy", "time to acc (s)", _seconds),
    Column("seconds_per_epoch", "s/epoch", "{:.2f}".format),
    Column("peak_host_memory_mb", "host MiB", "{:,.0f}".format),
    Column("peak_cuda_memory_mb", "cuda MiB", "{:,.0f}".format),
    Column("train_joules_per_image", "train J/{one}", "{:.3g}".format),
    Column("latency_p50_ms", "p50 ms", "{:.3g}".format),
    Column("latency_p95_ms", "p95 ms", "{:.3g}".format),
    Column("latency_p99_ms", "p99 ms", "{:.3g}".format),
    Column(inference_benchmark.BATCH, "served batch"),
    Column("serving_images_per_second", "served {rate}", "{:,.0f}".format),
    Column("serving_peak_memory_mb", "served MiB", "{:,.0f}".format),
    Column("serving_memory_of", "served MiB of", in_console=False),
    Column("serving_joules_per_image", "served J/{one}", "{:.3g}".format),
    Column("wait_share", "data wait", "{:.1%}".format),
    Column("compute_share", "compute", "{:.1%}".format),
    Column("copy_share", "copy (GPU time, overlaps)", "{:.1%}".format),
]


def find_runs(folder: Path) -> list[Path]:
    """Every run folder at or below `folder`, sweep jobs in order."""
    snapshots = found_below(folder, ".hydra")
    runs = [path.parent for path in snapshots if (path / "config.yaml").is_file()]
    return sorted(runs, key=lambda run: _natural_key(run.relative_to(folder)))


def _natural_key(path: Path) -> list[Any]:
    # "10_..." after "9_...".
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
    row["gpus"] = gpus_used(results)
    # For the figures of speed against batch size (no columns).
    row.update({key: results.get(key) for key in ("batch_size", "batch_search")})
    row["largest_batch"] = (results.get("batch_search") or {}).get("largest")
    if "device" in results:
        device = results["device"]
        row["device"] = device.get("used", device.get("requested"))
        row["device_name"] = device.get("name")  # for the device cards: no column
        row["device_threads"] = device.get("threads")  # a CPU's peak is of its threads
    row.update({key: results[key] for key in row.keys() & results.keys() & FROM_RESULTS})
    if records.evaluation:
        row.update(inference_benchmark.evaluation_fields(results))
    if reached := results.get("time_to_accuracy"):
        seconds = reached["seconds"]
        row["time_to_accuracy"] = "not reached" if seconds is None else seconds
        # What it was the time to, for the figures (no column); older runs': accuracy.
        metric = reached.get("metric", "accuracy")
        better = reached.get("better", "max")
        row["accuracy_target"] = (reached.get("target"), reached.get("split"), metric, better)
        row |= to_target.run_fields(reached, history, row["train_joules_per_image"])
    if records.own_task:
        row["own_headlines"] = headlines(measures)
        row.update({headline.key: results.get(headline.key) for headline in row["own_headlines"]})
    tested = measures.headline.key(TEST)
    # A run still going, or stopped: its epochs so far.
    if history and row["selected_epoch"] is None:
        selected = selected_epoch(history, records.monitor)
        val = measures.headline.key(VAL)
        row |= {
            "selected_epoch": selected["epoch"],
            val: selected.get(val),
            tested: selected[tested],
        }
        row[measures.final_key(TEST)] = history[-1][tested]
    if history:
        row["seconds_per_epoch"] = sum(e["epoch_seconds"] for e in history) / len(history)
    # Older runs do not give the split's size.
    in_split = results.get("test_split_images")
    measured = in_split and row.get(tested) is not None and "test_images" in results
    row["test_images"] = part_of_split(results["test_images"], in_split) if measured else None
    if impossible := plausible.left_out(row):
        row["reason"] = "; ".join(filter(None, [row["reason"], *impossible]))
    return row


def _run_name(run_dir: Path, folder: Path) -> str:
    return str(run_dir.relative_to(folder)) if run_dir != folder else run_dir.name


FROM_RESULTS = (
    ResultsFile.__required_keys__
    | ResultsFile.__optional_keys__
    | {headline.key for headline in HEADLINES}
) - {"model", "dataset", "device", "placement", "status"}


def gpus_used(results: dict[str, Any]) -> int | None:
    """How many GPUs a run computed on over all its processes; None on the CPU."""
    device = results.get("device", {})
    if device.get("type") in (None, names.CPU):
        return None
    return len(device.get("ids") or [device.get("index")]) * results.get("world_size", 1)


def _status(results: dict[str, Any]) -> str:
    status = results.get("status")
    if status is None:
        return "no results"
    if status == "running" and alive_here(results) is False:
        return "crashed"
    return status


def write_report(
    folder: Path, across_sweeps: bool = False, prices: Prices | None = None
) -> list[dict[str, Any]]:
    """Write the report into `folder`; its rows. `across_sweeps`: compared as if of one sweep;
    `prices`: each device's, for the cost to the target (ExperimentError for a device not used)."""
    rows, histories = report_rows(folder, across_sweeps, prices)
    shown = columns(rows, in_console=False)
    cells = [[column.value(row) for column in shown] for row in rows]
    _write(folder / "summary.csv", repeats.csv_of([[column.key for column in shown], *cells]))
    _write(folder / "summary.md", markdown(rows))
    configurations = repeats.configurations(trained(rows))
    if trained(rows):
        _write(folder / "configurations.csv", repeats.csv_text(configurations))
    if (benchmark_csv := inference_benchmark.csv_text(rows)) is not None:
        _write(folder / "serving.csv", benchmark_csv)
    training_verdicts = [
        *verdicts.verdict_lines(configurations).verdicts,
        *device_cards.to_target_verdicts(configurations),
    ]
    benchmark_verdicts = inference_benchmark.benchmark_verdict_lines(rows).verdicts
    _write(folder / "verdicts.json", verdicts.json_text([*training_verdicts, *benchmark_verdicts]))
    plots.draw(folder, rows, histories)
    return rows


def report_rows(
    folder: Path, across_sweeps: bool = False, prices: Prices | None = None
) -> tuple[list[Row], list[History]]:
    """The rows of the runs at or below `folder`, in order, and their epochs; nothing written."""
    pairs: list[tuple[Row, History]] = []
    read = {run: _records_or_why(run) for run in find_runs(folder)}
    good = {run: records for run, records in read.items() if isinstance(records, RunRecords)}
    swept = swept_values(good, folder)
    for run, records in read.items():
        if isinstance(records, str):  # why it cannot be read
            pairs.append((_bare_row(_run_name(run, folder), UNREADABLE, records), []))
            continue
        row = summary_row(run, folder, records)
        # A group with its own column is named as there (the device used, for device=auto).
        row["swept"] = {
            key: row[key] if key in IDENTITY and row[key] is not None else value
            for key, value in swept[run].items()
        }
        row["sweep"] = "" if across_sweeps else sweep_of(run, folder)
        # Every key its command line gave, resolved: what a sweep against a sweep says differs.
        row["given"] = {key: value_of(records, key) for key in records.given}
        pairs.append((row, records.history))
    pairs += [(_bare_row(name, "not run"), []) for name in not_started(folder)]
    pairs.sort(key=lambda pair: _natural_key(Path(pair[0]["run"])))
    rows, histories = [row for row, _ in pairs], [history for _, history in pairs]
    shared_peaks.share_peaks(trained(rows))
    if prices is not None:
        if refused := prices.refusal(row["device"] for row in trained(rows) if row["device"]):
            raise ExperimentError(refused)
        to_target.price(trained(rows), prices)
    for row in rows:
        row["speedup_vs_cpu"] = speedup_vs_cpu(row, rows)
    return rows, histories


def sweep_of(run: Path, folder: Path) -> str:
    """The sweep folder a run came from, below `folder`; "" for a run of its own."""
    for parent in run.parents:
        if not parent.is_relative_to(folder):
            break
        if (parent / "multirun.yaml").is_file():
            return str(parent.relative_to(folder))
    return ""


def _write(path: Path, text: str) -> None:
    # Replaced whole, never through a link; a name that is not UTF-8 as `_text` prints it.
    write_atomically(path, lambda file: file.write(text.encode("utf-8", "backslashreplace")))


def _records_or_why(run: Path) -> RunRecords | str:
    try:
        return read_run(run)
    except UnreadableRun as unreadable:
        return str(unreadable)


def _bare_row(name: str, status: str, reason: str | None = None) -> Row:
    empty = dict.fromkeys(column.key for column in COLUMNS)
    return empty | {"run": name, "status": status, "reason": reason, "swept": {}}


def speedup_vs_cpu(row: Row, rows: Sequence[Row]) -> float | None:
    """A run's train images/s over its matching CPU runs' mean; None where there are none."""
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
    """COLUMNS and the swept keys, less those empty for every run."""
    swept = dict.fromkeys(key for row in rows for key in row.get("swept", {}))
    after = max(i for i, column in enumerate(COLUMNS) if column.key in IDENTITY) + 1
    selected = next(i for i, column in enumerate(COLUMNS) if column.key == "selected_epoch") + 1
    own = [Column(each.key, each.header, each.metric.text) for each in own_headlines(rows)]
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
    """The jobs sweeps planned but have no folder of (only Hydra's basic sweeper plans ahead)."""
    names = []
    for multirun_yaml in sorted(found_below(folder, "multirun.yaml")):
        sweep = multirun_yaml.parent
        # A job's folder is `<number>` or `<number>_...`.
        started = {entry.name.split("_")[0] for entry in sweep.iterdir() if entry.is_dir()}
        names += [
            str((sweep / name).relative_to(folder))
            for name in planned_job_names(multirun_yaml) or []
            if name.split("_")[0] not in started
        ]
    return names


def markdown(rows: Sequence[Row]) -> str:
    """summary.md: the runs' table, then `_sections`."""
    lines = _markdown_lines(_cells(rows, in_console=False))
    return _text([*lines, *_sections(rows, in_console=False)]) + "\n"


def _cells(rows: Sequence[Row], in_console: bool) -> list[list[str]]:
    shown, unit = columns(rows, in_console), shared_unit(row.get("unit") for row in rows)
    header = [column.heading(unit) for column in shown]
    return [header, *([column.cell(row) for column in shown] for row in rows)]


def _sections(rows: Sequence[Row], in_console: bool) -> list[str]:
    lines: list[str] = []
    tabled = aligned_lines if in_console else _markdown_lines

    def section(heading: str, body: list[str]) -> None:
        lines.extend([heading + ":", *body] if in_console else ["", heading + ":", "", *body])

    def listed(items: Sequence[tuple[int, str]]) -> list[str]:
        if in_console:
            return [f"{'  ' * (depth + 1)}{line}" for depth, line in items]
        return [f"{'  ' * depth}- {line}" for depth, line in items]

    def alone(line: str | None) -> None:
        if line:
            lines.extend([line] if in_console else ["", line])

    runs = trained(rows)
    configurations = repeats.configurations(runs)
    if repeats.repeated(configurations):  # else it would only repeat the runs' table
        section(repeats.HEADING, tabled(repeats.cells(configurations)))
    judged, warning = verdicts.verdicts_and_warning(runs)
    if judged.lines:
        section(verdicts.HEADING, listed(judged.lines))
    if noted := batch_sweep.notes(runs):
        section(batch_sweep.HEADING, listed([(0, note) for note in noted]))
    if carded := device_cards.cards(runs):
        section(device_cards.HEADING, listed(carded))
    alone(shared_peaks.note(runs))
    alone(warning)
    if benchmark := inference_benchmark.section(rows):
        section(inference_benchmark.HEADING, tabled(benchmark.cells))
        if benchmark.verdict_lines.lines:
            section(inference_benchmark.VERDICTS, listed(benchmark.verdict_lines.lines))
        alone(benchmark.warning)
    return lines


def _markdown_lines(cells: list[list[str]]) -> list[str]:
    header, *body = [[cell.replace("|", "\\|") for cell in line] for line in cells]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(line) + " |" for line in body]


def aligned_lines(cells: list[list[str]]) -> list[str]:
    """The table's lines, each column as wide as its widest cell."""
    cells = [[printable(cell) for cell in line] for line in cells]  # as `_text` will print them
    widths = [max(len(line[i]) for line in cells) for i in range(len(cells[0]))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in cells
    ]


def table(rows: Sequence[Row], folder: Path) -> str:
    """The console's report: a count by status, the runs, why any failed, then `_sections`."""
    counts = Counter(row["status"] for row in rows)
    tally = ", ".join(f"{count} {status}" for status, count in counts.items())
    runs = aligned_lines(_cells(rows, in_console=True))
    lines = [f"{len(rows)} run(s) in {folder}: {tally}", *runs]
    lines += [f"{row['run']}: {row['reason']}" for row in rows if row["reason"]]
    return _text([*lines, *_sections(rows, in_console=True)])


def _text(lines: Sequence[str]) -> str:
    """`lines` as printed: each one line, whatever a run folder's name or files hold."""
    return "\n".join(map(printable, lines))
