"""Data read from a file against the type its reader declares: one phrase naming where it is not
of that type, and how (`experiments.core.typed.mismatch`)."""

from __future__ import annotations

from typing import Any, Literal, TypedDict

import pytest

from experiments.core.typed import mismatch


class Device(TypedDict, total=False):
    type: str
    ids: list[int]


class Record(TypedDict):
    status: str
    accuracy: float | None
    device: Device
    better: dict[str, Literal["min", "max"]]


GOOD = {"status": "completed", "accuracy": 1, "device": {"ids": [0, 1]}, "better": {"a": "min"}}


@pytest.mark.parametrize(
    ("changed", "said"),
    [
        ({"accuracy": [0.5]}, "r.json: accuracy is a list, where a number or null belongs"),
        ({"accuracy": True}, "r.json: accuracy is true, where a number or null belongs"),
        ({"status": None}, "r.json: status is null, where text belongs"),
        (
            {"device": {"ids": [0, 2.5]}},
            "r.json: device.ids[1] is 2.5, where a whole number belongs",
        ),
        ({"device": {"ids": "0"}}, 'r.json: device.ids is text ("0"), where a list belongs'),
        (
            {"better": {"a": "up\n"}},
            'r.json: better.a is text ("up\\n"), where "min" or "max" belongs',
        ),
        ({"better": []}, "r.json: better is a list, where an object belongs"),
    ],
)
def test_a_value_of_another_type_is_named_where_it_is(changed: dict[str, Any], said: str) -> None:
    assert mismatch(GOOD, Record, "r.json") is None
    assert mismatch({**GOOD, **changed}, Record, "r.json") == said


def test_a_record_is_an_object_with_its_required_keys_unless_partial() -> None:
    assert mismatch([GOOD], Record, "r.json") == "r.json is a list, where an object belongs"
    assert mismatch({"status": "running"}, Record, "r.json") == "r.json lacks accuracy"
    assert mismatch({"status": "running", "other": [1]}, Record, "r.json", partial=True) is None
    assert mismatch(["a", 5], list[str], "o.yaml") == "o.yaml: item 2 is 5, where text belongs"
    assert mismatch({1: 2}, dict[str, Any], "c") == "c has a key 1, where text belongs"
