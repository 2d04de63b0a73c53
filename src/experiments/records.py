"""What a run leaves in its folder, besides Hydra's `.hydra/` snapshot and `train.log`.

    metrics.jsonl          one JSON object per logged step and per epoch
    events.out.tfevents.*  TensorBoard scalars: train_loss, test_loss, test_accuracy
    checkpoints/last.pt    state_dicts, epoch and config; torch.load(weights_only=True) reads it
    results.json           status (completed, or failed and why) and the run's numbers

Files that must never be seen half-written (checkpoint, results) are written atomically.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from datetime import datetime, timezone
from importlib.metadata import version
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import torch
from omegaconf import DictConfig, OmegaConf
from torch import nn
from torch.utils.tensorboard import SummaryWriter

from experiments.devices import requested
from experiments.distributed import ONE_PROCESS, Processes, first_failure, sigterm_held
from experiments.errors import ExperimentError, one_line
from experiments.loop import Evaluation, Training

CHECKPOINT = Path("checkpoints") / "last.pt"


class RunRecord:
    """The records of one run. As a context manager, it marks the run failed if anything raises.

    Of several processes, only the main one writes; the others keep the numbers to themselves.
    """

    def __init__(self, run_dir: Path, cfg: DictConfig, processes: Processes = ONE_PROCESS) -> None:
        self.dir = run_dir
        self.processes = processes
        self.config = OmegaConf.to_container(cfg, resolve=True)
        self.started = time.time()
        self.results: dict[str, Any] = {
            "status": "running",
            "reason": None,
            "run_dir": str(run_dir),
            "model": cfg.model.name,
            "dataset": cfg.dataset.name,
            "placement": cfg.placement.name,
            "optimizer": cfg.optimizer.name,
            # Filled in with what was used once the request is resolved.
            "device": {"requested": requested(cfg.device)},
            "seed": cfg.trainer.seed,
            "epochs": cfg.trainer.epochs,
            # trainer.batch_size is the batch of all processes together.
            "batch_size": cfg.trainer.batch_size,
            "world_size": processes.world_size,
            "per_process_batch_size": cfg.trainer.batch_size // processes.world_size,
            "epochs_completed": 0,
            "started_at": _timestamp(self.started),
            # Who runs it, so a report can tell a run in progress from one that was killed.
            "process": {"host": socket.gethostname(), "pid": os.getpid()},
            "environment": environment(),
        }
        self.history: list[dict[str, Any]] = []
        self._metrics: IO[str] | None = None
        self._tensorboard: SummaryWriter | None = None

    def __enter__(self) -> RunRecord:
        if self.processes.is_main:
            self.dir.mkdir(parents=True, exist_ok=True)
            self._metrics = open(self.dir / "metrics.jsonl", "a", encoding="utf-8")
            self._tensorboard = SummaryWriter(self.dir)
        self._write_results()  # "running", with the process, until the run ends
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        with sigterm_held():
            if isinstance(error, KeyboardInterrupt):
                self._finish("failed", "interrupted")
            elif error is not None:
                if not isinstance(error, ExperimentError):  # a bug or a crash: keep where it was
                    self.results["traceback"] = "".join(traceback.format_exception(error))
                # When another process failed first, its failure is why this one stopped.
                self._finish("failed", first_failure(self.processes, one_line(error)))
            if self._metrics is not None and self._tensorboard is not None:
                self._metrics.close()
                self._tensorboard.close()

    def device(self, used: dict[str, Any]) -> None:
        self.results["device"].update(used)

    def step(
        self, epoch: int, steps_before: int, step: int, loss: float, images_per_second: float
    ) -> None:
        """Log a training loss; `step` counts within the epoch, after `steps_before` in all."""
        global_step = steps_before + step
        self._write_metrics(
            kind="step",
            epoch=epoch,
            step=step,
            global_step=global_step,
            train_loss=loss,
            images_per_second=images_per_second,
        )
        self._scalar("train_loss", loss, global_step)

    def epoch(
        self, epoch: int, training: Training, evaluation: Evaluation, classes: list[str]
    ) -> None:
        row = {
            "epoch": epoch,
            "train_loss": training.loss,
            "test_loss": evaluation.loss,
            "test_accuracy": evaluation.accuracy,
            "class_accuracy": dict(zip(classes, evaluation.class_accuracy, strict=True)),
            "images_per_second": training.images_per_second,
            "train_images": training.images,
            "train_seconds": training.seconds,
            "data_seconds": training.data_seconds,
            "data_share": training.data_share,
            "eval_seconds": evaluation.seconds,
            "epoch_seconds": training.seconds + evaluation.seconds,
        }
        self.history.append(row)
        self._write_metrics(kind="epoch", **row)
        self._scalar("test_loss", evaluation.loss, epoch)
        self._scalar("test_accuracy", evaluation.accuracy, epoch)
        self.results["epochs_completed"] = epoch

    def checkpoint(self, model: nn.Module, optimizer: torch.optim.Optimizer, epoch: int) -> None:
        """Save model and optimizer state_dicts, the epoch and the config to checkpoints/last.pt."""
        if not self.processes.is_main:
            return
        state = {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "epoch": epoch,
            "config": self.config,
        }
        _write_atomically(self.dir / CHECKPOINT, lambda file: torch.save(state, file))

    def complete(self, peak_memory: dict[str, float | None]) -> dict[str, Any]:
        """Write results.json for a finished run and return it."""
        last = self.history[-1]
        best = max(self.history, key=lambda row: row["test_accuracy"])
        train_images = sum(row["train_images"] for row in self.history)
        train_seconds = sum(row["train_seconds"] for row in self.history)
        self.results.update(
            final_test_accuracy=last["test_accuracy"],
            best_test_accuracy=best["test_accuracy"],
            best_epoch=best["epoch"],
            class_accuracy=last["class_accuracy"],
            train_loss=last["train_loss"],
            test_loss=last["test_loss"],
            train_images_per_second=train_images / train_seconds,
            epoch_seconds=[row["epoch_seconds"] for row in self.history],
            data_time_share=sum(row["data_seconds"] for row in self.history) / train_seconds,
            **peak_memory,
            checkpoint=str(CHECKPOINT),
        )
        self._finish("completed", None)
        return self.results

    def _finish(self, status: str, reason: str | None) -> None:
        finished = time.time()
        self.results.update(
            status=status,
            reason=reason,
            finished_at=_timestamp(finished),
            total_seconds=finished - self.started,
        )
        self._write_results()

    def _write_results(self) -> None:
        if self.processes.is_main:
            text = json.dumps(self.results, indent=2) + "\n"
            _write_atomically(self.dir / "results.json", lambda file: file.write(text.encode()))

    def _write_metrics(self, **row: Any) -> None:
        if self._metrics is not None:
            self._metrics.write(json.dumps({**row, "time": time.time()}) + "\n")
            self._metrics.flush()

    def _scalar(self, tag: str, value: float, step: int) -> None:
        if self._tensorboard is not None:
            self._tensorboard.add_scalar(tag, value, step)
            self._tensorboard.flush()


def _write_atomically(path: Path, write: Callable[[IO[bytes]], object]) -> None:
    """Write to a temporary file beside `path`, sync it, then rename it over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(temporary, "wb") as file:
        write(file)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def _timestamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="seconds")


def environment() -> dict[str, Any]:
    """Versions and source revision, so a result can be traced to what produced it."""
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda_build": torch.version.cuda,
        # Read from the installed distributions: importing torchvision alone takes a second.
        **{name: version(name) for name in ("torchvision", "hydra-core", "omegaconf")},
        "platform": platform.platform(),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "git": _git_state(Path(__file__).resolve().parent),
    }


def _git_state(source: Path) -> dict[str, Any]:
    """The commit of the source tree and whether it had uncommitted changes (None outside git)."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", str(source), *args], capture_output=True, text=True, timeout=10
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain") if commit else None
    return {"commit": commit, "dirty": None if status is None else bool(status)}
