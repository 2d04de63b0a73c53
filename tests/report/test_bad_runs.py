"""The report reads any folder, and never dies of one bad run: a run folder whose records cannot
be read, or hold another shape than the report reads (invalid YAML, a YAML tag, JSON nested
100,000 deep, a list or text where a number belongs, nulls, rows that are not objects), is a row
`unreadable` that names the record, and the report is made of the good runs. A folder's name
with a newline, a terminal's escape, bytes that are not UTF-8 or a `$` prints on one line as it
is."""

from __future__ import annotations

import csv
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from experiments.report.command import main
from experiments.report.summary import table, write_report
from helpers import SMALL, trained_run

CONFIG, OVERRIDES, HYDRA_YAML = ".hydra/config.yaml", ".hydra/overrides.yaml", ".hydra/hydra.yaml"
TAG = "!!python/object/apply:os.system [echo hello]\n"
NOT_YAML = "is not YAML (did not find expected node content at line 2)"
DEEP = "[" * 100_000 + "]" * 100_000


def _write(record: str, text: str) -> Callable[[Path], None]:
    return lambda run: (run / record).write_text(text)


def _results(**changed: Any) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        results = json.loads((run / "results.json").read_text())
        (run / "results.json").write_text(json.dumps({**results, **changed}))

    return damage


def _all_nulls(run: Path) -> None:
    results = json.loads((run / "results.json").read_text())
    (run / "results.json").write_text(json.dumps(dict.fromkeys(results)))


def _replaced_in_config(old: str, new: str) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        config = (run / CONFIG).read_text()
        assert old in config
        (run / CONFIG).write_text(config.replace(old, new))

    return damage


