"""Whether data read from a file has the shape its reader declares as a type, said in one phrase."""

from __future__ import annotations

import functools
import json
import types
from collections.abc import Callable
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints, is_typeddict

from experiments.core.errors import ExperimentError

EXPECTED = {
    type(None): "null",
    bool: "true or false",
    int: "a whole number",
    float: "a number",
    str: "text",
    list: "a list",
    dict: "an object",
}
QUOTED = 40

# Where in a value a part is (`device.ids[0]`; "" for the whole), and what is wrong with it.
Mismatch = tuple[str, str]


def mismatch(value: Any, expected: Any, name: str, *, partial: bool = False) -> str | None:
    """ "results.json: device.ids[0] is text ("a"), where a whole number belongs", or None."""
    found = _checker(expected, partial)(value, "")
    if found is None:
        return None
    where, problem = found
    return f"{name}: {where} {problem}" if where else f"{name} {problem}"


def checked(value: Any, expected: Any, name: str, *, partial: bool = False) -> Any:
    """`value`, once of type `expected`; ExperimentError saying where and how otherwise."""
    if (problem := mismatch(value, expected, name, partial=partial)) is not None:
        raise ExperimentError(problem)
    return value


# What is wrong with a value at `where` in its record, or None.
Check = Callable[[Any, str], "Mismatch | None"]


@functools.cache  # made once per type: a report checks every epoch row of every run
def _checker(expected: Any, partial: bool = False) -> Check:
    if expected is Any:
        return lambda value, where: None
    origin = get_origin(expected)
    if origin in (Union, types.UnionType):
        return _union_checker(get_args(expected))
    if origin is Literal:
        options = get_args(expected)
        said = " or ".join(map(_quoted, options))

        def literal(value: Any, where: str) -> Mismatch | None:
            same = any(value == option and type(value) is type(option) for option in options)
            return None if same else (where, _is(value, said))

        return literal
    outer, said = _outer(expected), _expected(expected)
    inner: Check | None = None
    if is_typeddict(expected):
        inner = _typed_dict_checker(expected, partial)
    elif origin is list:
        inner = _list_checker(_checker(get_args(expected)[0]))
    elif origin is dict:
        inner = _dict_checker(*get_args(expected))

    def check(value: Any, where: str) -> Mismatch | None:
        if not _is_a(value, outer):
            return where, _is(value, said)
        return inner(value, where) if inner else None

    return check


def _typed_dict_checker(expected: Any, partial: bool) -> Check:
    checks = {key: _checker(hint) for key, hint in get_type_hints(expected).items()}
    required = [] if partial else [key for key in checks if key in expected.__required_keys__]

    def check(value: dict[Any, Any], where: str) -> Mismatch | None:
        for key in required:
            if key not in value:
                return where, f"lacks {key}"
        for key, entry in value.items():
            if key in checks and (found := checks[key](entry, _within(where, key))):
                return found
        return None

    return check


def _list_checker(item: Check) -> Check:
    def check(value: list[Any], where: str) -> Mismatch | None:
        for i, entry in enumerate(value):
            if found := item(entry, f"{where}[{i}]" if where else f"item {i + 1}"):
                return found
        return None

    return check


def _dict_checker(key_type: Any, item_type: Any) -> Check:
    item = _checker(item_type)

    def check(value: dict[Any, Any], where: str) -> Mismatch | None:
        for key, entry in value.items():
            if not _is_a(key, key_type):
                return where, f"has a key {_what(key)}, where {_expected(key_type)} belongs"
            if found := item(entry, _within(where, key)):
                return found
        return None

    return check


def _union_checker(options: tuple[Any, ...]) -> Check:
    checks = [(_checker(option), option) for option in options]
    said = " or ".join(_expected(option) for option in options)

    def check(value: Any, where: str) -> Mismatch | None:
        found = [each(value, where) for each, _ in checks]
        if None in found:
            return None
        # A list where a list of numbers or null belongs: what within it is wrong.
        for (_, option), mismatched in zip(checks, found, strict=True):
            if get_origin(option) is not Literal and _is_a(value, _outer(option)):
                return mismatched
        return where, _is(value, said)

    return check


def _outer(expected: Any) -> type:
    return dict if is_typeddict(expected) else get_origin(expected) or expected


def _is_a(value: Any, outer: type) -> bool:
    if isinstance(value, bool):
        return outer is bool
    if outer is float:
        return isinstance(value, (int, float))
    return isinstance(value, outer)


def _expected(expected: Any) -> str:
    outer = _outer(expected)
    return EXPECTED.get(outer, outer.__name__)


def _within(where: str, key: Any) -> str:
    return f"{where}.{key}" if where else str(key)


def _is(value: Any, expected: str) -> str:
    return f"is {_what(value)}, where {expected} belongs"


def _what(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        text = repr(value)
        return text if len(text) <= QUOTED else f"{text[:QUOTED]}..."
    if isinstance(value, str):
        return f"text ({_quoted(value)})"
    return EXPECTED.get(type(value), f"a {type(value).__name__}")


def _quoted(text: str) -> str:
    """Quoted, a control character escaped: the phrase stays one line."""
    return json.dumps(text[:QUOTED], ensure_ascii=False) + ("..." if len(text) > QUOTED else "")
