"""`--price cuda=2.49/h,cpu=0.05/h` (or `--price @prices.yaml`): what an hour of each device
costs, by its kind or by its name as runs record it, for the device cards' cost to the target."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import yaml
from yaml.events import AliasEvent

from experiments.core.errors import ExperimentError
from experiments.core.files import KIB, Bound, Unparsed, as_text, not_yaml, read_data

FORM = "DEVICE=NUMBER/h (e.g. --price cuda=2.49/h,cpu=0.05/h, or --price @prices.yaml)"
IN_FILE = "DEVICE: NUMBER/h (e.g. `cuda: 2.49/h`)"
FILE = "@"
PRICES_FILE = Bound(
    "a prices file", 64 * KIB, "a prices file maps each device to its price an hour: `cuda: 2.49/h`"
)
_PER_HOUR = re.compile(r"\s*([0-9.eE+-]+)\s*/\s*h\s*")
SECONDS_PER_HOUR = 3600


@dataclass(frozen=True)
class Prices:
    """The price of an hour of each device named, by kind (`cuda`) or name (`cuda:0`)."""

    per_hour: dict[str, float]

    def of(self, device: str) -> float | None:
        """An hour's price of `device` (`cuda:0`): its own, else its kind's; None if not given."""
        return self.per_hour.get(device, self.per_hour.get(device.partition(":")[0]))

    def refusal(self, used: Iterable[str]) -> str | None:
        """Why not, where a price names a device no run used."""
        used = sorted(set(used))
        kinds = {device.partition(":")[0] for device in used}
        unused = [name for name in self.per_hour if name not in used and name not in kinds]
        if not unused:
            return None
        return (
            f"--price names {', '.join(unused)}, which no run used; the runs used "
            f"{', '.join(used) or 'no device'}"
        )


def parse_prices(text: str) -> Prices:
    """`cuda=2.49/h,cpu=0.05/h`, or `@FILE` of a YAML mapping; ExperimentError in one line."""
    if text.startswith(FILE):
        path = Path(text[len(FILE) :])
        mapping = read_data(path, PRICES_FILE, _as_mapping)
        return _checked(mapping, lambda device, price: f"{path}: `{device}: {price}`", IN_FILE)
    pairs: dict[str, str] = {}
    for given in text.split(","):
        device, equals, price = (part.strip() for part in given.partition("="))
        if not equals and Path(text).is_file():
            raise ExperimentError(f"price {text!r} is a file: give it as --price @{text}")
        if not equals or not device:
            raise ExperimentError(f"price {given.strip()!r} is not {FORM}")
        if device in pairs:
            raise ExperimentError(f"--price gives {device} twice; give each device once")
        pairs[device] = price
    return _checked(pairs, lambda device, price: f"price {device}={price}", FORM)


def _checked(pairs: Mapping[Any, Any], said: Callable[[Any, Any], str], form: str) -> Prices:
    per_hour = {}
    for device, price in pairs.items():
        found = _PER_HOUR.fullmatch(str(price))
        try:
            number = float(found.group(1)) if found else math.nan
        except ValueError:
            number = math.nan
        if not math.isfinite(number) or not isinstance(device, str):
            raise ExperimentError(f"{said(device, price)} is not {form}")
        if number <= 0:
            raise ExperimentError(
                f"{said(device, price)} is {'negative' if number < 0 else '0'}: a price is what an "
                "hour of the device costs, above 0; leave out a device that costs nothing"
            )
        per_hour[device] = number
    return Prices(per_hour)


def _as_mapping(file: IO[bytes]) -> dict[Any, Any]:
    # A mapping of plain values: an alias could make a small file grow past memory.
    text = as_text(file)
    try:
        if any(isinstance(event, AliasEvent) for event in yaml.parse(text, yaml.SafeLoader)):
            raise Unparsed("holds a YAML alias (*name)", PRICES_FILE.what_is_valid)
        mapping = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise Unparsed(not_yaml(error), PRICES_FILE.what_is_valid) from None
    if not isinstance(mapping, dict):
        raise Unparsed("is not a mapping of device to price", PRICES_FILE.what_is_valid)
    return mapping
