"""Layer 2, config: the choices (Enums), typed schemas, the Hydra store and its resolvers, the
checks of values, the command line's overrides, and building objects from config nodes. Imports
only `core`; no torch, so `--help` and `--cfg job` stay fast."""
