"""A folder or file named by `resume=`, `replay=` or `eval.py ckpt=` works as printed, whatever its
characters (`outputs/café`, `ünï_ドル`, quotes, spaces): Hydra's grammar reads only ASCII letters
unquoted, so such a path is passed to it quoted. A path no override can carry is refused in one
line saying how to pass it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from experiments.config.overrides import with_saved_overrides
from experiments.config.paths import as_value, with_paths_as_given
from experiments.core.errors import ExperimentError
from helpers import compose_config, metrics, results, train_cli

NAMES = [
    "café",
    "ünï_ドル",
    "it's",
    'say "hi"',
    "$(ls) and $HOME",
    "1_trainer.seed=1,model=lenet",  # a sweep job's folder, as earlier versions named them
    "back\\slash\\",
    "\\'quote after a backslash",
    " spaces around ",
    "100",  # a number, unquoted
]


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_any_path_is_one_value_hydra_reads_back_as_it_is(name: str) -> None:
    path = f"/home/me/outputs/{name}"
    value = as_value(path)
    cfg = compose_config(f"resume={value}", f"hydra.run.dir={value}", hydra=True)
    assert (cfg.resume, cfg.hydra.run.dir) == (path, path)


def test_a_plain_path_stays_as_it_is() -> None:
    assert as_value("/home/me/outputs/2026-11-24/10-00-00_ab12cd34") == (
        "/home/me/outputs/2026-11-24/10-00-00_ab12cd34"
    )
    assert as_value("/home/me/outputs/café") == "'/home/me/outputs/café'"


@pytest.fixture
def run_folder(tmp_path: Path) -> Path:
    """A run folder (its saved overrides, a checkpoint) below a folder with a non-ASCII name."""
    run = tmp_path / "ünï_ドル" / "outputs" / "café run"
    (run / ".hydra").mkdir(parents=True)
    OmegaConf.save(OmegaConf.create(["model=lenet"]), run / ".hydra" / "overrides.yaml")
    (run / "checkpoints").mkdir()
    (run / "checkpoints" / "last.pt").write_bytes(b"")
    return run


@pytest.mark.parametrize("key", ["resume", "replay"])
def test_a_run_folder_with_any_name_is_resumed_or_replayed(key: str, run_folder: Path) -> None:
    # As printed, and quoted as Hydra's documentation shows (the quotes are not part of the path).
    for given in (str(run_folder), f"'{run_folder}'"):
        cfg = compose_config(*with_saved_overrides([f"{key}={given}"]), hydra=True)
        assert (cfg[key], cfg.model.name) == (str(run_folder), "lenet")
    assert (cfg.hydra.run.dir == str(run_folder)) == (key == "resume")


def test_a_checkpoint_or_data_with_any_name_is_taken_as_it_is(run_folder: Path) -> None:
    for path in (run_folder, run_folder / "checkpoints" / "last.pt"):
        cfg = compose_config(*with_paths_as_given([f"ckpt={path}"]), config_name="eval")
        assert cfg.ckpt == str(path)
    weights, data = run_folder / "checkpoints" / "last.pt", run_folder.parent
    typed = ["dataset=image_folder", f"dataset.root={data}", f"model.weights={weights}"]
    cfg = compose_config(*with_paths_as_given(typed))
    assert (cfg.dataset.root, cfg.model.weights) == (str(data), str(weights))


@pytest.mark.parametrize(
    ("name", "held"),
    [
        ("two\nlines", "\\n (a control character)"),
        ("${oops}", "${ (the start of an interpolation)"),
        ("caf\udce9", "\\xe9 (not text)"),  # the byte of a Latin-1 name, in a UTF-8 locale
    ],
)
def test_a_path_no_override_can_carry_is_refused_saying_how_to_pass_it(
    name: str, held: str, tmp_path: Path
) -> None:
    run = tmp_path / name
    shown = str(tmp_path / name.replace("\n", "\\n").replace("\udce9", "\\xe9"))
    with pytest.raises(ExperimentError) as refused:
        as_value(str(run))
    assert str(refused.value) == (
        f"{shown} holds {held}, which an override cannot carry; rename it, and pass its new name"
    )


@pytest.mark.slow
def test_a_run_in_a_non_ascii_folder_resumes_as_printed(old_run: Path, tmp_path: Path) -> None:
    cwd = tmp_path / "ünï_ドル"
    (cwd / "outputs").mkdir(parents=True)
    run = shutil.move(old_run, cwd / "outputs" / "café")

    done = train_cli(cwd, "resume=outputs/café", "trainer.epochs=2", "device=cpu")

    assert done.returncode == 0, done.stderr
    assert done.last_line.endswith("-> outputs/café")
    resumed = results(run)
    assert (resumed["status"], resumed["resumed_after_epochs"]) == ("completed", [1])
    assert [row["epoch"] for row in metrics(run, "epoch")] == [1, 2]
