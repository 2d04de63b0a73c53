"""Sweep job folders: names that work as printed, on common filesystems, in resume=, replay= and
ckpt=, and the jobs a sweep planned."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from experiments.config.naming import job_name, planned_job_names, safe_name, sweep_keys

JOBS = [
    (["model=tudui", "placement=to_device"], "3_model-tudui+placement-to_device"),
    (["device=cuda\\:1", "model=lenet"], "3_device-cuda-1+model-lenet"),
    (["trainer.seed=1"], "3_trainer.seed-1"),
    (["trainer.seed=-1", "optimizer.lr=1e-3"], "3_trainer.seed--1+optimizer.lr-0.001"),
    (["device.ids=[0,1]"], "3_device.ids-0-1"),
    (['model.name="a b"', "dataset.root=/data/sets"], "3_model.name--ab-+dataset.root--data-sets"),
    (
        ["optimizer=adam", "hydra.launcher.n_jobs=${oc.env:JOBS}"],
        "3_optimizer-adam+hydra.launcher.n_jobs---oc.env-JOBS-",
    ),
]


@pytest.mark.parametrize(("overrides", "name"), JOBS)
def test_a_job_folder_as_printed_is_one_value_for_resume_replay_and_ckpt(
    overrides: list[str], name: str
) -> None:
    assert job_name(3, overrides, varying=None) == name
    folder = f"outputs/2026-11-24/07-48-30_445301bf/{name}"
    assert re.fullmatch(r"[\w./+-]+", folder)  # nothing a shell or a filesystem reads specially
    parser = OverridesParser.create()
    for key in ("resume", "replay", "ckpt", "hydra.run.dir"):
        override = parser.parse_override(f"{key}={folder}")
        assert not override.is_sweep_override() and override.value() == folder


@pytest.mark.parametrize(
    ("choice", "folder"),
    [
        ("device=cuda:1", "device-cuda-1"),
        ("device=cuda\\:1", "device-cuda-1"),
        ("dataset.root=/data/sets", "dataset.root--data-sets"),
        ("device.ids=[0,1]", "device.ids-0-1"),
        ('model.name="a b"', "model.name--ab-"),
    ],
)
def test_job_folder_names_are_safe_on_common_filesystems(choice: str, folder: str) -> None:
    assert safe_name(choice) == folder


def test_a_basic_sweep_plans_its_jobs_in_the_order_it_numbers_them(tmp_path: Path) -> None:
    multirun = tmp_path / "multirun.yaml"
    sweeper = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"
    command_line = ["model=tudui,lenet", "device=cpu", "trainer.seed=0,1", "model=lenet,mlp"]
    hydra = {"sweeper": {"_target_": sweeper}, "overrides": {"task": command_line}}
    OmegaConf.save({"hydra": hydra}, multirun)
    assert planned_job_names(multirun) == [
        "0_model-lenet+trainer.seed-0",
        "1_model-lenet+trainer.seed-1",
        "2_model-mlp+trainer.seed-0",
        "3_model-mlp+trainer.seed-1",
    ]
    # Optuna decides its trials as it goes: none are planned.
    hydra["sweeper"] = {
        "_target_": "hydra_plugins.hydra_optuna_sweeper.optuna_sweeper.OptunaSweeper"
    }
    OmegaConf.save({"hydra": hydra}, multirun)
    assert planned_job_names(multirun) is None


def test_sweeps_at_the_same_relative_path_are_read_each_as_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sweeper = {"_target_": "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"}
    for cwd, swept in (("a", "model=tudui,lenet"), ("b", "trainer.seed=0,1")):
        (tmp_path / cwd / "sweep").mkdir(parents=True)
        hydra = {"sweeper": sweeper, "overrides": {"task": [swept, "device=cpu"]}}
        OmegaConf.save({"hydra": hydra}, tmp_path / cwd / "sweep" / "multirun.yaml")
    keys = []
    for cwd in ("a", "b"):
        monkeypatch.chdir(tmp_path / cwd)
        keys.append(sweep_keys(Path("sweep") / "multirun.yaml"))
    assert keys == [{"model"}, {"trainer.seed"}]
