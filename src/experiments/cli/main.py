"""`python train.py` and `python eval.py`: every failure one line on stderr, a non-zero exit."""

from __future__ import annotations

import atexit
import gc
import logging
import os
import shlex
import sys
from collections.abc import Callable
from contextlib import nullcontext
from datetime import datetime
from importlib.util import find_spec
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from experiments.cli.folder_errors import run_folder_unmade
from experiments.cli.job_cores import own_cores
from experiments.cli.run_folder import Refused, config_copy
from experiments.config import overrides
from experiments.config.naming import planned_ahead
from experiments.config.parallel_jobs import PROCESS_PER_JOB, WORKER_OVERRIDES
from experiments.config.paths import with_paths_as_given
from experiments.config.renamed_keys import in_todays_keys
from experiments.config.store import CONFIG_PACKAGE, command_name, new_tag, register_configs
from experiments.config.sweep_order import with_repeats_interleaved
from experiments.config.validate import validate_command_line
from experiments.core import collection
from experiments.core.errors import one_line
from experiments.core.interrupts import end_as_the_signal_would, exit_code, reason, take_interrupts
from experiments.core.text import display_path
from experiments.devices.free_gpus import FreeGpus, this_machines_gpu_locks
from experiments.devices.process_group import ProcessGroup
from experiments.report.sweep_end import forget_unfinished_sweeps, report_unfinished_sweeps

log = logging.getLogger(__name__)

# The user's HYDRA_FULL_ERROR, kept for sweep workers: `_command_line` sets that one for Hydra.
USER_TRACEBACKS = "EXPERIMENTS_TRACEBACKS"


def tracebacks_asked() -> bool:
    return os.environ.get(USER_TRACEBACKS, os.environ.get("HYDRA_FULL_ERROR")) == "1"


class JobFailed(BaseException):
    """Ends the command after a job's failure was said; no Exception, so Hydra passes it on."""


class RunFailed(Exception):
    """The run's first failure, for torchrun's summary (its `@record` writes Exceptions only)."""


class CudaUnusable(BaseException):
    """Ends a sweep whose later jobs share this process, where CUDA is left unusable."""


def later_jobs_share_this_process(launcher_target: str) -> bool:
    """Whether the sweep's later jobs may run in this job's process: all but submitit's do."""
    return launcher_target not in PROCESS_PER_JOB


def sweep_stopped_by(cuda_error: str, job_number: int, run_dir: Path) -> str:
    return (
        f"CUDA cannot be used again in this process after job {job_number} "
        f"({display_path(run_dir)}) failed with {cuda_error}; the sweep stops here, its jobs "
        "left are not run (see its report): run them with a launcher that starts a process "
        "per job, hydra/launcher=submitit_local"
    )


@hydra.main(version_base="1.3", config_path=f"pkg://{CONFIG_PACKAGE}", config_name="train")
def _train(cfg: DictConfig) -> float | None:
    # Imported here so that `--help` and `--cfg job` never load torch.
    with collection.paused_then_frozen():
        from experiments.run.train import train

    return _run_job(
        lambda run_dir, free_gpus: train(cfg, run_dir, free_gpus),
        cfg,
        "trainer.threads",
        resumable=True,
    )


@hydra.main(version_base="1.3", config_path=f"pkg://{CONFIG_PACKAGE}", config_name="eval")
def _evaluate(cfg: DictConfig) -> float | None:
    with collection.paused_then_frozen():
        from experiments.run.evaluate import evaluate_checkpoint

    return _run_job(
        lambda run_dir, free_gpus: evaluate_checkpoint(cfg, run_dir, free_gpus), cfg, "threads"
    )


def _run_job(
    job: Callable[[Path, FreeGpus | None], float | None],
    cfg: DictConfig,
    threads_key: str,
    *,
    resumable: bool = False,
) -> float | None:
    """Run `job` in Hydra's folder (in a parallel sweep, on cores of its own: `threads_key` is
    where `cfg` sets its threads): a failure in one line ends the command, unless in a sweep."""
    from experiments.devices.distributed import kept_for_the_others

    with kept_for_the_others(ProcessGroup.from_env()):  # (after the failure is said)
        return _job_in_its_folder(job, cfg, threads_key, resumable)


