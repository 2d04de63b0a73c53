"""The schemas and options Hydra composes from, and the resolvers the run folder's name uses.

This package must not import torch: `python train.py --cfg job` and `--help` stay fast.
"""

from __future__ import annotations

import secrets
from datetime import datetime

from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from experiments.config.choices import DeviceName
from experiments.config.naming import job_folder_name
from experiments.config.schemas import SCHEMAS, DeviceConfig
from experiments.core.text import gpu_name

# The configs: conf/ in a checkout (an editable install maps the package there), or the copy an
# installed wheel carries.
CONFIG_PACKAGE = "experiments.conf"

# `device=cuda:N` is an option of the device group for every index up to this; beyond it,
# `device=cuda device.index=N` asks for the same thing.
CUDA_OPTIONS = 16


def register_configs(started: datetime, tag: str) -> None:
    """Register the schemas, the `cuda:N` device options and the folder-name resolvers.

    `started` and `tag` name the run folder (`${started:<strftime format>}`, `${unique:}`); all
    processes of a distributed run are given the same.
    """
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


def direction_of(metric: str) -> str:
    """Resolver for a sweeper's direction: down for a loss, up for the rest."""
    return "minimize" if metric.endswith("loss") else "maximize"


def new_tag() -> str:
    """The random part of a run folder's name: runs started in the same second never share one."""
    return secrets.token_hex(4)
