"""Bad input: one clear line, a non-zero exit, no traceback, and a failed run recorded as such."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hydra.errors import ConfigCompositionException

from experiments.core.errors import ExperimentError, one_line
from experiments.run.train import train
from helpers import QUICK, compose_config, env_with_tests_on_path, results, train_cli

# Hydra refuses these while composing the config, before a run folder exists.
COMPOSITION_ERRORS = [
    (
        "device=gpu",
        "Error: device=gpu is not an option of 'device'; a GPU is device=cuda (device=cuda:N for "
        "another one)",
    ),
    (
        "model=resnet",
        "Error: model=resnet is not an option of 'model'; "
        "choose one of: custom, lenet, mlp, network, timm, torchvision, tudui, unet (a torchvision "
        "architecture is model=torchvision model.arch=resnet; or did you mean lenet or unet?)",
    ),
    (
        "dataset=imagenet",
        "Error: dataset=imagenet is not an option of 'dataset'; choose one of: cifar10, "
        "cifar10_sample, csv, custom, fashion_mnist, image_folder, mnist, mnist_sample, shapes, "
        "synthetic",
    ),
    (
        "placement=pin",
        "Error: placement=pin is not an option of 'placement'; choose one of: cuda_call, to_device",
    ),
    (
        "optimizer=lbfgs",
        "Error: optimizer=lbfgs is not an option of 'optimizer'; "
        "choose one of: adam, adamw, rmsprop, sgd, sgd_momentum",
    ),
    ("trainer=fast", "Error: trainer=fast is not an option of 'trainer'; choose one of: default"),
    (
        "experiment=resnet_cifar10",
        "Error: experiment=resnet_cifar10 is not an option of 'experiment'; "
        "choose one of: batch_scaling, device_scaling, lenet_cifar10, resnet_recipe, tudui_cifar10",
    ),
    (
        "trainer.epochs=[",
        "Error: malformed override 'trainer.epochs=[' (no viable alternative at input '['); "
        "overrides look like key=value, key=[a,b] or +new_key=value",
    ),
    (
        "trainer.epochs=ten",
        "Error: trainer.epochs=ten: Value 'ten' of type 'str' could not be converted to Integer",
    ),
    (
        "trainer.epoch=3",
        "Error: trainer.epoch=3: 'trainer' has no key 'epoch'; did you mean trainer.epochs?",
    ),
    (
        "+trainer.epochs=3",
        "Error: +trainer.epochs: trainer.epochs is there already; set it with trainer.epochs=... "
        "(+ adds a key)",
    ),
    (
        "model=tudui,lenet",
        "Error: model=tudui,lenet gives several values: to sweep over them, add -m (python "
        "train.py -m model=tudui,lenet); for one list value, write key=[a,b]",
    ),
    (
        "trainer.precision=bf17",
        "Error: trainer.precision=bf17: Invalid value 'bf17', expected one of [fp32, bf16, fp16]",
    ),
    (
        "dataset.preload=gpu",
        "Error: dataset.preload=gpu: Invalid value 'gpu', expected one of [host, device]",
    ),
    (
        "device=1",
        "Error: device=1 is not an option of 'device'; a GPU is device=cuda:N, here device=cuda:1",
    ),
    (
        "device=0,1",
        "Error: device=0,1 is not an option of 'device'; a GPU is device=cuda:N, here "
        "device=cuda:0,cuda:1",
    ),
    (
        "device=every",
        "Error: device=every runs one job per device: add -m (python train.py -m device=every)",
    ),
    (
        "model._target_=my_models.Net",
        "Error: model._target_=my_models.Net would build your class under the default model's "
        "name and fields; a model of your own is model=custom model._target_=my_models.Net",
    ),
    (
        "model=2",
        "Error: model=2 is not an option of 'model': options have names; python train.py --help "
        "lists them",
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize(("override", "line"), COMPOSITION_ERRORS)
def test_composition_errors_are_one_line(tmp_path: Path, override: str, line: str) -> None:
    done = train_cli(tmp_path, override)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [done.last_line]
    assert done.last_line.startswith(line)
    assert not (tmp_path / "outputs").exists()


# These fail once the run has started: its folder records `failed` and the reason.
RUN_ERRORS = [
    (
        ["device=cuda"],
        "device=cuda needs a CUDA GPU, but this machine has no CUDA GPU (torch found no CUDA "
        "GPU or driver); use device=cpu or device=auto",
    ),
    (["device=cuda:1"], "device=cuda:1 needs a CUDA GPU, but this machine has no CUDA GPU"),
    (
        ["device=dp", "device.ids=[0,1]"],
        "device=dp needs a CUDA GPU, but this machine has no CUDA GPU",
    ),
    (["trainer.epochs=0"], "trainer.epochs=0 must be a whole number >= 1"),
    (["trainer.batch_size=-8"], "trainer.batch_size=-8 must be "),
    # A field's own rule: the key and the value as typed (its words: the golden file's).
    (["trainer.limit_train_batches=0"], "trainer.limit_train_batches=0 must be "),
    (
        ["model=lenet", "dataset=synthetic", "dataset.image_size=8"],
        "model lenet cannot take dataset synthetic (3x8x8 images): "
        "its layers shrink 8x8 images to nothing",
    ),
    (["dataset=cifar10", "dataset.root=empty"], "CIFAR10 files not found in "),
    (["dataset=fashion_mnist", "dataset.root=empty"], "FashionMNIST files not found in "),
    (["+trainer.foo=1"], "+trainer.foo: 'trainer' has no key 'foo'; its keys are epochs, "),
    (
        ["trainer.monitor=test_accuracy"],
        "trainer.monitor=test_accuracy would pick the epoch on the test split: the test split "
        "would then no longer measure the model on images nothing was chosen by; monitor "
        "val_accuracy or val_top5_accuracy or val_loss (with dataset.val_fraction=0.1)",
    ),
    (
        ["trainer.monitor=val_acc"],
        "trainer.monitor=val_acc is not a metric it can monitor; choose val_accuracy or "
        "val_top5_accuracy or val_loss",
    ),
    (
        ["trainer.early_stopping.patience=3"],
        "trainer.early_stopping.patience=3 stops on trainer.monitor=val_accuracy, which needs a "
        "validation split: add dataset.val_fraction=0.1 (or a val/ folder to an image folder)",
    ),
    (
        ["dataset.val_fraction=1.0"],
        "dataset.val_fraction=1.0 must be in [0, 1): the share of the training images held out "
        "for validation",
    ),
    (
        ["dataset.val_fraction=0.999"],
        "dataset.val_fraction=0.999 would leave class airplane no training image (it has 396)",
    ),
    (["trainer.gradient_clip=0"], "trainer.gradient_clip=0.0 must be "),
    (
        ["scheduler=step", "scheduler.milestones=[0.5,2]"],
        "scheduler.milestones=[0.5, 2.0] must be ",
    ),
    (["trainer.target_accuracy=1.5"], "trainer.target_accuracy=1.5 must be "),
    (["trainer.accumulate_batches=0"], "trainer.accumulate_batches=0 must be a whole number >= 1"),
    (
        ["trainer.profile=true"],
        "trainer.profile=true records optimizer steps 3 to 5 of the first epoch, which has 3; "
        "give it 5 or more (trainer.limit_train_batches, trainer.accumulate_batches)",
    ),
    (["optimizer.lr=nan"], "optimizer.lr=nan is not a number: it must be "),
    (["optimizer.lr=-0.1"], "optimizer.lr=-0.1 must be "),
    (["trainer.seed=18446744073709551616"], "trainer.seed=18446744073709551616 must be "),
    (["trainer.gradient_clip=nan"], "trainer.gradient_clip=nan is not a number: it must be "),
    (["dataset.std=[0]"], "dataset.std=[0.0] must be "),
    (
        ["model=lenet", "optimizer.lr=1e6"],
        "diverged: train loss nan at epoch 1/2, step 3; lower optimizer.lr or set "
        "trainer.gradient_clip",
    ),
    (
        ["model=custom"],
        "model=custom needs model._target_=<module>.<name>, the class or function that builds "
        "your model, e.g. model._target_=my_models.Net (docs/configs.md)",
    ),
    (
        ["model=torchvision", "model.weights=nowhere.pt"],
        "model.weights=nowhere.pt: no such file",
    ),
    (
        ["device=dp", "trainer.compile=inductor"],
        "trainer.compile=inductor cannot compile device=dp's DataParallel (it copies the model "
        "to every GPU at every step); use device=ddp",
    ),
    (["optimizer=rmsprop", "optimizer.momentum=-1"], "optimizer.momentum=-1.0 must be "),
]


@pytest.mark.slow
@pytest.mark.parametrize(("overrides", "message"), RUN_ERRORS)
def test_run_errors_are_recorded_in_the_run_folder(
    tmp_path: Path, overrides: list[str], message: str
) -> None:
    cfg = compose_config(*QUICK[1:], *overrides)
    with pytest.raises(ExperimentError) as error:
        train(cfg, tmp_path)
    assert str(error.value).startswith(message) and "\n" not in str(error.value)
    result = results(tmp_path)
    assert (result["status"], result["reason"]) == ("failed", str(error.value))
    assert result["device"]["requested"] == next(
        (o.partition("=")[2] for o in overrides if o.startswith("device=")), "auto"
    )


@pytest.mark.slow
@pytest.mark.parametrize(("overrides", "message"), [RUN_ERRORS[0], RUN_ERRORS[9]])
def test_run_errors_are_one_line_on_the_command_line(
    tmp_path: Path, overrides: list[str], message: str
) -> None:
    done = train_cli(tmp_path, *QUICK[1:], *overrides)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr + done.stdout
    assert f"Error: {message}" in done.last_line
    assert results(done.run_dir)["reason"].startswith(message)
    assert message in (done.run_dir / "train.log").read_text()


def test_hydra_full_error_shows_the_traceback(tmp_path: Path) -> None:
    done = train_cli(tmp_path, "trainer.epochs=0", env={"HYDRA_FULL_ERROR": "1"})
    assert done.returncode == 1
    assert "Traceback" in done.stderr
    assert "trainer.epochs=0 must be a whole number >= 1" in done.stderr
    assert results(done.run_dir)["status"] == "failed"


def test_composition_errors_show_the_traceback_when_asked(tmp_path: Path) -> None:
    done = train_cli(tmp_path, "device=gpu", env={"HYDRA_FULL_ERROR": "1"})
    assert done.returncode == 1
    assert "Traceback" in done.stderr and "MissingConfigException" in done.stderr


@pytest.mark.slow
def test_an_unexpected_error_keeps_its_traceback_in_the_results(tmp_path: Path) -> None:
    done = train_cli(
        tmp_path,
        *QUICK,
        "model=custom",
        "model._target_=failing.FailsAtThirdStep",
        env=env_with_tests_on_path(),
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.last_line.endswith("Error: RuntimeError: deliberate failure in process 0")
    result = results(done.run_dir)
    assert result["status"] == "failed"
    assert "Traceback" in result["traceback"] and "failing.py" in result["traceback"]


def test_an_outputs_that_is_a_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "outputs").write_text("")
    done = train_cli(tmp_path, "device=cpu")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [done.last_line]
    assert re.fullmatch(
        r"Error: outputs is a file, not a folder, so the run folder outputs/[\w/-]+ cannot be made "
        r"in it; move the file away, or name another folder with hydra.run.dir= "
        r"\(hydra.sweep.dir= for -m\)",
        done.last_line,
    )


def test_a_sources_own_argument_without_plus_is_told_to_add_it() -> None:
    with pytest.raises(ConfigCompositionException) as error:
        compose_config("dataset=custom", "dataset.source.size=40")
    assert one_line(error.value) == (
        "dataset.source.size=40: 'dataset.source' has no key 'size'; a key of your own is added "
        "with +: +dataset.source.size=40"
    )


def test_a_model_config_of_ones_own_without_a_name_is_refused_in_one_line(
    tmp_path: Path,
) -> None:
    (tmp_path / "conf" / "model").mkdir(parents=True)
    (tmp_path / "conf" / "model" / "tiny.yaml").write_text("_target_: my_models.Tiny\nwidth: 8\n")
    cfg = compose_config(f"hydra.searchpath=[file://{tmp_path / 'conf'}]", "model=tiny", *QUICK)
    with pytest.raises(ExperimentError) as error:
        train(cfg, tmp_path)
    message = (
        "the model config has no name:, which names the model in records and reports; add "
        "name: <its name> to its YAML file (docs/configs.md)"
    )
    assert str(error.value) == message
    assert (results(tmp_path)["status"], results(tmp_path)["reason"]) == ("failed", message)
