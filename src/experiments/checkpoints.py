"""Checkpoints: state_dicts and plain data, written atomically, read without running any code.

A checkpoint (`checkpoints/last.pt` in a run folder) holds the model's, the optimizer's and the
gradient scaler's state_dicts, the epoch, the resolved config, the epochs' numbers so far and the
state of every random generator, so a run resumes exactly where it stopped. It is read with
`torch.load(weights_only=True)`, which refuses anything but tensors and plain data: a damaged or
altered file gives one line saying so, never a traceback, and never runs what it holds.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import torch

from experiments.errors import ExperimentError, one_line

LAST = Path("checkpoints") / "last.pt"
KEYS = {"model", "optimizer", "epoch", "config"}


def write_atomically(path: Path, write: Callable[[IO[bytes]], object]) -> None:
    """Write to a temporary file beside `path`, sync it to disk, then rename it over `path`:
    a crash leaves either the old file or the new one, never a torn one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(temporary, "wb") as file:
        write(file)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
    if hasattr(os, "O_DIRECTORY"):  # make the rename itself durable (POSIX)
        directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)


def save(
    path: Path,
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler,
    epoch: int,
    config: dict[str, Any],
    history: list[dict[str, Any]],
    rng: dict[str, Any],
) -> None:
    """Save what resuming after `epoch` needs (`model` unwrapped, so it loads anywhere)."""
    state = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        # fp16's loss scale and its growth tracker (empty for a disabled scaler), so a resumed
        # run skips exactly the steps the uninterrupted one would.
        "scaler": scaler.state_dict(),
        "epoch": epoch,
        "config": config,
        "history": history,
        "rng": rng,
    }
    write_atomically(path, lambda file: torch.save(state, file))


def restore(
    checkpoint: dict[str, Any],
    run: str,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler,
) -> None:
    """Load a checkpoint's states into the resumed run's model (unwrapped), optimizer and scaler,
    or say in one line that the run is not the one the checkpoint was saved from."""
    try:
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
    except (RuntimeError, ValueError) as error:
        saved = checkpoint["config"]["model"]["name"]
        raise ExperimentError(
            f"resume={run}: its checkpoint (model {saved}) does not fit the model and optimizer "
            f"configured now ({str(error).splitlines()[0].rstrip(':')}); resume with the run's "
            "own model and optimizer settings, or start a new run"
        ) from error
    if checkpoint.get("scaler"):
        scaler.load_state_dict(checkpoint["scaler"])


def to_resume(run: str, epochs: int) -> dict[str, Any]:
    """The checkpoint `resume=<run>` names, if it has epochs left of `epochs` (checked before the
    run's records are touched, so a refused resume leaves them as they were)."""
    path = Path(run) / LAST
    if not path.is_file():
        raise ExperimentError(
            f"resume={run} has no checkpoint to resume from ({LAST} is missing: the run stopped "
            f"before its first checkpoint); start it afresh with replay={run}"
        )
    checkpoint = load(path)
    done = checkpoint["epoch"]
    if done >= epochs:
        raise ExperimentError(
            f"resume={run} has trained {done} epoch{'s' * (done != 1)} of trainer.epochs={epochs} "
            "already; ask for more with trainer.epochs=N"
        )
    return checkpoint


def find(path_or_run: str | Path) -> Path:
    """The checkpoint a path names: a .pt file, or a run folder's checkpoints/last.pt."""
    path = Path(path_or_run)
    if path.is_dir():
        path = path / LAST
    if not path.is_file():
        raise ExperimentError(f"no checkpoint at {path} (give a .pt file or a run folder)")
    return path


def load(path: Path, map_location: torch.device | str = "cpu") -> dict[str, Any]:
    """Read a checkpoint written by `save`, or say in one line why it cannot be used."""
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as error:
        refused = next((line for line in str(error).splitlines() if "GLOBAL" in line), "")
        what = f" ({refused.strip()})" if refused else ""
        raise ExperimentError(
            f"checkpoint {path} holds more than tensors and plain data{what}, so it was not "
            "loaded: it was not written by this tool, or it was altered"
        ) from error
    except Exception as error:  # a torn zip, a truncated file, bytes that are not a checkpoint
        first_sentence = one_line(error).split(". ")[0]
        raise ExperimentError(
            f"checkpoint {path} cannot be read: it is truncated, corrupted or not a checkpoint "
            f"at all (torch.load: {first_sentence})"
        ) from error
    missing = KEYS - set(state) if isinstance(state, dict) else KEYS
    if missing:
        raise ExperimentError(
            f"checkpoint {path} is not one of this tool's: it lacks {', '.join(sorted(missing))}"
        )
    return state
