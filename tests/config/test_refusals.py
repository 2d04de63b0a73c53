"""Every field's own rule (`config.checks`, declared with its field in `config.schemas`), refusing
a value it does not keep: each message is written once, by its rule's kind, and held here in one
golden file, so a change of wording is a one-file diff; docs/errors.md's list of them is written
from the same rules. `REGENERATE=1 python -m pytest tests/config/test_refusals.py` writes both
anew."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
from omegaconf import MISSING, OmegaConf

from experiments.config import schemas
from experiments.config.checks import FieldCheck, Rule, rule_of, schema_rules
from experiments.config.validate import SAVED_CHECKS

GOLDEN = Path(__file__).parent / "golden" / "refusals.txt"
ERRORS = Path(__file__).parents[2] / "docs" / "errors.md"
BEGIN = "<!-- Written from the schemas' rules by tests/config/test_refusals.py: edit the rules. -->"
END = "<!-- End of the rules' list. -->"
REGENERATE = os.environ.get("REGENERATE") == "1"

# Where each schema's fields are typed: its section's key (eval.py's at the top level), for the
# schema and those that extend it.
SECTIONS: dict[str, type] = {
    "model": schemas.ModelConfig,
    "dataset": schemas.DatasetConfig,
    "device": schemas.DeviceConfig,
    "optimizer": schemas.OptimizerConfig,
    "scheduler": schemas.SchedulerConfig,
    "trainer": schemas.TrainerConfig,
    "tracker.mlflow": schemas.MlflowTrackerConfig,
    "tracker.wandb": schemas.WandbTrackerConfig,
    "": schemas.EvalSchema,
}


def rules_of(section: str) -> dict[str, Rule]:
    """Each key of a section with its rule, over every schema of the section, once."""
    base = SECTIONS[section]
    found: dict[str, Rule] = {}
    for schema in [base, *(s for s in schemas.SCHEMAS.values() if issubclass(s, base))]:
        for key, rule in schema_rules(schema, section):
            found.setdefault(key, rule)
    return found


def every_rule() -> list[tuple[str, str, Rule]]:
    """(the command, the key, its rule) for every checked field; then each field a checkpoint's
    saved config is held to, where its rule is another (a saved batch is never auto)."""
    typed = [
        ("eval.py" if not section else "train.py", key, rule)
        for section in SECTIONS
        for key, rule in rules_of(section).items()
    ]
    composed = {key: rule for command, key, rule in typed if command == "train.py"}
    saved = [
        ("checkpoint", check.key, check.rule)
        for check in SAVED_CHECKS
        if isinstance(check, FieldCheck) and composed.get(check.key) is not check.rule
    ]
    return typed + saved


def golden_text() -> str:
    return "".join(
        f"{command}: {rule.refusal(key, rule.bad())}\n" for command, key, rule in every_rule()
    )


def markdown() -> str:
    """docs/errors.md's list: a row per key, what it must be and the line a bad value gets."""
    said = {"train.py": "", "eval.py": " (eval.py)", "checkpoint": " (a checkpoint's config)"}
    rows = [
        f"| `{key}`{said[command]} | {rule.says()} | `{rule.refusal(key, rule.bad())}` |"
        for command, key, rule in every_rule()
    ]
    table = ["| key | what it must be | a value out of range is told |", "|---|---|---|", *rows]
    return "\n".join([BEGIN, "", *table, "", END])


def regenerated(path: Path, old: str, new: str) -> None:
    if REGENERATE and old != new:
        path.write_text(new)


def test_every_fields_refusal_is_the_golden_files() -> None:
    new = golden_text()
    GOLDEN.parent.mkdir(exist_ok=True)
    old = GOLDEN.read_text() if GOLDEN.exists() else ""
    regenerated(GOLDEN, old, new)
    assert old == new or REGENERATE, "REGENERATE=1 writes the golden file anew; check its diff"


def test_errors_md_lists_every_fields_rule() -> None:
    text = ERRORS.read_text()
    assert BEGIN in text and END in text
    before, _, rest = text.partition(BEGIN)
    _, _, after = rest.partition(END)
    new = before + markdown() + after
    regenerated(ERRORS, text, new)
    assert text == new or REGENERATE, "REGENERATE=1 writes docs/errors.md's list anew"


@pytest.mark.parametrize(("command", "key", "rule"), every_rule(), ids=lambda x: str(x)[:40])
def test_each_rule_refuses_its_example_and_names_the_key(
    command: str, key: str, rule: Rule
) -> None:
    told = rule.refusal(key, rule.bad())
    assert told is not None and told.startswith(f"{key}=") and " must be " in told


def test_every_default_keeps_its_fields_rule() -> None:
    for schema in schemas.SCHEMAS.values():
        for entry in dataclasses.fields(schema):
            rule = rule_of(schema, entry.name)
            made = entry.default_factory
            default = entry.default if made is dataclasses.MISSING else made()
            if rule is not None and default is not MISSING:
                held = OmegaConf.create({"default": default}).default  # as a config holds it
                assert rule.holds(held), (schema.__name__, entry.name, default)


def test_every_schema_with_rules_has_a_section() -> None:
    for schema in schemas.SCHEMAS.values():
        if schema_rules(schema, ""):
            assert any(issubclass(schema, base) for base in SECTIONS.values()), schema
