"""Every option of every config group composes; the schemas hold the defaults and refuse wrong
types, unknown keys and values outside closed choices while composing; `validate` the rest."""

from __future__ import annotations

import dataclasses
from importlib import resources

import pytest
import yaml
from hydra.errors import ConfigCompositionException
from omegaconf import MISSING, OmegaConf

from experiments.config.schemas import SCHEMAS
from experiments.config.store import CONFIG_PACKAGE, CUDA_OPTIONS
from experiments.config.trust import is_shipped, targets_in
from experiments.config.validate import validate
from experiments.core.errors import ExperimentError
from experiments.data import loading
from helpers import assert_field_refused, compose_config

CONF = resources.files(CONFIG_PACKAGE)
GROUPS = [
    "model",
    "dataset",
    "task",
    "device",
    "placement",
    "optimizer",
    "scheduler",
    "trainer",
    "tracker",
    "callbacks",
    "experiment",
]


def options(group: str) -> list[str]:
    found = sorted(
        entry.name[:-5] for entry in (CONF / group).iterdir() if entry.name.endswith(".yaml")
    )
    if group == "device":
        found += [f"cuda:{index}" for index in range(CUDA_OPTIONS)]
    return found


# The fields a user's own data fills in when it loads (and what a user must name).
WHAT_THE_DATA_TELLS = {
    "dataset=image_folder": ("dataset.root=data/my_images", "dataset.num_classes=10"),
    "dataset=custom": (
        "dataset.source._target_=my_pkg.make_splits",
        "dataset.channels=3",
        "dataset.image_size=32",
        "dataset.num_classes=10",
    ),
    "model=custom": ("model._target_=my_models.Net",),
    "dataset=csv": ("dataset.channels=10",),
    "task=custom": ("task._target_=my_tasks.Task", "task.metrics={mae:min}"),
}
# The groups whose options build targets, each in slots of its own (`config.trust`).
SLOTTED = ("model", "optimizer", "scheduler", "placement", "dataset", "task", "tracker")
# Options named by what they build rather than by the option itself.
NAMES = {
    "model=torchvision": "resnet18",
    "model=timm": "timm_resnet18",
    "model=custom": "my_models.Net",
}


@pytest.mark.slow
@pytest.mark.parametrize(
    "override", [f"{group}={option}" for group in GROUPS for option in options(group)]
)
def test_every_option_composes_and_resolves(override: str) -> None:
    cfg = compose_config(override, *WHAT_THE_DATA_TELLS.get(override, ()))
    resolved = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    # A section per group (experiment merges into the others), and the top-level fields.
    assert set(resolved) == {*GROUPS, "optimized_metric", "resume", "replay"} - {"experiment"}
    group, _, option = override.partition("=")
    if group in ("model", "dataset", "task", "placement", "optimizer", "scheduler"):
        assert resolved[group]["name"] == NAMES.get(override, option)
    validate(cfg)
    # What a checkpoint or run folder may build (config.trust) covers every target shipped for
    # this group's slots; a user's own (custom) is typed, never shipped.
    if group in SLOTTED and option != "custom":
        found = list(targets_in(OmegaConf.to_container(cfg[group]), group))
        assert found and all(is_shipped(target.target, target.slot) for target in found), found


def test_the_groups_have_the_options_the_readme_promises() -> None:
    assert options("model") == [
        "custom",
        "lenet",
        "mlp",
        "network",
        "timm",
        "torchvision",
        "tudui",
        "unet",
    ]
    assert options("dataset") == [
        "cifar10",
        "cifar10_sample",
        "csv",
        "custom",
        "fashion_mnist",
        "image_folder",
        "mnist",
        "mnist_sample",
        "shapes",
        "synthetic",
    ]
    assert {"cpu", "cuda", "auto", "dp", "ddp", "cuda:0", "cuda:15"} <= set(options("device"))
    assert options("task") == ["classification", "custom", "regression", "segmentation"]
    assert options("placement") == ["cuda_call", "to_device"]
    assert options("optimizer") == ["adam", "adamw", "rmsprop", "sgd", "sgd_momentum"]
    assert options("scheduler") == ["cosine", "none", "onecycle", "step", "warmup_cosine"]
    assert options("experiment") == [
        "batch_scaling",
        "device_scaling",
        "lenet_cifar10",
        "resnet_recipe",
        "tudui_cifar10",
    ]


def test_defaults_are_tudui_on_the_shipped_cifar10_sample_on_the_best_device() -> None:
    cfg = compose_config()
    assert (cfg.model.name, cfg.dataset.name, cfg.device.name) == (
        "tudui",
        "cifar10_sample",
        "auto",
    )
    assert (cfg.placement.name, cfg.optimizer.name, cfg.optimizer.lr) == ("to_device", "sgd", 0.01)


def test_models_take_their_shape_from_the_dataset() -> None:
    cfg = compose_config("model=lenet", "dataset=mnist_sample")
    assert (cfg.model.in_channels, cfg.model.image_size, cfg.model.num_classes) == (1, 28, 10)
    cfg = compose_config("dataset=synthetic", "dataset.image_size=64", "dataset.num_classes=6")
    assert (cfg.model.image_size, cfg.model.num_classes) == (64, 6)


def test_cuda_n_is_the_cuda_option_with_that_index() -> None:
    cfg = compose_config("device=cuda:7")
    assert (cfg.device.name, cfg.device.index) == ("cuda", 7)


