"""A run writes only inside its own folder, and never over another run: a record whose place holds
a link to a file outside is replaced, the file left as it was; a folder that holds a run is
refused to a new run, an evaluation and a sweep, and nothing in it changes."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from experiments.core.errors import ExperimentError
from experiments.core.files import write_text_atomically
from experiments.records import checkpoints
from experiments.records.metrics import MetricsWriter
from experiments.records.own_folder import earlier_records
from experiments.report.summary import write_report
from experiments.run.train import train
from helpers import SMALL, compose_config, eval_cli, results, train_cli

OUTSIDE = "a file outside the run folder\n"


@pytest.fixture(scope="module")
def completed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A completed 1-epoch run, `run` in its working folder; tests copy it to change it."""
    cwd = tmp_path_factory.mktemp("runs")
    done = train_cli(cwd, *SMALL, "hydra.run.dir=run")
    assert done.returncode == 0, done.stderr
    return cwd / "run"


def everything_in(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file below `folder` with its bytes and when it last changed (in nanoseconds)."""
    return {
        str(path.relative_to(folder)): (path.read_bytes(), path.stat().st_mtime_ns)
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


@pytest.mark.slow
def test_a_new_run_refuses_a_folder_that_holds_a_run(completed: Path) -> None:
    before = everything_in(completed)
    done = train_cli(completed.parent, *SMALL, "hydra.run.dir=run")
    assert (done.returncode, done.last_line) == (
        1,
        "Error: hydra.run.dir=run holds a run already (its results.json); a new run never "
        "writes over another: resume=run continues that run, replay=run repeats it in a new "
        "folder, or leave hydra.run.dir out for a folder of its own",
    )
    assert everything_in(completed) == before


def test_an_evaluation_refuses_a_folder_that_holds_a_run(completed: Path) -> None:
    before = everything_in(completed)
    done = eval_cli(completed.parent, "ckpt=run", "hydra.run.dir=run")
    assert (done.returncode, done.last_line) == (
        1,
        "Error: hydra.run.dir=run holds a run already (its results.json); an evaluation writes "
        "a folder of its own: leave hydra.run.dir out, or name a folder no run has written",
    )
    assert everything_in(completed) == before


def test_a_sweep_refuses_a_folder_that_holds_a_run_of_an_earlier_sweep(
    completed: Path, tmp_path: Path
) -> None:
    shutil.copytree(completed, tmp_path / "sweep" / "0_model-lenet")
    before = everything_in(tmp_path / "sweep")
    done = train_cli(tmp_path, "-m", *SMALL, "model=lenet,mlp", "hydra.sweep.dir=sweep")
    assert (done.returncode, done.last_line) == (
        1,
        "Error: hydra.sweep.dir=sweep holds a run already (its 0_model-lenet/results.json); a "
        "new sweep never writes over another: leave hydra.sweep.dir out for a folder of its "
        "own, or name a folder no run has written",
    )
    assert everything_in(tmp_path / "sweep") == before


def test_what_shows_that_a_run_or_a_sweep_wrote_a_folder(tmp_path: Path) -> None:
    assert earlier_records(tmp_path / "not there") is None
    (tmp_path / "notes.txt").write_text("a file of one's own")
    assert earlier_records(tmp_path) is None  # a folder of one's own takes a run
    (tmp_path / "multirun.yaml").write_text("")
    assert earlier_records(tmp_path) is None
    assert earlier_records(tmp_path, sweep=True) == tmp_path / "multirun.yaml"
    (tmp_path / ".hydra").symlink_to(tmp_path / "gone")  # a link by a record's name counts too
    assert earlier_records(tmp_path) == tmp_path / ".hydra"


# Each record a resume writes, with a link in its place to a file outside; those it reads first
# (READ) link to a copy of what they held, last.pt's to a copy of the checkpoint it resumes from.
READ = (".hydra/overrides.yaml", "metrics.jsonl")
LINKED = (
    *READ,
    "results.json",
    "environment.json",
    "confusion_matrix.png",
    "train.log",
    ".lock",
    ".hydra/config.yaml",
    ".hydra/hydra.yaml",
)


@pytest.mark.slow
def test_a_resume_replaces_links_to_files_outside_and_leaves_those_files(
    completed: Path, tmp_path: Path
) -> None:
    run, outside = tmp_path / "run", tmp_path / "outside"
    shutil.copytree(completed, run)
    outside.mkdir()
    for name in LINKED:
        target = outside / name.replace("/", "_")
        target.write_text((run / name).read_text() if name in READ else OUTSIDE)
        (run / name).unlink()
        (run / name).symlink_to(target)
    shutil.move(run / checkpoints.LAST, outside / "last.pt")
    (run / checkpoints.LAST).symlink_to(outside / "last.pt")
    before = everything_in(outside)

    done = train_cli(tmp_path, "resume=run", "trainer.epochs=2")

    assert done.returncode == 0, done.stderr
    assert everything_in(outside) == before
    for name in (*LINKED, str(checkpoints.LAST)):
        assert (run / name).is_file() and not (run / name).is_symlink(), name
    assert results(run)["status"] == "completed"
    assert "resuming run after epoch 1" in (run / "train.log").read_text()
    assert "trainer.epochs=2" in (run / ".hydra" / "overrides.yaml").read_text()


def test_a_resume_refuses_a_folder_of_the_run_that_is_a_link_elsewhere(
    completed: Path, tmp_path: Path
) -> None:
    run, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    shutil.copytree(completed, run)
    shutil.move(run / "checkpoints", elsewhere)
    (run / "checkpoints").symlink_to(elsewhere)
    before = everything_in(elsewhere), everything_in(run)
    cfg = compose_config(*SMALL, "trainer.epochs=2", f"resume={run}")
    with pytest.raises(ExperimentError) as refused:
        train(cfg, run)
    assert str(refused.value) == (
        f"resume={run}: {run / 'checkpoints'} is a link to {elsewhere}, and a run writes only "
        "inside its own folder; put the folder itself in the link's place (or remove the link),"
        f" or replay={run} in a new folder"
    )
    assert (everything_in(elsewhere), everything_in(run)) == before
    assert os.readlink(run / "checkpoints") == str(elsewhere)


def test_a_log_appended_to_replaces_a_link_that_points_nowhere(tmp_path: Path) -> None:
    """Opened to append, a file through a dangling link would be made where the link points."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "metrics.jsonl").symlink_to(tmp_path / "made_outside.jsonl")
    with MetricsWriter(tmp_path / "run", writes=True) as metrics_writer:
        metrics_writer.step(epoch=1, steps_before=0, step=1, loss=2.3, speed=100.0, lr=0.1)
    assert not (tmp_path / "made_outside.jsonl").exists()
    assert not (tmp_path / "run" / "metrics.jsonl").is_symlink()
    assert '"train_loss": 2.3' in (tmp_path / "run" / "metrics.jsonl").read_text()


def test_a_record_is_never_written_through_a_link_by_its_temporary_files_name(
    tmp_path: Path,
) -> None:
    """A folder from elsewhere may hold links by the names of this process's temporary files."""
    outside = tmp_path / "outside.txt"
    outside.write_text(OUTSIDE)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / f".results.json.{os.getpid()}.tmp").symlink_to(outside)
    write_text_atomically(tmp_path / "run" / "results.json", "{}\n")
    assert outside.read_text() == OUTSIDE
    assert [path.name for path in (tmp_path / "run").iterdir()] == ["results.json"]


@pytest.mark.slow
def test_the_report_on_a_folder_replaces_links_to_files_outside(
    completed: Path, tmp_path: Path
) -> None:
    folder, outside = tmp_path / "runs", tmp_path / "outside"
    shutil.copytree(completed, folder / "0_model-lenet")
    outside.mkdir()
    for name in ("summary.csv", "summary.md", "curves.png"):
        (outside / name).write_text(OUTSIDE)
        (folder / name).symlink_to(outside / name)
    before = everything_in(outside)
    write_report(folder)
    assert everything_in(outside) == before
    for name in ("summary.csv", "summary.md", "curves.png"):
        assert (folder / name).is_file() and not (folder / name).is_symlink(), name
