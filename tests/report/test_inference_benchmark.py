"""The report of evaluations that benchmarked their model (eval.py benchmark=true): a row per
evaluation with its latency, images/s, peak memory and J/image, the Serving section (a row per
configuration: evaluations that differ only in `seed`), its verdicts paired by seed, serving.csv,
verdicts.json, and the table a sweep of evaluations prints at its end. The evaluation folders are
written here as eval.py and Hydra leave them in a multirun's job folder."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from experiments.report import inference_benchmark, summary, sweep_end, verdicts
from helpers import SMALL, eval_cli, paired_by_scipy, trained_run, welch_by_scipy

# Per seed 0, 1, 2: p50 latency in ms, images/s at the serving batch.
CPU = [(4.0, 1000.0), (4.4, 1100.0), (3.9, 950.0)]
GPU = [(1.3, 12000.0), (1.4, 13500.0), (1.2, 11000.0)]
DEVICES = {"cpu": ("cpu", "cpu", "AMD EPYC"), "cuda": ("cuda:0", "cuda", "NVIDIA H200")}


def write_evaluation(
    job: Path, overrides: dict[str, str], serving_record: dict[str, Any] | None, **results: Any
) -> None:
    """An evaluation's folder as `eval.py -m ... benchmark=true` leaves it: Hydra's snapshot of
    its config, overrides and choices, and results.json with its `serving` record."""
    device = overrides.get("device", "cpu")
    used, kind, name = DEVICES[device]
    config = {
        "ckpt": "/runs/train",
        "model": None,
        "task": None,
        "dataset": None,
        "device": {"name": device, "index": None, "ids": None, "visible": None},
        "placement": {"name": "to_device"},
        "batch_size": 256,
        "benchmark": True,
        "serving": {"batch_size": None, "latency_calls": 100, "warmup_calls": 10, "rounds": 5},
        "precision": "fp32",
        "channels_last": False,
        "compile": None,
        "compile_mode": None,
        "threads": None,
        "seed": 0,
    }
    for key, value in overrides.items():
        if key != "device":  # (a group: Hydra's choice)
            *path, last = key.split(".")
            within = config
            for part in path:
                within = within[part]
            within[last] = yaml.safe_load(value)
    hydra = job / ".hydra"
    hydra.mkdir(parents=True)
    (hydra / "config.yaml").write_text(yaml.safe_dump(config))
    given = ["ckpt=/runs/train", "benchmark=true", *(f"{k}={v}" for k, v in overrides.items())]
    (hydra / "overrides.yaml").write_text(yaml.safe_dump(given))
    choices = {"device": device, "placement": "to_device", "model": None, "dataset": None}
    (hydra / "hydra.yaml").write_text(yaml.safe_dump({"hydra": {"runtime": {"choices": choices}}}))
    recorded = {
        "status": "completed",
        "reason": None,
        "run_dir": str(job),
        "kind": "evaluation",
        "device": {"requested": device, "used": used, "type": kind, "index": None, "name": name},
        "started_at": "2026-11-28T10:11:07+00:00",
        "process": {"host": "elsewhere", "pid": 1},
        "checkpoint": "/runs/train/checkpoints/last.pt",
        "data": {"unit": "images"},
        "model": "tudui",
        "trained_on": "cifar10_sample",
        "trained_epochs": 1,
        "dataset": "cifar10_sample",
        "test_images": 64,
        "test_split_images": 1000,
        "test_loss": 2.29,
        "test_accuracy": 0.140625,
        "seconds": 0.03,
        "finished_at": "2026-11-28T10:11:08+00:00",
        **results,
    }
    if serving_record is not None:
        recorded["serving"] = serving_record
    (job / "results.json").write_text(json.dumps(recorded))


def served(p50: float, per_second: float, batch: int = 256, **fields: Any) -> dict[str, Any]:
    """A serving record of the contract's fields."""
    return {
        "batch_size": batch,
        "latency_calls": 100,
        "warmup_calls": 10,
        "latency_p50_ms": p50,
        "latency_p95_ms": p50 * 1.2,
        "latency_p99_ms": p50 * 1.5,
        "latency_mean_ms": p50 * 1.05,
        "images_per_second": per_second,
        "images_per_second_min": per_second * 0.95,
        "images_per_second_max": per_second * 1.05,
        "rounds": 5,
        "batches_per_round": 4,
        "peak_memory_mb": 800.0,
        "memory_of": "host",
        "precision": "fp32",
        "channels_last": False,
        "compile": None,
        "compile_mode": None,
        "energy": None,
        "energy_note": "no /sys/class/powercap on this machine",
        "joules_per_image": None,
        "average_watts": None,
        "host_other_cpu_share": 0.0,
        "host_busy": False,
        **fields,
    }


