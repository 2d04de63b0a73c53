"""tracker=mlflow, read back with MLflow's own client over the SQLite store a run makes in
outputs/, and over the REST API of a real `mlflow server`: a run per run folder, a sweep's runs in
one experiment, a resume that carries on the same run (and a copy's that begins its own), and a
store or server that fails costing one warning line and a second's wait."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from experiments.records import checkpoints
from helpers import (
    QUICK,
    ROOT,
    Finished,
    env_with_tests_on_path,
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


@pytest.mark.slow
def test_a_run_is_an_mlflow_run_with_its_config_tags_numbers_and_picture(tmp_path: Path) -> None:
    run_dir = trained_run(tmp_path, *QUICK, "model=lenet", "tracker=[csv,mlflow]")
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


@pytest.mark.slow
def test_an_interrupted_run_is_a_killed_mlflow_run(tmp_path: Path) -> None:
    """Ctrl-C is no failure: results.json says interrupted, MLflow's run KILLED."""
    done = train_cli(
        tmp_path,
        *QUICK,
        "model=custom",
        "model._target_=failing.InterruptedAtThirdStep",
        "tracker=mlflow",
        env=env_with_tests_on_path(),
    )
    assert done.returncode == 130, done.stderr
    result = results(done.run_dir)
    assert (result["status"], result["reason"]) == ("interrupted", "interrupted (SIGINT)")
    assert client(tmp_path).get_run(result["trackers"]["mlflow"]).info.status == "KILLED"


@pytest.mark.slow
def test_a_sweeps_runs_share_an_experiment_named_by_its_folder(tmp_path: Path) -> None:
    done = train_cli(tmp_path, "-m", *QUICK, "model=lenet", "tracker=mlflow", "trainer.seed=0,1")
    assert done.returncode == 0, done.stderr
    (sweep,) = {str(run_dir.parent.relative_to(tmp_path)) for run_dir in done.run_dirs}
    experiment = client(tmp_path).get_experiment_by_name(sweep)
    runs = client(tmp_path).search_runs([experiment.experiment_id])
    assert sorted(run.data.tags["seed"] for run in runs) == ["0", "1"]
    assert {run.data.tags["sweep"] for run in runs} == {sweep}
    assert sorted(run.info.run_name for run in runs) == sorted(d.name for d in done.run_dirs)


@pytest.mark.slow
def test_a_resumed_run_carries_on_its_mlflow_run_and_logs_each_step_once(tmp_path: Path) -> None:
    run = (*QUICK, "model=tudui", "trainer.epochs=2", "trainer.limit_train_batches=30")
    run_dir = killed_in_epoch_2(tmp_path, *run, "tracker=mlflow")
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
    done = train_cli(tmp_path, f"resume={run_dir}", "tracker=mlflow")
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


