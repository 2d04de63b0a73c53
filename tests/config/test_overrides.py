"""What the command line's overrides mean before Hydra reads them: resume= and replay= read a run
folder (refused, in one line, where resume= cannot write into it), a path is taken as it is, and a
sweep plugin that is not installed is named."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from experiments.config.overrides import (
    refuse_missing_plugins,
    with_every_device,
    with_saved_overrides,
)
from experiments.config.paths import with_paths_as_given
from experiments.config.saved_overrides import overrides_saved_in
from experiments.core.errors import ExperimentError
from helpers import compose_config


@pytest.mark.slow
def test_a_job_folder_named_by_an_earlier_version_works_as_printed(tmp_path: Path) -> None:
    # Job folders were named `<number>_<key>=<value>,...` until names became override values.
    old = tmp_path / "outputs" / "1_trainer.seed=1,model=lenet"
    (old / ".hydra").mkdir(parents=True)
    OmegaConf.save(
        OmegaConf.create(["model=lenet", "trainer.seed=1"]), old / ".hydra" / "overrides.yaml"
    )
    for key in ("resume", "replay"):
        arguments = with_saved_overrides([f"{key}={old}", "trainer.epochs=3"])
        cfg = compose_config(*arguments, hydra=True)
        assert cfg[key] == str(old)
        assert (cfg.model.name, cfg.trainer.seed, cfg.trainer.epochs) == ("lenet", 1, 3)
    assert cfg.hydra.run.dir != str(old)  # replay: a new folder
    resumed = compose_config(*with_saved_overrides([f"resume={old}"]), hydra=True)
    assert resumed.hydra.run.dir == str(old)  # resume: the run's own

    evaluated = compose_config(*with_paths_as_given([f"ckpt={old}"]), config_name="eval")
    assert evaluated.ckpt == str(old)
    # What names no file is Hydra's to read, as written (here: a sweep over two checkpoints).
    assert with_paths_as_given([f"ckpt={old}/a.pt,{old}/b.pt"]) == [f"ckpt={old}/a.pt,{old}/b.pt"]


@pytest.mark.parametrize(
    ("choice", "package"),
    [
        ("hydra/launcher=joblib", "hydra-joblib-launcher"),
        ("hydra/launcher=submitit_local", "hydra-submitit-launcher"),
        ("hydra/launcher=slurm", "hydra-submitit-launcher"),
        ("hparams_search=optuna", "hydra-optuna-sweeper"),
        ("hydra/sweeper=optuna", "hydra-optuna-sweeper"),
    ],
)
def test_a_sweep_plugin_that_is_not_installed_is_named_with_the_extra(
    choice: str, package: str
) -> None:
    command_line = ["-m", choice, "model=tudui,lenet"]
    with pytest.raises(ExperimentError) as refused:
        refuse_missing_plugins(command_line, installed=lambda module: False)
    assert str(refused.value) == (
        f"{choice} needs the Hydra plugin {package}, which is not installed; install it with "
        "the other sweep plugins: pip install -e '.[sweeps]'"
    )
    refuse_missing_plugins(command_line)  # installed here (the dev extra includes sweeps)
    refuse_missing_plugins(["-m", "model=tudui,lenet"], installed=lambda module: False)


@pytest.fixture
def read_only_run(tmp_path: Path) -> Iterator[Path]:
    """A run folder (its snapshot, its log) nobody may write into: read-only permissions, or for
    root, whom permissions do not stop, the immutable attribute."""
    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text("- model=lenet\n")
    (run / "train.log").write_text("")
    if os.geteuid() != 0:
        for path in (run / "train.log", run):
            path.chmod(0o555)
        yield run
        run.chmod(0o755)
        return
    paths, chattr = [str(run / "train.log"), str(run)], shutil.which("chattr")
    try:
        if chattr is None or subprocess.run([chattr, "+i", *paths]).returncode:
            pytest.skip("chattr +i is not available to make a folder read-only for root")
        yield run
    finally:
        if chattr is not None:
            subprocess.run([chattr, "-i", *paths], capture_output=True)


def test_resuming_into_a_read_only_folder_is_refused_in_one_line(read_only_run: Path) -> None:
    with pytest.raises(ExperimentError) as error:
        with_saved_overrides([f"resume={read_only_run}"])
    assert str(error.value) == (
        f"resume={read_only_run}: {read_only_run} is read-only, and a resume writes into the "
        f"run's own folder; make it writable (chmod -R u+w {read_only_run}), or replay= the run "
        "in a new folder"
    )


def test_replaying_a_read_only_folder_is_fine(read_only_run: Path) -> None:
    assert with_saved_overrides([f"replay={read_only_run}"])[-1] == f"replay={read_only_run}"


def test_device_every_becomes_a_sweep_over_the_devices_of_this_machine() -> None:
    asked = []

    def devices() -> list[str]:
        asked.append("devices")
        return ["cpu", "cuda:0", "cuda:1", "dp"]

    assert with_every_device(["-m", "device=every", "model=lenet"], devices) == [
        "-m",
        "device=cpu,cuda:0,cuda:1,dp",
        "model=lenet",
    ]
    # A machine of one device sweeps over it: a sweep of one job, with its device swept.
    assert with_every_device(["--multirun", "device=every"], lambda: ["cpu"]) == [
        "--multirun",
        "device=choice(cpu)",
    ]
    # The machine is asked (torch loaded) only for device=every.
    assert with_every_device(["-m", "device=cpu,cuda:0"], devices) == ["-m", "device=cpu,cuda:0"]
    assert asked == ["devices"]


def test_device_every_without_a_sweep_is_refused_in_one_line() -> None:
    with pytest.raises(ExperimentError) as error:
        with_every_device(["device=every", "model=lenet"], lambda: ["cpu"])
    assert str(error.value) == (
        "device=every runs one job per device: add -m (python train.py -m device=every)"
    )


def test_hydras_flags_stay_before_a_replayed_runs_overrides(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    OmegaConf.save(OmegaConf.create(["model=lenet"]), run / ".hydra" / "overrides.yaml")
    expanded = with_saved_overrides([f"replay={run}", "--cfg", "job", "trainer.epochs=3"])
    # argparse reads flags only before the overrides: `--cfg job` among them is refused.
    assert expanded == ["--cfg", "job", "model=lenet", "trainer.epochs=3", f"replay={run}"]


@pytest.mark.parametrize(
    ("task", "saved", "brought_back"),
    [
        # A classifier's run of a version before top-5 accuracy: it goes on measuring none.
        ("{name: classification, metrics: {accuracy: max}}", [], ["task.metrics={accuracy:max}"]),
        ("null", [], ["task.metrics={accuracy:max}"]),  # before the task group
        # One that left it out says so whole, its config's declaration; one that measured it,
        # and another task, as their configs declared them; one whose class says them, nothing.
        (
            "{name: classification, metrics: {accuracy: max}}",
            ["~task.metrics.top5_accuracy"],
            ["task.metrics={accuracy:max}"],
        ),
        (
            "{name: classification, metrics: {accuracy: max, top5_accuracy: max}}",
            [],
            ["task.metrics={accuracy:max,top5_accuracy:max}"],
        ),
        (
            "{name: regression, metrics: {rmse: min, mae: min, r2: max}}",
            ["task=regression"],
            ["task=regression", "task.metrics={rmse:min,mae:min,r2:max}"],
        ),
        ("{name: regression, metrics: null}", ["task=regression"], ["task=regression"]),
        (  # declared whole by its overrides: as they are
            "{name: classification, metrics: {accuracy: max}}",
            ["task.metrics={accuracy:max}"],
            ["task.metrics={accuracy:max}"],
        ),
    ],
)
def test_a_classifier_run_without_top5_accuracy_is_resumed_without_it(
    tmp_path: Path, task: str, saved: list[str], brought_back: list[str]
) -> None:
    (tmp_path / ".hydra").mkdir()
    (tmp_path / ".hydra" / "overrides.yaml").write_text(
        "".join(f"- {override}\n" for override in ["model=lenet", *saved])
    )
    (tmp_path / ".hydra" / "config.yaml").write_text(f"task: {task}\n")
    given = f"resume={tmp_path}"
    assert overrides_saved_in(tmp_path, given, []) == ["model=lenet", *brought_back]


@pytest.mark.parametrize(
    ("typed", "said"),
    [
        ([], "resume={folder}: left out tracker=mlflow, which its run had"),
        (["tracker=mlflow"], None),  # typed again: kept
        (["logger=mlflow"], None),  # (in the last release's words)
        (["tracker=csv"], "resume={folder}: left out tracker=mlflow, which its run had"),
    ],
)
def test_what_writes_outside_the_folder_is_said_left_out_unless_typed_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, typed: list[str], said: str | None
) -> None:
    (tmp_path / ".hydra").mkdir()
    (tmp_path / ".hydra" / "overrides.yaml").write_text("- model=lenet\n- tracker=mlflow\n")
    given = f"resume={tmp_path}"
    assert overrides_saved_in(tmp_path, given, typed) == ["model=lenet"]
    left_out = [message for message in caplog.messages if "left out" in message]
    if said is None:
        assert left_out == []
    else:
        (message,) = left_out
        assert message.startswith(said.format(folder=tmp_path) + ": ")
