"""Objects built from config nodes (`hydra.utils.instantiate`), and configs as plain data."""

from __future__ import annotations

import copy
import importlib
import re
from collections.abc import Iterator
from enum import Enum
from typing import Any

from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from experiments.core.errors import ExperimentError


def build(node: DictConfig, *, leave_out: tuple[str, ...] = (), **kwargs: Any) -> Any:
    """Instantiate a node's `_target_` but `name` and `leave_out`, its errors unwrapped by Hydra."""
    fields = plain(node)
    for key in ("name", *leave_out):
        fields.pop(key, None)
    try:
        return instantiate(fields, **kwargs)
    except InstantiationException as error:
        if error.__cause__ is None:
            raise
        raise error.__cause__ from None


def check_importable(key: str, target: str) -> Any:
    """Import a `_target_` of the user's own before Hydra does, to say plainly what is missing."""
    module_name, _, attribute = target.rpartition(".")
    try:
        if not module_name:
            raise ImportError("give it as <module>.<name>")
        return getattr(importlib.import_module(module_name), attribute)
    except AttributeError as error:
        raise ExperimentError(f"{key}={target}: {error}") from None
    except (ImportError, ValueError) as error:
        raise ExperimentError(
            f"{key}={target} cannot be imported ({error}); put its module in the folder you run "
            "in, or its folder on PYTHONPATH"
        ) from None


def plain(node: DictConfig) -> dict[str, Any]:
    """A config as plain data (Enums as their names), for JSON, checkpoints and instantiate."""
    container = OmegaConf.to_container(node, resolve=True, enum_to_str=True)
    assert isinstance(container, dict)
    return container


def as_written(node: DictConfig) -> DictConfig:
    """`node` as a run's records hold it: a text read from the environment (maybe a secret) as its
    interpolation's text, any other value read there as the run used it. A copy where it differs."""
    texts = [
        (path, raw)
        for path, raw in _reading_environment(OmegaConf.to_container(node, resolve=False))
        if isinstance(value := OmegaConf.select(node, path), str) and not isinstance(value, Enum)
    ]
    if not texts:
        return node
    record = copy.deepcopy(node)  # (typed as `node` is: its resolvers read the schemas)
    for path, raw in texts:
        OmegaConf.update(record, path, as_text(raw), merge=False)
    return record


def reads_environment(value: Any) -> bool:
    return isinstance(value, str) and "${" in value and "oc.env:" in value


def as_text(value: str) -> str:
    """`value` with each interpolation escaped, so OmegaConf never resolves it."""
    return re.sub(r"(?<!\\)((?:\\\\)*)\$\{", r"\1\\${", value)


def _reading_environment(config: Any, path: str = "") -> Iterator[tuple[str, str]]:
    if reads_environment(config):
        yield path, config
    items = enumerate(config) if isinstance(config, list) else getattr(config, "items", list)()
    for key, value in items:
        yield from _reading_environment(value, f"{path}.{key}".lstrip("."))


# Where the shipped targets lived in 0.1's flat modules: a checkpoint then names them, and builds.
MOVED_TARGETS = {
    "experiments.models.": "experiments.training.models.",
    "experiments.schedules.": "experiments.training.schedules.",
    "experiments.placement.": "experiments.devices.placement.",
    "experiments.datasets.torchvision_splits": (
        "experiments.data.torchvision_sources.torchvision_splits"
    ),
    "experiments.datasets.": "experiments.data.builtin.",
    "experiments.image_folder.": "experiments.data.image_folder.",
}


def with_current_targets(config: Any) -> Any:
    """`config` (plain data) with every `_target_` of a moved module where it lives now."""
    if isinstance(config, list):
        return [with_current_targets(item) for item in config]
    if not isinstance(config, dict):
        return config
    updated = {key: with_current_targets(value) for key, value in config.items()}
    target = updated.get("_target_")
    if isinstance(target, str):
        for old, new in MOVED_TARGETS.items():
            if target.startswith(old):
                updated["_target_"] = new + target.removeprefix(old)
                break
    return updated
