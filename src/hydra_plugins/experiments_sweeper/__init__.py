"""hydra/sweeper=resume's sweeper (conf/hydra/sweeper/resume.yaml), set by `-m resume=<sweep
folder>`: Hydra builds a sweeper only from a class of the hydra_plugins package, so the one in
experiments.cli.sweep_resume is named here too; experiments.cli registers it."""

from experiments.cli.sweep_resume import SweepResumer


class ResumingSweeper(SweepResumer):
    """experiments.cli.sweep_resume's, under the name Hydra accepts."""


__all__ = ["ResumingSweeper"]
