"""Starting up: showing the config does not import torch, nor a run the trackers it does not use."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT


def test_showing_the_config_does_not_import_torch() -> None:
    shown = ("--cfg", "job", "tracker=[tensorboard,mlflow,wandb]")
    done = subprocess.run(
        [sys.executable, "-X", "importtime", str(ROOT / "train.py"), *shown],
        capture_output=True,
        text=True,
        check=True,
    )
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
    assert "experiments.config" in imported
    assert not imported & {"torch", "mlflow", "wandb"}
    assert "model:" in done.stdout and "mlflow:" in done.stdout


@pytest.mark.slow
def test_a_run_imports_the_trackers_it_uses_and_no_other(tmp_path: Path) -> None:
    pytest.importorskip("mlflow")
    pytest.importorskip("wandb")
    chosen = ["tensorboard", "csv", "mlflow", "wandb"]
    shown = subprocess.run(
        [sys.executable, "-c", BUILD_TRACKERS, str(tmp_path), *chosen],
        capture_output=True,
        text=True,
        check=True,
    )
    imported_after = dict(zip(chosen, shown.stdout.splitlines(), strict=True))
    assert imported_after == {
        "tensorboard": "",
        "csv": "",
        "mlflow": "mlflow",
        "wandb": "mlflow wandb",
    }


# Builds the trackers of each option of the tracker group in argv[2:] in turn, writing in argv[1];
# prints which of the optional trackers' libraries are imported after each.
BUILD_TRACKERS = """
import sys
from datetime import datetime
from pathlib import Path
from hydra import compose, initialize_config_module
from experiments.config.store import CONFIG_PACKAGE, new_tag, register_configs
from experiments.records.tracker import trackers
register_configs(datetime.now(), new_tag())
for option in sys.argv[2:]:
    with initialize_config_module(CONFIG_PACKAGE, version_base="1.3"):
        cfg = compose("train", overrides=[f"tracker={option}"])
    trackers(cfg.tracker, Path(sys.argv[1]) / option)
    print(*(name for name in ("mlflow", "wandb") if name in sys.modules))
"""


def test_a_typo_is_said_without_importing_torch() -> None:
    """A bad override is said in a fraction of a second: no torch, no matplotlib."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", str(ROOT / "train.py"), "trainer.epochs=ten"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    imported = {line.rsplit("|", 1)[-1].strip() for line in lines if "import time:" in line}
    assert "experiments.cli" in imported
    assert not imported & {"torch", "matplotlib"}
    assert lines[-1].startswith("Error: trainer.epochs=ten:")
