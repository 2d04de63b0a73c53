"""Reproduce, resume, evaluate: the same numbers again, after a replay, and after a SIGKILL."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from PIL import Image
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from experiments.core.errors import ExperimentError
from experiments.devices import process_settings
from experiments.records import checkpoints, running
from experiments.run.train import train
from helpers import (
    CAT_DOG,
    ROOT,
    compose_config,
    csv_numbers,
    eval_cli,
    killed_in_epoch_2,
    metrics,
    numbers,
    read_events,
    results,
    small_folder,
    train_cli,
    trained_run,
)

# Long enough epochs (30 steps of Tudui) to kill one in the middle; with a validation split that
# selects the epoch, and a learning rate changing at every step.
RUN = (
    "model=tudui",
    "device=cpu",
    "dataset.val_fraction=0.1",
    "scheduler=cosine",
    "trainer.epochs=2",
    "trainer.limit_train_batches=30",
    "trainer.limit_eval_images=256",
    "trainer.log_interval=5",
    "tracker=[tensorboard,csv]",
)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return trained_run(tmp_path_factory.mktemp("reference"), *RUN)


@pytest.mark.slow
def test_deterministic_mode_gives_the_same_numbers_on_the_cpu(
    reference: Path, tmp_path: Path
) -> None:
    done = train_cli(tmp_path, *RUN, "trainer.deterministic=true")
    assert done.returncode == 0, done.stderr
    assert results(done.run_dir)["deterministic"] is True
    assert numbers(done.run_dir) == numbers(reference)


@pytest.mark.slow
def test_the_same_config_again_by_replay_gives_identical_metrics(
    reference: Path, tmp_path: Path
) -> None:
    done = train_cli(tmp_path, f"replay={reference}")
    assert done.returncode == 0, done.stderr
    assert done.run_dir != reference
    assert numbers(done.run_dir) == numbers(reference)
    assert len(numbers(reference)) == 2 * (6 + 1)  # 6 logged steps and 1 epoch row per epoch
    assert results(done.run_dir)["replay_of"] == str(reference)
    # The same images held out for validation.
    validation = results(reference)["data"]["validation"]
    assert results(done.run_dir)["data"]["validation"] == validation
    assert validation["images"] == 400 and sum(validation["per_class"].values()) == 400
    overrides = (done.run_dir / ".hydra" / "overrides.yaml").read_text()
    assert "trainer.limit_train_batches=30" in overrides  # composed afresh from the overrides


@pytest.mark.slow
def test_a_run_killed_mid_epoch_resumes_to_the_same_end(reference: Path, tmp_path: Path) -> None:
    run_dir = killed_in_epoch_2(tmp_path, *RUN)
    # Killed in the middle of epoch 2: steps of it logged, the epoch not finished.
    assert results(run_dir)["status"] == "running"
    assert [row["epoch"] for row in metrics(run_dir, "epoch")] == [1]
    assert checkpoints.load(run_dir / checkpoints.LAST)["epoch"] == 1

    # Its trackers typed again: a run folder's saved overrides never choose them.
    done = train_cli(tmp_path, f"resume={run_dir}", "tracker=[tensorboard,csv]")
    assert done.returncode == 0, done.stderr
    assert done.run_dir == run_dir
    result = results(run_dir)
    assert (result["status"], result["resumed_after_epochs"]) == ("completed", [1])
    # Its console: not TensorBoard's reader at work, and the epochs in two parts, the first
    # timed by its rows.
    assert "No path found" not in done.stderr
    first = metrics(run_dir, "epoch")[0]["epoch_seconds"]
    said = f"2 epoch(s): 1 before resuming ({first:.1f} s of epochs), 1 in this process in "
    assert said in done.stderr.splitlines()[-1]
    # Every number again, the learning rates and the validation metrics included.
    assert numbers(run_dir) == numbers(reference)
    assert len({row["lr"] for row in metrics(run_dir, "step")}) == 12  # it changed every time
    assert result["data"]["validation"] == results(reference)["data"]["validation"]
    for key in ("final_test_accuracy", "selected_epoch", "val_accuracy", "test_accuracy"):
        assert result[key] == results(reference)[key]

    # TensorBoard hides the steps of the epoch cut short: each step once, as in the reference.
    def scalars(folder: Path, tag: str) -> list[tuple[int, float]]:
        events = EventAccumulator(str(folder))
        events.Reload()
        return [(event.step, event.value) for event in events.Scalars(tag)]

    for tag in ("train/loss", "lr", "val/accuracy"):
        assert scalars(run_dir, tag) == scalars(reference, tag)
    # So does metrics.csv: each step's and epoch's row once, in order, as in the reference.
    assert csv_numbers(run_dir) == csv_numbers(reference)
    assert len(csv_numbers(run_dir)) == len(numbers(reference))


@pytest.mark.slow
def test_a_run_killed_after_its_last_checkpoint_is_finished_by_a_resume(
    reference: Path, tmp_path: Path
) -> None:
    # Killed (SIGKILL) after the final last.pt, before best.pt (the order older versions wrote
    # them in), the HParams, the confusion matrix and "completed": what such a kill leaves.
    run_dir = tmp_path / "killed"
    shutil.copytree(reference, run_dir)
    record = results(reference) | {"status": "running", "process": {"host": "", "pid": 0}}
    (run_dir / "results.json").write_text(json.dumps(record))
    for unwritten in [run_dir / "confusion_matrix.png", *run_dir.glob("events.out.tfevents.*")]:
        unwritten.unlink()
    last = checkpoints.load(run_dir / checkpoints.LAST)
    assert (last["epoch"], results(reference)["selected_epoch"]) == (2, 2)
    earlier = {**last, "epoch": 1, "history": last["history"][:1]}  # best.pt of epoch 1
    checkpoints.save(run_dir / checkpoints.BEST, earlier)
    # And the temporary files of writes it was killed in.
    leftovers = [
        run_dir / "checkpoints" / ".best.pt.4242.tmp",
        run_dir / "checkpoints" / ".last.pt.4242.tmp",
        run_dir / ".results.json.4242.tmp",
    ]
    for leftover in leftovers:
        leftover.write_bytes(b"half a file")

    # While another process writes the folder (here this one, holding its lock as a resume
    # started a moment earlier would), a resume is refused and touches nothing.
    before = {path: path.read_bytes() for path in run_dir.rglob("*") if path.is_file()}
    lock = os.open(run_dir / running.LOCK, os.O_RDWR)
    try:
        fcntl.lockf(lock, fcntl.LOCK_EX)
        # Its own process: a lock's holder is a process, and this one holds it.
        refused = train_cli(tmp_path, f"resume={run_dir}", own_process=True)
    finally:
        os.close(lock)
    assert refused.returncode == 1
    assert refused.last_line.endswith(
        f"Error: resume={run_dir} is being written by another process (a resume started at the "
        "same time?); wait for it to end, then resume if it did not finish"
    )
    assert {path: path.read_bytes() for path in run_dir.rglob("*") if path.is_file()} == before

    done = train_cli(tmp_path, f"resume={run_dir}")
    assert done.returncode == 0, done.stderr
    result = results(run_dir)
    assert (result["status"], result["resumed_after_epochs"]) == ("completed", [2])
    for key in ("selected_epoch", "val_accuracy", "test_accuracy", "final_test_accuracy"):
        assert result[key] == results(reference)[key]
    assert numbers(run_dir) == numbers(reference)  # nothing trained again
    best = checkpoints.load(run_dir / checkpoints.BEST)
    assert best["epoch"] == 2
    assert all(torch.equal(best["model"][k], last["model"][k]) for k in last["model"])
    assert (run_dir / "confusion_matrix.png").is_file()
    events = read_events(run_dir)
    assert "test/confusion_matrix" in events.Tags()["images"]
    (accuracy,) = events.Scalars("whole_run/test_accuracy")
    assert accuracy.value == pytest.approx(result["test_accuracy"])
    assert not any(leftover.exists() for leftover in leftovers)
    # The CSV files held all of it already: neither is written again.
    for name in ("metrics.csv", "hparams.csv"):
        assert (run_dir / name).read_bytes() == (reference / name).read_bytes()


def test_a_run_killed_after_its_end_records_gets_them_once(reference: Path, tmp_path: Path) -> None:
    # Killed after the HParams and the confusion matrix were written, before "completed".
    run_dir = tmp_path / "killed"
    shutil.copytree(reference, run_dir)
    record = results(reference) | {"status": "running", "process": {"host": "", "pid": 0}}
    (run_dir / "results.json").write_text(json.dumps(record))

    done = train_cli(tmp_path, f"resume={run_dir}")
    assert done.returncode == 0, done.stderr
    assert results(run_dir)["status"] == "completed"
    events = read_events(run_dir)
    assert len(events.Scalars("whole_run/test_accuracy")) == 1
    assert len(events.Tensors("_hparams_/session_start_info")) == 1
    assert len(events.Images("test/confusion_matrix")) == 1


def test_a_refused_resume_leaves_the_run_as_it_was(reference: Path, tmp_path: Path) -> None:
    records = [
        reference / "results.json",
        reference / "train.log",
        *sorted((reference / ".hydra").iterdir()),
    ]
    before = [path.read_text() for path in records]
    done = train_cli(tmp_path, f"resume={reference}", "trainer.seed=5")
    assert done.returncode == 1
    assert done.last_line.endswith(
        f"Error: resume={reference} has trained 2 epochs of trainer.epochs=2 already; its "
        f"scheduler=cosine ends there: train longer afresh with replay={reference} "
        "trainer.epochs=N"
    )
    # Its records are untouched, its log and config snapshot too (a later resume= or replay=
    # brings back the run's own overrides, not the refused ones).
    assert [path.read_text() for path in records] == before


@pytest.mark.slow
def test_a_job_folder_named_by_an_earlier_version_resumes_and_evaluates_as_printed(
    reference: Path, tmp_path: Path
) -> None:
    # Sweep job folders were named `<number>_<key>=<value>,...`, which Hydra's override grammar
    # reads as more than one value.
    old = tmp_path / "1_trainer.seed=0,model=tudui"
    shutil.copytree(reference, old)
    done = train_cli(tmp_path, f"resume={old}")
    assert done.returncode == 1
    assert done.last_line.endswith(
        f"Error: resume={old} has trained 2 epochs of trainer.epochs=2 already; its "
        f"scheduler=cosine ends there: train longer afresh with replay={old} trainer.epochs=N"
    )
    done = eval_cli(tmp_path, f"ckpt={old}", "limit_images=256")
    assert done.returncode == 0, done.stderr
    assert results(done.run_dir)["checkpoint"] == str(old / checkpoints.BEST)


def test_resuming_with_another_model_is_refused_and_leaves_the_record_as_it_was(
    reference: Path, tmp_path: Path
) -> None:
    run_dir = tmp_path / "copy"
    shutil.copytree(reference, run_dir)
    # As if it had been planned for 3 epochs: now the model is what does not fit.
    checkpoint = checkpoints.load(run_dir / checkpoints.LAST)
    checkpoint["config"]["trainer"]["epochs"] = 3
    checkpoints.save(run_dir / checkpoints.LAST, checkpoint)
    records = [
        "results.json",
        "environment.json",
        "train.log",
        ".hydra/overrides.yaml",
        ".hydra/config.yaml",
    ]
    before = [(run_dir / record).read_text() for record in records]
    done = train_cli(tmp_path, f"resume={run_dir}", "trainer.epochs=3", "model=lenet")
    assert done.returncode == 1
    message = (
        f"resume={run_dir}: its checkpoint (model tudui) does not fit the model and optimizer "
        "configured now (Error(s) in loading state_dict for LeNet); resume with the run's own "
        "model and optimizer settings, or start a new run"
    )
    assert done.last_line.endswith(f"Error: {message}")
    # The run is still the completed tudui run it was, and a plain resume= still finds it so.
    assert [(run_dir / record).read_text() for record in records] == before
    assert results(run_dir)["status"] == "completed"


def test_a_schedule_neither_changes_nor_stretches_on_resume(reference: Path) -> None:
    run = str(reference)
    with pytest.raises(ExperimentError) as stretched:
        checkpoints.to_resume(run, 3, "cosine")
    assert str(stretched.value) == (
        f"resume={run}: its scheduler=cosine spans the trainer.epochs=2 it was planned for, and "
        f"cannot stretch to trainer.epochs=3 part-way; train 3 epochs afresh with replay={run} "
        "trainer.epochs=3"
    )
    with pytest.raises(ExperimentError) as changed:
        checkpoints.to_resume(run, 3, "none")
    assert str(changed.value) == (
        f"resume={run} was trained with scheduler=cosine, not scheduler=none; a schedule cannot "
        "change part-way: resume with its own, or start a new run"
    )


@pytest.mark.slow
def test_resuming_a_run_without_a_checkpoint_says_to_replay_it(tmp_path: Path) -> None:
    failed = train_cli(tmp_path, "device=cuda:3", "trainer.epochs=1").run_dir
    done = train_cli(tmp_path, f"resume={failed}")
    assert done.returncode == 1
    assert done.last_line.endswith(
        f"Error: resume={failed} has no checkpoint to resume from (checkpoints/last.pt is "
        f"missing: the run stopped before its first checkpoint); start it afresh with "
        f"replay={failed}"
    )


def test_resume_and_replay_need_a_run_folder(tmp_path: Path) -> None:
    done = train_cli(tmp_path, f"replay={tmp_path}")
    assert done.returncode == 1
    assert done.last_line == (
        f"Error: replay={tmp_path} is not a run folder (it has no overrides.yaml in .hydra/); "
        "give a folder under outputs/ that a run made"
    )


def test_resume_and_replay_together_are_refused(reference: Path, tmp_path: Path) -> None:
    done = train_cli(tmp_path, f"resume={reference}", f"replay={reference}")
    assert done.returncode == 1
    assert done.last_line == (
        "Error: resume= and replay= together: resume=<run> continues a run in its own folder, "
        "replay=<run> repeats one in a new folder; give one of them"
    )
    assert not (tmp_path / "outputs").exists()


def test_eval_gives_the_selected_epochs_test_accuracy(reference: Path, tmp_path: Path) -> None:
    done = eval_cli(tmp_path, f"ckpt={reference}", "limit_images=256", "batch_size=64")
    assert done.returncode == 0, done.stderr
    assert done.run_dir.name.endswith("_eval")
    evaluation = results(done.run_dir)
    trained = results(reference)
    epoch = trained["selected_epoch"]
    assert evaluation["checkpoint"] == str((reference / checkpoints.BEST).resolve())
    assert (
        f"evaluating {reference / checkpoints.BEST}: epoch {epoch}, selected by val_accuracy (max)"
        in done.stderr
    )
    assert evaluation["status"] == "completed" and evaluation["kind"] == "evaluation"
    assert evaluation["test_accuracy"] == trained["test_accuracy"]
    assert evaluation["test_loss"] == pytest.approx(trained["test_loss"], rel=1e-6)
    assert evaluation["class_accuracy"] == trained["class_accuracy"]
    assert (evaluation["model"], evaluation["trained_epochs"]) == ("tudui", epoch)
    assert f"evaluated tudui ({epoch} epochs on cifar10_sample) on cifar10_sample" in done.stderr
    assert (evaluation["test_images"], evaluation["test_split_images"]) == (256, 1000)
    assert ", 256 of 1,000 test images on cpu -> " in done.stderr


def test_a_truncated_checkpoint_is_refused_in_one_line(reference: Path, tmp_path: Path) -> None:
    whole = (reference / checkpoints.LAST).read_bytes()
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ExperimentError) as error:
        checkpoints.load(truncated)
    assert str(error.value).startswith(
        f"checkpoint {truncated} cannot be read: it is truncated, corrupted or not a checkpoint "
        "at all (torch.load: "
    )
    done = eval_cli(tmp_path, f"ckpt={truncated}")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.last_line.endswith(str(error.value))
    assert results(done.run_dir)["reason"] == str(error.value)


class RunsCode:
    """Unpickling this would create a file, if the loader let it."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ([], "ckpt is required: python eval.py ckpt=<run folder or checkpoint>"),
        (["ckpt=nowhere"], "no checkpoint at nowhere (give a .pt file or a run folder)"),
    ],
)
def test_an_evaluation_that_cannot_start_records_why(
    tmp_path: Path, overrides: list[str], message: str
) -> None:
    done = eval_cli(tmp_path, *overrides)
    assert done.returncode == 1 and done.last_line.endswith(f"Error: {message}")
    assert results(done.run_dir)["reason"] == message


