"""Layer 8, run: a training run and an evaluation. Imports every layer below; only `cli` it."""
