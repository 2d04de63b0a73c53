"""tracker=wandb, offline on a machine without a W&B login, read back with W&B's own reader of its
run files (`wandb leet inspect --json`): a run per run folder, a sweep's runs in one group, a
resume that carries on the same run, and a server that cannot be reached costing one warning."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from helpers import QUICK, killed_in_epoch_2, metrics, results, train_cli, uninstalled

pytest.importorskip("wandb")

OFFLINE = {"WANDB_MODE": "offline"}  # whatever login the machine running the tests has


def records(run_file: Path) -> list[dict[str, Any]]:
    """The records of a run's .wandb file, as W&B's own reader prints them."""
    shown = subprocess.run(
        [sys.executable, "-m", "wandb", "leet", "inspect", "--json", str(run_file)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return [json.loads(line) for line in shown.stdout.splitlines() if line.startswith("{")]


def run_files(run_dir: Path) -> list[Path]:
    """The run folder's W&B run files, oldest first (a resume writes one of its own)."""
    return sorted(run_dir.glob("wandb/offline-run-*/run-*.wandb"))


def logged(found: list[dict[str, Any]], tag: str) -> list[tuple[int, float]]:
    """(step, value) of `tag` in the history records (a step's rows, merged by W&B)."""
    rows = [record["history"]["item"] for record in found if record["type"] == "history"]
    return [(row["_step"], row[tag]) for row in rows if tag in row]


@pytest.mark.slow
def test_a_run_is_a_wandb_run_with_its_config_tags_numbers_and_picture(tmp_path: Path) -> None:
    done = train_cli(tmp_path, *QUICK, "model=lenet", "tracker=[csv,wandb]", env=OFFLINE)
    assert done.returncode == 0, done.stderr
    run_dir = done.run_dir
    (run_file,) = run_files(run_dir)
    found = records(run_file)
    (run,) = [record["run"] for record in found if record["type"] == "run"]
    assert (run["display_name"], run["run_id"]) == (
        run_dir.name,
        results(run_dir)["trackers"]["wandb"],
    )
    assert (run["config"]["update"]["model.name"], run["config"]["update"]["trainer.epochs"]) == (
        "lenet",
        2,
    )
    assert {"model=lenet", "device=cpu", "seed=0"} <= set(run["tags"])
    assert logged(found, "train/loss") == [
        (row["global_step"], pytest.approx(row["train_loss"])) for row in metrics(run_dir, "step")
    ]
    assert logged(found, "test/accuracy") == [
        (row["global_step"], pytest.approx(row["test_accuracy"]))
        for row in metrics(run_dir, "epoch")
    ]
    summary: dict[str, Any] = {}
    for record in found:
        if record["type"] == "summary":
            summary |= record["summary"].get("update", {})
    assert summary["whole_run/test_accuracy"] == pytest.approx(results(run_dir)["test_accuracy"])
    assert summary["model/parameters"] == results(run_dir)["model_parameters"]
    assert list(run_file.parent.glob("files/media/images/test/confusion_matrix*.png"))
    (exited,) = [record["exit"] for record in found if record["type"] == "exit"]
    assert exited.get("exit_code", 0) == 0


@pytest.mark.slow
def test_a_sweeps_runs_share_a_group_named_by_its_folder(tmp_path: Path) -> None:
    done = train_cli(
        tmp_path, "-m", *QUICK, "model=lenet", "tracker=wandb", "trainer.seed=0,1", env=OFFLINE
    )
    assert done.returncode == 0, done.stderr
    (sweep,) = {str(run_dir.parent.relative_to(tmp_path)) for run_dir in done.run_dirs}
    for run_dir in done.run_dirs:
        (run_file,) = run_files(run_dir)
        (run,) = [record["run"] for record in records(run_file) if record["type"] == "run"]
        assert (run["run_group"], run["display_name"]) == (sweep, run_dir.name)
        assert f"sweep={sweep}"[:64] in run["tags"]


@pytest.mark.slow
def test_a_resumed_run_carries_on_its_wandb_run_and_sends_each_step_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WANDB_MODE", "offline")  # for the killed process too
    run = (*QUICK, "model=tudui", "trainer.epochs=2", "trainer.limit_train_batches=30")
    run_dir = killed_in_epoch_2(tmp_path, *run, "tracker=wandb")
    run_id = results(run_dir)["trackers"]["wandb"]

    # Typed again: a run folder's saved trackers are left out (it chooses nothing written
    # outside it).
    done = train_cli(tmp_path, f"resume={run_dir}", "tracker=wandb")
    assert done.returncode == 0, done.stderr
    assert results(run_dir)["trackers"] == {"wandb": run_id}
    before, after = run_files(run_dir)
    assert {path.stem for path in (before, after)} == {f"run-{run_id}"}
    steps = [step for path in (before, after) for step, _ in logged(records(path), "train/loss")]
    assert steps == [row["global_step"] for row in metrics(run_dir, "step")]


@pytest.mark.slow
def test_without_a_reachable_server_the_run_goes_on_after_one_warning_and_seconds(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    started = time.monotonic()
    done = train_cli(
        tmp_path,
        *QUICK,
        "model=lenet",
        "tracker=[csv,wandb]",
        "tracker.wandb.timeout=2",
        env={
            "WANDB_MODE": "online",
            "WANDB_API_KEY": "a" * 40,
            "WANDB_BASE_URL": "http://127.0.0.1:9",  # (discard: nothing listens)
            "HOME": str(home),
        },
        own_process=True,  # W&B's settings are its process's from its first run on
    )
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if "W&B" in line or "wandb" in line]
    assert len(said) == 1, said
    assert "W&B failed, and the run goes on without it" in said[0]
    assert took < 60  # W&B's own wait for its start is 90 s
    assert results(done.run_dir)["status"] == "completed"
    assert (done.run_dir / "metrics.csv").is_file()
    # wandb-core's log beside the runs; nothing in the home folder (~/.cache/wandb by default).
    assert list((tmp_path / "outputs" / "wandb" / "logs").glob("core-debug-*.log"))
    assert not home.exists()


def test_without_wandb_installed_the_run_says_how_to_get_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uninstalled(monkeypatch, "wandb", "wandb_run")
    done = train_cli(tmp_path, *QUICK, "model=lenet", "tracker=wandb")
    assert done.returncode == 1
    assert done.last_line.endswith(
        "Error: tracker=wandb needs wandb, which is not installed: pip install -e "
        "'.[trackers]' (or pip install wandb)"
    )


def test_a_run_goes_offline_without_a_login(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from experiments.records.wandb_run import WandbRun

    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc
    assert WandbRun(Path("run")).mode == "offline"
    (tmp_path / ".netrc").write_text("machine api.wandb.ai login user password " + "b" * 40)
    (tmp_path / ".netrc").chmod(0o600)
    assert WandbRun(Path("run")).mode == "online"  # `wandb login` left its key
    (tmp_path / ".netrc").unlink()
    assert WandbRun(Path("run")).mode == "offline"
    monkeypatch.setenv("WANDB_API_KEY", "a" * 40)
    assert WandbRun(Path("run")).mode == "online"
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert WandbRun(Path("run")).mode == "disabled"  # the user's word