def test_eval_refuses_ddp_in_one_line(reference: Path, tmp_path: Path) -> None:
    done = eval_cli(tmp_path, f"ckpt={reference}", "device=ddp")
    assert done.returncode == 1
    assert done.last_line.endswith(
        "Error: device=ddp trains under torchrun; eval.py evaluates in one process: use "
        "device=cuda, device=dp or device=cpu"
    )


def test_a_checkpoint_that_would_run_code_is_refused(reference: Path, tmp_path: Path) -> None:
    state = torch.load(reference / checkpoints.LAST, weights_only=True)
    marker = tmp_path / "code-ran"
    tampered = tmp_path / "tampered.pt"
    torch.save({**state, "extra": RunsCode(marker)}, tampered)
    with pytest.raises(ExperimentError) as error:
        checkpoints.load(tampered)
    assert str(error.value).startswith(
        f"checkpoint {tampered} holds more than tensors and plain data"
    )
    assert str(error.value).endswith("it was not written by this tool, or it was altered")
    assert not marker.exists()


def test_each_run_records_its_environment(reference: Path) -> None:
    environment = json.loads((reference / "environment.json").read_text())
    assert environment["command"][1:] == [str(ROOT / "train.py"), *RUN]
    assert environment["packages"]["torch"] == torch.__version__.split("+")[0]
    assert {"host", "cpu", "gpus", "gpu_driver", "python", "git"} <= set(environment)
    assert environment["cpu"]["logical_cores"] == os.cpu_count()
    dirty = environment["git"]["dirty"]
    assert (reference / "git.diff").exists() == bool(dirty)


