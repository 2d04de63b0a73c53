"""The schemas and options Hydra composes from, and its resolvers; no torch, so `--help` is fast."""

from __future__ import annotations

import contextlib
import dataclasses
import re
import secrets
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from experiments.config.choices import DeviceName
from experiments.config.naming import job_folder_name
from experiments.config.schemas import SCHEMAS, DeviceConfig
from experiments.core.text import abridged, gpu_name

CONFIG_PACKAGE = "experiments.conf"  # conf/ (an editable install maps it there), or a wheel's

# `device=cuda:N` options up to this; beyond, `device=cuda device.index=N` says the same.
CUDA_OPTIONS = 16


def register_configs(started: datetime, tag: str) -> None:
    """`started` and `tag` name the run folder, the same in every process of a distributed run."""
    store = ConfigStore.instance()
    # Outside any group, so they are not offered as options (`--help` lists groups).
    for name, node in SCHEMAS.items():
        store.store(name=name, node=node)
    for index in range(CUDA_OPTIONS):
        store.store(group="device", name=gpu_name(index), node=DeviceConfig(DeviceName.cuda, index))
    OmegaConf.register_new_resolver("started", started.strftime, replace=True)
    OmegaConf.register_new_resolver("unique", lambda: tag, replace=True)
    OmegaConf.register_new_resolver("sweep_job", job_folder_name, replace=True)
    OmegaConf.register_new_resolver("direction_of", direction_of, replace=True)
    OmegaConf.register_new_resolver("option_or_class", option_or_class, replace=True)
    OmegaConf.register_new_resolver("options_of", options_text, replace=True)
    OmegaConf.register_new_resolver("command", lambda: command_name(sys.argv[0]), replace=True)


def direction_of(metric: str) -> str:
    return "minimize" if metric.endswith("loss") else "maximize"


def option_or_class(option: str, *, _parent_: DictConfig) -> str:
    """Resolver of an option's `name`: its own, or its class's where another `_target_` is set."""
    shipped = next(
        entry.default
        for entry in dataclasses.fields(OmegaConf.get_type(_parent_))
        if entry.name == "_target_"
    )
    target = str(_parent_._target_)
    return option if target == shipped else target.rpartition(".")[2]


def new_tag() -> str:
    return secrets.token_hex(4)


def config_groups() -> list[str]:
    return sorted(
        entry.name
        for entry in resources.files(CONFIG_PACKAGE).iterdir()
        if entry.is_dir() and entry.name not in ("hydra", "__pycache__")
    )


def options_text(searchpath: Sequence[str], choices: Mapping[str, object]) -> str:
    """Resolver for `--help`: a line per group the command takes, with its options."""
    groups = sorted(group for group in choices if not group.startswith("hydra/"))
    return "".join(
        f"{group}: {', '.join(abridged(group_options(group, searchpath)))}\n" for group in groups
    )


def shipped_option(group: str, option: str) -> dict[str, Any]:
    """What conf/<group>/<option>.yaml sets, as plain data; {} for one the project does not ship."""
    if option not in group_options(group):
        return {}
    path = resources.files(CONFIG_PACKAGE) / group / f"{option}.yaml"
    loaded = yaml.safe_load(path.read_text()) if path.is_file() else None
    return loaded if isinstance(loaded, dict) else {}


def default_option(group: str) -> str | None:
    """The option train.yaml's defaults list chooses for `group`."""
    train = yaml.safe_load((resources.files(CONFIG_PACKAGE) / "train.yaml").read_text())
    chosen = (
        entry[group] for entry in train["defaults"] if isinstance(entry, dict) and group in entry
    )
    return next((str(option) for option in chosen), None)


def group_options(group: str, searchpath: Sequence[str] = ()) -> list[str]:
    """As Hydra finds them: in conf/<group>/, on `hydra.searchpath`, and registered (cuda:N)."""
    folders = [resources.files(CONFIG_PACKAGE) / group]
    for entry in searchpath:
        scheme, _, where = str(entry).partition("://")
        folders.append(Path(where) / group if scheme == "file" else resources.files(where) / group)
    names = {
        entry.name.removesuffix(".yaml")
        for folder in folders
        if folder.is_dir()
        for entry in folder.iterdir()
        if entry.name.endswith(".yaml")
    }
    with contextlib.suppress(OSError):  # a group with nothing registered
        names |= {name.removesuffix(".yaml") for name in ConfigStore.instance().list(group)}
    return sorted(names, key=_by_number)


def _by_number(name: str) -> list[Any]:
    """Numbers by their value: cuda:2 before cuda:10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def command_name(argv0: str) -> str:
    """The command as the user typed it: python train.py, python -m experiments, or a script."""
    path = Path(argv0)
    if path.name == "__main__.py":
        return f"python -m {path.parent.name}"
    return f"python {path.name}" if path.suffix == ".py" else path.name
