"""Every YAML file of conf/ (but Hydra's own, conf/hydra/) says in its first comment where its
defaults and types live: the schema its defaults list names, as the config store registers it,
so that the comment cannot drift from the file."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from importlib import resources
from importlib.resources.abc import Traversable

import pytest
import yaml
from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from experiments.config import schemas
from experiments.config.store import CONFIG_PACKAGE, new_tag, register_configs

CONF = resources.files(CONFIG_PACKAGE)
SAYS = re.compile(r"# Defaults and types: (\w+) \(src/experiments/config/schemas\.py\)")
GLOBAL = "# @package _global_"  # (Hydra reads it only as the file's first line)


@pytest.fixture(autouse=True, scope="module")
def registered() -> Iterator[None]:
    """The schemas in the config store, as a command registers them."""
    register_configs(datetime.now(), new_tag())
    yield


def yaml_files(folder: Traversable, path: str = "") -> list[str]:
    found = []
    for entry in folder.iterdir():
        name = f"{path}{entry.name}"
        if entry.is_dir() and entry.name not in ("hydra", "__pycache__"):
            found += yaml_files(entry, f"{name}/")
        elif entry.name.endswith(".yaml"):
            found.append(name)
    return sorted(found)


def schema_named(config: str) -> str | None:
    """The class of the schema `config`'s defaults list names (`/mlp_schema@_here_`,
    `/csv_tracker_schema@csv`, `train_schema`), as the config store registers it."""
    defaults = yaml.safe_load((CONF / config).read_text()).get("defaults", [])
    named = [
        entry.removeprefix("/").partition("@")[0]
        for entry in defaults
        if isinstance(entry, str) and entry.partition("@")[0].endswith("_schema")
    ]
    if not named:
        return None
    (schema,) = named
    return OmegaConf.get_type(ConfigStore.instance().load(f"{schema}.yaml").node).__name__


def test_every_yaml_file_is_found() -> None:
    files = yaml_files(CONF)
    assert {"train.yaml", "eval.yaml", "trainer/default.yaml", "tracker/csv.yaml"} <= set(files)
    assert not any(name.startswith("hydra/") for name in files)


@pytest.mark.parametrize("config", yaml_files(CONF))
def test_the_first_comment_names_the_schema_of_the_defaults_list(config: str) -> None:
    lines = (CONF / config).read_text().splitlines()
    if lines[0] == GLOBAL:
        # Merged into the training config: its schema, and those of the options it chooses.
        lines, expected = lines[1:], schema_named("train.yaml")
    else:
        expected = schema_named(config)
    said = SAYS.match(lines[0])
    if expected is None:  # a model of one's own: free-form
        assert lines[0].startswith("# Defaults and types: none (free-form"), lines[0]
        return
    assert said is not None, f"{config} begins {lines[0]!r}"
    assert said[1] == expected
    assert isinstance(getattr(schemas, said[1]), type)
