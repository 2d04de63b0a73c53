"""What a run leaves in its folder, besides Hydra's `.hydra/` snapshot and `train.log`.

    results.json           status (running; completed; or failed, and why) and the run's numbers
    metrics.jsonl          one JSON object per logged step and per epoch
    events.out.tfevents.*  TensorBoard scalars: train_loss, test_loss, test_accuracy
    checkpoints/last.pt    state_dicts, epoch, config, numbers so far, random generators' state
    environment.json       command, host, CPU and GPUs, package versions, git commit
    git.diff               the source's uncommitted changes, when there are any

Of several processes, only the main one writes; the others keep their numbers to themselves.
"""

from __future__ import annotations

import json
import os
import socket
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import torch
from omegaconf import DictConfig, OmegaConf
from torch import nn
from torch.utils.tensorboard import SummaryWriter

from experiments import checkpoints
from experiments.devices import requested
from experiments.distributed import ONE_PROCESS, Processes, first_failure, sigterm_held
from experiments.environment import environment, git_diff, versions
from experiments.errors import ExperimentError, one_line
from experiments.loop import Evaluation, Training


class Results:
    """results.json through a run's life. As a context manager: "running" on entry, and
    "failed" with the reason (and, for a crash, the traceback) if the block raises."""

    def __init__(self, run_dir: Path, fields: dict[str, Any], writes: bool = True) -> None:
        self.path = run_dir / "results.json"
        self.writes = writes
        self.started = time.time()
        self.fields: dict[str, Any] = {
            "status": "running",
            "reason": None,
            "run_dir": str(run_dir),
            **fields,
            "started_at": _timestamp(self.started),
            # Who runs it, so a report can tell a run in progress from one that was killed.
            "process": {"host": socket.gethostname(), "pid": os.getpid()},
            "environment": versions(),
        }

    def __enter__(self) -> Results:
        self.write()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if error is None:
            return
        with sigterm_held():
            if isinstance(error, KeyboardInterrupt):
                self.finish("failed", "interrupted")
                return
            if not isinstance(error, ExperimentError):  # a bug or a crash: keep where it was
                self.fields["traceback"] = "".join(traceback.format_exception(error))
            self.finish("failed", self.reason(error))

    def reason(self, error: BaseException) -> str:
        return one_line(error)

    def finish(self, status: str, reason: str | None, **numbers: Any) -> dict[str, Any]:
        finished = time.time()
        self.fields.update(
            numbers,
            status=status,
            reason=reason,
            finished_at=_timestamp(finished),
            total_seconds=finished - self.started,
        )
        self.write()
        return self.fields

    def write(self) -> None:
        if self.writes:
            text = json.dumps(self.fields, indent=2) + "\n"
            checkpoints.write_atomically(self.path, lambda file: file.write(text.encode()))


