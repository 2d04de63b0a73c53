"""The story of one training run, as a recipe in three parts: `setup` decides the device and
builds the data, model, optimizer and schedule (or takes them back from a checkpoint); `fit`
trains epoch by epoch, evaluating, selecting on the validation split, checkpointing and stopping
early if asked; `finish` records the outcome.

`experiments.cli` calls `train` with the config Hydra composed and the run folder it made.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from functools import partial
from pathlib import Path
from typing import Any

import torch
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from torch import nn

from experiments.config import trust
from experiments.config.build import plain
from experiments.config.choices import Interval
from experiments.config.naming import sweep_keys
from experiments.config.validate import refuse_unchosen_groups, validate
from experiments.core.errors import ExperimentError
from experiments.core.files import remove_leftovers
from experiments.core.text import display_path, part_of_split, shape_text
from experiments.data import fingerprint, subset
from experiments.data.batches import Augment, Batches
from experiments.data.types import Split, Streamed
from experiments.devices import host_load, memory, peak, precision, process_settings
from experiments.devices.description import device_record
from experiments.devices.device import Device
from experiments.devices.distributed import teardown, wait_for_all
from experiments.devices.free_gpus import FreeGpus
from experiments.devices.placement import audit
from experiments.devices.plan import DevicePlan
from experiments.devices.process_group import ProcessGroup
from experiments.devices.wrapping import unwrap
from experiments.records import (
    checkpoints,
    environment,
    hparams,
    own_folder,
    resume_checks,
    running,
    snapshot,
    speed,
)
from experiments.records.log_file import HeldLog
from experiments.records.metrics import Metrics
from experiments.records.results import (
    Results,
    per_class_text,
    training_fields,
    training_summary,
)
from experiments.run import setup
from experiments.training import (
    loop,
    model_size,
    models,
    optimizers,
    profiling,
    schedules,
    seeding,
    selection,
    time_to_accuracy,
)
from experiments.training.selection import Monitor, selected_epoch
from experiments.training.weights import load_weights

log = logging.getLogger("experiments")

# The folders a run writes in, inside its own: Hydra's snapshot, checkpoints, a profile's trace.
WRITTEN_FOLDERS = (Path(".hydra"), checkpoints.LAST.parent, profiling.TRACE.parent)

# The numbers of a finished run that TensorBoard's HParams tab compares runs by.
HPARAMS_METRICS = (
    "val_accuracy",
    "test_accuracy",
    "final_test_accuracy",
    "train_images_per_second",
)


def train(cfg: DictConfig, run_dir: Path, free_gpus: FreeGpus | None = None) -> float | None:
    """Train as `cfg` says, recording everything in `run_dir`; returns `cfg.optimized_metric`
    (what a hyperparameter search optimizes), if one is named.

    `free_gpus` hands out GPUs when sweep jobs run side by side. Under torchrun, every process
    runs this; process 0 writes the records.
    """
    group = ProcessGroup.from_env()
    held = HeldLog(run_dir) if cfg.resume else None  # until the resume is accepted
    # Hydra has made it; a caller of train() may not have. Never made again once the run is on.
    run_dir.mkdir(parents=True, exist_ok=True)
    own_folder.refuse_linked_folders(run_dir, WRITTEN_FOLDERS, cfg.resume)
    with running.sole_writer(run_dir, cfg.resume) if group.is_main else nullcontext():
        resumed = _to_resume(cfg)  # before the records are touched: a refused resume leaves them
        # The process group, if any, is left last, after the records are written.
        with (
            teardown(),
            Results(run_dir, training_fields(cfg, group, resumed), group, held=held) as results,
            Metrics(run_dir, writes=group.is_main) as metrics,
        ):
            refuse_unchosen_groups(cfg)  # (~trainer) before the trainer's settings are read
            with memory.out_of_memory_said(
                "trainer.batch_size",
                cfg.trainer.batch_size,
                cfg.trainer.accumulate_batches,
                group.world_size,
            ):
                run = TrainingRun(cfg, run_dir, results, metrics)
                with results.phase():  # what setup learns, in one write of results.json
                    run.setup(group, free_gpus, resumed)
                run.fit()
                summary = run.finish()
                plan = run.device.plan
                del run  # its DDP model holds the process group, which teardown() then ends
        _log_summary(summary, plan, run_dir)
    return summary[cfg.optimized_metric] if cfg.optimized_metric else None


class TrainingRun:
    def __init__(self, cfg: DictConfig, run_dir: Path, results: Results, metrics: Metrics) -> None:
        self.cfg = cfg
        self.run_dir = run_dir
        self.results = results
        self.metrics = metrics
        self.history: list[dict[str, Any]] = []  # a row per epoch trained
        self.selected_confusion: list[list[int]] = []  # the test split's, at the selected epoch
        self.stopped_early = False  # a resumed run, killed after it stopped early
        self.trained = False  # an epoch in this process (a resume may find none left)
        # The host's load is read on the cores this process may use, of the run's processes.
        self.host_cores = host_load.cores()
        self.host_root = host_load.run_root()
        self.setup_started = host_load.snapshot(self.host_root, self.host_cores)
        # This process's first step (images, seconds): compilation's, with trainer.compile.
        self.first_step: tuple[int, float] | None = None

    def setup(
        self, group: ProcessGroup, free_gpus: FreeGpus | None, resumed: dict[str, Any] | None
    ) -> None:
        """Everything the first step needs, on the device; a resumed run's state put back."""
        cfg, trainer, results = self.cfg, self.cfg.trainer, self.results
        # A resumed run's config snapshot, as composed (before the data fills in what it tells).
        composed = copy.deepcopy(cfg) if resumed is not None else None
        built = _refuse_targets_not_typed(cfg)
        if cfg.replay:
            _say_what_a_replay_builds(cfg.replay, built)
        validate(cfg, group.world_size)
        setup.refuse_unknown_backend(trainer.compile)
        process_settings.apply(
            cfg.device.visible,
            trainer.threads,
            trainer.deterministic,
            cudnn_benchmark=trainer.cudnn_benchmark,
        )
        results.add(deterministic=torch.are_deterministic_algorithms_enabled())
        if group.is_main and resumed is None:  # a resume's, once it is accepted
            environment.write(self.run_dir)
        if trainer.keep_freed_memory:
            results.add(keep_freed_memory=memory.keep_freed_memory())
        self.device = device = setup.prepare_device(
            cfg.device,
            cfg.placement,
            group,
            free_gpus,
            precision_name=trainer.precision,
            channels_last=trainer.channels_last,
        )
        results.add(device=device_record(cfg.device, device.plan))
        if note := precision.emulated_bf16(trainer.precision, device.plan):
            log.warning(note)
            results.add(precision_note=note)
        results.add(channels_last=device.channels_last)
        if trainer.measure_peak_flops:
            measured = peak.measure(device.torch_device, device.autocast_dtype)
            results.add(
                device_peak_flops=measured.flops_per_second,
                device_peak_precision=measured.precision,
            )
            # Its matrices (up to 768 MiB on a GPU) are not the run's peak memory.
            memory.reset_peak_memory(device.plan)
        self.data = data = setup.load_data(cfg.dataset, device)
        _refuse_targets_not_typed(cfg)  # (the data filled in fields)
        results.add(data={**data.record, **data.derived()})
        self.data_fingerprint = fingerprint.of(data, cfg.dataset)
        # Epochs are selected (and runs stopped early) on the validation split, never on test.
        selection.require_validation(cfg, has_validation=data.val is not None)
        self.monitor = Monitor.of(trainer) if data.val is not None else None

        seeding.seed_everything(trainer.seed)  # the same weights on every device and placement
        model = models.build_for(cfg.model, data.shape, len(data.classes), data.name)
        if cfg.model.get("weights") and resumed is None:  # a resume takes its own back
            weights_partial = bool(cfg.model.get("weights_partial"))
            left = load_weights(model, cfg.model.weights, weights_partial)
            if weights_partial:  # (without it, every tensor was loaded)
                results.add(weights_left_as_built=left)
                if left:
                    log.info(
                        "model.weights=%s loaded but for %d tensor(s), left as built: %s",
                        cfg.model.weights,
                        len(left),
                        ", ".join(left),
                    )
        self.model_size = model_size.measure(model, data.shape)
        results.add(**self.model_size.record())
        model = setup.place_model(model, device, trainer.compile, trainer.sync_batchnorm)
        loss_fn = device.placement.module(
            nn.CrossEntropyLoss(label_smoothing=trainer.label_smoothing)
        )
        optimizer, fused = optimizers.build_optimizer(
            cfg.optimizer, model.parameters(), device.type
        )
        cudnn_benchmark = trainer.cudnn_benchmark and device.type == "cuda"
        results.add(optimizer_fused=fused, cudnn_benchmark=cudnn_benchmark)
        # The same shuffle (and augmentation) in every process; each takes its share of a batch.
        self.shuffle = torch.Generator().manual_seed(trainer.seed)
        augment = Augment(**cfg.dataset.augment, generator=self.shuffle)
        assert data.train is not None
        fewest = loop.fewest_images_per_batch(model, trainer.batch_size, group.world_size)
        self.train_batches = self._batches(data.train, self.shuffle, augment, fewest)
        if note := loop.left_out_note(self.train_batches, group.world_size):
            log.info(note)
        self.test_batches = self._batches(data.test)
        self.val_batches = self._batches(data.val) if data.val is not None else None
        results.add(test_images=self.test_batches.count_images(), test_split_images=len(data.test))
        self.steps_per_epoch = loop.optimizer_steps(
            len(self.train_batches), trainer.accumulate_batches
        )
        if trainer.profile and self.steps_per_epoch < profiling.STEPS:
            raise ExperimentError(
                f"trainer.profile=true records optimizer steps {profiling.FIRST} to "
                f"{profiling.STEPS} of the first epoch, which has {self.steps_per_epoch}; "
                f"give it {profiling.STEPS} or more (trainer.limit_train_batches, "
                "trainer.accumulate_batches)"
            )
        self.scheduler, interval = schedules.for_run(
            cfg.scheduler,
            optimizer,
            epochs=trainer.epochs,
            steps_per_epoch=self.steps_per_epoch,
        )
        step_scheduler = self.scheduler if interval == Interval.step else None
        self.learner = loop.Learner(
            model,
            loss_fn,
            optimizer,
            step_scheduler,
            trainer.gradient_clip,
            trainer.stop_on_divergence,
            trainer.accumulate_batches,
        )
        audit(model, loss_fn, next(iter(self.test_batches)), device.plan)
        if resumed is not None and composed is not None:
            self._restore(resumed, composed)
        _log_start(
            cfg,
            data.shape,
            self.model_size,
            self.train_batches,
            self.test_batches,
            self.val_batches,
            device,
        )

    def fit(self) -> None:
        """Train the epochs left, each followed by evaluation, selection and checkpoints."""
        trainer = self.cfg.trainer
        if self.stopped_early:
            return
        first = len(self.history) + 1
        self._warn_of_threads_above_free_cores()
        for epoch in range(first, trainer.epochs + 1):
            self.trained = True
            steps_before = (epoch - 1) * self.steps_per_epoch
            started = host_load.snapshot(self.host_root, self.host_cores)
            with self._profiled(epoch == first) as after_step:
                training = loop.train_epoch(
                    self.learner,
                    self.train_batches,
                    self.device,
                    log_interval=trainer.log_interval,
                    log_step=partial(self.metrics.step, epoch, steps_before),
                    description=f"epoch {epoch}/{trainer.epochs}",
                    after_step=after_step,
                    warm_up_steps=self._warm_up_steps(epoch == first),
                )
            host = self._host_load_since(started)
            if epoch == first:
                self.first_step = training.warm_up[0]
                if trainer.profile:  # the profiler was on from its start to this step's end
                    profiled = {"epoch": epoch, "first": 1, "last": profiling.STEPS}
                    self.results.add(profiled_steps=profiled)
            if self.learner.step_scheduler is None:
                self.scheduler.step()  # a schedule by epoch
            val = self._evaluate(self.val_batches) if self.val_batches else None
            test = self._evaluate(self.test_batches)
            steps = steps_before + self.steps_per_epoch
            row = self.metrics.epoch(epoch, steps, training, test, val, self.data.classes, host)
            self.history.append(row)
            selected = self.monitor is None or self.monitor.selected(self.history) is row
            if selected:
                self.selected_confusion = test.confusion
            stop = (
                selection.early_stop(self.history, self.monitor, trainer.early_stopping)
                if self.monitor
                else None
            )
            self.results.add(epochs_completed=epoch)
            last = epoch == trainer.epochs or stop is not None
            self._save_checkpoints(epoch, last=last, best=self.monitor is not None and selected)
            _log_epoch(epoch, trainer.epochs, training, test, val, self.cfg.scheduler.name, host)
            if trainer.target_accuracy is not None:
                reached = self._time_to_accuracy()
                if reached["epoch"] == epoch:
                    log.info("epoch %d: %s", epoch, time_to_accuracy.text(reached))
            if stop:
                log.info("stopping early after epoch %d: %s", epoch, stop)
                self.results.add(stopped_early={"epoch": epoch, "reason": stop})
                break

    def finish(self) -> dict[str, Any]:
        """The outcome: the selected epoch's numbers in results.json, the HParams row and the
        confusion matrix in TensorBoard; once every process has got here."""
        cfg = self.cfg
        summary = training_summary(self.history, self.monitor)
        summary["compile_seconds"] = (
            speed.compile_seconds(self.first_step, summary["train_images_per_second"])
            if cfg.trainer.compile and self.first_step is not None
            else None
        )
        if cfg.trainer.target_accuracy is not None:
            summary["time_to_accuracy"] = self._time_to_accuracy()
        last_step = self.history[-1]["global_step"]
        numbers = {key: summary[key] for key in HPARAMS_METRICS}
        if "time_to_accuracy" in summary:
            numbers["time_to_accuracy"] = summary["time_to_accuracy"]["seconds"]
        # A resume that trained nothing finishes a run killed at its end, maybe after these.
        written = (
            set() if self.trained or not self.device.group.is_main else self.metrics.end_records()
        )
        if "hparams" not in written:
            self.metrics.hyperparameters(
                hparams.hyperparameters(cfg, str(self.device.plan), _overrides())
                # As numbers, to sort and filter by (whole numbers would be text there).
                | {name: float(count) for name, count in self.model_size.record().items()},
                numbers,
                last_step,
                hparams.swept_columns(_swept_keys()),
            )
        if cfg.trainer.confusion_matrix and "confusion_matrix" not in written:
            title = (
                f"{cfg.model.name} on {cfg.dataset.name}: test, epoch {summary['selected_epoch']}"
            )
            self.metrics.confusion_matrix(
                self.selected_confusion, self.data.classes, title, last_step
            )
        peak_memory = memory.peak_memory_mb(self.device.plan)
        summary = self.results.finish("completed", None, **summary, **peak_memory)
        wait_for_all(self.device.group)
        return summary

    def _time_to_accuracy(self) -> dict[str, Any]:
        split = "test" if self.val_batches is None else "val"
        trainer = self.cfg.trainer
        # Every epoch's training counts, the first's compilation with it.
        compiled = trainer.compile is not None
        return time_to_accuracy.reached(self.history, trainer.target_accuracy, split, compiled)

    def _warm_up_steps(self, first_epoch: bool) -> int:
        """The steps at the start of an epoch timed apart as warm-up (`records.speed`): of the
        first epoch this process trains, the first step, or those the profiler was on for."""
        if not first_epoch:
            return 0
        return profiling.STEPS if self.cfg.trainer.profile else 1

    def _host_load_since(self, started: host_load.Snapshot | None) -> host_load.HostLoad | None:
        """The other work on this process's cores since `started` (None: not known)."""
        now = host_load.snapshot(self.host_root, self.host_cores)
        if started is None or now is None:
            return None
        return host_load.between(started, now, len(self.host_cores), torch.get_num_threads())

    def _warn_of_threads_above_free_cores(self) -> None:
        """trainer.threads above the cores other work left free while the run set up: its
        threads would take turns on them, and its speed read low."""
        threads = self.cfg.trainer.threads
        load = self._host_load_since(self.setup_started)
        if threads is None or load is None:
            return
        if warning := host_load.threads_above_free_cores(threads, load):
            log.warning(warning)

    def _profiled(self, first_epoch: bool) -> AbstractContextManager[Callable[[], None] | None]:
        """The profiler over the first epoch this process trains, with trainer.profile (of the
        main process's steps: the others' run alike)."""
        if first_epoch and self.cfg.trainer.profile and self.device.group.is_main:
            return profiling.profiled(self.run_dir, self.device.type)
        return nullcontext()

    def _batches(
        self,
        split: Split | Streamed,
        shuffle: torch.Generator | None = None,
        augment: Augment | None = None,
        fewest: int = 1,
    ) -> Batches:
        trainer = self.cfg.trainer
        training = shuffle is not None
        # Training is limited in steps; evaluation in images, the same whatever the batch size.
        limit_eval = (trainer.limit_eval_images, trainer.limit_eval_fraction)
        evaluated = None if training else subset.evaluated_rows(len(split), *limit_eval)
        return Batches(
            split,
            batch_size=trainer.batch_size,
            mean=self.data.mean,
            std=self.data.std,
            device=self.device,
            shuffle=shuffle,
            limit=trainer.limit_train_batches if training else None,
            subset=evaluated,
            augment=augment,
            fewest=fewest,
        )

    def _evaluate(self, batches: Batches) -> loop.EvaluationResult:
        return loop.evaluate(self.learner.model, batches, self.device, len(self.data.classes))

    def _restore(self, resumed: dict[str, Any], composed: DictConfig) -> None:
        """Continue from the checkpoint `resume=` named: every state as it was saved."""
        learner, device, run = self.learner, self.device, self.cfg.resume
        resume_checks.refuse_other_data(resumed, run, self.data_fingerprint)
        resume_checks.refuse_other_steps(resumed, run, self.steps_per_epoch, self.cfg.trainer)
        resume_checks.refuse_other_batch_size(resumed, run, self.cfg.trainer.batch_size)
        checkpoints.restore(
            resumed,
            run,
            unwrap(learner.model),
            learner.optimizer,
            self.scheduler,
            device.scaler,
        )
        # Accepted: the run now has this config, this environment, and records again.
        self.results.accept()
        self.history = list(resumed["history"])
        self.selected_confusion = resumed.get("selected_confusion", [])
        if device.group.is_main:
            snapshot.save(composed, self.run_dir)
            environment.write(self.run_dir)
            self._repair(resumed)
        seeding.restore(resumed["rng"], self.shuffle, device.plan.gpus)
        self.metrics.resume_after(resumed["epoch"], self.steps_per_epoch, self.history)
        trainer = self.cfg.trainer
        stopping = trainer.early_stopping
        stop = selection.early_stop(self.history, self.monitor, stopping) if self.monitor else None
        if stop:
            self.stopped_early = True
            self.results.add(stopped_early={"epoch": resumed["epoch"], "reason": stop})
        # Killed after its last checkpoint, before its records' end.
        over = self.stopped_early or resumed["epoch"] == trainer.epochs
        log.info(
            "resuming %s after epoch %d%s",
            display_path(Path(self.cfg.resume)),
            resumed["epoch"],
            ": its training is over, what the run left unwritten follows" if over else "",
        )

    def _repair(self, resumed: dict[str, Any]) -> None:
        """Undo what a kill mid-write leaves: temporary files, and a best.pt behind last.pt
        (killed between the two, which older versions wrote in that order)."""
        left = remove_leftovers(self.run_dir, self.run_dir / checkpoints.LAST.parent)
        if left:
            log.info("removed %s, left by a write cut short", ", ".join(p.name for p in left))
        if self.monitor and selected_epoch(self.history, self.monitor)["epoch"] == resumed["epoch"]:
            checkpoints.save(self.run_dir / checkpoints.BEST, resumed)

    def _save_checkpoints(self, epoch: int, *, last: bool, best: bool) -> None:
        """last.pt every trainer.checkpoint_every epochs and at the last; best.pt at a newly
        selected epoch."""
        due = epoch % self.cfg.trainer.checkpoint_every == 0 or last
        if not self.device.group.is_main or not (due or best):
            return
        learner = self.learner
        checkpoint = checkpoints.state(
            model=unwrap(learner.model),
            optimizer=learner.optimizer,
            scheduler=self.scheduler,
            scaler=self.device.scaler,
            epoch=epoch,
            config=plain(self.cfg),
            history=self.history,
            rng=seeding.capture(self.shuffle, self.device.plan.gpus),
            selected_confusion=self.selected_confusion,
            data=self.data_fingerprint,
            steps_per_epoch=self.steps_per_epoch,
        )
        # best.pt first: a kill between the two never leaves last.pt ahead of it.
        if best:
            checkpoints.save(self.run_dir / checkpoints.BEST, checkpoint)
        if due:
            checkpoints.save(self.run_dir / checkpoints.LAST, checkpoint)


