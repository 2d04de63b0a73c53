"""Evaluate a trained model: overall and per-class test accuracy and loss, in its own run folder.

    python eval.py ckpt=outputs/2026-11-22/02-54-08_6b1f8616           # a run folder
    python eval.py ckpt=path/to/last.pt device=cuda:1 dataset=cifar10   # a checkpoint, elsewhere

The story of an evaluation is `src/experiments/run/evaluate.py`; its config is `conf/eval.yaml`.
"""

from experiments.cli import evaluate_main

if __name__ == "__main__":
    evaluate_main()
