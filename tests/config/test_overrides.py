"""What the command line's overrides mean before Hydra reads them."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from experiments.config.overrides import (
    refuse_missing_plugins,
    with_paths_as_given,
    with_saved_overrides,
)
from experiments.core.errors import ExperimentError
from helpers import compose_config


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
