"""A model started from a state dict of one's own (`model.weights=PATH`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

import torch
from torch import nn

from experiments.core.errors import ExperimentError
from experiments.core.files import CHECKPOINT, Unparsed, read_data, refuse_special_file

NAMED = 3  # the tensors a refusal names before it says how many more there are


def load_weights(model: nn.Module, path: str, partial: bool = False) -> list[str]:
    """Load the state dict at `path` into `model`; returns its tensors' names left as built."""
    if Path(path).is_dir():
        raise ExperimentError(
            f"model.weights={path} is a folder; give the file torch.save(model.state_dict(), "
            "PATH) wrote"
        )
    what_is_valid = "model.weights= takes the file torch.save(model.state_dict(), PATH) wrote"
    refuse_special_file(path, what_is_valid)
    if not Path(path).is_file():
        raise ExperimentError(f"model.weights={path}: no such file")
    state = read_data(
        path, CHECKPOINT, _as_state_dict, name=f"model.weights={path}", what_is_valid=what_is_valid
    )
    if not isinstance(state, Mapping) or not all(
        isinstance(value, torch.Tensor) for value in state.values()
    ):
        raise ExperimentError(
            f"model.weights={path} holds no state dict (names to tensors); write one with "
            "torch.save(model.state_dict(), PATH)"
        )
    ours = model.state_dict()
    misfits = _misfits(state, ours)
    if not misfits:
        model.load_state_dict(state)
        return []
    fitting = {name: tensor for name, tensor in state.items() if _fits(name, tensor, ours)}
    if not partial or not fitting:
        more = f", and {len(misfits) - NAMED} more" if len(misfits) > NAMED else ""
        how = (
            "none of its tensors fits"
            if partial
            else "model.weights_partial=true loads the tensors that fit and leaves the others as "
            "built"
        )
        raise ExperimentError(
            f"model.weights={path} does not fit the model: {', '.join(misfits[:NAMED])}{more} "
            f"(the model is built for the dataset's channels and classes before its weights are "
            f"loaded); {how}"
        )
    model.load_state_dict(fitting, strict=False)
    return [name for name in ours if name not in fitting]


def _fits(name: str, tensor: torch.Tensor, ours: Mapping[str, torch.Tensor]) -> bool:
    return name in ours and ours[name].shape == tensor.shape


def _as_state_dict(file: IO[bytes]) -> Any:
    try:
        return torch.load(file, map_location="cpu", weights_only=True)
    except ExperimentError:
        raise  # grown past a checkpoint's bound as it was read
    # Bytes that are no torch file fail in pickle's ways or the zip reader's: all the same here.
    except Exception as error:
        raise Unparsed(
            "is no state dict torch.load can read with weights_only=True (write one with "
            "torch.save(model.state_dict(), PATH))"
        ) from error


def _misfits(theirs: Mapping[str, torch.Tensor], ours: Mapping[str, torch.Tensor]) -> list[str]:
    misfits = [f"{name} is missing there" for name in ours if name not in theirs]
    misfits += [f"{name} is not in the model" for name in theirs if name not in ours]
    misfits += [
        f"{name} is {_shape(theirs[name])} there and {_shape(tensor)} here"
        for name, tensor in ours.items()
        if name in theirs and theirs[name].shape != tensor.shape
    ]
    return misfits


def _shape(tensor: torch.Tensor) -> str:
    return "x".join(map(str, tensor.shape)) or "a single number"
