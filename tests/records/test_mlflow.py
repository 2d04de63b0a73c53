"""logger=mlflow, read back with MLflow's own client over the SQLite store a run makes in
outputs/, and over the REST API of a real `mlflow server`: a run per run folder, a sweep's runs in
one experiment, a resume that carries on the same run, and a server that cannot be reached
costing one warning line."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from experiments.records import checkpoints
from helpers import (
    QUICK,
    eval_cli,
    killed_in_epoch_2,
    metrics,
    results,
    train_cli,
    trained_run,
    uninstalled,
)

mlflow_tracking = pytest.importorskip("mlflow.tracking")


def client(cwd: Path) -> mlflow_tracking.MlflowClient:
    return mlflow_tracking.MlflowClient(f"sqlite:///{cwd / 'outputs' / 'mlflow.db'}")


def history(cwd: Path, run_id: str, tag: str) -> list[tuple[int, float]]:
    return [(metric.step, metric.value) for metric in client(cwd).get_metric_history(run_id, tag)]


def test_a_run_is_an_mlflow_run_with_its_config_tags_numbers_and_picture(tmp_path: Path) -> None:
    run_dir = trained_run(tmp_path, *QUICK, "model=lenet", "logger=[csv,mlflow]")
    run_id = results(run_dir)["trackers"]["mlflow"]
    run = client(tmp_path).get_run(run_id)
    assert (run.info.run_name, run.info.status) == (run_dir.name, "FINISHED")
    assert client(tmp_path).get_experiment(run.info.experiment_id).name == "runs"
    parameters = run.data.params
    assert (parameters["model.name"], parameters["trainer.epochs"]) == ("lenet", "2")
    tags = run.data.tags
    assert (tags["model"], tags["device"], tags["seed"], tags["precision"]) == (
        "lenet",
        "cpu",
        "0",
        "fp32",
    )
    # MLflow's own, as its fluent API would set them: what the UI shows as the source and user.
    assert Path(tags["mlflow.source.name"]).name == "train.py"
    assert tags["mlflow.user"]
    steps = metrics(run_dir, "step")
    assert history(tmp_path, run_id, "train/loss") == [
        (row["global_step"], pytest.approx(row["train_loss"])) for row in steps
    ]
    epochs = metrics(run_dir, "epoch")
    assert history(tmp_path, run_id, "test/accuracy") == [
        (row["global_step"], pytest.approx(row["test_accuracy"])) for row in epochs
    ]
    assert run.data.metrics["model/parameters"] == results(run_dir)["model_parameters"]
    assert run.data.metrics["whole_run/test_accuracy"] == pytest.approx(
        results(run_dir)["test_accuracy"]
    )
    pictures = client(tmp_path).list_artifacts(run_id, "test")
    assert [picture.path for picture in pictures] == ["test/confusion_matrix.png"]


def test_a_sweeps_runs_share_an_experiment_named_by_its_folder(tmp_path: Path) -> None:
    done = train_cli(tmp_path, "-m", *QUICK, "model=lenet", "logger=mlflow", "trainer.seed=0,1")
    assert done.returncode == 0, done.stderr
    (sweep,) = {str(run_dir.parent.relative_to(tmp_path)) for run_dir in done.run_dirs}
    experiment = client(tmp_path).get_experiment_by_name(sweep)
    runs = client(tmp_path).search_runs([experiment.experiment_id])
    assert sorted(run.data.tags["seed"] for run in runs) == ["0", "1"]
    assert {run.data.tags["sweep"] for run in runs} == {sweep}
    assert sorted(run.info.run_name for run in runs) == sorted(d.name for d in done.run_dirs)


def test_a_resumed_run_carries_on_its_mlflow_run_and_logs_each_step_once(tmp_path: Path) -> None:
    run = (*QUICK, "model=tudui", "trainer.epochs=2", "trainer.limit_train_batches=30")
    run_dir = killed_in_epoch_2(tmp_path, *run, "logger=mlflow")
    run_id = results(run_dir)["trackers"]["mlflow"]
    assert client(tmp_path).get_run(run_id).info.status == "RUNNING"  # killed: never ended
    # Sent at epoch 1's end, before its checkpoint: all of it there, whatever the kill lost.
    epoch_1 = [row["global_step"] for row in metrics(run_dir, "step") if row["epoch"] == 1]
    at_kill = [step for step, _ in history(tmp_path, run_id, "train/loss")]
    assert at_kill[: len(epoch_1)] == epoch_1
    (epoch_1_row,) = metrics(run_dir, "epoch")
    assert [step for step, _ in history(tmp_path, run_id, "test/accuracy")] == [
        epoch_1_row["global_step"]
    ]

    # Typed again: a run folder's saved trackers are left out (it chooses nothing written
    # outside it).
    done = train_cli(tmp_path, f"resume={run_dir}", "logger=mlflow")
    assert done.returncode == 0, done.stderr
    assert results(run_dir)["trackers"] == {"mlflow": run_id}
    assert (
        len(client(tmp_path).search_runs([client(tmp_path).get_run(run_id).info.experiment_id]))
        == 1
    )
    assert client(tmp_path).get_run(run_id).info.status == "FINISHED"
    logged = history(tmp_path, run_id, "train/loss")
    assert [step for step, _ in logged] == [row["global_step"] for row in metrics(run_dir, "step")]
    for tag in client(tmp_path).get_run(run_id).data.metrics:  # every tag: each step once
        steps = [step for step, _ in history(tmp_path, run_id, tag)]
        assert len(steps) == len(set(steps)), tag
    assert [step for step, _ in history(tmp_path, run_id, "test/accuracy")] == [
        row["global_step"] for row in metrics(run_dir, "epoch")
    ]


@contextlib.contextmanager
def tracking_server(folder: Path) -> Iterator[str]:
    """A real `mlflow server` on 127.0.0.1 over a SQLite store in `folder`: its address."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    address = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port)]
    command += ["--workers", "1", "--backend-store-uri", f"sqlite:///{folder / 'server.db'}"]
    command += ["--default-artifact-root", str(folder / "artifacts")]
    server = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None and time.monotonic() < deadline, "the server did not start"
            try:
                with urllib.request.urlopen(f"{address}/health", timeout=1):
                    break
            except OSError:
                time.sleep(0.2)
        yield address
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait()


