"""The command line: `python train.py [overrides]` (or `experiments-train [overrides]`).

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
from datetime import datetime
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from experiments.config import new_tag, register_configs
from experiments.errors import one_line

log = logging.getLogger(__name__)

# Whether the user asked for tracebacks, read before `main` sets HYDRA_FULL_ERROR for itself.
TRACEBACKS = os.environ.get("HYDRA_FULL_ERROR") == "1"

# The project's `conf/` folder, two levels above this file (src/experiments/cli.py).
CONF_DIR = Path(__file__).resolve().parents[2] / "conf"

# torchrun's processes other than 0: no .hydra/ snapshot, no train.log, warnings and errors only.
WORKER_OVERRIDES = [
    "hydra.output_subdir=null",
    "hydra/job_logging=stdout",
    "hydra.job_logging.root.level=WARNING",
]


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="train")
def _train(cfg: DictConfig) -> float:
    # Imported here, not at the top, so `--help` and `--cfg job` never load torch.
    from experiments import distributed
    from experiments.train import train

    hydra_cfg = HydraConfig.get()
    in_sweep = hydra_cfg.mode == RunMode.MULTIRUN
    # Hydra's basic launcher runs jobs one after another; any other runs them side by side.
    side_by_side = in_sweep and not hydra_cfg.launcher._target_.endswith(".BasicLauncher")
    try:
        job_slot = hydra_cfg.job.num if side_by_side else None
        return train(cfg, Path(hydra_cfg.runtime.output_dir), job_slot)
    except Exception as error:
        log.error(
            "Error: %s",
            distributed.first_failure(distributed.Processes.from_env(), one_line(error)),
        )
        if TRACEBACKS:
            raise
        if in_sweep:
            # Recorded as failed in its folder; the sweep goes on, and its report says why.
            return math.nan
        raise SystemExit(1) from None


def main() -> None:
    # Hydra reports its own errors (unknown option, bad override, wrong type) over several lines;
    # asked for the full error, it raises instead, and we say it in one line.
    os.environ["HYDRA_FULL_ERROR"] = "1"
    try:
        register_configs(*_start_of_run())
        _train()
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
