"""What the command line's overrides mean before Hydra reads them.

`resume=<run>` and `replay=<run>` stand for that run's own overrides, `-m device=every` for every
device of this machine, a folder or file named by `resume=`, `replay=` or `ckpt=` is taken as it
is (whatever its characters), a number where a group's option belongs (`device=1`) is refused in
words Hydra has not got, and so are a search on a test metric (`optimized_metric=test_accuracy`),
once, before its first trial, and a class of one's own on a shipped model (`model._target_=` without
`model=custom`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from importlib import util
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from experiments.config.store import config_groups, group_options
from experiments.config.validate import check_optimized_metric
from experiments.core.errors import ExperimentError

# What Hydra's override grammar reads as more than a character of a value; a backslash before
# one makes it a character again (Hydra's sweepers write `device=cuda\:1` so).
GRAMMAR_SPECIAL = re.compile(r"[\\()\[\]{}:=, \t]")


def as_value(path: str) -> str:
    """`path` as one value of an override, whatever its characters: the folders of sweep jobs
    made by earlier versions have `=` and `,` in their names (`1_trainer.seed=1,model=lenet`)."""
    return GRAMMAR_SPECIAL.sub(lambda special: "\\" + special[0], path)


def with_paths_as_given(arguments: list[str]) -> list[str]:
    """`ckpt=<path>` naming a file or folder that exists means that path, as it is."""
    return [
        f"ckpt={as_value(argument.partition('=')[2])}"
        if argument.startswith("ckpt=") and Path(argument.partition("=")[2]).exists()
        else argument
        for argument in arguments
    ]


NUMBERS = re.compile(r"[-+]?\d+(\.\d*)?(,[-+]?\d+(\.\d*)?)*")


def refuse_numbers_for_groups(arguments: Sequence[str]) -> None:
    """Hydra answers `device=1` with "Config group override must be a string or a list. Got int";
    name the override instead, and what was probably meant."""
    groups = config_groups()
    for argument in arguments:
        key, equals, value = argument.partition("=")
        group = key.lstrip("+~")
        if not equals or group not in groups or not NUMBERS.fullmatch(value):
            continue
        if group == "device":
            meant = ",".join(f"cuda:{number}" for number in value.split(","))
            raise ExperimentError(
                f"{argument} is not an option of 'device'; a GPU is device=cuda:N, "
                f"here device={meant}"
            )
        raise ExperimentError(
            f"{argument} is not an option of '{group}': options have names; "
            "python train.py --help lists them"
        )


def refuse_optimizing_on_test(arguments: Sequence[str]) -> None:
    """Every run refuses `optimized_metric=test_accuracy`; a search is told before it starts,
    rather than by each of its trials (Hydra only warns of a callback's error)."""
    for argument in arguments:
        key, _, value = argument.partition("=")
        if key.lstrip("+") == "optimized_metric" and value not in ("", "null"):
            check_optimized_metric(value)


def refuse_own_class_on_a_shipped_model(arguments: Sequence[str]) -> None:
    """`model._target_=my_models.Net` on a shipped model (the default tudui, say) would build the
    user's class under that model's name and with its fields, and every record would name tudui;
    a model of one's own is `model=custom`."""
    chosen = [value for key, value in _split(arguments) if key == "model"]
    shipped = group_options("model")
    if chosen and (chosen[-1] not in shipped or chosen[-1] == "custom"):
        return
    for key, value in _split(arguments):
        if key == "model._target_":
            model = f"model={chosen[-1]}" if chosen else "the default model"
            raise ExperimentError(
                f"model._target_={value} would build your class under {model}'s name and "
                f"fields; a model of your own is model=custom model._target_={value}"
            )


def _split(arguments: Sequence[str]) -> list[tuple[str, str]]:
    """(key, value) of each override, the key without its + or ~."""
    split = [argument.partition("=") for argument in arguments]
    return [(key.lstrip("+~"), value) for key, _, value in split]


# The sweeps extra's Hydra plugins, by the choice that needs one: (package, module).
SWEEP_PLUGINS = {
    "hydra/launcher=joblib": ("hydra-joblib-launcher", "hydra_plugins.hydra_joblib_launcher"),
    "hydra/launcher=submitit_local": (
        "hydra-submitit-launcher",
        "hydra_plugins.hydra_submitit_launcher",
    ),
    "hydra/launcher=submitit_slurm": (
        "hydra-submitit-launcher",
        "hydra_plugins.hydra_submitit_launcher",
    ),
    # conf/hydra/launcher/slurm.yaml is submitit's SLURM launcher with our settings.
    "hydra/launcher=slurm": ("hydra-submitit-launcher", "hydra_plugins.hydra_submitit_launcher"),
    "hydra/sweeper=optuna": ("hydra-optuna-sweeper", "hydra_plugins.hydra_optuna_sweeper"),
    "hparams_search=optuna": ("hydra-optuna-sweeper", "hydra_plugins.hydra_optuna_sweeper"),
}


def importable(module: str) -> bool:
    return util.find_spec(module) is not None


def refuse_missing_plugins(
    arguments: Sequence[str], installed: Callable[[str], bool] = importable
) -> None:
    """Hydra says only that it cannot find `hydra/launcher/joblib`; say which plugin is missing
    and how to install it (`installed` tells whether a module can be imported)."""
    for argument in arguments:
        package, module = SWEEP_PLUGINS.get(argument.lstrip("+"), (None, ""))
        if package and not installed(module):
            raise ExperimentError(
                f"{argument} needs the Hydra plugin {package}, which is not installed; install "
                "it with the other sweep plugins: pip install -e '.[sweeps]'"
            )


EVERY_DEVICE = "device=every"


def with_every_device(arguments: list[str], devices: Callable[[], list[str]]) -> list[str]:
    """`-m device=every` as a sweep over the devices this machine has, which `devices()` lists
    (asked only then: it loads torch)."""
    if EVERY_DEVICE not in arguments:
        return arguments
    if not {"-m", "--multirun"} & set(arguments):
        raise ExperimentError(
            f"{EVERY_DEVICE} runs one job per device: add -m (python train.py -m {EVERY_DEVICE})"
        )
    every = f"device={','.join(devices())}"
    return [every if argument == EVERY_DEVICE else argument for argument in arguments]


# The groups eval.py takes (conf/eval.yaml's defaults); a checkpoint brings the rest.
EVAL_GROUPS = ("dataset", "device", "placement")


def evaluation_arguments(arguments: list[str]) -> list[str]:
    """eval.py's arguments, a group of training (`model=tudui`) refused: Hydra would suggest
    `+model=tudui`, which would not evaluate that model either."""
    training = set(config_groups()) - set(EVAL_GROUPS)
    for argument in arguments:
        if argument.partition("=")[0].lstrip("+~").partition(".")[0] in training:
            raise ExperimentError(
                f"{argument}: eval.py evaluates the model its checkpoint holds, as it was "
                "trained; it takes ckpt=, dataset=, device= and placement= (python eval.py --help)"
            )
    return arguments


def with_saved_overrides(arguments: list[str]) -> list[str]:
    """Expand `resume=<run folder>` and `replay=<run folder>` into that run's saved overrides.

    Both compose the run's config afresh from `.hydra/overrides.yaml` (against today's configs
    and schemas), followed by any other overrides given now (e.g. `trainer.epochs=20`). `resume`
    continues in the run's own folder; `replay` repeats the run in a new one.
    """
    asked = [key for key in ("resume", "replay") if any(a.startswith(f"{key}=") for a in arguments)]
    if len(asked) == 2:
        raise ExperimentError(
            "resume= and replay= together: resume=<run> continues a run in its own folder, "
            "replay=<run> repeats one in a new folder; give one of them"
        )
    for key in ("resume", "replay"):
        given = [argument for argument in arguments if argument.startswith(f"{key}=")]
        if not given:
            continue
        folder = Path(given[-1].partition("=")[2]).resolve()
        saved = folder / ".hydra" / "overrides.yaml"
        if not saved.is_file():
            raise ExperimentError(
                f"{key}={given[-1].partition('=')[2]} is not a run folder (it has no {saved.name} "
                "in .hydra/); give a folder under outputs/ that a run made"
            )
        previous = [
            str(override)
            for override in OmegaConf.load(saved)
            if not str(override).startswith(("resume=", "replay=", "hydra.run.dir="))
        ]
        others = [argument for argument in arguments if argument not in given]
        value = as_value(str(folder))
        arguments = _last_of_each_key([*previous, *others, f"{key}={value}"])
        if key == "resume":
            _refuse_read_only(folder, given[-1])
            # In the run's own folder, whose snapshot is left to `save_snapshot` (a refused
            # resume must not overwrite it).
            arguments += [f"hydra.run.dir={value}", "hydra.output_subdir=null"]
    return arguments


def _refuse_read_only(folder: Path, given: str) -> None:
    """Hydra's log file would fail first, in words that name no file."""
    for path in (folder, *folder.iterdir(), *folder.glob("checkpoints/*")):
        if not os.access(path, os.W_OK):
            raise ExperimentError(
                f"{given}: {path} is read-only, and a resume writes into the run's own folder; "
                f"make it writable (chmod -R u+w {folder}), or replay= the run in a new folder"
            )


def save_snapshot(cfg: DictConfig, run_dir: Path) -> None:
    """Write the config snapshot (.hydra/) of an accepted resume, as Hydra writes a run's: the
    overrides a later resume= or replay= brings back are then those the run trained with."""
    if not HydraConfig.initialized():
        return
    hydra = HydraConfig.get()
    folder = run_dir / ".hydra"
    OmegaConf.save(cfg, folder / "config.yaml")
    OmegaConf.save(OmegaConf.create({"hydra": hydra}), folder / "hydra.yaml")
    OmegaConf.save(hydra.overrides.task, folder / "overrides.yaml")


def _last_of_each_key(overrides: list[str]) -> list[str]:
    """Of overrides of the same key, keep the last (the one Hydra would apply), in its place."""
    keys = [override.partition("=")[0] for override in overrides]
    return [override for i, override in enumerate(overrides) if keys[i] not in keys[i + 1 :]]