def write_sweep(folder: Path, swept: dict[str, list[str]], jobs: list[tuple[dict, Any]]) -> Path:
    """A sweep folder of evaluations: multirun.yaml with the command line's swept values, and a
    job folder per (overrides, serving record) in the order given."""
    folder.mkdir(parents=True)
    task = ["ckpt=/runs/train", "benchmark=true", *(f"{k}={','.join(v)}" for k, v in swept.items())]
    multirun = {
        "hydra": {
            "sweeper": {"_target_": "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"},
            "overrides": {"task": task},
        }
    }
    (folder / "multirun.yaml").write_text(yaml.safe_dump(multirun))
    for number, (overrides, record) in enumerate(jobs):
        write_evaluation(folder / str(number), overrides, record)
    return folder


def device_sweep(folder: Path) -> Path:
    """`eval.py -m device=cpu,cuda ckpt=<run> benchmark=true seed=0,1,2`, the seed's sweep
    first: each seed's devices back to back."""
    jobs = [
        ({"seed": str(seed), "device": device}, served(*numbers[seed]))
        for seed in range(3)
        for device, numbers in (("cpu", CPU), ("cuda", GPU))
    ]
    return write_sweep(folder, {"seed": ["0", "1", "2"], "device": ["cpu", "cuda"]}, jobs)


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as file:
        return list(csv.DictReader(file))


def ratio_and_interval(first: list[float], second: list[float], paired: bool) -> str:
    """`0.31x [0.29, 0.33]`: first over second, on the log scale, as scipy finds it."""
    logs = [[math.log(x) for x in side] for side in (first, second)]
    low, high = (math.exp(end) for end in (paired_by_scipy if paired else welch_by_scipy)(*logs))
    ratio = math.exp(sum(logs[0]) / len(first) - sum(logs[1]) / len(second))
    return f"{ratio:.2f}x [{low:.2f}, {high:.2f}]"


