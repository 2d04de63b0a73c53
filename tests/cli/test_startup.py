"""Starting up: showing the config does not import torch."""

from __future__ import annotations

import subprocess
import sys

from helpers import ROOT


def test_showing_the_config_does_not_import_torch() -> None:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", str(ROOT / "train.py"), "--cfg", "job"],
        capture_output=True,
        text=True,
        check=True,
    )
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
    assert "experiments.config" in imported
    assert "torch" not in imported
    assert "model:" in done.stdout


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
