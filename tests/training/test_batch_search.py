"""trainer.batch_size=auto: the search for the largest batch, a pure function of "does it fit"
answers; a run that searched trains exactly as one given the batch it chose, records how it found
and chose it, and keeps it when resumed; what cannot search is refused in one line."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from experiments.config.validate import validate
from experiments.core.errors import ExperimentError
from experiments.records import checkpoints
from experiments.training.batch_choice import KNEE, MIN_STEPS, Epoch, Rule, choose_batch
from experiments.training.batch_search import (
    MEMORY_BUDGET,
    OUT_OF_MEMORY,
    TRAINING_SPLIT,
    Search,
    largest_batch,
)
from helpers import compose_config, numbers, results, train_cli, trained_run


def answers(first_too_large: int | None, why: str = OUT_OF_MEMORY):
    """A device on which every batch below `first_too_large` fits (None: every batch)."""
    asked: list[int] = []

    def fits(batch: int) -> str | None:
        asked.append(batch)
        return None if first_too_large is None or batch < first_too_large else why

    return fits, asked


@pytest.mark.parametrize(
    ("first_too_large", "fewest", "most", "found"),
    [
        # Doubled until a batch fails: the last that fit is the largest.
        (
            100,
            1,
            4096,
            Search(64, OUT_OF_MEMORY, [(b, b < 100) for b in (1, 2, 4, 8, 16, 32, 64, 128)]),
        ),
        # BatchNorm: from 2 images.
        (9, 2, 4096, Search(8, OUT_OF_MEMORY, [(2, True), (4, True), (8, True), (16, False)])),
        # The training split runs out first: 4,000 images hold no batch of 4,096.
        (None, 1024, 4000, Search(2048, TRAINING_SPLIT, [(1024, True), (2048, True)])),
        (None, 4, 4, Search(4, TRAINING_SPLIT, [(4, True)])),
    ],
)
def test_the_search_doubles_until_a_batch_fails_or_the_split_runs_out(
    first_too_large: int | None, fewest: int, most: int, found: Search
) -> None:
    fits, asked = answers(first_too_large)
    assert largest_batch(fits, fewest, most) == found
    assert asked == [batch for batch, _ in found.tried]  # each asked once, smallest first


def test_a_search_where_nothing_fits_finds_nothing() -> None:
    fits, asked = answers(1, MEMORY_BUDGET)
    assert largest_batch(fits, 1, 4096) is None and asked == [1]
    fits, asked = answers(None)
    assert largest_batch(fits, 8, 4) is None and asked == []  # a split smaller than a batch


@pytest.mark.parametrize(
    ("overrides", "line"),
    [
        # A field's own rule: its key and value (its words: the golden file's).
        (["trainer.batch_size=big"], "trainer.batch_size=big must be "),
        (["trainer.batch_size=16777217"], "trainer.batch_size=16777217 must be "),
        (
            ["trainer.auto_batch_halvings=2"],
            "trainer.auto_batch_halvings=2 halves the batch trainer.batch_size=auto finds, and "
            "trainer.batch_size=64; add trainer.batch_size=auto",
        ),
        (
            ["trainer.auto_batch=largest"],
            "trainer.auto_batch=largest chooses among the batches trainer.batch_size=auto finds, "
            "and trainer.batch_size=64; add trainer.batch_size=auto",
        ),
        (
            ["trainer.batch_size=auto", "trainer.auto_batch_halvings=1"],
            "trainer.auto_batch_halvings=1 halves the largest batch that fits, and "
            "trainer.auto_batch=knee trains at the knee of the speeds measured; add "
            "trainer.auto_batch=largest",
        ),
        (
            ["trainer.batch_size=auto", "trainer.auto_batch_halvings=-1"],
            "trainer.auto_batch_halvings=-1 must be ",
        ),
        (
            ["trainer.batch_size=auto", "trainer.auto_batch_min_steps=0"],
            "trainer.auto_batch_min_steps=0 must be ",
        ),
        (
            ["trainer.batch_size=auto", "trainer.memory_budget_gb=0"],
            "trainer.memory_budget_gb=0.0 must be ",
        ),
        (
            ["trainer.batch_size=auto", "device=dp"],
            "trainer.batch_size=auto searches the largest batch of one device, and device=dp's "
            "GPUs share each batch; give trainer.batch_size a number (the search's on one "
            "device, times the devices, is a start)",
        ),
    ],
)
def test_what_cannot_search_is_refused_in_one_line(overrides: list[str], line: str) -> None:
    with pytest.raises(ExperimentError) as refused:
        validate(compose_config(*overrides))
    assert str(refused.value).startswith(line) and "\n" not in str(refused.value)
    with pytest.raises(ExperimentError, match=r"^trainer.batch_size=auto searches .* 2 processes"):
        validate(compose_config("trainer.batch_size=auto"), processes=2)


# A split of 128 rows: the search ends at it, in moments.
TINY = (
    "device=cpu",
    "model=mlp",
    "dataset=synthetic",
    "dataset.train_size=128",
    "dataset.test_size=64",
    "trainer.epochs=2",
)
# Trained at the largest batch that fits halved once: 64 of its 128 rows.
LARGEST_HALVED = (
    "trainer.batch_size=auto",
    "trainer.auto_batch=largest",
    "trainer.auto_batch_halvings=1",
)


@pytest.mark.slow
def test_a_searched_batch_trains_as_that_batch_given_and_is_kept_on_resume(
    tmp_path: Path,
) -> None:
    searched = train_cli(tmp_path / "auto", *TINY, *LARGEST_HALVED)
    given = train_cli(tmp_path / "given", *TINY, "trainer.batch_size=64")
    assert searched.returncode == given.returncode == 0, searched.stderr + given.stderr
    # The run's weights, optimizer and random numbers untouched by the tries.
    assert numbers(searched.run_dir) == numbers(given.run_dir)
    result = results(searched.run_dir)
    assert (result["batch_size"], result["per_process_batch_size"]) == (64, 64)
    search = result["batch_search"]
    assert (search["largest"], search["trained"], search["halvings"]) == (128, 64, 1)
    assert (search["stopped_by"], search["budget_gb"]) == (TRAINING_SPLIT, 4.0)
    assert search["tried"] == [[batch, True] for batch in (1, 2, 4, 8, 16, 32, 64, 128)]
    assert (search["rule"], search["chosen_by"], search["steps_per_epoch"]) == (
        "largest",
        "largest",
        2,
    )
    assert (
        "trainer.batch_size=auto: 128 is the largest batch that trains on cpu (the training split "
        "holds no larger power of two; 8 tries, "
    ) in searched.stderr
    # Asked for, the largest halved, however few its steps: the line warns.
    assert (
        "training at 64, the largest (trainer.auto_batch=largest) halved once by "
        "trainer.auto_batch_halvings=1 (2 optimizer steps an epoch: fewer than "
        "trainer.auto_batch_min_steps=20), with optimizer.lr=0.01 as given (not scaled with the "
        "batch)"
    ) in searched.stderr
    log = (searched.run_dir / "train.log").read_text().splitlines()
    assert "[WARNING] - trainer.batch_size=auto: " in next(
        line for line in log if "training at" in line
    )
    # Resumed for a third epoch: the batch it found, not searched again.
    resumed = train_cli(tmp_path / "auto", f"resume={searched.run_dir}", "trainer.epochs=3")
    assert resumed.returncode == 0, resumed.stderr
    assert "trainer.batch_size=auto: 64, as its search found before the resume" in resumed.stderr
    assert "is the largest batch" not in resumed.stderr
    assert results(searched.run_dir)["epochs_completed"] == 3


# One epoch of TINY at the batch its search chose by the default rule (the knee, bounded to
# leave 20 optimizer steps of its 128 rows: 4 or less), or at 64 given.
SEARCHED = (*TINY, "trainer.epochs=1", "trainer.batch_size=auto")
GIVEN = (*TINY, "trainer.epochs=1", "trainer.batch_size=64")


@pytest.fixture(scope="module")
def searched_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return trained_run(tmp_path_factory.mktemp("searched"), *SEARCHED)


def test_the_default_rule_leaves_an_epoch_20_steps_and_says_why(searched_run: Path) -> None:
    result = results(searched_run)
    search, batch = result["batch_search"], result["batch_size"]
    # Whatever the speeds measured here: 128 rows at 4 are 32 steps, at 8 only 16.
    assert batch <= 4 and search["steps_per_epoch"] == 128 // batch >= 20
    assert (search["trained"], search["rule"], search["min_steps"]) == (batch, "knee", 20)
    # The choice, made again from the speeds it recorded, is the one it made.
    timed = {size: [speed] for size, speed in search["speeds"]}
    again = choose_batch(timed, search["largest"], Epoch(128), Rule())
    assert (again.batch, again.chosen_by, again.knee) == (
        batch,
        search["chosen_by"],
        search["knee"],
    )
    assert [size for size, _ in search["speeds"]] == [1, 2, 4, 8, 16, 32, 64, 128]
    why = {
        KNEE: f"training at {batch}, the knee ({128 // batch} optimizer steps an epoch)",
        MIN_STEPS: (
            f"training at {batch}, below the knee: the largest batch that leaves an epoch "
            f"trainer.auto_batch_min_steps=20 optimizer steps or more ({128 // batch} optimizer "
            "steps an epoch)"
        ),
    }[search["chosen_by"]]
    (line,) = [
        line.partition("[INFO] - ")[2]
        for line in (searched_run / "train.log").read_text().splitlines()
        if "is the largest batch" in line
    ]
    assert line.startswith(
        "trainer.batch_size=auto: 128 is the largest batch that trains on cpu (the training split "
        "holds no larger power of two; 8 tries, "
    )
    assert f"; the knee, where more batch stops paying, is {search['knee']} (" in line
    assert line.endswith(
        f"; {why}, with optimizer.lr=0.01 as given (not scaled with the batch); "
        "trainer.auto_batch=largest trains at 128"
    )


def _copy(run_dir: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    return copy


def _copy_with_checkpoint(
    run_dir: Path, tmp_path: Path, change: Callable[[dict[str, Any]], None]
) -> Path:
    """A copy of `run_dir` whose last checkpoint `change` altered (saved again, its checksum
    valid)."""
    copy = _copy(run_dir, tmp_path)
    checkpoint = checkpoints.load(copy / checkpoints.LAST)
    change(checkpoint)
    checkpoints.save(copy / checkpoints.LAST, checkpoint)
    return copy


def test_a_resumed_search_is_kept_in_the_records(searched_run: Path, tmp_path: Path) -> None:
    run_dir = _copy(searched_run, tmp_path)
    search = results(searched_run)["batch_search"]
    batch = search["trained"]
    assert checkpoints.load(run_dir / checkpoints.LAST)["batch_search"] == search
    resumed = train_cli(tmp_path, f"resume={run_dir}", "trainer.epochs=2")
    assert resumed.returncode == 0, resumed.stderr
    said = f"trainer.batch_size=auto: {batch}, as its search found before the resume"
    assert said in resumed.stderr and "is the largest batch" not in resumed.stderr
    result = results(run_dir)
    assert (result["epochs_completed"], result["batch_size"]) == (2, batch)
    assert result["batch_search"] == search  # the device cards' and the report's largest batch
    assert checkpoints.load(run_dir / checkpoints.LAST)["batch_search"] == search


def test_a_checkpoint_older_than_its_search_record_takes_it_from_results_json(
    searched_run: Path, tmp_path: Path
) -> None:
    # As versions before it saved checkpoints.
    run_dir = _copy_with_checkpoint(searched_run, tmp_path, lambda state: state.pop("batch_search"))
    last = run_dir / checkpoints.LAST
    search = results(searched_run)["batch_search"]
    resumed = train_cli(tmp_path, f"resume={run_dir}", "trainer.epochs=2")
    assert resumed.returncode == 0, resumed.stderr
    assert results(run_dir)["batch_search"] == search
    assert checkpoints.load(last)["batch_search"] == search


def test_a_search_record_of_another_batch_is_no_record(searched_run: Path, tmp_path: Path) -> None:
    # A checkpoint without one, and results.json's (read as data) of another batch than it.
    run_dir = _copy_with_checkpoint(searched_run, tmp_path, lambda state: state.pop("batch_search"))
    edited = results(run_dir)
    batch = edited["batch_search"]["trained"]
    edited["batch_search"]["trained"] = 2 * batch
    (run_dir / "results.json").write_text(json.dumps(edited))
    resumed = train_cli(tmp_path, f"resume={run_dir}", "trainer.epochs=2")
    assert resumed.returncode == 1 and "Traceback" not in resumed.stderr
    assert resumed.last_line.endswith(
        f"Error: resume={run_dir}: it was trained with trainer.batch_size={batch}, not auto; a "
        f"run keeps its batch size throughout: resume with trainer.batch_size={batch}, or start "
        f"a new run with replay={run_dir} trainer.batch_size=auto"
    )
    assert results(run_dir) == edited


def test_a_checkpoint_whose_search_record_is_not_a_search_is_refused(
    searched_run: Path, tmp_path: Path
) -> None:
    def spoil(state: dict[str, Any]) -> None:
        state["batch_search"]["largest"] = "lots"

    run_dir = _copy_with_checkpoint(searched_run, tmp_path, spoil)
    last = run_dir / checkpoints.LAST
    resumed = train_cli(tmp_path, f"resume={run_dir}", "trainer.epochs=2")
    assert resumed.returncode == 1 and "Traceback" not in resumed.stderr
    assert resumed.last_line.endswith(
        f"Error: checkpoint {last} is not one of this tool's: its batch_search: largest is text "
        '("lots"), where a whole number belongs; it was altered, and was not used'
    )


@pytest.mark.parametrize(
    ("overrides", "refused"),
    [
        # Its search is not run again: another rule would train at another batch.
        (
            ["trainer.auto_batch=largest"],
            "it was trained with trainer.auto_batch=knee, not largest; a run keeps the batch its "
            "search chose: resume with trainer.auto_batch=knee, or start a new run with "
            "replay={run} trainer.auto_batch=largest",
        ),
        (
            ["trainer.auto_batch_min_steps=10"],
            "it was trained with trainer.auto_batch_min_steps=20, not 10; a run keeps the batch "
            "its search chose: resume with trainer.auto_batch_min_steps=20, or start a new run "
            "with replay={run} trainer.auto_batch_min_steps=10",
        ),
        # The batch its search found, given as a number: the run's config would say another.
        (
            ["trainer.batch_size=64"],
            "it was trained with trainer.batch_size=auto, not 64; a run keeps its batch size "
            "throughout: resume with trainer.batch_size=auto, or start a new run with "
            "replay={run} trainer.batch_size=64",
        ),
    ],
)
def test_a_resume_cannot_change_how_its_batch_was_chosen(
    searched_run: Path, tmp_path: Path, overrides: list[str], refused: str
) -> None:
    run_dir = _copy(searched_run, tmp_path)
    before = (run_dir / "results.json").read_bytes()
    resumed = train_cli(tmp_path, f"resume={run_dir}", "trainer.epochs=2", *overrides)
    assert resumed.returncode == 1 and "Traceback" not in resumed.stderr
    assert resumed.last_line.endswith(f"Error: resume={run_dir}: {refused.format(run=run_dir)}")
    assert (run_dir / "results.json").read_bytes() == before


def test_a_run_of_a_given_batch_is_not_resumed_as_searched(tmp_path: Path) -> None:
    run_dir = trained_run(tmp_path, *GIVEN)
    before = (run_dir / "results.json").read_bytes()
    resumed = train_cli(
        tmp_path, f"resume={run_dir}", "trainer.epochs=2", "trainer.batch_size=auto"
    )
    assert resumed.returncode == 1 and "Traceback" not in resumed.stderr
    assert "as its search found" not in resumed.stderr
    assert resumed.last_line.endswith(
        f"Error: resume={run_dir}: it was trained with trainer.batch_size=64, not auto; a run "
        "keeps its batch size throughout: resume with trainer.batch_size=64, or start a new run "
        f"with replay={run_dir} trainer.batch_size=auto"
    )
    assert (run_dir / "results.json").read_bytes() == before


@pytest.mark.slow
def test_a_budget_no_batch_fits_in_fails_the_run_in_one_line(tmp_path: Path) -> None:
    done = train_cli(tmp_path, *TINY, "trainer.batch_size=auto", "trainer.memory_budget_gb=0.01")
    assert done.returncode == 1
    assert done.last_line.endswith(
        "Error: trainer.batch_size=auto: not even a batch of 1 trains on cpu within "
        "trainer.memory_budget_gb=0.01 (the process's peak memory); raise it, or give "
        "trainer.batch_size a number"
    )
    assert results(done.run_dir)["status"] == "failed"


@pytest.mark.gpu
def test_on_a_gpu_the_search_runs_out_of_memory_frees_it_and_trains(tmp_path: Path) -> None:
    # This process may take 8 GiB of the GPU at most (a quarter of a smaller one), so the search
    # runs out of memory in seconds, whatever the GPU, and leaves the rest to the other worker.
    # An MLP of 2**16 units (1.6 GB of weights and gradients, about 0.5 MiB of activations an
    # image) then fills it at a batch of some thousands, in a split of 2**16 images.
    total = torch.cuda.get_device_properties(0).total_memory
    allowed = min(8 * 2**30, total // 4)
    torch.cuda.set_per_process_memory_fraction(allowed / total, 0)
    try:
        done = train_cli(
            tmp_path,
            "device=cuda:0",
            "model=mlp",
            "model.hidden_sizes=[65536]",
            "dataset=synthetic",
            "dataset.train_size=65536",
            "dataset.test_size=64",
            "trainer.epochs=1",
            "trainer.limit_train_batches=1",
            *LARGEST_HALVED,
        )
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0, 0)
        torch.cuda.empty_cache()
    assert done.returncode == 0, done.stderr
    result = results(done.run_dir)
    search = result["batch_search"]
    assert search["stopped_by"] == OUT_OF_MEMORY and search["budget_gb"] is None
    assert search["tried"][-1] == [2 * search["largest"], False]
    # The failed try's memory was freed: the run trained at half the largest after it.
    assert result["batch_size"] == search["largest"] // 2
    assert result["peak_cuda_memory_mb"] < allowed / 2**20