@pytest.mark.slow
def test_a_run_goes_to_a_tracking_server_as_mlflow_tracking_uri_names(tmp_path: Path) -> None:
    with tracking_server(tmp_path) as address:
        done = train_cli(
            tmp_path / "here",
            *QUICK,
            "model=lenet",
            "tracker=mlflow",
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


@contextlib.contextmanager
def silent_server() -> Iterator[str]:
    """A server on 127.0.0.1 that takes connections and never answers: its address."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        taken: list[socket.socket] = []
        server.settimeout(0.1)
        stop = threading.Event()

        def take() -> None:
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    taken.append(server.accept()[0])

        taking = threading.Thread(target=take)
        taking.start()
        try:
            yield f"http://127.0.0.1:{server.getsockname()[1]}"
        finally:
            stop.set()
            taking.join()
            for connection in taken:
                connection.close()


@contextlib.contextmanager
def locked_store(path: Path) -> Iterator[str]:
    """A SQLite store that another writer holds locked (`BEGIN EXCLUSIVE`): its URI."""
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("CREATE TABLE theirs (x)")
    writer.execute("BEGIN EXCLUSIVE")
    try:
        yield f"sqlite:///{path}"
    finally:
        writer.close()


def file_store(folder: Path) -> contextlib.AbstractContextManager[str]:
    """MLflow 3 refuses a file store (maintenance mode) unless MLFLOW_ALLOW_FILE_STORE says."""
    return contextlib.nullcontext(f"file:{folder / 'mlruns'}")


def corrupt_store(folder: Path) -> contextlib.AbstractContextManager[str]:
    (folder / "mlflow.db").write_bytes(b"not a database " * 400)
    return contextlib.nullcontext(f"sqlite:///{folder / 'mlflow.db'}")


def store_that_is_a_folder(folder: Path) -> contextlib.AbstractContextManager[str]:
    """MLflow retries opening it, for 100 s."""
    (folder / "mlflow.db").mkdir()
    return contextlib.nullcontext(f"sqlite:///{folder / 'mlflow.db'}")


def refusing_server(folder: Path) -> contextlib.AbstractContextManager[str]:
    """Nothing listens on the discard port: MLflow's own settings retry for four minutes."""
    return contextlib.nullcontext("http://127.0.0.1:9")


# A store or server that fails, its failure met in the run's own process.
FAILING = [
    pytest.param(file_store, id="file store"),
    pytest.param(corrupt_store, id="corrupt"),
    pytest.param(refusing_server, id="refusing"),
    pytest.param(lambda folder: silent_server(), id="silent"),
]


@pytest.mark.slow
@pytest.mark.parametrize("store", FAILING)
def test_a_store_or_server_that_fails_costs_one_warning_and_seconds(
    tmp_path: Path, store: Callable[[Path], contextlib.AbstractContextManager[str]]
) -> None:
    with store(tmp_path) as uri:
        started = time.monotonic()
        done = train_cli(
            tmp_path,
            *QUICK,
            "model=lenet",
            "tracker=[csv,mlflow]",
            f"tracker.mlflow.tracking_uri={uri}",
            "tracker.mlflow.timeout=1",
        )
        took = time.monotonic() - started
    said_once(done, f"MLflow ({uri}) failed, and the run goes on without it")
    # MLflow's own waits are minutes (its retries); the run waits a second at most.
    assert took < 60


def said_once(done: Finished, warning: str) -> None:
    """The run completed, every number in its folder, MLflow's failure said in one line (none of
    its own: a traceback, a retry)."""
    assert done.returncode == 0, done.stderr
    said = [
        line
        for line in done.stderr.splitlines()
        if any(word in line for word in ("MLflow", "mlflow.", "alembic", "Traceback", "retried"))
    ]
    assert len(said) == 1, said
    assert warning in said[0]
    completed_without_mlflow(done.run_dir)


def completed_without_mlflow(run_dir: Path) -> None:
    assert results(run_dir)["status"] == "completed"
    assert "trackers" not in results(run_dir)
    assert len(metrics(run_dir, "epoch")) == 2
    assert (run_dir / "metrics.csv").is_file()


@pytest.mark.slow
def test_stores_whose_calls_outlive_the_wait_cost_each_job_one_warning(tmp_path: Path) -> None:
    """A store that is a folder (MLflow retries opening it for 100 s) and one another writer holds
    locked, each a job of one sweep: the calls its jobs stop waiting for go on after them, so the
    sweep is a process of its own."""
    folder = tmp_path / "folder.db"
    folder.mkdir()
    with locked_store(tmp_path / "locked.db") as locked:
        uris = [f"sqlite:///{folder}", locked]
        done = train_cli(
            tmp_path,
            "-m",
            *QUICK,
            "model=lenet",
            "tracker=[csv,mlflow]",
            "tracker.mlflow.timeout=1",
            "tracker.mlflow.tracking_uri=" + ",".join(f"'{uri}'" for uri in uris),
            own_process=True,
        )
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if "the run goes on without it" in line]
    assert len(warnings) == 2, done.stderr  # one per job, in the sweep's order
    for uri, warning in zip(uris, warnings, strict=True):
        assert f"MLflow ({uri}) failed" in warning
    assert not [
        line for line in done.stderr.splitlines() if "Traceback" in line or "alembic" in line
    ]
    assert len(done.run_dirs) == 2
    for run_dir in done.run_dirs:
        completed_without_mlflow(run_dir)


@pytest.mark.slow
def test_a_store_on_a_full_disk_costs_one_warning_and_no_traceback(tmp_path: Path) -> None:
    """The run's process may write no file past the store's size (RLIMIT_FSIZE), so the store's
    first write that grows it fails, as on a full disk (its own files are smaller)."""
    store = tmp_path / "mlflow.db"
    mlflow_tracking.MlflowClient(f"sqlite:///{store}")  # its tables
    size = store.stat().st_size
    command = [sys.executable, str(ROOT / "train.py"), *QUICK, "model=lenet"]
    command += ["tracker=[csv,mlflow]", f"tracker.mlflow.tracking_uri=sqlite:///{store}"]
    run = subprocess.run(
        command,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (size, size)),
    )
    done = Finished(run.returncode, run.stdout, run.stderr, tmp_path)
    said_once(done, f"MLflow (sqlite:///{store}) failed, and the run goes on without it")
    assert "disk I/O error" in done.stderr


