"""A key or an option the config has not got is refused in one line naming what was probably
meant: the closest keys or options, or, for what a user of lightning-hydra-template types, what
does that here. An option that is a sweep is refused without -m, before Hydra runs."""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

import pytest
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf

from experiments.cli.main import _compose_and_run
from experiments.config.overrides import refuse_sweeps_without_multirun, with_saved_overrides
from experiments.config.schemas import TrainerConfig
from experiments.config.store import config_groups, group_options
from experiments.config.validate import validate
from experiments.core.errors import ExperimentError, one_line
from experiments.core.hints import TEMPLATE_EQUIVALENTS
from helpers import compose_config, train_cli


def refused(*overrides: str) -> str:
    """The line for what Hydra refuses while composing `python train.py <overrides>`."""
    with pytest.raises(HydraException) as error:
        compose_config(*overrides)
    return one_line(error.value)


def refused_when_run(*overrides: str) -> str:
    """The line for a `+key` Hydra lets through and the run refuses."""
    cfg = compose_config(*overrides)
    with pytest.raises(ExperimentError) as error:
        validate(cfg)
    return str(error.value)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("override", "line"),
    [
        (
            "trainer.epoch=3",
            "trainer.epoch=3: 'trainer' has no key 'epoch'; did you mean trainer.epochs?",
        ),
        (
            "trainer.early_stopping.patiense=3",
            "trainer.early_stopping.patiense=3: 'trainer.early_stopping' has no key 'patiense'; "
            "did you mean trainer.early_stopping.patience?",
        ),
        (
            "optimizer.lrr=0.1",
            "optimizer.lrr=0.1: 'optimizer' has no key 'lrr'; did you mean optimizer.lr?",
        ),
        ("modle=lenet", "modle=lenet: the config has no key 'modle'; did you mean model?"),
    ],
)
def test_a_misspelt_key_is_answered_with_the_closest_keys(override: str, line: str) -> None:
    assert refused(override) == line


def test_a_key_nothing_is_close_to_is_answered_with_every_key_of_its_section() -> None:
    every = ", ".join(entry.name for entry in dataclasses.fields(TrainerConfig))
    line = refused("trainer.foo=1")
    assert line == f"trainer.foo=1: 'trainer' has no key 'foo'; its keys are {every}"


def test_a_misspelt_key_added_with_plus_is_answered_alike_when_the_run_starts() -> None:
    assert refused_when_run("+trainer.epoch=3") == (
        "+trainer.epoch: 'trainer' has no key 'epoch'; did you mean trainer.epochs?"
    )


def test_a_free_form_section_names_the_close_key_and_how_to_add_ones_own() -> None:
    own_model = ("model=custom", "model._target_=my_models.Net")
    assert refused(*own_model, "model.weigths=a.pt") == (
        "model.weigths=a.pt: 'model' has no key 'weigths'; did you mean model.weights? "
        "(a key of your own is added with +: +model.weigths=a.pt)"
    )
    assert refused(*own_model, "model.width=64") == (
        "model.width=64: 'model' has no key 'width'; a key of your own is added with +: "
        "+model.width=64"
    )


@pytest.mark.parametrize(
    ("override", "meant"),
    [
        ("dataset=cifar", "cifar10"),
        ("optimizer=rmsprob", "rmsprop"),
        ("hydra/launcher=jobli", "joblib"),
    ],
)
def test_a_misspelt_option_of_any_group_names_the_closest(override: str, meant: str) -> None:
    group = override.partition("=")[0]
    line = refused(override)
    assert line.startswith(f"{override} is not an option of '{group}'; choose one of: ")
    assert line.endswith(f" (did you mean {meant}?)")


