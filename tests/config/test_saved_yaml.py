"""A run folder's YAML read as data (experiments.config.saved_yaml): bounded in size, and with no
anchors or aliases, which Hydra never writes; `resume=` and `replay=` refuse such a file in one
line, at once."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from experiments.config.overrides import with_saved_overrides
from experiments.config.saved_yaml import SAVED_YAML, read_saved_yaml
from experiments.core.errors import ExperimentError

# Nine levels of nine aliases each: 9**9 (387 million) strings once expanded.
BILLION_LAUGHS = "- &a0 model=lenet\n" + "".join(
    f"- &a{level} [{', '.join([f'*a{level - 1}'] * 9)}]\n" for level in range(1, 10)
)
GIVES_WAY = "where Hydra wrote the run's overrides as a YAML list of key=value; put it back from a "


def saved(folder: Path, text: str) -> Path:
    (folder / ".hydra").mkdir()
    (folder / ".hydra" / "overrides.yaml").write_text(text)
    return folder


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (BILLION_LAUGHS, 1),
        # Each alias an override Hydra would take: without the check, two runs' worth of them.
        ("- trainer.epochs=2\n- &seed trainer.seed=1\n- *seed\n", 2),
    ],
    ids=["billion-laughs", "aliased-override"],
)
@pytest.mark.parametrize("key", ["resume", "replay"])
def test_anchors_and_aliases_are_refused_at_once(
    tmp_path: Path, key: str, text: str, line: int
) -> None:
    folder = saved(tmp_path, text)
    started = time.perf_counter()
    with pytest.raises(ExperimentError) as error:
        with_saved_overrides([f"{key}={folder}"])
    assert time.perf_counter() - started < 1
    assert str(error.value) == (
        f"{key}={folder}: its .hydra/overrides.yaml holds a YAML anchor or alias (&name, *name) "
        f"at line {line}, which Hydra never writes, {GIVES_WAY}copy, or write them there again"
    )


def test_a_file_over_the_limit_is_not_read_whole(tmp_path: Path) -> None:
    folder = saved(tmp_path, "- trainer.epochs=2\n" * (SAVED_YAML.most // 10))
    with pytest.raises(ExperimentError) as error:
        with_saved_overrides([f"replay={folder}"])
    assert str(error.value).startswith(
        f"{folder / '.hydra' / 'overrides.yaml'} is 1.9 MiB: more than 1 MiB, the most a run's "
        "saved configuration may be"
    )


def test_a_named_pipe_is_refused_unread(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "overrides.yaml")  # read, it would wait for a writer for ever
    with pytest.raises(ExperimentError) as error:
        read_saved_yaml(tmp_path / "overrides.yaml")
    assert str(error.value).startswith(
        f"{tmp_path / 'overrides.yaml'} is not a regular file (a named pipe); "
    )


def test_what_hydra_writes_reads_as_before(tmp_path: Path) -> None:
    path = tmp_path / "overrides.yaml"
    path.write_text("- model=lenet\n- trainer.seed=${trainer.epochs}\n- 'dataset.root=a: b'\n")
    expected = ["model=lenet", "trainer.seed=${trainer.epochs}", "dataset.root=a: b"]
    assert read_saved_yaml(path) == expected
