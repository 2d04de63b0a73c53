"""What the command line's overrides mean before Hydra reads them."""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

from experiments.config.overrides import with_paths_as_given, with_saved_overrides
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
