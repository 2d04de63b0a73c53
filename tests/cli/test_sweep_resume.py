"""`python train.py -m resume=<sweep folder>`: a real sweep failed, interrupted and cut short,
then resumed: its jobs left run in their own folders, its completed one left as it is."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from experiments.cli.sweep_resume import (
    EARLIER_ATTEMPT,
    jobs_left,
    refuse_another_plan,
    set_aside,
)
from experiments.core.errors import ExperimentError
from helpers import QUICK, env_with_tests_on_path, metrics, numbers, results, train_cli

MODEL = ("model=custom", "model._target_=failing.StopsOnce")


@pytest.mark.slow
def test_a_sweep_goes_on_from_where_it_stopped(tmp_path: Path) -> None:
    env = env_with_tests_on_path()
    first = train_cli(
        tmp_path,
        "-m",
        *QUICK,
        *MODEL,
        "trainer.seed=0,1,2,2",
        env={**env, "FAILING_FIRST_ATTEMPT": "1"},
    )
    assert first.returncode != 0
    (sweep,) = (path.parent for path in (tmp_path / "outputs").rglob("multirun.yaml"))
    assert f"goes on with: python train.py -m resume={sweep.relative_to(tmp_path)}" in first.stderr
    jobs = sorted(path.name for path in sweep.iterdir() if path.is_dir())
    assert jobs == ["0_trainer.seed-0", "1_trainer.seed-1", "2_trainer.seed-2"]
    assert results(sweep / jobs[1])["status"] == "failed"
    assert results(sweep / jobs[2])["status"] == "interrupted"
    completed = (sweep / jobs[0] / "results.json").read_text()
    moved = shutil.copytree(sweep, tmp_path / "moved")

    resumed = train_cli(tmp_path, "-m", f"resume={sweep}", *MODEL, env=env)
    assert resumed.returncode == 0, resumed.stderr
    said = resumed.stdout  # (Hydra's log, where launchers say what they launch)
    assert "1 of 4 jobs completed, left as they are; 3 to run" in said
    assert "1_trainer.seed-1: failed before its first checkpoint, runs again" in said
    assert "2_trainer.seed-2: interrupted, goes on from its last checkpoint" in said
    assert "3_trainer.seed-2: not run" in said
    assert "4 run(s) in" in resumed.stderr and ": 4 completed" in resumed.stderr
    assert (sweep / jobs[0] / "results.json").read_text() == completed
    earlier = sweep / jobs[1] / EARLIER_ATTEMPT
    assert json.loads((earlier / "results.json").read_text())["status"] == "failed"
    # The resumed job's epochs are those of the same seed never stopped (job 3).
    assert numbers(sweep / jobs[2]) == numbers(sweep / "3_trainer.seed-2")
    assert [row["epoch"] for row in metrics(sweep / jobs[1], "epoch")] == [1, 2]

    # A copy of the sweep resumes where it lies now, by another launcher, to the same digits.
    joblib = ("hydra/launcher=joblib", "hydra.launcher.n_jobs=2")
    elsewhere = train_cli(tmp_path, "-m", f"resume={moved}", *MODEL, *joblib, env=env)
    assert elsewhere.returncode == 0, elsewhere.stderr
    assert "Joblib.Parallel(n_jobs=2" in elsewhere.stdout
    assert ": 4 completed" in elsewhere.stderr
    assert numbers(moved / jobs[2]) == numbers(sweep / jobs[2])


def _job(sweep: Path, name: str, status: str | None, checkpoint: bool = False) -> None:
    folder = sweep / name
    (folder / ".hydra").mkdir(parents=True)
    if status is not None:
        (folder / "results.json").write_text(json.dumps({"status": status}))
    if checkpoint:
        (folder / "checkpoints").mkdir()
        (folder / "checkpoints" / "last.pt").write_bytes(b"")


def test_what_is_left_of_a_sweep_is_read_from_its_job_folders(tmp_path: Path) -> None:
    _job(tmp_path, "0_a", "completed")
    _job(tmp_path, "1_b", "interrupted", checkpoint=True)
    _job(tmp_path, "2_c", "failed")
    _job(tmp_path, "3_d", None)
    left = jobs_left(tmp_path, ["0_a", "1_b", "2_c", "3_d", "4_e"], "resume=s")
    assert [(job.name, job.was, job.from_checkpoint) for job in left] == [
        ("1_b", "interrupted", True),
        ("2_c", "failed", False),
        ("3_d", "no results", False),
        ("4_e", "not run", False),
    ]
    assert left[0].overrides(tmp_path) == [
        "hydra.sweep.subdir=1_b",
        f"resume={tmp_path / '1_b'}",
        "hydra.output_subdir=null",
    ]
    assert left[1].overrides(tmp_path) == ["hydra.sweep.subdir=2_c"]


@pytest.mark.parametrize(
    ("folders", "said"),
    [
        (["0_a", "1_x"], "its job 1 is planned as 1_b, but its folder is 1_x"),
        (["0_a", "1_b", "7_z"], "its folder holds 7_z, which is no job of its sweep's plan"),
    ],
)
def test_a_folder_of_another_plan_is_refused(tmp_path: Path, folders: list[str], said: str) -> None:
    for name in folders:
        _job(tmp_path, name, "failed")
    with pytest.raises(Exception, match=said):
        jobs_left(tmp_path, ["0_a", "1_b"], "resume=s")


def test_an_earlier_attempt_is_set_aside_inside_its_folder(tmp_path: Path) -> None:
    _job(tmp_path, "0_a", "failed")
    folder = tmp_path / "0_a"
    assert set_aside(folder) == folder / EARLIER_ATTEMPT
    (folder / "results.json").write_text("{}")
    assert set_aside(folder) == folder / f"{EARLIER_ATTEMPT}-2"
    assert sorted(path.name for path in folder.iterdir()) == [
        ".hydra",
        EARLIER_ATTEMPT,
        f"{EARLIER_ATTEMPT}-2",
    ]


def test_a_resumed_sweep_takes_only_how_to_launch_its_jobs(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    multirun = {
        "hydra": {
            "sweeper": {"_target_": "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"},
            "overrides": {"task": ["trainer.seed=0,1", "device=cpu"]},
        }
    }
    (sweep / "multirun.yaml").write_text(json.dumps(multirun))
    done = train_cli(tmp_path, "-m", f"resume={sweep}", "trainer.epochs=5")
    assert done.returncode == 1
    assert done.last_line.startswith("Error: trainer.epochs=5: resume=") and "takes only how" in (
        done.last_line
    )
    multirun["hydra"]["sweeper"]["_target_"] = "hydra_plugins.hydra_optuna_sweeper.OptunaSweeper"
    (sweep / "multirun.yaml").write_text(json.dumps(multirun))
    done = train_cli(tmp_path, "-m", f"resume={sweep}")
    assert done.returncode == 1 and "only a sweep of Hydra's basic sweeper" in done.last_line


@pytest.mark.parametrize(
    ("names", "said"),
    [
        (["0_a", "1_c"], "plan job 1_c where the sweep planned 1_b now"),
        (["0_a", "1_b", "2_c"], "plan 3 jobs where the sweep planned 2 now"),
    ],
)
def test_configs_that_plan_other_jobs_now_are_refused_in_one_line(
    names: list[str], said: str
) -> None:
    refuse_another_plan(["0_a", "1_b"], ["0_a", "1_b"], "resume=s")
    refuse_another_plan(names, None, "resume=s")  # (Optuna's: no plan to hold it to)
    with pytest.raises(ExperimentError) as refused:
        refuse_another_plan(names, ["0_a", "1_b"], "resume=s")
    assert str(refused.value) == (
        f"resume=s: the configs it was made from {said}; resume it where those configs are as "
        "they were"
    )