def test_a_device_sweep_of_evaluations_gets_rows_a_serving_table_and_verdicts(
    tmp_path: Path,
) -> None:
    sweep = device_sweep(tmp_path / "sweep")
    rows = summary.write_report(sweep)

    assert [row["run"] for row in rows] == ["0", "1", "2", "3", "4", "5"]
    first = rows[1]  # seed 0 on the GPU
    assert (first["kind"], first["status"]) == ("evaluation", "completed")
    assert first["device"] == "cuda:0"
    assert first["swept"] == {"seed": "0", "device": "cuda:0"}
    assert (first["latency_p50_ms"], first["serving_images_per_second"]) == GPU[0]
    assert first["latency_p99_ms"] == pytest.approx(1.3 * 1.5)
    assert (first["serving_peak_memory_mb"], first["serving_joules_per_image"]) == (800.0, None)
    assert first["model"] == "tudui"  # what it evaluated, though its config names no model

    # summary.csv: a column per measure, the swept keys; none empty for every run.
    table = read_csv(sweep / "summary.csv")
    assert [row["latency_p50_ms"] for row in table] == ["4.0", "1.3", "4.4", "1.4", "3.9", "1.2"]
    assert {"seed", "device", "serving_batch_size", "serving_images_per_second"} <= set(table[0])
    assert "serving_joules_per_image" not in table[0]  # measured by none
    assert "train_images_per_second" not in table[0]

    # serving.csv: a row per device, its three seeds summed up on the log scale.
    cpu, gpu = read_csv(sweep / "serving.csv")
    assert (cpu["device"], cpu["n"], cpu["runs"]) == ("cpu", "3", "0 2 4")
    geomean = math.exp(sum(math.log(p50) for p50, _ in GPU) / 3)
    assert float(gpu["latency_p50_ms_geomean"]) == pytest.approx(geomean)
    assert float(gpu["serving_images_per_second_n"]) == 3
    assert not (sweep / "configurations.csv").exists()  # no training runs

    # The verdicts, seed by seed, the better side first: the GPU answers in less time.
    faster = ratio_and_interval([p for p, _ in GPU], [p for p, _ in CPU], paired=True)
    more = ratio_and_interval([s for _, s in GPU], [s for _, s in CPU], paired=True)
    latency = f"cuda:0 answers at batch 1 in {faster} the time of cpu (paired by seed, 3 pairs)"
    speed = f"cuda:0 serves {more} as many images/s as cpu at batch 256 (paired by seed, 3 pairs)"
    said = json.loads((sweep / "verdicts.json").read_text())
    assert [verdict["text"] for verdict in said] == [latency, speed]
    assert [verdict["method"] for verdict in said] == ["paired by seed"] * 2
    assert all(verdict["differs"] and verdict["key"] == "device" for verdict in said)

    markdown = (sweep / "summary.md").read_text().split("\n\n")
    heading, cells, verdicts_heading, listed = markdown[1:5]
    assert heading == inference_benchmark.HEADING + ":"
    header, _, cpu_cells, gpu_cells = cells.splitlines()
    assert header == "| device | n | p50 ms | p95 ms | p99 ms | served img/s | peak memory |"
    cpu_p50 = math.exp(sum(math.log(p50) for p50, _ in CPU) / 3)
    assert cpu_cells.startswith(f"| cpu | 3 | {cpu_p50:.3g} (")
    assert gpu_cells.startswith("| cuda:0 | 3 | ")
    assert verdicts_heading == inference_benchmark.VERDICTS + ":"
    assert listed.splitlines() == [f"- {latency}", f"- {speed}"]
    assert len(markdown) == 5  # no warning: each seed's devices ran back to back, interleaved


