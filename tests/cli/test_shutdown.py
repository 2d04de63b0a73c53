"""The command's process shuts down without Python's last collections going through everything
torch loaded: what lives at its exit is frozen first."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_what_lives_at_the_commands_exit_is_frozen(tmp_path: Path) -> None:
    # atexit calls the latest registered first: this check, registered before the command runs,
    # is called after the command's own exit handler.
    command = (
        "import atexit, gc, sys; from experiments.cli.main import main; "
        "atexit.register(lambda: print('frozen:', gc.get_freeze_count() > 0)); "
        "sys.argv = ['train.py', '--cfg', 'job']; main()"
    )
    done = subprocess.run(
        [sys.executable, "-c", command], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert done.stdout.endswith("frozen: True\n")
