"""Sweeps: a folder per job, failures kept apart, the report at the end, and the launchers."""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from omegaconf import OmegaConf
from PIL import Image

import failing
import side_by_side
from experiments.devices.free_cores import CoreShare, share_of_cores
from experiments.report import batch_sweep, scaling, verdicts
from experiments.report.command import main as report_main
from experiments.report.summary import table, write_report
from helpers import (
    QUICK,
    ROOT,
    SMALL,
    Finished,
    compose_config,
    env_with_tests_on_path,
    results,
    train_cli,
)

QUICK_SWEEP = [override for override in QUICK if override != "device=cpu"]
NO_VERDICT = "no verdict; repeat with `-m trainer.seed=0,1,2`"


def summary(folder: Path) -> list[dict[str, str]]:
    with open(folder / "summary.csv", newline="") as file:
        return list(csv.DictReader(file))


def sweep_dir(cwd: Path) -> Path:
    (folder,) = (path.parent for path in (cwd / "outputs").rglob("multirun.yaml"))
    return folder


def assert_plot(path: Path) -> None:
    assert path.stat().st_size > 10_000
    with Image.open(path) as image:
        assert image.format == "PNG" and image.width > 400 and image.height > 300


@pytest.mark.slow
def test_a_two_by_two_sweep_reports_four_rows_and_plots(tmp_path: Path) -> None:
    done = train_cli(
        tmp_path,
        "-m",
        "model=tudui,lenet",
        "placement=to_device,cuda_call",
        "device=cpu",
        *QUICK_SWEEP,
    )
    assert done.returncode == 0, done.stderr
    folder = sweep_dir(tmp_path)
    names = sorted(path.name for path in folder.iterdir() if path.is_dir())
    assert names == [
        "0_model-tudui+placement-to_device",
        "1_model-tudui+placement-cuda_call",
        "2_model-lenet+placement-to_device",
        "3_model-lenet+placement-cuda_call",
    ]
    rows = summary(folder)
    assert [row["run"] for row in rows] == names
    # Columns empty for every run are left out: no failure, validation split or CUDA memory.
    assert not {"reason", "val_accuracy", "peak_cuda_memory_mb"} & set(rows[0])
    for row in rows:
        result = results(folder / row["run"])
        assert (row["model"], row["placement"], row["device"]) == (
            result["model"],
            result["placement"],
            "cpu",
        )
        assert row["status"] == "completed"
        assert int(row["selected_epoch"]) == result["selected_epoch"] == 2
        assert float(row["test_accuracy"]) == result["test_accuracy"]
        assert float(row["final_test_accuracy"]) == result["final_test_accuracy"]
        assert row["test_images"] == "128 of 1,000"  # trainer.limit_eval_images=128
        assert float(row["train_images_per_second"]) == result["train_images_per_second"]
        assert float(row["seconds_per_epoch"]) == pytest.approx(
            sum(result["epoch_seconds"]) / len(result["epoch_seconds"])
        )
        assert float(row["peak_host_memory_mb"]) > 50
        shares = [float(row[share]) for share in ("wait_share", "copy_share", "compute_share")]
        # Shares of the training time, how big each is depends on the machine: not tested here.
        assert all(0 <= share < 1 for share in shares) and shares[2] > 0 and sum(shares) <= 1 + 1e-9
    markdown = (folder / "summary.md").read_text().splitlines()
    assert "| 0_model-tudui+placement-to_device | tudui |" in markdown[2]
    # Four runs, then one verdict for all: each configuration ran once.
    assert markdown[6:] == ["", verdicts.HEADING + ":", "", "- one run each: " + NO_VERDICT]
    assert_plot(folder / "throughput.png")
    assert_plot(folder / "curves.png")
    assert not (folder / "scaling.png").exists()  # drawn only for a sweep over batch sizes
    assert "4 run(s) in " in done.stderr and ": 4 completed" in done.stderr


