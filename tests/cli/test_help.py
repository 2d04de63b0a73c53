"""`--help` of each command: the groups it takes, options in order, and the command as typed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from experiments.config.store import command_name
from helpers import ROOT, eval_cli

TRAINING_GROUPS = {
    "callbacks",
    "dataset",
    "debug",
    "device",
    "experiment",
    "hparams_search",
    "model",
    "optimizer",
    "placement",
    "scheduler",
    "task",
    "tracker",
    "trainer",
}


def help_of(command: list[str]) -> str:
    done = subprocess.run([*command, "--help"], capture_output=True, text=True, check=True)
    return done.stdout


def groups(help_text: str) -> dict[str, str]:
    """The groups `--help` lists, each with its options."""
    listed = help_text.split("== Configuration groups ==")[1].split("== Config ==")[0]
    lines = [line for line in listed.splitlines()[1:] if ": " in line]
    return dict(line.split(": ", 1) for line in lines)


@pytest.mark.slow
def test_train_help_lists_every_group_with_gpus_in_order() -> None:
    shown = help_of([sys.executable, str(ROOT / "train.py")])
    assert shown.startswith("python train.py [group=option ...]")
    listed = groups(shown)
    assert set(listed) == TRAINING_GROUPS
    assert listed["device"] == "auto, cpu, cuda, cuda:0 ... cuda:15, ddp, dp"


@pytest.mark.slow
def test_eval_help_lists_only_the_groups_eval_takes() -> None:
    shown = help_of([sys.executable, str(ROOT / "eval.py")])
    assert shown.startswith("python eval.py ckpt=<run folder or checkpoint>")
    # model: only model=custom model._target_=<class>, to allow a class a checkpoint names.
    assert set(groups(shown)) == {"dataset", "device", "placement", "model", "tracker"}
    assert "model=custom model._target_=<class> builds that class of" in shown


def test_eval_refuses_a_group_of_training_in_one_line(tmp_path: Path) -> None:
    done = eval_cli(tmp_path, "ckpt=outputs/run", "model=tudui")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "Error: model=tudui: eval.py evaluates the model its checkpoint holds, as it was "
        "trained; it takes ckpt=, dataset=, device=, placement= and tracker= (python eval.py "
        "--help), and model=custom model._target_=<class> to allow a class of your own"
    ]


def test_eval_names_its_own_key_for_a_trainer_key_it_takes(tmp_path: Path) -> None:
    done = eval_cli(tmp_path, "ckpt=outputs/run", "trainer.precision=bf16")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "Error: trainer.precision=bf16: eval.py's key is precision= (precision=bf16)"
    ]


@pytest.mark.slow
def test_an_installed_command_names_itself_in_its_help() -> None:
    installed = Path(sys.executable).parent / "experiments-train"
    if not installed.is_file():
        pytest.skip("experiments-train is not installed beside this interpreter")
    assert help_of([str(installed)]).startswith("experiments-train [group=option ...]")


@pytest.mark.parametrize(
    ("argv0", "shown"),
    [
        ("train.py", "python train.py"),
        ("/home/me/experiments/eval.py", "python eval.py"),
        ("/venv/bin/experiments-eval", "experiments-eval"),
        ("/venv/lib/python3.11/site-packages/experiments/__main__.py", "python -m experiments"),
    ],
)
def test_the_command_is_named_as_it_was_typed(argv0: str, shown: str) -> None:
    assert command_name(argv0) == shown