class RunRecord(Results):
    """The records of one training run."""

    def __init__(self, run_dir: Path, cfg: DictConfig, processes: Processes = ONE_PROCESS) -> None:
        super().__init__(
            run_dir,
            {
                "model": cfg.model.name,
                "dataset": cfg.dataset.name,
                "placement": cfg.placement.name,
                "optimizer": cfg.optimizer.name,
                # Filled in with what was used once the request is resolved.
                "device": {"requested": requested(cfg.device)},
                "seed": cfg.trainer.seed,
                "deterministic": cfg.trainer.deterministic,
                "epochs": cfg.trainer.epochs,
                # trainer.batch_size is the batch of all processes together.
                "batch_size": cfg.trainer.batch_size,
                "world_size": processes.world_size,
                "per_process_batch_size": cfg.trainer.batch_size // processes.world_size,
                "epochs_completed": 0,
                "replay_of": cfg.replay,
            },
            writes=processes.is_main,
        )
        self.dir = run_dir
        self.config = OmegaConf.to_container(cfg, resolve=True)
        self.processes = processes
        self.history: list[dict[str, Any]] = []
        self._metrics: IO[str] | None = None
        self._tensorboard: SummaryWriter | None = None
        # TensorBoard hides events from this step on: those of an epoch cut short before a resume.
        self._purge_step: int | None = None

    def __enter__(self) -> RunRecord:
        super().__enter__()
        if self.writes:
            (self.dir / "environment.json").write_text(json.dumps(environment(), indent=2) + "\n")
            diff = git_diff()
            if diff:
                (self.dir / "git.diff").write_text(diff + "\n")
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        super().__exit__(kind, error, tb)
        with sigterm_held():
            if self._metrics is not None:
                self._metrics.close()
            if self._tensorboard is not None:
                self._tensorboard.close()

    def reason(self, error: BaseException) -> str:
        # When another process failed first, its failure is why this one stopped.
        return first_failure(self.processes, one_line(error))

    def device(self, used: dict[str, Any]) -> None:
        self.fields["device"].update(used)

    def resume(self, checkpoint: dict[str, Any], steps_per_epoch: int) -> None:
        """Continue the records of the run `checkpoint` was saved in, after its last epoch."""
        epoch = checkpoint["epoch"]
        self.history = list(checkpoint["history"])
        self.fields["epochs_completed"] = epoch
        self.fields.setdefault("resumed_after_epochs", []).append(epoch)
        self._purge_step = epoch * steps_per_epoch + 1
        if self.writes:
            self._drop_metrics_after(epoch)

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
        self,
        epoch: int,
        global_step: int,
        training: Training,
        evaluation: Evaluation,
        classes: list[str],
    ) -> None:
        row = {
            "epoch": epoch,
            "global_step": global_step,
            "train_loss": training.loss,
            "test_loss": evaluation.loss,
            "test_accuracy": evaluation.accuracy,
            "class_accuracy": dict(zip(classes, evaluation.class_accuracy, strict=True)),
            "images_per_second": training.images_per_second,
            "train_images": training.images,
            "train_seconds": training.seconds,
            "wait_seconds": training.wait_seconds,
            "copy_seconds": training.copy_seconds,
            "compute_seconds": training.compute_seconds,
            "eval_seconds": evaluation.seconds,
            "epoch_seconds": training.seconds + evaluation.seconds,
        }
        self.history.append(row)
        self._write_metrics(kind="epoch", **row)
        self._scalar("test_loss", evaluation.loss, global_step)
        self._scalar("test_accuracy", evaluation.accuracy, global_step)
        self.fields["epochs_completed"] = epoch

    def checkpoint(
        self, model: nn.Module, optimizer: torch.optim.Optimizer, epoch: int, rng: dict[str, Any]
    ) -> None:
        """Save what resuming after `epoch` needs to checkpoints/last.pt."""
        if not self.writes:
            return
        state = {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "epoch": epoch,
            "config": self.config,
            "history": self.history,
            "rng": rng,
        }
        checkpoints.save(self.dir / checkpoints.LAST, state)

    def complete(self, peak_memory: dict[str, float | None]) -> dict[str, Any]:
        """Write results.json for a finished run and return it."""
        last = self.history[-1]
        best = max(self.history, key=lambda row: row["test_accuracy"])
        train_images = sum(row["train_images"] for row in self.history)
        train_seconds = sum(row["train_seconds"] for row in self.history)
        return self.finish(
            "completed",
            None,
            final_test_accuracy=last["test_accuracy"],
            best_test_accuracy=best["test_accuracy"],
            best_epoch=best["epoch"],
            class_accuracy=last["class_accuracy"],
            train_loss=last["train_loss"],
            test_loss=last["test_loss"],
            train_images_per_second=train_images / train_seconds,
            epoch_seconds=[row["epoch_seconds"] for row in self.history],
            # Where training time went: waiting for batches (of which copying them to the
            # device), and computing; on a GPU the three overlap.
            **{
                f"{part}_share": sum(row[f"{part}_seconds"] for row in self.history) / train_seconds
                for part in ("wait", "copy", "compute")
            },
            **peak_memory,
            checkpoint=str(checkpoints.LAST),
        )

    def _drop_metrics_after(self, epoch: int) -> None:
        """Keep metrics.jsonl's rows up to `epoch`: those after it are about to be redone."""
        path = self.dir / "metrics.jsonl"
        if not path.is_file():
            return
        rows = [line for line in path.read_text().splitlines() if line.strip()]
        kept = [line for line in rows if json.loads(line)["epoch"] <= epoch]
        text = "".join(f"{line}\n" for line in kept)
        checkpoints.write_atomically(path, lambda file: file.write(text.encode()))

    def _write_metrics(self, **row: Any) -> None:
        if not self.writes:
            return
        if self._metrics is None:
            self._metrics = open(self.dir / "metrics.jsonl", "a", encoding="utf-8")  # noqa: SIM115
        self._metrics.write(json.dumps({**row, "time": time.time()}) + "\n")
        self._metrics.flush()

    def _scalar(self, tag: str, value: float, step: int) -> None:
        if not self.writes:
            return
        if self._tensorboard is None:
            self._tensorboard = SummaryWriter(self.dir, purge_step=self._purge_step)
        self._tensorboard.add_scalar(tag, value, step)
        self._tensorboard.flush()


def per_class_text(class_accuracy: dict[str, float | None]) -> str:
    """ "airplane 38%, automobile 45%, ..." ("-" for a class without test images)."""
    return ", ".join(
        f"{name} {'-' if accuracy is None else f'{100 * accuracy:.0f}%'}"
        for name, accuracy in class_accuracy.items()
    )


def shown(path: Path) -> str:
    """The path relative to the working directory when it lies below it, as a user would type it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _timestamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="seconds")