def assert_one_failed_and_reported(done: Finished, cwd: Path) -> None:
    assert done.returncode == 1
    folder = sweep_dir(cwd)
    completed, failed = summary(folder)
    assert (completed["run"], completed["status"]) == ("0_device-cpu", "completed")
    assert (failed["run"], failed["status"]) == ("1_device-cuda-7", "failed")
    assert failed["reason"].startswith("device=cuda:7 needs a CUDA GPU, but this machine has no")
    assert f"| failed | {failed['reason']} |" in (folder / "summary.md").read_text()
    assert ": 1 completed, 1 failed" in done.stderr and done.last_line.startswith("report: ")
    assert "Error executing job" not in done.stderr and "Traceback" not in done.stderr
    assert_plot(folder / "throughput.png")


LAUNCHERS = {
    "basic": [],
    "joblib": ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"],
    "submitit_local": ["hydra/launcher=submitit_local"],
}


@pytest.mark.slow
@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_a_job_that_fails_leaves_the_others_and_the_report_says_why(
    tmp_path: Path, launcher: str
) -> None:
    done = train_cli(
        tmp_path,
        "-m",
        *LAUNCHERS[launcher],
        "device=cpu,cuda:7",
        "model=lenet",
        *QUICK_SWEEP,
    )
    assert_one_failed_and_reported(done, tmp_path)
    pids = {results(run)["process"]["pid"] for run in done.run_dirs}
    assert len(pids) == (1 if launcher == "basic" else 2)  # side by side: a process per job


@pytest.mark.slow
def test_the_users_full_error_does_not_cost_a_sweep_its_report(tmp_path: Path) -> None:
    done = train_cli(
        tmp_path,
        "-m",
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=2",
        "device=cpu,cuda:7",
        "model=lenet",
        *QUICK_SWEEP,
        env={"HYDRA_FULL_ERROR": "1"},
        own_process=True,  # joblib's workers, reused across sweeps, keep the env they started with
    )
    assert done.returncode == 1
    assert [row["status"] for row in summary(sweep_dir(tmp_path))] == ["completed", "failed"]
    assert "Traceback" in done.stderr  # asked for: the failed job's, in its log line


@pytest.mark.slow
def test_a_worker_killed_by_the_system_still_leaves_the_report(tmp_path: Path) -> None:
    # Job 1 kills its worker at its first step once job 0 is training (its records written);
    # joblib then stops the sweep (and job 0's worker) before job 2 starts.
    models = ["SlowLeNet", "KillsItsProcess", "SlowLeNet"]
    done = train_cli(
        tmp_path,
        "-m",
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=2",
        "model=custom",
        f"model._target_={','.join(f'failing.{model}' for model in models)}",
        "device=cpu",
        *QUICK_SWEEP,
        env={**env_with_tests_on_path(), failing.STARTED_FILE: str(tmp_path / "started")},
        own_process=True,  # (as above)
    )
    assert done.returncode == 1
    rows = summary(sweep_dir(tmp_path))
    assert [(row["run"], row["status"]) for row in rows] == [
        ("0_model._target_-failing.SlowLeNet", "crashed"),
        ("1_model._target_-failing.KillsItsProcess", "crashed"),
        ("2_model._target_-failing.SlowLeNet", "not run"),
    ]
    assert ": 2 crashed, 1 not run" in done.stderr
    assert "test_images" not in rows[0]  # no test accuracy to qualify
    assert done.last_line.startswith("Error: TerminatedWorkerError: A worker process")


def test_the_report_lists_the_jobs_a_sweep_never_started(tmp_path: Path) -> None:
    # A sweep of an earlier version, whose job folders were named `<number>_<key>=<value>`,
    # stopped after its first job started: the others are matched by number, and not run.
    sweeper = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"
    command_line = ["model=tudui,lenet,mlp", "device=cpu"]
    sweep = {"hydra": {"sweeper": {"_target_": sweeper}, "overrides": {"task": command_line}}}
    OmegaConf.save(OmegaConf.create(sweep), tmp_path / "multirun.yaml")
    started = tmp_path / "0_model=tudui" / ".hydra"
    started.mkdir(parents=True)
    OmegaConf.save(
        OmegaConf.create({"trainer": {}, "model": {"name": "tudui"}}), started / "config.yaml"
    )

    rows = write_report(tmp_path)
    assert [(row["run"], row["model"], row["status"]) for row in rows] == [
        ("0_model=tudui", "tudui", "no results"),
        ("1_model-lenet", None, "not run"),
        ("2_model-mlp", None, "not run"),
    ]
    assert [row["status"] for row in summary(tmp_path)] == ["no results", "not run", "not run"]
    assert ": 1 no results, 2 not run" in table(rows, tmp_path)


