"""Layer 7, callbacks: a training run's concerns (docs/callbacks.md); only `run` imports it."""

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
    """The shipped callbacks the run's settings turn on, in their order, then the user's own."""
    trainer = cfg.trainer
    targeted = trainer.target_accuracy is not None or trainer.target_value is not None
    shipped = [
        Speed(),
        Utilization(),
        Energy(),
        Profiler() if trainer.profile else None,
        EarlyStopping() if trainer.early_stopping.patience is not None else None,
        Checkpoints(),
        Console(),
        TimeToTarget() if targeted else None,
        ConfusionMatrix(metrics_writer) if trainer.confusion_matrix else None,
        Hyperparameters(metrics_writer, overrides, swept),
    ]
    own = [_own(name, spec) for name, spec in cfg.get("callbacks", {}).items()]
    return [each for each in shipped if each is not None] + own


def _own(name: str, spec: DictConfig) -> Callback:
    """The callback `callbacks.<name>` builds, refused in one line unless it is one."""
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
