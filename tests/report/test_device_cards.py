"""The device cards that end a report of runs on more than one device: per device its name, speed,
MFU and peak memory summed up over its runs, then the verdicts between the devices."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest

from experiments.report import device_cards, repeats, summary
from experiments.report import to_target as to_target_of
from experiments.report.prices import parse_prices
from experiments.report.statistics import log_spread
from experiments.report.summary import COLUMNS

# Per seed: train images/s, MFU, host MiB, GPU MiB.
CPU = [(1000.0, 0.40, 800.0, None), (1100.0, 0.44, 810.0, None), (900.0, 0.36, 790.0, None)]
GPU = [
    (8000.0, 0.020, 2000.0, 500.0),
    (8800.0, 0.022, 2010.0, 510.0),
    (7200.0, 0.018, 1990.0, 490.0),
]
NAMES = {"cpu": "AMD EPYC", "cuda:0": "NVIDIA H200"}
PEAKS = {"cpu": 1e11, "cuda:0": 2e14}


def rows_of(runs: dict[tuple[str, str], list[tuple]], models: bool = False) -> list[dict[str, Any]]:
    """A sweep's rows as the report reads them, the seed first, by (device, model)."""
    rows = []
    for seed in range(3):
        for (device, model), measured in runs.items():
            speed, mfu, host, cuda = measured[seed]
            swept = {"trainer.seed": str(seed), "device": device}
            if models:
                swept["model"] = model
            rows.append(
                {
                    **dict.fromkeys(column.key for column in COLUMNS),
                    "run": f"{len(rows)}_job",
                    "status": "completed",
                    "swept": swept,
                    "device": device,
                    "device_name": NAMES[device],
                    "model": model,
                    "train_images_per_second": speed,
                    "mfu": mfu,
                    "peak_host_memory_mb": host,
                    "peak_cuda_memory_mb": cuda,
                    "device_peak_flops": PEAKS[device],
                    "model_training_flops_per_image": 1e8,
                }
            )
    return rows


def test_each_device_gets_a_card_and_the_verdicts_between_them() -> None:
    lines = device_cards.cards(rows_of({("cpu", "tudui"): CPU, ("cuda:0", "tudui"): GPU}))
    cpu, gpu, heading, speed, mfu = lines
    assert cpu[0] == gpu[0] == 0 and cpu[1].startswith("cpu (AMD EPYC), 3 runs: train img/s 997 (")
    assert "MFU 39.9% (" in cpu[1] and "host memory 800 MiB ± 10 MiB (" in cpu[1]
    assert "GPU memory" not in cpu[1]  # none recorded on the CPU
    assert gpu[1].startswith("cuda:0 (NVIDIA H200), 3 runs: train img/s 7,973 (")
    assert "GPU memory 500 MiB ± 10 MiB (" in gpu[1]
    assert heading == (0, "between devices:")
    assert speed == (1, "cuda:0 trains 8.00x [8.00, 8.00] as fast as cpu (paired by seed, 3 pairs)")
    assert mfu[1].startswith("cpu uses 20.00x [20.00, 20.00] the share of its peak that cuda:0")


def test_one_device_gets_a_card_where_devices_were_swept() -> None:
    rows = rows_of({("cpu", "tudui"): CPU})  # -m device=every on a machine of one CPU
    ((depth, card),) = device_cards.cards(rows)
    assert depth == 0 and card.startswith("cpu (AMD EPYC), 3 runs: train img/s 997 (")
    for row in rows:
        del row["swept"]["device"]
    assert device_cards.cards(rows) == []  # runs on their one device: the tables say it all


def test_a_device_that_ran_several_configurations_lists_each() -> None:
    runs = {("cpu", "tudui"): CPU, ("cpu", "lenet"): CPU, ("cuda:0", "tudui"): GPU}
    lines = device_cards.cards(rows_of(runs, models=True))
    assert lines[0] == (0, "cpu (AMD EPYC):")
    assert lines[1][0] == 1 and lines[1][1].startswith("model=tudui, 3 runs: train img/s 997 (")
    assert lines[2][1].startswith("model=lenet, 3 runs: ")
    assert lines[3][1].startswith("cuda:0 (NVIDIA H200), model=tudui, 3 runs")
    # Compared where the other keys are held equal: tudui on both devices.
    assert (0, "between devices:") in lines
    assert any(text.startswith("with model=tudui: cuda:0 trains 8.00x") for _, text in lines)


def test_summary_md_ends_with_the_cards() -> None:
    text = summary.markdown(rows_of({("cpu", "tudui"): CPU, ("cuda:0", "tudui"): GPU}))
    cards = text.split(f"{device_cards.HEADING}:\n\n")[1]
    assert cards.startswith("- cpu (AMD EPYC), 3 runs: train img/s 997 (")
    assert "\n- between devices:\n  - cuda:0 trains 8.00x" in cards


