"""Layer 8, run: the story of one training run and of one evaluation, and the setup they share.
Imports every layer below; only `cli` imports it."""