def test_an_experiment_can_still_be_overridden() -> None:
    cfg = compose_config("experiment=lenet_cifar10", "trainer.epochs=5", "dataset=cifar10_sample")
    assert (cfg.trainer.epochs, cfg.dataset.name) == (5, "cifar10_sample")


def option_files() -> list[str]:
    return [
        f"{group}/{option}"
        for group in ("model", "dataset", "device", "placement", "optimizer", "trainer")
        for option in options(group)
        if ":" not in option
    ]


@pytest.mark.parametrize("option", option_files())
def test_option_files_hold_only_what_differs_from_their_schema(option: str) -> None:
    """A default lives in the schema; an option's YAML repeating it would be a second copy."""
    text = (CONF / f"{option}.yaml").read_text()
    # After the line naming its schema (test_schema_comments): what it selects, and a command
    # that selects it.
    second_line = text.splitlines()[1]
    assert second_line.startswith("# ") and (
        "python train.py" in second_line or "torchrun" in second_line
    )
    fields = yaml.safe_load(text)
    if option == "model/custom":  # free-form, no schema: a model of one's own takes any argument
        assert "defaults" not in fields
        return
    (schema_entry,) = fields.pop("defaults")
    schema = SCHEMAS[schema_entry.removeprefix("/").removesuffix("@_here_")]
    defaults = {
        entry.name: entry.default
        if entry.default is not dataclasses.MISSING
        else entry.default_factory()  # type: ignore[misc]
        for entry in dataclasses.fields(schema)
        if entry.default is not dataclasses.MISSING
        or entry.default_factory is not dataclasses.MISSING
    }
    repeated = {
        key: value
        for key, value in fields.items()
        if key in defaults and defaults[key] is not MISSING and defaults[key] == value
    }
    assert not repeated, f"{option}.yaml repeats its schema's defaults: {repeated}"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("trainer.epochs=many", "could not be converted to Integer"),
        ("optimizer.lr=fast", "could not be converted to Float"),
        ("trainer.epochs_count=3", "Key 'epochs_count' not in 'TrainerConfig'"),
        ("device.ids=[a]", "could not be converted to Integer"),
        ("device.visible=[a]", "could not be converted to Integer"),
        # Closed choices are Enums: a typo fails here, before any run folder exists.
        ("trainer.precision=bf17", "Invalid value 'bf17', expected one of [fp32, bf16, fp16]"),
        ("trainer.precision=32", "Invalid value '32', expected one of [fp32, bf16, fp16]"),
        ("dataset.preload=gpu", "Invalid value 'gpu', expected one of [host, device]"),
        ("device.name=tpu", "Invalid value 'tpu', expected one of [auto, cpu, cuda, dp, ddp]"),
    ],
)
def test_schemas_refuse_wrong_types_unknown_keys_and_unknown_choices(
    override: str, message: str
) -> None:
    with pytest.raises(ConfigCompositionException) as error:
        compose_config(override)
    assert message in str(error.value) + str(error.value.__cause__)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "+trainer.foo=1",
            "+trainer.foo: 'trainer' has no key 'foo'; its keys are epochs, batch_size, "
            "memory_budget_gb, auto_batch, auto_batch_halvings, auto_batch_min_steps, seed, "
            "deterministic, cudnn_benchmark, checkpoint_every, threads, precision, channels_last, "
            "compile, compile_mode, "
            "keep_freed_memory, log_interval, limit_train_batches, ",
        ),
        (
            "+dataset.augment.rotate=15",
            "+dataset.augment.rotate: 'dataset.augment' has no key 'rotate'; its keys are "
            "crop_padding, flip",
        ),
        ("+model.dropout=0.5", "+model.dropout: 'model' has no key 'dropout'; its keys are name, "),
        ("+epochs=3", "+epochs: the config has no key 'epochs'; its keys are model, dataset, "),
    ],
)
def test_keys_appended_with_plus_must_be_in_the_schema(override: str, message: str) -> None:
    cfg = compose_config(override)  # Hydra lets `+` append to any section
    with pytest.raises(ExperimentError) as error:
        validate(cfg)
    assert str(error.value).startswith(message)


def test_a_data_sources_arguments_are_its_own() -> None:
    # `dataset.source` is free-form: its keys are the arguments of its `_target_`, which no
    # schema knows; validate lets them through, and the source takes them.
    cfg = compose_config("dataset=mnist_sample", "dataset.source.test_every=4")
    validate(cfg)
    assert len(loading.load(cfg.dataset).test) == 10_000 // 4


def test_a_cache_timeout_must_be_a_time_to_wait() -> None:
    cfg = compose_config("dataset=image_folder", "dataset.root=any", "dataset.cache_timeout=0")
    with pytest.raises(ExperimentError) as error:
        validate(cfg)
    assert_field_refused(str(error.value), "dataset.cache_timeout", "0.0")


def test_a_trackers_timeout_must_be_a_time_to_wait() -> None:
    cfg = compose_config("tracker=[tensorboard,wandb]", "tracker.wandb.timeout=0")
    with pytest.raises(ExperimentError) as error:
        validate(cfg)
    assert_field_refused(str(error.value), "tracker.wandb.timeout", "0.0")
    validate(compose_config("tracker=mlflow", "tracker.mlflow.timeout=0.5"))
