"""A checkpoint or a run folder from someone else is data: the `_target_`s it names are built only
when the project ships them or the user types them (experiments.config.trust). Each hostile file
here is one a sender can write, checksum and all, and each ran its code before the check."""

from __future__ import annotations

import os
import pickle
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from experiments.config.checks import rule_of
from experiments.config.overrides import with_saved_overrides
from experiments.config.schemas import TrainerConfig
from experiments.core.errors import ExperimentError
from experiments.core.text import as_typed
from experiments.data.torchvision_sources import torchvision_splits
from experiments.records import checkpoints
from experiments.run.evaluate import evaluate_checkpoint
from experiments.training.models import LeNet
from experiments.training.weights import load_weights
from helpers import (
    BRIEF_BENCHMARK,
    SMALL,
    compose_config,
    eval_cli,
    results,
    small_folder,
    train_cli,
    trained_run,
)

VICTIM_TEXT = "a file outside every run\n"


class RunsCode:
    """Unpickled without weights_only, this creates `marker`: any shell command would run."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return trained_run(tmp_path_factory.mktemp("shared"), *SMALL)


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    path = tmp_path / "victim.txt"
    path.write_text(VICTIM_TEXT)
    return path


def hostile_models(marker: Path, victim: Path) -> dict[str, dict[str, Any]]:
    """Model nodes a sender can put in a checkpoint's config, by what they would do."""
    shell = {
        "_target_": "torch.load",
        "name": "lenet",
        "f": {"_target_": "io.BytesIO", "initial_bytes": pickle.dumps(RunsCode(marker))},
        "weights_only": False,
    }
    truncate = {"_target_": "builtins.open", "name": "lenet", "file": str(victim), "mode": "w"}
    nested = {
        "_target_": "experiments.training.models.LeNet",
        "name": "lenet",
        "in_channels": 3,
        "image_size": 32,
        "num_classes": 10,
        "extra": {"_target_": "builtins.open", "file": str(victim), "mode": "w"},
    }
    # Shipped, but as a scheduler: it would be called with the model's fields.
    misplaced = {"_target_": "experiments.training.schedules.cosine", "name": "lenet"}
    return {"shell": shell, "truncate": truncate, "nested": nested, "misplaced": misplaced}


def with_model(run: Path, model: dict[str, Any], path: Path) -> Path:
    """`run`'s checkpoint with another model node, saved with a valid checksum."""
    state = checkpoints.load(run / checkpoints.LAST)
    state["config"]["model"] = model
    checkpoints.save(path, state)
    return path


@pytest.mark.slow
@pytest.mark.parametrize(
    ("payload", "refused"),
    [
        ("shell", "would build torch.load (model._target_), not one this project ships"),
        ("truncate", "would build builtins.open (model._target_), not one this project ships"),
        (
            "nested",
            "would build builtins.open (model.extra._target_), not one this project ships",
        ),
        (
            "misplaced",
            "would build experiments.training.schedules.cosine (model._target_), which this "
            "project ships as scheduler, not as model",
        ),
    ],
)
def test_eval_builds_nothing_a_checkpoint_names(
    run: Path, tmp_path: Path, victim: Path, payload: str, refused: str
) -> None:
    marker = tmp_path / "code-ran"
    model = hostile_models(marker, victim)[payload]
    shared = with_model(run, model, tmp_path / "shared.pt")
    cfg = compose_config(f"ckpt={shared}", "device=cpu", config_name="eval")
    with pytest.raises(ExperimentError) as error:
        evaluate(cfg, tmp_path / "eval")
    assert refused in str(error.value)
    assert not marker.exists()
    assert victim.read_text() == VICTIM_TEXT
    assert results(tmp_path / "eval")["status"] == "failed"


def test_a_shipped_class_holding_a_target_is_refused(run: Path, tmp_path: Path) -> None:
    model = hostile_models(tmp_path / "marker", tmp_path / "victim")["nested"]
    model["extra"] = {"_target_": "experiments.training.models.Tudui"}
    shared = with_model(run, model, tmp_path / "shared.pt")
    cfg = compose_config(f"ckpt={shared}", "device=cpu", config_name="eval")
    with pytest.raises(ExperimentError, match="inside another target's arguments"):
        evaluate(cfg, tmp_path / "eval")