def _to_resume(cfg: DictConfig) -> dict[str, Any] | None:
    """The checkpoint `resume=` continues from, if the run can go on as configured now."""
    if not cfg.resume:
        return None
    running.refuse_if_running(cfg.resume)  # two processes never write one folder
    # Killed after its last checkpoint, a run has trained every epoch but not recorded the end.
    completed = running.recorded(Path(cfg.resume)).get("status") == "completed"
    resumed = checkpoints.to_resume(
        cfg.resume, cfg.trainer.epochs, cfg.scheduler.name, completed=completed
    )
    if completed:  # (one killed after stopping early is finished where it stopped)
        selection.refuse_stopped(resumed["history"], cfg.trainer, cfg.resume)
    return resumed


def _refuse_targets_not_typed(cfg: DictConfig) -> list[trust.Target]:
    """A resumed or replayed run's config comes from its folder's overrides, whose targets were
    checked as they were read (`overrides.with_saved_overrides`); what interpolations made of
    them is checked here, before anything is built and again once the data has filled in its
    fields (which an interpolation may read): each target is a shipped one in its place, or one
    this job's overrides name there. Returns the targets of such a config."""
    key = "resume" if cfg.resume else "replay" if cfg.replay else None
    if key is None:
        return []
    named = trust.typed_as(trust.targets_named(_overrides()))
    built = list(trust.targets_in(trust.resolved_so_far(cfg)))
    trust.refuse_untrusted(built, named, f"{key}={cfg[key]}: its config", trust.typed_again)
    return built


