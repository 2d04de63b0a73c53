"""Layer 10, cli: the command lines, every failure one line. Nothing imports it."""

from experiments.cli.main import evaluate_main, main

__all__ = ["evaluate_main", "main"]
