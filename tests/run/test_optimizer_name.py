"""An optimizer is named as what it is: its option's name, or, with another `_target_` set on the
command line, that class's name, in the log, results.json and TensorBoard's HParams alike."""

from __future__ import annotations

from pathlib import Path

import pytest
from tensorboard.plugins.hparams import metadata

from helpers import compose_config, plugin_data, read_events, results, train_cli


@pytest.mark.slow
@pytest.mark.parametrize(
    ("overrides", "name"),
    [
        (["optimizer=adam"], "adam"),
        (["optimizer=sgd_momentum"], "sgd_momentum"),
        # The option's own class, typed out: still the option.
        (["optimizer=sgd_momentum", "optimizer._target_=torch.optim.SGD"], "sgd_momentum"),
        (["optimizer=adam", "optimizer._target_=torch.optim.AdamW"], "AdamW"),
        (["optimizer._target_=torch.optim.ASGD"], "ASGD"),  # on the default, sgd
    ],
)
def test_an_optimizer_is_named_by_its_option_or_else_its_class(
    overrides: list[str], name: str
) -> None:
    assert compose_config(*overrides).optimizer.name == name


@pytest.mark.slow
def test_a_run_of_adamw_under_optimizer_adam_says_adamw_everywhere(tmp_path: Path) -> None:
    done = train_cli(
        tmp_path,
        "device=cpu",
        "model=lenet",
        "trainer.epochs=1",
        "trainer.limit_train_batches=2",
        "trainer.limit_eval_images=64",
        "optimizer=adam",
        "optimizer._target_=torch.optim.AdamW",
    )
    assert done.returncode == 0, done.stderr
    log = (done.run_dir / "train.log").read_text()
    assert "with to_device placement, AdamW, batch 64" in log
    assert "adam," not in log
    assert results(done.run_dir)["optimizer"] == "AdamW"
    start = plugin_data(read_events(done.run_dir), metadata.SESSION_START_INFO_TAG)
    assert start.session_start_info.hparams["optimizer"].string_value == "AdamW"
