"""Checkpoints, read with `weights_only=True`: a checksum proves the bytes intact, not their author
friendly, so each field evaluation and resume read is checked as it loads too."""

from __future__ import annotations

import math
import pickle
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

import torch
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException
from torch.optim.lr_scheduler import LRScheduler

from experiments.config import trust
from experiments.config.build import as_text, reads_environment, with_current_targets
from experiments.config.checks import whole_number
from experiments.config.validate import saved_config_refusal
from experiments.core import files
from experiments.core.errors import ExperimentError, one_line
from experiments.core.text import as_typed
from experiments.records import checksum
from experiments.training.ema import ModelAverage
from experiments.training.history import History

LAST = Path("checkpoints") / "last.pt"
BEST = Path("checkpoints") / "best.pt"
KEYS = {"model", "optimizer", "epoch", "config"}
# The config's sections evaluation and resume read (older checkpoints lack the optional ones).
SECTIONS = ("model", "dataset", "trainer")
OPTIONAL_SECTIONS = ("task", "scheduler")
CHECKSUM = "checksum"
BATCH_SEARCH = "batch_search"


def state(
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: LRScheduler,
    scaler: torch.amp.GradScaler,
    epoch: int,
    config: dict[str, Any],
    history: History,
    rng: dict[str, Any],
    selected_confusion: list[list[int]],
    data: dict[str, Any],
    steps_per_epoch: int,
    ema: ModelAverage | None = None,
    batch_search: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """What resuming after `epoch` needs (`model` unwrapped, so it loads anywhere)."""
    return {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        # fp16's loss scale, so a resumed run skips exactly the steps the uninterrupted one would.
        "scaler": scaler.state_dict(),
        "ema": None if ema is None else ema.state_dict(),
        "epoch": epoch,
        "config": config,
        "history": history,
        "rng": rng,
        "selected_confusion": selected_confusion,
        "data": data,
        "steps_per_epoch": steps_per_epoch,
        BATCH_SEARCH: None if batch_search is None else dict(batch_search),
    }


def save(path: Path, checkpoint: dict[str, Any]) -> None:
    """Write `checkpoint`, with its checksum, whole or not at all."""
    summed = {**checkpoint, CHECKSUM: checksum.digest(checkpoint)}
    with files.writing(path):
        path.parent.mkdir(exist_ok=True)  # checkpoints/, in the run folder (never made again)
    files.write_atomically(path, lambda file: torch.save(summed, file))


def to_resume(run: str, epochs: int, scheduler: str, *, completed: bool = True) -> dict[str, Any]:
    """The checkpoint `resume=<run>` names, if it has epochs (or results) left of `epochs`."""
    path = Path(run) / LAST
    if not path.is_file():
        why, remedy = _why_none(run)
        raise ExperimentError(f"resume={run} has no checkpoint to resume from ({why}); {remedy}")
    checkpoint = load(path)
    done = checkpoint["epoch"]
    saved = checkpoint["config"].get("scheduler", {}).get("name", "none")
    if done > epochs or (done == epochs and completed):
        more = (
            "ask for more with trainer.epochs=N"
            if saved == "none"
            else f"its scheduler={saved} ends there: train longer afresh with replay={run} "
            "trainer.epochs=N"
        )
        raise ExperimentError(
            f"resume={run} has trained {done} epoch{'s' * (done != 1)} of trainer.epochs={epochs} "
            f"already; {more}"
        )
    if saved != scheduler:
        raise ExperimentError(
            f"resume={run} was trained with scheduler={saved}, not scheduler={scheduler}; a "
            "schedule cannot change part-way: resume with its own, or start a new run"
        )
    planned = checkpoint["config"]["trainer"]["epochs"]
    if saved != "none" and planned != epochs:
        raise ExperimentError(
            f"resume={run}: its scheduler={saved} spans the trainer.epochs={planned} it was "
            f"planned for, and cannot stretch to trainer.epochs={epochs} part-way; train "
            f"{epochs} epochs afresh with replay={run} trainer.epochs={epochs}"
        )
    return checkpoint


def _as_checkpoint(file: IO[bytes]) -> Any:
    try:
        return torch.load(file, map_location="cpu", weights_only=True)
    except ExperimentError:
        raise  # grown past a checkpoint's bound as it was read
    except pickle.UnpicklingError as error:
        refused = next((line for line in str(error).splitlines() if "GLOBAL" in line), "")
        what = f" ({refused.strip()})" if refused else ""
        raise files.Unparsed(
            f"holds more than tensors and plain data{what}, so it was not loaded: it was not "
            "written by this tool, or it was altered"
        ) from error
    except Exception as error:  # a torn zip, a truncated file, bytes that are not a checkpoint
        first_sentence = one_line(error).split(". ")[0]
        raise files.Unparsed(
            "cannot be read: it is truncated, corrupted or not a checkpoint at all (torch.load: "
            f"{first_sentence})"
        ) from error


def _why_none(run: str) -> tuple[str, str]:
    folder, last = Path(run) / LAST.parent, Path(run) / LAST
    afresh = f"start it afresh with replay={run}"
    if folder.exists() and not folder.is_dir():
        why = f"its {LAST.parent} is a file, not the folder of its checkpoints"
        return why, f"put the folder back from a copy, or {afresh}"
    if last.exists():
        return f"its {LAST} is not a file", f"put the file back from a copy, or {afresh}"
    if (Path(run) / BEST).is_file():
        why = f"{LAST} is missing, though {BEST} is there: last.pt was deleted or moved"
        return why, f"put it back (a resume goes on from the last epoch), or {afresh}"
    return f"{LAST} is missing: the run stopped before its first checkpoint", afresh


def find(path_or_run: str | Path) -> Path:
    """The checkpoint a path names: a .pt file, or a run folder's best.pt, else its last.pt."""
    path = Path(path_or_run)
    if path.is_dir():
        path = path / BEST if (path / BEST).is_file() else path / LAST
    files.refuse_special_file(path, files.CHECKPOINT.what_is_valid)
    if not path.is_file():
        raise ExperimentError(f"no checkpoint at {path} (give a .pt file or a run folder)")
    return path


def load(path: Path) -> dict[str, Any]:
    """Read a checkpoint onto the host, or say in one line why it cannot be used."""
    state = files.read_data(path, files.CHECKPOINT, _as_checkpoint, name=f"checkpoint {path}")
    missing = KEYS - set(state) if isinstance(state, dict) else KEYS
    if missing:
        raise ExperimentError(
            f"checkpoint {path} is not one of this tool's: it lacks {', '.join(sorted(missing))}"
        )
    saved_sum = state.pop(CHECKSUM, None)
    # Older than checksums, a checkpoint lacks steps_per_epoch too; else no checksum is damage.
    unchecked_old = saved_sum is None and "steps_per_epoch" not in state
    if not unchecked_old and saved_sum != checksum.digest(state):
        raise ExperimentError(
            f"checkpoint {path} is corrupted: what it holds does not match the checksum saved in "
            "it (damaged on disk or in a copy), so it was not loaded; use an intact copy, or "
            "train afresh with replay=<run>"
        )
    fault = (
        _average_fault(state.get("ema")) or _config_fault(state["config"]) or _fields_fault(state)
    )
    if fault:
        raise ExperimentError(
            f"checkpoint {path} is not one of this tool's: its {fault}; it was altered, and was "
            "not used"
        )
    # Modules since moved named anew; a text read from the environment is never resolved again.
    return {**state, "config": with_current_targets(_environment_as_text(state["config"]))}


def evaluated_weights(checkpoint: dict[str, Any]) -> tuple[str, dict[str, torch.Tensor]]:
    """The weights a run evaluated and selected by, named "model" or "ema" (trainer.ema)."""
    if checkpoint.get("ema") is not None:
        return "ema", checkpoint["ema"]["weights"]
    return "model", checkpoint["model"]


def _average_fault(average: Any) -> str | None:
    if average is None or (
        isinstance(average, dict)
        and isinstance(average.get("weights"), dict)
        and isinstance(average.get("steps"), int)
    ):
        return None
    return f"ema is {_described(average)}, where a run saves its average's weights and steps"


def _config_fault(config: Any) -> str | None:
    """What a checkpoint's config holds that no run saves, in words that follow "its"."""
    if not isinstance(config, dict):
        return (
            f"config is {_described(config)}, where a saved config maps each section to its "
            "settings"
        )
    for section in SECTIONS:
        if not isinstance(config.get(section), dict):
            held = f"is {_described(config[section])}" if section in config else "is missing"
            return f"config section {section} {held}, where every saved config has its settings"
    for section in OPTIONAL_SECTIONS:
        if section in config and not isinstance(config[section], dict):
            return (
                f"config section {section} is {_described(config[section])}, where a saved "
                "config that has one has its settings"
            )
    interpolated = _interpolation_in(config)
    if interpolated:
        return (
            f"config holds an interpolation (${{...}}) at {interpolated}, where a saved config "
            "holds values"
        )
    # Its targets are checked where they are built, against what is typed then (eval.py, resume).
    refusal = trust.refusal(trust.Built(settings=tuple(trust.settings_in(config))))
    return refusal and f"config {refusal}"


def _fields_fault(state: dict[str, Any]) -> str | None:
    try:  # (a text read from the environment stays its text: nothing is resolved to be checked)
        saved = OmegaConf.create(_environment_as_text(state["config"]))
    except OmegaConfBaseException as error:  # a key no config has (a tuple)
        return f"config is no config OmegaConf reads ({str(error).splitlines()[0]})"
    refusal = saved_config_refusal(saved)
    if refusal:
        return f"config's {refusal}"
    epoch, epochs = state["epoch"], state["config"]["trainer"].get("epochs", math.inf)
    if not (whole_number(epoch) and 1 <= epoch <= epochs):
        within = "" if epochs == math.inf else f" to its config's trainer.epochs={epochs}"
        return (
            f"epoch={as_typed(epoch)} must be a whole number from 1{within}: the epochs its run "
            "had trained when it was saved"
        )
    steps = state.get("steps_per_epoch")  # (None: an older checkpoint)
    if steps is not None and not (whole_number(steps) and steps >= 1):
        return (
            f"steps_per_epoch={as_typed(steps)} must be a whole number >= 1: an epoch's "
            "optimizer steps"
        )
    return None


def _described(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return f"a string ({value[:40]!r})"
    return f"of type {type(value).__name__}"


def _interpolation_in(config: Any, key: str = "config") -> str | None:
    """The key of the first `${...}` in a config, which a run saves resolved."""
    if isinstance(config, str):
        return key if "${" in config and not reads_environment(config) else None
    if isinstance(config, dict):
        items = [(f"{key}.{name}", value) for name, value in config.items()]
    elif isinstance(config, list):
        items = [(f"{key}[{index}]", value) for index, value in enumerate(config)]
    else:
        return None
    return next(filter(None, (_interpolation_in(value, at) for at, value in items)), None)


def _environment_as_text(config: Any) -> Any:
    if isinstance(config, list):
        return [_environment_as_text(item) for item in config]
    if isinstance(config, dict):
        return {key: _environment_as_text(value) for key, value in config.items()}
    return as_text(config) if reads_environment(config) else config
