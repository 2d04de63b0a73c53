"""hydra/launcher=slurm: each sweep job a SLURM job through submitit, sized to the job.

submitit's Hydra launcher asks every job of a sweep for what its config says once; this one asks
each job for what its own `device=` and threads need (a CPU job no GPU, a DDP job one per task),
checks that against the partition before submitting, and watches the queue itself: a job SLURM
will never start, or that ended without a result, is one line instead of a wait without end."""

from __future__ import annotations

import contextlib
import io
import logging
import math
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, filter_overrides
from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import (
    SlurmLauncher as SubmititSlurmLauncher,
)
from omegaconf import DictConfig, OmegaConf, open_dict

from experiments.cli.slurm_partition import JobRequest, Partition, read_partition, refusal
from experiments.config.choices import DeviceName
from experiments.config.parallel_jobs import WORKER_OVERRIDES
from experiments.config.paths import as_value
from experiments.config.training_checks import batch_not_shared_evenly
from experiments.core import interrupts
from experiments.core.errors import ExperimentError
from experiments.core.text import display_path
from experiments.devices.slurm_request import gpus_to_ask

log = logging.getLogger("experiments")

NO_SLURM = (
    "hydra/launcher=slurm submits jobs with sbatch, which this machine lacks: run the sweep "
    "where SLURM is (a cluster's login node), or here with hydra/launcher=submitit_local"
)
# The signal submitit has SLURM send a job before its end (`--signal=USR2@signal_delay_s`):
# preempted, or near its time limit.
PREEMPTED = signal.SIGUSR2
# Without a setting, a job asks for its trainer.threads, else as many CPUs as this.
DEFAULT_CPUS = 2
POLL_SECONDS = 1.0
# How long a job's result file may take to be seen after the job left the queue (a shared
# file system's lag) before the job counts as ended without one.
RESULT_GRACE_SECONDS = 30.0
# A job pending for one of these waits for good: no node of the cluster can ever run it.
NEVER_STARTS = {
    "PartitionConfig": "no node of the partition has what it asks for",
    "PartitionNodeLimit": "it asks for more nodes than the partition has",
    "PartitionTimeLimit": "its time limit is over the partition's",
    "BadConstraints": "no node meets its constraints",
    "InvalidAccount": "its account is not one of the cluster's",
    "InvalidQOS": "its QOS is not one of the cluster's",
}
# squeue's states of a job still to run or running; one gone from squeue has ended.
IN_QUEUE = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED"}


