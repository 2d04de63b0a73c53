"""`python -m experiments ...` trains, as `python train.py ...` and `experiments-train ...` do."""

from experiments.cli import main

main()