def _job_in_its_folder(
    job: Callable[[Path, FreeGpus | None], float | None],
    cfg: DictConfig,
    threads_key: str,
    resumable: bool,
) -> float | None:
    from experiments.devices import process_settings
    from experiments.devices.distributed import first_failure, says_the_failure

    hydra_cfg = HydraConfig.get()
    in_sweep = hydra_cfg.mode == RunMode.MULTIRUN
    # Hydra's basic launcher runs jobs one after another; any other runs them side by side.
    side_by_side = in_sweep and not hydra_cfg.launcher._target_.endswith(".BasicLauncher")
    free_gpus = FreeGpus(this_machines_gpu_locks()) if side_by_side else None
    run_dir = Path(hydra_cfg.runtime.output_dir)
    value = None
    try:
        with (
            process_settings.isolated_job(free_gpus),
            own_cores(hydra_cfg, cfg, threads_key) if side_by_side else nullcontext(),
        ):
            value = job(run_dir, free_gpus)
    except KeyboardInterrupt as interrupt:  # Ctrl-C, or another signal taken as it
        if resumable and ProcessGroup.from_env().is_main:
            # Said after the interruption's line.
            interrupt.add_note(how_the_sweep_goes_on(hydra_cfg) or how_it_goes_on(run_dir))
        raise
    except Exception as error:
        group = ProcessGroup.from_env()
        reason = first_failure(group, error)
        if not in_sweep:
            if says_the_failure(group, reason):  # once (torchrun's summary says it too)
                log.error("Error: %s", reason)
            if tracebacks_asked():
                raise
            raise JobFailed(reason) from error
        # Recorded as failed in its folder; the sweep goes on, and its report says why.
        log.error("Error: %s", reason, exc_info=tracebacks_asked())
    cuda_error = process_settings.cuda_unusable()
    if in_sweep and cuda_error and later_jobs_share_this_process(hydra_cfg.launcher._target_):
        raise CudaUnusable(sweep_stopped_by(cuda_error, hydra_cfg.job.num, run_dir))
    return value


def how_the_sweep_goes_on(hydra_cfg: DictConfig) -> str | None:
    """The command that launches the interrupted sweep's jobs left; None outside one, or for a
    sweeper that plans no jobs ahead (Optuna's)."""
    if hydra_cfg.mode != RunMode.MULTIRUN or not planned_ahead(hydra_cfg):
        return None
    folder = display_path(Path(str(hydra_cfg.sweep.dir)))
    command = command_name(sys.argv[0])
    return f"the sweep in {folder} goes on with: {command} -m {shlex.quote(f'resume={folder}')}"


def how_it_goes_on(run_dir: Path) -> str:
    """The command that continues the interrupted run: resume=, or replay= with no checkpoint."""
    from experiments.records.checkpoints import LAST

    folder = display_path(run_dir)
    command = command_name(sys.argv[0])
    if (run_dir / LAST).is_file():
        return f"the run in {folder} goes on with: {command} {shlex.quote(f'resume={folder}')}"
    return (
        f"the run in {folder} saved no checkpoint to resume from; run it again with: {command} "
        f"{shlex.quote(f'replay={folder}')}"
    )


def main() -> None:
    _command_line(_train, _training_arguments)


def _training_arguments(typed: list[str]) -> list[str]:
    """The command line as Hydra is given it: today's keys, paths as given, a resumed run's own."""
    arguments = overrides.with_saved_overrides(with_paths_as_given(in_todays_keys(typed)))
    return with_repeats_interleaved(overrides.with_every_device(arguments, _every_device))


def _every_device() -> list[str]:
    from experiments.devices.plan import Machine, every_device  # loads torch: only for this

    machine = Machine.counted()
    devices = every_device(machine.cuda_count)
    named = ", ".join(devices) if len(devices) > 1 else f"{devices[0]} alone"
    print(f"device=every is {named} here: this machine has {machine.gpus()}", file=sys.stderr)
    return devices


def evaluate_main() -> None:
    _command_line(_evaluate, _evaluation_arguments)