class SizedSlurmLauncher(SubmititSlurmLauncher):
    """Each job submitted alone, asking for what its own config needs."""

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence[JobReturn]:
        import submitit  # only where a sweep runs on SLURM

        assert self.config is not None and self.hydra_context is not None
        if shutil.which("sbatch") is None:
            raise ExperimentError(NO_SLURM)
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        partition = read_partition(self.params.get("partition"))
        executor = submitit.AutoExecutor(
            folder=self.params["submitit_folder"],
            cluster="slurm",
            slurm_max_num_timeout=self.params.get("max_num_timeout", 0),
        )
        log.info("SLURM sweep: %s", sweep_dir)
        # Every job checked before any is submitted: none is left running for a sweep refused.
        requests = [self._request(list(overrides), partition) for overrides in job_overrides]
        sweep_dir.mkdir(parents=True, exist_ok=True)
        jobs: list[Any] = []
        for number, (overrides, request) in enumerate(
            zip(job_overrides, requests, strict=True), start=initial_job_idx
        ):
            log.info("\t#%d : %s (%s)", number, " ".join(filter_overrides(overrides)), request)
            executor.update_parameters(**self._parameters(request))
            arguments = (list(overrides), "hydra.sweep.dir", number, f"job_id_for_{number}")
            try:
                with _sbatch_refusal_in_one_line():
                    jobs.append(executor.submit(self, *arguments, Singleton.get_state()))
            except ExperimentError:
                _cancel(jobs)
                raise
        return _wait(jobs)

    def __call__(
        self,
        sweep_overrides: list[str],
        job_dir_key: str,
        job_num: int,
        job_id: str,
        singleton_state: dict[type, Singleton],
    ) -> JobReturn:
        """The job, on its node; SLURM's warning that it is preempted or near its time limit
        ends it as an interruption would, and it is requeued to go on in its own folder."""
        import submitit

        interrupts.take_as_interrupt(PREEMPTED)
        # A DDP job's tasks run the job alike; process 0 alone keeps its snapshot and log.
        task_overrides = WORKER_OVERRIDES if submitit.JobEnvironment().global_rank else []
        try:
            return super().__call__(
                [*sweep_overrides, *task_overrides], job_dir_key, job_num, job_id, singleton_state
            )
        except interrupts.Terminated as stopped:
            if stopped.signal != PREEMPTED:
                raise
            run_dir = self._run_folder(sweep_overrides, job_num)
            resumed = _resumed(sweep_overrides, run_dir)
            self._requeue((resumed, job_dir_key, job_num, job_id, singleton_state), run_dir)
            raise

    def _run_folder(self, sweep_overrides: list[str], job_num: int) -> Path:
        """The job's folder, as Hydra's run_job names it (which leaves no trace of it)."""
        assert self.config is not None and self.hydra_context is not None
        job = self.hydra_context.config_loader.load_sweep_config(self.config, sweep_overrides)
        with open_dict(job.hydra.job):
            job.hydra.job.num = job_num
        HydraConfig.instance().set_config(job)  # what the folder's name may interpolate
        return Path(str(job.hydra.sweep.dir), str(job.hydra.sweep.subdir)).absolute()

    def _requeue(self, arguments: tuple[Any, ...], run_dir: Path) -> None:
        """This job submitted again as it stands, to resume from `run_dir`'s checkpoint."""
        import submitit
        from submitit.core.utils import DelayedSubmission, temporary_save_path

        from experiments.records.checkpoints import LAST  # loads torch: in a job only

        if not (run_dir / LAST).is_file():
            log.error(f"{display_path(run_dir)} saved no checkpoint: its job is not requeued")
            return
        job = submitit.JobEnvironment()
        if job.global_rank == 0:  # once for the job: process 0 stands for its tasks
            with temporary_save_path(job.paths.submitted_pickle) as saving:
                DelayedSubmission(self, *arguments).dump(saving)
            subprocess.run(["scontrol", "requeue", job.job_id], check=True, timeout=60)
        log.warning(f"SLURM job {job.job_id} requeued: it goes on in {display_path(run_dir)}")

    def _request(self, overrides: list[str], partition: Partition | None) -> JobRequest:
        """What this job asks for: the settings given, the rest from its own config."""
        assert self.config is not None and self.hydra_context is not None
        job = self.hydra_context.config_loader.load_sweep_config(self.config, overrides)
        given = self.params
        nodes = int(given.get("nodes") or 1)
        tasks = _tasks_per_node(job, nodes) or int(given.get("tasks_per_node") or 1)
        threads = OmegaConf.select(job, "trainer.threads", default=None)
        if given.get("gpus_per_node") is not None:
            gpus = int(given["gpus_per_node"])
            gpus_for = f"hydra.launcher.gpus_per_node={gpus}"
        else:
            node_gpus = partition.gpus if partition else 0
            gpus, gpus_for = gpus_to_ask(job.device, node_gpus, tasks), _device_text(job)
        request = JobRequest(
            nodes=nodes,
            tasks_per_node=tasks,
            cpus_per_task=given.get("cpus_per_task") or threads or DEFAULT_CPUS,
            gpus_per_node=gpus,
            mem_gb=given.get("mem_gb"),
            timeout_min=int(given.get("timeout_min") or 60),
            gpus_for=gpus_for,
        )
        why_not = _tasks_refusal(job, request) or (partition and refusal(request, partition))
        if why_not:
            raise ExperimentError(why_not)
        return request

    def _parameters(self, request: JobRequest) -> dict[str, Any]:
        """submitit's parameters for the job: the settings given, sized to `request`."""
        shared = set(OmegaConf.structured(BaseQueueConf).keys())
        left_out = {"submitit_folder", "max_num_timeout"}
        parameters = {
            key if key in shared else f"slurm_{key}": value
            for key, value in self.params.items()
            if key not in left_out and value is not None
        }
        parameters.update(
            nodes=request.nodes,
            tasks_per_node=request.tasks_per_node,
            cpus_per_task=request.cpus_per_task,
            gpus_per_node=request.gpus_per_node or None,  # none asked: no gres at all
        )
        return {key: value for key, value in parameters.items() if value is not None}