def test_the_end_of_a_sweep_of_evaluations_prints_what_completed_failed_and_served(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = device_sweep(tmp_path / "sweep")
    assert sweep_end.report(sweep) is True
    console = capsys.readouterr().err
    lines = console.splitlines()
    assert lines[0] == f"6 run(s) in {sweep}: 6 completed"
    headers = "run model dataset device placement seed status test acc test images p50 ms p95 ms"
    assert lines[1].split() == f"{headers} p99 ms served batch served img/s served MiB".split()
    assert lines[2].split()[3:7] == ["cpu", "to_device", "0", "completed"]
    assert (
        inference_benchmark.HEADING + ":" in lines and inference_benchmark.VERDICTS + ":" in lines
    )
    assert any(line.startswith("  cuda:0 answers at batch 1 in 0.3") for line in lines)
    assert lines[-1] == f"report: {sweep}/summary.md (and .csv, plots)"

    # A job that failed: listed with why, no serving record; the others' section stands.
    job = sweep / "5"
    recorded = json.loads((job / "results.json").read_text())
    recorded.update(status="failed", reason="CUDA out of memory at serving.batch_size=256")
    del recorded["serving"]
    (job / "results.json").write_text(json.dumps(recorded))
    assert sweep_end.report(sweep) is False
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == f"6 run(s) in {sweep}: 5 completed, 1 failed"
    assert "5: CUDA out of memory at serving.batch_size=256" in lines
    (cpu,) = [line for line in lines if line.startswith("cpu ")]
    assert cpu.split()[1] == "3"
    (gpu,) = [line for line in lines if line.startswith("cuda:0 ")]
    assert gpu.split()[1] == "2"


def test_benchmarks_on_a_busy_host_are_counted_by_side(tmp_path: Path) -> None:
    sweep = device_sweep(tmp_path / "sweep")
    for job in ("0", "2", "4"):  # every CPU benchmark shared its cores with other work
        recorded = json.loads((sweep / job / "results.json").read_text())
        recorded["serving"].update(host_other_cpu_share=0.5, host_busy=True)
        (sweep / job / "results.json").write_text(json.dumps(recorded))
    summary.write_report(sweep)
    latency, _ = json.loads((sweep / "verdicts.json").read_text())
    assert latency["busy_runs"] == [0, 3]
    assert latency["text"].endswith(
        "(paired by seed, 3 pairs; busy host: 0 of 3 cuda:0 runs, 3 of 3 cpu runs, all on one "
        "side: not to be trusted for speed)"
    )
    assert "| 3, 3 busy |" in (sweep / "summary.md").read_text()


def test_seeds_that_differ_between_the_sides_are_compared_unpaired(tmp_path: Path) -> None:
    jobs = [({"seed": str(seed), "device": "cpu"}, served(*CPU[seed])) for seed in range(3)]
    jobs += [({"seed": str(seed), "device": "cuda"}, served(*GPU[seed - 3])) for seed in (3, 4, 5)]
    sweep = write_sweep(tmp_path / "sweep", {"seed": list("012345"), "device": ["cpu"]}, jobs)
    summary.write_report(sweep)
    latency, _ = json.loads((sweep / "verdicts.json").read_text())
    faster = ratio_and_interval([p for p, _ in GPU], [p for p, _ in CPU], paired=False)
    assert latency["text"] == (
        f"cuda:0 answers at batch 1 in {faster} the time of cpu (Welch's t, 3 runs each)"
    )


def test_keys_not_groups_name_their_side_and_a_batch_swept_is_no_shared_batch(
    tmp_path: Path,
) -> None:
    """`eval.py -m serving.batch_size=64,256 seed=0,1`: the sides are named with their key, and
    the throughput's verdict says no one batch; one seed each is no verdict, asked to repeat."""
    jobs = [
        ({"seed": str(seed), "serving.batch_size": str(batch)}, served(4.0, speed, batch=batch))
        for seed in range(2)
        for batch, speed in ((64, 900.0 + seed), (256, 1500.0 + 2 * seed))
    ]
    sweep = write_sweep(
        tmp_path / "sweep", {"seed": ["0", "1"], "serving.batch_size": ["64", "256"]}, jobs
    )
    rows = summary.write_report(sweep)
    found = inference_benchmark.benchmark_verdict_lines(rows)
    _, speed = found.verdicts
    assert speed.text.startswith("serving.batch_size=256 serves 1.6")
    assert speed.text.endswith(" images/s as serving.batch_size=64 (paired by seed, 2 pairs)")
    once = [row for row in rows if row["swept"]["seed"] == "0"]
    repeat = "one run each: no verdict; repeat with `-m seed=0,1,2`"
    assert inference_benchmark.benchmark_verdict_lines(once).lines == [(0, repeat)]


def test_a_serving_record_of_the_wrong_shape_makes_its_row_unreadable(tmp_path: Path) -> None:
    sweep = device_sweep(tmp_path / "sweep")
    job = sweep / "1"
    recorded = json.loads((job / "results.json").read_text())
    recorded["serving"]["latency_p50_ms"] = "fast"
    (job / "results.json").write_text(json.dumps(recorded))
    rows = summary.write_report(sweep)
    assert (rows[1]["status"], rows[1]["reason"]) == (
        "unreadable",
        'results.json: serving.latency_p50_ms is text ("fast"), where a number belongs',
    )
    (cpu, gpu) = read_csv(sweep / "serving.csv")
    assert (cpu["n"], gpu["n"]) == ("3", "2")


def test_an_evaluation_without_a_benchmark_is_a_row_without_a_serving_section(
    tmp_path: Path,
) -> None:
    jobs = [({"batch_size": str(batch)}, None) for batch in (32, 64)]
    sweep = write_sweep(tmp_path / "sweep", {"batch_size": ["32", "64"]}, jobs)
    rows = summary.write_report(sweep)
    assert [(row["status"], row["swept"]) for row in rows] == [
        ("completed", {"batch_size": "32"}),
        ("completed", {"batch_size": "64"}),
    ]
    assert rows[0]["test_accuracy"] == 0.140625
    assert not (sweep / "serving.csv").exists()
    assert inference_benchmark.HEADING not in (sweep / "summary.md").read_text()


def test_energy_per_image_served_is_summed_up_where_measured(tmp_path: Path) -> None:
    energy = {
        "source": "nvml",
        "joules": 40.0,
        "seconds": 2.0,
        "watts": 20.0,
        "counters": [{"name": "cuda:0", "joules": 40.0, "watts": 20.0}],
        "covers": "the whole GPU: every process on it",
    }
    jobs = [
        ({"seed": str(seed), "device": "cuda"}, served(1.3, 12000.0, energy=energy, **joules))
        for seed, joules in enumerate(
            [{"joules_per_image": 0.010}, {"joules_per_image": 0.012}, {}]
        )
    ]
    sweep = write_sweep(tmp_path / "sweep", {"seed": ["0", "1", "2"]}, jobs)
    summary.write_report(sweep)
    (gpu,) = read_csv(sweep / "serving.csv")
    assert float(gpu["serving_joules_per_image_n"]) == 2  # the third none: not measured
    assert float(gpu["serving_joules_per_image_geomean"]) == pytest.approx(math.sqrt(0.012 * 0.01))
    markdown = (sweep / "summary.md").read_text()
    assert "| served J/image |" in markdown.splitlines()[0] + " |"
    assert "| J/image |" in markdown
    assert "0.011 J (" in markdown and ", 2 of 3 runs |" in markdown


def test_the_training_judgement_is_unchanged_by_the_evaluations_seed() -> None:
    """Training sweeps repeat on trainer.seed; an evaluation sweep on seed."""
    assert verdicts.TRAINING_RULES.repeat == "repeat with `-m trainer.seed=0,1,2`"
    assert inference_benchmark.BENCHMARK_RULES.counts(
        "trainer.seed"
    ) and not inference_benchmark.BENCHMARK_RULES.counts("seed")


def test_a_sweep_of_evaluations_ends_with_its_report(tmp_path: Path) -> None:
    """conf/eval.yaml's SweepReport: `eval.py -m` reports as `train.py -m` does."""
    run = trained_run(tmp_path / "train", *SMALL)
    done = eval_cli(tmp_path, "-m", f"ckpt={run}", "device=cpu", "batch_size=32,64")
    assert done.returncode == 0, done.stderr
    (multirun_yaml,) = tmp_path.rglob("multirun.yaml")  # (Hydra's multirun/: eval.yaml's sweep)
    sweep = multirun_yaml.parent
    named = sweep.relative_to(tmp_path)  # as the sweep's config names it
    assert f"2 run(s) in {named}: 2 completed" in done.stderr
    assert done.last_line == f"report: {named}/summary.md (and .csv, plots)"
    assert [row["batch_size"] for row in read_csv(sweep / "summary.csv")] == ["32", "64"]


def test_a_key_a_runs_config_does_not_hold_is_no_value_of_it_not_null(tmp_path: Path) -> None:
    """`python -m experiments.report outputs` over a training run and an evaluation: the one's
    trainer keys are not the other's, nor its ckpt."""
    write_evaluation(tmp_path / "eval", {"device": "cpu"}, served(*CPU[0]))
    training = tmp_path / "train" / ".hydra"
    training.mkdir(parents=True)
    config = {"trainer": {"epochs": 1, "threads": None}, "device": {"name": "cpu"}}
    (training / "config.yaml").write_text(yaml.safe_dump(config))
    overrides = ["trainer.epochs=1", "trainer.threads=null"]
    (training / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    evaluated, trained = summary.write_report(tmp_path)
    assert (evaluated["kind"], trained.get("kind")) == ("evaluation", None)
    keys = ("trainer.epochs", "trainer.threads", "ckpt", "benchmark")
    assert [trained["swept"][key] for key in keys] == ["1", "null", "", ""]
    assert [evaluated["swept"][key] for key in keys] == ["", "", "/runs/train", "True"]
