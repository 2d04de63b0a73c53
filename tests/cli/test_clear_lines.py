"""Mistakes that used to end in a Python error's own words (MissingMandatoryValue, an overflow
after training began, IsADirectoryError, "no such file" for a folder, a YAML parser's complaint,
a log line split in two), each said now in one line naming the key or the path. Each is tested
where it is decided; only the run folder Hydra cannot make is a command line's own."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf
from torch import nn

from experiments.config.overrides import with_saved_overrides
from experiments.config.validate import validate
from experiments.core.errors import ExperimentError
from experiments.records import running
from experiments.run.setup import compile_backends
from experiments.run.train import train
from experiments.training.weights import load_weights
from helpers import compose_config, load_error, results, small_folder, train_cli


def test_a_group_taken_away_is_named_with_its_options() -> None:
    with pytest.raises(ExperimentError) as error:
        validate(compose_config("~model"))
    assert str(error.value) == (
        "no model chosen (~model takes its choice away); choose one with model=<option>: "
        "custom, lenet, mlp, network, timm, torchvision, tudui, unet"
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "group", ["dataset", "device", "optimizer", "scheduler", "placement", "trainer"]
)
def test_a_run_without_a_group_records_why(group: str, tmp_path: Path) -> None:
    """results.json is begun before the run is refused, from what the config has."""
    with pytest.raises(ExperimentError) as error:
        train(compose_config(f"~{group}"), tmp_path)
    assert str(error.value).startswith(f"no {group} chosen (~{group} takes its choice away)")
    recorded = results(tmp_path)
    assert (recorded["status"], recorded["reason"], recorded["model"]) == (
        "failed",
        str(error.value),
        "tudui",
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "override",
    ["optimizer.lr=1e+308", "optimizer.weight_decay=1e+39", "scheduler=onecycle", "scheduler=step"],
)
def test_a_number_float32_cannot_hold_is_refused_before_training(override: str) -> None:
    """(The two options show fields of schedules that float32's bound alone holds.)"""
    key, value = {
        "scheduler=onecycle": ("scheduler.max_lr", "1e+39"),
        "scheduler=step": ("scheduler.gamma", "-1e+39"),
    }.get(override, override.split("="))
    with pytest.raises(ExperimentError) as error:
        validate(compose_config(override, f"{key}={value.replace(' ', '')}"))
    assert str(error.value) == (
        f"{key}={value} is beyond float32, which the optimizer's step computes in (at most "
        "3.403e+38): it would overflow at the first step; give a number within it"
    )


@pytest.mark.slow
def test_a_compile_backend_torch_lacks_is_refused_before_the_data_loads() -> None:
    validate(compose_config(), backends=compile_backends)
    # A backend torch lists only among its debugging ones.
    validate(compose_config("trainer.compile=eager"), backends=compile_backends)
    with pytest.raises(ExperimentError) as error:
        validate(compose_config("trainer.compile=nonexistent"), backends=compile_backends)
    said = str(error.value)
    assert said.startswith("trainer.compile=nonexistent is not a backend of torch.compile; ")
    assert "inductor" in said and said.endswith(", or null (not compiled)")


def test_a_lock_file_that_is_a_folder_is_named(tmp_path: Path) -> None:
    (tmp_path / running.LOCK).mkdir()
    with pytest.raises(ExperimentError) as error, running.sole_writer(tmp_path, str(tmp_path)):
        pass
    assert str(error.value) == (
        f"resume={tmp_path}: its .lock is a folder, where the run's lock file belongs (the process "
        "writing the run folder locks it); move the folder away, and run the command again"
    )


def test_weights_that_are_a_folder_are_not_called_missing(tmp_path: Path) -> None:
    with pytest.raises(ExperimentError) as error:
        load_weights(nn.Linear(2, 2), str(tmp_path))
    assert str(error.value) == (
        f"model.weights={tmp_path} is a folder; give the file torch.save(model.state_dict(), "
        "PATH) wrote"
    )


@pytest.mark.parametrize(
    ("written", "wrong"),
    [
        (
            b"- model=lenet\n- {{{ : [\n",
            "is not YAML (expected the node content, but found ':' at line 2)",
        ),
        (b"model: lenet\n", "holds no list"),
        (b"- 3\n", "holds 3, which is no override (key=value)"),
        (b"- model=lenet\n- lenet\n", "holds 'lenet', which is no override (key=value)"),
        (b"\xff\xfe- model=lenet\n", "is not text"),
    ],
)
@pytest.mark.parametrize("key", ["resume", "replay"])
def test_a_garbled_overrides_file_is_named(
    tmp_path: Path, key: str, written: bytes, wrong: str
) -> None:
    (tmp_path / ".hydra").mkdir()
    (tmp_path / ".hydra" / "overrides.yaml").write_bytes(written)
    with pytest.raises(ExperimentError) as error:
        with_saved_overrides([f"{key}={tmp_path}", "trainer.epochs=2"])
    assert str(error.value) == (
        f"{key}={tmp_path}: its .hydra/overrides.yaml {wrong}, where Hydra wrote the run's "
        "overrides as a YAML list of key=value; put it back from a copy, or write them there again"
    )


def test_a_folder_eval_py_made_is_not_taken_for_a_training_run(tmp_path: Path) -> None:
    evaluation = tmp_path / "23-40-40_2a2714c5_eval"
    (evaluation / ".hydra").mkdir(parents=True)
    # What Hydra writes for `python eval.py ckpt=outputs/run device=cpu`.
    OmegaConf.save(["ckpt=outputs/run", "device=cpu"], evaluation / ".hydra" / "overrides.yaml")
    with pytest.raises(ExperimentError) as error:
        with_saved_overrides([f"resume={evaluation}"])
    assert str(error.value) == (
        f"resume={evaluation} is the folder of an evaluation (eval.py ckpt=outputs/run), not of "
        "a training run; resume= takes a training run's folder, such as the one it evaluated"
    )


def test_a_class_folder_with_a_line_break_is_refused_before_it_splits_a_log_line(
    tmp_path: Path,
) -> None:
    root = small_folder(tmp_path, {"train": ["cat", "do\ng"], "test": ["cat", "do\ng"]})
    assert load_error("dataset=image_folder", f"dataset.root={root}") == (
        f"class folder '{root}/train/do\\ng' has a line break or another control character in "
        "its name, which names its class in the log's lines and in the records; rename the folder"
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("folder", "said"),
    [
        (
            f"outputs/{'a' * 300}",
            f"could not make the run folder outputs/{'a' * 24}...{'a' * 8}: a name in it is 300 "
            "bytes long, more than the 255 a name may have",
        ),
        pytest.param(
            "/proc/experiments_run",
            "could not make the run folder /proc/experiments_run: /proc takes no new folders (No "
            "such file or directory)",
            marks=pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="no /proc here"),
        ),
    ],
)
def test_a_run_folder_that_cannot_be_made_is_named(tmp_path: Path, folder: str, said: str) -> None:
    done = train_cli(tmp_path, f"hydra.run.dir={folder}")
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"Error: {said}; name another with hydra.run.dir= (hydra.sweep.dir= for -m)"
    )