def test_a_searched_batch_and_a_sweeps_knee_are_on_their_devices_card() -> None:
    rows = rows_of({("cpu", "tudui"): CPU, ("cuda:0", "tudui"): GPU})
    for row in rows:
        # trainer.batch_size=auto, halved 0 or 1 times by seed: a sweep over batch sizes.
        halvings = int(row["swept"]["trainer.seed"]) % 2
        row["swept"]["trainer.auto_batch_halvings"] = str(halvings)
        largest = 4096 if row["device"] == "cpu" else 65536
        row["batch_size"] = largest >> halvings
        row["batch_search"] = {
            "largest": largest,
            "stopped_by": "memory budget" if row["device"] == "cpu" else "out of memory",
            "budget_gb": 4.0 if row["device"] == "cpu" else None,
        }
        row["largest_batch"] = largest
    texts = [text for _, text in device_cards.cards(rows)]
    assert texts[0] == "cpu (AMD EPYC):"
    assert texts[1].startswith("trainer.auto_batch_halvings=0, 2 runs: train img/s ")
    assert texts[1].endswith(", largest batch 4096 (memory budget 4 GB)")
    # Seeds 0 and 2 (950 img/s) at 4096, seed 1 (1,100) at 2048: the smaller batch is faster.
    assert texts[3] == "knee 2048 (1,100 img/s, the best)"
    assert texts[5].endswith(", largest batch 65536 (out of memory)")
    # configurations.csv has it per configuration, as a measure of its runs.
    table = list(csv.DictReader(io.StringIO(repeats.csv_text(repeats.configurations(rows)))))
    assert [float(row["largest_batch_mean"]) for row in table] == [4096, 65536, 4096, 65536]
    assert float(table[0]["peak_host_memory_mb_mean"]) == 795.0  # seeds 0 and 2: 800, 790


def test_an_mfus_interval_stops_at_the_whole_peak() -> None:
    # Three noisy runs: the interval of their geometric mean would reach past 100%.
    summed = repeats.MFU.spread([0.2, 0.9, 0.5])
    low, high = summed.interval
    assert 0 < low < summed.mean < high == 1.0
    assert repeats.SPEED.spread([200.0, 900.0, 500.0]).interval[1] > 900  # speeds have no cap


def test_joules_per_train_image_are_on_the_cards_and_the_runs_table_where_measured() -> None:
    rows = rows_of({("cpu", "tudui"): CPU, ("cuda:0", "tudui"): GPU})
    assert "J/image" not in summary.markdown(rows)  # measured by none: no column, no figure
    # Measured on the GPU (NVML); the CPU without /sys/class/powercap measured none.
    for row, joules in zip(rows[1::2], (0.010, 0.012, 0.011), strict=True):
        row["train_joules_per_image"] = joules
    cpu, gpu = (text for _, text in device_cards.cards(rows)[:2])
    assert "J/image" not in cpu
    geomean = (0.010 * 0.012 * 0.011) ** (1 / 3)
    assert f", train J/image {geomean:.3g} J (" in gpu and gpu.endswith(" J)")
    header = summary.markdown(rows).splitlines()[0]
    assert "| train J/image |" in header
    assert f"| {0.010:.3g} |" in summary.markdown(rows).splitlines()[3]


# Per seed, to 50% val accuracy: training seconds, joules, epochs ("not reached": all three).
CPU_TO_TARGET = [(10.0, 500.0, 4), (11.0, 550.0, 4), (9.0, 450.0, 4)]
GPU_TO_TARGET = [(2.0, 600.0, 4), (2.2, 660.0, 4), (1.8, 540.0, 4)]


def to_target(rows: list[dict[str, Any]], **by_device: list[tuple]) -> list[dict[str, Any]]:
    """The rows with the times, energies and epochs to the target of each device's seeds."""
    for row in rows:
        seconds, joules, epochs = by_device[row["device"]][int(row["swept"]["trainer.seed"])]
        row["time_to_accuracy"], row[to_target_of.ENERGY] = seconds, joules
        row[to_target_of.EPOCHS] = epochs
        row["accuracy_target"] = (0.5, "val", "accuracy", "max")
        row["gpus"] = 1 if row["device"] == "cuda:0" else None
    return rows


