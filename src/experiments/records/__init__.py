"""Layer 6, records: what a run leaves in its folder (checkpoints, results.json, metrics.jsonl and
TensorBoard, HParams, the confusion matrix, environment.json). Imports the layers below."""