@pytest.mark.slow
def test_two_first_runs_at_once_make_one_store_and_each_its_run(tmp_path: Path) -> None:
    """Each makes its MlflowRun once the other has imported MLflow too (a start line), so that
    both open the store that does not exist yet at once."""
    start_line = tmp_path / "go"
    script = (
        "import pathlib, time\n"
        "from experiments.records.mlflow_run import MlflowRun\n"
        "from experiments.records.tracker import TrackedRun\n"
        f"while not pathlib.Path({str(start_line)!r}).exists(): time.sleep(0.01)\n"
        "run = MlflowRun(pathlib.Path('run'))\n"
        "print(run.begin(TrackedRun(name='run', group=None, parameters={}, tags={})))\n"
    )
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", script],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    time.sleep(1)
    start_line.touch()
    said = [run.communicate(timeout=120) for run in runs]
    assert all(run.returncode == 0 for run in runs), said
    assert not any(stderr for _, stderr in said), said
    ids = {stdout.strip() for stdout, _ in said}
    experiment = client(tmp_path).get_experiment_by_name("runs")
    found = client(tmp_path).search_runs([experiment.experiment_id])
    assert {run.info.run_id for run in found} == ids
    assert len(ids) == 2


@pytest.mark.slow
def test_a_copied_run_folder_resumes_into_an_mlflow_run_of_its_own(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    original = trained_run(tmp_path, *QUICK, "model=lenet", "trainer.epochs=1", "tracker=mlflow")
    copy = tmp_path / "copy"
    shutil.copytree(original, copy)
    # (The tracker typed again: a run folder's saved overrides choose none.)
    done = train_cli(tmp_path, f"resume={copy}", "trainer.epochs=2", "tracker=mlflow")
    assert done.returncode == 0, done.stderr
    assert f"this run folder was begun as {original}" in done.stderr
    assert not [message for message in caplog.messages if "left out" in message]
    original_id, copy_id = (results(folder)["trackers"]["mlflow"] for folder in (original, copy))
    assert copy_id != original_id
    # The original's run holds only what its own folder trained, the copy's all that the copy's
    # folder holds: the epoch copied, sent again, and the one it trained.
    for folder, run_id in ((original, original_id), (copy, copy_id)):
        assert [step for step, _ in history(tmp_path, run_id, "test/accuracy")] == [
            row["global_step"] for row in metrics(folder, "epoch")
        ]
        assert [step for step, _ in history(tmp_path, run_id, "train/loss")] == [
            row["global_step"] for row in metrics(folder, "step")
        ]
    assert len(metrics(copy, "epoch")) == 2
    assert client(tmp_path).get_run(copy_id).info.status == "FINISHED"


def test_without_mlflow_installed_the_run_says_how_to_get_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uninstalled(monkeypatch, "mlflow", "mlflow_run")
    done = train_cli(tmp_path, *QUICK, "model=lenet", "tracker=mlflow")
    assert done.returncode == 1
    assert done.last_line.endswith(
        "Error: tracker=mlflow needs mlflow, which is not installed: pip install -e "
        "'.[trackers]' (or pip install mlflow)"
    )
    assert results(done.run_dir)["status"] == "failed"


@pytest.mark.slow
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
        "tracker=[csv,mlflow]",
        f"tracker.mlflow.tracking_uri={uri}",
        env={"RUNS_STORE": str(store)},
    )
    assert done.returncode == 0, done.stderr
    reader = mlflow_tracking.MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    run = reader.get_run(results(done.run_dir)["trackers"]["mlflow"])
    assert run.data.params["tracker.mlflow.tracking_uri"] == uri
    for record in ("results.json", "hparams.csv", ".hydra/config.yaml", "checkpoints/last.pt"):
        assert store.name.encode() not in (done.run_dir / record).read_bytes(), record
    config = checkpoints.load(done.run_dir / checkpoints.LAST)["config"]
    assert OmegaConf.create(config).tracker.mlflow.tracking_uri == uri  # (never resolved again)
    assert eval_cli(tmp_path, f"ckpt={done.run_dir}").returncode == 0