# A run folder damaged as each says, and the reason its row gives (after the run's name in the
# console; a reader's own message names the file by its path from the working folder: {here}).
BAD = {
    "config_torn": (
        _write(CONFIG, "model:\n  name: [\n"),
        f"{CONFIG} is not YAML (expected the node content, but found '<stream end>' at line 3)",
    ),
    "config_tag": (
        _write(CONFIG, f"trainer: {TAG}"),
        f"{CONFIG} is not YAML (could not determine a constructor for the tag "
        "'tag:yaml.org,2002:python/object/apply:os.system' at line 1)",
    ),
    "config_list": (
        _write(CONFIG, "- trainer\n"),
        f"{CONFIG} is a list, where the run's config (an object) belongs",
    ),
    "config_name": (
        _replaced_in_config("name: lenet", "name: [1, 2]"),
        f"{CONFIG}: model.name is a list, where text or null belongs",
    ),
    "overrides_torn": (
        _write(OVERRIDES, "- [\n"),
        f"{{here}}/bad/overrides_torn/{OVERRIDES} {NOT_YAML}; Hydra wrote it",
    ),
    "overrides_tag": (
        _write(OVERRIDES, f"- {TAG}"),
        f"{{here}}/bad/overrides_tag/{OVERRIDES} is not YAML (could not determine a constructor",
    ),
    "overrides_numbers": (_write(OVERRIDES, "- 5\n"), f"{OVERRIDES}: item 1 is 5, where text"),
    "hydra_torn": (
        _write(HYDRA_YAML, "hydra: [\n"),
        f"{{here}}/bad/hydra_torn/{HYDRA_YAML} {NOT_YAML}",
    ),
    "hydra_choices": (
        _write(HYDRA_YAML, "hydra:\n  runtime:\n    choices: [1]\n"),
        f"{HYDRA_YAML}: hydra.runtime.choices is a list, where an object or null belongs",
    ),
    "results_deep": (_write("results.json", DEEP), "results.json is nested too deep to read"),
    "results_list": (
        _results(test_accuracy=[0.5]),
        "results.json: test_accuracy is a list, where a number or null belongs",
    ),
    "results_text": (
        _results(train_images_per_second="fast"),
        'results.json: train_images_per_second is text ("fast"), where a number belongs',
    ),
    "results_nested": (
        _results(device={"type": "cuda", "ids": ["0"]}),
        'results.json: device.ids[0] is text ("0"), where a whole number belongs',
    ),
    "results_nulls": (
        _all_nulls,
        "results.json: status is null, where text belongs",  # the first in the file
    ),
    "results_object": (_write("results.json", "[1, 2]\n"), "results.json is a list, where an"),
    "metrics_list": (
        _write("metrics.jsonl", "[1, 2]\n"),
        "metrics.jsonl row 1 is a list, where an object belongs",
    ),
    "metrics_number": (
        _write("metrics.jsonl", "5\n"),
        "metrics.jsonl row 1 is 5, where an object belongs",
    ),
    "metrics_string": (
        _write("metrics.jsonl", '"epoch"\n'),
        'metrics.jsonl row 1 is text ("epoch"), where an object belongs',
    ),
    "metrics_deep": (_write("metrics.jsonl", DEEP + "\n"), "metrics.jsonl is nested too deep"),
    "metrics_row": (
        _write("metrics.jsonl", '{"kind": "epoch", "epoch": 1, "train_loss": "low"}\n'),
        'metrics.jsonl epoch row 1: train_loss is text ("low"), where a number belongs',
    ),
}
# Good runs whose folders' names a table would print over two lines, as a terminal's command, as
# bytes it cannot encode, or as mathematics in a figure; and as the report prints them.
NAMES = {
    "new\nline": "new\\nline",
    "clear\x1b[2Jscreen": "clear\\x1b[2Jscreen",
    os.fsdecode(b"latin\xe9"): "latin\\udce9",
    "a$\\frac$b": "a$\\frac$b",
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of one good run, copies of it under names hard to print, and a copy of it
    damaged as each of BAD says."""
    good = trained_run(tmp_path_factory.mktemp("trained"), *SMALL)
    folder = tmp_path_factory.mktemp("report")
    shutil.copytree(good, folder / "good")
    for name in NAMES:
        shutil.copytree(good, folder / name)
    for name, (damage, _) in BAD.items():
        shutil.copytree(good, folder / "bad" / name)
        damage(folder / "bad" / name)
    return folder


@pytest.fixture(scope="module")
def console(folder: Path) -> str:
    """The report's console table (its files written), made in the folder above it, as the
    command would from there."""
    saved = os.getcwd()
    os.chdir(folder.parent)
    try:
        return table(write_report(Path(folder.name)), Path(folder.name))
    finally:
        os.chdir(saved)


def _rows(folder: Path) -> dict[str, dict[str, str]]:
    with open(folder / "summary.csv", newline="", encoding="utf-8", errors="strict") as file:
        return {row["run"]: row for row in csv.DictReader(file)}


@pytest.mark.slow
@pytest.mark.parametrize("name", BAD)
def test_a_run_that_cannot_be_read_is_a_row_naming_its_record(
    folder: Path, console: str, name: str
) -> None:
    reason = BAD[name][1].format(here=folder.name)
    assert f"\nbad/{name}: {reason}" in console
    row = _rows(folder)[f"bad/{name}"]
    assert row["status"] == "unreadable" and reason in row["reason"]
    assert row["model"] == row["test_accuracy"] == row["train_images_per_second"] == ""


def test_the_report_is_made_of_the_good_runs(folder: Path, console: str) -> None:
    assert f"{len(BAD) + len(NAMES) + 1} run(s) in {folder.name}: " in console
    statuses = [row["status"] for row in _rows(folder).values()]
    assert statuses.count("completed") == len(NAMES) + 1
    assert statuses.count("unreadable") == len(BAD)
    good = _rows(folder)["good"]
    assert float(good["test_accuracy"]) > 0 and float(good["train_images_per_second"]) > 0
    # Its configurations, and figures, are the good runs' alone.
    with open(folder / "configurations.csv", newline="", encoding="utf-8") as file:
        (configuration,) = csv.DictReader(file)
    assert configuration["n"] == str(len(NAMES) + 1)
    assert {"throughput.png", "curves.png"} <= {path.name for path in folder.iterdir()}


def test_a_folder_name_prints_on_one_line_as_it_is(folder: Path, console: str) -> None:
    lines = console.splitlines()
    for printed in NAMES.values():
        (line,) = [line for line in lines if line.startswith(f"{printed} ")]
        assert "completed" in line
    assert "\x1b" not in console
    markdown = (folder / "summary.md").read_text(encoding="utf-8")
    runs_table = markdown.split("\n\n")[0].splitlines()
    assert len(runs_table) == 2 + len(BAD) + len(NAMES) + 1  # header, rule and a row per run
    assert all(line.startswith("|") and line.endswith("|") for line in runs_table)
    assert "| new\\nline |" in markdown and "| latin\\udce9 |" in markdown
    # summary.csv holds each name as it is (quoted), in UTF-8 (bytes that are not: escaped).
    assert {"new\nline", "clear\x1b[2Jscreen", "latin\\udce9"} <= _rows(folder).keys()


def test_the_command_says_the_bad_runs_and_exits_0(
    folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(folder.parent)
    assert main([folder.name]) == 0
    said = capsys.readouterr().err
    assert "Traceback" not in said
    assert f": {len(NAMES) + 1} completed, {len(BAD)} unreadable\n" in said
