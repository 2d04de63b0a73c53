"""The refusals of a config before anything is built, stage by stage, each check in the order
its refusal is told:

1. `COMMAND_LINE_CHECKS`, on the command line's arguments before Hydra reads them, where Hydra
   would say what is wrong over many lines or not at all (the checks are `config.overrides`'s);
   `validate_command_line` runs them, for train.py and eval.py alike.
2. `config_checks`, on the composed config, section by section: what its types cannot check (a
   group's choice taken away, keys appended with `+` that no schema has, each field's rule, which
   its schema declares beside it (`config.checks`), then the checks across fields, and what
   selects epochs and hyperparameters: never a test metric); `validate` runs them, for a
   training run and an evaluation alike (a section a config lacks is skipped).
3. `SAVED_CHECKS`, on a config a run saved (a checkpoint's), in the fields evaluation and resume
   read from it: the same fields' rules, of a value of any type (nothing typed a saved config);
   `saved_config_refusal` runs them as the checkpoint loads.

Each refusal is one line naming the key and what is valid. A check of the composed config is a
function of it that returns its line, or None. What only a run's files or data can tell is
refused where it is found (a target no one typed: `run.job`; a resume's checkpoint:
`records.resume_checks`; the data: `data.validation`, `training.tasks`)."""

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
    shared_batch = functools.partial(training_checks.batch_not_shared_evenly, processes=processes)
    return (
        Section(_always, (_unchosen_group, _key_no_schema_has)),
        Section(_chosen("model"), MODEL_CHECKS),
        Section(_chosen("task"), (_own_task_without_target,)),
        Section(_task_trained, (training_checks.task_metrics_not_declared,)),
        Section(_held("trainer"), (*TRAINING_CHECKS, shared_batch)),
        Section(_held("limit_images"), EVALUATION_CHECKS),  # an evaluation
        Section(_chosen("dataset"), (fields("dataset"), *dataset_checks.ACROSS_FIELDS)),
        Section(_always, (fields("device"),)),
        Section(_held("tracker"), (fields("tracker"),)),
        Section(
            _always,
            (
                functools.partial(compile_checks.unusable_backend, backends=backends),
                functools.partial(compile_checks.compile_mode, backends=backends),
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
    cfg: DictConfig,
    processes: int = 1,
    backends: Callable[[], CompileBackends] | None = None,
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


def fields(*paths: str) -> Check:
    """The rules its schemas declare of each field of the sections at `paths` ("": the top
    level) and of their nested settings (trainer.ema), in the schemas' order."""

    def check(cfg: DictConfig) -> str | None:
        nodes = ((OmegaConf.select(cfg, path) if path else cfg, path) for path in paths)
        return next(filter(None, (field_refusal(node, path) for node, path in nodes)), None)

    return check


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


def _model_without_name(cfg: DictConfig) -> str | None:
    """(A model of one's own, whose YAML may lack a name.)"""
    if OmegaConf.select(cfg, "model.name") is not None:
        return None
    return (
        "the model config has no name:, which names the model in records and reports; add "
        "name: <its name> to its YAML file (docs/configs.md)"
    )


MODEL_CHECKS: tuple[Check, ...] = (_own_model_without_target, _model_without_name, fields("model"))


# Training: the trainer, what selects epochs and hyperparameters, and the optimization.


TRAINING_CHECKS: tuple[Check, ...] = (
    # (Before the fields: the limit it checks has no size.)
    training_checks.a_batchs_worth_of_an_unsearched_batch,
    fields("trainer", "optimizer", "scheduler"),
    training_checks.halvings_without_auto,
    training_checks.overfit_and_limit,
    functools.partial(
        _evaluation_limited_twice,
        images_key="trainer.limit_eval_images",
        fraction_key="trainer.limit_eval_fraction",
    ),
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


EVALUATION_CHECKS: tuple[Check, ...] = (
    _no_checkpoint,
    fields(""),
    functools.partial(
        _evaluation_limited_twice, images_key="limit_images", fraction_key="limit_fraction"
    ),
    _evaluation_under_ddp,
    compile_checks.compile_under_dp,
    compile_checks.channels_last_under_dp,
)


# A run's saved config (its checkpoint's), which evaluation and resume read: plain data that no
# schema typed, so a field of another type than a run saves is refused too.


def _saved(schema: type, path: str, names: str) -> tuple[FieldCheck, ...]:
    """The checks of a saved config's fields `names` (space-separated) of the section at `path`,
    by `schema`'s rules (a field's saved rule, where it declares one)."""
    rules = ((name, rule_of(schema, name, saved=True)) for name in names.split())
    return tuple(FieldCheck(f"{path}.{name}", rule) for name, rule in rules if rule is not None)


def _every_datasets_fields() -> tuple[FieldCheck, ...]:
    """A saved config's dataset is of any of the schemas: each key's rule, once."""
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
    functools.partial(
        _evaluation_limited_twice,
        images_key="trainer.limit_eval_images",
        fraction_key="trainer.limit_eval_fraction",
    ),
    *_every_datasets_fields(),
    # (All but whether a source names its target: which targets a saved config may build is
    # `config.trust`'s to say.)
    *(
        check
        for check in dataset_checks.ACROSS_FIELDS
        if check is not dataset_checks.source_without_target
    ),
)


def saved_config_refusal(saved: DictConfig) -> str | None:
    """What a run's saved config (`saved`: a checkpoint's, as plain data) holds in the fields
    evaluation and resume read that no run saves, in one line naming the key and what is valid
    (the command line's own checks, where a saved value has the command line's rule); None where
    it holds nothing such."""
    return next(filter(None, (check(saved) for check in SAVED_CHECKS)), None)