@pytest.mark.slow
def test_jobs_that_share_a_process_each_start_from_its_defaults(tmp_path: Path) -> None:
    done = train_cli(
        tmp_path,
        "-m",
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=1",
        "trainer.deterministic=true,false",
        "trainer.threads=1,null",
        "model=lenet",
        "device=cpu",
        *QUICK_SWEEP,
    )
    assert done.returncode == 0, done.stderr
    folder = sweep_dir(tmp_path)
    runs = [results(folder / row["run"]) for row in summary(folder)]
    assert len({run["process"]["pid"] for run in runs}) == 1  # one process ran them all
    default_threads = torch.get_num_threads()
    # (deterministic, threads) as each job asked, not as the job before it left the process.
    assert [(run["deterministic"], run["device"]["threads"]) for run in runs] == [
        (True, 1),
        (True, default_threads),
        (False, 1),
        (False, default_threads),
    ]


@pytest.mark.slow
def test_jobs_side_by_side_each_train_on_cores_of_their_own(tmp_path: Path) -> None:
    (tmp_path / "met").mkdir()
    done = train_cli(
        tmp_path,
        "-m",
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=2",
        "trainer.seed=0,1",
        *SMALL,
        "model=custom",
        "model._target_=side_by_side.MeetingLeNet",  # so both train at once
        env={
            **env_with_tests_on_path(),
            side_by_side.MEETING_FOLDER: str(tmp_path / "met"),
            side_by_side.JOBS: "2",
        },
        own_process=True,  # joblib's workers, reused across sweeps, keep the folder they started in
    )
    assert done.returncode == 0, done.stderr
    recorded = [json.loads((run / "environment.json").read_text())["cpu"] for run in done.run_dirs]
    cores = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set(range(1))
    planned = [share_of_cores(cores, 2, slot, None) for slot in (0, 1)]
    if all(isinstance(share, CoreShare) for share in planned):
        # Disjoint shares, one a job, each with as many threads as it has cores.
        assert sorted(tuple(cpu["cpu_set"]) for cpu in recorded) == [s.cpus for s in planned]
        assert [cpu["torch_threads"] for cpu in recorded] == [len(planned[0].cpus)] * 2
        assert done.stderr.count("this job's own: one of 2 equal shares") == 2
    else:  # one core: the jobs share it, and each says so in a line
        assert done.stderr.count(f"] {planned[0]}\n") == 2, done.stderr