def _say_what_a_replay_builds(replayed: str, built: list[trust.Target]) -> None:
    others = [f"{found.target} ({found.key})" for found in built if not _ours(found.target)]
    log.info(
        "replay=%s runs that run's config, as running its script would; besides the project's "
        "own code it builds %s",
        replayed,
        ", ".join(others) or "nothing",
    )


def _ours(target: str) -> bool:
    return target.startswith("experiments.")


def _overrides() -> list[str]:
    """The command line's overrides of this job (in a sweep, with its swept values)."""
    if not HydraConfig.initialized():
        return []
    # As typed: an override's ${...} is resolved in the config, not here.
    return OmegaConf.to_container(HydraConfig.get().overrides.task, resolve=False)


def _swept_keys() -> set[str]:
    """The keys this job's sweep varies (its command line's or its sweeper's, as its
    `multirun.yaml` says); none outside a sweep."""
    if not HydraConfig.initialized() or HydraConfig.get().mode != RunMode.MULTIRUN:
        return set()
    multirun_yaml = Path(HydraConfig.get().sweep.dir) / "multirun.yaml"
    return sweep_keys(multirun_yaml) if multirun_yaml.is_file() else set()


def _log_start(
    cfg: DictConfig,
    shape: tuple[int, int, int],
    size: model_size.ModelSize,
    train_batches: Batches,
    test_batches: Batches,
    val_batches: Batches | None,
    device: Device,
) -> None:
    plan = device.plan
    shared = f" over {device.group.world_size} processes ({plan.backend})" if plan.backend else ""
    val = f"{val_batches.count_images()} val / " if val_batches else ""
    trainer = cfg.trainer
    accumulated = trainer.accumulate_batches
    step = accumulated * trainer.batch_size
    steps = f" ({accumulated} to a step of {step})" if accumulated > 1 else ""
    log.info(
        "training %s (%s) on %s (%d train / %s%d test images, %s) with %s placement, %s, "
        "batch %d%s%s",
        cfg.model.name,
        size,
        cfg.dataset.name,
        train_batches.count_images(),
        val,
        test_batches.count_images(),
        shape_text(shape),
        cfg.placement.name,
        cfg.optimizer.name,
        trainer.batch_size,
        steps,
        shared,
    )


