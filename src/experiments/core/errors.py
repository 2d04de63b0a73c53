"""The one exception type for bad input, and how any error becomes one line for the user."""

from __future__ import annotations

import dataclasses
import re

from hydra.errors import (
    ConfigCompositionException,
    HydraException,
    MissingConfigException,
    OverrideParseException,
)
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException

from experiments.core.hints import did_you_mean, no_such_key, template_equivalent
from experiments.core.text import abridged


class ExperimentError(Exception):
    """Bad input the user can fix; the message is one line: the bad value, and what is valid."""


def one_line(error: BaseException) -> str:
    """Say what went wrong in one line, in the user's terms where we know them."""
    if isinstance(error, MissingConfigException) and error.options is not None:
        return _unknown_option(error)
    if isinstance(error, OverrideParseException):
        return _malformed_override(error)
    if isinstance(error, ConfigCompositionException) and (designed := _composition(error)):
        return designed
    # "Error merging override trainer.epochs=abc" becomes "trainer.epochs=abc".
    message = _flatten(str(error)).removeprefix("Error merging override ")
    if isinstance(cause := error.__cause__, OmegaConfBaseException):
        # Hydra's own message names the override; OmegaConf's names the key and the type.
        detail = _flatten(str(cause).split("\n    full_key:")[0])
        message = f"{message}: {detail}" if detail not in message else message
    if isinstance(error, (ExperimentError, HydraException)):
        return message
    return f"{type(error).__name__}: {message}"


def _composition(error: ConfigCompositionException) -> str | None:
    """Hydra's several-line advice on an override it cannot apply, said in one line."""
    text = str(error)
    if text.startswith("Ambiguous value for argument"):
        given = text.split("'")[1]
        return (
            f"{given} gives several values: to sweep over them, add -m "
            f"(python train.py -m {given}); for one list value, write key=[a,b]"
        )
    if text.startswith("Could not append to config"):
        key = text.split("'")[1]
        return f"+{key}: {key} is there already; set it with {key}=... (+ adds a key)"
    if deleted := re.match(r"Could not delete from config\. '(.+?)' does not exist", text):
        said = f"~{deleted[1]}: the config has no {deleted[1]} to leave out"
        equivalent = template_equivalent(deleted[1])
        return f"{said}; {equivalent or 'python train.py --cfg job prints the config'}"
    unknown = re.match(r"Could not override '(.+?)'\.\nTo append to your config use \+(\S+)", text)
    if unknown and isinstance(cause := error.__cause__, (ConfigAttributeError, ConfigKeyError)):
        given, path, schema = unknown[2], str(cause.full_key or unknown[1]), cause.object_type
        if schema is not None and dataclasses.is_dataclass(schema):
            return no_such_key(given, path, [entry.name for entry in dataclasses.fields(schema)])
        # A free-form section: a data source's arguments, a model's of the user's own.
        present = [str(key) for key in cause.parent_node or []]
        return no_such_key(given, path, present, free_form=True)
    return None


def _unknown_option(error: MissingConfigException) -> str:
    # missing_cfg_file is "<group>/<option>", e.g. "device/gpu".
    group, _, option = (error.missing_cfg_file or "").rpartition("/")
    options = ", ".join(abridged(list(error.options or [])))
    if not group:
        return _flatten(str(error))
    said = f"{group}={option} is not an option of '{group}'"
    if equivalent := template_equivalent(group, option):
        return f"{said}; {equivalent}"
    meant = [did_you_mean(option, error.options or [])]
    if group == "model":  # model=resnet18, most likely: said first
        meant.insert(0, f"a torchvision architecture is model=torchvision model.arch={option}")
    hint = "; or ".join(filter(None, meant))
    return f"{said}; choose one of: {options}" + (f" ({hint})" if hint else "")


def _malformed_override(error: OverrideParseException) -> str:
    first_line = error.message.splitlines()[0]
    # The lexer's own message repeats the override with a caret under it; the parser's is a phrase.
    detail = "" if first_line.startswith("LexerNoViableAltException") else f" ({first_line})"
    return (
        f"malformed override '{error.override}'{detail}; overrides look like key=value, "
        "key=[a,b] or +new_key=value (https://hydra.cc/docs/advanced/override_grammar/basic)"
    )


def _flatten(text: str) -> str:
    return " ".join(line.strip() for line in text.strip().splitlines() if line.strip())