@pytest.mark.slow
def test_report_on_a_folder_shows_runs_without_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    finished = train_cli(tmp_path, *QUICK).run_dir
    # A run that is still going, then one that was killed: both leave "running" in results.json.
    killed = subprocess.Popen(
        [sys.executable, str(ROOT / "train.py"), "device=cpu", "trainer.epochs=1000"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while not list((tmp_path / "outputs").rglob("metrics.jsonl"))[1:]:
            assert time.monotonic() < deadline and killed.poll() is None
            time.sleep(0.05)
        # Suspended (as by Ctrl-Z), it is still a running run, and leaves the cores to the tests.
        killed.send_signal(signal.SIGSTOP)
        assert report_main([str(tmp_path / "outputs")]) == 0
        assert ": 1 completed, 1 running" in capsys.readouterr().err
    finally:
        killed.send_signal(signal.SIGKILL)
        killed.wait()
    # A folder Hydra made for a run that never got as far as writing anything.
    empty = tmp_path / "outputs" / "never-started"
    (empty / ".hydra").mkdir(parents=True)
    (empty / ".hydra" / "config.yaml").write_text((finished / ".hydra" / "config.yaml").read_text())

    assert report_main([str(tmp_path / "outputs")]) == 0
    assert ": 1 completed, 1 crashed, 1 no results" in capsys.readouterr().err
    statuses = {row["run"]: row["status"] for row in summary(tmp_path / "outputs")}
    assert statuses[str(finished.relative_to(tmp_path / "outputs"))] == "completed"
    assert statuses["never-started"] == "no results"
    assert sorted(statuses.values()) == ["completed", "crashed", "no results"]


def test_report_refuses_a_folder_without_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert report_main([str(tmp_path)]) == 1
    assert (
        capsys.readouterr().err.strip()
        == f"Error: no runs in {tmp_path} (a run folder has a .hydra/ snapshot)"
    )


@pytest.mark.slow
def test_the_optuna_search_maximizes_validation_accuracy(tmp_path: Path) -> None:
    done = train_cli(
        tmp_path,
        "-m",
        "hparams_search=optuna",
        "hydra.sweeper.n_trials=2",
        "model=lenet",
        "dataset.val_fraction=0.1",
        *QUICK,
    )
    assert done.returncode == 0, done.stderr
    folder = sweep_dir(tmp_path)
    rows = summary(folder)
    assert len(rows) == 2 and all(row["status"] == "completed" for row in rows)
    # The job folders name the searched parameters, and nothing else.
    assert all(row["run"].split("_", 1)[1].split("+")[0].startswith("optimizer-") for row in rows)
    best = max(float(row["val_accuracy"]) for row in rows)
    assert f"Best value: {best}" in done.stdout + done.stderr
    cfg = compose_config("hparams_search=optuna", hydra=True)
    assert cfg.optimized_metric == "val_accuracy"
    assert cfg.hydra.sweeper.direction == "maximize"
    assert set(cfg.hydra.sweeper.params) == {"optimizer", "optimizer.lr", "trainer.batch_size"}
    # A loss is minimized.
    loss = compose_config("hparams_search=optuna", "optimized_metric=val_loss", hydra=True)
    assert loss.hydra.sweeper.direction == "minimize"


@pytest.mark.slow
def test_the_optuna_search_refuses_test_accuracy_and_needs_validation(tmp_path: Path) -> None:
    search = ("-m", "hparams_search=optuna", "hydra.sweeper.n_trials=2", "model=lenet", *QUICK)
    done = train_cli(tmp_path / "test", *search, "optimized_metric=test_accuracy")
    assert done.returncode == 1
    assert done.stderr == (
        "Error: optimized_metric=test_accuracy would choose hyperparameters on the test split: "
        "the test split would then no longer measure the model on images nothing was chosen "
        "by; optimize val_accuracy, val_top5_accuracy, val_loss, train_loss, "
        "train_images_per_second\n"
    )
    assert not (tmp_path / "test" / "outputs").exists()  # refused before the first trial

    # Without a validation split, each trial fails saying why; the search goes on to the end.
    done = train_cli(tmp_path / "none", *search)
    assert (
        done.returncode == 1 and done.last_line == "Error: ValueError: No trials are completed yet."
    )
    rows = summary(sweep_dir(tmp_path / "none"))
    assert len(rows) == 2
    assert (
        rows[0]["reason"]
        == rows[1]["reason"]
        == (
            "optimized_metric=val_accuracy needs a validation split: add dataset.val_fraction=0.1 "
            "(or a val/ folder to an image folder), or optimize train_loss or "
            "train_images_per_second"
        )
    )


@pytest.fixture(scope="module")
def device_scaling(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sweep folder of the shipped study, shrunk: 2 batch sizes x 1 width, on every device
    here (the CPU alone)."""
    cwd = tmp_path_factory.mktemp("device_scaling")
    done = train_cli(
        cwd,
        "-m",
        "experiment=device_scaling",
        "device=every",
        "trainer.batch_size=32,64",
        "model.hidden_sizes=[16]",
        "dataset.train_size=256",
        "trainer.limit_train_batches=2",
        "trainer.limit_eval_images=64",
    )
    assert done.returncode == 0, done.stderr
    return sweep_dir(cwd)


@pytest.mark.slow
def test_the_device_scaling_study_draws_images_per_second_against_batch_size(
    device_scaling: Path,
) -> None:
    folder = device_scaling
    rows = summary(folder)
    assert [(row["trainer.batch_size"], row["status"]) for row in rows] == [
        ("32", "completed"),
        ("64", "completed"),
    ]
    assert_plot(folder / "throughput.png")
    assert_plot(folder / "curves.png")
    assert_plot(folder / "scaling.png")
    figure = scaling.scaling_figure(write_report(folder))
    speed, utilization, seconds = figure.axes[:3]  # every run records its MFU now
    assert utilization.get_title() == "Model FLOPs utilization"
    line, bound = speed.get_lines()
    assert line.get_label() == "device=cpu, model.hidden_sizes=[16]"
    assert list(line.get_xdata()) == [32, 64]
    ran = [results(folder / row["run"]) for row in rows]
    assert list(line.get_ydata()) == pytest.approx(
        [result["train_images_per_second"] for result in ran]
    )
    # The compute bound: the best measured peak over 3x the forward FLOPs of one image.
    peak = max(result["device_peak_flops"] for result in ran)
    assert peak > 1e8  # any CPU of this century multiplies matrices faster
    assert {result["device_peak_precision"] for result in ran} == {"fp32"}  # the runs' own
    assert set(bound.get_ydata()) == {peak / ran[0]["model_training_flops_per_image"]}
    assert speed.get_xscale() == "log"
    assert seconds.get_title() == "Time to 50% test accuracy"  # the study's, without val split
    (timed,) = seconds.get_lines()  # a run that never reached the target is a gap (nan)
    reached = [results(folder / row["run"])["time_to_accuracy"]["seconds"] for row in rows]
    assert [None if math.isnan(y) else y for y in timed.get_ydata()] == reached


def write_into_results(run: Path, **fields: Any) -> None:
    """Add `fields` to a run's results.json, as a run that records them writes them."""
    recorded = results(run)
    (run / "results.json").write_text(json.dumps({**recorded, **fields}))


@pytest.mark.slow
def test_runs_that_searched_their_batch_draw_batch_scaling_and_name_largest_and_knee(
    device_scaling: Path, tmp_path: Path
) -> None:
    # The study's runs, as trainer.batch_size=auto records them: a search that stopped at 64 in
    # a CPU budget of 0.5 GB, 64 trained as found, 32 halved once; and each run's MFU.
    folder = tmp_path / "sweep"
    shutil.copytree(device_scaling, folder)
    for png in folder.glob("*.png"):
        png.unlink()
    runs = sorted(path.parent for path in folder.glob("*/results.json"))
    ran = [results(run) for run in runs]
    assert [result["batch_size"] for result in ran] == [32, 64]
    for run, result in zip(runs, ran, strict=True):
        halvings = {32: 1, 64: 0}[result["batch_size"]]
        mfu = (
            result["model_training_flops_per_image"]
            * result["train_images_per_second"]
            / result["device_peak_flops"]
        )
        search = {
            "largest": 64,
            "trained": result["batch_size"],
            "halvings": halvings,
            "stopped_by": "memory budget",
            "tried": [[32, True], [64, True], [128, False]],
            "budget_gb": 0.5,
            "seconds": 0.1,
        }
        write_into_results(run, batch_search=search, mfu=mfu, peak_devices=1)
    rows = write_report(folder)
    assert sorted(path.name for path in folder.glob("*scaling.png")) == ["batch_scaling.png"]
    assert_plot(folder / "batch_scaling.png")
    speed, mfu_panel, _ = scaling.scaling_figure(rows).axes
    line = speed.get_lines()[0]
    searched = "largest batch 64 (memory budget 0.5 GB)"
    assert line.get_label() == f"device=cpu, model.hidden_sizes=[16]: {searched}"
    assert list(mfu_panel.get_lines()[0].get_ydata()) == pytest.approx(
        [100 * results(run)["mfu"] for run in runs]
    )
    # The knee, worked out here: the smaller batch where it is within 5% of the faster.
    speeds = {result["batch_size"]: result["train_images_per_second"] for result in ran}
    knee = 32 if speeds[32] >= 0.95 * max(speeds.values()) else 64
    note = f"device=cpu, model.hidden_sizes=[16]: {searched}, knee {knee} ("
    markdown = (folder / "summary.md").read_text().splitlines()
    heading = markdown.index(batch_sweep.HEADING + ":")
    assert markdown[heading + 2].startswith(f"- {note}")
    console = table(rows, folder).splitlines()
    assert console[console.index(batch_sweep.HEADING + ":") + 1].startswith(f"  {note}")
