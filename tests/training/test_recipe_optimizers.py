"""The reference recipes' optimizers: `optimizer=adamw`, `optimizer=rmsprop`, SGD's `nesterov`,
and weight decay that leaves normalization layers and biases out (`optimizer.norm_weight_decay`,
`bias_weight_decay`), each shown by what its step does to real parameters."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from experiments.config.validate import validate
from experiments.core.errors import ExperimentError
from experiments.training.optimizers import build_optimizer, decay_groups
from helpers import compose_config


def normed_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(16, 2))


def built(model: nn.Module, *overrides: str) -> torch.optim.Optimizer:
    optimizer, _ = build_optimizer(compose_config(*overrides).optimizer, model, "cpu")
    return optimizer


def decayed_step(model: nn.Module, *overrides: str) -> dict[str, torch.Tensor]:
    """Each parameter's change after one step with zero gradients: weight decay's alone."""
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    optimizer = built(model, *overrides)
    for parameter in model.parameters():
        parameter.grad = torch.zeros_like(parameter)
    optimizer.step()
    return {name: p.detach() - before[name] for name, p in model.named_parameters()}


def test_adamw_decays_the_weights_apart_from_the_gradient() -> None:
    model = normed_model()
    optimizer = built(model, "optimizer=adamw")
    assert type(optimizer) is torch.optim.AdamW
    assert optimizer.param_groups[0]["weight_decay"] == 0.01  # torch's default for AdamW
    # With no gradient, AdamW still shrinks each weight by lr x decay; Adam's decay goes into
    # the gradient, whose normalized step is then of the size of the lr, not of the decay.
    # (In float64: a change of 1e-5 of each weight, read to far below it.)
    changed = decayed_step(normed_model().double(), "optimizer=adamw")
    weight = normed_model().double()[3].weight.detach()
    assert torch.allclose(changed["3.weight"], -0.001 * 0.01 * weight)


def test_rmsprop_is_torchs_with_the_recipes_settings() -> None:
    optimizer = built(
        normed_model(), "optimizer=rmsprop", "optimizer.alpha=0.9", "optimizer.eps=0.0316"
    )
    assert type(optimizer) is torch.optim.RMSprop
    group = optimizer.param_groups[0]
    assert (group["lr"], group["alpha"], group["eps"]) == (0.01, 0.9, 0.0316)


def test_nesterovs_momentum_steps_otherwise_than_plain_momentum() -> None:
    def after_two_steps(*overrides: str) -> torch.Tensor:
        model = nn.Linear(3, 1)
        nn.init.constant_(model.weight, 1.0)
        optimizer = built(model, "optimizer=sgd_momentum", "optimizer.lr=0.1", *overrides)
        for _ in range(2):
            optimizer.zero_grad()
            model(torch.ones(1, 3)).sum().backward()
            optimizer.step()
        return model.weight.detach().clone()

    # Gradient 1 each step: plain momentum moves 0.1 then 0.19; Nesterov's 0.19 then 0.271.
    assert torch.allclose(after_two_steps(), torch.full((1, 3), 1 - 0.29))
    assert torch.allclose(after_two_steps("optimizer.nesterov=true"), torch.full((1, 3), 1 - 0.461))


def test_nesterov_without_momentum_is_refused_in_one_line() -> None:
    cfg = compose_config("optimizer.nesterov=true")
    with pytest.raises(ExperimentError) as error:
        validate(cfg)
    assert str(error.value) == (
        "optimizer.nesterov=true needs momentum: optimizer.momentum=0.0 (e.g. "
        "optimizer=sgd_momentum, or optimizer.momentum=0.9)"
    )


def test_norm_layers_and_biases_can_be_left_out_of_weight_decay() -> None:
    overrides = ("optimizer.lr=0.1", "optimizer.weight_decay=0.5")
    changed = decayed_step(
        normed_model(), *overrides, "optimizer.norm_weight_decay=0", "optimizer.bias_weight_decay=0"
    )
    weights = {name: p.detach() for name, p in normed_model().named_parameters()}
    for name in ("0.weight", "3.weight"):  # a convolution's and a linear layer's weights decay
        assert torch.allclose(changed[name], -0.1 * 0.5 * weights[name])
    for name in ("1.weight", "1.bias", "0.bias", "3.bias"):  # BatchNorm's, and the biases
        assert torch.equal(changed[name], torch.zeros_like(changed[name]))
    everything = decayed_step(normed_model(), *overrides)  # null: every parameter decays
    for name in ("1.weight", "0.bias", "3.bias"):  # (BatchNorm's bias starts at 0: stays there)
        assert torch.allclose(everything[name], -0.1 * 0.5 * weights[name])


def test_each_parameter_is_in_one_group_of_its_decay() -> None:
    model = normed_model()
    groups = decay_groups(nn.DataParallel(model), 0.1, 0.0, None)  # a wrapper holds the same
    assert [(len(group["params"]), group["weight_decay"]) for group in groups] == [
        (2, 0.0),  # BatchNorm's weight and bias
        (2, 0.1),  # the biases: bias_weight_decay null, the weight decay
        (2, 0.1),  # the convolution's and linear layer's weights
    ]
    grouped = [id(p) for group in groups for p in group["params"]]
    assert sorted(grouped) == sorted(id(p) for p in model.parameters())


@pytest.mark.parametrize("key", ["weight_decay", "norm_weight_decay", "bias_weight_decay"])
def test_a_negative_weight_decay_is_refused(key: str) -> None:
    with pytest.raises(ExperimentError, match=rf"^optimizer\.{key}=-1\.0 must be a number >= 0"):
        validate(compose_config(f"optimizer.{key}=-1"))
