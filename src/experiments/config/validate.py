"""The refusals of a config before anything is built, in one table per stage, each check in the
order its refusal is told:

1. `COMMAND_LINE_CHECKS`, on the command line's arguments before Hydra reads them, where Hydra
   would say what is wrong over many lines or not at all (the checks are `config.overrides`'s);
   `validate_command_line` runs them, for train.py and eval.py alike.
2. `config_checks`, on the composed config: what its types cannot check (a group's choice taken
   away, keys appended with `+` that no schema has, numbers out of range, what selects epochs
   and hyperparameters: never a test metric), section by section; `validate` runs them, for a
   training run and an evaluation alike (a section a config lacks is skipped).
3. `SAVED_CHECKS`, on a config a run saved (a checkpoint's), in the fields evaluation and resume
   read from it: the command line's checks where its rule holds for a saved value, of any type
   (nothing typed a saved config); `saved_config_refusal` runs them as the checkpoint loads.

Each refusal is one line naming the key and what is valid. A check of the composed config is a
function of it that returns its line, or None: most are one field's (`FieldCheck`). What only a
run's files or data can tell is refused where it is found (a target no one typed: `run.job`; a
resume's checkpoint: `records.resume_checks`; the data: `data.validation`, `training.tasks`)."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from experiments.config.choices import AUTO_BATCH, DeviceName, Interval, Mode
from experiments.config.metric_names import LOSS, VAL, on_test
from experiments.config.optimized import WHY_NOT_TEST, unoptimizable
from experiments.config.overrides import (
    refuse_missing_plugins,
    refuse_numbers_for_groups,
    refuse_optimizing_on_test,
    refuse_own_class_on_a_shipped_model,
    refuse_sweeps_without_multirun,
)
from experiments.config.schemas import EmaConfig, is_table
from experiments.config.store import config_groups, default_option, group_options
from experiments.config.task_metrics import declared_by, metrics_of, task_class
from experiments.core.errors import ExperimentError
from experiments.core.hints import no_such_key
from experiments.core.text import abridged, as_typed


class ArgumentsCheck(NamedTuple):
    """A check of the command line: `refuse` raises its line."""

    refuse: Callable[[Sequence[str]], None]
    typed: bool = False  # given the arguments as typed, not as rewritten for Hydra


# The command line's checks, in the order their refusals are told.
COMMAND_LINE_CHECKS: tuple[ArgumentsCheck, ...] = (
    # An option that is a sweep (hparams_search=optuna) without -m. As typed: replay= of one job
    # of a sweep brings back the sweep's option, and is one run.
    ArgumentsCheck(refuse_sweeps_without_multirun, typed=True),
    ArgumentsCheck(refuse_numbers_for_groups),  # device=1
    ArgumentsCheck(refuse_missing_plugins),  # hydra/launcher=joblib, not installed
    ArgumentsCheck(refuse_optimizing_on_test),  # optimized_metric=test_accuracy
    ArgumentsCheck(refuse_own_class_on_a_shipped_model),  # model._target_= on model=tudui
)


def validate_command_line(typed: Sequence[str], arguments: Sequence[str]) -> None:
    """Refuse, in one line, what the command line asks (`typed`: as the user typed it;
    `arguments`: as Hydra is given it) where Hydra would say it badly or not at all."""
    for check in COMMAND_LINE_CHECKS:
        check.refuse(typed if check.typed else arguments)


Check = Callable[[DictConfig], str | None]
"""A check of a composed config: the one line that refuses it, or None."""


class CompileBackends(NamedTuple):
    """torch.compile's backends and inductor's modes, as torch lists them (this package imports
    no torch)."""

    accepted: frozenset[str]  # every one it takes, its debugging ones (eager) too
    offered: tuple[str, ...]  # those a refusal offers: installed, and not for debugging
    modes: tuple[str, ...] = ()  # inductor's (trainer.compile_mode)
    cuda_graph_modes: frozenset[str] = frozenset()  # those that capture CUDA graphs
    cuda_graph_backends: frozenset[str] = frozenset()  # backends that capture them (cudagraphs)
    debugging: frozenset[str] = frozenset()  # those torch tags for debugging: they speed nothing up
    # Each backend torch lists whose package is not installed here, and that package's name.
    uninstalled: tuple[tuple[str, str], ...] = ()


class Section(NamedTuple):
    """Checks of one part of a composed config, made where it `applies`."""

    applies: Callable[[DictConfig], bool]
    checks: tuple[Check, ...]


def config_checks(
    processes: int = 1, backends: Callable[[], CompileBackends] | None = None
) -> tuple[Section, ...]:
    """The composed config's checks, in the order their refusals are told, for a run whose
    `processes` share `trainer.batch_size` (the global batch), compiled by a torch.compile that
    takes `backends()` (asked only of a config that compiles: torch takes seconds to list them;
    None: not asked, as where nothing is compiled)."""
    shared_batch = functools.partial(_batch_not_shared_evenly, processes=processes)
    return (
        Section(_always, (_unchosen_group, _key_no_schema_has)),
        Section(_chosen("model"), MODEL_CHECKS),
        Section(_chosen("task"), (_own_task_without_target,)),
        Section(_task_trained, (_task_metrics_not_declared,)),
        Section(_held("trainer"), (*TRAINING_CHECKS, shared_batch)),
        Section(_held("limit_images"), EVALUATION_CHECKS),  # an evaluation
        Section(_chosen("dataset"), DATASET_CHECKS),
        Section(_always, DEVICE_CHECKS),
        Section(_held("tracker"), TRACKER_CHECKS),
        Section(
            _always,
            (
                functools.partial(_unusable_backend, backends=backends),
                functools.partial(_compile_mode, backends=backends),
            ),
        ),
    )


def _always(cfg: DictConfig) -> bool:
    return True


def _task_trained(cfg: DictConfig) -> bool:
    """(eval.py's task is the checkpoint's, but for a class of one's own it is told to build.)"""
    return "trainer" in cfg and cfg.get("task") is not None


def _chosen(section: str) -> Callable[[DictConfig], bool]:
    """Whether a section is chosen: eval.py's model is none but for a class of one's own."""
    return lambda cfg: cfg.get(section) is not None


def _held(key: str) -> Callable[[DictConfig], bool]:
    """Whether the config has a key: a training run's `trainer`, an evaluation's `limit_images`."""
    return lambda cfg: key in cfg


def validate(
    cfg: DictConfig, processes: int = 1, backends: Callable[[], CompileBackends] | None = None
) -> None:
    """Refuse, in one line naming the key and what is valid, what composing let through: the
    first refusal of `config_checks(processes, backends)`."""
    for section in config_checks(processes, backends):
        if not section.applies(cfg):
            continue
        for check in section.checks:
            refusal = check(cfg)
            if refusal is not None:
                raise ExperimentError(refusal)


def refuse_unchosen_groups(cfg: DictConfig) -> None:
    """The table's first check, alone: a training run reads the trainer's settings (its batch
    size, for what running out of memory says) before `validate`."""
    refusal = _unchosen_group(cfg)
    if refusal is not None:
        raise ExperimentError(refusal)


def _unchosen_group(cfg: DictConfig) -> str | None:
    """`~model` takes the group's choice out of the defaults list, leaving its section unset,
    which nothing after composing could tell but by failing where it is first read."""
    for group in config_groups():
        if OmegaConf.is_missing(cfg, group):  # (False for a section the config lacks)
            return (
                f"no {group} chosen (~{group} takes its choice away); choose one with "
                f"{group}=<option>: {', '.join(abridged(group_options(group)))}"
            )
    return None


def _key_no_schema_has(cfg: DictConfig) -> str | None:
    return _unknown_key(cfg, "")


def _unknown_key(node: DictConfig, path: str) -> str | None:
    """Hydra lets `+section.key=value` append a key to any section; refuse one its schema lacks."""
    schema = OmegaConf.get_type(node)
    if not dataclasses.is_dataclass(schema):
        return None  # a free-form section (a data source's arguments, a model of the user's own)
    known = [entry.name for entry in dataclasses.fields(schema)]
    for key in node:
        name = f"{path}.{key}" if path else str(key)
        if key not in known:
            return no_such_key(f"+{name}", name, known)
        # An interpolation is left unresolved: it may name a field derived later (a model's
        # num_classes from an image folder's classes).
        if OmegaConf.is_missing(node, key) or OmegaConf.is_interpolation(node, key):
            continue
        if isinstance(node[key], DictConfig):
            refusal = _unknown_key(node[key], name)
            if refusal is not None:
                return refusal
    return None


def compute_settings(cfg: DictConfig) -> tuple[str, DictConfig]:
    """Where a config keeps how its model computes (precision, channels_last, compile,
    compile_mode, threads), and the prefix its keys are typed with: a training run's trainer
    (`trainer.`), an evaluation's top level."""
    return ("trainer.", cfg.trainer) if "trainer" in cfg else ("", cfg)


def _unusable_backend(
    cfg: DictConfig, backends: Callable[[], CompileBackends] | None
) -> str | None:
    """`trainer.compile` (eval.py's `compile`) names a backend of torch.compile whose package is
    installed, one that captures CUDA graphs only on a GPU, or none: refused before the data is
    loaded and the model built (torch.compile would say so only then, in its own words, or at the
    first step)."""
    prefix, settings = compute_settings(cfg)
    backend, key = settings.compile, f"{prefix}compile"
    if backends is None or not backend:
        return None
    known = backends()
    choose = f"choose one of {', '.join(known.offered)}, or null (not compiled)"
    if backend not in known.accepted:
        return f"{key}={backend} is not a backend of torch.compile; {choose}"
    if package := dict(known.uninstalled).get(backend):
        return f"{key}={backend} needs the package {package}, which is not installed; {choose}"
    if backend in known.cuda_graph_backends and cfg.device.name == DeviceName.cpu:
        return cuda_graphs_need_a_gpu(key, backend, "device=cpu")
    return None


def debugging_backend(key: str, backend: str) -> str:
    """What a run compiled by one of torch's debugging backends (`key`: trainer.compile, eval.py's
    compile) is told."""
    return (
        f"{key}={backend} is one of torch.compile's debugging backends: it checks what torch "
        f"captures and speeds nothing up; {key}=inductor compiles for speed"
    )


_ABSENT = object()


@dataclasses.dataclass(frozen=True)
class FieldCheck:
    """A check of one field: `{key}={value} {says}` where `valid(value)` is false. A field the
    config lacks (a schedule without it, data not of the user's own) is not checked."""

    key: str  # as the user types it
    valid: Callable[[Any], bool]
    says: str  # what is valid

    def __call__(self, cfg: DictConfig) -> str | None:
        try:
            value = OmegaConf.select(cfg, self.key, default=_ABSENT)
        except OmegaConfBaseException as error:  # a list on its way (in a saved config)
            first = str(error).splitlines()[0]
            return f"{self.key} cannot be read ({first}): each section on its way holds settings"
        if value is _ABSENT or self._holds(value):
            return None
        text = f"{self.key}={as_typed(value)}"
        unbounded = _not_finite(value)
        if unbounded is not None:
            return f"{text} {unbounded}: it {self.says}"
        return f"{text} {self.says}"

    def _holds(self, value: Any) -> bool:
        try:
            return bool(self.valid(value))
        except TypeError:  # a value no schema typed (a saved config's) that `valid` cannot compare
            return False


def _not_finite(value: Any) -> str | None:
    """What a float that no range holds is: NaN (which compares as neither below nor above a
    bound), or infinite; None for any other value."""
    if not isinstance(value, float) or math.isfinite(value):
        return None
    return "is not a number" if math.isnan(value) else "is infinite"


def _image_channels(cfg: DictConfig) -> str | None:
    """An image is grey or RGB; a CSV file's rows have as many "channels" as features."""
    dataset = cfg.get("dataset")
    if dataset is None or is_table(dataset) or dataset.get("channels") in (None, 1, 3):
        return None
    return f"dataset.channels={dataset.channels} must be 1 (grey) or 3 (RGB)"


def whole_number(value: Any) -> bool:
    """An int, not a bool (which Python counts as one) nor a float (which a field typed Any
    takes as given)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _whole_from_one(key: str) -> FieldCheck:
    return FieldCheck(
        key, lambda number: whole_number(number) and number >= 1, "must be a whole number >= 1"
    )


def _from_one_or_null(key: str) -> FieldCheck:
    return FieldCheck(
        key,
        lambda number: number is None or (whole_number(number) and number >= 1),
        "must be >= 1, or null",
    )


def _evaluation_limit_checks(images_key: str, fraction_key: str) -> tuple[Check, ...]:
    """The evaluation is limited to a number of images, or a fraction of each split, or neither;
    `images_key` and `fraction_key` as the user types them (`trainer.limit_eval_images`, eval.py's
    `limit_images`)."""
    return (
        functools.partial(
            _evaluation_limited_twice, images_key=images_key, fraction_key=fraction_key
        ),
        FieldCheck(
            images_key,
            lambda images: images is None or (whole_number(images) and images >= 1),
            "must be a number of images >= 1, or null; a fraction of the images is "
            f"{fraction_key}=0.2",
        ),
        FieldCheck(
            fraction_key,
            lambda fraction: fraction is None or 0 < fraction <= 1,
            "is a fraction of the images, in (0, 1] (e.g. 0.2), or null; a number of images is "
            f"{images_key}=N",
        ),
    )


def _evaluation_limited_twice(cfg: DictConfig, images_key: str, fraction_key: str) -> str | None:
    images, fraction = OmegaConf.select(cfg, images_key), OmegaConf.select(cfg, fraction_key)
    if images is None or fraction is None:
        return None
    return (
        f"{images_key}={images} and {fraction_key}={fraction} both limit the evaluation; "
        "set one of them (a number of images, or a fraction of the images)"
    )


# The model.


def _own_class_named(section: str, what: str, example: str, docs: str) -> Check:
    """The check that `<section>=custom` names the class of the user's own."""

    def check(cfg: DictConfig) -> str | None:
        if OmegaConf.select(cfg, f"{section}._target_") is not None:
            return None
        return (
            f"{section}=custom needs {section}._target_=<module>.<name>, {what}, e.g. "
            f"{section}._target_={example} ({docs})"
        )

    return check


_own_model_without_target = _own_class_named(
    "model", "the class or function that builds your model", "my_models.Net", "docs/configs.md"
)
_own_task_without_target = _own_class_named(
    "task", "the class of your task", "my_tasks.Task", "docs/tasks.md"
)


def _task_metrics_not_declared(cfg: DictConfig) -> str | None:
    """A task of one's own declares its metrics, each max or min; a shipped task's are its
    class's, which says what else its config may declare."""
    task = cfg.task
    example = "task.metrics='{mae: min, r2: max}'"
    if task.get("metrics") is not None and not isinstance(task.metrics, DictConfig):
        return f"task.metrics={task.metrics} must give each metric's better way: {example}"
    given = declared_by(task) or {}
    given.pop(LOSS.name, None)  # (measured last, whether named or not)
    shipped = task_class(task)
    if shipped is not None:
        if not given or given in [m.better_ways() for m in (shipped.measured, *shipped.narrower)]:
            return None
        measured = _ways(shipped.measured.better_ways())
        return f"task.metrics={{{_ways(given)}}} is not what task={task.name} measures: {measured}"
    if not given:
        return (
            f"task={task.name} declares no metrics: give each one's better way, the first "
            f"leading, {example}, and its class a method of each name (docs/tasks.md)"
        )
    wrong = [f"task.metrics.{name}={way}" for name, way in given.items() if way not in WAYS]
    return f"{wrong[0]}: a metric's way is max or min" if wrong else None


def _ways(metrics: dict[str, str]) -> str:
    return ", ".join(f"{name}: {way}" for name, way in metrics.items())


WAYS = (str(Mode.max), str(Mode.min))


def _model_without_name(cfg: DictConfig) -> str | None:
    """(A model of one's own, whose YAML may lack a name.)"""
    if OmegaConf.select(cfg, "model.name") is not None:
        return None
    return (
        "the model config has no name:, which names the model in records and reports; add "
        "name: <its name> to its YAML file (docs/configs.md)"
    )


MODEL_CHECKS: tuple[Check, ...] = (_own_model_without_target, _model_without_name)


# Training: the trainer, what selects epochs and hyperparameters, and the optimization.


# The backend whose modes trainer.compile_mode names (torch.compile's default backend).
INDUCTOR = "inductor"


def _compile_mode(cfg: DictConfig, backends: Callable[[], CompileBackends] | None) -> str | None:
    """`trainer.compile_mode` (eval.py's `compile_mode`) names one of inductor's modes, for
    compile=inductor; one that captures CUDA graphs, only on a GPU (`cuda_graphs_need_a_gpu`)."""
    prefix, settings = compute_settings(cfg)
    mode, backend = settings.get("compile_mode"), settings.compile
    if mode is None:
        return None
    if not backend:
        return (
            f"{prefix}compile_mode={mode} is a mode of torch.compile: add {prefix}compile=inductor"
        )
    if backend != INDUCTOR:
        return (
            f"{prefix}compile_mode={mode} is a mode of the inductor backend, and "
            f"{prefix}compile={backend} takes none: use {prefix}compile=inductor, or leave the "
            "mode out"
        )
    if backends is None:
        return None
    known = backends()
    if mode not in known.modes:
        return (
            f"{prefix}compile_mode={mode} is not a mode of torch.compile; choose one of "
            f"{', '.join(known.modes)}, or null (its default)"
        )
    if mode in known.cuda_graph_modes and cfg.device.name == DeviceName.cpu:
        return cuda_graphs_need_a_gpu(f"{prefix}compile_mode", mode, "device=cpu")
    return None


# What the CPU takes instead of a backend or mode that captures CUDA graphs, by key.
WITHOUT_CUDA_GRAPHS = {
    "compile": "inductor, or null (not compiled)",
    "compile_mode": "max-autotune-no-cudagraphs, or default",
}


def cuda_graphs_need_a_gpu(key: str, value: str, device: str) -> str:
    """A backend or mode that captures CUDA graphs, asked (`key`: trainer.compile or
    trainer.compile_mode, eval.py's compile or compile_mode) of a run on the CPU (`device`: how
    it got there)."""
    instead = WITHOUT_CUDA_GRAPHS[key.rpartition(".")[2]]
    return (
        f"{key}={value} captures CUDA graphs, which need a GPU, and {device} has none; on the "
        f"CPU use {key}={instead}"
    )


def _decay(value: float | None) -> bool:
    return value is None or (math.isfinite(value) and value >= 0)


def _nesterov_without_momentum(cfg: DictConfig) -> str | None:
    """torch's SGD takes Nesterov's momentum only with some momentum (and no dampening)."""
    optimizer = cfg.optimizer
    if not optimizer.get("nesterov") or optimizer.get("momentum", 0) > 0:
        return None
    return (
        f"optimizer.nesterov=true needs momentum: optimizer.momentum={optimizer.momentum} "
        "(e.g. optimizer=sgd_momentum, or optimizer.momentum=0.9)"
    )


def _warmup_of_a_rising_schedule(cfg: DictConfig) -> str | None:
    """warmup_cosine and onecycle rise over a share of the run already: a second rise before it
    would be a warm-up of a warm-up."""
    scheduler = cfg.scheduler
    if not scheduler.get("warmup_epochs"):
        return None
    for own in ("warmup_fraction", "pct_start"):
        if own in scheduler:
            return (
                f"scheduler.warmup_epochs={scheduler.warmup_epochs} warms up scheduler="
                f"{scheduler.name}, which rises over scheduler.{own} of the run already: take "
                "one (scheduler=cosine scheduler.warmup_epochs=N warms up a cosine)"
            )
    return None


def _warmup_longer_than_the_run(cfg: DictConfig) -> str | None:
    epochs, warmup = cfg.trainer.epochs, cfg.scheduler.get("warmup_epochs", 0)
    if warmup < epochs:
        return None
    return (
        f"scheduler.warmup_epochs={warmup} must be less than trainer.epochs={epochs} (the "
        "schedule runs after the warm-up)"
    )


def _warmup_between_epoch_steps(cfg: DictConfig) -> str | None:
    """A schedule stepped once an epoch cannot end its warm-up half-way through one."""
    scheduler = cfg.scheduler
    warmup = scheduler.get("warmup_epochs", 0)
    if scheduler.interval != Interval.epoch or float(warmup).is_integer():
        return None
    return (
        f"scheduler.warmup_epochs={warmup} with scheduler.interval=epoch: the lr changes once an "
        "epoch; give whole epochs, or scheduler.interval=step"
    )


def _compile_under_dp(cfg: DictConfig) -> str | None:
    prefix, settings = compute_settings(cfg)
    if not (settings.compile and cfg.device.name == DeviceName.dp):
        return None
    return (
        f"{prefix}compile={settings.compile} cannot compile device=dp's DataParallel (it "
        "copies the model to every GPU at every step); use device=ddp"
    )


def _channels_last_under_dp(cfg: DictConfig) -> str | None:
    prefix, settings = compute_settings(cfg)
    if not (settings.channels_last and cfg.device.name == DeviceName.dp):
        return None
    return (
        f"{prefix}channels_last=true cannot hold under device=dp: DataParallel copies the "
        "model to its other GPUs at every step in the default memory format; use "
        f"device=ddp, which keeps channels-last on every GPU, or {prefix}channels_last=null"
    )


def _benchmark_with_determinism(cfg: DictConfig) -> str | None:
    if not (cfg.trainer.cudnn_benchmark and cfg.trainer.deterministic):
        return None
    return (
        "trainer.cudnn_benchmark=true lets cuDNN choose its algorithms by timing them, "
        "which trainer.deterministic=true rules out; set one of them false"
    )


def _monitor_on_test(cfg: DictConfig) -> str | None:
    """Validation metrics select epochs and hyperparameters; test metrics never do."""
    monitor = cfg.trainer.monitor
    if not on_test(monitor):
        return None
    measures = metrics_of(cfg)
    monitored = " or ".join(measures.monitored()) if measures else "a validation metric"
    return (
        f"trainer.monitor={monitor} would pick the epoch on the test split: "
        f"{WHY_NOT_TEST}; monitor {monitored} (with dataset.val_fraction=0.1)"
    )


def _monitor_unknown(cfg: DictConfig) -> str | None:
    monitor, measures = cfg.trainer.monitor, metrics_of(cfg)
    if monitor is None or measures is None or on_test(monitor):
        return None
    monitored = measures.monitored()
    if monitor in monitored:
        return None
    return (
        f"trainer.monitor={monitor} is not a metric {_task_text(cfg)} can monitor"
        f"{_unmeasured(cfg, monitor)}; choose {' or '.join(monitored)}"
    )


def _unmeasured(cfg: DictConfig, monitor: str) -> str:
    """Why the task's class leaves the metric `monitor` names unmeasured with this dataset
    (top-5 accuracy among few classes), in brackets; "" where it never measures it."""
    shipped, prefix = task_class(cfg.task), f"{VAL}_"
    why = shipped.unmeasured.get(monitor.removeprefix(prefix)) if shipped else None
    if why is None or not monitor.startswith(prefix):
        return ""
    classes = OmegaConf.select(cfg, "dataset.num_classes", default=None)
    has = f"has {classes}" if classes is not None else "leaves their number to its data"
    return f" ({why}; dataset {cfg.dataset.name} {has})"


def _target_twice(cfg: DictConfig) -> str | None:
    trainer = cfg.trainer
    if trainer.target_accuracy is None or trainer.target_value is None:
        return None
    return (
        f"trainer.target_accuracy={trainer.target_accuracy} and trainer.target_value="
        f"{trainer.target_value} both set a target; keep one"
    )


def _target_unknown(cfg: DictConfig) -> str | None:
    """A target's metric is one of the task's; target_accuracy is a classifier's."""
    trainer, measures = cfg.trainer, metrics_of(cfg)
    if measures is None:
        return None
    names = [metric.name for metric in measures.evaluated]
    if trainer.target_accuracy is not None and "accuracy" not in names:
        return (
            f"trainer.target_accuracy={trainer.target_accuracy}: task={cfg.task.name} measures "
            f"no accuracy; use trainer.target_metric (one of {', '.join(names)}) and "
            "trainer.target_value"
        )
    metric = trainer.target_metric
    if metric is not None and metric not in names:
        return (
            f"trainer.target_metric={metric} is not a metric {_task_text(cfg)} measures; "
            f"choose {' or '.join(names)}"
        )
    if metric is not None and trainer.target_value is None:
        return f"trainer.target_metric={metric} needs trainer.target_value=<the value to reach>"
    return None


def _task_text(cfg: DictConfig) -> str:
    """ "it" for the default task, else "task=<its option>"."""
    name = cfg.task.name
    return "it" if name == default_option("task") else f"task={name}"


def _optimized_metric_unoptimizable(cfg: DictConfig) -> str | None:
    return unoptimizable(cfg.optimized_metric, metrics_of(cfg))


# The largest float32: the optimizer's step computes in the parameters' float32, where a larger
# number overflows, at the first step, once the data is loaded and the model built.
FLOAT32_MAX = 3.4028234663852886e38


def _beyond_float32(cfg: DictConfig, section: str) -> str | None:
    """A number of the optimizer's or the schedule's (in a list too) that float32 cannot hold:
    NaN, infinite, or beyond its range."""
    for key, value in cfg[section].items():
        for number in value if isinstance(value, ListConfig) else [value]:
            if isinstance(number, (int, float)) and not abs(number) <= FLOAT32_MAX:
                held = f"{section}.{key}={value}"
                unbounded = _not_finite(number)
                if unbounded is not None and number is value:
                    return f"{held} {unbounded}; give a finite number"
                if unbounded is not None:
                    return f"{held} holds {number}, which {unbounded}; give finite numbers"
                return (
                    f"{held} is beyond float32, which the optimizer's step computes in (at most "
                    f"{FLOAT32_MAX:.4g}): it would overflow at the first step; give a number "
                    "within it"
                )
    return None


def _batch_not_shared_evenly(cfg: DictConfig, processes: int) -> str | None:
    batch_size = cfg.trainer.batch_size
    if batch_size == AUTO_BATCH:
        if processes == 1 and cfg.device.name != DeviceName.dp:
            return None
        shared = f"{processes} processes" if processes > 1 else "device=dp's GPUs"
        return (
            f"trainer.batch_size=auto searches the largest batch of one device, and {shared} "
            "share each batch; give trainer.batch_size a number (the search's on one device, "
            "times the devices, is a start)"
        )
    if batch_size % processes == 0:
        return None
    return (
        f"trainer.batch_size={batch_size} is the batch of all {processes} "
        f"processes together; make it a multiple of {processes}"
    )


def _overfit_and_limit(cfg: DictConfig) -> str | None:
    trainer = cfg.trainer
    if trainer.overfit_batches is None or trainer.limit_train_batches is None:
        return None
    return (
        f"trainer.overfit_batches={trainer.overfit_batches} trains on those batches every "
        f"epoch, and trainer.limit_train_batches={trainer.limit_train_batches} on the first "
        "of a new shuffle: set one (the other null)"
    )


def _a_batchs_worth_of_an_unsearched_batch(cfg: DictConfig) -> str | None:
    """The debug presets evaluate a batch's worth of images (`${trainer.batch_size}`), which
    trainer.batch_size=auto is not before its search."""
    limit = OmegaConf.to_container(cfg.trainer, resolve=False).get("limit_eval_images")
    if cfg.trainer.batch_size != AUTO_BATCH or limit != "${trainer.batch_size}":
        return None
    return (
        f"trainer.limit_eval_images={limit} (a debug preset's: a batch's worth) has no size "
        f"while trainer.batch_size={AUTO_BATCH}: give trainer.batch_size=N, or "
        "trainer.limit_eval_images=N"
    )


def _halvings_without_auto(cfg: DictConfig) -> str | None:
    halvings = cfg.trainer.auto_batch_halvings
    if halvings == 0 or cfg.trainer.batch_size == AUTO_BATCH:
        return None
    return (
        f"trainer.auto_batch_halvings={halvings} halves the batch trainer.batch_size=auto "
        f"finds, and trainer.batch_size={cfg.trainer.batch_size}; add trainer.batch_size=auto"
    )


def _average_settings_without_decay(cfg: DictConfig) -> str | None:
    """trainer.ema's settings of how the average is kept, given without the decay that keeps
    one."""
    ema = OmegaConf.select(cfg, "trainer.ema")
    if ema is None or ema.decay is not None:
        return None
    defaults = EmaConfig()
    given = [
        f"trainer.ema.{key}={ema[key]}"
        for key in ("every", "warmup_steps")
        if ema[key] != getattr(defaults, key)
    ]
    if not given:
        return None
    verb = "sets" if len(given) == 1 else "set"
    return (
        f"{' and '.join(given)} {verb} how the average of the weights is kept, but "
        "trainer.ema.decay is null: none is kept; add trainer.ema.decay=0.9999"
    )


# The largest batch a run trains or serves with: more images than a training split the project
# reads holds (a batch larger than its split trains on all of it), so a number beyond it is a
# slip, which would otherwise be drawn and held whole (a benchmark's inputs; 10**9 of them are
# 8 GB of indices alone).
LARGEST_BATCH = 2**24


def _a_batch(batch: Any) -> bool:
    return whole_number(batch) and 1 <= batch <= LARGEST_BATCH


_EMA_DECAY = FieldCheck(
    "trainer.ema.decay",
    lambda decay: decay is None or 0 < decay < 1,
    "must be in (0, 1), the share of the average kept at each optimizer step (e.g. 0.9999), "
    "or null (no average)",
)


# The optimizers' fields that torch refuses out of range in its own words, without the key, or
# takes where training cannot work: a momentum of 1 or more never lets a step go (the steps add up
# for good), an average kept whole (an alpha or a beta of 1) never takes a gradient in, and an eps
# of 0 divides a gradient of 0 by 0.
OPTIMIZER_CHECKS: tuple[Check, ...] = (
    FieldCheck(
        "optimizer.momentum",
        lambda momentum: 0 <= momentum < 1,
        "must be in [0, 1): the share of the last step kept in the next (0: none; e.g. 0.9)",
    ),
    FieldCheck(
        "optimizer.alpha",
        lambda alpha: 0 <= alpha < 1,
        "must be in [0, 1): the share of the average of the squared gradients kept at each step "
        "(e.g. 0.99)",
    ),
    FieldCheck(
        "optimizer.eps",
        lambda eps: math.isfinite(eps) and eps > 0,
        "must be a finite number > 0, added to the divisor of every step (e.g. 1e-08)",
    ),
    FieldCheck(
        "optimizer.betas",
        lambda betas: len(betas) == 2 and all(0 <= beta < 1 for beta in betas),
        "must be two numbers, each in [0, 1): the shares of the averages of the gradients and of "
        "their squares kept at each step (e.g. [0.9, 0.999])",
    ),
)


TRAINING_CHECKS: tuple[Check, ...] = (
    _a_batchs_worth_of_an_unsearched_batch,
    _whole_from_one("trainer.epochs"),
    FieldCheck(
        "trainer.batch_size",
        lambda batch: batch == AUTO_BATCH or _a_batch(batch),
        f"must be a whole number from 1 to {LARGEST_BATCH:,}, or auto (the largest batch that "
        "trains on the device)",
    ),
    FieldCheck(
        "trainer.auto_batch_halvings", lambda halvings: halvings >= 0, "must be a whole number >= 0"
    ),
    _halvings_without_auto,
    FieldCheck(
        "trainer.memory_budget_gb",
        lambda budget: math.isfinite(budget) and budget > 0,
        "must be a number of GiB > 0 (the process's peak memory the CPU's search allows)",
    ),
    _whole_from_one("trainer.log_interval"),
    _whole_from_one("trainer.checkpoint_every"),
    _whole_from_one("trainer.accumulate_batches"),
    _from_one_or_null("trainer.threads"),
    _from_one_or_null("trainer.limit_train_batches"),
    _from_one_or_null("trainer.overfit_batches"),
    _overfit_and_limit,
    *_evaluation_limit_checks("trainer.limit_eval_images", "trainer.limit_eval_fraction"),
    _compile_under_dp,
    _channels_last_under_dp,
    _benchmark_with_determinism,
    _EMA_DECAY,
    _whole_from_one("trainer.ema.every"),
    FieldCheck("trainer.ema.warmup_steps", lambda steps: steps >= 0, "must be a whole number >= 0"),
    _average_settings_without_decay,
    FieldCheck(
        "trainer.seed",
        lambda seed: 0 <= seed < 2**64,  # what torch's generators take
        f"must be a whole number from 0 to 2**64 - 1 ({2**64 - 1})",
    ),
    FieldCheck(
        "trainer.target_accuracy",
        lambda target: target is None or 0 < target <= 1,
        "is a fraction of the images, in (0, 1] (e.g. 0.5 for 50%), or null",
    ),
    FieldCheck(
        "trainer.target_value",
        lambda target: target is None or math.isfinite(target),
        "must be a finite number, the value of trainer.target_metric to reach, or null",
    ),
    _target_twice,
    _target_unknown,
    _monitor_on_test,
    _monitor_unknown,
    _optimized_metric_unoptimizable,
    _from_one_or_null("trainer.early_stopping.patience"),
    FieldCheck("trainer.early_stopping.min_delta", lambda delta: delta >= 0, "must be >= 0"),
    FieldCheck(
        "optimizer.lr", lambda lr: math.isfinite(lr) and lr >= 0, "must be a finite number >= 0"
    ),
    *(
        FieldCheck(f"optimizer.{key}", _decay, "must be a finite number >= 0" + also)
        for key, also in (
            ("weight_decay", ""),
            ("norm_weight_decay", ", or null (optimizer.weight_decay)"),
            ("bias_weight_decay", ", or null (optimizer.weight_decay)"),
        )
    ),
    *OPTIMIZER_CHECKS,
    _nesterov_without_momentum,
    functools.partial(_beyond_float32, section="optimizer"),
    FieldCheck(
        "trainer.gradient_clip",
        lambda norm: norm is None or norm > 0,
        "must be > 0 (a gradient norm), or null",
    ),
    FieldCheck(
        "trainer.label_smoothing", lambda smoothing: 0 <= smoothing < 1, "must be in [0, 1)"
    ),
    FieldCheck(
        "scheduler.milestones",
        lambda shares: all(0 < share <= 1 for share in shares),
        "are shares of the run, each in (0, 1]",
    ),
    FieldCheck("scheduler.pct_start", lambda share: 0 < share < 1, "must be in (0, 1)"),
    FieldCheck("scheduler.warmup_fraction", lambda share: 0 <= share < 1, "must be in [0, 1)"),
    FieldCheck(
        "scheduler.warmup_epochs",
        lambda epochs: math.isfinite(epochs) and epochs >= 0,
        "must be a number of epochs >= 0 (0: no warm-up)",
    ),
    FieldCheck(
        "scheduler.start_factor",
        lambda factor: 0 < factor <= 1,
        "must be in (0, 1]: the share of the lr the warm-up starts from",
    ),
    # (After the schedule's fields, whose refusals say their ranges.)
    functools.partial(_beyond_float32, section="scheduler"),
    _warmup_of_a_rising_schedule,
    _warmup_longer_than_the_run,
    _warmup_between_epoch_steps,
)


# Evaluation (eval.py).


def _evaluation_under_ddp(cfg: DictConfig) -> str | None:
    if cfg.device.name != DeviceName.ddp:
        return None
    return (
        "device=ddp trains under torchrun; eval.py evaluates in one process: use "
        "device=cuda, device=dp or device=cpu"
    )


def _no_checkpoint(cfg: DictConfig) -> str | None:
    if not OmegaConf.is_missing(cfg, "ckpt"):
        return None
    return "ckpt is required: python eval.py ckpt=<run folder or checkpoint>"


# Fewer timed calls than this leave p99 a guess: of 100, it lies between the two slowest.
LEAST_LATENCY_CALLS = 100


EVALUATION_CHECKS: tuple[Check, ...] = (
    _no_checkpoint,
    _whole_from_one("batch_size"),
    *_evaluation_limit_checks("limit_images", "limit_fraction"),
    _evaluation_under_ddp,
    _compile_under_dp,
    _channels_last_under_dp,
    _from_one_or_null("threads"),
    FieldCheck(
        "seed", lambda seed: 0 <= seed < 2**64, f"must be a whole number from 0 to {2**64 - 1}"
    ),
    FieldCheck(
        "serving.batch_size",
        lambda batch: batch is None or _a_batch(batch),
        f"must be a whole number from 1 to {LARGEST_BATCH:,}, or null (the batch its run "
        "trained with)",
    ),
    FieldCheck(
        "serving.latency_calls",
        lambda calls: calls >= LEAST_LATENCY_CALLS,
        f"must be {LEAST_LATENCY_CALLS} or more: fewer leave p99 a guess",
    ),
    FieldCheck("serving.warmup_calls", lambda calls: calls >= 0, "must be a whole number >= 0"),
    _whole_from_one("serving.rounds"),
    FieldCheck(
        "serving.round_seconds",
        lambda seconds: math.isfinite(seconds) and seconds > 0,
        "must be a number of seconds > 0",
    ),
)


# The dataset.


def _image_folder_without_root(cfg: DictConfig) -> str | None:
    if not OmegaConf.is_missing(cfg.dataset, "root"):
        return None
    return (
        f"dataset={cfg.dataset.name} needs dataset.root=<folder>, holding train/<class>/* and "
        "test/<class>/* (docs/own-data.md)"
    )


def _source_without_target(cfg: DictConfig) -> str | None:
    if not OmegaConf.is_missing(cfg.dataset.source, "_target_"):
        return None
    return (
        f"dataset={cfg.dataset.name} needs dataset.source._target_=<module>.<function>, a "
        "function returning (train, test) torch Datasets (docs/own-data.md)"
    )


def _statistic_not_per_channel(cfg: DictConfig, key: str) -> str | None:
    """dataset.mean or dataset.std (null: computed from the training images)."""
    given, channels = cfg.dataset.get(key), cfg.dataset.get("channels")
    if given is None or len(given) in (1, channels or len(given)):
        return None
    return f"dataset.{key}={list(given)} needs 1 or {channels} values (one per channel)"


def _classes_miscounted(cfg: DictConfig) -> str | None:
    classes, num_classes = cfg.dataset.get("classes"), cfg.dataset.get("num_classes")
    if classes is None or num_classes is None or len(classes) == num_classes:
        return None
    return f"dataset.classes names {len(classes)} classes, but dataset.num_classes={num_classes}"


def _padding_of_an_images_size(cfg: DictConfig) -> str | None:
    """A crop of images padded by their own size or more may hold none of the image (and the
    padded batch takes memory by the square of the padding); a size the data tells (null) is not
    known before it is loaded."""
    padding = OmegaConf.select(cfg, "dataset.augment.crop_padding", default=0)
    size = cfg.dataset.get("image_size")
    if size is None or padding < size:
        return None
    return (
        f"dataset.augment.crop_padding={padding} must be less than dataset.image_size={size}: a "
        "crop of images padded by their size or more may hold none of the image (e.g. 4 for 32x32)"
    )


# RandAugment's ops (`data.policies.RANDAUGMENT`): an image's rounds each draw one of them, so more
# rounds than ops only repeat ops, at a round's cost each.
RANDAUGMENT_OPS = 14

# Mixup's and CutMix's largest alpha: Beta(1000, 1000) draws within 0.04 of an even mix 999 times
# in 1000, and a larger alpha nearer still; Python's draw from Beta never ends from half the float
# maximum (9e307) on.
MOST_MIXING_ALPHA = 1000.0


DATASET_CHECKS: tuple[Check, ...] = (
    FieldCheck(
        "dataset.val_fraction",
        lambda share: 0 <= share < 1,
        "must be in [0, 1): the share of the training images held out for validation",
    ),
    FieldCheck(
        "dataset.test_fraction",
        lambda share: 0 < share < 1,
        "must be a number between 0 and 1: the share of the rows drawn for the test split",
    ),
    _image_folder_without_root,
    _source_without_target,
    _image_channels,
    _from_one_or_null("dataset.image_size"),
    # Fields of data of the user's own only (`is_users_data`).
    FieldCheck(
        "dataset.workers",
        lambda workers: workers is None or workers >= 0,
        "must be >= 0, or null",
    ),
    FieldCheck("dataset.cache_max_gb", lambda gigabytes: gigabytes >= 0, "must be >= 0"),
    FieldCheck(
        "dataset.cache_timeout",
        lambda seconds: math.isfinite(seconds) and seconds > 0,
        "must be > 0 (seconds to wait for another process building the same cache entry)",
    ),
    FieldCheck(
        "dataset.mean",
        lambda means: means is None or all(math.isfinite(mean) for mean in means),
        "must hold finite numbers",
    ),
    functools.partial(_statistic_not_per_channel, key="mean"),
    FieldCheck(
        "dataset.std",
        lambda stds: stds is None or all(math.isfinite(std) and std > 0 for std in stds),
        "must hold numbers > 0 (pixels are divided by them)",
    ),
    functools.partial(_statistic_not_per_channel, key="std"),
    _classes_miscounted,
    FieldCheck("dataset.augment.crop_padding", lambda padding: padding >= 0, "must be >= 0"),
    _padding_of_an_images_size,
    FieldCheck(
        "dataset.augment.num_ops",
        lambda ops: 1 <= ops <= RANDAUGMENT_OPS,
        f"must be a whole number from 1 to {RANDAUGMENT_OPS}, as many as RandAugment has ops "
        "(each image draws its ops at random, repeats too; torchvision's default is 2)",
    ),
    FieldCheck(
        "dataset.augment.magnitude",
        lambda step: 0 <= step <= 30,
        "must be in [0, 30] (a step of the ops' 31 magnitudes, as torchvision's RandAugment)",
    ),
    FieldCheck("dataset.augment.erasing", lambda chance: 0 <= chance <= 1, "must be in [0, 1]"),
    *(
        FieldCheck(
            f"dataset.augment.{key}",
            lambda alpha: 0 <= alpha <= MOST_MIXING_ALPHA,
            f"must be in [0, {MOST_MIXING_ALPHA:g}] (0: off; Beta(alpha, alpha) draws the "
            "shares, e.g. 0.2)",
        )
        for key in ("mixup_alpha", "cutmix_alpha")
    ),
)


def _negative_gpu(cfg: DictConfig) -> str | None:
    visible = list(cfg.device.visible or [])
    if all(gpu >= 0 for gpu in visible):
        return None
    return f"device.visible={visible} names a negative GPU; GPUs are numbered from 0"


DEVICE_CHECKS: tuple[Check, ...] = (
    _negative_gpu,
    FieldCheck(
        "device.timeout",
        lambda seconds: math.isfinite(seconds) and seconds > 0,
        "must be > 0 (seconds before joining the processes, or any collective, gives up)",
    ),
)


TRACKER_CHECKS: tuple[Check, ...] = tuple(
    FieldCheck(
        f"tracker.{tracker}.timeout",
        lambda seconds: math.isfinite(seconds) and seconds > 0,
        f"must be > 0 (seconds a run waits on one call to {name} before going on without it)",
    )
    for tracker, name in (("mlflow", "MLflow"), ("wandb", "W&B"))
)


# A run's saved config (its checkpoint's), which evaluation and resume read: plain data that no
# schema typed, so a field of another type than a run saves is refused too.


def _a_name(name: Any) -> bool:
    return isinstance(name, str) and name != ""


SAVED_CHECKS: tuple[Check, ...] = (
    *(FieldCheck(key, _a_name, "must be a name") for key in ("model.name", "dataset.name")),
    FieldCheck("scheduler.name", _a_name, "must be a name"),
    _whole_from_one("trainer.epochs"),
    FieldCheck(
        "trainer.batch_size",
        _a_batch,
        f"must be a whole number from 1 to {LARGEST_BATCH:,}, the batch its run trained with "
        "(its search's, for auto)",
    ),
    _whole_from_one("trainer.accumulate_batches"),
    _from_one_or_null("trainer.limit_train_batches"),
    _from_one_or_null("trainer.limit_eval_batches"),  # older versions' limit of the evaluation
    *_evaluation_limit_checks("trainer.limit_eval_images", "trainer.limit_eval_fraction"),
    FieldCheck(
        "trainer.monitor",
        lambda monitor: monitor is None or _a_name(monitor),
        "must be the name of a validation metric, or null",
    ),
    FieldCheck(
        "trainer.monitor_mode",
        lambda mode: mode in [choice.name for choice in Mode],
        f"must be one of {', '.join(choice.name for choice in Mode)}",
    ),
    FieldCheck(
        "trainer.ema",
        lambda ema: isinstance(ema, DictConfig),
        "must hold the moving average's settings (decay, every, warmup_steps)",
    ),
    _EMA_DECAY,
    _from_one_or_null("dataset.num_classes"),
    FieldCheck(
        "dataset.classes",
        lambda classes: (
            classes is None
            or (isinstance(classes, ListConfig) and all(isinstance(name, str) for name in classes))
        ),
        "must be the classes' names, in label order, or null",
    ),
    # (All but whether a source names its target: which targets a saved config may build is
    # `config.trust`'s to say.)
    *(check for check in DATASET_CHECKS if check is not _source_without_target),
)


def saved_config_refusal(saved: DictConfig) -> str | None:
    """What a run's saved config (`saved`: a checkpoint's, as plain data) holds in the fields
    evaluation and resume read that no run saves, in one line naming the key and what is valid
    (the command line's own checks, where a saved value has the command line's rule); None where
    it holds nothing such."""
    return next(filter(None, (check(saved) for check in SAVED_CHECKS)), None)
