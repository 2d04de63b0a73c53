"""Which `_target_`s a config read from a file may have built: those shipped for their slot, or
typed now; else whoever wrote the file would choose what gets called (`torch.load` of a pickle)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, fields, is_dataclass
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

import yaml
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, ListConfig
from omegaconf.errors import OmegaConfBaseException

from experiments.config.schemas import SCHEMAS
from experiments.config.store import CONFIG_PACKAGE
from experiments.core.errors import ExperimentError

TARGET = "_target_"
# The keys besides `_target_` that Hydra's instantiate reads, each changing what a target builds.
INSTANTIATE_KEYS = ("_partial_", "_args_", "_recursive_", "_convert_")
# torch's optimizers and schedulers: a name read from a file is looked up, never imported.
_OPTIMIZERS = (
    "ASGD Adadelta Adafactor Adagrad Adam AdamW Adamax LBFGS Muon NAdam RAdam RMSprop Rprop SGD "
    "SparseAdam"
)
_SCHEDULERS = (
    "ChainedScheduler ConstantLR CosineAnnealingLR CosineAnnealingWarmRestarts CyclicLR "
    "ExponentialLR LambdaLR LinearLR MultiStepLR MultiplicativeLR OneCycleLR PolynomialLR "
    "ReduceLROnPlateau SequentialLR StepLR"
)
TORCH_OPTIMIZERS = {
    "optimizer": frozenset(f"torch.optim.{name}" for name in _OPTIMIZERS.split()),
    "scheduler": frozenset(f"torch.optim.lr_scheduler.{name}" for name in _SCHEDULERS.split()),
}


@dataclass(frozen=True)
class Target:
    """A `_target_` in a config, whether `nested` in another's arguments, and its override."""

    key: str
    target: str
    nested: bool
    override: str = ""

    def __post_init__(self) -> None:
        if not self.override:
            object.__setattr__(self, "override", f"{self.key}={self.target}")

    @property
    def slot(self) -> str:
        """What it is built as (`model`, `dataset.source`)."""
        return slot_of(self.key)


def slot_of(key: str) -> str:
    return key.removesuffix(TARGET).removesuffix(".")


def targets_in(config: Any, path: str = "", inside: bool = False) -> Iterator[Target]:
    """Every `_target_` in `config` (plain data), outermost first."""
    if isinstance(config, list):
        for index, item in enumerate(config):
            yield from targets_in(item, f"{path}[{index}]", inside)
    if not isinstance(config, dict):
        return
    target = config.get(TARGET)
    if target == "???":  # MISSING: an option that leaves it to the user (dataset=custom)
        target = None
    if target is not None:
        yield Target(f"{path}.{TARGET}".lstrip("."), str(target), inside)
    for key, value in config.items():
        if key != TARGET:
            yield from targets_in(value, f"{path}.{key}".lstrip("."), inside or target is not None)


def resolved_so_far(node: Any) -> Any:
    """A composed config as plain data, each interpolation resolved that can be now (targets of
    `${oc.decode:...}` too); one the data fills in later is None, checked again once it loads."""
    if not isinstance(node, (DictConfig, ListConfig)):
        return node
    keys = range(len(node)) if isinstance(node, ListConfig) else list(node.keys())
    plain: dict[Any, Any] = {}
    for key in keys:
        try:
            plain[key] = resolved_so_far(node[key])
        except OmegaConfBaseException:
            plain[key] = None
    return list(plain.values()) if isinstance(node, ListConfig) else plain


def targets_named(overrides: Iterable[str]) -> list[Target]:
    """The targets overrides name: as a key's value or in a dict or list value."""
    found: list[Target] = []
    for override in OverridesParser.create().parse_overrides(list(overrides)):
        key, text = override.key_or_group, override.input_line or ""
        # A sweep (-m model._target_=a.Net,b.Net) names each of its values.
        values = (
            list(override.sweep_iterator()) if override.is_sweep_override() else [override.value()]
        )
        for value in values:
            if key == TARGET or key.endswith(f".{TARGET}"):
                if value is not None:
                    nested = slot_of(key) not in shipped_targets()
                    found.append(Target(key, str(value), nested, text))
            else:
                found += [
                    Target(f"{key}.{target.key}".replace(".[", "["), target.target, True, text)
                    for target in targets_in(value)
                ]
    return found


def settings_named(overrides: Iterable[str]) -> set[str]:
    """The keys of the instantiate settings overrides set, as a key or in a dict or list value."""
    found: set[str] = set()
    for override in OverridesParser.create().parse_overrides(list(overrides)):
        key = override.key_or_group
        if key.rpartition(".")[2] in INSTANTIATE_KEYS:
            found.add(key)
        elif not override.is_sweep_override():
            found |= set(settings_in(override.value(), key))
    return found


def is_shipped(target: str, slot: str) -> bool:
    return target in shipped_targets().get(slot, ())


def slots_of(target: str) -> list[str]:
    return sorted(slot for slot, targets in shipped_targets().items() if target in targets)


@cache
def shipped_targets() -> dict[str, frozenset[str]]:
    """By slot: those of conf/'s options and schemas, and torch's optimizers and schedulers."""
    found: dict[str, set[str]] = {slot: set(targets) for slot, targets in TORCH_OPTIMIZERS.items()}
    for package, option in _options():
        for target in targets_in(option, package):
            found.setdefault(target.slot, set()).add(target.target)
    for slot, schema in _schemas_by_slot():
        target = _default(schema, TARGET)
        if isinstance(target, str) and target != "???":
            found.setdefault(slot, set()).add(target)
    return {slot: frozenset(targets) for slot, targets in found.items()}


