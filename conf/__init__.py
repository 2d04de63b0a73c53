"""The configs, as a package: found by Hydra as pkg://experiments.conf once installed."""