def test_devices_are_ranked_by_time_energy_and_cost_to_the_target() -> None:
    rows = rows_of({("cpu", "tudui"): CPU, ("cuda:0", "tudui"): GPU})
    rows = to_target(rows, cpu=CPU_TO_TARGET, **{"cuda:0": GPU_TO_TARGET})
    to_target_of.price(rows, parse_prices("cuda=2.49/h,cpu=0.05/h"))
    texts = [text for _, text in device_cards.cards(rows)]
    cpu_seconds, gpu_seconds = (10.0 * 11.0 * 9.0) ** (1 / 3), (2.0 * 2.2 * 1.8) ** (1 / 3)
    cpu_cost, gpu_cost = cpu_seconds * 0.05 / 3600, gpu_seconds * 2.49 / 3600
    low, high = log_spread([10.0 * 0.05 / 3600, 11.0 * 0.05 / 3600, 9.0 * 0.05 / 3600]).interval
    assert texts[0].endswith(
        f"; to 50% val accuracy: time {cpu_seconds:.3g} s (7.77 s to 12.8 s), energy 498 J (388 J "
        f"to 639 J), cost {cpu_cost:.3g} ({low:.3g} to {high:.3g}) at 0.05/h"
    )
    assert f"cost {gpu_cost:.3g} (" in texts[1] and texts[1].endswith(" at 2.49/h")
    # The GPU is first to the target, the CPU on less energy and for less money: each ranked.
    ranked = texts[texts.index("between devices:") + 3 :]
    assert ranked == [
        "device ranked by time to target, best first (a shared letter: not told apart):",
        f"a  cuda:0: {gpu_seconds:.3g} s",
        f"b  cpu: {cpu_seconds:.3g} s",
        "device ranked by energy to target, best first (a shared letter: not told apart):",
        "a  cpu: 498 J",
        "b  cuda:0: 598 J",
        "device ranked by cost to target, best first (a shared letter: not told apart):",
        f"a  cpu: {cpu_cost:.3g}",
        f"b  cuda:0: {gpu_cost:.3g}",
    ]
    judged = device_cards.to_target_verdicts(repeats.configurations(rows))
    assert [(v.measure, v.first, v.second, v.differs) for v in judged] == [
        ("time to target", "cuda:0", "cpu", True),
        ("energy to target", "cpu", "cuda:0", True),
        ("cost to target", "cpu", "cuda:0", True),
    ]
    assert judged[2].estimate == pytest.approx(cpu_cost / gpu_cost)
    assert judged[0].text.startswith("cuda:0 reaches the target in 0.20x [0.20, 0.20] the time cpu")
    # Two GPUs a run: twice the cost.
    for row in rows:
        row["gpus"] = 2 if row["device"] == "cuda:0" else None
    to_target_of.price(rows, parse_prices("cuda=2.49/h,cpu=0.05/h"))
    gpu_card = device_cards.cards(rows)[1][1]
    assert f"cost {2 * gpu_cost:.3g} (" in gpu_card and gpu_card.endswith(" for each of 2 GPUs")
    # Priced one device alone: the other's card says it has none, and cost ranks nothing.
    to_target_of.price(rows, parse_prices("cuda=2.49/h"))
    cpu_card, *_ = (text for _, text in device_cards.cards(rows))
    assert cpu_card.endswith("energy 498 J (388 J to 639 J), cost: no price for cpu")
    judged = device_cards.to_target_verdicts(repeats.configurations(rows))
    assert "cost to target" not in {verdict.measure for verdict in judged}


def test_runs_that_missed_the_target_are_counted_never_ranked_and_a_faster_device_said_so() -> None:
    gpu_missed = [("not reached",) * 3, *GPU_TO_TARGET[1:]]
    rows = to_target(
        rows_of({("cpu", "tudui"): CPU, ("cuda:0", "tudui"): GPU}),
        cpu=CPU_TO_TARGET,
        **{"cuda:0": gpu_missed},
    )
    cards = [text for _, text in device_cards.cards(rows)]
    assert "; to 50% val accuracy (2 of 3 runs reached it): time 1.99 s (" in cards[1]
    assert "ranked by time to target" not in " ".join(cards)  # cuda:0 is not, and cpu alone
    assert cards[-2:] == [
        "not ranked to the target: cuda:0, 1 of 3 runs did not reach 50% val accuracy",
        "cuda:0 trains 8.00x as fast as cpu but 1 of its 3 runs did not reach 50% val accuracy, "
        "where every cpu run did: faster per image, not to the goal",
    ]
    assert device_cards.to_target_verdicts(repeats.configurations(rows)) == []


def test_a_faster_device_that_took_more_epochs_or_ended_worse_is_not_called_faster() -> None:
    slower = [(seconds, joules, 6) for seconds, joules, _ in GPU_TO_TARGET]
    rows = to_target(
        rows_of({("cpu", "tudui"): CPU, ("cuda:0", "tudui"): GPU}),
        cpu=CPU_TO_TARGET,
        **{"cuda:0": slower},
    )
    checked = (
        "cuda:0 trains 8.00x as fast as cpu but reached 50% val accuracy in 6 epochs against 4"
    )
    assert device_cards.cards(rows)[-1] == (1, f"{checked}: faster per image, slower to converge")
    # Fewer epochs than the CPU: nothing to say; a lower test accuracy beyond the noise: said.
    for row, accuracy in zip(rows, (0.60, 0.50, 0.62, 0.51, 0.61, 0.52), strict=True):
        row["test_accuracy"] = accuracy
        row[to_target_of.EPOCHS] = 3 if row["device"] == "cuda:0" else 4
    lines = device_cards.cards(rows)
    assert lines[-1] == (
        1,
        "cuda:0 trains 8.00x as fast as cpu but to a worse test accuracy, beyond the noise: "
        "faster per image, not to as good a model",
    )
    assert not any("slower to converge" in text for _, text in lines)
