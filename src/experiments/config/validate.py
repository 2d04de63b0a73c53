"""A config's one-line refusals before anything is built: the command line's, the composed
config's and a saved config's, each in the order told; what only data can tell is refused later."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import NamedTuple

from omegaconf import DictConfig, OmegaConf

from experiments.config import compile_checks, dataset_checks, training_checks
from experiments.config.checks import Check, FieldCheck, Rule, field_refusal, rule_of, schema_rules
from experiments.config.choices import DeviceName
from experiments.config.compile_checks import CompileBackends
from experiments.config.overrides import (
    refuse_missing_plugins,
    refuse_numbers_for_groups,
    refuse_optimizing_on_test,
    refuse_own_class_on_a_shipped_model,
    refuse_sweeps_without_multirun,
)
from experiments.config.schemas import (
    SCHEMAS,
    DatasetConfig,
    EmaConfig,
    ModelConfig,
    SchedulerConfig,
    TrainerConfig,
)
from experiments.config.store import config_groups, group_options
from experiments.core.errors import ExperimentError
from experiments.core.hints import no_such_key
from experiments.core.text import abridged


class ArgumentsCheck(NamedTuple):
    refuse: Callable[[Sequence[str]], None]
    typed: bool = False  # given the arguments as typed, not as rewritten for Hydra


COMMAND_LINE_CHECKS: tuple[ArgumentsCheck, ...] = (
    # As typed: replay= of one job of a sweep brings back the sweep's option, and is one run.
    ArgumentsCheck(refuse_sweeps_without_multirun, typed=True),
    ArgumentsCheck(refuse_numbers_for_groups),  # device=1
    ArgumentsCheck(refuse_missing_plugins),  # hydra/launcher=joblib, not installed
    ArgumentsCheck(refuse_optimizing_on_test),  # optimized_metric=test_accuracy
    ArgumentsCheck(refuse_own_class_on_a_shipped_model),  # model._target_= on model=tudui
)


def validate_command_line(typed: Sequence[str], arguments: Sequence[str]) -> None:
    """Refuse what the command line asks that Hydra would say badly or not at all."""
    for check in COMMAND_LINE_CHECKS:
        check.refuse(typed if check.typed else arguments)


class Section(NamedTuple):
    applies: Callable[[DictConfig], bool]
    checks: tuple[Check, ...]


def config_checks(
    processes: int = 1, backends: Callable[[], CompileBackends] | None = None
) -> tuple[Section, ...]:
    """`backends()` is asked only of a config that compiles (torch takes seconds to list them)."""
    shared_batch = functools.partial(training_checks.batch_not_shared_evenly, processes=processes)
    compiling = (compile_checks.unusable_backend, compile_checks.compile_mode)
    return (
        Section(_always, (_unchosen_group, _unknown_key)),
        Section(_chosen("model"), MODEL_CHECKS),
        Section(_chosen("task"), (_own_task_without_target,)),
        Section(_task_trained, (training_checks.task_metrics_not_declared,)),
        Section(_held("trainer"), (*TRAINING_CHECKS, shared_batch)),
        Section(_held("limit_images"), EVALUATION_CHECKS),  # an evaluation
        Section(_chosen("dataset"), (fields("dataset"), *dataset_checks.ACROSS_FIELDS)),
        Section(_always, (fields("device"),)),
        Section(_held("tracker"), (fields("tracker"),)),
        Section(_always, tuple(functools.partial(check, backends=backends) for check in compiling)),
    )


def _always(cfg: DictConfig) -> bool:
    return True


def _task_trained(cfg: DictConfig) -> bool:
    return "trainer" in cfg and cfg.get("task") is not None


def _chosen(section: str) -> Callable[[DictConfig], bool]:
    """(eval.py's model is none but for a class of one's own.)"""
    return lambda cfg: cfg.get(section) is not None


def _held(key: str) -> Callable[[DictConfig], bool]:
    return lambda cfg: key in cfg


def validate(
    cfg: DictConfig, processes: int = 1, backends: Callable[[], CompileBackends] | None = None
) -> None:
    """Refuse, in one line, the first thing composing let through (`config_checks`)."""
    for section in config_checks(processes, backends):
        checks = section.checks if section.applies(cfg) else ()
        refusal = next(filter(None, (check(cfg) for check in checks)), None)
        if refusal is not None:
            raise ExperimentError(refusal)


def refuse_unchosen_groups(cfg: DictConfig) -> None:
    """The first check alone: a training run reads its batch size before `validate`."""
    refusal = _unchosen_group(cfg)
    if refusal is not None:
        raise ExperimentError(refusal)


def _unchosen_group(cfg: DictConfig) -> str | None:
    """`~model` leaves its section unset, which would otherwise fail where it is first read."""
    for group in config_groups():
        if OmegaConf.is_missing(cfg, group):  # (False for a section the config lacks)
            return (
                f"no {group} chosen (~{group} takes its choice away); choose one with "
                f"{group}=<option>: {', '.join(abridged(group_options(group)))}"
            )
    return None


def _unknown_key(node: DictConfig, path: str = "") -> str | None:
    schema = OmegaConf.get_type(node)
    if not dataclasses.is_dataclass(schema):
        return None  # a free-form section (a data source's arguments, a model of the user's own)
    known = [entry.name for entry in dataclasses.fields(schema)]
    for key in node:
        name = f"{path}.{key}" if path else str(key)
        if key not in known:
            return no_such_key(f"+{name}", name, known)
        # An interpolation may name a field derived later (a model's num_classes).
        if OmegaConf.is_missing(node, key) or OmegaConf.is_interpolation(node, key):
            continue
        if isinstance(node[key], DictConfig):
            refusal = _unknown_key(node[key], name)
            if refusal is not None:
                return refusal
    return None


def fields(*paths: str) -> Check:
    """The rules of each field of the sections at `paths` ("": the top level), nested too."""

    def check(cfg: DictConfig) -> str | None:
        nodes = ((OmegaConf.select(cfg, path) if path else cfg, path) for path in paths)
        return next(filter(None, (field_refusal(node, path) for node, path in nodes)), None)

    return check


def _limited_twice(images_key: str, fraction_key: str) -> Check:
    def check(cfg: DictConfig) -> str | None:
        images, fraction = OmegaConf.select(cfg, images_key), OmegaConf.select(cfg, fraction_key)
        if images is None or fraction is None:
            return None
        return (
            f"{images_key}={images} and {fraction_key}={fraction} both limit the evaluation; "
            "set one of them (a number of images, or a fraction of the images)"
        )

    return check


_trainer_limited_twice = _limited_twice("trainer.limit_eval_images", "trainer.limit_eval_fraction")


def _own_class_named(section: str, what: str, example: str, docs: str) -> Check:
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


def _model_without_name(cfg: DictConfig) -> str | None:
    if OmegaConf.select(cfg, "model.name") is not None:
        return None
    return (
        "the model config has no name:, which names the model in records and reports; add "
        "name: <its name> to its YAML file (docs/configs.md)"
    )


MODEL_CHECKS: tuple[Check, ...] = (_own_model_without_target, _model_without_name, fields("model"))


TRAINING_CHECKS: tuple[Check, ...] = (
    # (Before the fields: the limit it checks has no size.)
    training_checks.a_batchs_worth_of_an_unsearched_batch,
    fields("trainer", "optimizer", "scheduler"),
    training_checks.auto_batch_settings_without_auto,
    training_checks.halvings_of_the_knee,
    training_checks.overfit_and_limit,
    _trainer_limited_twice,
    compile_checks.compile_under_dp,
    compile_checks.channels_last_under_dp,
    training_checks.benchmark_with_determinism,
    training_checks.average_settings_without_decay,
    training_checks.target_twice,
    training_checks.target_unknown,
    training_checks.monitor_on_test,
    training_checks.monitor_unknown,
    training_checks.optimized_metric_unoptimizable,
    training_checks.nesterov_without_momentum,
    functools.partial(training_checks.beyond_float32, section="optimizer"),
    functools.partial(training_checks.beyond_float32, section="scheduler"),
    training_checks.warmup_of_a_rising_schedule,
    training_checks.warmup_longer_than_the_run,
    training_checks.warmup_between_epoch_steps,
)


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


EVALUATION_CHECKS: tuple[Check, ...] = (
    _no_checkpoint,
    fields(""),
    _limited_twice("limit_images", "limit_fraction"),
    _evaluation_under_ddp,
    compile_checks.compile_under_dp,
    compile_checks.channels_last_under_dp,
)


# A saved config is plain data that no schema typed: a field of another type is refused too.
def _saved(schema: type, path: str, names: str) -> tuple[FieldCheck, ...]:
    """The saved rules of the fields `names` (space-separated) of the section at `path`."""
    rules = ((name, rule_of(schema, name, saved=True)) for name in names.split())
    return tuple(FieldCheck(f"{path}.{name}", rule) for name, rule in rules if rule is not None)


def _every_datasets_fields() -> tuple[FieldCheck, ...]:
    """(A saved config's dataset is of any of the schemas.)"""
    rules: dict[str, Rule] = {}
    for schema in SCHEMAS.values():
        if issubclass(schema, DatasetConfig):
            for key, rule in schema_rules(schema, "dataset", saved=True):
                rules.setdefault(key, rule)
    return tuple(FieldCheck(key, rule) for key, rule in rules.items())


SAVED_CHECKS: tuple[Check, ...] = (
    *_saved(ModelConfig, "model", "name"),
    *_saved(SchedulerConfig, "scheduler", "name"),
    *_saved(
        TrainerConfig,
        "trainer",
        "epochs batch_size accumulate_batches limit_train_batches limit_eval_images "
        "limit_eval_fraction monitor monitor_mode ema",
    ),
    *_saved(EmaConfig, "trainer.ema", "decay"),
    # Older versions' limit of the evaluation, a number of batches as limit_train_batches is.
    FieldCheck("trainer.limit_eval_batches", rule_of(TrainerConfig, "limit_train_batches")),
    _trainer_limited_twice,
    *_every_datasets_fields(),
    # (Which targets a saved config may build is `config.trust`'s to say.)
    *(
        check
        for check in dataset_checks.ACROSS_FIELDS
        if check is not dataset_checks.source_without_target
    ),
)


def saved_config_refusal(saved: DictConfig) -> str | None:
    """The line refusing what a checkpoint's config holds that no run saves, or None."""
    return next(filter(None, (check(saved) for check in SAVED_CHECKS)), None)
