"""A callback of one's own (`callbacks.<name>._target_`): the README's runs as printed, every hook
is called in its place with the run to read, and a target that is not a callback is refused in
one line, the run folder recording why."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from experiments.config.overrides import with_saved_overrides
from experiments.core.errors import ExperimentError
from helpers import QUICK, ROOT, results, train_cli

# Each hook as it is called, appended to hooks.jsonl in the run folder.
HOOKS = """
import json

from experiments.callbacks import Callback


class Hooks(Callback):
    def _say(self, run, hook, **seen):
        with open(run.run_dir / "hooks.jsonl", "a") as file:
            file.write(json.dumps({"hook": hook, "epochs": len(run.history), **seen}) + "\\n")

    def on_setup_end(self, run):
        self._say(run, "setup_end", steps=run.steps_per_epoch, model=run.cfg.model.name)

    def on_train_step_end(self, run, epoch, step):
        self._say(run, "step", epoch=epoch, step=step)

    def on_train_epoch_end(self, run, epoch, training):
        self._say(run, "train_epoch_end", epoch=epoch, images=training.images)

    def should_stop(self, run):
        self._say(run, "should_stop")

    def on_epoch_end(self, run, end):
        self._say(run, "epoch_end", epoch=end.epoch, last=end.last, loss=end.row["test_loss"])

    def on_fit_end(self, run, summary):
        refused = []
        for change in (lambda: run.history.append({}), lambda: setattr(run, "cfg", None)):
            try:
                change()
            except AttributeError as error:  # (dataclasses' FrozenInstanceError is one)
                refused.append(type(error).__name__)
        self._say(run, "fit_end", accuracy=summary["test_accuracy"], refused=refused)
"""


def readme_example() -> tuple[str, list[str]]:
    """The README's callback (its Python block) and the overrides its command types."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Callbacks of your own", 1)[1].split("\n## ", 1)[0]
    (source,) = re.findall(r"```python\n(.*?)```", section, re.S)
    (command,) = re.findall(r"^\$ python train\.py (.*)$", section, re.M)
    return source, command.split()


@pytest.mark.slow
def test_the_readmes_callback_stops_the_run_where_its_reason_says(tmp_path: Path) -> None:
    source, overrides = readme_example()
    (tmp_path / "my_callbacks.py").write_text(source)
    # Its threshold raised to what three batches reach.
    done = train_cli(tmp_path, *QUICK, *overrides, "callbacks.stop.loss=2.31")
    assert done.returncode == 0, done.stderr
    found = results(done.run_dir)
    assert found["epochs_completed"] == 1
    assert found["stopped_early"]["epoch"] == 1
    assert re.fullmatch(r"train loss 2\.\d{4} is below 2\.31", found["stopped_early"]["reason"])
    assert f"stopping early after epoch 1: {found['stopped_early']['reason']}" in done.stderr
    assert (done.run_dir / "checkpoints" / "last.pt").is_file()


@pytest.mark.slow
def test_every_hook_is_called_in_its_place_with_the_run_to_read(tmp_path: Path) -> None:
    (tmp_path / "my_hooks.py").write_text(HOOKS)
    done = train_cli(tmp_path, *QUICK, "+callbacks.seen._target_=my_hooks.Hooks")
    assert done.returncode == 0, done.stderr
    calls = [json.loads(line) for line in (done.run_dir / "hooks.jsonl").read_text().splitlines()]
    epoch_rows = [
        json.loads(line)
        for line in (done.run_dir / "metrics.jsonl").read_text().splitlines()
        if json.loads(line)["kind"] == "epoch"
    ]
    assert [call["hook"] for call in calls] == [
        "setup_end",
        *(["step"] * 3 + ["train_epoch_end", "should_stop", "epoch_end"]) * 2,
        "fit_end",
    ]
    assert calls[0] == {"hook": "setup_end", "epochs": 0, "steps": 3, "model": "tudui"}
    steps = [(call["epoch"], call["step"]) for call in calls if call["hook"] == "step"]
    assert steps == [(1, 1), (1, 2), (1, 3), (2, 1), (2, 2), (2, 3)]
    # The row is in the history once the epoch is recorded, not while it trains.
    ends = [call for call in calls if call["hook"] == "epoch_end"]
    assert [(call["epoch"], call["epochs"], call["last"]) for call in ends] == [
        (1, 1, False),
        (2, 2, True),
    ]
    assert [call["loss"] for call in ends] == [row["test_loss"] for row in epoch_rows]
    trained = [call for call in calls if call["hook"] == "train_epoch_end"]
    assert [call["epochs"] for call in trained] == [0, 1]
    assert calls[-1]["accuracy"] == results(done.run_dir)["test_accuracy"]
    # What a callback reads of the run, it cannot change.
    assert calls[-1]["refused"] == ["AttributeError", "FrozenInstanceError"]