def _tasks_per_node(job: DictConfig, nodes: int) -> int | None:
    """The tasks on each node that the job's device.processes asks for (None: not asked)."""
    processes = OmegaConf.select(job, "device.processes", default=None)
    if processes is None or job.device.name != DeviceName.ddp:
        return None  # (device.processes with another device: each task refuses it)
    if processes % nodes:
        raise ExperimentError(
            f"device.processes={processes} does not divide among hydra.launcher.nodes={nodes}: "
            f"ask a multiple of {nodes}, or other nodes"
        )
    return int(processes // nodes)


def _tasks_refusal(job: DictConfig, request: JobRequest) -> str | None:
    """Why the job's tasks cannot train its model together (as each task would refuse it)."""
    tasks = request.nodes * request.tasks_per_node
    if job.device.name != DeviceName.ddp:
        if tasks == 1:
            return None
        return (
            f"hydra.launcher asks {request.nodes} node(s) x {request.tasks_per_node} task(s), "
            f"but {_device_text(job)} trains in one process; use device=ddp, or one task"
        )
    if uneven := batch_not_shared_evenly(job, tasks):
        given = f"hydra.launcher.nodes={request.nodes} x tasks_per_node={request.tasks_per_node}"
        return f"{uneven}: the job's {tasks} processes are its {given}"
    return None


def _resumed(overrides: list[str], run_dir: Path) -> list[str]:
    """The job's overrides, resuming its run in its folder, whose snapshot the resume keeps."""
    kept = [each for each in overrides if not each.startswith(("resume=", "hydra.output_subdir="))]
    return [*kept, f"resume={as_value(str(run_dir))}", "hydra.output_subdir=null"]


def _device_text(job: DictConfig) -> str:
    index = OmegaConf.select(job, "device.index", default=None)
    return f"device={job.device.name}" + ("" if index is None else f":{index}")


@contextlib.contextmanager
def _sbatch_refusal_in_one_line() -> Iterator[None]:
    """sbatch's refusal of a job (its last "error:" line) as one line."""
    from submitit.core.utils import FailedJobError

    try:
        with contextlib.redirect_stderr(io.StringIO()):  # submitit prints sbatch's refusal too
            yield
    except FailedJobError as error:
        said = [line for line in str(error).splitlines() if "error:" in line]
        reason = said[-1].split("error:", 1)[1].strip() if said else str(error).strip()
        raise ExperimentError(f"SLURM refused the job: {reason}") from None


def _wait(jobs: list[Any]) -> list[JobReturn]:
    """Each job's return once every one has ended, followed by its result file and squeue:
    submitit asks SLURM's accounting, which many small clusters keep none of, and then never
    learns that a job died. A job SLURM will never start cancels the sweep's jobs."""
    ended_at: dict[str, float] = {}
    while True:
        states = _queue_states([job.job_id for job in jobs])
        if states is None:
            time.sleep(POLL_SECONDS)
            continue
        for job in jobs:
            state, reason = states.get(job.job_id, ("", ""))
            if state == "PENDING" and reason in NEVER_STARTS:
                _cancel(jobs)
                raise ExperimentError(
                    f"SLURM will never start job {job.job_id} ({reason}: {NEVER_STARTS[reason]})"
                    "; its sweep's jobs are cancelled"
                )
            if state not in IN_QUEUE:
                ended_at.setdefault(job.job_id, time.monotonic())
        waiting = [job for job in jobs if not _has_results(job)]
        if all(
            time.monotonic() - ended_at.get(job.job_id, math.inf) > RESULT_GRACE_SECONDS
            for job in waiting
        ):
            return [_returned(job) for job in jobs]
        time.sleep(POLL_SECONDS)


def _has_results(job: Any) -> bool:
    return all(job.task(task).paths.result_pickle.exists() for task in range(job.num_tasks))


def _returned(job: Any) -> JobReturn:
    """Process 0's return; a job that left no result (cancelled, or killed) as a failed one."""
    if _has_results(job):
        return job.results()[0]
    log_file = job.task(0).paths.stderr
    failure = ExperimentError(
        f"SLURM job {job.job_id} ended without a result (cancelled, killed, or out of memory); "
        f"its log: {display_path(log_file)}"
    )
    return JobReturn(status=JobStatus.FAILED, _return_value=failure)


def _queue_states(job_ids: list[str]) -> dict[str, tuple[str, str]] | None:
    """squeue's state and reason of each job still known to it; None where squeue could not
    answer (a busy controller): no job is taken to have ended then."""
    done = subprocess.run(
        ["squeue", "-h", "-o", "%i|%T|%r", "-j", ",".join(job_ids)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0 and "Invalid job id" not in done.stderr:  # (every job has ended)
        return None
    rows = (line.split("|") for line in done.stdout.splitlines() if line.count("|") == 2)
    return {job_id: (state, reason) for job_id, state, reason in rows}


def _cancel(jobs: list[Any]) -> None:
    subprocess.run(["scancel", *(job.job_id for job in jobs)], capture_output=True, check=False)