def rest(address: str, endpoint: str, **query: str) -> dict[str, Any]:
    """A GET of MLflow's REST API (`/api/2.0/mlflow/<endpoint>`)."""
    url = f"{address}/api/2.0/mlflow/{endpoint}?{urllib.parse.urlencode(query)}"
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.loads(answer.read())


def test_a_run_goes_to_a_tracking_server_as_mlflow_tracking_uri_names(tmp_path: Path) -> None:
    with tracking_server(tmp_path) as address:
        done = train_cli(
            tmp_path / "here",
            *QUICK,
            "model=lenet",
            "logger=mlflow",
            env={"MLFLOW_TRACKING_URI": address},
        )
        assert done.returncode == 0, done.stderr
        run_id = results(done.run_dir)["trackers"]["mlflow"]
        run = rest(address, "runs/get", run_id=run_id)["run"]
        pictures = rest(address, "artifacts/list", run_id=run_id, path="test")["files"]
    assert not (tmp_path / "here" / "outputs" / "mlflow.db").exists()
    assert (run["info"]["run_name"], run["info"]["status"]) == (done.run_dir.name, "FINISHED")
    logged = {metric["key"]: metric["value"] for metric in run["data"]["metrics"]}
    assert logged["whole_run/test_accuracy"] == pytest.approx(
        results(done.run_dir)["test_accuracy"]
    )
    assert {tag["key"]: tag["value"] for tag in run["data"]["tags"]}["model"] == "lenet"
    assert [picture["path"] for picture in pictures] == ["test/confusion_matrix.png"]


def test_a_tracking_server_that_cannot_be_reached_costs_one_warning(tmp_path: Path) -> None:
    unreachable = "http://127.0.0.1:9"  # (discard: nothing listens)
    done = train_cli(
        tmp_path,
        *QUICK,
        "model=lenet",
        "logger=[csv,mlflow]",
        f"logger.mlflow.tracking_uri={unreachable}",
        env={"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "2"},
    )
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if "MLflow" in line]
    assert len(warned) == 1
    assert f"MLflow ({unreachable}) failed, and the run goes on without it" in warned[0]
    assert results(done.run_dir)["status"] == "completed"
    assert "trackers" not in results(done.run_dir)
    assert (done.run_dir / "metrics.csv").is_file()


def test_without_mlflow_installed_the_run_says_how_to_get_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uninstalled(monkeypatch, "mlflow", "mlflow_run")
    done = train_cli(tmp_path, *QUICK, "model=lenet", "logger=mlflow")
    assert done.returncode == 1
    assert done.last_line.endswith(
        "Error: logger=mlflow needs mlflow, which is not installed: pip install -e "
        "'.[trackers]' (or pip install mlflow)"
    )
    assert results(done.run_dir)["status"] == "failed"


def test_a_text_read_from_the_environment_is_recorded_as_its_interpolation(
    tmp_path: Path,
) -> None:
    """The store's path stands for a secret a tracking URI may hold (a token): the run writes
    there, and its parameters, checkpoint and records keep `${oc.env:...}` (docs/runs.md)."""
    store = tmp_path / "s3cret-token"
    store.mkdir()
    uri = "sqlite:///${oc.env:RUNS_STORE}/mlflow.db"
    done = train_cli(
        tmp_path,
        *QUICK,
        "model=lenet",
        "trainer.epochs=1",
        "logger=[csv,mlflow]",
        f"logger.mlflow.tracking_uri={uri}",
        env={"RUNS_STORE": str(store)},
    )
    assert done.returncode == 0, done.stderr
    reader = mlflow_tracking.MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    run = reader.get_run(results(done.run_dir)["trackers"]["mlflow"])
    assert run.data.params["logger.mlflow.tracking_uri"] == uri
    for record in ("results.json", "hparams.csv", ".hydra/config.yaml", "checkpoints/last.pt"):
        assert store.name.encode() not in (done.run_dir / record).read_bytes(), record
    config = checkpoints.load(done.run_dir / checkpoints.LAST)["config"]
    assert OmegaConf.create(config).logger.mlflow.tracking_uri == uri  # (never resolved again)
    assert eval_cli(tmp_path, f"ckpt={done.run_dir}").returncode == 0
