"""The story of one training run, as a recipe in three parts: `setup` decides the device and
builds the data, model, optimizer and schedule (or takes them back from a checkpoint); `fit`
trains epoch by epoch, evaluating, selecting on the validation split, checkpointing and stopping
early if asked; `finish` records the outcome.

`experiments.cli` calls `train` with the config Hydra composed and the run folder it made.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from functools import partial
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf
from torch import nn
from torch.optim.lr_scheduler import LRScheduler

from experiments.config.build import plain, recorded
from experiments.config.choices import AUTO_BATCH, Interval
from experiments.config.metric_names import TEST, TRAIN_IMAGES_PER_SECOND, VAL, Metric
from experiments.config.validate import refuse_unchosen_groups, validate
from experiments.core import interrupts
from experiments.core.errors import ExperimentError
from experiments.data import fingerprint, subset
from experiments.data.augment import Augment
from experiments.data.batches import Batches
from experiments.data.types import ImageData, Split, Streamed
from experiments.devices import host_load, memory, peak, precision, process_settings, wrapping
from experiments.devices.description import device_record
from experiments.devices.distributed import gathered, summed, teardown, wait_for_all
from experiments.devices.energy import COVERS, EnergyMeter, Span
from experiments.devices.free_gpus import FreeGpus
from experiments.devices.peak_cache import PeakCache
from experiments.devices.placement import audit
from experiments.devices.process_group import ProcessGroup
from experiments.devices.runtime import Runtime
from experiments.devices.timing import wait_for
from experiments.devices.wrapping import unwrap
from experiments.records import (
    checkpoints,
    environment,
    hparams,
    own_folder,
    resume,
    running,
    speed,
    tracker,
)
from experiments.records.energy import energy_summary
from experiments.records.log_file import HeldLog
from experiments.records.metrics import RunRecorder
from experiments.records.recorded import EpochRecord, SetupRecord, finish_record
from experiments.records.results import (
    Results,
    training_fields,
    training_summary,
)
from experiments.records.resume import TrainingState
from experiments.records.tracker import TrackedRun, Tracker
from experiments.run import console, job, setup
from experiments.training import (
    batch_search,
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
from experiments.training.ema import ModelAverage
from experiments.training.history import History
from experiments.training.selection import Monitor
from experiments.training.tasks import Classification, Task
from experiments.training.time_to_accuracy import TimeToAccuracy
from experiments.training.weights import load_weights

log = logging.getLogger("experiments")

# The folders a run writes in, inside its own: Hydra's snapshot, checkpoints, a profile's trace
# (wandb/: tracker=wandb's files).
WRITTEN_FOLDERS = (Path(".hydra"), checkpoints.LAST.parent, profiling.TRACE.parent, Path("wandb"))


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
        resumed = resume.checkpoint_to_resume(cfg)
        fields = training_fields(recorded(cfg), group, resumed)
        # The process group, if any, is left last, after the records are written.
        with (
            teardown(),
            Results(run_dir, fields, group, held=held) as results,
            RunRecorder(run_dir, group.is_main, _trackers(cfg, run_dir, group)) as recorder,
        ):
            refuse_unchosen_groups(cfg)  # (~trainer) before the trainer's settings are read
            with memory.out_of_memory_said(
                "trainer.batch_size",
                cfg.trainer.batch_size,
                cfg.trainer.accumulate_batches,
                group.world_size,
            ):
                run = TrainingRun(cfg, run_dir, results, recorder)
                with results.phase():  # what setup learns, in one write of results.json
                    run.setup(group, free_gpus, resumed)
                run.fit()
                summary = run.finish()
                plan, measures, unit = run.runtime.plan, run.task.metrics, run.data.unit
                del run  # its DDP model holds the process group, which teardown() then ends
        console.log_summary(summary, plan, run_dir, measures, unit)
    return summary[cfg.optimized_metric] if cfg.optimized_metric else None


def _trackers(cfg: DictConfig, run_dir: Path, group: ProcessGroup) -> dict[str, Tracker]:
    """The `tracker` group's trackers, of the main process only."""
    return tracker.trackers(cfg.tracker, run_dir) if group.is_main else {}


