"""What the command line's overrides mean before Hydra reads them.

`resume=<run>` and `replay=<run>` stand for that run's own overrides (its folder's path taken as
it is: `experiments.config.paths`), `-m device=every` for every device of this machine, a number
where a group's option belongs (`device=1`) is refused in words Hydra has not got, and so are a
search on a test metric (`optimized_metric=test_accuracy`), once, before its first trial, a class
of one's own on a shipped model (`model._target_=` without `model=custom`), and a sweep's option
without -m (`hparams_search=optuna`). eval.py's arguments are those of evaluation (and of a class of
one's own a checkpoint names).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from importlib import resources, util
from pathlib import Path

import yaml
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import ListConfig, OmegaConf

from experiments.config.paths import as_value, path_given
from experiments.config.store import CONFIG_PACKAGE, config_groups, group_options
from experiments.config.trust import refuse_untrusted, targets_named, typed_again, typed_as
from experiments.config.validate import check_optimized_metric
from experiments.core.errors import ExperimentError

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
    if not asks_for_multirun(arguments):
        raise ExperimentError(
            f"{EVERY_DEVICE} runs one job per device: add -m (python train.py -m {EVERY_DEVICE})"
        )
    every = f"device={','.join(devices())}"
    return [every if argument == EVERY_DEVICE else argument for argument in arguments]


def asks_for_multirun(arguments: Sequence[str]) -> bool:
    """Whether the command line asks Hydra for a sweep (-m, or Hydra's own hydra.mode=MULTIRUN)."""
    return bool({"-m", "--multirun", "hydra.mode=MULTIRUN"} & set(arguments))


def refuse_sweeps_without_multirun(arguments: Sequence[str]) -> None:
    """An option that sets its sweeper's parameters (`hparams_search=optuna`,
    `experiment=device_scaling`) is a sweep; without -m Hydra would train one plain run with it,
    silently. `arguments` are those typed: a job of such a sweep replayed is one run."""
    if asks_for_multirun(arguments):
        return
    groups = config_groups()
    for argument in arguments:
        group, _, option = argument.lstrip("+").partition("=")
        option_file = resources.files(CONFIG_PACKAGE) / group / f"{option}.yaml"
        if group not in groups or not option_file.is_file():
            continue
        swept = OmegaConf.select(OmegaConf.create(option_file.read_text()), "hydra.sweeper.params")
        if swept:
            raise ExperimentError(
                f"{argument} is a sweep over {', '.join(swept)}: add -m "
                f"(python train.py -m {argument})"
            )


# The groups eval.py takes (conf/eval.yaml's defaults); a checkpoint brings the rest.
EVAL_GROUPS = ("dataset", "device", "placement")


def evaluation_arguments(arguments: list[str]) -> list[str]:
    """eval.py's arguments, a group of training (`model=tudui`) refused: Hydra would suggest
    `+model=tudui`, which would not evaluate that model either."""
    training = set(config_groups()) - set(EVAL_GROUPS)
    for argument in arguments:
        key = argument.partition("=")[0].lstrip("+~")
        if key.partition(".")[0] in training and not _allows_own_model(argument):
            raise ExperimentError(
                f"{argument}: eval.py evaluates the model its checkpoint holds, as it was "
                "trained; it takes ckpt=, dataset=, device= and placement= (python eval.py --help)"
                ", and model=custom model._target_=<class> to allow a class of your own"
            )
    return arguments


def _allows_own_model(argument: str) -> bool:
    """`model=custom` and the targets typed under it: they let eval.py build a class of the
    user's own that a checkpoint names (experiments.config.trust)."""
    key = argument.partition("=")[0].lstrip("+")
    return argument == "model=custom" or (key.startswith("model.") and key.endswith("_target_"))


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
        folder = Path(path_given(given[-1].partition("=")[2])).resolve()
        saved = folder / ".hydra" / "overrides.yaml"
        if not saved.is_file():
            raise ExperimentError(
                f"{key}={given[-1].partition('=')[2]} is not a run folder (it has no {saved.name} "
                "in .hydra/); give a folder under outputs/ that a run made"
            )
        previous = [
            _renamed(str(override), folder)
            for override in _saved_overrides(saved, given[-1])
            if not str(override).startswith(("resume=", "replay=", "hydra.run.dir="))
        ]
        flags, others = flags_apart([argument for argument in arguments if argument not in given])
        _refuse_untrusted(f"{key}={given[-1].partition('=')[2]}", previous, others)
        value = as_value(str(folder))
        arguments = [*flags, *_last_of_each_key([*previous, *others, f"{key}={value}"])]
        if key == "resume":
            _refuse_read_only(folder, given[-1])
            # In the run's own folder, whose snapshot is left to `records.snapshot` (a refused
            # resume must not overwrite it).
            arguments += [f"hydra.run.dir={value}", "hydra.output_subdir=null"]
    return arguments


def _renamed(override: str, folder: Path) -> str:
    """A saved override in today's keys: `trainer.limit_eval_batches=N`, batches of the run's
    trainer.batch_size, is `trainer.limit_eval_images=` that many images (drawn as every run's
    are now, not the first ones)."""
    key, _, value = override.partition("=")
    if key.lstrip("+") != "trainer.limit_eval_batches":
        return override
    if value in ("", "null"):
        return "trainer.limit_eval_images=null"
    config = folder / ".hydra" / "config.yaml"
    if not value.isdigit() or not config.is_file():
        return override  # refused as a key renamed, with what to type now
    batch_size = OmegaConf.load(config).trainer.batch_size
    return f"trainer.limit_eval_images={int(value) * batch_size}"


def flags_apart(arguments: list[str]) -> tuple[list[str], list[str]]:
    """Hydra's flags (`-m`, `--cfg job`), each with its value, apart from the overrides: argparse
    finds them only before the overrides, not among them."""
    flags: list[str] = []
    overrides: list[str] = []
    for argument in arguments:
        is_value = flags and flags[-1].startswith("-") and not argument.startswith(("-", "~"))
        if argument.startswith("-") or (is_value and "=" not in argument):
            flags.append(argument)
        else:
            overrides.append(argument)
    return flags, overrides


def _refuse_untrusted(given: str, saved: list[str], typed: list[str]) -> None:
    """A run folder's overrides are data: they never set Hydra's own config (its callbacks and
    launchers are built from it), and a `_target_` they name is built only when it is a shipped
    one in its usual place or typed now (experiments.config.trust)."""
    parsed = OverridesParser.create().parse_overrides(saved)
    for override in parsed:
        if override.is_hydra_override():
            raise ExperimentError(
                f"{given}: its .hydra/overrides.yaml sets Hydra's own config "
                f"({override.input_line}), which no run's saved overrides do; it was not written "
                "by this tool, or it was altered, and was not used"
            )
    typed_targets = typed_as(targets_named(typed))
    where = f"{given}: its .hydra/overrides.yaml"
    refuse_untrusted(targets_named(saved), typed_targets, where, typed_again)


def _saved_overrides(saved: Path, given: str) -> list[str]:
    """The overrides in a run folder's .hydra/overrides.yaml (`saved`; `given`: resume=<run> or
    replay=<run>), or one line naming what else the file holds; a folder eval.py made (its
    overrides name ckpt=) is refused too."""
    try:
        overrides = _overrides_in(saved)
    except ValueError as wrong:
        raise ExperimentError(
            f"{given}: its .hydra/overrides.yaml {wrong}, where Hydra wrote the run's overrides "
            "as a YAML list of key=value; put it back from a copy, or write them there again"
        ) from None
    evaluated = [override for override in overrides if override.startswith("ckpt=")]
    if evaluated:
        key = given.partition("=")[0]
        raise ExperimentError(
            f"{given} is the folder of an evaluation (eval.py {evaluated[-1]}), not of a "
            f"training run; {key}= takes a training run's folder, such as the one it evaluated"
        )
    return overrides


def _overrides_in(saved: Path) -> list[str]:
    """The list of overrides in `saved`; ValueError saying what else it holds."""
    try:
        loaded = OmegaConf.load(saved)
    except UnicodeDecodeError:
        raise ValueError("is not text") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ValueError(f"is not YAML ({getattr(error, 'problem', None)}{where})") from None
    if not isinstance(loaded, ListConfig):
        raise ValueError("holds no list")
    # As written: an override's ${...} is Hydra's to resolve, in the run's config.
    entries = OmegaConf.to_container(loaded, resolve=False)
    for entry in entries:
        # Hydra's forms: key=value, +key=value, ++key=value, ~key and ~key=value.
        if not isinstance(entry, str) or not ("=" in entry or entry.startswith("~")):
            raise ValueError(f"holds {entry!r}, which is no override (key=value)")
    return entries


def _refuse_read_only(folder: Path, given: str) -> None:
    """Hydra's log file would fail first, in words that name no file. (A link in the folder is
    replaced, never written through: what it points to is not asked.)"""
    for path in (folder, *folder.iterdir(), *folder.glob("checkpoints/*")):
        linked = path != folder and path.is_symlink()
        if not linked and not os.access(path, os.W_OK):
            raise ExperimentError(
                f"{given}: {path} is read-only, and a resume writes into the run's own folder; "
                f"make it writable (chmod -R u+w {folder}), or replay= the run in a new folder"
            )


def _last_of_each_key(overrides: list[str]) -> list[str]:
    """Of overrides of the same key, keep the last (the one Hydra would apply), in its place."""
    keys = [override.partition("=")[0] for override in overrides]
    return [override for i, override in enumerate(overrides) if keys[i] not in keys[i + 1 :]]