def test_eval_builds_a_class_of_ones_own_once_typed(
    run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "own_models.py").write_text(
        "from experiments.training.models import LeNet\n\n\nclass Net(LeNet):\n    pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    # Recorded as absent, so the module this test imports is dropped when it ends: the worker's
    # later tests must not find it.
    monkeypatch.setitem(sys.modules, "own_models", None)
    del sys.modules["own_models"]
    state = checkpoints.load(run / checkpoints.LAST)
    model = {**state["config"]["model"], "_target_": "own_models.Net", "name": "own_models.Net"}
    own = with_model(run, model, tmp_path / "own.pt")
    untyped = compose_config(f"ckpt={own}", "device=cpu", config_name="eval")
    with pytest.raises(ExperimentError) as error:
        evaluate(untyped, tmp_path / "untyped")
    assert str(error.value).endswith(
        "would build own_models.Net (model._target_), not one this project ships; nothing read "
        "from a file is built unless you type it: add model=custom model._target_=own_models.Net "
        "if you trust it"
    )
    typed = compose_config(
        f"ckpt={own}",
        "device=cpu",
        "limit_images=256",
        "model=custom",
        "model._target_=own_models.Net",
        config_name="eval",
    )
    assert 0 <= evaluate(typed, tmp_path / "typed") <= 1


def evaluate(cfg: Any, folder: Path) -> float:
    """`evaluate_checkpoint` in a folder of its own, as eval.py's Hydra makes it."""
    folder.mkdir()
    return evaluate_checkpoint(cfg, folder)


def with_saved(run: Path, where: Path, *added: str) -> Path:
    """A copy of `run` whose .hydra/overrides.yaml has `added` at its end."""
    shutil.copytree(run, where)
    saved = where / ".hydra" / "overrides.yaml"
    saved.write_text(saved.read_text() + "".join(f"- '{line}'\n" for line in added))
    return where


@pytest.mark.parametrize(
    ("added", "refused"),
    [
        (
            ["+hydra.callbacks.evil._target_=builtins.print"],
            "its .hydra/overrides.yaml sets Hydra's own config "
            "(+hydra.callbacks.evil._target_=builtins.print)",
        ),
        (
            ["model=custom", "model._target_=builtins.open", "+model.mode=w"],
            "its .hydra/overrides.yaml would build builtins.open (model._target_), not one this "
            "project ships; nothing read from a file is built unless you type it: type "
            "model._target_=builtins.open if you trust it",
        ),
        (
            ["optimizer._target_=experiments.data.csv_table.csv_splits"],
            "its .hydra/overrides.yaml would build experiments.data.csv_table.csv_splits "
            "(optimizer._target_), which this project ships as dataset.source, not as optimizer",
        ),
        (
            ["+model._partial_=true"],
            "its .hydra/overrides.yaml sets model._partial_, which changes what its section "
            "builds; the project sets such keys only at optimizer._partial_, scheduler._partial_; "
            "nothing read from a file sets one elsewhere unless you type it: "
            "+model._partial_=<value>",
        ),
        (
            ["+model.extra={_target_:experiments.training.models.Tudui}"],
            "would build experiments.training.models.Tudui (model.extra._target_), inside another "
            "target's arguments",
        ),
    ],
)
@pytest.mark.parametrize("key", ["resume", "replay"])
def test_a_run_folders_overrides_build_nothing_untyped(
    run: Path, tmp_path: Path, key: str, added: list[str], refused: str
) -> None:
    folder = with_saved(run, tmp_path / "shared", *added)
    with pytest.raises(ExperimentError) as error:
        with_saved_overrides([f"{key}={folder}"])
    assert str(error.value).startswith(f"{key}={folder}: ")
    assert refused in str(error.value)


def test_a_target_typed_again_is_built(run: Path, tmp_path: Path) -> None:
    folder = with_saved(run, tmp_path / "shared", "optimizer._target_=torch.optim.AdamW")
    typed = "model._target_=experiments.training.models.Tudui"
    own = with_saved(run, tmp_path / "own", "model=custom", typed)
    # A shipped target where the shipped options keep theirs needs no typing; another must be typed.
    assert "optimizer._target_=torch.optim.AdamW" in with_saved_overrides([f"replay={folder}"])
    assert typed in with_saved_overrides([f"replay={own}", typed])


def test_resume_of_a_hostile_folder_touches_nothing(
    run: Path, tmp_path: Path, victim: Path
) -> None:
    added = [
        "model=custom",
        "model._target_=builtins.open",
        f"+model.file={victim}",
        "+model.mode=w",
    ]
    folder = with_saved(run, tmp_path / "shared", *added)
    before = (folder / "results.json").read_bytes()
    done = train_cli(tmp_path, f"resume={folder}", "trainer.epochs=2")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "would build builtins.open (model._target_)" in done.last_line
    assert victim.read_text() == VICTIM_TEXT
    assert (folder / "results.json").read_bytes() == before


@pytest.mark.slow
def test_replay_says_what_it_builds_beyond_the_project(run: Path, tmp_path: Path) -> None:
    done = train_cli(tmp_path, f"replay={run}", "trainer.limit_eval_images=64")
    assert done.returncode == 0, done.stderr
    assert (
        f"replay={run} runs that run's config, as running its script would; besides the "
        "project's own code it builds torch.optim.SGD (optimizer._target_)"
    ) in done.stderr + done.stdout


def test_a_pickle_payload_as_model_weights_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "code-ran"
    weights = tmp_path / "weights.pt"
    weights.write_bytes(pickle.dumps(RunsCode(marker)))
    with pytest.raises(ExperimentError) as error:
        load_weights(LeNet(3, 32, 10), str(weights))
    assert "is no state dict torch.load can read with weights_only=True" in str(error.value)
    assert not marker.exists()


@pytest.mark.slow
def test_a_target_made_from_the_datas_own_names_is_refused(tmp_path: Path, victim: Path) -> None:
    """An interpolation in a run folder's overrides that reads what the data fills in (a class
    folder's name) is checked once the data has loaded, before the model is built."""
    node = "{_target_:builtins.open,file:" + victim.name + ",mode:w}"
    small_folder(tmp_path / "images", {"train": ["aaa", node], "test": ["aaa", node]})
    shared = tmp_path / "shared"
    (shared / ".hydra").mkdir(parents=True)
    (shared / ".hydra" / "overrides.yaml").write_text(
        "- dataset=image_folder\n"
        f"- dataset.root={tmp_path / 'images'}\n"
        "- dataset.image_size=32\n"
        "- model=custom\n"
        "- model._target_=experiments.training.models.LeNet\n"
        "- \"+model.extra='${oc.decode:${oc.select:dataset.classes.1,null}}'\"\n"
    )
    quick = [override for override in SMALL if not override.startswith("model=")]
    done = train_cli(tmp_path, f"replay={shared}", *quick)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "would build builtins.open (model.extra._target_)" in done.last_line
    assert victim.read_text() == VICTIM_TEXT


def test_a_checkpoint_holding_an_interpolation_is_refused(run: Path, tmp_path: Path) -> None:
    state = checkpoints.load(run / checkpoints.LAST)
    state["config"]["model"]["extra"] = "${oc.decode:${dataset.classes.1}}"
    altered = tmp_path / "altered.pt"
    checkpoints.save(altered, state)
    with pytest.raises(ExperimentError) as error:
        checkpoints.load(altered)
    assert str(error.value) == (
        f"checkpoint {altered} is not one of this tool's: its config holds an interpolation "
        "(${...}) at config.model.extra, where a saved config holds values; it was altered, and "
        "was not used"
    )


def test_a_dataset_class_is_looked_up_never_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "code-ran"
    (tmp_path / "payload.py").write_text(f"open({str(marker)!r}, 'w').close()\nX = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ExperimentError, match="is not one of torchvision's datasets"):
        torchvision_splits("payload.X", str(tmp_path), download=False)
    assert not marker.exists()


def test_an_interpolation_in_saved_overrides_is_kept_for_hydra(run: Path, tmp_path: Path) -> None:
    folder = with_saved(run, tmp_path / "shared", "trainer.seed=${trainer.epochs}")
    assert "trainer.seed=${trainer.epochs}" in with_saved_overrides([f"replay={folder}"])


WRITES_ELSEWHERE = (
    "tracker=[tensorboard,mlflow]",
    "+tracker.mlflow.tracking_uri=sqlite:////elsewhere/mlflow.db",
    "dataset.cache_dir=/elsewhere/cache",
    "dataset.download=true",
)


# `logger`: the tracker group's name in a run folder of the last release, said in today's.
@pytest.mark.parametrize("group", ["tracker", "logger"])
@pytest.mark.parametrize("key", ["resume", "replay"])
def test_where_a_run_writes_outside_its_folder_is_never_brought_back(
    run: Path, tmp_path: Path, key: str, group: str, caplog: pytest.LogCaptureFixture
) -> None:
    saved = [override.replace("tracker", group) for override in WRITES_ELSEWHERE]
    folder = with_saved(run, tmp_path / "shared", *saved)
    typed = "tracker=csv"
    brought = with_saved_overrides([f"{key}={folder}", typed])
    assert not {*WRITES_ELSEWHERE, *saved} & set(brought)
    assert typed in brought and "model=lenet" in brought  # what is typed, and the rest, stay
    assert caplog.messages == [
        f"{key}={folder}: left out {' '.join(WRITES_ELSEWHERE)}, which its run had: where a run "
        "writes outside its folder comes from what you type; type them again to keep them"
    ]


@pytest.mark.slow
def test_a_replayed_folder_chooses_no_trackers_store(
    run: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    folder = with_saved(
        run,
        tmp_path / "shared",
        "tracker=[tensorboard,mlflow]",
        f"+tracker.mlflow.tracking_uri=sqlite:///{elsewhere}/mlflow.db",
    )
    done = train_cli(tmp_path, f"replay={folder}")
    assert done.returncode == 0, done.stderr
    assert list(elsewhere.iterdir()) == []
    assert "trackers" not in results(done.run_dir)  # (where an MLflow or W&B run's id would be)
    # (Said before Hydra sets up logging: on stderr as it is, here to pytest's handler.)
    said = f"replay={folder}: left out tracker=[tensorboard,mlflow] +tracker.mlflow.tracking_uri="
    assert [message for message in caplog.messages if message.startswith(said)]


@pytest.mark.slow
def test_a_checkpoint_whose_config_is_a_string_is_refused_by_eval_and_resume(
    run: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "shared"
    shutil.copytree(run, folder)
    state = checkpoints.load(folder / checkpoints.LAST)
    checkpoints.save(folder / checkpoints.LAST, {**state, "config": "model: lenet"})
    said = (
        f"checkpoint {folder / checkpoints.LAST} is not one of this tool's: its config is a "
        "string ('model: lenet'), where a saved config maps each section to its settings; it "
        "was altered, and was not used"
    )
    evaluated = eval_cli(tmp_path, f"ckpt={folder}", "device=cpu")
    resumed = train_cli(tmp_path, f"resume={folder}", "trainer.epochs=2")
    for done in (evaluated, resumed):
        assert done.returncode == 1 and "Traceback" not in done.stderr
        assert done.last_line.endswith(f"Error: {said}")
    assert results(evaluated.run_dirs[-1])["status"] == "failed"


def with_field(run: Path, path: Path, key: str, value: Any) -> Path:
    """`run`'s last checkpoint with one field (`key`, dotted from the checkpoint's top:
    `epoch`, `config.trainer.batch_size`) set to `value`, saved with a valid checksum, as a
    sender can."""
    state = checkpoints.load(run / checkpoints.LAST)
    *outer, name = key.split(".")
    held = state
    for section in outer:
        held = held[section]
    held[name] = value
    checkpoints.save(path, state)
    return path


# A field's own rule, for a saved config's value: its words are the golden file's.
BATCH = rule_of(TrainerConfig, "batch_size", saved=True).says()
EPOCH = (
    "must be a whole number from 1 to its config's trainer.epochs=1: the epochs its run had "
    "trained when it was saved"
)
UNFIT_FIELDS = [
    *(
        (
            "config.trainer.batch_size",
            value,
            f"its config's trainer.batch_size={as_typed(value)} {BATCH}",
        )
        for value in ("auto", "lots", -5, True, 64.5, 10**9)
    ),
    *(
        ("epoch", value, f"its epoch={as_typed(value)} {EPOCH}")
        for value in ("lots", 0, 2, True, 1.0)
    ),
]


def refused_line(path: Path, said: str) -> str:
    return f"checkpoint {path} is not one of this tool's: {said}; it was altered, and was not used"


@pytest.mark.parametrize(("key", "value", "said"), UNFIT_FIELDS)
def test_eval_refuses_a_checkpoints_unfit_field_before_any_work(
    run: Path, tmp_path: Path, key: str, value: Any, said: str
) -> None:
    """The serving batch is the checkpoint's trainer.batch_size; the epoch is said last."""
    tampered = with_field(run, tmp_path / "tampered.pt", key, value)
    done = eval_cli(tmp_path, f"ckpt={tampered}", "device=cpu", "benchmark=true", *BRIEF_BENCHMARK)
    line = refused_line(tampered, said)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.last_line.endswith(f"Error: {line}")
    assert "evaluating" not in done.stderr  # refused as it loaded, before the test split
    recorded = results(done.run_dir)
    assert (recorded["status"], recorded["reason"]) == ("failed", line)


@pytest.mark.slow
def test_an_eval_sweep_records_each_job_refused_for_its_checkpoint(
    run: Path, tmp_path: Path
) -> None:
    tampered = with_field(run, tmp_path / "tampered.pt", "config.trainer.batch_size", "lots")
    done = eval_cli(tmp_path, "-m", f"ckpt={tampered}", "device=cpu", "benchmark=true", "seed=0,1")
    line = refused_line(tampered, f"its config's trainer.batch_size=lots {BATCH}")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.count(f"Error: {line}") == 2
    jobs = done.run_dirs
    assert len(jobs) == 2
    assert [(results(job)["status"], results(job)["reason"]) for job in jobs] == [
        ("failed", line)
    ] * 2


def test_resume_refuses_a_checkpoints_unfit_epoch_and_leaves_the_run_as_it_was(
    run: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "shared"
    shutil.copytree(run, folder)
    with_field(run, folder / checkpoints.LAST, "epoch", "lots")
    before = (folder / "results.json").read_bytes()
    done = train_cli(tmp_path, f"resume={folder}", "trainer.epochs=2")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    line = refused_line(folder / checkpoints.LAST, f"its epoch=lots {EPOCH}")
    assert done.last_line.endswith(f"Error: {line}")
    assert (folder / "results.json").read_bytes() == before