# What a lightning-hydra-template user types, and the line that answers it.
TEMPLATE_KEYS = [
    ("seed=42", "seed=42: the config has no key 'seed'; the seed is trainer.seed=N"),
    (
        "ckpt_path=last.ckpt",
        "ckpt_path=last.ckpt: the config has no key 'ckpt_path'; a run goes on from its last "
        "checkpoint with resume=<run folder>; python eval.py ckpt=<checkpoint or run folder> "
        "evaluates one",
    ),
    (
        "trainer=gpu",
        "trainer=gpu is not an option of 'trainer'; a GPU is device=cuda (device=cuda:N for "
        "another one)",
    ),
    (
        "data=mnist",
        "data=mnist: the config has no key 'data'; the data is dataset=<option> (python train.py "
        "--help lists them)",
    ),
    (
        "data.batch_size=128",
        "data.batch_size=128: the config has no key 'data'; the batch size is trainer.batch_size=N",
    ),
    (
        "callbacks=default",
        "callbacks=default is not an option of 'callbacks'; a callback of one's own is "
        "+callbacks.<name>._target_=<module>.<class>; checkpoints and early stopping are "
        "trainer.checkpoint_every=N, trainer.monitor=<metric> and "
        "trainer.early_stopping.patience=N",
    ),
    (
        "debug=default",
        "debug=default is not an option of 'debug'; a quick run is debug=fast (one batch of "
        "each split)",
    ),
    (
        "debug=profiler",
        "debug=profiler is not an option of 'debug'; profiling is debug=profile (a short "
        "epoch) or trainer.profile=true",
    ),
    (
        "tags=[dev]",
        "tags=[dev]: the config has no key 'tags'; a run is named by its folder: "
        "hydra.run.dir=outputs/<name> (hydra.sweep.dir= for -m)",
    ),
    (
        "trainer.max_epochs=20",
        "trainer.max_epochs=20: 'trainer' has no key 'max_epochs'; the number of epochs is "
        "trainer.epochs=N",
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize(("override", "line"), TEMPLATE_KEYS)
def test_lightning_hydra_template_keys_are_answered_with_what_does_that_here(
    override: str, line: str
) -> None:
    assert refused(override) == line


def test_a_key_left_out_that_is_not_there_is_answered_in_one_line() -> None:
    assert refused("~task.metrics.top5_accuracy") == (
        "~task.metrics.top5_accuracy: the config has no task.metrics.top5_accuracy to leave out; "
        "a classifier leaves top-5 accuracy out with task.metrics='{accuracy: max}'"
    )
    assert refused("~trainer.nonexist") == (
        "~trainer.nonexist: the config has no trainer.nonexist to leave out; python train.py "
        "--cfg job prints the config"
    )


def test_their_plus_forms_are_answered_alike() -> None:
    assert refused_when_run("+seed=42") == (
        "+seed: the config has no key 'seed'; the seed is trainer.seed=N"
    )
    assert refused_when_run("+trainer.max_epochs=20") == (
        "+trainer.max_epochs: 'trainer' has no key 'max_epochs'; the number of epochs is "
        "trainer.epochs=N"
    )
    assert refused("+trainer=gpu") == dict(TEMPLATE_KEYS)["trainer=gpu"]


# `key=` in an equivalent's words: an override it tells the user to type.
NAMED_KEY = re.compile(r"(?<![\w.<-])([a-z_][\w.]*)=")


def test_every_equivalent_names_keys_and_options_this_config_has() -> None:
    configs = [
        compose_config(hydra=True),
        compose_config("dataset=cifar10"),  # a dataset with files: dataset.root
        compose_config(config_name="eval"),  # python eval.py ckpt=
    ]
    for said in TEMPLATE_EQUIVALENTS.values():
        for key in NAMED_KEY.findall(said):
            assert key in config_groups() or any(has(cfg, key) for cfg in configs), (
                f"{key}= in {said!r}"
            )
        for group, option in re.findall(r"\b(device|model)=([a-z]\w*)\b", said):
            assert option in group_options(group), f"{group}={option} in {said!r}"


def test_every_template_key_is_one_this_config_has_not() -> None:
    # Else its entry would never be consulted: the key would set something here.
    cfg = compose_config()
    for entry in TEMPLATE_EQUIVALENTS:
        key, _, option = entry.partition("=")
        if option:
            assert option not in group_options(key), entry
        else:
            assert key not in config_groups(), entry
            assert not has(cfg, key), entry


def has(cfg: DictConfig, key: str) -> bool:
    """Whether `cfg` has the dotted `key`, set or MISSING (eval.py's `ckpt`)."""
    section, _, name = key.rpartition(".")
    node = OmegaConf.select(cfg, section) if section else cfg
    # `in node` leaves MISSING values out.
    return isinstance(node, DictConfig) and name in node.keys()  # noqa: SIM118


@pytest.mark.parametrize(
    ("typed", "line"),
    [
        (
            ["experiment=device_scaling", "device=cpu"],
            "experiment=device_scaling is a sweep over trainer.batch_size, model.hidden_sizes: "
            "add -m (python train.py -m experiment=device_scaling)",
        ),
        (
            ["hparams_search=optuna"],
            "hparams_search=optuna is a sweep over optimizer, optimizer.lr, trainer.batch_size: "
            "add -m (python train.py -m hparams_search=optuna)",
        ),
    ],
)
def test_an_option_that_sweeps_is_refused_without_m(typed: list[str], line: str) -> None:
    with pytest.raises(ExperimentError, match=re.escape(line)):
        refuse_sweeps_without_multirun(typed)
    refuse_sweeps_without_multirun(["-m", *typed])
    refuse_sweeps_without_multirun(["--multirun", *typed])


def test_an_experiment_that_is_one_run_needs_no_m() -> None:
    refuse_sweeps_without_multirun(["experiment=lenet_cifar10", "experiment=tudui_cifar10"])


def test_a_replayed_job_of_a_sweep_is_one_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A job folder of `python train.py -m experiment=device_scaling`: its overrides name the
    # sweep's option, and its own values of what the sweep varied.
    job = tmp_path / "0_trainer.batch_size=32,model.hidden_sizes=[64]"
    (job / ".hydra").mkdir(parents=True)
    saved = ["experiment=device_scaling", "trainer.batch_size=32", "model.hidden_sizes=[64]"]
    OmegaConf.save(OmegaConf.create(saved), job / ".hydra" / "overrides.yaml")
    composed: list[list[str]] = []
    monkeypatch.setattr(sys, "argv", ["train.py", f"replay={job}"])
    _compose_and_run(lambda: composed.append(sys.argv[1:]), with_saved_overrides)
    (arguments,) = composed
    assert saved == arguments[:3]
    monkeypatch.setattr(sys, "argv", ["train.py", *saved])
    with pytest.raises(ExperimentError, match="is a sweep over"):
        _compose_and_run(lambda: composed.append(sys.argv[1:]), with_saved_overrides)


def test_a_sweep_without_m_stops_before_hydra_makes_a_folder(tmp_path: Path) -> None:
    done = train_cli(tmp_path, "experiment=device_scaling")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "Error: experiment=device_scaling is a sweep over trainer.batch_size, "
        "model.hidden_sizes: add -m (python train.py -m experiment=device_scaling)"
    ]
    assert not (tmp_path / "outputs").exists()
