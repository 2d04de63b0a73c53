"""Layer 2, config: schemas, the Hydra store, checks, overrides and building from config nodes.
Imports only `core`; no torch, so `--help` and `--cfg job` stay fast."""