@pytest.mark.slow
def test_a_resume_on_other_data_or_other_steps_per_epoch_is_refused(tmp_path: Path) -> None:
    """Trained in this process for an epoch of two steps on a small image folder, then resumed
    with what would select its epochs on other data, or stretch its steps: refused in one line,
    the run's records left as they were."""
    root = small_folder(tmp_path / "folder", CAT_DOG)  # 4 train and 4 test images
    run_dir = tmp_path / "run"
    run = (
        "model=lenet",
        "device=cpu",
        "dataset=image_folder",
        f"dataset.root={root}",
        f"dataset.cache_dir={tmp_path / 'cache'}",
        "dataset.workers=0",
        "trainer.batch_size=2",
    )
    train(compose_config(*run, "trainer.epochs=1"), run_dir)
    records = [run_dir / "results.json", run_dir / "environment.json"]
    before = [path.read_text() for path in records]

    def refused(*overrides: str) -> str:
        cfg = compose_config(*run, "trainer.epochs=2", *overrides, f"resume={run_dir}")
        with pytest.raises(ExperimentError) as error:
            train(cfg, run_dir)
        assert [path.read_text() for path in records] == before
        return str(error.value)

    assert refused("trainer.limit_train_batches=1") == (
        f"resume={run_dir}: its epochs were 2 optimizer steps each, 1 now "
        "(trainer.limit_train_batches=null then, 1 now); its schedule and its records' step "
        "numbers count 2 to an epoch: resume with the run's own settings, or start a new run"
    )
    assert refused("trainer.accumulate_batches=2") == (
        f"resume={run_dir}: its epochs were 2 optimizer steps each, 1 now "
        "(trainer.accumulate_batches=1 then, 2 now); its schedule and its records' step numbers "
        "count 2 to an epoch: resume with the run's own settings, or start a new run"
    )
    assert refused("dataset.val_fraction=0.5") == (
        f"resume={run_dir}: its data differs from the data it was trained on: validation split: "
        "0 images then, 2 now (dataset.val_fraction=0.0 then, 0.5 now); its epochs were trained "
        "and selected on that data: resume on it, or start a new run on this data"
    )
    Image.new("RGB", (8, 8), (1, 2, 3)).save(root / "train" / "dog" / "2.png")
    assert refused() == (
        f"resume={run_dir}: its data differs from the data it was trained on: train split: 4 "
        "images then, 5 now (with the same settings: the data changed at its source); its "
        "epochs were trained and selected on that data: resume on it, or start a new run on "
        "this data"
    )


