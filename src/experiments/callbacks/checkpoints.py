"""last.pt every trainer.checkpoint_every epochs and at the last; best.pt at each one selected."""

from __future__ import annotations

from experiments.callbacks.base import Callback, EpochEnd, Fields, TrainingRun


class Checkpoints(Callback):
    def on_epoch_end(self, run: TrainingRun, end: EpochEnd) -> Fields:
        due = end.epoch % run.cfg.trainer.checkpoint_every == 0 or end.last
        best = run.monitor is not None and end.selected
        if run.is_main and (due or best):
            confusion = [list(row) for row in run.selected_confusion]
            run.state.save(
                run.run_dir, end.epoch, list(run.history), confusion, last=due, best=best
            )
        return None
