"""Layer 7, callbacks: the concerns of a training run, each plugged into the trainer's hooks
(`base.Callback`) instead of a branch in it. The shipped ones, in the order the trainer calls
them, each on or off by its setting:

    Speed             each epoch's host load; compile seconds (trainer.compile)      always
    Utilization       the devices' peak, each epoch's and the run's MFU              always
    Energy            each epoch's and the run's energy, where a counter reads it    always
    Profiler          torch.profiler over the first epoch's first steps     trainer.profile
    EarlyStopping     stops when the monitored metric stalls   trainer.early_stopping.patience
    Checkpoints       last.pt and best.pt                                            always
    Console           the run's first line and each epoch's                          always
    TimeToTarget      the seconds to a metric's target                     trainer.target_*
    ConfusionMatrix   the selected epoch's, drawn                  trainer.confusion_matrix
    Hyperparameters   the trackers' HParams row                                      always

then the user's own, from the `callbacks` config (`callbacks.<name>._target_`), in its order.
Imports every layer below; only `run` imports it."""

from __future__ import annotations

from collections.abc import Sequence

from omegaconf import DictConfig

from experiments.callbacks.base import Callback, EpochEnd, Fields, Progress, TrainingRun
from experiments.callbacks.checkpoints import Checkpoints
from experiments.callbacks.confusion_matrix import ConfusionMatrix
from experiments.callbacks.console import Console
from experiments.callbacks.early_stopping import EarlyStopping
from experiments.callbacks.energy import Energy
from experiments.callbacks.hyperparameters import Hyperparameters
from experiments.callbacks.profiler import Profiler
from experiments.callbacks.speed import Speed
from experiments.callbacks.time_to_target import TimeToTarget
from experiments.callbacks.utilization import Utilization
from experiments.config.build import build, check_importable
from experiments.core.errors import ExperimentError
from experiments.records.metrics import MetricsWriter

__all__ = ["Callback", "EpochEnd", "Fields", "Progress", "TrainingRun", "callbacks_for"]


def callbacks_for(
    cfg: DictConfig, metrics_writer: MetricsWriter, overrides: Sequence[str], swept: Sequence[str]
) -> list[Callback]:
    """The run's callbacks: the shipped ones its settings turn on, then the user's own;
    `metrics_writer` sends on what they draw, `overrides` and `swept` (the command line's, and the
    columns its sweep varies) are what the HParams row shows."""
    trainer = cfg.trainer
    on = {
        Profiler: trainer.profile,
        EarlyStopping: trainer.early_stopping.patience is not None,
        TimeToTarget: trainer.target_accuracy is not None or trainer.target_value is not None,
    }
    shipped: list[Callback] = [
        Speed(),
        Utilization(),
        Energy(),
        *([Profiler()] if on[Profiler] else []),
        *([EarlyStopping()] if on[EarlyStopping] else []),
        Checkpoints(),
        Console(),
        *([TimeToTarget()] if on[TimeToTarget] else []),
        *([ConfusionMatrix(metrics_writer)] if trainer.confusion_matrix else []),
        Hyperparameters(metrics_writer, overrides, swept),
    ]
    return shipped + [_own(name, spec) for name, spec in cfg.get("callbacks", {}).items()]


def _own(name: str, spec: DictConfig) -> Callback:
    """The callback of one's own `callbacks.<name>` builds, refused in one line unless it is one."""
    target = spec.get("_target_") if isinstance(spec, DictConfig) else None
    if target is None:
        raise ExperimentError(
            f"callbacks.{name}={spec} names no class: give callbacks.{name}._target_="
            "<module>.<class>, a subclass of experiments.callbacks.Callback"
        )
    named = check_importable(f"callbacks.{name}._target_", target)
    if not (isinstance(named, type) and issubclass(named, Callback)):
        raise ExperimentError(
            f"callbacks.{name}._target_={target} is not a callback: subclass "
            "experiments.callbacks.Callback"
        )
    try:
        return build(spec)
    except TypeError as error:  # its arguments: callbacks.<name>.<argument>=...
        raise ExperimentError(f"callbacks.{name}: {error}") from None