OWN_FIELDS = """
from experiments.callbacks import Callback


class Fielding(Callback):
    def on_setup_end(self, run):
        return {"mine": 1}
"""


def test_a_callback_of_ones_own_that_returns_fields_is_refused_in_one_line(
    tmp_path: Path,
) -> None:
    (tmp_path / "my_fields.py").write_text(OWN_FIELDS)
    done = train_cli(tmp_path, *QUICK, "+callbacks.x._target_=my_fields.Fielding")
    assert done.returncode == 1
    line = (
        "Fielding.on_setup_end returned {'mine': 1}: a callback of one's own returns None (it "
        "writes what it keeps in run.run_dir; docs/callbacks.md)"
    )
    assert done.last_line.endswith(f"Error: {line}"), done.stderr
    assert results(done.run_dir)["reason"] == line


@pytest.mark.parametrize(
    ("override", "line"),
    [
        (
            "+callbacks.x._target_=collections.OrderedDict",
            "Error: callbacks.x._target_=collections.OrderedDict is not a callback: subclass "
            "experiments.callbacks.Callback",
        ),
        (
            "+callbacks.x._target_=my_hooks.Missing",
            "Error: callbacks.x._target_=my_hooks.Missing: module 'my_hooks' has no attribute "
            "'Missing'",
        ),
        (
            "+callbacks.x=3",
            "Error: callbacks.x=3 names no class: give callbacks.x._target_=<module>.<class>, a "
            "subclass of experiments.callbacks.Callback",
        ),
        (
            "+callbacks.x._target_=my_hooks.Hooks",
            "Error: callbacks.x: Hooks() takes no arguments",
        ),
    ],
)
def test_a_callback_that_cannot_be_one_is_refused_in_one_line(
    tmp_path: Path, override: str, line: str
) -> None:
    (tmp_path / "my_hooks.py").write_text(HOOKS)
    extra = ("+callbacks.x.every=2",) if override.endswith("my_hooks.Hooks") else ()
    done = train_cli(tmp_path, "device=cpu", override, *extra)
    assert done.returncode == 1
    assert done.last_line.endswith(line), done.stderr
    assert "Traceback" not in done.stderr
    found = results(done.run_dir)
    assert found["status"] == "failed"
    assert line.removeprefix("Error: ") == found["reason"]


@pytest.mark.parametrize("key", ["resume", "replay"])
def test_a_saved_callback_is_built_again_only_when_typed_again(tmp_path: Path, key: str) -> None:
    """A run folder's overrides are data: the callback they name is its author's code."""
    (tmp_path / ".hydra").mkdir()
    saved = "+callbacks.seen._target_=my_hooks.Hooks"
    (tmp_path / ".hydra" / "overrides.yaml").write_text(f"- {saved}\n- trainer.epochs=2\n")
    with pytest.raises(ExperimentError) as refused:
        with_saved_overrides([f"{key}={tmp_path}"])
    assert str(refused.value) == (
        f"{key}={tmp_path}: its .hydra/overrides.yaml would build my_hooks.Hooks "
        "(callbacks.seen._target_), not one this project ships; nothing read from a file is "
        f"built unless you type it: type {saved} if you trust it"
    )
    assert saved in with_saved_overrides([f"{key}={tmp_path}", saved])
