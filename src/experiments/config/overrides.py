"""The command line's overrides, read before Hydra by its grammar (the rest is Hydra's)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from importlib import resources, util
from pathlib import Path

from hydra.core.override_parser.types import ChoiceSweep, Override, OverrideType, QuotedString
from omegaconf import OmegaConf

from experiments.config.optimized import check_optimized_metric
from experiments.config.paths import as_value, parsed, path_given
from experiments.config.saved_overrides import (
    overrides_saved_in,
    refuse_read_only,
    sweep_overrides_saved_in,
    writes_elsewhere,
)
from experiments.config.store import (
    CONFIG_PACKAGE,
    config_groups,
    default_option,
    group_options,
    shipped_option,
)
from experiments.config.task_metrics import task_class
from experiments.core.errors import ExperimentError


def _read(arguments: Iterable[str]) -> list[Override]:
    """The overrides among `arguments` as Hydra reads them, less its flags and what it cannot."""
    return [
        override
        for override in map(parsed, flags_apart(list(arguments))[1])
        if override is not None
    ]


def _values(override: Override) -> list[object]:
    """Its value, or each choice of a sweep over choices; nothing for another sweep."""
    value = override.value()
    if isinstance(value, ChoiceSweep):
        return [
            choice.text if isinstance(choice, QuotedString) else choice for choice in value.list
        ]
    return [] if override.is_sweep_override() else [value]


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _values_of(overrides: list[Override], key: str) -> list[object]:
    return [
        value
        for override in overrides
        if override.key_or_group == key and not override.is_delete()
        for value in _values(override)
    ]


def refuse_numbers_for_groups(arguments: Sequence[str]) -> None:
    """Hydra answers `device=1` with "Config group override must be a string or a list. Got int"."""
    groups = config_groups()
    for override in _read(arguments):
        group, numbers = override.key_or_group, _values(override)
        if group not in groups or not numbers or not all(map(_is_number, numbers)):
            continue
        if group == "device" and all(isinstance(number, int) for number in numbers):
            meant = ",".join(f"cuda:{number}" for number in numbers)
            raise ExperimentError(
                f"{override.input_line} is not an option of 'device'; a GPU is device=cuda:N, "
                f"here device={meant}"
            )
        raise ExperimentError(
            f"{override.input_line} is not an option of '{group}': options have names; "
            "python train.py --help lists them"
        )


def refuse_optimizing_on_test(arguments: Sequence[str]) -> None:
    """Told before a search starts, not by each trial (Hydra only warns of a callback's error)."""
    overrides = _read(arguments)
    metrics = [
        str(metric)
        for metric in _values_of(overrides, "optimized_metric")
        if metric not in ("", None)
    ]
    if not metrics:
        return
    tasks = [str(value) for value in _values_of(overrides, "task")]
    option = tasks[0] if len(tasks) == 1 else default_option("task") if not tasks else None
    shipped = task_class(shipped_option("task", option)) if option is not None else None
    for metric in metrics:
        check_optimized_metric(metric, shipped.measured if shipped else None)


def refuse_own_class_on_a_shipped_model(arguments: Sequence[str]) -> None:
    """It would build the user's class under the shipped model's name and fields."""
    overrides = _read(arguments)
    choices = [override for override in overrides if override.key_or_group == "model"]
    shipped = [model for model in group_options("model") if model != "custom"]
    models = [model for model in _values(choices[-1]) if model in shipped] if choices else []
    if choices and not models:
        return
    for override in overrides:
        if override.key_or_group == "model._target_" and not override.is_delete():
            model = f"model={models[0]}" if models else "the default model"
            value = override.get_value_string()
            raise ExperimentError(
                f"model._target_={value} would build your class under {model}'s name and "
                f"fields; a model of your own is model=custom model._target_={value}"
            )


# The sweeps extra's Hydra plugins (package, module), by the choice that needs one.
_SUBMITIT = ("hydra-submitit-launcher", "hydra_plugins.hydra_submitit_launcher")
_OPTUNA = ("hydra-optuna-sweeper", "hydra_plugins.hydra_optuna_sweeper")
SWEEP_PLUGINS = {
    "hydra/launcher=joblib": ("hydra-joblib-launcher", "hydra_plugins.hydra_joblib_launcher"),
    "hydra/launcher=submitit_local": _SUBMITIT,
    "hydra/launcher=submitit_slurm": _SUBMITIT,
    "hydra/launcher=slurm": _SUBMITIT,  # conf/hydra/launcher/slurm.yaml, with our settings
    "hydra/sweeper=optuna": _OPTUNA,
    "hparams_search=optuna": _OPTUNA,
}


def importable(module: str) -> bool:
    return util.find_spec(module) is not None


def refuse_missing_plugins(
    arguments: Sequence[str], installed: Callable[[str], bool] = importable
) -> None:
    """Hydra says only that it cannot find `hydra/launcher/joblib`: say which plugin to install."""
    for override in _read(arguments):
        for option in [] if override.is_delete() else _values(override):
            package, module = SWEEP_PLUGINS.get(f"{override.key_or_group}={option}", (None, ""))
            if package and not installed(module):
                raise ExperimentError(
                    f"{override.input_line} needs the Hydra plugin {package}, which is not "
                    "installed; install it with the other sweep plugins: pip install -e '.[sweeps]'"
                )


def with_every_device(arguments: list[str], devices: Callable[[], list[str]]) -> list[str]:
    """`-m device=every` as a sweep over `devices()` (asked only then: it loads torch)."""
    typed = {
        override.input_line
        for override in _read(arguments)
        if override.key_or_group == "device"
        and override.type is OverrideType.CHANGE
        and _values(override) == ["every"]
    }
    if not typed:
        return arguments
    if not asks_for_multirun(arguments):
        raise ExperimentError(
            "device=every runs one job per device: add -m (python train.py -m device=every)"
        )
    found = devices()
    # One device is a sweep all the same (choice() of one): its report has a card for it.
    every = f"device={','.join(found)}" if len(found) > 1 else f"device=choice({found[0]})"
    return [every if argument in typed else argument for argument in arguments]


def asks_for_multirun(arguments: Sequence[str]) -> bool:
    return bool({"-m", "--multirun", "hydra.mode=MULTIRUN"} & set(arguments))


def refuse_sweeps_without_multirun(arguments: Sequence[str]) -> None:
    """A sweep's option (`hparams_search=optuna`) without -m would silently train one plain run."""
    if asks_for_multirun(arguments):
        return
    groups = config_groups()
    for override in _read(arguments):
        group, option = override.key_or_group, override.value()
        if group not in groups or override.is_delete() or not isinstance(option, str):
            continue
        option_file = resources.files(CONFIG_PACKAGE) / group / f"{option}.yaml"
        if not option_file.is_file():
            continue
        swept = OmegaConf.select(OmegaConf.create(option_file.read_text()), "hydra.sweeper.params")
        if swept:
            argument = override.input_line
            raise ExperimentError(
                f"{argument} is a sweep over {', '.join(swept)}: add -m "
                f"(python train.py -m {argument})"
            )


EVAL_GROUPS = ("dataset", "device", "placement", "tracker")  # a checkpoint brings the rest
# The trainer's keys of how a model computes that eval.py takes at its top level.
EVAL_COMPUTE_KEYS = ("precision", "channels_last", "compile", "compile_mode", "threads", "seed")


def evaluation_arguments(arguments: list[str]) -> list[str]:
    """eval.py's arguments, a training group refused (Hydra would suggest `+model=tudui`)."""
    training = set(config_groups()) - set(EVAL_GROUPS)
    for override in _read(arguments):
        section, _, key = override.key_or_group.partition(".")
        if section == "trainer" and key in EVAL_COMPUTE_KEYS:
            raise ExperimentError(
                f"{override.input_line}: eval.py's key is {key}= "
                f"({key}={override.get_value_element_as_str()})"
            )
        if section in training and not _allows_own_class(override):
            raise ExperimentError(
                f"{override.input_line}: eval.py evaluates the model its checkpoint holds, as it "
                "was trained; it takes ckpt=, dataset=, device=, placement= and tracker= (python "
                "eval.py --help), and model=custom model._target_=<class> to allow a class of "
                "your own"
            )
    return arguments


def _allows_own_class(override: Override) -> bool:
    """`model=custom` with its targets, and `task._target_=`, let eval.py build one's own class."""
    key = override.key_or_group
    if key == "model":
        return override.type is OverrideType.CHANGE and override.value() == "custom"
    typed = key.startswith("model.") or key == "task._target_"
    return typed and key.endswith("_target_") and not override.is_delete()


def with_saved_overrides(arguments: list[str]) -> list[str]:
    """Expand `resume=<run>` (its own folder) or `replay=<run>` (a new one) into its overrides."""
    # As typed, not by the grammar: a path is one of its values once `as_value` makes it one.
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
        folder = Path(path_given(given[-1].removeprefix(f"{key}="))).resolve()
        flags, others = flags_apart([argument for argument in arguments if argument not in given])
        if key == "resume" and is_sweep_folder(folder):
            return _sweep_resumed(folder, given[-1], flags, others)
        previous = overrides_saved_in(folder, given[-1], others)
        value = as_value(str(folder))
        arguments = [*flags, *_last_of_each_key([*previous, *others, f"{key}={value}"])]
        if key == "resume":
            refuse_read_only(folder, given[-1])
            # Its snapshot is left to `records.snapshot`: a refused resume must not overwrite it.
            arguments += [f"hydra.run.dir={value}", "hydra.output_subdir=null"]
    return arguments


# The sweeper that launches a sweep's jobs left to run (conf/hydra/sweeper/resume.yaml).
SWEEP_RESUMER = "hydra/sweeper=resume"
# Hydra's settings a resumed sweep leaves as its sweep had them: where its jobs are, and how
# they were planned.
THE_SWEEPS_OWN = ("hydra.sweep", "hydra/sweeper", "hydra.sweeper", "hydra.run", "hydra.mode")


def is_sweep_folder(folder: Path) -> bool:
    """A sweep's folder: its multirun.yaml, and no run's config of its own."""
    return (folder / "multirun.yaml").is_file() and not (folder / ".hydra").is_dir()


def _sweep_resumed(folder: Path, given: str, flags: list[str], others: list[str]) -> list[str]:
    """`-m resume=<sweep>`: the sweep's command line again, in its folder, for the sweeper that
    launches its jobs left to run; `others` may only say how to launch them."""
    saved = sweep_overrides_saved_in(folder, given, others)
    for typed in others:
        read = parsed(typed)
        if read is None or read.input_line in saved or writes_elsewhere(read):
            continue  # (one the grammar cannot read is Hydra's to refuse)
        if read.is_hydra_override() and not read.key_or_group.startswith(THE_SWEEPS_OWN):
            continue
        raise ExperimentError(
            f"{typed}: {given} launches the sweep's jobs left to run as it planned them, and "
            "takes only how to launch them (hydra/launcher=, hydra.launcher.*); resume one job "
            f"with other settings alone (resume=<its folder> {typed}), or sweep them anew"
        )
    multirun = [] if asks_for_multirun([*flags, *others]) else ["-m"]
    return [
        *multirun,
        *flags,
        *_last_of_each_key([*saved, *others]),
        f"hydra.sweep.dir={as_value(str(folder))}",
        SWEEP_RESUMER,
    ]


def flags_apart(arguments: list[str]) -> tuple[list[str], list[str]]:
    """Hydra's flags with their values, apart: argparse finds them only before the overrides."""
    flags: list[str] = []
    overrides: list[str] = []
    for argument in arguments:
        is_value = flags and flags[-1].startswith("-") and not argument.startswith(("-", "~"))
        if argument.startswith("-") or (is_value and "=" not in argument):
            flags.append(argument)
        else:
            overrides.append(argument)
    return flags, overrides


def _last_of_each_key(overrides: list[str]) -> list[str]:
    """Of overrides of the same key, the last (which Hydra would apply), in its place."""
    keys = [_key(override) for override in overrides]
    return [override for i, override in enumerate(overrides) if keys[i] not in keys[i + 1 :]]


def _key(override: str) -> str:
    """With its + or ~; one the grammar cannot read is a key of its own, for Hydra to refuse."""
    read = parsed(override)
    return override if read is None else read.get_key_element()
