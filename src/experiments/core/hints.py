"""What a user meant by a key the config has not got: the closest, or lightning-hydra-template's."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence

QUICK_RUN = "a quick run is debug=fast (one batch of each split)"
EVAL_LIMIT = (
    "validation and test are limited in images, the same whatever the batch size: "
    "trainer.limit_eval_images=N, or a fraction of each split: trainer.limit_eval_fraction=0.2"
)
DEVICES = "the device is device=cpu, cuda, cuda:N, dp, ddp (under torchrun) or auto"

# Lightning-hydra-template's keys, options and renamed keys; `data` covers the unlisted `data.*`.
TEMPLATE_EQUIVALENTS = {
    "seed": "the seed is trainer.seed=N",
    "ckpt_path": (
        "a run goes on from its last checkpoint with resume=<run folder>; python eval.py "
        "ckpt=<checkpoint or run folder> evaluates one"
    ),
    "data": "the data is dataset=<option> (python train.py --help lists them)",
    "data.batch_size": "the batch size is trainer.batch_size=N",
    "trainer=gpu": "a GPU is device=cuda (device=cuda:N for another one)",
    "trainer=cpu": "the CPU is device=cpu",
    "trainer=ddp": "DDP is device=ddp under torchrun (torchrun --nproc-per-node=N train.py ...)",
    "trainer=mps": DEVICES,
    "device=gpu": "a GPU is device=cuda (device=cuda:N for another one)",
    "callbacks=default": (
        "a callback of one's own is +callbacks.<name>._target_=<module>.<class>; checkpoints and "
        "early stopping are trainer.checkpoint_every=N, trainer.monitor=<metric> and "
        "trainer.early_stopping.patience=N"
    ),
    "debug=default": QUICK_RUN,
    "debug=fdr": QUICK_RUN,
    "debug=limit": QUICK_RUN,
    "debug=profiler": "profiling is debug=profile (a short epoch) or trainer.profile=true",
    "tags": "a run is named by its folder: hydra.run.dir=outputs/<name> (hydra.sweep.dir= for -m)",
    "paths": "the run folder is hydra.run.dir=<folder>, a dataset's files dataset.root=<folder>",
    "extras": "python train.py --cfg job prints the config",
    "compile": "compiling is trainer.compile=<backend> (e.g. inductor)",
    "model.optimizer": "the optimizer is optimizer=<option>, its learning rate optimizer.lr=X",
    "model.scheduler": "the learning-rate schedule is scheduler=<option>",
    "model.net": "a network of your own is model=custom model._target_=<module>.<name>",
    "trainer.max_epochs": "the number of epochs is trainer.epochs=N",
    "trainer.accelerator": DEVICES,
    "trainer.devices": DEVICES,
    "trainer.strategy": DEVICES,
    "trainer.fast_dev_run": QUICK_RUN,
    "trainer.gradient_clip_val": "gradient clipping is trainer.gradient_clip=X",
    "trainer.accumulate_grad_batches": "gradient accumulation is trainer.accumulate_batches=N",
    "trainer.limit_val_batches": EVAL_LIMIT,
    "trainer.limit_test_batches": EVAL_LIMIT,
    "trainer.log_every_n_steps": "the steps between logged losses are trainer.log_interval=N",
    "trainer.default_root_dir": "the run folder is hydra.run.dir=<folder>",
    # Renamed keys, still typed by users of older configs.
    "task.metrics.top5_accuracy": (
        "a classifier leaves top-5 accuracy out with task.metrics='{accuracy: max}'"
    ),
    "trainer.limit_eval_batches": f"renamed: {EVAL_LIMIT}",
    "limit_batches": (
        "renamed: eval.py is limited in test images, the same whatever the batch size: "
        "limit_images=N, or a fraction of the split: limit_fraction=0.2 (by default, the images "
        "its run was tested on)"
    ),
}


def did_you_mean(given: str, valid: Iterable[str], prefix: str = "") -> str | None:
    """ "did you mean X or Y?", of the valid names closest to `given`; None where none is close."""
    close = difflib.get_close_matches(given, list(valid), n=3)
    return f"did you mean {' or '.join(prefix + name for name in close)}?" if close else None


def template_equivalent(key: str, value: str = "") -> str | None:
    """What does here what lightning-hydra-template's `key=value` does, or None."""
    parts = key.split(".")
    sections = [".".join(parts[:end]) for end in range(len(parts), 0, -1)]
    entries = [entry for entry in (f"{key}={value}", *sections) if entry in TEMPLATE_EQUIVALENTS]
    return TEMPLATE_EQUIVALENTS[entries[0]] if entries else None


def no_such_key(override: str, path: str, valid: Sequence[str], *, free_form: bool = False) -> str:
    """The line for `override`, which sets `path`, a key the config has not got, of keys `valid`."""
    section, _, key = path.rpartition(".")
    where = f"'{section}'" if section else "the config"
    said = f"{override}: {where} has no key '{key}'"
    typed, _, value = override.lstrip("+~").partition("=")
    if equivalent := template_equivalent(typed, value):
        return f"{said}; {equivalent}"
    meant = did_you_mean(key, valid, f"{section}." if section else "")
    if free_form:
        own = f"a key of your own is added with +: +{override.lstrip('+')}"
        return f"{said}; {meant} ({own})" if meant else f"{said}; {own}"
    # Only where nothing is close, every key: a section has up to two dozen.
    return f"{said}; {meant or 'its keys are ' + ', '.join(valid)}"
