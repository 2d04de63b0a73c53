"""Layer 10, cli: the command lines of training and evaluation, every failure one line. May import
every layer below; nothing imports it."""

from experiments.cli.main import evaluate_main, main

__all__ = ["evaluate_main", "main"]