@pytest.mark.slow
def test_accumulated_batches_resume_to_the_same_numbers(tmp_path: Path) -> None:
    # Three batches an epoch, two to a step: a step of 2 batches, then one of the batch left;
    # a cosine schedule by step. Failed at the first batch of epoch 2 and resumed, the run ends
    # as one never stopped: no step spans an epoch's end, where checkpoints are written.
    run = (
        "model=lenet",
        "device=cpu",
        "dataset=synthetic",
        "dataset.train_size=48",
        "dataset.test_size=16",
        "scheduler=cosine",
        "trainer.batch_size=16",
        "trainer.accumulate_batches=2",
        "trainer.log_interval=1",
        "trainer.confusion_matrix=false",
        "trainer.epochs=2",
    )
    resumed = tmp_path / "resumed"
    with process_settings.restored():
        train(compose_config(*run), tmp_path / "whole")
        with pytest.raises(RuntimeError, match="deliberate failure"):  # in epoch 2
            train(compose_config(*run, "model._target_=failing.FailsAtFourthStep"), resumed)
        train(compose_config(*run, f"resume={resumed}"), resumed)
    steps = [(row["epoch"], row["step"], row["global_step"]) for row in metrics(resumed, "step")]
    assert steps == [(1, 1, 1), (1, 2, 2), (2, 1, 3), (2, 2, 4)]
    assert checkpoints.load(resumed / checkpoints.LAST)["steps_per_epoch"] == 2
    assert numbers(resumed) == numbers(tmp_path / "whole")
