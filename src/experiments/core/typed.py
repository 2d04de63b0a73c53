"""Whether data read from a file has the shape its reader declares, said in one phrase.

A record from elsewhere (a run folder copied, damaged or made up) is plain data of any shape. Its
reader declares the shape it reads as a type: a TypedDict, `list[...]`, `dict[str, ...]`, a union,
`Literal[...]`, `float`, `int`, `str`, `bool`, `None`. `mismatch` checks the data against it, so a
list where a number belongs is named before anything computes with it.
"""

from __future__ import annotations

import functools
import json
import types
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints, is_typeddict

# What a value of each type is called where it belongs.
EXPECTED = {
    type(None): "null",
    bool: "true or false",
    int: "a whole number",
    float: "a number",
    str: "text",
    list: "a list",
    dict: "an object",
}
# Longest text quoted in a phrase.
QUOTED = 40

# Where in a value a part is (`device.ids[0]`; "" for the whole), and what is wrong with it.
Found = tuple[str, str]


def mismatch(value: Any, expected: Any, name: str, *, partial: bool = False) -> str | None:
    """Where `value` (called `name`: "results.json") is not of the type `expected`, one phrase
    saying where and how: "results.json is a list, where an object belongs", "results.json:
    device.ids[0] is text ("a"), where a whole number belongs", "metrics.jsonl row 3 lacks kind";
    None where it is. A TypedDict's keys are checked where present, and its required keys
    required, unless `partial` (at the top level only: a record that grows as its run goes); keys
    it does not declare are left alone. An `int` is a `float`, and a `bool` is neither."""
    found = _mismatch(value, expected, "", partial)
    if found is None:
        return None
    where, problem = found
    return f"{name}: {where} {problem}" if where else f"{name} {problem}"


def _mismatch(value: Any, expected: Any, where: str, partial: bool = False) -> Found | None:
    if expected is Any:
        return None
    origin = get_origin(expected)
    if origin in (Union, types.UnionType):
        return _union_mismatch(value, get_args(expected), where)
    if origin is Literal:
        options = get_args(expected)
        if any(value == option and type(value) is type(option) for option in options):
            return None
        return where, _is(value, " or ".join(map(_quoted, options)))
    if not _is_a(value, _outer(expected)):
        return where, _is(value, _expected(expected))
    if is_typeddict(expected):
        return _typed_dict_mismatch(value, expected, where, partial)
    if origin is list:
        (item,) = get_args(expected)
        return _first(
            _mismatch(entry, item, f"{where}[{i}]" if where else f"item {i + 1}")
            for i, entry in enumerate(value)
        )
    if origin is dict:
        key_type, item = get_args(expected)
        for key, entry in value.items():
            if not _is_a(key, key_type):
                return where, f"has a key {_what(key)}, where {_expected(key_type)} belongs"
            if (found := _mismatch(entry, item, _within(where, key))) is not None:
                return found
    return None


def _typed_dict_mismatch(
    value: dict[Any, Any], expected: Any, where: str, partial: bool
) -> Found | None:
    hints = _hints(expected)
    if not partial:
        missing = [key for key in hints if key in expected.__required_keys__ and key not in value]
        if missing:
            return where, f"lacks {missing[0]}"
    present = [(key, hint) for key, hint in hints.items() if key in value]
    return _first(_mismatch(value[key], hint, _within(where, key)) for key, hint in present)


def _union_mismatch(value: Any, options: tuple[Any, ...], where: str) -> Found | None:
    found = [_mismatch(value, option, where) for option in options]
    if None in found:
        return None
    # A list where a list of numbers or null belongs: what within it is wrong.
    for option, mismatched in zip(options, found, strict=True):
        if get_origin(option) is not Literal and _is_a(value, _outer(option)):
            return mismatched
    return where, _is(value, " or ".join(_expected(option) for option in options))


@functools.cache
def _hints(typed_dict: Any) -> dict[str, Any]:
    return get_type_hints(typed_dict)


def _outer(expected: Any) -> type:
    """The class a value of `expected` is an instance of: `dict` for a TypedDict."""
    if is_typeddict(expected):
        return dict
    return get_origin(expected) or expected


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
    """A value as a phrase names it: null, true, 2.5, text ("high"), a list, an object."""
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
    """Text in double quotes, a control character in it escaped: the phrase stays one line."""
    return json.dumps(text[:QUOTED], ensure_ascii=False) + ("..." if len(text) > QUOTED else "")


def _first(found: Any) -> Found | None:
    return next((each for each in found if each is not None), None)
