"""Hydra-configured PyTorch experiments: model x dataset x device x placement, a folder per run."""
