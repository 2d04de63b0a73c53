"""`tracker=mlflow`: an MLflow run per training run, through MLflow's own client, to
`tracker.mlflow.tracking_uri`, else `MLFLOW_TRACKING_URI`, else `outputs/mlflow.db`."""

from __future__ import annotations

import io
import logging
import math
import os
import time
from collections.abc import Callable, Collection, Mapping
from pathlib import Path

from mlflow.entities import Metric, Param, RunStatus
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient
from mlflow.tracking.context.registry import resolve_tags
from PIL import Image

from experiments.config.schemas import TRACKER_TIMEOUT
from experiments.core.files import locked
from experiments.records import confusion
from experiments.records.guard import Guard, Result
from experiments.records.hparams import METRICS_GROUP, Hyperparameters, Numbers
from experiments.records.tracker import EPOCH_ROW_TAG, ROW_TAGS, Logged, TrackedRun, final_numbers

log = logging.getLogger("experiments")

# MLflow's limits on one call (mlflow.utils.validation) and on a parameter's value.
PARAMS_PER_CALL = 100
METRICS_PER_CALL = 1000
LONGEST_PARAMETER = 6000
# How long logged steps wait to be sent together: each SQLite write is a transaction of its own.
SEND_EVERY_SECONDS = 5.0
PICTURE_TAGS = (confusion.TAG,)
# MLflow's loggers, which would say amid the run's lines what it does and what failed.
LOGGERS = ("mlflow", "alembic")


class MlflowRun:
    """One run folder's MLflow run (a `records.tracker.ReadBack`)."""

    record = "the MLflow run"

    def __init__(
        self,
        run_dir: Path,
        tracking_uri: str | None = None,
        experiment: str = "runs",
        timeout: float = TRACKER_TIMEOUT,
    ) -> None:
        outputs = Path.cwd() / "outputs"
        uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
        self._artifacts: str | None = None
        store_lock = None
        if not uri:
            outputs.mkdir(exist_ok=True)
            uri = f"sqlite:///{outputs / 'mlflow.db'}"
            self._artifacts = (outputs / "mlartifacts").as_uri()
            store_lock = outputs / "mlflow.db.lock"
        self.uri = uri
        self.experiment = experiment
        # One try of each request, as long as the run waits for it (MLflow's defaults take minutes).
        http = {
            "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
            "MLFLOW_HTTP_REQUEST_TIMEOUT": str(max(1, math.ceil(timeout))),
        }
        self._guard = Guard(f"MLflow ({self.uri})", timeout, LOGGERS, http)
        # Made in the guard: a store MLflow cannot open fails here, as a file store does.
        self.client: MlflowClient | None = self._guard(lambda: _client(uri, store_lock, timeout))
        self.run_id: str | None = None
        self._carried_on = False  # a run begun by an earlier process (`resume=`)
        self._pending: list[Metric] = []  # logged, not yet sent
        self._sent_at = time.monotonic()

    def begin(self, run: TrackedRun) -> str | None:
        experiment = run.group or self.experiment

        def started(client: MlflowClient) -> str:
            if run.resumed_id is not None:
                client.update_run(run.resumed_id, status=RunStatus.to_string(RunStatus.RUNNING))
                self._carried_on = True
                return run.resumed_id
            experiment_id = self._experiment_id(client, experiment)
            tags = resolve_tags(run.tags)  # with MLflow's own: user, script, git commit
            created = client.create_run(experiment_id, run_name=run.name, tags=tags)
            parameters = [
                Param(key, str(value)[:LONGEST_PARAMETER]) for key, value in run.parameters.items()
            ]
            for first in range(0, len(parameters), PARAMS_PER_CALL):
                chunk = parameters[first : first + PARAMS_PER_CALL]
                client.log_batch(created.info.run_id, params=chunk)
            return created.info.run_id

        self.run_id = self._guarded(started, needs_run=False)
        if self.run_id is not None:
            log.info("MLflow: run %s of experiment %s in %s", run.name, experiment, self.uri)
        return self.run_id

    def logged(self, through: int) -> Logged | None:
        """All it holds, those after `through` too (MLflow drops none); None for a run begun now."""

        def held(client: MlflowClient) -> Logged:
            folders = {tag.rpartition("/")[0] for tag in PICTURE_TAGS}
            ends = {
                artifact.path.removesuffix(".png")
                for folder in folders
                for artifact in client.list_artifacts(self.run_id, folder)
            }
            metrics = client.get_run(self.run_id).data.metrics
            if any(key.startswith(f"{METRICS_GROUP}/") for key in metrics):
                ends.add("hparams")
            steps, epochs = (
                {metric.step for metric in client.get_metric_history(self.run_id, tag)}
                for tag in ROW_TAGS
            )
            return Logged(steps, epochs, ends)

        return self._guarded(held) if self._carried_on else None

    def scalars(self, values: Mapping[str, float], step: int) -> None:
        self._log(values, step)
        if EPOCH_ROW_TAG in values or time.monotonic() - self._sent_at >= SEND_EVERY_SECONDS:
            self._send()

    def hyperparameters(
        self, hyperparameters: Hyperparameters, numbers: Numbers, step: int, swept: Collection[str]
    ) -> None:
        """Its final numbers and the model's size (its parameters, the config, came first)."""
        final = final_numbers(hyperparameters, numbers)
        self._log({name: value for name, value in final.items() if value is not None}, step)
        self._send()

    def picture(self, tag: str, png: bytes, size: tuple[int, int, int], step: int) -> None:
        def logged(client: MlflowClient) -> None:
            with Image.open(io.BytesIO(png)) as image:
                client.log_image(self.run_id, image, artifact_file=f"{tag}.png")

        self._guarded(logged)

    def close(self, status: str) -> None:
        self._send()
        ended = {"completed": RunStatus.FINISHED, "interrupted": RunStatus.KILLED}
        mlflow_status = RunStatus.to_string(ended.get(status, RunStatus.FAILED))
        self._guarded(lambda client: client.set_terminated(self.run_id, mlflow_status))

    def _log(self, values: Mapping[str, float], step: int) -> None:
        now = int(time.time() * 1000)
        self._pending += [Metric(tag, float(value), now, step) for tag, value in values.items()]

    def _send(self) -> None:
        pending, self._pending = self._pending, []
        self._sent_at = time.monotonic()
        for first in range(0, len(pending), METRICS_PER_CALL):
            chunk = pending[first : first + METRICS_PER_CALL]
            self._guarded(lambda client, chunk=chunk: client.log_batch(self.run_id, metrics=chunk))

    def _experiment_id(self, client: MlflowClient, name: str) -> str:
        found = client.get_experiment_by_name(name)
        if found is None:
            try:
                return client.create_experiment(name, artifact_location=self._artifacts)
            except MlflowException:  # made meanwhile by another job of the sweep
                found = client.get_experiment_by_name(name)
                if found is None:
                    raise
        return found.experiment_id

    def _guarded(
        self, action: Callable[[MlflowClient], Result], needs_run: bool = True
    ) -> Result | None:
        """`action`'s result, given the client, through the guard (None: no client or run)."""
        client = self.client
        if client is None or (needs_run and self.run_id is None):
            return None
        return self._guard(lambda: action(client))


def _client(uri: str, store_lock: Path | None, timeout: float) -> MlflowClient:
    """MLflow's client of `uri`, under `store_lock`: two first runs would both make its tables."""
    if store_lock is None:
        return MlflowClient(tracking_uri=uri)
    with locked(store_lock, timeout, waiting=lambda: None):
        return MlflowClient(tracking_uri=uri)