def _log_epoch(
    epoch: int,
    epochs: int,
    training: loop.TrainingResult,
    test: loop.EvaluationResult,
    val: loop.EvaluationResult | None,
    scheduler: str,
    host: host_load.HostLoad | None,
) -> None:
    validation = f"val loss {val.loss:.4f}, val accuracy {100 * val.accuracy:.1f}%, " if val else ""
    lr = f"lr {training.lr:.3g}, " if scheduler != "none" else ""
    busy = f" ({host.text()})" if host is not None and host.busy else ""
    log.info(
        "epoch %d/%d: train loss %.4f, %stest loss %.4f, test accuracy %.1f%%, %s%s img/s%s, "
        "%.1f s",
        epoch,
        epochs,
        training.loss,
        validation,
        test.loss,
        100 * test.accuracy,
        lr,
        f"{training.images_per_second:,.0f}",
        busy,
        training.seconds + test.seconds + (val.seconds if val else 0.0),
    )


def _log_summary(summary: dict[str, Any], plan: DevicePlan, run_dir: Path) -> None:
    epoch = summary["selected_epoch"]
    log.info(
        "test accuracy per class (epoch %d): %s", epoch, per_class_text(summary["class_accuracy"])
    )
    part = part_of_split(summary["test_images"], summary["test_split_images"])
    test_accuracy = f"test accuracy {100 * summary['test_accuracy']:.1f}%" + (
        f" on {part} test images" if part else ""
    )
    if summary["val_accuracy"] is None:
        selected = f"{test_accuracy} at the final epoch (no validation split to select one)"
    else:
        selected = (
            f"epoch {epoch} selected by {summary['selected_by']}: val accuracy "
            f"{100 * summary['val_accuracy']:.1f}%, val loss {summary['val_loss']:.4f}, "
            f"{test_accuracy} (final epoch: {100 * summary['final_test_accuracy']:.1f}%)"
        )
    if "time_to_accuracy" in summary:
        selected += f", {time_to_accuracy.text(summary['time_to_accuracy'])}"
    # Before the final line, which names the run folder last.
    if summary["host_busy"]:
        log.warning(
            "host busy: other processes used %.0f%% of the cores this run could use while it "
            "trained, so its speed reads low; compare it only with runs on a quiet host",
            100 * summary["host_other_cpu_share"],
        )
    log.info(
        "completed: %s, %s img/s on %s, %d epoch(s) in %.1f s -> %s",
        selected,
        f"{summary['train_images_per_second']:,.0f}",
        plan,
        len(summary["epoch_seconds"]),
        summary["total_seconds"],
        display_path(run_dir),
    )
