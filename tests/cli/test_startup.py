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
