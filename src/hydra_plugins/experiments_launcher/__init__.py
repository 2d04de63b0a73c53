"""hydra/launcher=slurm's launcher (conf/hydra/launcher/slurm.yaml): Hydra builds a launcher only
from a class of the hydra_plugins package, so the one in experiments.cli.slurm_launcher is named
here too; experiments.cli registers it (Hydra's scan misses this module in an editable install).
"""

from importlib.util import find_spec

# Without submitit's launcher (the `sweeps` extra) there is nothing to offer, and
# hydra/launcher=slurm says what to install.
if find_spec("hydra_plugins.hydra_submitit_launcher") is not None:
    from experiments.cli.slurm_launcher import SizedSlurmLauncher

    class SlurmLauncher(SizedSlurmLauncher):
        """experiments.cli.slurm_launcher's, under the name Hydra accepts."""

    __all__ = ["SlurmLauncher"]
