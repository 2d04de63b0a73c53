"""The project as users get it: an installed wheel (not an editable checkout) runs from any folder,
and a config folder of the user's own adds options beside the shipped ones."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import torch

from helpers import QUICK, ROOT, metrics, results, train_cli

# What a clean clone holds that a wheel is built from.
SOURCES = ["src", "conf", "pyproject.toml", "README.md", "LICENSE"]


def run(command: list[str | Path], cwd: Path) -> subprocess.CompletedProcess[str]:
    environment = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HYDRA_FULL_ERROR")
    }
    return subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with the project's wheel installed; the bin folder of it. It reuses this
    environment's torch and other dependencies (through a .pth file) instead of downloading them."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "source"
    for name in SOURCES:
        if (ROOT / name).is_dir():
            ignored = shutil.ignore_patterns("__pycache__", "*.egg-info")
            shutil.copytree(ROOT / name, source / name, ignore=ignored)
        else:
            shutil.copy2(ROOT / name, source / name)
    built = run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-w",
            root / "dist",
            source,
        ],
        root,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = (root / "dist").glob("experiments-*.whl")

    venv = root / "venv"
    assert run([sys.executable, "-m", "venv", "--without-pip", venv], root).returncode == 0
    paths = sysconfig.get_paths(vars={"base": str(venv), "platbase": str(venv)})
    Path(paths["purelib"], "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    python = Path(paths["scripts"]) / "python"
    done = run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            python,
            "install",
            "--no-deps",
            "--no-index",
            wheel,
        ],
        root,
    )
    assert done.returncode == 0, done.stderr
    return Path(paths["scripts"])


@pytest.mark.slow
def test_an_installed_wheel_trains_and_evaluates_from_any_folder(
    installed: Path, tmp_path: Path
) -> None:
    where = run(
        [installed / "python", "-c", "import experiments.conf as c; print(c.__file__)"], tmp_path
    )
    assert where.stdout.startswith(str(installed.parent)), where  # the wheel's copy, not ROOT's

    trained = run(
        [installed / "experiments-train", *QUICK, "model=lenet", "trainer.epochs=1"], tmp_path
    )
    assert trained.returncode == 0, trained.stderr
    (run_dir,) = (path.parent for path in (tmp_path / "outputs").rglob("results.json"))
    assert results(run_dir)["status"] == "completed"
    assert len(metrics(run_dir, "step")) == 2

    evaluated = run(
        [installed / "experiments-eval", f"ckpt={run_dir}", "limit_images=128", "batch_size=64"],
        tmp_path,
    )
    assert evaluated.returncode == 0, evaluated.stderr
    evaluation = json.loads(next((tmp_path / "outputs").rglob("*_eval/results.json")).read_text())
    assert evaluation["test_accuracy"] == results(run_dir)["final_test_accuracy"]

    shown = run(
        [installed / "python", "-m", "experiments", "model=network", "--cfg", "job"], tmp_path
    )
    assert shown.returncode == 0 and "name: network" in shown.stdout

    # The README's install gives the report's verdicts: scipy is no extra.
    requires = "import importlib.metadata as m, json; print(json.dumps(m.requires('experiments')))"
    required = run([installed / "python", "-c", requires], tmp_path)
    scipy = [each for each in json.loads(required.stdout) if each.startswith("scipy")]
    assert scipy and "extra" not in scipy[0], required.stdout


@pytest.mark.slow
def test_a_config_folder_of_the_users_own_adds_options(tmp_path: Path) -> None:
    models = tmp_path / "my_conf" / "model"
    models.mkdir(parents=True)
    # A variant of a shipped option, and a model of the user's own with a field of its own.
    (models / "wide_mlp.yaml").write_text(
        "# A wider MLP: python train.py 'hydra.searchpath=[file://my_conf]' model=wide_mlp\n"
        "defaults:\n  - mlp\nname: wide_mlp\nhidden_sizes: [64, 32]\n"
    )
    (models / "tiny_cnn.yaml").write_text(
        "_target_: my_models.TinyCNN\nname: tiny_cnn\nwidth: 8\n"
        "in_channels: ${dataset.channels}\nnum_classes: ${dataset.num_classes}\n"
    )
    (tmp_path / "my_models.py").write_text(
        "from torch import nn\n\n\n"
        "class TinyCNN(nn.Sequential):\n"
        "    def __init__(self, width: int, in_channels: int, num_classes: int) -> None:\n"
        "        conv = nn.Conv2d(in_channels, width, 3, padding=1)\n"
        "        pool = nn.AdaptiveAvgPool2d(1)\n"
        "        head = nn.Linear(width, num_classes)\n"
        "        super().__init__(conv, nn.ReLU(), pool, nn.Flatten(), head)\n"
    )
    done = train_cli(
        tmp_path,
        "-m",
        "hydra.searchpath=[file://my_conf]",
        "model=wide_mlp,tiny_cnn",
        *QUICK,
        env={"PYTHONPATH": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    shapes = {}
    for run_dir in done.run_dirs:
        state = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=True)
        shapes[results(run_dir)["model"]] = [tuple(t.shape) for t in state["model"].values()]
    assert shapes["wide_mlp"][::2] == [(64, 3 * 32 * 32), (32, 64), (10, 32)]
    assert shapes["tiny_cnn"][0] == (8, 3, 3, 3)


def test_the_wheel_lists_every_package_of_the_source() -> None:
    import tomllib

    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    source = ROOT / "src"
    packages = {
        ".".join(init.parent.relative_to(source).parts) for init in source.rglob("__init__.py")
    }
    assert packages <= listed, sorted(packages - listed)