class TrainingRun:
    def __init__(
        self, cfg: DictConfig, run_dir: Path, results: Results, recorder: RunRecorder
    ) -> None:
        # As composed, until setup has merged in what the data told of itself.
        self.cfg = cfg
        self.run_dir = run_dir
        self.results = results
        self.recorder = recorder
        # Set up by `setup`, in its order: the device, the data, the model, the optimization.
        self.runtime: Runtime
        self.data: ImageData
        self.task: Task  # what the model learns: its loss and metrics
        self.monitor: Monitor | None  # what selects epochs, with a validation split
        self.model_size: model_size.ModelSize
        self.peaks = PeakCache()  # this machine's measured peaks
        self.peak: peak.Peak  # of each device computed on, on average, that its MFU divides by
        self.peak_devices: int
        self.peak_keys: list[str]  # what the cache keeps them by
        self.energy_meter: EnergyMeter  # the counters of the energy its devices use
        self.energy_unavailable: str | None = None  # why the last epoch measured none
        self.train_batches: Batches
        self.test_batches: Batches
        self.val_batches: Batches | None
        self.steps_per_epoch: int
        self.scheduler: LRScheduler
        self.learner: loop.Learner
        self.state: TrainingState  # what its checkpoints save
        self.batch_search: Mapping[str, Any] | None = None  # its batch's (batch_size=auto)
        self.target: tuple[Metric, float] | None  # what time to accuracy is measured to
        # What training has done.
        self.history: History = []  # a row per epoch trained
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
        composed = self.cfg  # a resumed run's config snapshot is this one
        self._check_config(group)
        self._set_up_device(group, free_gpus, resumed is None)
        self._set_up_data()
        model = self._set_up_model(resumed is None)
        self._decide_batch_size(model, resumed)
        self._set_up_optimization(model)
        self._begin_tracking()
        audit(model, self.learner.task, next(iter(self.test_batches)), self.runtime.plan)
        if resumed is not None:
            self._restore(resumed, composed)
        console.log_start(
            self.cfg,
            self.data.shape,
            self.data.unit,
            self.model_size,
            self.train_batches,
            self.test_batches,
            self.val_batches,
            self.runtime,
        )

    def _check_config(self, group: ProcessGroup) -> None:
        """What can be refused before anything is built."""
        cfg = self.cfg
        built = job.refuse_targets_not_typed(cfg)
        if cfg.replay:
            job.say_what_a_replay_builds(cfg.replay, built)
        validate(cfg, group.world_size, setup.compile_backends)

    def _set_up_device(self, group: ProcessGroup, free_gpus: FreeGpus | None, new: bool) -> None:
        """The process's settings, and the device decided once (`self.runtime`); the environment
        recorded for a `new` run (a resume's, once it is accepted)."""
        cfg, trainer, results = self.cfg, self.cfg.trainer, self.results
        self.runtime = runtime = setup.prepare_runtime(
            cfg.device,
            cfg.placement,
            group,
            free_gpus,
            settings=setup.ProcessSettings(
                trainer.threads, trainer.deterministic, trainer.cudnn_benchmark
            ),
            precision_name=trainer.precision,
            channels_last=trainer.channels_last,
        )
        results.add(SetupRecord, deterministic=torch.are_deterministic_algorithms_enabled())
        if group.is_main and new:
            environment.write(self.run_dir)
        if trainer.keep_freed_memory:
            results.add(SetupRecord, keep_freed_memory=memory.keep_freed_memory())
        results.add(SetupRecord, device=device_record(cfg.device, runtime.plan))
        if trainer.deterministic and runtime.type == "cuda":
            process_settings.refuse_nondeterministic_cublas()
        if note := precision.emulated_bf16(trainer.precision, runtime.plan):
            log.warning(note)
            results.add(SetupRecord, precision_note=note)
        results.add(SetupRecord, channels_last=runtime.channels_last)
        setup.check_compiling("trainer.", trainer, cfg.device, runtime)
        if trainer.compile_mode is not None:
            results.add(SetupRecord, compile_mode=trainer.compile_mode)

    def _set_up_data(self) -> None:
        """The splits, and the config with what they told of themselves (`self.cfg`)."""
        self.data = data = setup.load_data(self.cfg.dataset, self.runtime)
        self.cfg = setup.with_data_facts(self.cfg, data)
        job.refuse_targets_not_typed(self.cfg)  # (an interpolation may read the data's fields)
        self.results.add(SetupRecord, data=data.recorded())
        # What the model learns: the task, for data of its kind (built once the data has told
        # its statistics: a regression's target's).
        self.task = setup.build_task(self.cfg.task, data)
        # Epochs are selected (and runs stopped early) on the validation split, never on test.
        selection.require_validation(self.cfg, has_validation=data.val is not None)
        self.monitor = Monitor.of(self.cfg) if data.val is not None else None

    def _set_up_model(self, new: bool) -> nn.Module:
        """The model as built (the same weights on every device and placement), `model.weights`
        loaded into a `new` run's (a resume takes its own back), measured, and on the device."""
        cfg, data, trainer = self.cfg, self.data, self.cfg.trainer
        seeding.seed_everything(trainer.seed)
        model = setup.build_model(
            cfg.model, cfg.task.name, self.task, data, from_checkpoint=not new
        )
        if cfg.model.get("weights") and new:
            weights_partial = bool(cfg.model.get("weights_partial"))
            left = load_weights(model, cfg.model.weights, weights_partial)
            if weights_partial:  # (without it, every tensor was loaded)
                self.results.add(SetupRecord, weights_left_as_built=left)
                if left:
                    log.info(
                        "model.weights=%s loaded but for %d tensor(s), left as built: %s",
                        cfg.model.weights,
                        len(left),
                        ", ".join(left),
                    )
        self.model_size = model_size.measure(model, data.shape, models.HOST)
        self.results.add(SetupRecord, **self.model_size.record())
        self._set_up_peak()
        self.energy_meter = self._energy_meter()
        placed = setup.place_model(
            model, self.runtime, trainer.compile, trainer.sync_batchnorm, trainer.compile_mode
        )
        if note := wrapping.sync_batchnorm_waits(placed):
            log.info(note)
        return placed

    def _decide_batch_size(self, model: nn.Module, resumed: dict[str, Any] | None) -> None:
        """With trainer.batch_size=auto, the batch the run trains with in the config
        (`self.cfg`): the largest that trains on the device, halved as asked, searched for with
        copies of the model and optimizer; a resumed run's, as its search found it (the run was
        refused unless a search chose its batch)."""
        cfg, trainer, runtime = self.cfg, self.cfg.trainer, self.runtime
        if trainer.batch_size != AUTO_BATCH:
            return
        if resumed is not None:
            search = resumed[checkpoints.BATCH_SEARCH]
            batch = search["trained"]
            log.info("trainer.batch_size=auto: %d, as its search found before the resume", batch)
        else:
            assert self.data.train is not None
            trial = batch_search.Trial(
                unwrap(model),
                runtime.placement.module(self.task),
                cfg.optimizer,
                self.data,
                runtime,
                trainer.memory_budget_gb,
            )
            fewest = loop.fewest_images(model, processes=1)
            found = batch_search.search(trial, fewest, trainer.auto_batch_halvings)
            log.info(batch_search.said(found, cfg.optimizer.lr, str(runtime.plan)))
            search, batch = found.record(), found.batch
        self.batch_search = search
        self.results.add(SetupRecord, batch_search=search)
        self.cfg = OmegaConf.merge(cfg, {"trainer": {"batch_size": batch}})
        self.results.add(SetupRecord, batch_size=batch, per_process_batch_size=batch)

    def _energy_meter(self) -> EnergyMeter:
        """The energy counters of the devices this process computes on: its GPUs', else the CPU
        packages', which one process of each machine reads (every process there shares them)."""
        runtime = self.runtime
        if runtime.type == "cpu" and runtime.group.local_rank != 0:
            return EnergyMeter("rapl", [], "read by process 0 of this machine")
        meter = EnergyMeter.for_devices(runtime.plan.computes_on)
        if meter.unavailable is None:  # (else results.json's energy_note says why not)
            log.info("energy: %s", meter.text())
        return meter

    def _epoch_energy(self, span: Span) -> dict[str, float] | None:
        """The joules of each counter of every process over an epoch's training (None: no
        process could read one); the meter's or the span's reason kept for the run's end."""
        self.energy_unavailable = span.unavailable
        mine = {each.name: each.joules for each in span.energy.counters} if span.energy else None
        every: dict[str, float] = {}
        for rank, joules in enumerate(gathered(mine, self.runtime.group)):
            for name, counted in (joules or {}).items():
                every[f"{name} of process {rank}" if name in every else name] = counted
        return every or None

    def _set_up_peak(self) -> None:
        """The peak its MFU divides by: of each device the run computes on, in the precision its
        model computes in, as this machine's cache keeps it (measured where it has none, or
        afresh with trainer.measure_peak_flops); every GPU of every process, or the one CPU."""
        runtime, trainer = self.runtime, self.cfg.trainer
        devices, group = runtime.plan.computes_on, runtime.group
        found = [
            self.peaks.peak(
                device,
                runtime.autocast_dtype,
                self.model_size.convolutions_lead,
                fresh=trainer.measure_peak_flops,
            )
            for device in devices
        ]
        total = sum(each.peak.flops_per_second for each in found)
        count = len(devices)
        if runtime.type == "cuda" and group.world_size > 1:
            total = summed(torch.tensor([total], device=runtime.device), group).item()
            count *= group.world_size
        self.peak = peak.Peak(total / count, found[0].peak.precision)
        self.peak_devices = count
        self.peak_keys = [each.key for each in found]
        self.results.add(
            SetupRecord,
            device_peak_flops=self.peak.flops_per_second,
            device_peak_precision=self.peak.precision,
            peak_devices=count,
            device_peak_measured=any(each.measured for each in found),
        )
        if any(each.measured for each in found):
            # Its matrices (up to 768 MiB on a GPU) are not the run's peak memory.
            memory.reset_peak_memory(runtime.plan)

    def _utilization(self, images_per_second: float) -> peak.Utilization:
        """What training at `images_per_second` made of the devices' peak."""
        return peak.utilization(
            self.model_size.training_flops_per_image,
            images_per_second,
            self.peak,
            self.peak_devices,
            str(self.runtime.plan),
        )

    def _run_utilization(self, images_per_second: float) -> dict[str, Any]:
        """The run's MFU for results.json; where the run beat its peak, none and why, said, and
        the peak forgotten so that the next run measures it again."""
        utilization = self._utilization(images_per_second)
        if utilization.note is None:
            return {"mfu": utilization.mfu}
        log.warning(utilization.note)
        for key in self.peak_keys:
            self.peaks.forget(key)
        return {"mfu": None, "mfu_note": utilization.note}

    def _set_up_optimization(self, model: nn.Module) -> None:
        """The task (its loss), optimizer and schedule over the splits' batches: the `learner`,
        and the `state` its checkpoints save."""
        cfg, trainer, runtime = self.cfg, self.cfg.trainer, self.runtime
        task = runtime.placement.module(self.task)
        optimizer, fused = optimizers.build_optimizer(cfg.optimizer, model, runtime.type)
        cudnn_benchmark = trainer.cudnn_benchmark and runtime.type == "cuda"
        self.results.add(SetupRecord, optimizer_fused=fused, cudnn_benchmark=cudnn_benchmark)
        if note := optimizers.host_waits_at_every_step(optimizer, runtime.scaler, runtime.type):
            log.info(note)
        # The same shuffle (and augmentation) in every process; each takes its share of a batch.
        shuffle = torch.Generator().manual_seed(trainer.seed)
        self._set_up_batches(model, shuffle)
        self.scheduler, interval = schedules.for_run(
            cfg.scheduler,
            optimizer,
            epochs=trainer.epochs,
            steps_per_epoch=self.steps_per_epoch,
        )
        # What time to a target is measured to (trainer.target_*), if anything.
        self.target = time_to_accuracy.target(trainer, task.metrics)
        self.learner = loop.Learner(
            model,
            task,
            optimizer,
            self.scheduler if interval == Interval.step else None,
            trainer.gradient_clip,
            trainer.stop_on_divergence,
            trainer.accumulate_batches,
            cuda_graphs=setup.uses_cuda_graphs(trainer.compile, trainer.compile_mode),
            ema=self._moving_average(model),
        )
        self.state = TrainingState(
            model=unwrap(model),
            optimizer=optimizer,
            scheduler=self.scheduler,
            scaler=runtime.scaler,
            shuffle=shuffle,
            gpus=runtime.plan.gpus,
            config=plain(recorded(cfg)),
            data=fingerprint.of(self.data, cfg.dataset),  # what a resume must find again
            steps_per_epoch=self.steps_per_epoch,
            ema=self.learner.ema,
            batch_search=self.batch_search,
        )

    def _moving_average(self, model: nn.Module) -> ModelAverage | None:
        """The moving average of the model's weights that the run evaluates, selects and saves
        in its stead, with trainer.ema.decay (None: without); kept of the model inside its
        wrappers, whose tensors they share."""
        ema = self.cfg.trainer.ema
        self.results.add(SetupRecord, evaluated_weights="model" if ema.decay is None else "ema")
        if ema.decay is None:
            return None
        epochs = self.cfg.trainer.epochs
        steps = epochs * self.steps_per_epoch
        if ema.every > steps:
            raise ExperimentError(
                f"trainer.ema.every={ema.every} updates the average of the weights every "
                f"{ema.every} optimizer steps, and the run takes {steps} ({epochs} "
                f"epoch{'s' * (epochs != 1)} of {self.steps_per_epoch}): it would evaluate the "
                f"weights as built; use trainer.ema.every={steps} or fewer"
            )
        log.info(
            "validation and test evaluate the moving average of the model's weights "
            "(trainer.ema.decay=%s), not the model's own",
            ema.decay,
        )
        return ModelAverage(unwrap(model), ema.decay, ema.every, ema.warmup_steps)

    def _set_up_batches(self, model: nn.Module, shuffle: torch.Generator) -> None:
        """The splits cut into batches, the training split's shuffled (and augmented) by
        `shuffle`; the optimizer steps of an epoch they come to."""
        cfg, trainer = self.cfg, self.cfg.trainer
        augment = Augment(
            **cfg.dataset.augment, generator=shuffle, num_classes=cfg.dataset.num_classes
        )
        # Not a check of the config (`config.validate`): a task of one's own says what its
        # targets are only once it is built.
        takes_probabilities = isinstance(self.task, Classification)
        if refusal := augment.refusal(
            cfg.task.name, self.task.targets, takes_probabilities=takes_probabilities
        ):
            raise ExperimentError(refusal)
        data, world_size = self.data, self.runtime.group.world_size
        assert data.train is not None
        fewest = loop.fewest_images_per_batch(model, trainer.batch_size, world_size)
        loop.refuse_a_split_too_small(
            trainer.batch_size, len(data.train), fewest, world_size, data.unit
        )
        self.train_batches = self._batches(data.train, shuffle, augment, fewest)
        if note := loop.left_out_note(self.train_batches, world_size):
            log.info(note)
        self.test_batches = self._batches(data.test)
        self.val_batches = self._batches(data.val) if data.val is not None else None
        self.results.add(
            SetupRecord,
            test_images=self.test_batches.count_images(),
            test_split_images=len(data.test),
        )
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

    def fit(self) -> None:
        """Train the epochs left, each followed by evaluation, then its end: selection, early
        stopping, checkpoints and what is said of it."""
        if self.stopped_early:
            return
        first = len(self.history) + 1
        self._warn_of_threads_above_free_cores()
        for epoch in range(first, self.cfg.trainer.epochs + 1):
            interrupts.raise_if_lost()
            self.trained = True
            with self.results.phase():  # the epoch's record, written once at its end
                training, host, energy = self._train_epoch(epoch, first=epoch == first)
                if self.learner.step_scheduler is None:
                    self.scheduler.step()  # a schedule by epoch
                val = self._evaluate(self.val_batches) if self.val_batches else None
                test = self._evaluate(self.test_batches)
                stop = self._end_epoch(epoch, training, test, val, host, energy)
            if stop:
                break

    def _train_epoch(
        self, epoch: int, *, first: bool
    ) -> tuple[loop.TrainingResult, host_load.HostLoad | None, dict[str, float] | None]:
        """One epoch's training (the `first` this process trains profiled, with trainer.profile,
        its first step timed apart), the other work on the host meanwhile, and its energy."""
        trainer = self.cfg.trainer
        steps_before = (epoch - 1) * self.steps_per_epoch
        started = host_load.snapshot(self.host_root, self.host_cores)
        with self.energy_meter.measuring() as span, self._profiled(first) as after_step:
            training = loop.train_epoch(
                self.learner,
                self.train_batches,
                self.runtime,
                log_interval=trainer.log_interval,
                log_step=partial(self.recorder.step, epoch, steps_before),
                description=f"epoch {epoch}/{trainer.epochs}",
                after_step=after_step,
                warm_up_steps=self._warm_up_steps(first),
                unit=self.data.unit,
            )
            wait_for(self.runtime.device)  # the span ends with the epoch's work done
        host = self._host_load_since(started)
        if first:
            self.first_step = training.warm_up[0]
            if trainer.profile:  # the profiler was on from its start to this step's end
                profiled = {"epoch": epoch, "first": 1, "last": profiling.STEPS}
                self.results.add(EpochRecord, profiled_steps=profiled)
        return training, host, self._epoch_energy(span)

    def _end_epoch(
        self,
        epoch: int,
        training: loop.TrainingResult,
        test: loop.EvaluationResult,
        val: loop.EvaluationResult | None,
        host: host_load.HostLoad | None,
        energy: dict[str, float] | None,
    ) -> bool:
        """The epoch's row recorded, the epoch selected or not, its checkpoints saved and its
        line said; whether training stops early here."""
        trainer = self.cfg.trainer
        steps = epoch * self.steps_per_epoch
        mfu = self._utilization(training.images_per_second).mfu
        classes = self.data.classes
        row = self.recorder.epoch(epoch, steps, training, test, val, classes, host, mfu, energy)
        self.history.append(row)
        selected = self.monitor is None or self.monitor.selected(self.history) is row
        if selected and test.confusion is not None:
            self.selected_confusion = test.confusion
        stop = (
            selection.early_stop(self.history, self.monitor, trainer.early_stopping)
            if self.monitor
            else None
        )
        self.results.add(EpochRecord, epochs_completed=epoch)
        last = epoch == trainer.epochs or stop is not None
        self._save_checkpoints(epoch, last=last, best=self.monitor is not None and selected)
        console.log_epoch(
            epoch,
            trainer.epochs,
            training,
            test,
            val,
            self.learner.task.metrics,
            self.cfg.scheduler.name,
            host,
            self.data.unit,
        )
        if self.target is not None:
            reached = self._time_to_accuracy()
            if reached["epoch"] == epoch:
                log.info("epoch %d: %s", epoch, time_to_accuracy.text(reached))
        if stop:
            log.info("stopping early after epoch %d: %s", epoch, stop)
            self.results.add(EpochRecord, stopped_early={"epoch": epoch, "reason": stop})
        return stop is not None

    def finish(self) -> dict[str, Any]:
        """The outcome: the selected epoch's numbers in results.json, the HParams row and the
        confusion matrix in TensorBoard; once every process has got here."""
        cfg = self.cfg
        summary = training_summary(self.history, self.monitor, self.learner.task.metrics)
        summary["compile_seconds"] = (
            speed.compile_seconds(self.first_step, summary[TRAIN_IMAGES_PER_SECOND])
            if cfg.trainer.compile and self.first_step is not None
            else None
        )
        summary.update(self._run_utilization(summary[TRAIN_IMAGES_PER_SECOND]))
        meter = self.energy_meter
        summary.update(
            energy_summary(
                self.history, meter.source, COVERS[meter.source], self.energy_unavailable
            )
        )
        if self.target is not None:
            summary["time_to_accuracy"] = self._time_to_accuracy()
        last_step = self.history[-1]["global_step"]
        numbers = self._compared_by(summary)
        # A resume that trained nothing finishes a run killed at its end, maybe after these.
        written = (
            set() if self.trained or not self.runtime.group.is_main else self.recorder.end_records()
        )
        if "hparams" not in written:
            self.recorder.hyperparameters(
                hparams.hyperparameters(recorded(cfg), self.runtime.plan, job.overrides())
                # As numbers, to sort and filter by (whole numbers would be text there).
                | {name: float(count) for name, count in self.model_size.record().items()},
                numbers,
                last_step,
                hparams.swept_columns(job.swept_keys()),
            )
        # (A task without classes has none.)
        if (
            cfg.trainer.confusion_matrix
            and self.selected_confusion
            and "confusion_matrix" not in written
        ):
            title = (
                f"{cfg.model.name} on {cfg.dataset.name}: test, epoch {summary['selected_epoch']}"
            )
            self.recorder.confusion_matrix(
                self.selected_confusion, self.data.classes, title, last_step
            )
        peak_memory = memory.peak_memory_mb(self.runtime.plan)
        record = finish_record(self.learner.task.metrics)
        summary = self.results.finish("completed", None, record, **summary, **peak_memory)
        wait_for_all(self.runtime.group)
        return summary

    def _compared_by(self, summary: dict[str, Any]) -> dict[str, float | None]:
        """What TensorBoard's HParams tab compares finished runs by: the headline metric, the
        speed, and the time to accuracy, MFU and energy where the run has them."""
        measures = self.learner.task.metrics
        keys = (
            *(measures.headline.key(split) for split in (VAL, TEST)),
            measures.final_key(TEST),
            TRAIN_IMAGES_PER_SECOND,
        )
        numbers = {key: summary[key] for key in keys}
        if "time_to_accuracy" in summary:
            numbers["time_to_accuracy"] = summary["time_to_accuracy"]["seconds"]
        for key in ("mfu", "train_joules_per_image"):
            if summary[key] is not None:
                numbers[key] = summary[key]
        return numbers

    def _time_to_accuracy(self) -> TimeToAccuracy:
        split = TEST if self.val_batches is None else VAL
        trainer = self.cfg.trainer
        # Every epoch's training counts, the first's compilation with it.
        compiled = trainer.compile is not None
        assert self.target is not None
        metric, goal = self.target
        return time_to_accuracy.reached(self.history, goal, split, compiled, metric)

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
        """The run's threads (trainer.threads, or torch's default of one per core) above the
        cores other work left free while the run set up: its threads would take turns on them,
        and its speed read low."""
        typed = self.cfg.trainer.threads
        load = self._host_load_since(self.setup_started)
        if load is None:
            return
        threads = torch.get_num_threads() if typed is None else typed
        if warning := host_load.threads_above_free_cores(threads, load, typed is not None):
            log.warning(warning)

    def _profiled(self, first_epoch: bool) -> AbstractContextManager[Callable[[], None] | None]:
        """The profiler over the first epoch this process trains, with trainer.profile (of the
        main process's steps: the others' run alike)."""
        if first_epoch and self.cfg.trainer.profile and self.runtime.group.is_main:
            return profiling.profiled(self.run_dir, self.runtime.type)
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
        rows = None if training else subset.evaluated_rows(len(split), *limit_eval)
        if training and trainer.overfit_batches:
            # The same rows in the same order every epoch: no shuffle (augmentation still draws).
            count = min(len(split), trainer.overfit_batches * trainer.batch_size)
            rows, shuffle = subset.overfit_rows(len(split), count, trainer.seed), None
        return Batches(
            split,
            batch_size=trainer.batch_size,
            mean=self.data.mean,
            std=self.data.std,
            runtime=self.runtime,
            shuffle=shuffle,
            limit=trainer.limit_train_batches if training else None,
            subset=rows,
            augment=augment,
            fewest=fewest,
        )

    def _evaluate(self, batches: Batches) -> loop.EvaluationResult:
        """The weights the run is judged by on `batches`: the model's, or their moving average
        (trainer.ema), evaluated as it is kept: not compiled, nor spread over GPUs by
        DataParallel."""
        learner = self.learner
        if learner.ema is not None:
            return loop.evaluate(learner.ema.average, batches, self.runtime, learner.task)
        return loop.evaluate(
            learner.model, batches, self.runtime, learner.task, learner.cuda_graphs
        )

    def _begin_tracking(self) -> None:
        """Tell the trackers what the run is; a resume carries on the runs they began before in
        this folder (results.json, not yet written again, names them)."""
        cfg, sweep = self.cfg, job.sweep_folder()
        columns = hparams.hyperparameters(recorded(cfg), self.runtime.plan, [])
        run = TrackedRun(
            name=self.run_dir.name,
            group=sweep,
            parameters=tracker.flattened(plain(recorded(cfg))),
            tags={
                **{column: str(columns[column]) for column in tracker.TAGS},
                **({"sweep": sweep} if sweep else {}),
            },
        )
        found = running.recorded(self.run_dir) if cfg.resume else {}
        chosen = self.recorder.named_trackers
        ids = self.recorder.begin(run, tracker.resumed_ids(found, self.run_dir, chosen))
        if ids:
            self.results.add(
                SetupRecord, trackers=ids, **{tracker.TRACKED_IN: str(self.run_dir.resolve())}
            )

    def _restore(self, checkpoint: dict[str, Any], composed: DictConfig) -> None:
        """Continue from the checkpoint `resume=` named: every state as it was saved."""
        records = (self.results, self.recorder)
        resumed = resume.restore(
            checkpoint, self.cfg, composed, self.run_dir, self.state, records, self.monitor
        )
        self.history = resumed.history
        self.selected_confusion = resumed.selected_confusion
        self.stopped_early = resumed.stopped_early is not None

    def _save_checkpoints(self, epoch: int, *, last: bool, best: bool) -> None:
        """last.pt every trainer.checkpoint_every epochs and at the last; best.pt at a newly
        selected epoch."""
        due = epoch % self.cfg.trainer.checkpoint_every == 0 or last
        if self.runtime.group.is_main and (due or best):
            self.state.save(
                self.run_dir, epoch, self.history, self.selected_confusion, last=due, best=best
            )
