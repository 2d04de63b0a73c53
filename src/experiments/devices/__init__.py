"""Layer 3, devices: the device a run computes on, and what depends on it. Imports core, config."""