def _evaluation_arguments(typed: list[str]) -> list[str]:
    """As `_training_arguments`, for eval.py: training's own keys refused, repeats by `seed`."""
    arguments = with_paths_as_given(overrides.evaluation_arguments(in_todays_keys(typed)))
    every_device = overrides.with_every_device(arguments, _every_device)
    return with_repeats_interleaved(every_device, seed="seed")


def _command_line(
    hydra_main: Callable[[], object], arguments: Callable[[list[str]], list[str]]
) -> None:
    tracebacks = tracebacks_asked()
    os.environ[USER_TRACEBACKS] = "1" if tracebacks else "0"
    take_interrupts()
    # A model of one's own here imports as under `python -m` (train.py puts only its own folder).
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    # Asked for the full error, Hydra raises it instead of saying it over several lines.
    os.environ["HYDRA_FULL_ERROR"] = "1"
    # A log line train.log cannot take (a full disk) is no traceback: the next write says it.
    logging.raiseExceptions = tracebacks
    # Frozen, torch's objects are skipped by the collections Python makes as it shuts down.
    atexit.unregister(gc.freeze)  # (registered once, however often the command runs in a process)
    atexit.register(gc.freeze)
    try:
        _recorded_by_torchrun(_compose_and_run)(hydra_main, arguments)
    except KeyboardInterrupt as interrupt:  # Ctrl-C, or another signal taken as it (SIGTERM)
        forget_unfinished_sweeps()
        if tracebacks:
            raise
        said = reason(interrupt)
        how = getattr(interrupt, "__notes__", [])  # how a training run goes on (`_run_job`)
        print("; ".join([said[0].upper() + said[1:], *how]), file=sys.stderr)
        end_as_the_signal_would(interrupt)  # SIGQUIT, SIGUSR1
        sys.exit(exit_code(interrupt))
    except (JobFailed, RunFailed):
        sys.exit(1)
    except (CudaUnusable, Refused, Exception) as error:
        # A sweep given up on (CUDA unusable, a worker killed) still gets its report.
        if not isinstance(error, Refused):
            report_unfinished_sweeps()
        if tracebacks:
            raise
        said_already = isinstance(error, (CudaUnusable, Refused))
        said = str(error) if said_already else run_folder_unmade(error, config_copy.folder)
        print(f"Error: {said or one_line(error)}", file=sys.stderr)
        sys.exit(1)


def _compose_and_run(
    hydra_main: Callable[[], object], arguments: Callable[[list[str]], list[str]]
) -> None:
    config_copy.folder = None  # (an earlier command's, in this process)
    typed = sys.argv[1:]
    sys.argv[1:] = arguments(typed)
    validate_command_line(typed, sys.argv[1:])
    register_configs(*_start_of_run())
    _register_plugins()
    hydra_main()


def _register_plugins() -> None:
    """hydra/sweeper=resume's and hydra/launcher=slurm's classes, named to Hydra, whose scan of
    its plugins can miss them (an editable install)."""
    from hydra.core.plugins import Plugins

    from hydra_plugins.experiments_sweeper import ResumingSweeper

    Plugins.instance().register(ResumingSweeper)
    if find_spec("hydra_plugins.hydra_submitit_launcher") is None:  # without the sweeps extra
        return
    from hydra_plugins.experiments_launcher import SlurmLauncher

    Plugins.instance().register(SlurmLauncher)


def _recorded_by_torchrun(function: Callable[..., None]) -> Callable[..., None]:
    """Under torchrun, `function` under `@record`, so that torchrun's summary names the failure."""
    if "TORCHELASTIC_ERROR_FILE" not in os.environ:
        return function
    from torch.distributed.elastic.multiprocessing.errors import record  # torch: under torchrun

    @record
    def recorded(*arguments: Callable[..., object]) -> None:
        try:
            function(*arguments)
        except JobFailed as failed:
            raise RunFailed(str(failed)) from failed.__cause__

    return recorded


def _start_of_run() -> tuple[datetime, str]:
    """When the run started and its tag: this process's, or process 0's of torchrun's or srun's."""
    started, tag = datetime.now(), new_tag()
    group = ProcessGroup.from_env()
    if group.world_size == 1:
        return started, tag
    from experiments.devices.distributed import agree_on_start  # loads torch: several processes

    if not group.is_main:
        sys.argv += WORKER_OVERRIDES
    return agree_on_start(group, started, tag)
