"""The rule a field's value keeps, declared with it (`epochs: int = checked(10, FROM_ONE)`), and
its one-line refusal: the key, the value as typed, what would be valid."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from omegaconf import MISSING, DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from experiments.core.text import as_typed

CHECK, SAVED = "check", "saved"  # a checked field's metadata

Check = Callable[[DictConfig], str | None]  # the one line that refuses a config, or None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Rule:
    """A value `test` keeps, said as `what`, meaning `means`; `others`: values taken besides, each
    with its meaning; `example`: one it refuses (the golden file's)."""

    what: str = ""
    test: Callable[[Any], bool] = bool
    example: Any = None
    means: str = ""
    others: tuple[tuple[Any, str], ...] = ()

    def but(self, **changes: Any) -> Rule:
        return dataclasses.replace(self, **changes)

    def or_(self, value: Any, means: str = "") -> Rule:
        return self.but(others=(*self.others, (value, means)))

    def or_null(self, means: str = "") -> Rule:
        return self.or_(None, means)

    def holds(self, value: Any) -> bool:
        return any(value == other for other, _ in self.others) or self.kept_by(value)

    def kept_by(self, value: Any) -> bool:
        return self.test(value)

    def kind(self) -> str:
        return self.what

    def bad(self) -> Any:
        return self.example

    def says(self) -> str:
        text = f"must be {self.kind()}" + (f": {self.means}" if self.means else "")
        for value, means in self.others:
            text += f", or {as_typed(value)}" + (f" ({means})" if means else "")
        return text

    def refusal(self, key: str, value: Any) -> str | None:
        if self.holds(value):
            return None
        unbounded = not_finite(value)
        it = f"{unbounded}: it " if unbounded else ""
        return f"{key}={as_typed(value)} {it}{self.says()}"


def not_finite(value: Any) -> str | None:
    """What a float no range holds is (NaN compares as neither below nor above a bound)."""
    if not isinstance(value, float) or math.isfinite(value):
        return None
    return "is not a number" if math.isnan(value) else "is infinite"


def whole_number(value: Any) -> bool:
    """An int, not a bool (which Python counts as one) nor a float."""
    return isinstance(value, int) and not isinstance(value, bool)


@dataclasses.dataclass(frozen=True)
class Number(Rule):
    """A finite number within `bounds`, as a message writes them ("[0, 1)", ">= 1"; "": any)."""

    bounds: str = ""
    whole: bool = False
    unit: str = ""

    def limits(self) -> tuple[float | None, float | None, bool, bool]:
        if self.bounds.startswith(("[", "(")):
            low, high = (_parsed(end) for end in self.bounds[1:-1].split(","))
            return low, high, self.bounds[0] == "(", self.bounds[-1] == ")"
        if self.bounds.startswith(">"):
            return _parsed(self.bounds.lstrip(">= ")), None, self.bounds[1] != "=", False
        return None, None, False, False

    def kept_by(self, value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if (self.whole and not whole_number(value)) or not math.isfinite(value):
            return False
        low, high, above, below = self.limits()
        return (low is None or value > low or (value == low and not above)) and (
            high is None or value < high or (value == high and not below)
        )

    def written(self) -> str:
        """The bounds as a message writes them: ">= 1", "in [0, 1)", "from 1 to 14" (whole)."""
        low, high, _, _ = self.limits()
        if high is None:
            return self.bounds
        return f"from {low:,} to {high:,}" if self.whole else f"in {self.bounds}"

    def kind(self) -> str:
        of = f" of {self.unit}" if self.unit else ""
        if not self.bounds:
            return f"a finite number{of}"
        noun = f"a number{of}" if self.unit or not self.written().startswith("in ") else ""
        noun = "a whole number" if self.whole and not self.unit else noun
        return f"{noun} {self.written()}".strip()

    def bad(self) -> Any:
        low, _, above, _ = self.limits()
        if low is None:
            return math.nan
        refused = low if above else low - 1
        return int(refused) if self.whole else float(refused)


@dataclasses.dataclass(frozen=True)
class Numbers(Rule):
    each: Number = Number()
    count: int | None = None

    def kept_by(self, value: Any) -> bool:
        if not _a_list(value) or self.count not in (None, len(value)):
            return False
        return all(self.each.kept_by(number) for number in value)

    def kind(self) -> str:
        many = {None: "", 2: "two "}.get(self.count, f"{self.count} ")
        if not self.each.bounds:
            return f"{many}finite numbers"
        return f"{many}{'whole ' if self.each.whole else ''}numbers, each {self.each.written()}"

    def bad(self) -> list[Any]:
        return [self.each.bad()] * (self.count or 1)


def _parsed(text: str) -> float:
    """An int where it is one (2**64 - 1 is no float's)."""
    text = text.strip()
    return int(text) if text.lstrip("-").isdigit() else float(text)


def _a_list(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str)


def text(what: str = "a name") -> Rule:
    return Rule(what=what, test=lambda given: isinstance(given, str) and given != "", example="")


def texts(what: str) -> Rule:
    return Rule(
        what=what,
        test=lambda given: _a_list(given) and all(isinstance(text, str) for text in given),
        example=[0],
    )


def one_of(choices: Sequence[str]) -> Rule:
    """A saved config's Enum, which no schema types there."""
    return Rule(what=f"one of {', '.join(choices)}", test=lambda text: text in choices, example=0)


def settings(what: str, schema: type) -> Rule:
    keys = ", ".join(entry.name for entry in dataclasses.fields(schema))
    return Rule(what=f"{what} ({keys})", test=lambda held: isinstance(held, Mapping), example=0.5)


def checked(
    default: Any = MISSING,
    rule: Rule | None = None,
    *,
    saved: Rule | None = None,
    factory: Any = None,
) -> Any:
    """A schema field with its rule, and a saved config's where it differs (a batch is not auto)."""
    metadata = {CHECK: rule, SAVED: saved or rule}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def rule_of(schema: type, key: str, *, saved: bool = False) -> Rule | None:
    """Declared where the field first is: a subclass giving it another default keeps its rule."""
    for owner in getattr(schema, "__mro__", ()):
        found = getattr(owner, "__dataclass_fields__", {}).get(key)
        if found is not None and CHECK in found.metadata:
            return found.metadata[SAVED if saved else CHECK]
    return None


def nested(schema: type, key: str) -> bool:
    """Whether `key` holds settings checked with their section's (trainer.ema), not a section."""
    found = getattr(schema, "__dataclass_fields__", {}).get(key)
    return found is None or found.default_factory is not dataclasses.MISSING


def schema_rules(schema: type, path: str, *, saved: bool = False) -> list[tuple[str, Rule]]:
    found = []
    for entry in dataclasses.fields(schema):
        key = f"{path}.{entry.name}" if path else entry.name
        rule = rule_of(schema, entry.name, saved=saved)
        found += [(key, rule)] if rule is not None else []
        if dataclasses.is_dataclass(entry.default_factory):
            found += schema_rules(entry.default_factory, key, saved=saved)
    return found


def field_refusal(node: Any, path: str) -> str | None:
    """The first refusal of a composed config's fields at `path`, nested settings' too. An
    interpolation is read only where a rule needs it: it may name a field derived later."""
    if not isinstance(node, DictConfig):
        return None
    schema = OmegaConf.get_type(node)
    for key in map(str, node):
        rule = rule_of(schema, key)
        if OmegaConf.is_missing(node, key) or (
            rule is None and (OmegaConf.is_interpolation(node, key) or not nested(schema, key))
        ):
            continue
        where = f"{path}.{key}" if path else key
        try:
            value = node[key]
        except OmegaConfBaseException as error:
            return unreadable(where, error)
        refusal = rule.refusal(where, value) if rule else None
        if refusal is None and isinstance(value, DictConfig) and nested(schema, key):
            refusal = field_refusal(value, where)
        if refusal is not None:
            return refusal
    return None


def unreadable(key: str, error: OmegaConfBaseException) -> str:
    first = str(error).splitlines()[0]
    return f"{key} cannot be read ({first}): each section on its way holds settings"


_ABSENT = object()


class FieldCheck(NamedTuple):
    """A field of a saved config (plain data) held to its rule; a field it lacks is not checked."""

    key: str
    rule: Rule

    def __call__(self, cfg: DictConfig) -> str | None:
        try:
            value = OmegaConf.select(cfg, self.key, default=_ABSENT)
        except OmegaConfBaseException as error:
            return unreadable(self.key, error)
        return None if value is _ABSENT else self.rule.refusal(self.key, value)
