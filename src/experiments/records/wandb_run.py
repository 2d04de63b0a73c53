"""`tracker=wandb`: a W&B run per training run, online where `WANDB_MODE` says or a key is there,
else offline (so a fresh machine trains without an account)."""

from __future__ import annotations

import io
import json
import logging
import netrc
import os
import subprocess
import sys
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

import wandb
from PIL import Image

from experiments.config.schemas import TRACKER_TIMEOUT
from experiments.records.guard import Guard, Result
from experiments.records.hparams import Hyperparameters, Numbers
from experiments.records.tracker import TrackedRun, final_numbers

log = logging.getLogger("experiments")


def logged_in() -> bool:
    """Whether W&B has a key to go online with: WANDB_API_KEY, or `wandb login`'s ~/.netrc."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    try:
        return netrc.netrc().authenticators("api.wandb.ai") is not None
    except (OSError, netrc.NetrcParseError):
        return False


class WandbRun:
    """One run folder's W&B run: a resume sends it all again, of which it keeps what W&B lacks."""

    def __init__(
        self,
        run_dir: Path,
        project: str = "experiments",
        entity: str | None = None,
        timeout: float = TRACKER_TIMEOUT,
    ) -> None:
        self.dir = run_dir
        self.project, self.entity = project, entity
        # Given, not left to W&B's settings, which one process keeps from its first run on.
        self.mode = os.environ.get("WANDB_MODE") or ("online" if logged_in() else "offline")
        self.timeout = timeout
        self.run: Any = None  # wandb's Run
        # The last step W&B holds of a run carried on: W&B takes no step at or below it.
        self._held = -1
        # wandb-core's log kept with the runs, not in ~/.cache; silent, not saying where its key is.
        environment = {"WANDB_CACHE_DIR": str(Path.cwd() / "outputs"), "WANDB_SILENT": "true"}
        self._guard = Guard("W&B", timeout, environment=environment)

    def begin(self, run: TrackedRun) -> str | None:
        def started() -> str:
            self.run = wandb.init(
                dir=self.dir,
                project=self.project,
                entity=self.entity,
                mode=self.mode,
                name=run.name,
                group=run.group,
                id=run.resumed_id,
                resume="allow" if run.resumed_id else None,
                config=dict(run.parameters),
                tags=[f"{key}={value}"[:64] for key, value in run.tags.items()],
                # One run of several in a sweep's process; none of the console's lines.
                settings=wandb.Settings(
                    reinit="create_new",
                    silent=True,
                    console="off",
                    disable_git=True,
                    save_code=False,
                    x_disable_stats=True,
                    init_timeout=self.timeout,
                ),
            )
            return str(self.run.id)

        given = self._guarded(started, needs_run=False)
        if given is not None:
            mode = self.run.settings.mode
            log.info("W&B: run %s (%s), %s, in %s", run.name, given, mode, self.dir / "wandb")
            held = self._guarded(self._held_through) if run.resumed_id is not None else None
            self._held = -1 if held is None else held
        return given

    def _held_through(self) -> int:
        """The last step W&B holds of the run this one continues (a kill -9 loses the unwritten)."""
        if not (self.run.offline or self.run.disabled):
            return int(self.run.step) - 1
        mine = Path(self.run.dir).parent
        files = self.dir.glob(f"wandb/offline-run-*/run-{self.run.id}.wandb")
        return max((_last_step(path) for path in files if path.parent != mine), default=-1)

    def scalars(self, values: Mapping[str, float], step: int) -> None:
        if step > self._held:
            self._guarded(lambda: self.run.log(dict(values), step=step))

    def hyperparameters(
        self, hyperparameters: Hyperparameters, numbers: Numbers, step: int, swept: Collection[str]
    ) -> None:
        """Its final numbers and the model's size (its config, the whole config, came first)."""
        self._guarded(lambda: self.run.summary.update(final_numbers(hyperparameters, numbers)))

    def picture(self, tag: str, png: bytes, size: tuple[int, int, int], step: int) -> None:
        def logged() -> None:
            with Image.open(io.BytesIO(png)) as image:
                self.run.log({tag: wandb.Image(image.copy())}, step=step)

        self._guarded(logged)

    def close(self, status: str) -> None:
        # W&B's states for a run's own end are finished and failed (killed: stopped from its UI).
        self._guarded(lambda: self.run.finish(exit_code=0 if status == "completed" else 1))

    def _guarded(self, action: Callable[[], Result], needs_run: bool = True) -> Result | None:
        """`action`'s result through the guard; None before the run has begun, where `needs_run`."""
        if needs_run and self.run is None:
            return None
        return self._guard(action)


def _last_step(run_file: Path) -> int:
    """The last step of a .wandb file's history (-1: none), read as a kill may have cut it."""
    command = [sys.executable, "-m", "wandb", "leet", "inspect", "--json", str(run_file)]
    shown = subprocess.run(command, capture_output=True, text=True, check=True, timeout=120)
    steps = [
        record["history"]["item"].get("_step", -1)
        for record in map(json.loads, shown.stdout.splitlines())
        if record.get("type") == "history"
    ]
    return max(steps, default=-1)
