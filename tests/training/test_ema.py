"""trainer.ema: the moving average of the weights, as computed by hand and by torch's own
`AveragedModel`; updated after optimizer steps, not batches; what a run evaluates, selects and
saves, and what eval.py evaluates of it; a resume that goes on exactly."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn
from torch.optim import SGD
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

from experiments.core.errors import ExperimentError
from experiments.data.batches import Batches
from experiments.data.types import Split
from experiments.devices import process_settings
from experiments.records import checkpoints, resume_checks
from experiments.run.train import train
from experiments.training import loop
from experiments.training.ema import ModelAverage
from experiments.training.tasks import Classification
from helpers import (
    SMALL,
    compose_config,
    eval_cli,
    numbers,
    on,
    results,
    train_cli,
    trained_run,
)


def weights_of(model: nn.Module) -> dict[str, torch.Tensor]:
    return {name: tensor.clone() for name, tensor in model.state_dict().items()}


def four_batches() -> Batches:
    generator = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (16, 3, 4, 4), generator=generator, dtype=torch.uint8)
    labels = torch.randint(0, 3, (16,), generator=generator)
    return Batches(Split(images, labels), batch_size=4, mean=[0.5], std=[0.5], runtime=on())


def test_the_average_follows_optimizer_steps_not_batches_as_computed_by_hand() -> None:
    # Four batches, two to a step: two optimizer steps, and the average of decay 0.5 is
    # 0.25 * w0 + 0.25 * w1 + 0.5 * w2 of the weights as built (w0) and after each step.
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 4 * 4, 3))
    ema = ModelAverage(model, decay=0.5)
    optimizer = SGD(model.parameters(), lr=0.5)
    learner = loop.Learner(model, Classification(), optimizer, accumulate_batches=2, ema=ema)
    seen = [weights_of(model)]
    loop.train_epoch(
        learner,
        four_batches(),
        on(),
        log_interval=1,
        log_step=lambda *_: None,
        description="epoch",
        after_step=lambda step: seen.append(weights_of(model)),
    )
    assert ema.steps == 2 and len(seen) == 3
    for name, averaged in ema.average.state_dict().items():
        by_hand = 0.25 * seen[0][name] + 0.25 * seen[1][name] + 0.5 * seen[2][name]
        torch.testing.assert_close(averaged, by_hand, rtol=1e-6, atol=1e-7)
        assert not torch.equal(averaged, model.state_dict()[name])


def test_the_average_is_torchs_averaged_model_of_its_ema_function() -> None:
    # A model with BatchNorm: its running statistics are averaged with the weights, as
    # AveragedModel(use_buffers=True) averages them (the count of batches is copied, not
    # averaged).
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))
    ema = ModelAverage(model, decay=0.9)
    torchs = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.9), use_buffers=True)
    torchs.update_parameters(model)  # its first update copies: ours starts as the model
    optimizer = SGD(model.parameters(), lr=0.1)
    for _ in range(5):
        optimizer.zero_grad()
        model(torch.randn(8, 5)).square().mean().backward()
        optimizer.step()
        ema.step()
        torchs.update_parameters(model)
    ours, theirs = ema.average.state_dict(), torchs.module.state_dict()
    assert ours.keys() == theirs.keys()
    for name, tensor in ours.items():
        if tensor.is_floating_point():
            assert torch.equal(tensor, theirs[name]), name
    # (The first layer's bias, which BatchNorm cancels, gets no gradient.)
    differs = {
        name for name, tensor in ours.items() if not torch.equal(tensor, model.state_dict()[name])
    }
    assert {"0.weight", "1.weight", "1.running_mean", "1.running_var", "3.bias"} <= differs
    assert ours["1.num_batches_tracked"] == model.state_dict()["1.num_batches_tracked"] == 5


@pytest.mark.gpu
def test_on_a_gpu_the_average_follows_without_waiting_for_the_device() -> None:
    # With CUDA's sync debug mode at "error", an update that waited for the device (as torch's
    # AveragedModel does, reading its count of updates) would raise. The average is the one the
    # CPU computes of the same weights.
    cuda = torch.device("cuda")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2)).to(cuda)
    ema = ModelAverage(model, decay=0.9, warmup_steps=3)
    on_host = nn.Sequential(nn.Linear(5, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))
    on_host.load_state_dict(model.state_dict())
    host_ema = ModelAverage(on_host, decay=0.9, warmup_steps=3)
    optimizer = SGD(model.parameters(), lr=0.1)
    for _ in range(5):
        optimizer.zero_grad()
        model(torch.randn(8, 5, device=cuda)).square().mean().backward()
        optimizer.step()
        torch.cuda.set_sync_debug_mode("error")
        try:
            ema.step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
        on_host.load_state_dict(model.state_dict())
        host_ema.step()
    assert all(
        tensor.device == model[0].weight.device for tensor in ema.state_dict()["weights"].values()
    )
    for name, tensor in host_ema.average.state_dict().items():
        torch.testing.assert_close(ema.average.state_dict()[name].cpu(), tensor)


def set_weight(model: nn.Linear, value: float) -> None:
    with torch.no_grad():
        model.weight.fill_(value)


def test_every_n_steps_keeps_the_decay_to_the_n_and_the_warm_up_raises_it_linearly() -> None:
    model = nn.Linear(1, 1, bias=False)
    set_weight(model, 0.0)
    ema = ModelAverage(model, decay=0.9, every=2)
    set_weight(model, 1.0)
    ema.step()  # step 1: no update
    assert ema.average.weight.item() == 0.0
    ema.step()  # step 2: 0.9 ** 2 of the average kept
    assert ema.average.weight.item() == pytest.approx(1 - 0.81)

    warmed = ModelAverage(model, decay=0.9, warmup_steps=4)
    assert [warmed.decay_at(step) for step in (1, 2, 4, 5)] == pytest.approx(
        [0.225, 0.45, 0.9, 0.9]
    )
    set_weight(model, 2.0)
    warmed.step()  # from 1.0 toward 2.0, keeping 0.225
    assert warmed.average.weight.item() == pytest.approx(0.225 * 1.0 + 0.775 * 2.0)


EMA = ("trainer.ema.decay=0.9", "dataset.val_fraction=0.1", "optimizer.lr=0.1")


@pytest.fixture(scope="module")
def ema_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return trained_run(tmp_path_factory.mktemp("ema"), *SMALL, *EMA)


def test_a_run_evaluates_and_saves_the_average_and_eval_evaluates_it(
    ema_run: Path, tmp_path: Path
) -> None:
    recorded = results(ema_run)
    assert recorded["evaluated_weights"] == "ema"
    best = checkpoints.load(ema_run / checkpoints.BEST)
    assert best["ema"]["steps"] == 2
    assert any(
        not torch.equal(tensor, best["ema"]["weights"][name])
        for name, tensor in best["model"].items()
    )
    # eval.py evaluates the average: the run's test loss again (on the same 64 images, in other
    # batches); the model's own weights, in the same checkpoint without its average, score
    # another.
    evaluated = eval_cli(tmp_path, f"ckpt={ema_run}", "device=cpu")
    assert evaluated.returncode == 0, evaluated.stderr
    assert results(evaluated.run_dir)["evaluated_weights"] == "ema"
    averaged = results(evaluated.run_dir)["test_loss"]
    assert averaged == pytest.approx(recorded["test_loss"], rel=1e-6)
    own = tmp_path / "model.pt"
    checkpoints.save(own, {**best, "ema": None})
    evaluated = eval_cli(tmp_path / "own", f"ckpt={own}", "device=cpu")
    assert results(evaluated.run_dir)["evaluated_weights"] == "model"
    model_loss = results(evaluated.run_dir)["test_loss"]
    assert abs(model_loss - recorded["test_loss"]) > max(
        1e-4, 100 * abs(averaged - recorded["test_loss"])
    )


def test_a_resume_goes_on_with_the_same_average_bit_for_bit(tmp_path: Path) -> None:
    # Two batches to a step, the average updated every other step after a warm-up: one epoch,
    # resumed for a second, ends as two epochs straight through.
    run = (
        "model=lenet",
        "device=cpu",
        "dataset=synthetic",
        "dataset.train_size=96",
        "dataset.test_size=16",
        "trainer.batch_size=16",
        "trainer.accumulate_batches=2",
        "trainer.confusion_matrix=false",
        "trainer.ema.decay=0.8",
        "trainer.ema.every=2",
        "trainer.ema.warmup_steps=3",
    )
    resumed = tmp_path / "resumed"
    with process_settings.restored():
        train(compose_config(*run, "trainer.epochs=2"), tmp_path / "whole")
        train(compose_config(*run, "trainer.epochs=1"), resumed)
        train(compose_config(*run, "trainer.epochs=2", f"resume={resumed}"), resumed)
    whole = checkpoints.load(tmp_path / "whole" / checkpoints.LAST)["ema"]
    again = checkpoints.load(resumed / checkpoints.LAST)["ema"]
    assert whole["steps"] == again["steps"] == 6
    assert whole["weights"].keys() == again["weights"].keys()
    assert all(
        torch.equal(whole["weights"][name], again["weights"][name]) for name in whole["weights"]
    )
    assert numbers(resumed) == numbers(tmp_path / "whole")


def test_a_resume_neither_begins_nor_drops_the_average(ema_run: Path) -> None:
    checkpoint = checkpoints.load(ema_run / checkpoints.LAST)
    run = str(ema_run)
    resume_checks.refuse_other_average(checkpoint, run, 0.99)  # (another decay: KEPT_SETTINGS)
    with pytest.raises(ExperimentError) as refused:
        resume_checks.refuse_other_average(checkpoint, run, None)
    assert str(refused.value) == (
        f"resume={run}: it was trained with trainer.ema.decay=0.9, its epochs evaluated and "
        "selected by the moving average of its weights; resume with it (leave trainer.ema.decay "
        f"out), or start a new run without it with replay={run} trainer.ema.decay=null"
    )
    with pytest.raises(ExperimentError) as refused:
        resume_checks.refuse_other_average({**checkpoint, "ema": None}, run, 0.9)
    assert str(refused.value) == (
        f"resume={run}: it was trained without a moving average of its weights, which cannot "
        f"begin part-way (trainer.ema.decay=0.9); resume without it, or start a new run with it "
        f"with replay={run} trainer.ema.decay=0.9"
    )


def test_a_checkpoint_whose_average_is_not_a_runs_is_refused(ema_run: Path, tmp_path: Path) -> None:
    altered = tmp_path / "altered.pt"
    checkpoints.save(altered, {**checkpoints.load(ema_run / checkpoints.LAST), "ema": "weights"})
    with pytest.raises(ExperimentError) as refused:
        checkpoints.load(altered)
    assert str(refused.value) == (
        f"checkpoint {altered} is not one of this tool's: its ema is a string ('weights'), where "
        "a run saves its average's weights and steps; it was altered, and was not used"
    )


def test_an_average_the_run_would_never_update_is_refused(tmp_path: Path) -> None:
    done = train_cli(tmp_path, *SMALL, "trainer.ema.decay=0.9", "trainer.ema.every=3")
    assert done.returncode == 1
    line = (
        "trainer.ema.every=3 updates the average of the weights every 3 optimizer steps, and the "
        "run takes 2 (1 epoch of 2): it would evaluate the weights as built; use "
        "trainer.ema.every=2 or fewer"
    )
    assert done.last_line.endswith(f"] Error: {line}")
    assert results(done.run_dir)["status"] == "failed"
    assert results(done.run_dir)["reason"] == line
