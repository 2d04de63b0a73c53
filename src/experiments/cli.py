"""The command lines: `python train.py` and `python eval.py` (also experiments-train and -eval).

Hydra composes the config from the project's `conf/` folder and makes the run folder; this module
turns every failure into one line on stderr and a non-zero exit. `HYDRA_FULL_ERROR=1` shows the
traceback instead. Under torchrun, all processes name the same run folder, and only process 0
writes Hydra's snapshot and the log file.
"""

from __future__ import annotations

import logging
import math
import os
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from experiments.config import new_tag, register_configs
from experiments.errors import ExperimentError, one_line

log = logging.getLogger(__name__)

# Whether the user asked for tracebacks, read before `main` sets HYDRA_FULL_ERROR for itself.
TRACEBACKS = os.environ.get("HYDRA_FULL_ERROR") == "1"

# The project's `conf/` folder, two levels above this file (src/experiments/cli.py).
CONF_DIR = Path(__file__).resolve().parents[2] / "conf"

# torchrun's processes other than 0: no .hydra/ snapshot, no train.log, warnings and errors only.
WORKER_OVERRIDES = ["hydra.output_subdir=null", "hydra/job_logging=worker"]


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="train")
def _train(cfg: DictConfig) -> float:
    # Imported here, not at the top, so `--help` and `--cfg job` never load torch.
    from experiments.train import train

    return _run_task(lambda run_dir, job_slot: train(cfg, run_dir, job_slot))


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="eval")
def _evaluate(cfg: DictConfig) -> float:
    from experiments.evaluate import evaluate

    return _run_task(lambda run_dir, job_slot: evaluate(cfg, run_dir))


def _run_task(task: Callable[[Path, int | None], float]) -> float:
    """Run one job in the folder Hydra made; a failure is logged in one line and ends the process
    with exit code 1 (in a sweep, the job is recorded as failed and the sweep goes on)."""
    from experiments import distributed

    hydra_cfg = HydraConfig.get()
    in_sweep = hydra_cfg.mode == RunMode.MULTIRUN
    # Hydra's basic launcher runs jobs one after another; any other runs them side by side.
    side_by_side = in_sweep and not hydra_cfg.launcher._target_.endswith(".BasicLauncher")
    try:
        return task(Path(hydra_cfg.runtime.output_dir), hydra_cfg.job.num if side_by_side else None)
    except Exception as error:
        processes = distributed.Processes.from_env()
        log.error("Error: %s", distributed.first_failure(processes, one_line(error)))
        if TRACEBACKS:
            raise
        if in_sweep:
            # Recorded as failed in its folder; the sweep goes on, and its report says why.
            return math.nan
        raise SystemExit(1) from None


def main() -> None:
    """`python train.py`: `resume=` and `replay=` bring back a run's own overrides first."""
    _command_line(_train, with_saved_overrides)


def evaluate_main() -> None:
    """`python eval.py`."""
    _command_line(_evaluate, lambda arguments: arguments)


def _command_line(
    hydra_main: Callable[[], object], expand: Callable[[list[str]], list[str]]
) -> None:
    # Hydra reports its own errors (unknown option, bad override, wrong type) over several lines;
    # asked for the full error, it raises instead, and we say it in one line.
    os.environ["HYDRA_FULL_ERROR"] = "1"
    try:
        sys.argv[1:] = expand(sys.argv[1:])
        register_configs(*_start_of_run())
        hydra_main()
    except KeyboardInterrupt:
        if TRACEBACKS:
            raise
        print("Interrupted", file=sys.stderr)
        sys.exit(130)
    except Exception as error:
        if TRACEBACKS:
            raise
        print(f"Error: {one_line(error)}", file=sys.stderr)
        sys.exit(1)


def _start_of_run() -> tuple[datetime, str]:
    """When the run started and its random tag: this process's, or torchrun's process 0's."""
    started, tag = datetime.now(), new_tag()
    if "WORLD_SIZE" not in os.environ:
        return started, tag
    from experiments import distributed  # loads torch: only under torchrun

    processes = distributed.Processes.from_env()
    if not processes.is_main:
        sys.argv += WORKER_OVERRIDES
    return distributed.agree_on_start(processes, started, tag)


def with_saved_overrides(arguments: list[str]) -> list[str]:
    """Expand `resume=<run folder>` and `replay=<run folder>` into that run's saved overrides.

    Both compose the run's config afresh from `.hydra/overrides.yaml` (against today's configs
    and schemas), followed by any other overrides given now (e.g. `trainer.epochs=20`). `resume`
    continues in the run's own folder; `replay` repeats the run in a new one.
    """
    for key in ("resume", "replay"):
        given = [argument for argument in arguments if argument.startswith(f"{key}=")]
        if not given:
            continue
        folder = Path(given[-1].partition("=")[2]).resolve()
        saved = folder / ".hydra" / "overrides.yaml"
        if not saved.is_file():
            raise ExperimentError(
                f"{key}={given[-1].partition('=')[2]} is not a run folder (it has no {saved.name} "
                "in .hydra/); give a folder under outputs/ that a run made"
            )
        previous = [
            str(override)
            for override in OmegaConf.load(saved)
            if not str(override).startswith(("resume=", "replay=", "hydra.run.dir="))
        ]
        others = [argument for argument in arguments if argument not in given]
        arguments = _last_of_each_key([*previous, *others, f"{key}={folder}"])
        if key == "resume":
            arguments.append(f"hydra.run.dir={folder}")
    return arguments


def _last_of_each_key(overrides: list[str]) -> list[str]:
    """Of overrides of the same key, keep the last (the one Hydra would apply), in its place."""
    keys = [override.partition("=")[0] for override in overrides]
    return [override for i, override in enumerate(overrides) if keys[i] not in keys[i + 1 :]]