@cache
def shipped_settings() -> frozenset[str]:
    """Where the schemas set instantiate settings: the only places a saved config holds one."""
    return frozenset(
        f"{slot}.{key}"
        for slot, schema in _schemas_by_slot()
        for key in INSTANTIATE_KEYS
        if _default(schema, key) is not None
    )


def settings_in(config: Any, path: str = "") -> Iterator[str]:
    if isinstance(config, list):
        for index, item in enumerate(config):
            yield from settings_in(item, f"{path}[{index}]")
    elif isinstance(config, dict):
        for key, value in config.items():
            at = f"{path}.{key}".lstrip(".")
            if key in INSTANTIATE_KEYS:
                yield at
            yield from settings_in(value, at)


def _schemas_by_slot() -> Iterator[tuple[str, type]]:
    for package, option in _options():
        for name, at in _schemas_in(option):
            if name in SCHEMAS:
                slot = package if at == "_here_" else ".".join(filter(None, (package, at)))
                yield slot, SCHEMAS[name]


@cache
def _options() -> tuple[tuple[str, Any], ...]:
    return tuple(
        (package, _without_hydra(yaml.safe_load(text)))
        for package, text in _option_files(resources.files(CONFIG_PACKAGE))
    )


def _default(schema: type, name: str) -> Any:
    entries = fields(schema) if is_dataclass(schema) else ()
    return next((field.default for field in entries if field.name == name), None)


def _schemas_in(option: Any) -> Iterator[tuple[str, str]]:
    """The schemas an option's defaults list names, each with its package (`@mlflow`, `_here_`)."""
    defaults = option.get("defaults", []) if isinstance(option, dict) else []
    for entry in defaults:
        if isinstance(entry, str):
            name, _, at = entry.lstrip("/").partition("@")
            yield name, at or "_here_"


def _without_hydra(config: Any) -> Any:
    if isinstance(config, dict):
        config.pop("hydra", None)
    return config


def _option_files(folder: Traversable, group: str = "") -> Iterator[tuple[str, str]]:
    """The text of each option file under `folder` (Hydra's own aside), with its package."""
    for entry in folder.iterdir():
        if entry.is_dir() and entry.name not in ("hydra", "__pycache__"):
            yield from _option_files(entry, ".".join(filter(None, (group, entry.name))))
        elif entry.name.endswith(".yaml"):
            text = entry.read_text()
            yield _package(text, group), text


def _package(text: str, group: str) -> str:
    for line in text.splitlines():
        if line.startswith("# @package "):
            package = line.removeprefix("# @package ").strip()
            return {"_global_": "", "_group_": group}.get(package, package)
    return group


@dataclass(frozen=True)
class Built:
    """The targets and instantiate settings a config would build, or that the user typed."""

    targets: tuple[Target, ...] = ()
    settings: tuple[str, ...] = ()

    @classmethod
    def in_config(cls, config: Any, path: str = "") -> Built:
        return cls(tuple(targets_in(config, path)), tuple(settings_in(config, path)))

    @classmethod
    def in_overrides(cls, overrides: Iterable[str]) -> Built:
        lines = list(overrides)
        return cls(tuple(targets_named(lines)), tuple(sorted(settings_named(lines))))

    def __or__(self, other: Built) -> Built:
        return Built(self.targets + other.targets, self.settings + other.settings)


NOTHING_TYPED = Built()  # a checkpoint's config is read before any command line


def refusal(
    built: Built, typed: Built = NOTHING_TYPED, allow: Callable[[Target], str] | None = None
) -> str | None:
    """Why a config read from a file may not build `built`, or None: each target and setting must
    be typed now at its key, or shipped there; `allow(target)` says how to allow one."""
    typed_targets = {(found.key, found.target) for found in typed.targets}
    for found in built.targets:
        typed_there = (found.key, found.target) in typed_targets
        if typed_there or (is_shipped(found.target, found.slot) and not found.nested):
            continue
        slots = slots_of(found.target)
        if not slots:
            why = "not one this project ships"
        elif found.nested:
            why = "inside another target's arguments"
        else:
            why = f"which this project ships as {' and '.join(slots)}, not as {found.slot}"
        told = f"; nothing read from a file is built unless you type it: {allow(found)}"
        return f"would build {found.target} ({found.key}), {why}" + (told if allow else "")
    allowed = shipped_settings() | set(typed.settings)
    unshipped = next((key for key in built.settings if key not in allowed), None)
    if unshipped is None:
        return None
    told = f"; nothing read from a file sets one elsewhere unless you type it: +{unshipped}=<value>"
    return (
        f"sets {unshipped}, which changes what its section builds; the project sets such keys "
        f"only at {', '.join(sorted(shipped_settings()))}" + (told if allow else "")
    )


def refuse_untrusted(
    built: Built, typed: Built, source: str, allow: Callable[[Target], str] | None = None
) -> None:
    """Refuse in one line what `refusal` refuses; `source` says where the config was read."""
    why = refusal(built, typed, allow or typed_again)
    if why is not None:
        raise ExperimentError(f"{source} {why}")


def typed_again(found: Target) -> str:
    return f"type {found.override} if you trust it"
