"""A run whose metrics.jsonl cannot be read (binary, or damaged mid-file) is a row that says so:
`python -m experiments.report` makes the report all the same (more such records:
tests/report/test_bad_runs.py). A sweep's multirun.yaml that cannot
be read is named in one line."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from experiments.report.command import main


@pytest.mark.parametrize(
    ("garbled", "why"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00", "line 1 is not text (byte 0x89 is not UTF-8)"),
        (b'{"kind": "epoch"}\nnot json\n{}\n', "line 2 is not a JSON row (Expecting value)"),
    ],
    ids=["binary", "damaged line"],
)
def test_an_unreadable_metrics_file_is_named_in_its_row_and_the_report_is_made(
    old_run: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    garbled: bytes,
    why: str,
) -> None:
    monkeypatch.chdir(tmp_path)  # the paths in messages are relative to it
    (old_run / "metrics.jsonl").write_bytes(garbled)

    assert main([str(tmp_path)]) == 0

    reason = f"flat_layout_run/metrics.jsonl {why}; each line "
    console = capsys.readouterr().err
    assert "Traceback" not in console
    assert f"\nflat_layout_run: {reason}" in console
    with open(tmp_path / "summary.csv", newline="", encoding="utf-8") as file:
        (row,) = csv.DictReader(file)
    assert row["status"] == "unreadable" and row["reason"].startswith(reason)
    assert "test_accuracy" not in row  # nothing of a run whose records cannot all be read
    assert "summary.md" in {path.name for path in tmp_path.iterdir()}


AWAY = "put it back from a copy, or move it out of the folder"
NOT_YAML = f"; Hydra wrote it as a record of the run or sweep: {AWAY}"


@pytest.mark.parametrize(
    ("written", "said"),
    [
        (
            "",
            "holds no record of a sweep (Hydra writes its sweeper and command line under "
            f"hydra:); {AWAY}",
        ),
        (
            "hydra:\n  sweeper: [\n",
            f"is not YAML (did not find expected node content at line 3){NOT_YAML}",
        ),
        (b"\xff\xfe", f"is not YAML (not text){NOT_YAML}"),
    ],
    ids=["empty", "torn", "binary"],
)
def test_a_sweep_record_that_cannot_be_read_is_named_in_one_line(
    old_run: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    written: str | bytes,
    said: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    record = tmp_path / "multirun.yaml"  # beside the run, as a sweep's is beside its jobs
    if isinstance(written, bytes):
        record.write_bytes(written)
    else:
        record.write_text(written)

    assert main([str(tmp_path)]) == 1
    assert capsys.readouterr().err == f"Error: multirun.yaml {said}\n"


def test_a_results_json_that_links_to_a_device_is_named_not_read(
    old_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = old_run / "results.json"
    results.unlink()
    results.symlink_to("/dev/zero")  # read to its end, it would fill the memory

    main([str(tmp_path)])

    console = capsys.readouterr().err
    assert "Traceback" not in console
    assert f"{results} is not a regular file (a character device); " in console
