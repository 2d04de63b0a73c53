"""Each shipped task's `Task.measured`, declared without torch, which the report never imports."""

from __future__ import annotations

from experiments.config.choices import Mode
from experiments.config.metric_names import ACCURACY, LOSS, Metric, TaskMetrics

TOP5_ACCURACY = Metric("top5_accuracy", Mode.max, percent=True)
RMSE, MAE, R2 = Metric("rmse", Mode.min), Metric("mae", Mode.min), Metric("r2", Mode.max)
MIOU = Metric("miou", Mode.max, percent=True)
PIXEL_ACCURACY = Metric("pixel_accuracy", Mode.max, percent=True)

CLASSIFICATION = TaskMetrics((ACCURACY, TOP5_ACCURACY, LOSS))
# What run folders from before top-5 accuracy measured: their resumes go on measuring that.
BEFORE_TOP5 = TaskMetrics((ACCURACY, LOSS))
REGRESSION = TaskMetrics((RMSE, MAE, R2, LOSS))
SEGMENTATION = TaskMetrics((MIOU, PIXEL_ACCURACY, LOSS), per_class="pixel accuracy")
SHIPPED = (CLASSIFICATION, REGRESSION, SEGMENTATION)  # in the order of `training.tasks.SHIPPED`
